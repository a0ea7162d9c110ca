"""Backward (gradient pass) costs per op family: closed-form FLOPs from each op's definition.

A product ``Y = A (x) B`` sends back ``dA = dY (x) B^T`` and ``dB = A^T (x) dY``, each as many MACs as the
forward (the standard result that a training step is about 3 x the forward, forward + 2 x forward; papers 002 and
004 state the 1:2 forward:backward ratio).
"""

from __future__ import annotations

import pytest

from onnxroof.costs import Cost, NodeView, backward_cost, registered_backward_ops
from tests.helpers import FLOAT16, INT64, T, W, cost_of, make_node


def backward(node: NodeView) -> Cost:
    cost, covered = backward_cost(node, cost_of(node))
    assert covered, f"no backward rule for {node.op_type}"
    return cost


def test_conv_3x3_is_twice_the_forward():
    # Conv 1x64x56x56, 64 -> 64, 3x3, pad 1: Y is 1x64x56x56.
    # forward = 2 * N*C_out*H*W * C_in*k*k = 2 * 64*56*56 * 64*9 = 231211008 FLOPs (115605504 MACs)
    # backward = dX (115605504 MACs) + dW (115605504 MACs) = 231211008 MACs = 462422016 FLOPs
    node = make_node("Conv", [T([1, 64, 56, 56]), W([64, 64, 3, 3])], [T([1, 64, 56, 56])], pads=[1, 1, 1, 1])
    assert cost_of(node).flops == 231211008
    b = backward(node)
    assert b.flops == 462422016
    assert b.macs == 231211008
    assert b.kernels == 2
    # dX kernel reads dY (802816 B) and W (147456 B); dW kernel reads X (802816 B) and dY (802816 B).
    assert b.bytes_read == 802816 + 147456 + 802816 + 802816
    # writes dX (802816 B) and dW (147456 B)
    assert b.bytes_written == 802816 + 147456


def test_conv_bias_gradient_is_one_add_per_output():
    # Conv 1x3x32x32 -> 16 channels, 3x3, no pad, with bias: Y is 1x16x30x30 (14400 elements).
    # forward MACs = 14400 * 3*9 = 388800; backward = 2 * 2 * 388800 + 14400 (dB sums dY) = 1569600
    node = make_node("Conv", [T([1, 3, 32, 32]), W([16, 3, 3, 3]), W([16])], [T([1, 16, 30, 30])])
    b = backward(node)
    assert b.flops == 4 * 388800 + 14400 == 1569600
    assert b.kernels == 3
    assert b.bytes_written == 4 * (3 * 32 * 32 + 16 * 27 + 16)  # dX, dW, dB


def test_conv_transpose_is_twice_the_forward():
    # ConvTranspose 1x8x4x4 -> 4 channels, 2x2 stride 2: Y 1x4x8x8 (256 elements); each input element scatters
    # into C_out * k*k outputs: MACs = 1*8*16 * 4*4 = 2048 (= out elements 256 * C_in 8 * k*k 4 / stride^2 4).
    node = make_node("ConvTranspose", [T([1, 8, 4, 4]), W([8, 4, 2, 2])], [T([1, 4, 8, 8])], strides=[2, 2])
    assert cost_of(node).macs == 2048
    assert backward(node).flops == 2 * 2 * 2048


def test_matmul_is_twice_the_forward():
    # MatMul 32x128 @ 128x64: forward 2*32*64*128 = 524288 FLOPs; backward dA = dY B^T (32*128*64 MACs) and
    # dB = A^T dY (128*64*32 MACs): 2 * 524288 = 1048576 FLOPs.
    node = make_node("MatMul", [T([32, 128]), W([128, 64])], [T([32, 64])])
    b = backward(node)
    assert b.flops == 1048576
    assert b.macs == 2 * 32 * 128 * 64


