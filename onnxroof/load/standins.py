"""Inference through stand-ins: a model whose onnxruntime contrib ops (standin_rules.STANDINS) no shape
inference knows is inferred as a copy in which each such op is replaced by its standard-op stand-in, and the
shapes found are copied back onto the model's own tensors, so costs are still computed for the real ops.

:func:`standin_model` builds the copy (original output names kept, every helper tensor freshly named);
:func:`infer_through_standins` is the stand-in step of loading's inference (infer.py): onnx passes on
successive copies, then the copy that the steps after it infer, and how to map their result back.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping

from onnxroof.load.read import opset_of
from onnxroof.load.standin_context import StandinContext, domain_of
from onnxroof.load.standin_rules import STANDINS
from onnxroof.protos import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, TypeProto, infer_shapes

STANDIN_OP_TYPES = frozenset(op_type for _, op_type in STANDINS)  # for a quick "any candidates?" test
_MAX_PASSES = 8  # onnx-only inference passes; each one lets more rank-dependent stand-ins use a plain Transpose


# -------------------------------------------------------------------------------------------------------------
# Rewriting a model


def _type_entry(type_proto: TypeProto) -> tuple[int, int | None] | None:
    if not type_proto.HasField("tensor_type"):
        return None
    tt = type_proto.tensor_type
    return tt.elem_type, (len(tt.shape.dim) if tt.HasField("shape") else None)


def _known_types(graph: GraphProto, outer: dict[str, tuple[int, int | None]]) -> dict[str, tuple[int, int | None]]:
    """Element type and rank of every tensor of ``graph`` whose type is written down, over those of outer scopes."""
    known = dict(outer)
    for vi in itertools.chain(graph.input, graph.value_info, graph.output):
        entry = _type_entry(vi.type)
        if entry is not None and (entry[1] is not None or vi.name not in known):
            known[vi.name] = entry
    for init in graph.initializer:
        known[init.name] = (init.data_type, len(init.dims))
    for node in graph.node:
        if node.op_type == "Constant" and domain_of(node) == "" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    known[node.output[0]] = (a.t.data_type, len(a.t.dims))
                elif a.name in ("value_float", "value_int"):
                    known[node.output[0]] = (TensorProto.FLOAT if a.name == "value_float" else TensorProto.INT64, 0)
                elif a.name in ("value_floats", "value_ints"):
                    known[node.output[0]] = (TensorProto.FLOAT if a.name == "value_floats" else TensorProto.INT64, 1)
    return known


def _constant_dims(graph: GraphProto, outer: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Dims of the initializers and Constant outputs of ``graph``, over those of outer scopes."""
    dims = dict(outer)
    dims.update((init.name, tuple(init.dims)) for init in graph.initializer)
    for node in graph.node:
        if node.op_type == "Constant" and domain_of(node) == "" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                dims[node.output[0]] = tuple(value.dims)
    return dims


def _all_names(graph: GraphProto, into: set[str]) -> set[str]:
    """Every tensor and node name of a graph and its subgraphs."""
    into.update(vi.name for vi in itertools.chain(graph.input, graph.value_info, graph.output))
    into.update(t.name for t in graph.initializer)
    for node in graph.node:
        into.update(node.input)
        into.update(node.output)
        into.add(node.name)
        for sub in _subgraphs(node):
            _all_names(sub, into)
    return into


def _subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.g
        elif a.type == AttributeProto.GRAPHS:
            yield from a.graphs


def _applies(node: NodeProto, opset: int) -> bool:
    key = (domain_of(node), node.op_type)
    if key not in STANDINS:
        return False
    return not (key == ("", "LayerNormalization") and opset >= 17)


def needs_standins(model: ModelProto) -> bool:
    """Whether any node of the model (subgraphs included) is an op :data:`STANDINS` has a stand-in for."""
    opset = opset_of(model)

    def walk(graph: GraphProto) -> bool:
        # The op-type test first: it rejects almost every node of a large graph with one field read.
        return any(
            (n.op_type in STANDIN_OP_TYPES and _applies(n, opset))
            or (n.attribute and any(walk(sub) for sub in _subgraphs(n)))
            for n in graph.node
        )

    return walk(model.graph)


def _rewrite(
    graph: GraphProto,
    outer: dict[str, tuple[int, int | None]],
    outer_dims: dict[str, tuple[int, ...]],
    opset: int,
    taken: set[str],
    counter: Iterator[int],
) -> GraphProto:
    """A copy of ``graph`` (subgraphs included) with every op that has a stand-in replaced by it."""
    known = _known_types(graph, outer)
    constant_dims = _constant_dims(graph, outer_dims)
    consumers: dict[str, list[NodeProto]] = {}
    for node in graph.node:
        for name in set(node.input):
            consumers.setdefault(name, []).append(node)
    out = GraphProto()
    out.CopyFrom(graph)
    del out.node[:]
    for node in graph.node:
        builder = STANDINS.get((domain_of(node), node.op_type))
        if builder is not None:
            ctx = StandinContext(opset, known, constant_dims, consumers, taken, counter)
            try:
                done = builder(node, ctx)
            except (IndexError, ValueError, TypeError):  # a malformed node (missing input or attribute): keep it
                done = False
            if done:
                out.node.extend(ctx.nodes)
                continue
        copy = NodeProto()
        copy.CopyFrom(node)
        for a in copy.attribute:
            if a.type == AttributeProto.GRAPH:
                a.g.CopyFrom(_rewrite(a.g, known, constant_dims, opset, taken, counter))
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    g.CopyFrom(_rewrite(g, known, constant_dims, opset, taken, counter))
        out.node.append(copy)
    return out


