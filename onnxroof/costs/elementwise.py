"""Cost functions: elementwise ops (unary activations, broadcasting binary ops, variadic Sum/Mean/Max/Min,
quantize/dequantize, and onnxruntime's contrib activations).

Every op here does a fixed number of FLOPs per output element; the constants live in the tables below, one line
per op with its derivation. FLOPs = constant * output elements. Bytes follow the compulsory-traffic model (each
distinct input read once at its own, un-broadcast size; each output written once), params are the elements of
the weight operands (a Mul by a constant, PRelu's slope, a quantization scale), and each op is one kernel.

The tables are split by engine class: "elementwise" for the cheap arithmetic (compares, min/max, a multiply-add)
whose kernels stream their bytes, "activation" for the smooth activations and the functions built on a
transcendental (exp, log, pow, tanh, erf, the trigonometric ones), whose kernels are bound by their arithmetic,
and OTHER for the deprecated ops no class describes.

Backward: ``dX = dY * f'(X)``. The FLOPs per element of each rule are in the backward tables below, one line per
op with its derivation; a smooth unary activation not listed is charged its forward constant (the derivative
costs about what the function does) plus one multiply by dY. The comparisons and logical ops have no gradient
(0). A unary backward reads the saved input (or output) and dY and writes dX; a binary op sends a gradient to
each floating-point operand, summed over the axes it was broadcast along (``n - m`` adds to reduce ``n``
gradient elements to the operand's ``m``).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from onnxroof.costs import OTHER, Cost, NodeView, register, register_backward
from onnxroof.costs.common import (
    DEQUANTIZE_FLOPS,
    QUANTIZE_FLOPS,
    SIGMOID_FLOPS,
    broadcast_shape,
    kernel_cost,
    op_key,
    pointwise,
    resolved_shape,
)
from onnxroof.ir import Tensor, UnknownShape
from onnxroof.protos import TensorProto

# Shared building blocks of the compound constants below.
GELU_ERF_FLOPS = 5  # 0.5 * x * (1 + erf(x / sqrt(2))): div by sqrt(2), erf, add 1, mul by x, mul by 0.5
# 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with the constants folded the way kernels evaluate it,
# x * (a + b * x^2) with a = sqrt(2/pi), b = 0.044715 * sqrt(2/pi): x*x, mul b, add a, mul x, tanh, add 1,
# mul x, mul 0.5.
GELU_TANH_FLOPS = 8
SWISH_FLOPS = 1 + SIGMOID_FLOPS + 1  # x * sigmoid(alpha * x): mul alpha, sigmoid (4), mul x = 6

# FLOPs per output element of ops whose output has the shape of input 0 (extra inputs, if any, are parameters
# broadcast onto it: PRelu's slope, quantization scales and zero points), one table per engine class.
UNARY_ELEMENTWISE_FLOPS: dict[str, float] = {
    "Abs": 1,  # |x|
    "Neg": 1,  # -x
    "Floor": 1,  # floor(x)
    "Ceil": 1,  # ceil(x)
    "Round": 1,  # round half to even
    "Sign": 1,  # sign(x)
    "Reciprocal": 1,  # 1 / x
    "Sqrt": 1,  # sqrt, one transcendental step
    "Not": 1,  # logical not
    "BitwiseNot": 1,  # ~x
    "IsNaN": 1,  # x != x
    "IsInf": 1,  # |x| == inf (one class test; the sign filter of detect_negative/positive is free)
    "Relu": 1,  # max(x, 0)
    "LeakyRelu": 2,  # compare x < 0, mul alpha (the select is free)
    "PRelu": 2,  # compare x < 0, mul slope
    "ThresholdedRelu": 1,  # compare x > alpha (the select is free)
    "HardSigmoid": 4,  # max(0, min(1, alpha * x + beta)): mul, add, min, max
    "HardSwish": 5,  # x * HardSigmoid(x): HardSigmoid (4) + mul x
    "Shrink": 3,  # compare x < -lambd, compare x > lambd, add or sub bias
    # Quantization; a per-axis or blocked scale broadcasts onto x, so the output has x's shape.
    "QuantizeLinear": QUANTIZE_FLOPS,  # x / scale + zero_point
    "DequantizeLinear": DEQUANTIZE_FLOPS,  # (x - zero_point) * scale
    "com.microsoft::QuantizeLinear": QUANTIZE_FLOPS,  # same as the standard op, wider type support
    "com.microsoft::DequantizeLinear": DEQUANTIZE_FLOPS,
    # Dequantize (2) + the float op + requantize (2): the arithmetic the op defines (onnxruntime's CPU kernel
    # looks each of the 256 possible inputs up in a table).
    "com.microsoft::QLinearLeakyRelu": DEQUANTIZE_FLOPS + 2 + QUANTIZE_FLOPS,  # 2 + (compare, mul alpha) + 2 = 6
}
UNARY_ACTIVATION_FLOPS: dict[str, float] = {
    "Exp": 1,  # exp
    "Log": 1,  # log
    "Sin": 1,  # trigonometric and hyperbolic functions: one transcendental step each
    "Cos": 1,
    "Tan": 1,
    "Asin": 1,
    "Acos": 1,
    "Atan": 1,
    "Sinh": 1,
    "Cosh": 1,
    "Asinh": 1,
    "Acosh": 1,
    "Atanh": 1,
    "Tanh": 1,
    "Erf": 1,  # erf
    "Elu": 4,  # compare, exp, sub 1, mul alpha
    "Selu": 5,  # compare, exp, mul alpha, sub alpha, mul gamma (the x > 0 branch, gamma * x, costs less)
    "Celu": 7,  # max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): div, exp, sub 1, mul, min, max, add
    "Sigmoid": SIGMOID_FLOPS,  # neg, exp, add 1, div
    "Softplus": 3,  # log(exp(x) + 1): exp, add 1, log
    "Softsign": 3,  # x / (1 + |x|): abs, add 1, div
    "Mish": 5,  # x * tanh(softplus(x)): exp, add 1, log, tanh, mul x
    "Swish": SWISH_FLOPS,  # x * sigmoid(alpha * x), opset 24: mul alpha (counted at alpha = 1 too), sigmoid, mul x
    # onnxruntime contrib activations.
    "com.microsoft::Gelu": GELU_ERF_FLOPS,  # exact (erf) Gelu: div sqrt2, erf, add 1, mul x, mul 0.5
    "com.microsoft::QuickGelu": 1 + SIGMOID_FLOPS + 1,  # x * sigmoid(alpha * x): mul alpha, sigmoid (4), mul x
    # Dequantize (2) + the float op + requantize (2), as QLinearLeakyRelu above.
    "com.microsoft::QLinearSigmoid": DEQUANTIZE_FLOPS + SIGMOID_FLOPS + QUANTIZE_FLOPS,  # 2 + 4 + 2 = 8
}
# Deprecated ONNX ops that onnxruntime still runs in the default domain.
UNARY_OTHER_FLOPS: dict[str, float] = {
    "Affine": 2,  # alpha * x + beta: mul, add
    "ScaledTanh": 3,  # alpha * tanh(beta * x): mul, tanh, mul
    "ParametricSoftplus": 5,  # alpha * log(exp(beta * x) + 1): mul, exp, add 1, log, mul
    "ImageScaler": 2,  # scale * x + bias[c]: mul, add
    "Scale": 1,  # scale * x
}
UNARY_FLOPS: dict[str, float] = {**UNARY_ELEMENTWISE_FLOPS, **UNARY_ACTIVATION_FLOPS, **UNARY_OTHER_FLOPS}

# FLOPs per output element of ops whose output is the numpy broadcast of their data inputs, one table per engine
# class.
BROADCAST_ELEMENTWISE_FLOPS: dict[str, float] = {
    "Add": 1,  # a + b
    "Sub": 1,  # a - b
    "Mul": 1,  # a * b
    "Div": 1,  # a / b
    "Mod": 1,  # a mod b
    "And": 1,  # logical and
    "Or": 1,  # logical or
    "Xor": 1,  # logical xor
    "Equal": 1,  # comparisons: one step each
    "Greater": 1,
    "Less": 1,
    "GreaterOrEqual": 1,
    "LessOrEqual": 1,
    "BitShift": 1,  # a << b or a >> b
    "BitwiseAnd": 1,  # a & b
    "BitwiseOr": 1,  # a | b
    "BitwiseXor": 1,  # a ^ b
    "com.microsoft::BiasAdd": 2,  # X + bias + skip: two adds
    # Quantized binary ops: dequantize A (2) + dequantize B (2) + the op (1) + requantize C (2) = 7, counted per
    # output element (a broadcast operand is dequantized once per output element it feeds).
    "com.microsoft::QLinearAdd": 2 * DEQUANTIZE_FLOPS + 1 + QUANTIZE_FLOPS,
    "com.microsoft::QLinearMul": 2 * DEQUANTIZE_FLOPS + 1 + QUANTIZE_FLOPS,
}
BROADCAST_ACTIVATION_FLOPS: dict[str, float] = {
    "Pow": 1,  # a ^ b, one transcendental step
    "SwiGLU": SWISH_FLOPS + 1,  # Swish_alpha(A) * B, opset 28 (A and B of one shape): Swish (6) + mul B = 7
    "com.microsoft::BiasGelu": 1 + GELU_ERF_FLOPS,  # Gelu(A + B): bias add + exact Gelu (5) = 6
}
BROADCAST_FLOPS: dict[str, float] = {**BROADCAST_ELEMENTWISE_FLOPS, **BROADCAST_ACTIVATION_FLOPS}

# Which inputs are the data operands of a broadcasting op (default: all); the rest are scales and zero points.
_BROADCAST_DATA_INPUTS: dict[str, tuple[int, ...]] = {
    "com.microsoft::QLinearAdd": (0, 3),
    "com.microsoft::QLinearMul": (0, 3),
}


def _present(tensors: Sequence[Tensor | None]) -> list[Tensor]:
    return [t for t in tensors if t is not None and t.name]


def _input0_shape(node: NodeView) -> tuple[int, ...] | None:
    x = node.input(0)
    return x.shape if x is not None else None


def _broadcast_of(node: NodeView, indices: Sequence[int] | None = None) -> tuple[int, ...] | None:
    """The numpy broadcast of the chosen inputs' shapes, or None when one of them is unknown."""
    chosen = node.inputs if indices is None else [node.input(i) for i in indices]
    tensors = _present(chosen)
    if not tensors or not all(t.known for t in tensors):
        return None
    return broadcast_shape(*[t.need_shape() for t in tensors])