def test_gemm_bias_gradient():
    # Gemm 8x256 @ (1000x256)^T + C[1000], transB: Y 8x1000. forward = 2*8*1000*256 + 8000 (bias add) = 4104000.
    # backward = 2 * 2*8*1000*256 + 8000 (dC = sum of dY over the 8 rows) = 8200000.
    node = make_node("Gemm", [T([8, 256]), W([1000, 256]), W([1000])], [T([8, 1000])], transB=1)
    assert cost_of(node).flops == 4104000
    assert backward(node).flops == 8200000


@pytest.mark.parametrize(
    ("op", "per_element"),
    [
        ("Relu", 1),  # compare X > 0; selecting dY or 0 is free
        ("LeakyRelu", 2),  # compare, mul by alpha
        ("Sigmoid", 3),  # dY * Y * (1 - Y): sub, mul, mul
        ("Tanh", 3),  # dY * (1 - Y^2): mul, sub, mul
        ("Exp", 1),  # dY * Y
        ("Softsign", 4),  # no table entry: forward (abs, add, div = 3) + mul by dY
    ],
)
def test_unary_activation(op, per_element):
    # 1x64x112x112 = 802816 elements; dX = dY * f'(X) at the stated FLOPs per element.
    node = make_node(op, [T([1, 64, 112, 112])], [T([1, 64, 112, 112])])
    b = backward(node)
    assert b.flops == per_element * 802816
    # reads X and dY, writes dX: 4 bytes each
    assert (b.bytes_read, b.bytes_written, b.kernels) == (2 * 4 * 802816, 4 * 802816, 1)


def test_relu_backward_equals_its_forward():
    # Relu forward is 1 compare per element; its backward is the same compare (the mask).
    node = make_node("Relu", [T([4, 10])], [T([4, 10])])
    assert backward(node).flops == cost_of(node).flops == 40


def test_add_of_same_shapes_passes_dy_on():
    # Y = A + B: dA = dY and dB = dY, no arithmetic and no kernel.
    node = make_node("Add", [T([2, 8]), T([2, 8])], [T([2, 8])])
    assert backward(node) == Cost()


def test_add_with_broadcast_bias_reduces():
    # Y = X[4x10] + b[10]: dX = dY (free); db = sum of dY over the 4 rows: 40 - 10 = 30 adds.
    node = make_node("Add", [T([4, 10]), W([10])], [T([4, 10])])
    b = backward(node)
    assert b.flops == 30
    assert (b.bytes_read, b.bytes_written) == (160, 40)


def test_mul_with_broadcast_scale():
    # Y = X[4x10] * s[10]: dX = dY * s (40 muls); ds = sum over rows of dY * X (40 muls + 40 - 10 = 30 adds).
    node = make_node("Mul", [T([4, 10]), W([10])], [T([4, 10])])
    b = backward(node)
    assert b.flops == 40 + 40 + 30
    assert b.kernels == 2


def test_div_gradients():
    # Y = A / B, 6 elements: dA = dY / B (1 each); dB = -dY * Y / B (3 each): 6 + 18 = 24.
    node = make_node("Div", [T([6]), T([6])], [T([6])])
    assert backward(node).flops == 24


def test_comparison_has_no_gradient():
    node = make_node("Greater", [T([6]), T([6])], [T([6], 9)])
    assert backward(node) == Cost()


def test_batch_norm():
    # 1x64x56x56 = 200704 elements at 9 FLOPs each (X_hat: 2, dScale: 2, dBias: 1, dX: 4) = 1806336.
    c = [W([64], name=n) for n in ("scale", "bias", "mean", "var")]
    node = make_node("BatchNormalization", [T([1, 64, 56, 56]), *c], [T([1, 64, 56, 56])])
    b = backward(node)
    assert b.flops == 9 * 200704 == 1806336
    # writes dX and dScale, dBias (64 floats each); the running mean and variance get no gradient
    assert b.bytes_written == 4 * 200704 + 2 * 4 * 64


def test_layer_norm():
    # 2x16x768 = 24576 elements at 13 FLOPs each (X_hat 2, dScale 2, dBias 1, G 1, its sum 1, G*X_hat and sum
    # 2, dX 4) = 319488.
    node = make_node("LayerNormalization", [T([2, 16, 768]), W([768]), W([768])], [T([2, 16, 768])])
    assert backward(node).flops == 13 * 24576 == 319488