def standin_model(model: ModelProto, weights: Mapping[str, tuple[int, ...]] | None = None) -> ModelProto:
    """A copy of ``model`` in which every op that :data:`STANDINS` covers is replaced by standard ops with the same
    output names, shapes and element types (for shape inference only: the values differ). The caller's model is
    never modified. Known input ranks (from the model's value_info) let layout stand-ins use plain Transposes.
    ``weights`` gives the dims of weights that are not initializers of the top-level graph."""
    opset = opset_of(model)
    names = _all_names(model.graph, set())
    graph = _rewrite(model.graph, {}, dict(weights or {}), opset, names, itertools.count())
    copy = ModelProto()
    copy.CopyFrom(model)
    copy.graph.CopyFrom(graph)
    return copy


# -------------------------------------------------------------------------------------------------------------
# Inferring through the stand-ins


def _quality(type_proto: TypeProto) -> int:
    """0: no shape, 1: a shape with some dims unknown or symbolic, 2: every dim a number."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return 0
    dims = type_proto.tensor_type.shape.dim
    return 2 if all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims) else 1


def copy_shapes(source: GraphProto, target: GraphProto) -> None:
    """Give the tensors of ``target`` (node outputs and graph outputs) the types ``source`` knows better, and do
    the same for the subgraphs of nodes that both graphs share (stand-ins never replace nodes with subgraphs)."""
    found = {vi.name: vi for vi in itertools.chain(source.value_info, source.output) if vi.type.HasField("tensor_type")}
    for out in target.output:
        better = found.get(out.name)
        if better is not None and _quality(better.type) > _quality(out.type):
            out.type.CopyFrom(better.type)
    declared = {vi.name for vi in itertools.chain(target.input, target.output)} | {t.name for t in target.initializer}
    existing = {vi.name: vi for vi in target.value_info}
    for name in (o for node in target.node for o in node.output):
        better = found.get(name)
        if not name or better is None or name in declared:
            continue
        current = existing.get(name)
        if current is None:
            added = target.value_info.add()
            added.CopyFrom(better)
            existing[name] = added
        elif _quality(better.type) > _quality(current.type):
            current.type.CopyFrom(better.type)
    by_output = {node.output[0]: node for node in source.node if node.output and node.output[0]}
    for node in target.node:
        twin = by_output.get(node.output[0]) if node.output else None
        if twin is None or twin.op_type != node.op_type:
            continue
        twin_subgraphs = {a.name: a for a in twin.attribute}
        for a in node.attribute:
            other = twin_subgraphs.get(a.name)
            if other is None:
                continue
            if a.type == AttributeProto.GRAPH:
                copy_shapes(other.g, a.g)
            elif a.type == AttributeProto.GRAPHS:
                for mine, theirs in zip(a.graphs, other.graphs):
                    copy_shapes(theirs, mine)


def infer_through_standins(
    model: bytes, weights: Mapping[str, tuple[int, ...]], unknown: Callable[[bytes], int]
) -> tuple[bytes, Callable[[bytes], bytes]]:
    """The stand-in step: ``model`` (serialized) as a stand-in copy whose tensors carry the shapes onnx's passes
    found, and the function that maps the result of inferring that copy further back onto ``model``'s own
    tensors (a serialized ``model``, nodes unchanged, its subgraphs' tensors typed too).

    ``weights`` are the dims of the graph's weights, initializers or not (loading gives large weights to
    inference as typed inputs; a stand-in reads a weight's dims); ``unknown`` counts the node outputs still
    without a static shape in a serialized model. onnx passes with data propagation repeat while they make
    progress: each pass knows more ranks, so stand-ins that had to reorder axes with a Reshape (which onnx
    propagates only from opset 14) become plain Transposes. The copy returned is built with everything they
    found.
    """
    result = ModelProto.FromString(model)
    count = unknown(model)
    for _ in range(_MAX_PASSES):
        standin = standin_model(result, weights)
        try:
            inferred = ModelProto.FromString(infer_shapes(standin.SerializeToString(), True))
        except Exception:  # the inference steps after this one say why
            break
        copy_shapes(inferred.graph, result.graph)
        now = unknown(result.SerializeToString())
        if now == 0 or now >= count:
            break
        count = now

    def map_back(inferred: bytes) -> bytes:
        copy_shapes(ModelProto.FromString(inferred).graph, result.graph)
        return result.SerializeToString()

    return standin_model(result, weights).SerializeToString(), map_back