# ---------------------------------------------------------------------------------------------------------
# Table-driven ops.


@register(*UNARY_ELEMENTWISE_FLOPS, engine="elementwise")
@register(*UNARY_ACTIVATION_FLOPS, engine="activation")
@register(*UNARY_OTHER_FLOPS, engine=OTHER)
def unary(node: NodeView) -> Cost:
    """A unary op (or one with broadcast parameters): ``UNARY_FLOPS[op]`` FLOPs per output element."""
    return pointwise(node, UNARY_FLOPS[op_key(node)], _input0_shape(node))


@register(*BROADCAST_ELEMENTWISE_FLOPS, engine="elementwise")
@register(*BROADCAST_ACTIVATION_FLOPS, engine="activation")
def broadcasting(node: NodeView) -> Cost:
    """A numpy-broadcasting op: ``BROADCAST_FLOPS[op]`` FLOPs per output element; a broadcast operand is read at
    its own size, not the output's."""
    key = op_key(node)
    out = node.output(0)
    stand_in = None if out is not None and out.known else _broadcast_of(node, _BROADCAST_DATA_INPUTS.get(key))
    return pointwise(node, BROADCAST_FLOPS[key], stand_in)


# ---------------------------------------------------------------------------------------------------------
# Ops whose constant depends on attributes or on how many inputs they have.


