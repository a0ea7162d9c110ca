"""Input shapes: ``--input NAME=1x3x224x224`` and ``--dim NAME=8`` written into the model before inference, and
a UserError for every input dim left unresolved (analysis needs static shapes).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from onnxroof.errors import UserError
from onnxroof.load.unresolved import UnresolvedInputs, unresolved
from onnxroof.protos import GraphProto, ModelProto, ValueInfoProto


def parse_shape(text: str) -> tuple[int, ...]:
    """'1x3x224x224' -> (1, 3, 224, 224); '' -> (), a scalar."""
    if not text.strip():
        return ()
    try:
        dims = tuple(int(d) for d in re.split(r"[x,]", text.strip()))
    except ValueError:
        raise UserError(f"bad shape {text!r}", "write a shape as 1x3x224x224") from None
    if not dims or any(d <= 0 for d in dims):
        raise UserError(f"bad shape {text!r}: every dim must be a positive integer", "e.g. 1x3x224x224")
    return dims


def runtime_inputs(graph: GraphProto, initializers: Collection[str] | None = None) -> list[ValueInfoProto]:
    """The graph inputs that are not initializers; ``initializers`` are their names where already read."""
    if initializers is None:
        initializers = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    return [vi for vi in graph.input if vi.name not in initializers]


def fix_inputs(
    model: ModelProto,
    inputs: Mapping[str, tuple[int, ...]],
    dims: Mapping[str, int],
    initializers: Collection[str] | None = None,
) -> None:
    """Write --input shapes and --dim values into the (copied) model, then fail on anything left unresolved.
    ``initializers`` are the names of the graph's initializers where they were already read."""
    graph = model.graph
    runtime = {vi.name: vi for vi in runtime_inputs(graph, initializers)}
    for name, shape in inputs.items():
        if name not in runtime:
            raise UserError(f"the model has no input named {name!r}", "its inputs: " + ", ".join(runtime) or "none")
        tensor_shape = runtime[name].type.tensor_type.shape
        if tensor_shape.dim and len(tensor_shape.dim) != len(shape):
            raise UserError(
                f"--input {name} has {len(shape)} dims but the model declares {len(tensor_shape.dim)}",
                f"give all {len(tensor_shape.dim)} dims",
            )
        tensor_shape.SetInParent()  # a scalar's shape is present with no dims
        del tensor_shape.dim[:]
        for d in shape:
            tensor_shape.dim.add().dim_value = d
    if dims:
        used = set()
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param in dims:
                    used.add(d.dim_param)
                    d.dim_value = dims[d.dim_param]
        unknown = set(dims) - used
        if unknown:
            params = sorted(
                {d.dim_param for vi in runtime.values() for d in vi.type.tensor_type.shape.dim if d.dim_param}
            )
            raise UserError(
                f"--dim names no symbolic dim of this model: {', '.join(sorted(unknown))}",
                "its symbolic dims: " + (", ".join(params) or "none"),
            )
    problems = [problem for vi in runtime.values() if (problem := unresolved(vi)) is not None]
    if problems:
        raise UnresolvedInputs(problems)
