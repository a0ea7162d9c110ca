"""Weight-only block-quantized products (MatMulNBits, MatMulNBitsMlp, MatMulNBitsQkv), each checked against a
closed form from the op's definition in onnxruntime's ContribOperators.md.

Conventions: rows of A times an N x K weight is rows*N*K MACs, 2 FLOPs each; every weight element is dequantized
once a call, ``(q - zero_point) * scale`` (2 FLOPs); a bias is 1 add per output element; at accuracy_level 4 A is
quantized to int8 first (3 FLOPs an element: absolute value, max, multiply); an RMS norm is 4 FLOPs an element
and its skip add 1. A 4-bit weight of N x K in blocks of 16 is stored as ``[N, K/16, 8]`` bytes (blob = 16*4/8)
with scales ``[N, K/16]``. float is 4 bytes, uint8 1.
"""

from __future__ import annotations

import pytest
from onnx import TensorProto

from onnxroof.costs import NodeView
from onnxroof.predict.analysis import node_precision
from onnxroof.predict.op_classes import op_class
from tests.helpers import FLOAT, FLOAT16, UINT8, T, W, cost_of, make_node

MS = "com.microsoft"
UNDEFINED = TensorProto.UNDEFINED  # the element type a contrib op's output has when shape inference skipped it


def packed(n: int, k: int = 64) -> list[object]:
    """A 4-bit N x K weight in blocks of 16 and its scales: N*K/2 bytes and N*K/16 floats."""
    return [W([n, k // 16, 8], UINT8), W([n, k // 16])]


def matmul_nbits_node(a_dtype: int = FLOAT, **attrs) -> NodeView:
    """A [2,3,64] @ a 64 x 32 weight in 4 bits, blocks of 16 along K: k_blocks = 64/16 = 4, blob = 16*4/8 = 8
    bytes."""
    inputs = [
        T([2, 3, 64], a_dtype),  # A
        W([32, 4, 8], UINT8),  # B packed: N x k_blocks x blob = 1024 bytes = 32*64 weights / 2
        W([32, 4]),  # scales, N x k_blocks
        W([32, 2], UINT8),  # zero_points, packed: N x ceil(4 * 4 / 8)
        None,  # g_idx
        W([32]),  # bias
    ]
    return make_node("MatMulNBits", inputs, [T(None, UNDEFINED)], domain=MS, K=64, N=32, bits=4, block_size=16, **attrs)


def test_matmul_nbits():
    c = cost_of(matmul_nbits_node())
    assert c.macs == 2 * 3 * 32 * 64  # = 12288
    # 2*MACs + dequantize (2) per weight (32*64) + bias add per output (2*3*32): 24576 + 4096 + 192 = 28864
    assert c.flops == 2 * 12288 + 2 * 32 * 64 + 2 * 3 * 32
    assert c.bytes_read == 4 * 384 + 1024 + 4 * 128 + 64 + 4 * 32  # packed bytes as stored = 3264
    assert c.bytes_written == 4 * 2 * 3 * 32  # = 768
    assert c.params == 32 * 64 + 128 + 64 + 32  # logical weights + scales + zero points + bias = 2272


def test_matmul_nbits_int8_accuracy_level_quantizes_a():
    # accuracy_level 4 quantizes A (2*3*64 = 384 elements) to int8 first: 3 FLOPs each on top of the above
    c = cost_of(matmul_nbits_node(accuracy_level=4))
    assert c.flops == 2 * 12288 + 2 * 32 * 64 + 2 * 3 * 32 + 3 * 384


@pytest.mark.parametrize(
    ("a_dtype", "level", "expected"),
    [
        (FLOAT, 0, "fp32"),  # unset: A's type, although B and zero points are uint8
        (FLOAT, 1, "fp32"),
        (FLOAT16, 0, "fp16"),
        (FLOAT16, 2, "fp16"),
        (FLOAT, 4, "int8"),  # "input int8, accumulator int32"
    ],
)
def test_matmul_nbits_computes_at_its_accuracy_level(a_dtype, level, expected):
    node = matmul_nbits_node(a_dtype, accuracy_level=level)
    assert node_precision(node.op_type, node.inputs, node.outputs, node.attrs) == expected


def test_matmul_nbits_on_a_gpu_computes_at_a_s_type_whatever_the_level():
    # onnxruntime's CUDA MatMulNBits dequantizes B to A's type; accuracy_level is the CPU kernel's
    node = matmul_nbits_node(FLOAT16, accuracy_level=4)
    assert node_precision(node.op_type, node.inputs, node.outputs, node.attrs, cpu=False) == "fp16"


def mlp_node(activation: str = "silu", **attrs) -> NodeView:
    """MatMulNBitsMlp of A [2,3,64] with a skip and a norm, gate and up 64 -> 32 in 4 bits, a gate bias only."""
    inputs = [
        T([2, 3, 64]),  # A: 384 elements, 1536 bytes
        T([2, 3, 64]),  # skip: 1536 bytes
        W([64]),  # norm_scale: 256 bytes
        *packed(32),  # gate_B (1024 bytes), gate_scales (512 bytes)
        W([32]),  # gate_bias: 128 bytes
        *packed(32),  # up_B, up_scales
        None,  # up_bias
    ]
    outputs = [T(None, UNDEFINED), T(None, UNDEFINED)]  # Y, input_skip_bias_sum
    return make_node(
        "MatMulNBitsMlp", inputs, outputs, domain=MS, K=64, N=32, bits=4, block_size=16, activation=activation, **attrs
    )


def test_matmul_nbits_mlp():
    c = cost_of(mlp_node())
    assert c.macs == 2 * 6 * 32 * 64  # gate and up, 6 rows each: 24576
    # skip add + RMS norm (1 + 4) per element of A (384) = 1920; 2*MACs = 49152; dequantize 2 per weight of both
    # matrices (2*32*64) = 8192; gate bias 6*32 = 192; silu (5) and the multiply by up (1) per element of Y
    # (6*32) = 1152: 60608
    assert c.flops == 5 * 384 + 2 * 24576 + 2 * 2 * 32 * 64 + 6 * 32 + 6 * 6 * 32
    assert c.bytes_read == 1536 + 1536 + 256 + 2 * (1024 + 512) + 128  # every input once, packed as stored = 6528
    assert c.bytes_written == 4 * 6 * 32 + 1536  # Y [2,3,32] and the residual sum of A's shape = 2304
    assert c.params == 2 * 32 * 64 + 64 + 2 * 128 + 32  # logical weights + norm + scales + gate bias = 4448


def test_matmul_nbits_mlp_names_an_activation_it_has_no_cost_for():
    c = cost_of(mlp_node("mish"))
    assert c.flops == 5 * 384 + 2 * 24576 + 2 * 2 * 32 * 64 + 6 * 32 + (1 + 1) * 6 * 32  # charged 1, never 0
    assert "mish" in c.note


def qkv_node(**attrs) -> NodeView:
    """MatMulNBitsQkv of one token A [1,1,64], a norm and no skip: Q 64 -> 64, K and V 64 -> 16 with biases."""
    inputs = [
        T([1, 1, 64]),  # A: 256 bytes
        None,  # skip
        W([64]),  # norm_scale: 256 bytes
        *packed(64),  # q_B (2048 bytes), q_scales (1024 bytes)
        None,  # q_bias
        *packed(16),  # k_B (512 bytes), k_scales (256 bytes)
        W([16]),  # k_bias: 64 bytes
        *packed(16),  # v_B, v_scales
        W([16]),  # v_bias
    ]
    outputs = [T([1, 1, 64]), T([1, 1, 16]), T([1, 1, 16])]
    return make_node("MatMulNBitsQkv", inputs, outputs, domain=MS, K=64, Nq=64, Nkv=16, bits=4, block_size=16, **attrs)


def test_matmul_nbits_qkv():
    c = cost_of(qkv_node(accuracy_level=4))
    assert c.macs == 1 * (64 + 2 * 16) * 64  # = 6144
    # RMS norm 4 * 64 = 256; 2*MACs = 12288; dequantize 2 * 96*64 = 12288; K and V biases 16 + 16 = 32; A quantized
    # to int8 at level 4, 3 * 64 = 192: 25056
    assert c.flops == 4 * 64 + 2 * 6144 + 2 * 96 * 64 + 32 + 3 * 64
    assert c.bytes_read == 256 + 256 + (2048 + 1024) + 2 * (512 + 256 + 64)  # = 5248
    assert c.bytes_written == 4 * (64 + 16 + 16)  # Q, K, V of one row = 384
    assert c.params == 96 * 64 + 64 + 4 * (64 + 16 + 16) + 2 * 16  # = 6624


def test_fused_nbits_products_compute_at_their_accuracy_level_and_class():
    node = qkv_node(accuracy_level=4)
    assert node_precision(node.op_type, node.inputs, node.outputs, node.attrs) == "int8"  # not their uint8 weights
    assert node_precision(node.op_type, node.inputs, node.outputs, node.attrs, cpu=False) == "fp32"
    assert op_class(node) == "gemv_nbits_int8"  # one row of A, by weights that are packed inputs
    assert op_class(qkv_node()) == "gemv_nbits"
