"""Shapes from a run: where every inference step leaves node outputs without a static shape and every input is
a static tensor, the loader asks a run of the model for those shapes and fills the graph's value types with them
(the top-level graph's), and the value_info of the If branches (at any depth) with those found inside them. The
bodies of Loop and Scan are left as inference left them: a run cannot show one of their iterations.

Running a model is the business of a stage above loading (onnxroof.ort), so the loader does not run anything
itself: its caller hands it a ``ShapeRun``, a function from a ``ShapeRequest`` (the model, its fixed inputs and
the tensors whose shapes are wanted) to each tensor's element type and shape. ``load_graph`` without one leaves
unknown shapes unknown, as inference left them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from math import prod
from typing import NamedTuple

from onnxroof.ir import Tensor, dtype_size, op_domain
from onnxroof.load.inputs import runtime_inputs
from onnxroof.load.model_spec import ModelSpec
from onnxroof.load.read import RawGraph, Serialized, ValueTypes, shapeless_outputs, unknown_outputs, value_types
from onnxroof.protos import AttributeProto, GraphProto, ModelProto, ValueInfoProto


@dataclass(frozen=True)
class ShapeRequest:
    """What a run for shapes is given: the model as the loader was given it (its source, weights where they are;
    the input shapes and dims the loader fixed; the inputs' values as arrays, fed as they are), the tensors whose
    shapes are wanted (top-level node outputs and, inside If branches, theirs; with the element types inference
    found for them, where it found one) and the bytes of the model's weights, which a run holds in memory."""

    model: ModelSpec
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
    came from the run, what the loader says about it, and the inferred model whose If branches hold the shapes
    the run found inside them (None where the graph has no If node, and was not parsed)."""

    types: ValueTypes
    from_run: tuple[str, ...]
    warnings: list[str]
    typed: ModelProto | None = None


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


def any_read(names: list[str], raw: RawGraph, model: ModelProto) -> bool:
    """Whether a node or the graph's outputs read one of ``names``. An output nothing reads (Dropout's mask in
    inference) is costed without its shape: it alone is not worth a run, though a run gives it too."""
    if not names:
        return False
    read = {name for node in raw.nodes for name in node.inputs}.union([o.name for o in model.graph.output])
    return any(name in read for name in names)


def branch_unknowns(graph: GraphProto) -> list[tuple[GraphProto, list[str]]]:
    """Each branch of an If below ``graph`` (a typed graph; through nested Ifs, not into Loop or Scan bodies,
    which a run cannot show one iteration of) and its node outputs without a static shape."""
    found = []
    for node in graph.node:
        if node.op_type != "If" or op_domain(node.domain):
            continue
        for attr in node.attribute:
            if attr.type != AttributeProto.GRAPH:
                continue
            branch = attr.g
            nodes = ((inner.output, inner.op_type == "Constant") for inner in branch.node)
            found.append((branch, shapeless_outputs(value_types(branch), nodes, {i.name for i in branch.initializer})))
            found.extend(branch_unknowns(branch))
    return found


def fill_from_run(
    types: ValueTypes,
    raw: RawGraph,
    inferred: Serialized,
    model: ModelProto,
    given: ModelSpec,
    run: ShapeRun,
    initializers: Collection[str],
) -> RunShapes:
    """``types`` with the shapes of the node outputs inference left unknown taken from ``run``, where there are
    such outputs and every runtime input of ``model`` (the loader's copy, inputs fixed) is a static tensor. The
    If branches of the inferred model (``inferred``, taken from it where it has If nodes) get the shapes of their
    node outputs as value_info. ``given`` is the model as the loader was given it, its inputs' values as
    arrays. A run that fails leaves the shapes as they are, with one warning naming the reason; a
    UserError from the run (weights that do not fit in memory) goes to the caller."""
    unknown = unknown_outputs(types, raw)
    typed = inferred.take_model() if any(node.op_type == "If" for node in raw.nodes) else None
    branches = branch_unknowns(typed.graph) if typed is not None else []
    inner = [name for _, names in branches for name in names]
    if not inner and not any_read(unknown, raw, model):
        return RunShapes(types, (), [], typed)
    wanted = len(unknown) + len(inner)
    dynamic = dynamic_inputs(model, initializers)
    if dynamic:
        named = ", ".join(repr(name) for name in dynamic)
        return RunShapes(
            types,
            (),
            [
                f"{wanted} node output(s) without a shape: no onnxruntime run fills them, since input(s) "
                f"{named} are not tensors of a static shape (--input/--dim fix a tensor's shape)"
            ],
            typed,
        )
    dtypes = {name: t.dtype for name in unknown if (t := types.get(name)) is not None and t.dtype}
    for branch, names in branches:
        branch_types = value_types(branch)
        dtypes.update({name: t.dtype for name in names if (t := branch_types.get(name)) is not None and t.dtype})
    try:
        found = run(ShapeRequest(given, tuple(unknown + inner), dtypes, weight_bytes(raw)))
    except ShapeRunFailed as exc:
        return RunShapes(
            types, (), [f"onnxruntime could not run the model for the shapes inference left unknown ({exc})"], typed
        )
    filled = dict(types)
    from_run = []
    for name in unknown:
        if name in found:
            elem_type, shape = found[name]
            filled[name] = Tensor(name, dtypes.get(name) or elem_type, tuple(shape), False)
            from_run.append(name)
    ran = set(from_run)  # built once, so that the count is linear in the nodes
    nodes = sum(1 for node in raw.nodes if not ran.isdisjoint(node.outputs))
    for branch, names in branches:
        produced = [name for name in names if name in found]
        for name in produced:
            elem_type, shape = found[name]
            branch.value_info.append(_typed_value(name, dtypes.get(name) or elem_type, tuple(shape)))
        from_run += produced
        ran = set(produced)
        nodes += sum(1 for node in branch.node if not ran.isdisjoint(node.output))
    return RunShapes(filled, tuple(from_run), [summary(nodes, wanted - len(from_run))], typed)


def _typed_value(name: str, elem_type: int, shape: tuple[int, ...]) -> ValueInfoProto:
    """A ValueInfoProto typing ``name`` as a tensor of a static shape (a scalar's shape present and empty)."""
    vi = ValueInfoProto(name=name)
    tensor_type = vi.type.tensor_type
    tensor_type.elem_type = elem_type
    tensor_type.shape.SetInParent()
    for d in shape:
        tensor_type.shape.dim.add().dim_value = d
    return vi


def summary(nodes: int, missed: int) -> str:
    """The one line that says how many nodes' shapes came from a run (and how many outputs it did not give)."""
    line = (
        f"shapes of {nodes} node(s) came from an onnxruntime run on random inputs, "
        "where shape inference could not infer them"
    )
    if missed:
        line += f"; {missed} node output(s) the run did not reach (a branch not taken, a failed run) stay unknown"
    return line
