"""Folding of shape arithmetic: the values of a graph's shape computations, evaluated where onnx's data
propagation does not follow them, given back to the model as constants for the next inference.

Exporters compute shapes, indices and masks from Shape outputs with ops onnx's data propagation does not follow
(Mod, Equal, Where, Range, Not, ...): past the first such op, every shape that depends on it stays unknown, and
a network of repeated blocks (a Swin's window partitions) repeats the break in every block. The folding step
walks the graph once in order and carries both values and shapes along: it evaluates each shape computation on
known values (evaluate.py), and infers alone, with onnx, each node whose output shapes are still unknown once
its inputs' shapes and values are known, so that the next block's Shape nodes have shapes to read. The values
it computed are then given to the model as initializers, and one more inference gives every node its shape.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from onnxroof.ir import DEFAULT_DOMAINS, Tensor
from onnxroof.load.evaluate import OPS, evaluate
from onnxroof.load.lean import typed_inputs
from onnxroof.load.read import RawGraph, ValueTypes, attr_value, value_types
from onnxroof.load.tensors import ONNX_DTYPE, from_array
from onnxroof.protos import AttributeProto, ModelProto, NodeProto, infer_shapes

# The most elements a value folding computes may hold: shape vectors, index tables and masks of small windows (a
# 49 x 49 relative-position table) fit; larger ones are not materialized, as engines keep a size limit on what
# constant folding writes out (their nodes still fold in the analysis: assemble.py folds by inputs, not values).
FOLD_LIMIT = 4096
FOLDED_SUFFIX = "::onnxroof-value"  # names the constants fold_shape_values gives a graph


def known_values(raw: RawGraph) -> dict[str, np.ndarray]:
    """The values of a graph's small initializers and Constant nodes, by tensor name."""
    values = {init.name: init.value for init in raw.initializers if init.value is not None}
    for node in raw.nodes:
        if node.op_type != "Constant" or node.domain not in DEFAULT_DOMAINS or not node.outputs:
            continue
        attrs = node.attrs
        if isinstance(attrs.get("value"), np.ndarray):
            values[node.outputs[0]] = attrs["value"]
        elif "value_int" in attrs or "value_ints" in attrs:
            values[node.outputs[0]] = np.array(attrs.get("value_int", attrs.get("value_ints")), dtype=np.int64)
    return values


def fold_shape_values(model: ModelProto, constants: Mapping[str, np.ndarray], types: ValueTypes, opset: int) -> int:
    """Evaluate a graph's shape arithmetic on what is known, and give the results to ``model`` (an inference copy,
    changed in place) as constants its nodes read; returns how many values were given.

    Known are the small constants (``constants``), the shapes of ``types`` (every input's and inferred value's)
    and what the walk finds: each Shape or Size of a tensor of known shape, each op of evaluate.OPS whose inputs
    are all known values (up to FOLD_LIMIT elements), and the output shapes of every other standard node whose
    input shapes are known, inferred for that node alone.
    """
    values: dict[str, np.ndarray] = dict(constants)
    known: dict[str, Tensor] = dict(types)
    computed: set[str] = set()
    for node in model.graph.node:
        if node.domain not in DEFAULT_DOMAINS or not node.output:
            continue
        value = _value(node, values, known, opset)
        if value is not None:
            name = node.output[0]
            values[name] = value
            computed.add(name)
            known[name] = Tensor(name, ONNX_DTYPE.get(value.dtype, 0), value.shape, False)
        elif _needs_shapes(node, known):
            known.update(_infer_alone(node, known, values, model))
    return _give(model, values, computed)


def shape_query_value(op_type: str, shape: Sequence[int], attrs: Mapping[str, Any]) -> np.ndarray:
    """The value of a Shape (its ``start``/``end`` slice; ONNX clamps them as slicing does) or a Size of a tensor of
    static ``shape``."""
    dims = np.array(shape, dtype=np.int64)
    if op_type == "Size":
        return np.array(dims.prod(), dtype=np.int64)
    return dims[int(attrs.get("start", 0)) : int(attrs.get("end", len(dims)))]


def _value(node: NodeProto, values: Mapping[str, np.ndarray], known: Mapping[str, Tensor], opset: int) -> Any:
    """A node's (first) output value where the walk can compute it, else None."""
    op_type = node.op_type
    if op_type in ("Shape", "Size"):
        tensor = known.get(node.input[0]) if node.input else None
        if tensor is None or tensor.shape is None:
            return None
        return shape_query_value(op_type, tensor.shape, {a.name: a.i for a in node.attribute})
    if op_type not in OPS or not all(name in values for name in node.input if name):
        return None
    inputs = [values[name] if name else None for name in node.input]
    attrs = {a.name: attr_value(a) for a in node.attribute}
    return evaluate(op_type, inputs, attrs, opset, FOLD_LIMIT)


def _needs_shapes(node: NodeProto, known: Mapping[str, Tensor]) -> bool:
    """Whether a node has an output without a static shape while every input it is given has one (and no
    subgraph, whose inference needs the scopes around it)."""
    if not any((t := known.get(name)) is None or t.shape is None for name in node.output if name):
        return False
    if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
        return False
    return all((t := known.get(name)) is not None and t.shape is not None for name in node.input if name)


def _infer_alone(
    node: NodeProto, known: Mapping[str, Tensor], values: Mapping[str, np.ndarray], model: ModelProto
) -> dict[str, Tensor]:
    """The output types onnx infers for ``node`` alone, its inputs typed as ``known`` has them and those with a
    known value given as initializers (data propagation reads them: a Reshape's target, a Pad's pads)."""
    alone = ModelProto(ir_version=model.ir_version)
    alone.opset_import.extend(model.opset_import)
    graph = alone.graph
    graph.node.append(node)
    typed = []
    for name in dict.fromkeys(name for name in node.input if name):
        value = values.get(name)
        if value is not None and value.dtype in ONNX_DTYPE:
            graph.initializer.append(from_array(value, name))
        if value is None or model.ir_version < 4:  # IR 3 reads an initializer only when it is a graph input too
            typed.append((name, known[name].dtype, known[name].need_shape()))
    graph.MergeFromString(typed_inputs(typed))
    try:
        inferred = ModelProto.FromString(infer_shapes(alone.SerializeToString(), True))
    except Exception:  # a node onnx cannot infer alone stays for the steps after this one
        return {}
    found = value_types(inferred.graph, 0)
    return {name: found[name] for name in node.output if name in found and found[name].shape is not None}


def _give(model: ModelProto, values: MutableMapping[str, np.ndarray], computed: set[str]) -> int:
    """Each computed value, given as an initializer (named with FOLDED_SUFFIX) to the nodes that read it, so that
    the next inference sees e.g. a Reshape or Expand target as a constant; returns how many were given."""
    given: dict[str, str] = {}
    graph = model.graph
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name not in computed or values[name].dtype not in ONNX_DTYPE:
                continue
            if name not in given:
                given[name] = name + FOLDED_SUFFIX
                tensor = from_array(values[name], given[name])
                graph.initializer.append(tensor)
                if model.ir_version < 4:  # IR 3 reads an initializer only when it is a graph input too
                    graph.MergeFromString(typed_inputs([(tensor.name, tensor.data_type, tuple(tensor.dims))]))
            node.input[i] = given[name]
    return len(given)
