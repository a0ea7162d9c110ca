"""Elementwise cost functions: per-element constants, broadcasting, variadic ops, quantization, contrib ops."""

from __future__ import annotations

import pytest

from onnxroof.ir import UnknownShape
from tests.helpers import BOOL, FLOAT, FLOAT16, INT8, UINT8, T, W, cost_of, make_node

MS = "com.microsoft"

# FLOPs per output element, from each op's definition.
UNARY_EXPECTED = [
    ("Abs", 1),  # |x|
    ("Neg", 1),  # -x
    ("Floor", 1),
    ("Ceil", 1),
    ("Round", 1),
    ("Sign", 1),
    ("Reciprocal", 1),  # 1/x
    ("Sqrt", 1),  # transcendental: one step
    ("Exp", 1),
    ("Log", 1),
    ("Sin", 1),
    ("Cos", 1),
    ("Tan", 1),
    ("Asin", 1),
    ("Acos", 1),
    ("Atan", 1),
    ("Sinh", 1),
    ("Cosh", 1),
    ("Asinh", 1),
    ("Acosh", 1),
    ("Atanh", 1),
    ("Tanh", 1),
    ("Erf", 1),
    ("Not", 1),
    ("BitwiseNot", 1),
    ("IsNaN", 1),
    ("IsInf", 1),
    ("Relu", 1),  # max(x, 0)
    ("LeakyRelu", 2),  # compare, mul alpha
    ("ThresholdedRelu", 1),  # compare with alpha
    ("Elu", 4),  # compare, exp, sub 1, mul alpha
    ("Selu", 5),  # compare, exp, mul alpha, sub alpha, mul gamma
    ("Celu", 7),  # div alpha, exp, sub 1, mul alpha, min, max, add
    ("Sigmoid", 4),  # neg, exp, add 1, div
    ("HardSigmoid", 4),  # mul alpha, add beta, min 1, max 0
    ("HardSwish", 5),  # hard sigmoid (4) + mul x
    ("Softplus", 3),  # exp, add 1, log
    ("Softsign", 3),  # abs, add 1, div
    ("Mish", 5),  # exp, add 1, log, tanh, mul x
    ("Shrink", 3),  # two compares, add/sub bias
    ("Affine", 2),  # mul alpha, add beta
    ("ScaledTanh", 3),  # mul beta, tanh, mul alpha
    ("ParametricSoftplus", 5),  # mul beta, exp, add 1, log, mul alpha
    ("ImageScaler", 2),  # mul scale, add bias
    ("Scale", 1),  # mul scale
]


@pytest.mark.parametrize("op, per_element", UNARY_EXPECTED)
def test_unary_constants(op: str, per_element: int) -> None:
    # [2, 3, 4] = 24 elements, float32 in and out.
    node = make_node(op, [T([2, 3, 4])], [T([2, 3, 4])])
    cost = cost_of(node)
    assert cost.flops == per_element * 24
    assert cost.bytes_read == 24 * 4
    assert cost.bytes_written == 24 * 4
    assert cost.params == 0
    assert cost.kernels == 1
    assert cost.macs == 0


def test_relu_resnet_activation() -> None:
    # Relu: 1 FLOP/elem * 1*64*56*56 = 200704; bytes 200704*4 = 802816 each way
    c = cost_of(make_node("Relu", [T([1, 64, 56, 56])], [T([1, 64, 56, 56])]))
    assert c.flops == 200704
    assert c.bytes_read == 802816
    assert c.bytes_written == 802816
    assert c.arithmetic_intensity == 200704 / (2 * 802816)


def test_sigmoid() -> None:
    # Sigmoid: 4 FLOPs/elem (neg, exp, add, div) * 1*64*56*56 = 802816
    c = cost_of(make_node("Sigmoid", [T([1, 64, 56, 56])], [T([1, 64, 56, 56])]))
    assert c.flops == 802816


def test_float16_bytes() -> None:
    # Tanh on float16 [1, 64, 56, 56]: 200704 * 2 bytes each way
    c = cost_of(make_node("Tanh", [T([1, 64, 56, 56], FLOAT16)], [T([1, 64, 56, 56], FLOAT16)]))
    assert c.bytes_read == 200704 * 2
    assert c.bytes_written == 200704 * 2


