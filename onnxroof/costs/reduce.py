"""Cost functions: reductions (Reduce*, ArgMax, ArgMin, onnxruntime's QLinearReduceMean).

A reduction costs a fixed number of FLOPs per INPUT element (the transform applied to each element, if any, and
the add or comparison that folds it into the accumulator) plus a fixed number per OUTPUT element (the finishing
step: the mean's divide, L2's square root, the log of LogSum/LogSumExp). With noop_with_empty_axes and no axes the
op reduces over nothing and the same formula applies with as many outputs as inputs.

Output sizes come from shape inference; when it left them unknown they are computed from the input shape, the
axes (attribute in older opsets, second input in ReduceSum 13+ and the others 18+), keepdims and
noop_with_empty_axes. The axes input is host-side metadata: it is not counted as bytes read (nor, being int64, as
params). Each op is one kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from onnxroof.costs import OTHER, Cost, NodeView, register
from onnxroof.costs.common import DEQUANTIZE_FLOPS, QUANTIZE_FLOPS, kernel_cost, op_key, resolved_shape
from onnxroof.ir import UnknownShape
from onnxroof.protos import TensorProto

# (FLOPs per input element, FLOPs per output element), one table per engine class.
STANDARD_REDUCE_FLOPS: dict[str, tuple[float, float]] = {
    "ReduceSum": (1, 0),  # add
    "ReduceMean": (1, 1),  # add; divide by the count
    "ReduceMax": (1, 0),  # compare
    "ReduceMin": (1, 0),  # compare
    "ReduceProd": (1, 0),  # multiply
    "ReduceL1": (2, 0),  # abs, add
    "ReduceL2": (2, 1),  # square, add; sqrt
    "ReduceLogSum": (1, 1),  # add; log
    # exp, add; log. The definition log(sum(exp(x))); a numerically stable kernel also takes a max and subtracts
    # it (2 more per element), which is not counted here.
    "ReduceLogSumExp": (2, 1),
    "ReduceSumSquare": (2, 0),  # square, add
    "ArgMax": (1, 0),  # compare (the index update is a select, free)
    "ArgMin": (1, 0),  # compare
}
# No engine class describes onnxruntime's quantized reduction.
QUANTIZED_REDUCE_FLOPS: dict[str, tuple[float, float]] = {
    # Add per input element; per output: divide (1) + dequantize (2) + requantize (2) = 5 (both are affine, so
    # they apply once to the mean).
    "com.microsoft::QLinearReduceMean": (1, 1 + DEQUANTIZE_FLOPS + QUANTIZE_FLOPS),
}

REDUCE_FLOPS: dict[str, tuple[float, float]] = {**STANDARD_REDUCE_FLOPS, **QUANTIZED_REDUCE_FLOPS}

# Ops whose axes may come as input 1 (ReduceSum from opset 13, the other Reduce* from opset 18).
_AXES_AS_INPUT = {op for op in REDUCE_FLOPS if op.startswith("Reduce")}


def reduced_shape(
    shape: Sequence[int], axes: Sequence[int] | None, keepdims: bool, noop_with_empty_axes: bool = False
) -> tuple[int, ...]:
    """The shape a reduction over ``axes`` leaves: reduced dims become 1 (keepdims) or vanish. No axes means all
    axes, or none at all with noop_with_empty_axes."""
    rank = len(shape)
    if not axes:
        if noop_with_empty_axes:
            return tuple(shape)
        axes = range(rank)
    reduced = {a + rank if a < 0 else a for a in axes}
    if keepdims:
        return tuple(1 if i in reduced else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in reduced)


def _axes(node: NodeView) -> list[int] | None:
    """The reduction axes (empty for none given); None when they come from an input that is not a constant."""
    if node.op_type in ("ArgMax", "ArgMin"):
        return [int(node.attr("axis", 0))]
    attr = node.attr("axes")
    if attr is not None:
        return [int(a) for a in attr]
    if op_key(node) in _AXES_AS_INPUT and node.input(1) is not None:
        value = node.constant(1)
        return None if value is None else [int(a) for a in value.reshape(-1)]
    return []


@register(*STANDARD_REDUCE_FLOPS, engine="reduce")
@register(*QUANTIZED_REDUCE_FLOPS, engine=OTHER)
def reduction(node: NodeView) -> Cost:
    """A reduction: ``REDUCE_FLOPS[op]`` = (a, b), FLOPs = a * input elements + b * output elements."""
    key = op_key(node)
    per_input, per_output = REDUCE_FLOPS[key]
    x = node.input(0)
    if x is None:
        raise UnknownShape(f"{node.name}: no input")
    x_shape = x.need_shape()
    y = node.output(0)
    if y is not None and y.known:
        out_shape: tuple[int, ...] = y.shape  # type: ignore[assignment]
    else:
        axes = _axes(node)
        if axes is None:
            raise UnknownShape(f"{node.name}: axes not constant")
        keepdims = bool(node.attr("keepdims", 1))
        noop = bool(node.attr("noop_with_empty_axes", 0))
        out_shape = resolved_shape(y, reduced_shape(x_shape, axes, keepdims, noop), f"{node.name}: output 0")
    flops = per_input * prod(x_shape) + per_output * prod(out_shape)
    data_inputs = [x] if key in _AXES_AS_INPUT else list(node.inputs)
    arg = node.op_type in ("ArgMax", "ArgMin")
    return kernel_cost(node, flops, {0: out_shape}, dtypes={0: TensorProto.INT64} if arg else None, inputs=data_inputs)
