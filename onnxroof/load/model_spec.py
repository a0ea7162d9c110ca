"""A model spec: the model a command works on, as every step that loads or runs it is given it.

The source (a path, ``zoo:NAME`` or a proto), the input shapes and dims that fix its inputs (``--input``,
``--dim``) and the inputs' values (``--value``) travel together from the command line to the loader, to a run
for shapes, to the runnable copy that ``measure``, ``validate`` and the optimized graph start from. A spec holds
them as one frozen value, its shapes parsed once. It imports nothing heavy: the command line builds one before
onnx is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from onnxroof.load.values import Value
    from onnxroof.protos import ModelProto

# Where a model comes from: a file, ``zoo:NAME`` (a str) or a proto in memory.
Source: TypeAlias = "str | os.PathLike | ModelProto"


@dataclass(frozen=True)
class ModelSpec:
    """A model and what fixes its inputs: ``inputs`` (input name -> shape), ``dims`` (symbolic dim -> size) and
    ``values`` (input name -> its value: the text of ``--value``, numbers or an array). The mappings are the
    spec's own copies, so that a caller changing its dict afterwards leaves the spec as it was."""

    source: Source
    inputs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    values: Mapping[str, Value] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", {name: tuple(shape) for name, shape in self.inputs.items()})
        object.__setattr__(self, "dims", dict(self.dims))
        object.__setattr__(self, "values", dict(self.values))

    @classmethod
    def of(
        cls,
        source: Source,
        inputs: Mapping[str, tuple[int, ...] | str] | None = None,
        dims: Mapping[str, int] | None = None,
        values: Mapping[str, Value] | None = None,
    ) -> ModelSpec:
        """A spec from the loose forms a caller has: shapes as text (``'1x3x224x224'``, ``''`` for a scalar; a
        UserError for a bad one) or tuples, and None for what is not given."""
        from onnxroof.load.inputs import parse_shape

        shapes = {name: parse_shape(v) if isinstance(v, str) else tuple(v) for name, v in (inputs or {}).items()}
        return cls(source, shapes, dict(dims or {}), dict(values or {}))


def model_spec(model: ModelSpec | Source) -> ModelSpec:
    """``model`` as a spec: a bare source is the model as stored, nothing of its inputs fixed."""
    return model if isinstance(model, ModelSpec) else ModelSpec(model)
