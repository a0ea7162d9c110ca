"""The values of shape arithmetic: the standard ops exporters compute shapes, indices and masks with, evaluated in
numpy on known values as the ONNX operator definitions [onnx-ops] specify them.

``evaluate`` gives a node's output, or None where the op is not one of ``OPS``, an input is not of the kind the
op takes, or the output would hold more than ``limit`` elements (checked before it is computed where the output's
size follows from the inputs: a ConstantOfShape, Expand, Tile, Range or broadcast). One evaluation costs a
few microseconds: a graph of thousands of such nodes folds in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from onnxroof.load.tensors import NUMPY_DTYPE

Value = np.ndarray
Inputs = Sequence["Value | None"]
_Op = Callable[[Inputs, Mapping[str, Any], int], "Value | None"]


def evaluate(op_type: str, inputs: Inputs, attrs: Mapping[str, Any], opset: int, limit: int) -> Value | None:
    """The output of standard op ``op_type`` (default-domain opset ``opset``) on ``inputs`` (None for an
    omitted optional input), or None; the output holds at most ``limit`` elements."""
    op = OPS.get(op_type)
    if op is None or (inputs and inputs[0] is None):
        return None
    if op_type in _ELEMENTWISE or op_type in _CREATORS:
        try:
            if math.prod(_output_shape(op_type, inputs, attrs)) > limit:
                return None
        except (KeyError, ValueError, TypeError, IndexError, OverflowError):
            return None
    try:
        with np.errstate(all="ignore"):
            value = op(inputs, attrs, opset)
    except (KeyError, ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError):
        return None
    if value is None or value.size > limit:
        return None
    return np.asarray(value)


def _output_shape(op_type: str, inputs: Inputs, attrs: Mapping[str, Any]) -> tuple[int, ...]:
    """The output shape of an elementwise op or a creator, from its inputs' shapes and values."""
    if op_type == "ConstantOfShape":
        return tuple(int(d) for d in _need(inputs, 0))
    if op_type == "Expand":
        return np.broadcast_shapes(_need(inputs, 0).shape, tuple(int(d) for d in _need(inputs, 1)))
    if op_type == "Tile":
        return tuple(d * int(r) for d, r in zip(_need(inputs, 0).shape, _need(inputs, 1), strict=True))
    if op_type == "Range":
        return (_range_length(*(_need(inputs, i).item() for i in range(3))),)
    return np.broadcast_shapes(*(x.shape for x in inputs if x is not None))


def _need(inputs: Inputs, i: int) -> Value:
    if i >= len(inputs) or inputs[i] is None:
        raise ValueError(f"input {i} missing")
    return inputs[i]  # type: ignore[return-value]


def _same_type(*values: Value) -> None:
    """ONNX gives the operands of these ops one type; numpy would promote mixed ones."""
    if len({v.dtype for v in values}) > 1:
        raise TypeError("operands of different types")


def _axes(inputs: Inputs, attrs: Mapping[str, Any], opset: int, from_opset: int, index: int = 1) -> list[int] | None:
    """The ``axes`` an op takes as an attribute before ``from_opset`` and as input ``index`` from it on."""
    if opset >= from_opset:
        value = inputs[index] if index < len(inputs) else None
        return None if value is None else [int(a) for a in value.reshape(-1)]
    axes = attrs.get("axes")
    return None if axes is None else [int(a) for a in axes]


# -------------------------------------------------------------------------------------------------------------
# Elementwise


