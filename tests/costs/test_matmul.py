"""Matrix-product costs, each checked against a closed form derived from the op's definition.

Conventions used throughout: an (M x K) @ (K x N) product is M*N*K MACs and 2*M*N*K FLOPs per batch matrix; float
is 4 bytes, int8/uint8 1, int32 4.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxroof.costs import NodeView
from onnxroof.costs.matmul import matmul_dims, parse_einsum
from onnxroof.ir import Tensor, UnknownShape
from tests.helpers import FLOAT, INT8, INT32, UINT8, T, W, cost_of, make_node

MS = "com.microsoft"
UNDEFINED = TensorProto.UNDEFINED  # the element type a contrib op's output has when shape inference skipped it


# ---------------------------------------------------------------------------------------------------------
# Gemm


def test_gemm_basic():
    # A [64,128] @ B [128,256] -> Y [64,256]
    c = cost_of(make_node("Gemm", [T([64, 128]), W([128, 256])], [T([64, 256])]))
    assert c.macs == 64 * 256 * 128  # = 2097152
    assert c.flops == 2 * 64 * 256 * 128  # = 4194304
    assert c.bytes_read == 4 * (64 * 128 + 128 * 256)  # = 4 * (8192 + 32768) = 163840
    assert c.bytes_written == 4 * 64 * 256  # = 65536
    assert c.params == 128 * 256  # = 32768
    assert c.kernels == 1


def test_gemm_trans_alpha_beta_bias():
    # transA: A is [K=128, M=64]; transB: B is [N=256, K=128]; C [256] broadcast onto [64,256]
    node = make_node(
        "Gemm",
        [T([128, 64]), W([256, 128]), W([256])],
        [T([64, 256])],
        transA=1,
        transB=1,
        alpha=0.5,
        beta=2.0,
    )
    c = cost_of(node)
    assert c.macs == 64 * 256 * 128
    # 2*M*N*K + M*N (C add) + M*N (alpha) + M*N (beta): 4194304 + 3*16384 = 4243456
    assert c.flops == 2 * 64 * 256 * 128 + 3 * 64 * 256
    assert c.bytes_read == 4 * (128 * 64 + 256 * 128 + 256)  # = 164864
    assert c.params == 256 * 128 + 256  # = 33024


@pytest.mark.parametrize(
    "alpha, beta, with_c, per_output",
    [
        (1.0, 1.0, True, 1),  # C add
        (1.0, 2.0, True, 2),  # C add + beta
        (2.0, 1.0, True, 2),  # C add + alpha
        (2.0, 1.0, False, 1),  # alpha only
        (1.0, 2.0, False, 0),  # beta without C scales nothing
        (1.0, 1.0, False, 0),  # plain product
    ],
)
def test_gemm_alpha_beta_c_terms(alpha, beta, with_c, per_output):
    inputs = [T([64, 128]), W([128, 256])] + ([W([64, 256])] if with_c else [])
    c = cost_of(make_node("Gemm", inputs, [T([64, 256])], alpha=alpha, beta=beta))
    assert c.flops == 2 * 64 * 256 * 128 + per_output * 64 * 256


def test_fused_gemm_activation():
    # A [16,32] @ B [32,64] + C, then LeakyRelu (2 FLOPs per element); output shape computed
    node = make_node(
        "FusedGemm", [T([16, 32]), W([32, 64]), W([64])], [T(None, UNDEFINED)], domain=MS, activation="LeakyRelu"
    )
    c = cost_of(node)
    assert c.macs == 16 * 64 * 32  # = 32768
    assert c.flops == 2 * 16 * 64 * 32 + (1 + 2) * 16 * 64  # C add + LeakyRelu: 65536 + 3072 = 68608
    assert c.bytes_written == 4 * 16 * 64  # = 4096


# ---------------------------------------------------------------------------------------------------------
# MatMul


@pytest.mark.parametrize(
    "a, b, y, macs",
    [
        ([5], [5, 6], [6], 1 * 6 * 5),  # 1-D A is a row vector: M=1 -> 30
        ([4, 5], [5], [4], 4 * 1 * 5),  # 1-D B is a column vector: N=1 -> 20
        ([5], [5], [], 5),  # dot product: M=N=1, K=5
        ([5], [2, 5, 6], [2, 6], 2 * 1 * 6 * 5),  # 1-D A against a batch: 60
        ([2, 1, 4, 5], [3, 5, 6], [2, 3, 4, 6], 2 * 3 * 4 * 6 * 5),  # batch [2,1] x [3] broadcasts to [2,3]: 720
    ],
)
def test_matmul_numpy_semantics(a, b, y, macs):
    c = cost_of(make_node("MatMul", [T(a), T(b)], [T(None, UNDEFINED)]))
    assert c.macs == macs
    assert c.flops == 2 * macs
    assert c.bytes_read == 4 * (int(np.prod(a)) + int(np.prod(b)))
    assert c.bytes_written == 4 * int(np.prod(y))  # the computed output shape
    # the shapes agree with numpy.matmul (an independent reference)
    assert list(np.matmul(np.zeros(a), np.zeros(b)).shape) == y
    assert list(matmul_dims(a, b).out_shape) == y


def test_matmul_batched_broadcast_exact():
    c = cost_of(make_node("MatMul", [T([2, 1, 4, 5]), T([3, 5, 6])], [T([2, 3, 4, 6])]))
    assert c.macs == 2 * 3 * 4 * 6 * 5  # prod(batch dims of Y) * M * N * K = 720
    assert c.flops == 1440
    assert c.bytes_read == 4 * (2 * 4 * 5 + 3 * 5 * 6)  # = 4 * (40 + 90) = 520
    assert c.bytes_written == 4 * 2 * 3 * 4 * 6  # = 576


def test_matmul_unknown_input_raises():
    with pytest.raises(UnknownShape):
        cost_of(make_node("MatMul", [T(None), T([5, 6])], [T(None)]))


def test_matmul_integer_bytes():
    node = make_node(
        "MatMulInteger",
        [T([32, 64], UINT8), W([64, 16], INT8), T([], UINT8), W([], INT8)],
        [T([32, 16], INT32)],
    )
    c = cost_of(node)
    assert c.macs == 32 * 16 * 64  # = 32768
    assert c.flops == 2 * 32768  # zero points folded into the integer accumulation
    assert c.bytes_read == 32 * 64 + 64 * 16 + 1 + 1  # 1 byte per element: 2048 + 1024 + 2 = 3074
    assert c.bytes_written == 4 * 32 * 16  # int32 = 2048
    assert c.params == 64 * 16 + 1  # B and its zero point = 1025


def test_qlinear_matmul_bytes_and_requant():
    inputs = [
        T([32, 64], UINT8),  # a
        W([], FLOAT),  # a_scale
        W([], UINT8),  # a_zero_point
        W([64, 16], INT8),  # b
        W([], FLOAT),  # b_scale
        W([], INT8),  # b_zero_point
        W([], FLOAT),  # y_scale
        W([], UINT8),  # y_zero_point
    ]
    c = cost_of(make_node("QLinearMatMul", inputs, [T([32, 16], UINT8)]))
    assert c.macs == 32 * 16 * 64  # = 32768
    assert c.flops == 2 * 32768 + 2 * 32 * 16  # + requantize (2) per output = 65536 + 1024 = 66560
    assert c.bytes_read == 2048 + 4 + 1 + 1024 + 4 + 1 + 4 + 1  # = 3087
    assert c.bytes_written == 32 * 16  # uint8 = 512
    assert c.params == 1 + 1 + 1024 + 1 + 1 + 1 + 1  # = 1030


# ---------------------------------------------------------------------------------------------------------
# onnxruntime matmul variants


def test_fused_matmul_trans_b_alpha():
    # A [2,8,16] @ B^T with B [2,32,16] -> Y [2,8,32], scaled by alpha
    a, b = T([2, 8, 16]), T([2, 32, 16])
    node = make_node("FusedMatMul", [a, b], [T(None, UNDEFINED)], domain=MS, transB=1, alpha=0.125)
    c = cost_of(node)
    assert c.macs == 2 * 8 * 32 * 16  # = 8192
    assert c.flops == 2 * 8192 + 2 * 8 * 32  # + one multiply per output for alpha = 16384 + 512 = 16896
    assert c.bytes_written == 4 * 2 * 8 * 32  # = 2048


def test_fused_matmul_unit_alpha_is_free():
    node = make_node("FusedMatMul", [T([2, 8, 16]), T([2, 16, 32])], [T([2, 8, 32])], domain=MS, alpha=1.0)
    assert cost_of(node).flops == 2 * 8192


@pytest.mark.parametrize(
    "a, b, attrs, y, k",
    [
        # transBatch moves dim 0 to just before the last dim: [8,2,16] -> [2,8,16]; K = 16
        ([8, 2, 16], [2, 16, 32], {"transBatchA": 1}, [2, 8, 32], 16),
        # transBatchB then transB: [32,2,16] -> [2,32,16] -> [2,16,32]; K = 16
        ([2, 8, 16], [32, 2, 16], {"transBatchB": 1, "transB": 1}, [2, 8, 32], 16),
        # transBatchA then transA on rank 4: [5,2,3,4] -> [2,3,5,4] -> [2,3,4,5]; K = 5
        ([5, 2, 3, 4], [2, 3, 5, 6], {"transBatchA": 1, "transA": 1}, [2, 3, 4, 6], 5),
    ],
)
def test_fused_matmul_trans_batch(a, b, attrs, y, k):
    c = cost_of(make_node("FusedMatMul", [T(a), T(b)], [T(None, UNDEFINED)], domain=MS, **attrs))
    assert c.macs == int(np.prod(y)) * k  # batch * M * N * K = elements(Y) * K
    assert c.bytes_written == 4 * int(np.prod(y))


@pytest.mark.ort
def test_fused_matmul_shapes_agree_with_onnxruntime():
    """The transBatch/trans shape rules checked against onnxruntime running the op (an independent reference)."""
    ort = pytest.importorskip("onnxruntime")
    a, b, attrs = [5, 2, 3, 4], [6, 2, 3, 5], {"transBatchA": 1, "transA": 1, "transBatchB": 1, "transB": 1}
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], domain=MS, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("A", FLOAT, a), helper.make_tensor_value_info("B", FLOAT, b)],
        [helper.make_tensor_value_info("Y", FLOAT, None)],
    )
    model = helper.make_model(
        graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"A": np.zeros(a, np.float32), "B": np.zeros(b, np.float32)}
    # A: [5,2,3,4] -> [2,3,5,4] -> [2,3,4,5]; B: [6,2,3,5] -> [2,3,6,5] -> [2,3,5,6]; Y: [2,3,4,6]
    y = list(session.run(None, feeds)[0].shape)
    c = cost_of(make_node("FusedMatMul", [T(a), T(b)], [T(None, UNDEFINED)], domain=MS, **attrs))
    assert c.bytes_written == 4 * int(np.prod(y))
    assert c.macs == int(np.prod(y)) * 5  # K = 5


def test_matmul_integer_to_float():
    # A uint8 [4,8,32] @ B int8 [32,16]; a_scale, b_scale per column, a_zero_point, no b_zero_point, bias [16]
    inputs = [T([4, 8, 32], UINT8), W([32, 16], INT8), T([], FLOAT), W([16], FLOAT), T([], UINT8), None, W([16])]
    c = cost_of(make_node("MatMulIntegerToFloat", inputs, [T(None, UNDEFINED)], domain=MS))
    assert c.macs == 4 * 8 * 16 * 32  # = 16384
    # 2*MACs + (scale multiply 1 + bias add 1) per output (4*8*16 = 512): 32768 + 1024 = 33792
    assert c.flops == 2 * 16384 + 2 * 512
    assert c.bytes_read == 1024 + 512 + 4 + 64 + 1 + 64  # = 1669
    assert c.bytes_written == 4 * 512  # float output (the scale's type) = 2048
    assert c.params == 512 + 16 + 16  # B, b_scale, bias = 544


def test_dynamic_quantize_matmul():
    # A float [8,32] quantized at run time, @ B int8 [32,16], bias [16]
    inputs = [T([8, 32]), W([32, 16], INT8), W([], FLOAT), W([], INT8), W([16])]
    c = cost_of(make_node("DynamicQuantizeMatMul", inputs, [T([8, 16])], domain=MS))
    assert c.macs == 8 * 16 * 32  # = 4096
    # 2*MACs + (min, max 2 + quantize 2) per element of A (256) + (scale 1 + bias 1) per output (128):
    # 8192 + 1024 + 256 = 9472
    assert c.flops == 2 * 4096 + (2 + 2) * 8 * 32 + (1 + 1) * 8 * 16
    assert c.bytes_read == 4 * 256 + 512 + 4 + 1 + 4 * 16  # = 1605
    assert c.bytes_written == 4 * 128  # = 512


def qgemm_inputs(quantized_output: bool, with_c: bool) -> list[Tensor | None]:
    inputs = [
        T([16, 32], UINT8),  # A
        T([], FLOAT),  # a_scale
        T([], UINT8),  # a_zero_point
        W([64, 32], INT8),  # B, transposed
        W([], FLOAT),  # b_scale
        W([], INT8),  # b_zero_point
        W([64], INT32) if with_c else None,  # C
    ]
    return inputs + ([W([], FLOAT), W([], UINT8)] if quantized_output else [])


def test_qgemm_quantized_output():
    node = make_node("QGemm", qgemm_inputs(True, True), [T(None, UNDEFINED)], domain=MS, transB=1)
    c = cost_of(node)
    assert c.macs == 16 * 64 * 32  # = 32768
    # 2*MACs + (requantize 2 + C add 1) per output (1024): 65536 + 3072 = 68608
    assert c.flops == 2 * 32768 + (2 + 1) * 16 * 64
    assert c.bytes_written == 16 * 64  # uint8, the output zero point's type = 1024


def test_qgemm_float_output_alpha():
    node = make_node("QGemm", qgemm_inputs(False, False), [T(None, UNDEFINED)], domain=MS, transB=1, alpha=2.0)
    c = cost_of(node)
    # 2*MACs + (scale multiply 1 + alpha 1) per output: 65536 + 2048 = 67584
    assert c.flops == 2 * 32768 + (1 + 1) * 16 * 64
    assert c.bytes_written == 4 * 16 * 64  # float = 4096


# ---------------------------------------------------------------------------------------------------------
# Einsum


def einsum_node(equation: str, *shapes: list[int], y: list[int] | None = None) -> NodeView:
    return make_node("Einsum", [T(s) for s in shapes], [T(y) if y is not None else T(None)], equation=equation)


def test_einsum_batched_matmul():
    c = cost_of(einsum_node("bij,bjk->bik", [2, 3, 4], [2, 4, 5], y=[2, 3, 5]))
    assert c.macs == 2 * 3 * 4 * 5  # all distinct letters b,i,j,k: 120
    assert c.flops == 240
    assert c.bytes_read == 4 * (24 + 40)  # = 256
    assert c.bytes_written == 4 * 30  # = 120


def test_einsum_implicit_output():
    # 'ij,jk' has implicit output 'ik' (letters seen once, sorted): Y [3,5]
    c = cost_of(einsum_node("ij,jk", [3, 4], [4, 5]))
    assert c.macs == 3 * 4 * 5  # = 60
    assert c.bytes_written == 4 * 3 * 5  # = 60


def test_einsum_ellipsis_broadcast():
    # '...' covers [2,7] in A and [7] in B, broadcast to [2,7]: Y [2,7,3,5]
    c = cost_of(einsum_node("...ij,...jk->...ik", [2, 7, 3, 4], [7, 4, 5]))
    assert c.macs == 2 * 7 * 3 * 4 * 5  # = 840
    assert c.bytes_written == 4 * 2 * 7 * 3 * 5  # = 840


def test_einsum_three_operands():
    # every point of i,j,k,l multiplies three operands: 2 MACs per point
    c = cost_of(einsum_node("ij,jk,kl->il", [2, 3], [3, 4], [4, 5]))
    assert c.macs == 2 * 3 * 4 * 5 * (3 - 1)  # = 240
    assert c.flops == 480


@pytest.mark.parametrize(
    "equation, shape, flops, y",
    [
        ("ii->", [6, 6], 6, []),  # trace: sums the 6 diagonal elements
        ("ii", [6, 6], 6, []),  # implicit form of the trace
        ("ij->j", [3, 4], 3 * 4, [4]),  # column sums: every element is summed
        ("ij->ji", [3, 4], 0, [4, 3]),  # transpose: nothing summed
        ("ij", [3, 4], 0, [3, 4]),  # implicit identity
        ("bii->bi", [2, 3, 3], 0, [2, 3]),  # batched diagonal: nothing summed
        ("...ii->...", [2, 4, 4], 2 * 4, [2]),  # batched trace: 4 diagonal elements per batch
    ],
)
def test_einsum_single_operand(equation, shape, flops, y):
    c = cost_of(einsum_node(equation, shape))
    assert c.macs == 0
    assert c.flops == flops
    assert c.bytes_written == 4 * int(np.prod(y))
    assert list(np.einsum(equation, np.zeros(shape)).shape) == y  # numpy agrees on the output shape


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("ij,jk", [[3, 4], [4, 5]]),
        ("ba", [[3, 4]]),  # implicit output sorts the letters: 'ab', a transpose
        ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),
        ("...ij,...jk", [[2, 7, 3, 4], [7, 4, 5]]),
        ("i...,i...->...", [[3, 2, 5], [3, 5]]),
        ("a...b,b...c->ac...", [[2, 6, 3], [3, 1, 4]]),
        ("Ab,bC", [[2, 3], [3, 4]]),
    ],
)
def test_parse_einsum_output_shape_agrees_with_numpy(equation, shapes):
    _, output, sizes = parse_einsum(equation, shapes)
    expected = np.einsum(equation, *[np.zeros(s) for s in shapes]).shape
    assert tuple(sizes[label] for label in output) == expected


def moe_node(rows: int) -> NodeView:
    """4 experts of hidden 8 and intermediate 16 (fc1 and fc3 [4, 8, 16], fc2 [4, 16, 8]), top 2, silu."""
    inputs = [T([rows, 8]), T([rows, 4]), W([4, 8, 16]), None, W([4, 16, 8]), None, W([4, 8, 16])]
    return make_node("MoE", inputs, [T([rows, 8])], domain=MS, k=2, activation_type="silu")


def test_mixture_of_experts():
    c = cost_of(moe_node(3))
    # 3 rows x 2 experts = 6 passes, each over one expert's 128 + 128 + 128 weights
    assert c.macs == 6 * 384 == 2304
    softmax = 5 * 3 * 4  # the router's 4 logits per row
    silu = 5 * 6 * 16  # x * sigmoid(x) per intermediate element (fc2's 128 / hidden 8 = 16) of each pass
    combine = 2 * 6 * 8  # each pass's output weighted into the row's
    assert c.flops == 2 * 2304 + softmax + silu + combine == 5244
    # 6 passes reach all 4 experts: input 96 + router 48 + the three tables 3 x 512 floats
    assert (c.bytes_read, c.bytes_written) == (96 + 48 + 3 * 512 * 4, 96)
    assert c.params == 3 * 512


def test_mixture_of_experts_reads_only_the_experts_a_token_uses():
    # one row, top 2: 2 of the 4 experts' weights read
    assert cost_of(moe_node(1)).bytes_read == 32 + 16 + 3 * 512 * 4 // 2


def test_quantized_mixture_of_experts_counts_weights_not_bytes():
    # The same experts in 4 bits: each uint8 holds 2 weights (fc1 [4, 16, 4] = 4 x 128 weights), fp32 scales [4, 16]
    packed = [W([4, 16, 4], UINT8), W([4, 16]), None]
    inputs = [T([3, 8]), T([3, 4]), *packed, W([4, 8, 8], UINT8), W([4, 8]), None, W([4, 16, 4], UINT8), W([4, 16])]
    c = cost_of(make_node("QMoE", inputs, [T([3, 8])], domain=MS, k=2, activation_type="silu", expert_weight_bits=4))
    assert c.macs == 6 * 384
    # as MoE's, plus dequantizing the 4 experts used: 2 FLOPs per weight
    assert c.flops == 5244 + 2 * 4 * 384
    assert c.params == 3 * 512 + 64 + 32 + 64  # logical weights + scales
