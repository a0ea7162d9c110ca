"""Cost functions: onnxruntime's weight-only block-quantized products, MatMulNBits and the fused forms its
optimizer and GenAI's builder emit for a decoder layer (MatMulNBitsMlp, MatMulNBitsQkv).

Each weight matrix ``N x K`` is stored in ``bits`` bits a weight, in blocks of ``block_size`` along K with a
scale (and zero point) a block. A product of ``rows`` rows of A (all its leading axes together) by it is
``rows * N * K`` MACs, 2 FLOPs each, plus :data:`~onnxroof.costs.common.WEIGHT_DEQUANTIZE_FLOPS` per weight
element (each is dequantized once a call, ``(q - zero_point) * scale``) and one add per output element for a
bias. At ``accuracy_level`` 4 onnxruntime's CPU kernel quantizes A to int8 in blocks along K first:
:data:`ACTIVATION_QUANTIZE_FLOPS` per element of A, once however many weights share that A.

Bytes are those stored (the packed weights as bytes); params count each matrix's N*K logical weights, not the
packed bytes, plus the scales, zero points and biases.

The fused forms share one A across their projections and may normalize it first, as their ops define it
(onnxruntime's ContribOperators.md): a (Skip)SimplifiedLayerNormalization of A at the normalization family's
RMS constants, then the projections, then (MatMulNBitsMlp) the gate's activation times the up projection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from math import prod

from onnxroof.costs import Cost, NodeView, logical_weights, register, register_packed, weight_params
from onnxroof.costs.common import (
    GATE_ACTIVATION_FLOPS,
    RMS_NORM_FLOPS,
    WEIGHT_DEQUANTIZE_FLOPS,
    kernel_cost,
    mac_kernel_cost,
    with_output_shape,
)
from onnxroof.ir import UnknownShape

__all__ = [
    "ACTIVATION_QUANTIZE_FLOPS",
    "INT8_ACCURACY_LEVEL",
    "NBITS_PRODUCTS",
    "matmul_nbits",
    "matmul_nbits_mlp",
    "matmul_nbits_qkv",
    "nbits_columns",
]

# FLOPs per element of A that MatMulNBits quantizes to int8 in blocks along K at accuracy_level 4: an absolute
# value and a max for the block's range, and a multiply by its inverse scale (the rounding is a conversion, free
# as Cast is).
ACTIVATION_QUANTIZE_FLOPS: float = 3
INT8_ACCURACY_LEVEL = 4  # onnxruntime's "input int8, accumulator int32"

# The products whose integer inputs are weights of a few bits unpacked inside the product: they compute at A's
# type, or in int8 at accuracy_level 4, never at the uint8 of their stored weights.
NBITS_PRODUCTS: frozenset[str] = frozenset({"MatMulNBits", "MatMulNBitsMlp", "MatMulNBitsQkv"})

# The inputs of each op: its packed weights, each with the attribute naming its N, and its biases.
_MLP_WEIGHTS = {3: "N", 6: "N"}  # gate_B, up_B
_MLP_BIASES = (5, 8)
_QKV_WEIGHTS = {3: "Nq", 6: "Nkv", 9: "Nkv"}  # q_B, k_B, v_B
_QKV_BIASES = (5, 8, 11)
_SKIP, _NORM_SCALE = 1, 2  # of both fused forms


def nbits_columns(node: NodeView) -> int:
    """The output columns of every weight matrix of the product together: N, 2 N for gate and up, Nq + 2 Nkv."""
    weights = {"MatMulNBits": {1: "N"}, "MatMulNBitsMlp": _MLP_WEIGHTS, "MatMulNBitsQkv": _QKV_WEIGHTS}
    return sum(_required(node, name) for name in weights[node.op_type].values())


def _required(node: NodeView, name: str) -> int:
    value = int(node.attr(name, 0) or 0)
    if value <= 0:
        raise UnknownShape(f"{node.name}: {node.op_type} has no {name} attribute")
    return value


def _product_flops(node: NodeView, rows: int, columns: int, biases: int) -> float:
    """The FLOPs of ``rows`` rows of A by weights of ``columns`` output columns in all, each of K: the products,
    every weight dequantized once, ``biases`` bias adds a row, and A quantized once at accuracy_level 4."""
    k = _required(node, "K")
    flops = 2 * rows * columns * k + WEIGHT_DEQUANTIZE_FLOPS * columns * k + biases * rows
    if int(node.attr("accuracy_level", 0) or 0) == INT8_ACCURACY_LEVEL:
        flops += ACTIVATION_QUANTIZE_FLOPS * rows * k
    return flops


def _params(node: NodeView, packed: Iterable[int]) -> int:
    """Every input's params but those of the packed weights at ``packed``, plus their logical elements."""
    skipped = set(packed)
    others = [t for i, t in enumerate(node.inputs) if i not in skipped]
    return weight_params(others) + sum(logical_weights(node).values())


def _weights(node: NodeView, inputs: dict[int, str]) -> dict[int, int]:
    k = _required(node, "K")
    return {i: _required(node, name) * k for i, name in inputs.items()}


@register_packed("com.microsoft::MatMulNBits")
def matmul_nbits_weights(node: NodeView) -> dict[int, int]:
    """B (input 1) holds the N*K weights, ``bits`` each."""
    return _weights(node, {1: "N"})