@register("Sum", "Max", "Min", engine="elementwise")
def variadic(node: NodeView) -> Cost:
    """Sum/Max/Min of n broadcast inputs: n - 1 adds or comparisons per output element (n = 1 is a copy)."""
    n = len(_present(node.inputs))
    return pointwise(node, max(n - 1, 0), _broadcast_of(node))


@register("Mean", engine="elementwise")
def mean(node: NodeView) -> Cost:
    """Mean of n broadcast inputs: n - 1 adds and one divide by n per output element."""
    n = len(_present(node.inputs))
    return pointwise(node, max(n - 1, 0) + 1, _broadcast_of(node))


@register("Gelu", engine="activation")
def gelu(node: NodeView) -> Cost:
    """ONNX Gelu (opset 20): 5 FLOPs per element for approximate='none' (erf form), 8 for 'tanh'
    (see GELU_ERF_FLOPS and GELU_TANH_FLOPS for the derivations)."""
    flops = GELU_TANH_FLOPS if node.text("approximate", "none") == "tanh" else GELU_ERF_FLOPS
    return pointwise(node, flops, _input0_shape(node))


@register("com.microsoft::FastGelu", engine="activation")
def fast_gelu(node: NodeView) -> Cost:
    """onnxruntime FastGelu: the tanh approximation of Gelu, 8 FLOPs per element (GELU_TANH_FLOPS), plus one
    add per element when the optional bias input is given."""
    has_bias = node.input(1) is not None
    return pointwise(node, GELU_TANH_FLOPS + (1 if has_bias else 0), _input0_shape(node))


