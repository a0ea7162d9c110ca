"""Folding of shape arithmetic: the values of a graph's shape computations, evaluated where onnx's data
propagation does not follow them, given back to the model as constants for the next inference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from onnxroof.ir import DEFAULT_DOMAINS
from onnxroof.load.lean import typed_inputs
from onnxroof.load.read import SMALL_CONSTANT, RawGraph, ValueTypes
from onnxroof.load.tensors import from_array
from onnxroof.protos import ModelProto


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


# The ops exporters build shape computations from. onnx's data propagation follows only some of them (not Equal,
# Where, Mod, Not, ...); fold_shape_values evaluates any of them on known small values.
_SHAPE_ARITHMETIC = frozenset(
    {
        "Identity",
        "Cast",
        "Gather",
        "Concat",
        "Unsqueeze",
        "Squeeze",
        "Slice",
        "Reshape",
        "Expand",
        "Tile",
        "ConstantOfShape",
        "Range",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Mod",
        "Neg",
        "Abs",
        "Max",
        "Min",
        "Clip",
        "Floor",
        "Ceil",
        "Sqrt",
        "Equal",
        "Less",
        "Greater",
        "LessOrEqual",
        "GreaterOrEqual",
        "Not",
        "And",
        "Or",
        "Where",
        "ReduceProd",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
    }
)
FOLDED_SUFFIX = "::onnxroof-value"  # names the constants fold_shape_values gives a graph


def fold_shape_values(model: ModelProto, constants: Mapping[str, np.ndarray], types: ValueTypes, opset: int) -> int:
    """Evaluate a graph's shape arithmetic on what is known, and give the results to ``model`` (an inference copy,
    changed in place) as constants its nodes read; returns how many values were given.

    Known are the small constants and every Shape or Size of a tensor whose shape is known; a node of
    _SHAPE_ARITHMETIC whose inputs are all known small values is evaluated with onnx's reference implementation.
    Each value a node computed is then given as an initializer (named with FOLDED_SUFFIX) to the nodes that read
    it, so that a second inference sees e.g. a Reshape or Expand target as a constant, as data propagation would
    if it followed these ops.
    """
    from onnx.reference import ReferenceEvaluator

    values = dict(constants)
    computed: set[str] = set()
    for node in model.graph.node:
        if node.domain not in DEFAULT_DOMAINS or not node.output:
            continue
        value = None
        if node.op_type in ("Shape", "Size"):
            tensor = types.get(node.input[0])
            if tensor is None or tensor.shape is None:
                continue
            dims = np.array(tensor.shape, dtype=np.int64)
            if node.op_type == "Size":
                value = np.array(dims.prod(), dtype=np.int64)
            else:
                bounds = {a.name: a.i for a in node.attribute}
                value = dims[bounds.get("start", 0) : bounds.get("end", len(dims))]  # ONNX clamps as slicing does
        elif node.op_type in _SHAPE_ARITHMETIC and all(name in values for name in node.input if name):
            feeds = {name: values[name] for name in node.input if name}
            try:
                outputs: Any = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
                value = outputs[0]
            except Exception:  # an op the reference rejects here stays for the steps after this one
                continue
        if value is not None and np.size(value) <= SMALL_CONSTANT:
            values[node.output[0]] = np.asarray(value)
            computed.add(node.output[0])
    given: dict[str, str] = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name in computed:
                if name not in given:
                    given[name] = name + FOLDED_SUFFIX
                    tensor = from_array(values[name], given[name])
                    model.graph.initializer.append(tensor)
                    if model.ir_version < 4:  # IR 3 reads an initializer only when it is a graph input too
                        entry = (tensor.name, tensor.data_type, tuple(tensor.dims))
                        model.graph.MergeFromString(typed_inputs([entry]))
                node.input[i] = given[name]
    return len(given)