def test_softmax():
    # dX = Y * (dY - sum(dY * Y)): 4 per element of 2x1000.
    node = make_node("Softmax", [T([2, 1000])], [T([2, 1000])])
    assert backward(node).flops == 8000


def test_max_pool_scatters_dy():
    # MaxPool 3x3 stride 2 pad 1 of 1x64x112x112 -> 1x64x56x56 (200704 outputs): one add per output into dX.
    node = make_node(
        "MaxPool",
        [T([1, 64, 112, 112])],
        [T([1, 64, 56, 56])],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
    )
    b = backward(node)
    assert b.flops == 200704
    # reads dY (4 B) and the int64 argmax (8 B) per output, writes dX (1x64x112x112 floats)
    assert (b.bytes_read, b.bytes_written) == (12 * 200704, 4 * 802816)


def test_average_pool_is_the_forward():
    # AveragePool 2x2 stride 2 of 1x8x4x4 -> 1x8x2x2 (32 outputs): forward 32 * (4 adds + 1 div) = 160 FLOPs;
    # backward divides each dY by 4 and adds it into 4 positions: 160 again.
    node = make_node("AveragePool", [T([1, 8, 4, 4])], [T([1, 8, 2, 2])], kernel_shape=[2, 2], strides=[2, 2])
    assert backward(node).flops == cost_of(node).flops == 160


def test_global_average_pool():
    # 1x2048x7x7 -> 1x2048x1x1: forward 100352 adds + 2048 divides = 102400; the backward spreads dY / 49 back.
    node = make_node("GlobalAveragePool", [T([1, 2048, 7, 7])], [T([1, 2048, 1, 1])])
    assert backward(node).flops == 102400


def test_views_cost_nothing_backward():
    node = make_node("Reshape", [T([1, 2048, 1, 1]), T([2], INT64)], [T([1, 2048])])
    assert backward(node) == Cost()


def test_transpose_moves_the_gradient():
    # 0 FLOPs; reads dY and writes dX, 2x3x4 fp16 = 48 bytes each.
    node = make_node("Transpose", [T([2, 3, 4], FLOAT16)], [T([4, 3, 2], FLOAT16)], perm=[2, 1, 0])
    b = backward(node)
    assert (b.flops, b.bytes_read, b.bytes_written) == (0, 48, 48)


def test_slice_writes_the_whole_input_gradient():
    # Slice of 10 of 100 floats: dY is 40 bytes; dX is all 100 floats (zero outside the slice).
    node = make_node("Slice", [T([100]), T([1], INT64), T([1], INT64)], [T([10])], constants={1: [0], 2: [10]})
    b = backward(node)
    assert (b.flops, b.bytes_read, b.bytes_written) == (0, 40, 400)


def test_expand_sums_the_copies():
    # Expand [1x8] -> [4x8]: dX sums the 4 copies: 32 - 8 = 24 adds.
    node = make_node("Expand", [T([1, 8]), T([2], INT64)], [T([4, 8])])
    assert backward(node).flops == 24


def test_gather_scatter_adds():
    # Embedding: Gather of 16 rows of a 1000x64 table: 16*64 = 1024 adds into a zero-filled 1000x64 dTable.
    node = make_node("Gather", [W([1000, 64]), T([16], INT64)], [T([16, 64])])
    b = backward(node)
    assert b.flops == 1024
    assert b.bytes_written == 4 * 64000


def test_an_op_without_a_rule_costs_its_forward_again():
    node = make_node("ReduceMean", [T([4, 8])], [T([4, 1])], axes=[1])
    cost, covered = backward_cost(node, cost_of(node))
    assert not covered
    assert cost == cost_of(node)


def test_every_family_has_rules():
    ops = set(registered_backward_ops())
    assert {"Conv", "ConvTranspose", "Gemm", "MatMul", "Relu", "Add", "BatchNormalization"} <= ops
    assert {"LayerNormalization", "MaxPool", "AveragePool", "Reshape", "Transpose", "Concat"} <= ops