@register("com.microsoft::BiasSplitGelu", engine="activation")
def bias_split_gelu(node: NodeView) -> Cost:
    """onnxruntime BiasSplitGelu: X + bias over the whole input (1 FLOP per input element), then the last axis is
    split in halves and left * Gelu(right) is written: exact Gelu (5) + mul (1) per output element."""
    x_shape = resolved_shape(node.input(0), None, f"{node.name}: input 0")
    out_shape = resolved_shape(node.output(0), (*x_shape[:-1], x_shape[-1] // 2), f"{node.name}: output 0")
    flops = prod(x_shape) + (GELU_ERF_FLOPS + 1) * prod(out_shape)
    return kernel_cost(node, flops, {0: out_shape})


def _has_bound(node: NodeView, input_index: int, attr_name: str) -> bool:
    return node.input(input_index) is not None or node.attr(attr_name) is not None


@register("Clip", engine="elementwise")
def clip(node: NodeView) -> Cost:
    """Clip: one min or max per element for each bound given, as an input (opset 11+) or attribute (opset 6);
    with no bound at all it is a copy (0 FLOPs, bytes only). Constant bounds count as params like any weight."""
    bounds = int(_has_bound(node, 1, "min")) + int(_has_bound(node, 2, "max"))
    return pointwise(node, bounds, _input0_shape(node))


@register("DynamicQuantizeLinear", engine="quantize")
def dynamic_quantize_linear(node: NodeView) -> Cost:
    """DynamicQuantizeLinear: a min and a max over x (2 FLOPs per element), then quantize (2 per element); the
    scalar scale and zero point it derives are O(1) and not counted. Writes y (uint8) and the two scalars."""
    x_shape = _input0_shape(node)
    return pointwise(
        node,
        2 + QUANTIZE_FLOPS,
        x_shape,
        fallback={1: (), 2: ()},
        dtypes={0: TensorProto.UINT8, 1: TensorProto.FLOAT, 2: TensorProto.UINT8},
    )


# ---------------------------------------------------------------------------------------------------------
# Backward rules.

# FLOPs per element of dX for unary ops whose derivative is cheaper or dearer than "forward + 1".
UNARY_BACKWARD_FLOPS: dict[str, float] = {
    "Relu": 1,  # dY where X > 0 else 0: one compare (the select is free), = forward
    "LeakyRelu": 2,  # compare X < 0, mul dY by alpha, = forward
    "ThresholdedRelu": 1,  # compare X > alpha, = forward
    "Neg": 1,  # -dY, = forward
    "Abs": 2,  # compare X < 0, negate dY
    "HardSigmoid": 3,  # two compares (inside the linear range), mul dY by alpha
    "HardSwish": 5,  # two compares, (2X + 3) / 6 as X/3 + 1/2 (mul, add), mul dY
    "Exp": 1,  # dY * Y from the saved output
    "Log": 1,  # dY / X
    "Sqrt": 2,  # dY / (2Y): mul, div
    "Reciprocal": 3,  # -dY * Y * Y: mul, mul, neg
    "Sigmoid": 3,  # dY * Y * (1 - Y) from the saved output: sub, mul, mul
    "Tanh": 3,  # dY * (1 - Y * Y) from the saved output: mul, sub, mul
    "Elu": 3,  # dY for X > 0, else dY * (Y + alpha): compare, add, mul
    "Softplus": SIGMOID_FLOPS + 1,  # dY * sigmoid(X): sigmoid (4), mul
}

# FLOPs per output element of the gradient of (operand A, operand B), before any broadcast reduction.
BINARY_BACKWARD_FLOPS: dict[str, tuple[float, float]] = {
    "Add": (0, 0),  # dA = dY, dB = dY
    "Sub": (0, 1),  # dA = dY, dB = -dY
    "Mul": (1, 1),  # dA = dY * B, dB = dY * A
    "Div": (1, 3),  # dA = dY / B (div); dB = -dY * Y / B (mul, div, neg)
}

# Ops whose output does not depend differentiably on their inputs: no gradient flows back.
NO_GRADIENT_OPS: tuple[str, ...] = (
    "Equal",
    "Greater",
    "Less",
    "GreaterOrEqual",
    "LessOrEqual",
    "And",
    "Or",
    "Xor",
    "Not",
    "IsNaN",
    "IsInf",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
)

_SMOOTH_UNARY: tuple[str, ...] = tuple(
    op for op in UNARY_ACTIVATION_FLOPS if "::" not in op and op not in UNARY_BACKWARD_FLOPS
)


def _is_float(t: Tensor | None) -> bool:
    return t is not None and bool(t.name) and t.dtype in _FLOAT_TYPES


_FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})


