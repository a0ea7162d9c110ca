"""Assembly: the analysis graph's tensors, small constant values and nodes, built once from a graph's value types
and its nodes and initializers as read.

Weights are initializers, Constant nodes, and every node computed only from weights; the Shape or Size of a
tensor whose shape is static is one too (its value is that shape). Such nodes are "folded", as an engine's
constant folding folds them (onnxruntime's folds a Shape of a static shape [ort-optimizer]): they run
once at load time and never cost compute, so shape arithmetic on static shapes (the Range, ConstantOfShape,
Equal and Where of a window partition's masks) costs nothing, however large its outputs.
"""

from __future__ import annotations

import functools
from collections import ChainMap
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from onnxroof.ir import DEFAULT_DOMAINS, Graph, Node, Tensor
from onnxroof.load.evaluate import evaluate
from onnxroof.load.fold import FOLD_LIMIT, shape_query_value
from onnxroof.load.read import RawGraph, ValueTypes, read_graph, value_types
from onnxroof.protos import AttributeProto, GraphProto, TensorProto

SHAPE_QUERIES = frozenset({"Shape", "Size"})  # ops whose output is a fact about their input's shape
# Nodes whose outputs change between runs even when every input is a weight: never folded.
NON_DETERMINISTIC = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}


class Assembled(NamedTuple):
    """One (sub)graph's part of a Graph: tensors, small constant values, nodes and runtime input names."""

    tensors: MutableMapping[str, Tensor]
    constants: MutableMapping[str, np.ndarray]
    nodes: list[Node]
    inputs: list[str]


def assemble(
    types: ValueTypes,
    raw: RawGraph,
    typed_graph: Callable[[], GraphProto],
    outer: MutableMapping[str, Tensor] | None = None,
    outer_constants: MutableMapping[str, np.ndarray] | None = None,
    opset: int = 0,
) -> Assembled:
    """A graph from its value types and its nodes and initializers as read. A top-level graph takes ``types``, a
    dict read for it alone, as its tensor table. ``typed_graph`` gives the GraphProto whose node at each index
    is the node ``raw`` read there, its subgraphs typed (If/Loop/Scan bodies, inferred with it); it is read only
    for those subgraphs. A subgraph sees the enclosing scopes' tensors and constants, ``outer`` and
    ``outer_constants``. With the default-domain ``opset``, a folded node's small value (a Shape of a static
    tensor and the arithmetic on it, up to FOLD_LIMIT elements) is a constant too: the cost functions that read
    an input's value (GroupQueryAttention's ``total_sequence_length``) see it."""
    # A subgraph sees the enclosing scopes' tensors through a chain, not a copy: nested Ifs stay linear.
    constants: MutableMapping[str, np.ndarray] = ChainMap({}, outer_constants) if outer_constants else {}
    tensors: MutableMapping[str, Tensor]
    if outer:
        tensors = ChainMap({}, outer)
        for name, t in types.items():
            if t.shape is not None or name not in tensors:  # a subgraph's untyped name keeps an outer scope's type
                tensors[name] = t
    else:
        tensors = types  # read for this graph alone: it is the graph's to keep
    for init in raw.initializers:
        tensors[init.name] = _new_tensor((init.name, init.dtype, init.dims, True))
        if init.value is not None:
            constants[init.name] = init.value
    for init in raw.sparse:
        tensors[init.name] = _new_tensor((init.name, init.dtype, init.dims, True))
    runtime_inputs = [name for name in raw.inputs if not _is_weight(tensors, name)]

    nodes: list[Node] = []
    for index, (name, op_type, domain, inputs, outputs, attrs, constant_type, has_subgraph) in enumerate(raw.nodes):
        subgraphs: Mapping[str, Graph] = _NO_SUBGRAPHS
        if has_subgraph:
            subgraphs = {
                a.name: _subgraph(a.g, tensors, constants)
                for a in typed_graph().node[index].attribute
                if a.type == AttributeProto.GRAPH
            }
        folded = op_type == "Constant" or (
            not subgraphs
            and op_type not in NON_DETERMINISTIC
            and (_all_weights(tensors, inputs) or _static_shape_query(op_type, domain, tensors, inputs))
        )
        if constant_type is not None and outputs:
            tensors[outputs[0]] = _new_tensor((outputs[0], constant_type[0], constant_type[1], True))
            if attrs["value"] is not None:
                constants[outputs[0]] = attrs["value"]
        if folded and outputs and outputs[0] not in constants and opset:
            value = _folded_value(op_type, inputs, attrs, tensors, constants, opset)
            if value is not None:
                constants[outputs[0]] = value
        if folded:
            for o in outputs:
                if o:
                    typed = tensors.get(o)
                    dtype = typed.dtype if typed else TensorProto.UNDEFINED
                    tensors[o] = Tensor(o, dtype, typed.shape if typed else None, True)
        nodes.append(Node(name, op_type, domain, inputs, outputs, attrs, folded, subgraphs))
    return Assembled(tensors, constants, nodes, runtime_inputs)


def graph_nodes(graph: GraphProto) -> list[Node]:
    """The nodes of a graph as the analysis names and folds them, read from the graph as it is (no inference)."""
    return assemble(value_types(graph), read_graph(graph), lambda: graph).nodes


def _subgraph(
    graph: GraphProto, outer: MutableMapping[str, Tensor], outer_constants: MutableMapping[str, np.ndarray]
) -> Graph:
    """A subgraph with the types it was given, seeing the enclosing scopes."""
    part = assemble(value_types(graph), read_graph(graph), lambda: graph, outer, outer_constants)
    return Graph(
        graph.name,
        tuple(part.nodes),
        part.tensors,
        part.constants,
        tuple(part.inputs),
        tuple(o.name for o in graph.output),
    )


# Tensor(...) without the extra Python frame of a named tuple's generated __new__: one is built per tensor.
_new_tensor = functools.partial(tuple.__new__, Tensor)
_NO_SUBGRAPHS: Mapping[str, Graph] = MappingProxyType({})  # shared by the nodes that have none


def _is_weight(tensors: Mapping[str, Tensor], name: str) -> bool:
    t = tensors.get(name)
    return t is not None and t.is_weight


def _folded_value(
    op_type: str,
    inputs: Sequence[str],
    attrs: Mapping[str, object],
    tensors: Mapping[str, Tensor],
    constants: Mapping[str, np.ndarray],
    opset: int,
) -> np.ndarray | None:
    """A folded node's first output value where it is small and computable from what is known: a Shape or Size
    of a static tensor, or an op the evaluator knows on known values; else None."""
    if op_type in SHAPE_QUERIES:
        shape = tensors[inputs[0]].shape
        return None if shape is None else shape_query_value(op_type, shape, attrs)
    if not all(name in constants for name in inputs if name):
        return None
    values = [constants[name] if name else None for name in inputs]
    return evaluate(op_type, values, attrs, opset, FOLD_LIMIT)


def _static_shape_query(op_type: str, domain: str, tensors: Mapping[str, Tensor], inputs: Sequence[str]) -> bool:
    """Whether a node is a Shape or Size of a tensor whose shape is static: its value is known at load time."""
    if op_type not in SHAPE_QUERIES or domain not in DEFAULT_DOMAINS or not inputs:
        return False
    t = tensors.get(inputs[0])
    return t is not None and t.shape is not None


def _all_weights(tensors: Mapping[str, Tensor], inputs: Sequence[str]) -> bool:
    """Whether a node has inputs and every one given is a weight (it stops at the first that is not)."""
    given = False
    for name in inputs:
        if name:
            t = tensors.get(name)
            if t is None or not t.is_weight:
                return False
            given = True
    return given
