"""Shapes from a run: where every inference step leaves node outputs without a static shape and every input is
a static tensor, the loader asks a run of the model for those shapes and fills the graph's value types with them.

Running a model is the business of a stage above loading (onnxroof.ort), so the loader does not run anything
itself: its caller hands it a ``ShapeRun``, a function from a ``ShapeRequest`` (the model, its fixed inputs and
the tensors whose shapes are wanted) to each tensor's element type and shape. ``load_graph`` without one leaves
unknown shapes unknown, as inference left them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import NamedTuple

from onnx import ModelProto, TensorProto, ValueInfoProto

from onnxroof.ir import Tensor, dtype_size
from onnxroof.load.inputs import runtime_inputs
from onnxroof.load.read import RawGraph, ValueTypes


@dataclass(frozen=True)
class ShapeRequest:
    """What a run for shapes is given: the model as the loader was given it (a path, ``zoo:NAME`` or a proto,
    weights where they are), the input shapes and dims the loader fixed, the tensors whose shapes are wanted
    (with the element types inference found for them, where it found one) and the bytes of the model's weights,
    which a run holds in memory."""

    source: str | os.PathLike | ModelProto
    inputs: Mapping[str, tuple[int, ...]]
    dims: Mapping[str, int]
    tensors: tuple[str, ...]
    dtypes: Mapping[str, int]
    weight_bytes: float


# A run for shapes: each wanted tensor's (ONNX element type, shape), for those the run produced as tensors.
ShapeRun = Callable[[ShapeRequest], Mapping[str, tuple[int, tuple[int, ...]]]]


class ShapeRunFailed(Exception):
    """A run for shapes could not load or run the model; the message says why. The loader keeps the shapes
    inference found and says so in one warning."""


class RunShapes(NamedTuple):
    """The value types after a run for shapes (the inferred ones, where nothing ran), the tensors whose shapes
    came from the run, and what the loader says about it."""

    types: ValueTypes
    from_run: tuple[str, ...]
    warnings: list[str]


def unknown_outputs(types: ValueTypes, raw: RawGraph) -> list[str]:
    """The node outputs of the top-level graph without a static shape in ``types``, in graph order. A Constant's
    output and an initializer's name have shapes of their own, which the assembled graph gives them."""
    weights = {init.name for init in raw.initializers}.union([s.name for s in raw.sparse])
    unknown = []
    for node in raw.nodes:
        for index, name in enumerate(node.outputs):
            if not name or name in weights or (index == 0 and node.constant_type is not None):
                continue
            t = types.get(name)
            if t is None or t.shape is None:
                unknown.append(name)
    return unknown


def dynamic_inputs(model: ModelProto, initializers: Collection[str]) -> list[str]:
    """The runtime inputs of ``model`` (its input shapes fixed) that are not tensors of a static shape: a run
    cannot make values for them."""
    return [vi.name for vi in runtime_inputs(model.graph, initializers) if not static_tensor(vi)]


def static_tensor(vi: ValueInfoProto) -> bool:
    """Whether a value is declared a tensor with every dim a number."""
    tensor = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not tensor.HasField("shape"):
        return False
    return all(d.HasField("dim_value") and d.dim_value >= 0 for d in tensor.shape.dim)


def weight_bytes(raw: RawGraph) -> float:
    """The bytes of the top-level graph's weights at their element types (a sparse weight at its dense size)."""
    return float(sum(prod(init.dims) * dtype_size(init.dtype) for init in (*raw.initializers, *raw.sparse)))


def fill_from_run(
    types: ValueTypes,
    raw: RawGraph,
    model: ModelProto,
    given: tuple[str | os.PathLike | ModelProto, Mapping[str, tuple[int, ...]], Mapping[str, int]],
    run: ShapeRun,
    initializers: Collection[str],
) -> RunShapes:
    """``types`` with the shapes of the node outputs inference left unknown taken from ``run``, where there are
    such outputs and every runtime input of ``model`` (the loader's copy, inputs fixed) is a static tensor.
    ``given`` is what the loader was given: the model, the input shapes and the dims. A run that fails leaves
    ``types`` as they are, with one warning naming the reason; a UserError from the run (weights that do not
    fit in memory) goes to the caller."""
    unknown = unknown_outputs(types, raw)
    if not unknown:
        return RunShapes(types, (), [])
    dynamic = dynamic_inputs(model, initializers)
    if dynamic:
        named = ", ".join(repr(name) for name in dynamic)
        return RunShapes(
            types,
            (),
            [
                f"{len(unknown)} node output(s) without a shape: no onnxruntime run fills them, since input(s) "
                f"{named} are not tensors of a static shape (--input/--dim fix a tensor's shape)"
            ],
        )
    dtypes = {name: t.dtype for name in unknown if (t := types.get(name)) is not None and t.dtype}
    try:
        source, inputs, dims = given
        found = run(ShapeRequest(source, inputs, dims, tuple(unknown), dtypes, weight_bytes(raw)))
    except ShapeRunFailed as exc:
        return RunShapes(
            types, (), [f"onnxruntime could not run the model for the shapes inference left unknown ({exc})"]
        )
    filled = dict(types)
    from_run = []
    for name in unknown:
        if name not in found:
            continue
        elem_type, shape = found[name]
        known = dtypes.get(name, TensorProto.UNDEFINED)
        filled[name] = Tensor(name, known or elem_type, tuple(shape), False)
        from_run.append(name)
    return RunShapes(filled, tuple(from_run), [summary(raw, from_run, len(unknown))])


def summary(raw: RawGraph, from_run: Sequence[str], unknown: int) -> str:
    """The one line that says how many nodes' shapes came from a run (and how many outputs it left unknown)."""
    produced = set(from_run)
    nodes = sum(1 for node in raw.nodes if not produced.isdisjoint(node.outputs))
    line = (
        f"shapes of {nodes} node(s) came from an onnxruntime run on random inputs, "
        "where shape inference could not infer them"
    )
    if len(from_run) < unknown:
        line += f"; {unknown - len(from_run)} node output(s) the run did not produce as tensors stay unknown"
    return line