@register("com.microsoft::MatMulNBits", engine="gemm")
def matmul_nbits(node: NodeView) -> Cost:
    """onnxruntime MatMulNBits (A, B packed, scales, zero_points, g_idx, bias; attributes K, N, bits): A
    ``[..., K]`` times a ``K x N`` weight stored block-quantized in ``bits`` bits, as the module states: MACs =
    ``rows * N * K``; FLOPs = 2 * MACs + 2 per weight (N*K) + 1 per output element with a bias, + 3 per element
    of A at accuracy_level 4."""
    a = node.need_input(0, "A")
    rows, n = prod(a.need_shape()[:-1]), _required(node, "N")
    flops = _product_flops(node, rows, n, n * int(node.input(5) is not None))
    out_shape = (*a.need_shape()[:-1], n)
    cost = mac_kernel_cost(with_output_shape(node, out_shape, a.dtype), flops, rows * n * _required(node, "K"))
    return replace(cost, params=_params(node, [1]))


def _norm_flops(node: NodeView, elements: int) -> float:
    """The fused (Skip)SimplifiedLayerNormalization of A: the skip add (1) where a skip is given, then the RMS
    norm's 4 a element (square, add into the sum, multiply by 1/rms, multiply by the scale); none without a
    norm_scale."""
    if node.input(_NORM_SCALE) is None:
        return 0.0
    return (int(node.input(_SKIP) is not None) + RMS_NORM_FLOPS) * elements


def _fused(node: NodeView, weights: dict[int, str], biases: tuple[int, ...], extra: float) -> Cost:
    """A fused form's Cost: A's norm, its projections of ``weights``, the bias columns of ``biases`` given, and
    ``extra`` FLOPs after the products; every input read and output written once (outputs of the product's
    columns, and A's shape for the residual sum, where shape inference left them unknown)."""
    a = node.need_input(0, "A")
    lead, k = a.need_shape()[:-1], _required(node, "K")
    rows = prod(lead)
    columns = sum(_required(node, name) for name in weights.values())
    bias_columns = sum(_required(node, weights[i - 2]) for i in biases if node.input(i) is not None)
    flops = _norm_flops(node, rows * k) + _product_flops(node, rows, columns, bias_columns) + extra
    out_columns = (
        [_required(node, "N")] if node.op_type == "MatMulNBitsMlp" else [_required(node, weights[i]) for i in weights]
    )
    shapes = {i: (*lead, n) for i, n in enumerate(out_columns)}
    shapes[len(out_columns)] = a.need_shape()  # input_skip_bias_sum
    cost = kernel_cost(node, flops, shapes, dtypes=dict.fromkeys(shapes, a.dtype))
    return replace(cost, macs=rows * columns * k, params=_params(node, weights))


@register_packed("com.microsoft::MatMulNBitsMlp")
def matmul_nbits_mlp_weights(node: NodeView) -> dict[int, int]:
    """gate_B and up_B (inputs 3 and 6) hold N*K weights each."""
    return _weights(node, _MLP_WEIGHTS)


@register("com.microsoft::MatMulNBitsMlp", engine="gemm")
def matmul_nbits_mlp(node: NodeView) -> Cost:
    """MatMulNBitsMlp (A, skip, norm_scale, gate_B, gate_scales, gate_bias, up_B, up_scales, up_bias;
    attributes K, N, activation): ``Y = activation(A_norm @ gate + gate_bias) * (A_norm @ up + up_bias)``.
    MACs = ``2 * rows * N * K``; FLOPs = the norm's (4, or 5 with a skip, per element of A where norm_scale is
    given) + 2 * MACs + 2 per weight (2 N K) + 1 per output element per bias + 3 per element of A at accuracy
    level 4 + the activation (silu 5, gelu 5, relu 1) and the multiply by up (1) per element of Y."""
    a = node.need_input(0, "A")
    rows = prod(a.need_shape()[:-1])
    name = node.text("activation", "").lower()
    activation = GATE_ACTIVATION_FLOPS.get(name, 1.0)
    cost = _fused(node, _MLP_WEIGHTS, _MLP_BIASES, (activation + 1) * rows * _required(node, "N"))
    if name in GATE_ACTIVATION_FLOPS:
        return cost
    return cost.with_note(f"activation {name!r} has no stated cost; counted as 1 FLOP per element")


@register_packed("com.microsoft::MatMulNBitsQkv")
def matmul_nbits_qkv_weights(node: NodeView) -> dict[int, int]:
    """q_B (input 3) holds Nq*K weights, k_B and v_B (inputs 6 and 9) Nkv*K each."""
    return _weights(node, _QKV_WEIGHTS)


@register("com.microsoft::MatMulNBitsQkv", engine="gemm")
def matmul_nbits_qkv(node: NodeView) -> Cost:
    """MatMulNBitsQkv (A, skip, norm_scale, then weight, scales and bias of Q, K and V; attributes K, Nq, Nkv):
    Q, K and V projections of one normalized A. MACs = ``rows * (Nq + 2 Nkv) * K``; FLOPs = the norm's (4, or 5
    with a skip, per element of A) + 2 * MACs + 2 per weight + 1 per output element per bias + 3 per element of
    A at accuracy level 4."""
    return _fused(node, _QKV_WEIGHTS, _QKV_BIASES, 0.0)