def test_prelu_slope_is_params() -> None:
    # PRelu: compare + mul slope = 2 * 200704 = 401408; slope [64, 1, 1] is a weight: 64 params, read 64*4
    c = cost_of(make_node("PRelu", [T([1, 64, 56, 56]), W([64, 1, 1])], [T([1, 64, 56, 56])]))
    assert c.flops == 401408
    assert c.params == 64
    assert c.bytes_read == 200704 * 4 + 64 * 4


@pytest.mark.parametrize("approximate, per_element", [("none", 5), ("tanh", 8)])
def test_gelu_opset20(approximate: str, per_element: int) -> None:
    # none: x/sqrt2, erf, +1, *x, *0.5 = 5; tanh: x*x, *b, +a, *x, tanh, +1, *x, *0.5 = 8 (a, b folded constants)
    # [4, 128, 768] = 393216 elements
    node = make_node("Gelu", [T([4, 128, 768])], [T([4, 128, 768])], approximate=approximate)
    assert cost_of(node).flops == per_element * 4 * 128 * 768


def test_gelu_default_is_erf() -> None:
    # no attribute: approximate = 'none', 5 FLOPs/elem * 24
    assert cost_of(make_node("Gelu", [T([2, 3, 4])], [T([2, 3, 4])])).flops == 120


# ---------------------------------------------------------------------------------------------------------
# Broadcasting binary ops.


@pytest.mark.parametrize(
    "op",
    ["Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"],
)
def test_binary_broadcast(op: str) -> None:
    # [8,1,5] op [4,5] -> [8,4,5]: 1 FLOP per output element = 8*4*5 = 160
    # bytes read: each input at its own size = (8*5 + 4*5) * 4 = 240; written 160 * 4 = 640
    out_dtype = BOOL if op in ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual") else FLOAT
    c = cost_of(make_node(op, [T([8, 1, 5]), T([4, 5])], [T([8, 4, 5], out_dtype)]))
    assert c.flops == 160
    assert c.bytes_read == 240
    assert c.bytes_written == 160 * (1 if out_dtype == BOOL else 4)
    assert c.params == 0
    assert c.kernels == 1


def test_binary_broadcast_unknown_output_shape() -> None:
    # output shape left unknown: computed as broadcast([8,1,5], [4,5]) = [8,4,5] -> 160 FLOPs, 640 bytes written
    c = cost_of(make_node("Add", [T([8, 1, 5]), T([4, 5])], [T(None)]))
    assert c.flops == 160
    assert c.bytes_written == 640