def _unary_backward(node: NodeView, forward: Cost, per_element: float) -> Cost:
    """One kernel: reads X (or the saved Y, of X's size) and dY (Y's size, what the forward wrote), writes dX."""
    x = node.need_input(0, "X")
    return Cost(
        flops=per_element * x.numel,
        bytes_read=x.nbytes + forward.bytes_written,
        bytes_written=x.nbytes,
        kernels=1,
    )


@register_backward(*UNARY_BACKWARD_FLOPS)
def unary_backward(node: NodeView, forward: Cost) -> Cost:
    """``UNARY_BACKWARD_FLOPS[op]`` per element of X."""
    return _unary_backward(node, forward, UNARY_BACKWARD_FLOPS[node.op_type])


@register_backward(*_SMOOTH_UNARY)
def smooth_unary_backward(node: NodeView, forward: Cost) -> Cost:
    """The other smooth activations: f'(X) at the forward's constant, plus one multiply by dY, per element."""
    return _unary_backward(node, forward, UNARY_ACTIVATION_FLOPS[node.op_type] + 1)


@register_backward(*BINARY_BACKWARD_FLOPS)
def binary_backward(node: NodeView, forward: Cost) -> Cost:
    """A gradient per floating-point operand: ``BINARY_BACKWARD_FLOPS[op]`` per element of Y, plus ``numel(Y) -
    numel(operand)`` adds when the operand was broadcast. Each operand's gradient is a kernel reading dY (and,
    for Mul and Div, the operands its formula names: Mul's dA reads B and its dB reads A, Div's dA reads B and
    its dB reads Y and B) and writing the gradient. An operand whose gradient is dY itself (Add, Sub's A, not
    broadcast) costs nothing: dY is passed on as it is."""
    y = node.output(0)
    if y is None or not y.known:
        raise UnknownShape(f"{node.name}: output 0")
    a, b = node.need_input(0, "A"), node.need_input(1, "B")
    reads = {"Mul": ((b.nbytes,), (a.nbytes,)), "Div": ((b.nbytes,), (y.nbytes, b.nbytes))}
    total = Cost()
    for i, operand in enumerate((a, b)):
        if not _is_float(operand):
            continue
        flops = BINARY_BACKWARD_FLOPS[node.op_type][i] * y.numel + (y.numel - operand.numel)
        if flops == 0:
            continue
        extra = reads.get(node.op_type, ((), ()))[i]
        total = total + Cost(flops=flops, bytes_read=y.nbytes + sum(extra), bytes_written=operand.nbytes, kernels=1)
    return total


@register_backward(*NO_GRADIENT_OPS)
def no_gradient(node: NodeView, forward: Cost) -> Cost:
    """No gradient flows through a comparison, a logical op or a rounding: nothing runs."""
    return Cost()