def _binary(fn: Callable[[Value, Value], Value]) -> _Op:
    def op(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
        a, b = _need(inputs, 0), _need(inputs, 1)
        _same_type(a, b)
        return np.asarray(fn(a, b)).astype(a.dtype, copy=False)

    return op


def _compare(fn: Callable[[Value, Value], Value]) -> _Op:
    def op(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
        a, b = _need(inputs, 0), _need(inputs, 1)
        _same_type(a, b)
        return np.asarray(fn(a, b))

    return op


def _unary(fn: Callable[[Value], Value]) -> _Op:
    def op(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
        x = _need(inputs, 0)
        return np.asarray(fn(x)).astype(x.dtype, copy=False)

    return op


def _div(a: Value, b: Value) -> Value:
    """Integer division truncates toward zero (as C++ does), float division is exact division."""
    if a.dtype.kind in "iu":
        if np.any(b == 0):
            raise ZeroDivisionError
        quotient = np.floor_divide(a, b)
        return quotient + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
    return np.true_divide(a, b)


def _mod(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    """fmod=0: the remainder takes the divisor's sign (integers); fmod=1: the dividend's, as C's fmod."""
    a, b = _need(inputs, 0), _need(inputs, 1)
    _same_type(a, b)
    if a.dtype.kind in "iu" and np.any(b == 0):
        raise ZeroDivisionError
    return (np.fmod(a, b) if attrs.get("fmod", 0) else np.mod(a, b)).astype(a.dtype, copy=False)


def _variadic(fn: Callable[[Value, Value], Value]) -> _Op:
    def op(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
        values = [_need(inputs, i) for i in range(len(inputs))]
        _same_type(*values)
        result = values[0]
        for v in values[1:]:
            result = fn(result, v)
        return np.asarray(result)

    return op


def _clip(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x = _need(inputs, 0)
    if opset < 11:
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low, high = (inputs[i] if i < len(inputs) else None for i in (1, 2))
    result = x if low is None else np.maximum(x, low)
    result = result if high is None else np.minimum(result, high)
    return np.asarray(result).astype(x.dtype, copy=False)


def _where(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    condition, x, y = (_need(inputs, i) for i in range(3))
    _same_type(x, y)
    return np.where(condition.astype(bool), x, y)


# -------------------------------------------------------------------------------------------------------------
# Shapes and indices


def _cast(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value | None:
    dtype = NUMPY_DTYPE.get(int(attrs.get("to", 0)))
    return None if dtype is None else _need(inputs, 0).astype(dtype)


def _gather(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    data, indices = _need(inputs, 0), _need(inputs, 1)
    axis = int(attrs.get("axis", 0))
    size = data.shape[axis]
    indices = indices.astype(np.int64)
    return np.take(data, np.where(indices < 0, indices + size, indices), axis=axis)


def _concat(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    values = [_need(inputs, i) for i in range(len(inputs))]
    _same_type(*values)
    return np.concatenate(values, axis=int(attrs["axis"]))


def _unsqueeze(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x = _need(inputs, 0)
    axes = _axes(inputs, attrs, opset, 13)
    if axes is None:
        raise ValueError("Unsqueeze without axes")
    rank = x.ndim + len(axes)
    return np.expand_dims(x, tuple(sorted(a + rank if a < 0 else a for a in axes)))


def _squeeze(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x = _need(inputs, 0)
    axes = _axes(inputs, attrs, opset, 13)
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(a + x.ndim if a < 0 else a for a in axes))


def _slice(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x = _need(inputs, 0)
    if opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = [int(v) for v in _need(inputs, 1)], [int(v) for v in _need(inputs, 2)]
        given = [inputs[i] if i < len(inputs) else None for i in (3, 4)]
        axes = list(range(len(starts))) if given[0] is None else [int(v) for v in given[0]]
        steps = [1] * len(starts) if given[1] is None else [int(v) for v in given[1]]
    index: list[Any] = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis = axis + x.ndim if axis < 0 else axis
        index[axis] = _positions(int(start), int(end), int(step), x.shape[axis])
    for axis, positions in enumerate(index):  # one axis at a time: lists of positions index jointly otherwise
        if not isinstance(positions, slice):
            x = np.take(x, positions, axis=axis)
    return x


def _positions(start: int, end: int, step: int, size: int) -> list[int]:
    """The positions Slice keeps along one axis: negative starts and ends count from the end, then are clamped to
    [0, size] for a positive step and [-1, size - 1] for a negative one (-1: before the first element)."""
    if step == 0:
        raise ValueError("Slice step 0")
    start, end = (v + size if v < 0 else v for v in (start, end))
    low, high = (0, size) if step > 0 else (-1, size - 1)
    start, end = min(max(start, low), high), min(max(end, low), high)
    return list(range(start, end, step))


def _reshape(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x, shape = _need(inputs, 0), [int(d) for d in _need(inputs, 1)]
    if not attrs.get("allowzero", 0):  # 0 copies the input's dim at that index
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _transpose(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x = _need(inputs, 0)
    perm = attrs.get("perm")  # without one, the axes reversed
    return np.transpose(x, None if perm is None else [int(p) for p in perm])


def _scatter_nd(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    """ScatterND without a reduction: a copy of data with each indexed slice replaced by its update, in order."""
    if attrs.get("reduction", "none") not in ("none", b"none"):
        raise ValueError("ScatterND with a reduction")
    data, indices, updates = _need(inputs, 0), _need(inputs, 1).astype(np.int64), _need(inputs, 2)
    out = data.copy()
    depth = indices.shape[-1]
    for index, update in zip(indices.reshape(-1, depth), updates.reshape((-1, *data.shape[depth:]))):
        out[tuple(index)] = update
    return out


def _expand(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x, shape = _need(inputs, 0), tuple(int(d) for d in _need(inputs, 1))
    return np.array(np.broadcast_to(x, np.broadcast_shapes(x.shape, shape)))


def _tile(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    x, repeats = _need(inputs, 0), [int(r) for r in _need(inputs, 1)]
    if len(repeats) != x.ndim:
        raise ValueError("Tile repeats of another rank")
    return np.tile(x, repeats)


def _constant_of_shape(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    fill = attrs.get("value")
    fill = np.zeros(1, np.float32) if fill is None else np.asarray(fill).reshape(-1)
    return np.full(tuple(int(d) for d in _need(inputs, 0)), fill[0], dtype=fill.dtype)


def _range_length(start: Any, limit: Any, delta: Any) -> int:
    """max(ceil((limit - start) / delta), 0), exactly for integers."""
    if delta == 0:
        raise ValueError("Range delta 0")
    if all(isinstance(v, int) for v in (start, limit, delta)):
        return max(-((start - limit) // delta), 0)
    return max(math.ceil((limit - start) / delta), 0)


def _range(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
    start, limit, delta = (_need(inputs, i) for i in range(3))
    _same_type(start, limit, delta)
    count = _range_length(start.item(), limit.item(), delta.item())
    return (start + np.arange(count, dtype=start.dtype) * delta).astype(start.dtype, copy=False)


def _reduce(fn: Callable[..., Value], axes_input_from: int) -> _Op:
    def op(inputs: Inputs, attrs: Mapping[str, Any], opset: int) -> Value:
        x = _need(inputs, 0)
        axes = _axes(inputs, attrs, opset, axes_input_from)
        if not axes:
            if axes is not None and attrs.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.ndim))
        keep = bool(attrs.get("keepdims", 1))
        return np.asarray(fn(x, axis=tuple(a + x.ndim if a < 0 else a for a in axes), keepdims=keep)).astype(
            x.dtype, copy=False
        )

    return op


OPS: dict[str, _Op] = {
    "Identity": lambda inputs, attrs, opset: _need(inputs, 0),
    "Cast": _cast,
    "Gather": _gather,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Slice": _slice,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "ScatterND": _scatter_nd,
    "Expand": _expand,
    "Tile": _tile,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _binary(_div),
    "Mod": _mod,
    "Neg": _unary(np.negative),
    "Abs": _unary(np.abs),
    "Floor": _unary(np.floor),
    "Ceil": _unary(np.ceil),
    "Sqrt": _unary(np.sqrt),
    "Max": _variadic(np.maximum),
    "Min": _variadic(np.minimum),
    "Clip": _clip,
    "Equal": _compare(np.equal),
    "Less": _compare(np.less),
    "Greater": _compare(np.greater),
    "LessOrEqual": _compare(np.less_equal),
    "GreaterOrEqual": _compare(np.greater_equal),
    "Not": lambda inputs, attrs, opset: np.logical_not(_need(inputs, 0)),
    "And": _compare(np.logical_and),
    "Or": _compare(np.logical_or),
    "Where": _where,
    "ReduceProd": _reduce(np.prod, 18),
    "ReduceSum": _reduce(np.sum, 13),
    "ReduceMax": _reduce(np.max, 18),
    "ReduceMin": _reduce(np.min, 18),
}
_CREATORS = frozenset({"ConstantOfShape", "Expand", "Tile", "Range"})
# Ops whose output has the broadcast shape of their inputs.
_ELEMENTWISE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}
    | {"And", "Or", "Where"}
)