def test_logical_and_bitwise_ops() -> None:
    # bool [16] and [16] -> [16]: 16 FLOPs, 16 + 16 bytes read, 16 written
    for op in ("And", "Or", "Xor"):
        c = cost_of(make_node(op, [T([16], BOOL), T([16], BOOL)], [T([16], BOOL)]))
        assert (c.flops, c.bytes_read, c.bytes_written) == (16, 32, 16)
    # uint8 [4, 4] with a uint8 scalar weight -> [4, 4]: 16 FLOPs, read 16 + 1, 1 param
    for op in ("BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        c = cost_of(make_node(op, [T([4, 4], UINT8), W([], UINT8)], [T([4, 4], UINT8)]))
        assert (c.flops, c.bytes_read, c.bytes_written, c.params) == (16, 17, 16, 1)


def test_mul_by_weight_counts_params() -> None:
    # x [1,64,56,56] * w [64,1,1]: 200704 FLOPs; w is a weight: 64 params; read 200704*4 + 64*4 = 803072
    c = cost_of(make_node("Mul", [T([1, 64, 56, 56]), W([64, 1, 1])], [T([1, 64, 56, 56])]))
    assert c.flops == 200704
    assert c.params == 64
    assert c.bytes_read == 803072
    assert c.bytes_written == 802816


def test_same_tensor_twice_is_read_once() -> None:
    # x * x with one tensor [2,3,4]: 24 FLOPs, 24*4 bytes read once
    x = T([2, 3, 4], name="x")
    c = cost_of(make_node("Mul", [x, x], [T([2, 3, 4])]))
    assert c.flops == 24
    assert c.bytes_read == 96


def test_unknown_input_shape_raises() -> None:
    with pytest.raises(UnknownShape):
        cost_of(make_node("Add", [T(None), T([4])], [T(None)]))


# ---------------------------------------------------------------------------------------------------------
# Variadic ops.


def test_sum_variadic() -> None:
    # Sum of 3 inputs [2,3,4]: (3-1) adds per output element * 24 = 48; read 3 * 24 * 4 = 288
    c = cost_of(make_node("Sum", [T([2, 3, 4]), T([2, 3, 4]), T([2, 3, 4])], [T([2, 3, 4])]))
    assert c.flops == 48
    assert c.bytes_read == 288
    assert c.bytes_written == 96


def test_sum_variadic_broadcast() -> None:
    # Sum of [2,1,4], [3,1], [2,3,4], [4] -> [2,3,4]: (4-1) * 24 = 72 FLOPs
    # read (2*4 + 3 + 24 + 4) * 4 = 39 * 4 = 156
    c = cost_of(make_node("Sum", [T([2, 1, 4]), T([3, 1]), T([2, 3, 4]), T([4])], [T(None)]))
    assert c.flops == 72
    assert c.bytes_read == 156
    assert c.bytes_written == 96


def test_mean_variadic() -> None:
    # Mean of 3 inputs [2,3,4]: 2 adds + 1 divide = 3 per output element * 24 = 72
    c = cost_of(make_node("Mean", [T([2, 3, 4]), T([2, 3, 4]), T([2, 3, 4])], [T([2, 3, 4])]))
    assert c.flops == 72


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_variadic(op: str) -> None:
    # 2 inputs: 1 comparison per element * 24; 1 input: a copy, 0 FLOPs, still 96 bytes each way
    assert cost_of(make_node(op, [T([2, 3, 4]), T([2, 3, 4])], [T([2, 3, 4])])).flops == 24
    single = cost_of(make_node(op, [T([2, 3, 4])], [T([2, 3, 4])]))
    assert (single.flops, single.bytes_read, single.bytes_written) == (0, 96, 96)


# ---------------------------------------------------------------------------------------------------------
# Clip.

# x [1, 32, 16, 16] = 8192 elements.


def test_clip_with_min_and_max_inputs() -> None:
    # min and max: 2 FLOPs/elem * 8192 = 16384; the scalar bounds are weights: 2 params, read 4 + 4 bytes
    c = cost_of(make_node("Clip", [T([1, 32, 16, 16]), W([]), W([])], [T([1, 32, 16, 16])]))
    assert c.flops == 2 * 8192
    assert c.params == 2
    assert c.bytes_read == 8192 * 4 + 4 + 4
    assert c.bytes_written == 8192 * 4


def test_clip_with_only_max() -> None:
    # min omitted (empty input): 1 FLOP/elem * 8192; 1 param
    c = cost_of(make_node("Clip", [T([1, 32, 16, 16]), None, W([])], [T([1, 32, 16, 16])]))
    assert c.flops == 8192
    assert c.params == 1
    assert c.bytes_read == 8192 * 4 + 4


def test_clip_attributes_opset6() -> None:
    # opset 6: min/max attributes, 2 FLOPs/elem * 8192
    c = cost_of(make_node("Clip", [T([1, 32, 16, 16])], [T([1, 32, 16, 16])], min=0.0, max=6.0))
    assert c.flops == 2 * 8192
    assert c.params == 0


def test_clip_without_bounds_is_a_copy() -> None:
    c = cost_of(make_node("Clip", [T([1, 32, 16, 16])], [T([1, 32, 16, 16])]))
    assert c.flops == 0
    assert c.bytes_read == c.bytes_written == 8192 * 4


# ---------------------------------------------------------------------------------------------------------
# Quantization.


def test_quantize_linear_bytes() -> None:
    # x float [1,3,224,224] = 150528 elems -> int8; 2 FLOPs/elem (scale, zero point) = 301056
    # read 150528*4 (x) + 4 (float scale) + 1 (int8 zero point); written 150528*1; params: scale + zp = 2
    c = cost_of(make_node("QuantizeLinear", [T([1, 3, 224, 224]), W([]), W([], INT8)], [T([1, 3, 224, 224], INT8)]))
    assert c.flops == 301056
    assert c.bytes_read == 150528 * 4 + 4 + 1
    assert c.bytes_written == 150528
    assert c.params == 2
    assert c.kernels == 1


def test_dequantize_linear_per_axis() -> None:
    # int8 [1,64,56,56] = 200704 -> float; per-channel scale [64] float, zero point [64] int8
    # 2 FLOPs/elem (sub zp, mul scale) = 401408; read 200704*1 + 64*4 + 64*1; written 200704*4; params 128
    c = cost_of(
        make_node("DequantizeLinear", [T([1, 64, 56, 56], INT8), W([64]), W([64], INT8)], [T([1, 64, 56, 56])], axis=1)
    )
    assert c.flops == 401408
    assert c.bytes_read == 200704 + 256 + 64
    assert c.bytes_written == 200704 * 4
    assert c.params == 128


def test_contrib_quantize_dequantize() -> None:
    # com.microsoft variants: same 2 FLOPs/elem; output shape unknown -> x's shape [16, 16] = 256 elements
    q = cost_of(make_node("QuantizeLinear", [T([16, 16]), W([]), W([], UINT8)], [T(None, UINT8)], domain=MS))
    assert q.flops == 2 * 256
    assert q.bytes_written == 256 * 1
    d = cost_of(make_node("DequantizeLinear", [T([16, 16], UINT8), W([]), W([], UINT8)], [T(None)], domain=MS))
    assert d.flops == 2 * 256
    assert d.bytes_written == 256 * 4


@pytest.mark.parametrize("known", [True, False])
def test_dynamic_quantize_linear(known: bool) -> None:
    # x float [16, 128] = 2048: min + max (2) + quantize (2) = 4 FLOPs/elem = 8192
    # read 2048*4 = 8192; written y uint8 2048 + y_scale float 4 + y_zero_point uint8 1 = 2053
    outs = [T([16, 128], UINT8), T([], FLOAT), T([], UINT8)] if known else [T(None, UINT8), T(None), T(None, UINT8)]
    c = cost_of(make_node("DynamicQuantizeLinear", [T([16, 128])], outs))
    assert c.flops == 8192
    assert c.bytes_read == 8192
    assert c.bytes_written == 2053
    assert c.params == 0


# ---------------------------------------------------------------------------------------------------------
# onnxruntime contrib ops.

# x [2, 8, 768] = 12288 elements.


def test_contrib_gelu() -> None:
    # Gelu: x/sqrt2, erf, +1, *x, *0.5 = 5 FLOPs/elem * 12288 = 61440
    c = cost_of(make_node("Gelu", [T([2, 8, 768])], [T([2, 8, 768])], domain=MS))
    assert c.flops == 61440


def test_bias_gelu() -> None:
    # bias add + Gelu (5) = 6 FLOPs/elem * 12288 = 73728; bias [768] weight: 768 params
    # read (12288 + 768) * 4 = 52224
    c = cost_of(make_node("BiasGelu", [T([2, 8, 768]), W([768])], [T([2, 8, 768])], domain=MS))
    assert c.flops == 73728
    assert c.params == 768
    assert c.bytes_read == 52224
    assert c.bytes_written == 12288 * 4


def test_fast_gelu() -> None:
    # tanh approximation: 8 FLOPs/elem; + 1 bias add with the optional bias: 9
    plain = cost_of(make_node("FastGelu", [T([2, 8, 768])], [T([2, 8, 768])], domain=MS))
    assert plain.flops == 8 * 12288
    biased = cost_of(make_node("FastGelu", [T([2, 8, 768]), W([768])], [T([2, 8, 768])], domain=MS))
    assert biased.flops == 9 * 12288
    assert biased.params == 768


def test_quick_gelu() -> None:
    # x * sigmoid(alpha * x): mul alpha (1) + sigmoid (4) + mul x (1) = 6 FLOPs/elem * 12288 = 73728
    c = cost_of(make_node("QuickGelu", [T([2, 8, 768])], [T([2, 8, 768])], domain=MS, alpha=1.702))
    assert c.flops == 73728


def test_bias_add() -> None:
    # X [2,8,64] + bias [64] + skip [2,8,64]: 2 adds/elem * 1024 = 2048; read (1024 + 64 + 1024) * 4 = 8448
    c = cost_of(make_node("BiasAdd", [T([2, 8, 64]), W([64]), T([2, 8, 64])], [T([2, 8, 64])], domain=MS))
    assert c.flops == 2048
    assert c.bytes_read == 8448
    assert c.params == 64


def test_bias_split_gelu() -> None:
    # X [2,64,1280] + bias [1280]: 1 add per input elem = 163840; output [2,64,640] = 81920 elems,
    # each Gelu(right) (5) * left (1) = 6 -> 491520; total 655360. Written 81920 * 4 = 327680
    c = cost_of(make_node("BiasSplitGelu", [T([2, 64, 1280]), W([1280])], [T(None)], domain=MS))
    assert c.flops == 2 * 64 * 1280 + 6 * 2 * 64 * 640
    assert c.flops == 655360
    assert c.bytes_written == 327680


def _qlinear_binary_inputs(b_shape: list[int]) -> list:
    # A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point
    return [T([1, 32, 8, 8], UINT8), W([]), W([], UINT8), T(b_shape, UINT8), W([]), W([], UINT8), W([]), W([], UINT8)]


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary(op: str) -> None:
    # dequant A (2) + dequant B (2) + op (1) + requant (2) = 7 FLOPs per output elem * 1*32*8*8 = 2048 -> 14336
    # read A 2048 + B 2048 (uint8) + 3 float scales 12 + 3 uint8 zero points 3 = 4111; written 2048; params 6
    c = cost_of(make_node(op, _qlinear_binary_inputs([1, 32, 8, 8]), [T([1, 32, 8, 8], UINT8)], domain=MS))
    assert c.flops == 14336
    assert c.bytes_read == 4111
    assert c.bytes_written == 2048
    assert c.params == 6


def test_qlinear_mul_broadcast_unknown_output() -> None:
    # A [1,32,8,8] * B [1,32,1,1]: output = broadcast of A and B (not of the scales) = [1,32,8,8]
    # 7 * 2048 = 14336 FLOPs; B read at its own size: 2048 + 32 + 12 + 3 = 2095
    c = cost_of(make_node("QLinearMul", _qlinear_binary_inputs([1, 32, 1, 1]), [T(None, UINT8)], domain=MS))
    assert c.flops == 14336
    assert c.bytes_read == 2095
    assert c.bytes_written == 2048


def test_qlinear_activations() -> None:
    # QLinearSigmoid: dequant 2 + sigmoid 4 + requant 2 = 8/elem; QLinearLeakyRelu: 2 + 2 + 2 = 6/elem; [1,32,8,8]
    ins = [T([1, 32, 8, 8], UINT8), W([]), W([], UINT8), W([]), W([], UINT8)]
    sig = cost_of(make_node("QLinearSigmoid", ins, [T([1, 32, 8, 8], UINT8)], domain=MS))
    assert sig.flops == 8 * 2048
    assert sig.bytes_read == 2048 + 4 + 1 + 4 + 1
    assert sig.params == 4
    leaky = cost_of(make_node("QLinearLeakyRelu", ins, [T([1, 32, 8, 8], UINT8)], domain=MS, alpha=0.1))
    assert leaky.flops == 6 * 2048


# ---------------------------------------------------------------------------------------------------------
# Domains.


def test_the_ai_onnx_domain_is_the_default_one() -> None:
    # Sigmoid named in the explicit "ai.onnx" domain: 4 FLOPs/elem (neg, exp, add 1, div) * 24 = 96
    c = cost_of(make_node("Sigmoid", [T([2, 3, 4])], [T([2, 3, 4])], domain="ai.onnx"))
    assert c.flops == 96
