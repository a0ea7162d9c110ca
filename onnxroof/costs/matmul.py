"""Cost functions: matrix products.

Gemm, MatMul, Einsum, their integer and quantized forms (MatMulInteger, QLinearMatMul) and onnxruntime's fused
and quantized variants (FusedGemm, FusedMatMul, MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm, MoE, QMoE),
and Det, whose LU factorization is a sequence of rank-1 matrix updates. The weight-only block-quantized products
(MatMulNBits and its fused forms) are in nbits.py.

A product of an ``M x K`` and a ``K x N`` matrix is ``M*N*K`` MACs (``2*M*N*K`` FLOPs), times the number of
broadcast batch matrices; per output element there is one more FLOP for each of a bias add, a non-unit alpha and
a non-unit beta (Gemm), and the stated constants for dequantization, requantization and fused activations. Shapes
come from the inputs, so contrib ops whose output shape inference left unknown are still counted; only an
unknown input shape raises :class:`~onnxroof.costs.UnknownShape`.

Gemm, MatMul and their variants register the engine class "gemm"; ``onnxroof.predict.op_classes`` makes it "matmul"
when the second operand is not a weight (a product of two activations, which the engine cannot prepack). Einsum
and Det are OTHER: no class describes their kernels.

Backward (Gemm, MatMul): ``dA = dY B^T`` and ``dB = A^T dY`` are products of the forward's size, so 2 x the
forward's MACs and FLOPs, plus the forward's per-output extras once (the bias gradient, alpha, beta), as
``common.product_backward`` states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import prod
from typing import NamedTuple

from onnxroof.costs import (
    OTHER,
    Cost,
    NodeView,
    register,
    register_backward,
    register_packed,
    weight_params,
)
from onnxroof.costs.common import (
    GATE_ACTIVATION_FLOPS,
    REQUANTIZE_FLOPS,
    SOFTMAX_FLOPS,
    WEIGHT_DEQUANTIZE_FLOPS,
    activation_flops,
    broadcast_shape,
    mac_kernel_cost,
    product_backward,
    with_output_shape,
)
from onnxroof.ir import InvalidNode, Tensor, UnknownShape, format_shape

__all__ = [
    "ACCUMULATOR_SCALE_FLOPS",
    "DYNAMIC_RANGE_FLOPS",
    "MatMulDims",
    "det_cost",
    "einsum_cost",
    "gemm_dims",
    "matmul_dims",
    "mixture_of_experts",
    "parse_einsum",
]

# FLOPs per output element to turn an int32 accumulator into a float (MatMulIntegerToFloat,
# DynamicQuantizeMatMul, QGemm without an output scale): one multiply by the combined scale a_scale * b_scale.
# The int-to-float conversion is not an arithmetic step, and the zero points were already corrected in the integer
# accumulation, so this is 1 where DequantizeLinear of a stored int8 tensor, (q - zero_point) * scale, is 2.
ACCUMULATOR_SCALE_FLOPS: float = 1

# FLOPs per input element to find the quantization range of a float tensor at run time (DynamicQuantizeMatMul):
# one min and one max.
DYNAMIC_RANGE_FLOPS: float = 2


class MatMulDims(NamedTuple):
    """The sizes of a (batched) matrix product: ``batch`` matrices of ``m x k`` times ``k x n``, and Y's shape."""

    batch: int
    m: int
    k: int
    n: int
    out_shape: tuple[int, ...]

    @property
    def macs(self) -> int:
        return self.batch * self.m * self.n * self.k


def matmul_dims(a_shape: Sequence[int], b_shape: Sequence[int]) -> MatMulDims:
    """numpy.matmul semantics: a 1-D A is a row vector and a 1-D B a column vector (their added dim is dropped
    from Y); the leading (batch) dims of A and B broadcast."""
    a, b = tuple(a_shape), tuple(b_shape)
    if not a or not b:
        raise InvalidNode(f"a matrix product of shapes {format_shape(a)} and {format_shape(b)}: a scalar operand")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise InvalidNode(
            f"a matrix product of shapes {format_shape(a)} and {format_shape(b)}: "
            f"inner dims {a2[-1]} and {b2[-2]} differ"
        )
    batch = broadcast_shape(a2[:-2], b2[:-2])
    m, k, n = a2[-2], a2[-1], b2[-1]
    out = (*batch, *((m,) if len(a) > 1 else ()), *((n,) if len(b) > 1 else ()))
    return MatMulDims(prod(batch), m, k, n, tuple(out))


def gemm_dims(a_shape: Sequence[int], b_shape: Sequence[int], trans_a: bool, trans_b: bool) -> MatMulDims:
    """Gemm: A is ``M x K`` (``K x M`` when transA), B is ``K x N`` (``N x K`` when transB)."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise InvalidNode(f"Gemm operands of shapes {format_shape(a_shape)} and {format_shape(b_shape)}: not matrices")
    m, k = (a_shape[1], a_shape[0]) if trans_a else (a_shape[0], a_shape[1])
    n = b_shape[0] if trans_b else b_shape[1]
    k_of_b = b_shape[1] if trans_b else b_shape[0]
    if k != k_of_b:
        raise InvalidNode(
            f"Gemm operands of shapes {format_shape(a_shape)} and {format_shape(b_shape)} "
            f"(transA={int(trans_a)}, transB={int(trans_b)}): inner dims {k} and {k_of_b} differ"
        )
    return MatMulDims(1, m, k, n, (m, n))


def _need(node: NodeView, *indices: int) -> list[Tensor]:
    """The inputs at ``indices``, each required to be present and of known shape."""
    tensors = []
    for i in indices:
        t = node.need_input(i)
        t.need_shape()
        tensors.append(t)
    return tensors


def _present(node: NodeView, index: int) -> int:
    return int(node.input(index) is not None)


def _gemm(node: NodeView, activation: str = "") -> Cost:
    """Gemm count: 2*M*N*K, plus per output element one add for C, one multiply for alpha != 1, one multiply for
    beta != 1 when C is present, and the fused activation's constant."""
    a, b = _need(node, 0, 1)
    dims = gemm_dims(a.need_shape(), b.need_shape(), bool(node.attr("transA", 0)), bool(node.attr("transB", 0)))
    has_c = _present(node, 2)
    scales_by_alpha = int(float(node.attr("alpha", 1.0)) != 1.0)
    scales_c_by_beta = has_c * int(float(node.attr("beta", 1.0)) != 1.0)
    act, note = activation_flops(activation)
    per_output = has_c + scales_by_alpha + scales_c_by_beta + act
    outputs = prod(dims.out_shape)
    resolved = with_output_shape(node, dims.out_shape, a.dtype)
    return mac_kernel_cost(resolved, 2 * dims.macs + per_output * outputs, dims.macs, note)


@register("Gemm", engine="gemm")
def gemm(node: NodeView) -> Cost:
    """ONNX Gemm ``alpha * op(A) @ op(B) + beta * C``: 2*M*N*K FLOPs, plus M*N each for the C add, a non-unit
    alpha and (with C) a non-unit beta."""
    return _gemm(node)


@register("com.microsoft::FusedGemm", engine="gemm")
def fused_gemm(node: NodeView) -> Cost:
    """onnxruntime FusedGemm: Gemm followed by the ``activation`` attribute's per-element FLOPs
    (:data:`~onnxroof.costs.common.ACTIVATION_FLOPS`) on each of the M*N outputs."""
    return _gemm(node, node.text("activation"))


def _matmul(node: NodeView, a_index: int, b_index: int, per_output: float, fallback_dtype: int | None = None) -> Cost:
    """numpy-style matmul of inputs ``a_index`` and ``b_index``: batch*M*N*K MACs, 2 FLOPs each, plus
    ``per_output`` FLOPs per output element."""
    a, b = _need(node, a_index, b_index)
    dims = matmul_dims(a.need_shape(), b.need_shape())
    resolved = with_output_shape(node, dims.out_shape, a.dtype if fallback_dtype is None else fallback_dtype)
    return mac_kernel_cost(resolved, 2 * dims.macs + per_output * prod(dims.out_shape), dims.macs)


@register("MatMul", engine="gemm")
def matmul(node: NodeView) -> Cost:
    """ONNX MatMul (numpy.matmul semantics, 1-D operands and batch broadcasting): prod(batch dims of Y) * M * N * K
    MACs, 2 FLOPs each."""
    return _matmul(node, 0, 1, 0)


@register("MatMulInteger", engine="gemm")
def matmul_integer(node: NodeView) -> Cost:
    """ONNX MatMulInteger (A, B, a_zero_point, b_zero_point -> int32): the MatMul MAC count on 8-bit operands;
    the zero points are folded into the integer accumulation and not counted separately."""
    return _matmul(node, 0, 1, 0)


@register("QLinearMatMul", engine="gemm")
def qlinear_matmul(node: NodeView) -> Cost:
    """ONNX QLinearMatMul (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point): the MatMul
    MAC count on 8-bit operands plus :data:`~onnxroof.costs.common.REQUANTIZE_FLOPS` per output element."""
    return _matmul(node, 0, 3, REQUANTIZE_FLOPS)


@register("com.microsoft::MatMulIntegerToFloat", engine="gemm")
def matmul_integer_to_float(node: NodeView) -> Cost:
    """onnxruntime MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias): the integer
    MatMul, then :data:`ACCUMULATOR_SCALE_FLOPS` per output element and one add per output element for the bias."""
    scale = node.input(2)
    return _matmul(node, 0, 1, ACCUMULATOR_SCALE_FLOPS + _present(node, 6), None if scale is None else scale.dtype)


@register("com.microsoft::DynamicQuantizeMatMul", engine="gemm")
def dynamic_quantize_matmul(node: NodeView) -> Cost:
    """onnxruntime DynamicQuantizeMatMul (A float, B int8/uint8, b_scale, b_zero_point, bias): quantizes A at run
    time (:data:`DYNAMIC_RANGE_FLOPS` + :data:`~onnxroof.costs.common.REQUANTIZE_FLOPS` per element of A), then the
    integer MatMul, :data:`ACCUMULATOR_SCALE_FLOPS` per output element and one add per output element for the bias."""
    a = _need(node, 0)[0]
    cost = _matmul(node, 0, 1, ACCUMULATOR_SCALE_FLOPS + _present(node, 4))
    return replace(cost, flops=cost.flops + (DYNAMIC_RANGE_FLOPS + REQUANTIZE_FLOPS) * a.numel)


@register("com.microsoft::FusedMatMul", engine="gemm")
def fused_matmul(node: NodeView) -> Cost:
    """onnxruntime FusedMatMul: ``alpha * op(A) @ op(B)`` with numpy batching, where op applies transBatch (dim 0
    moved to just before the last dim) and then trans (swap of the last two dims). batch*M*N*K MACs, 2 FLOPs each,
    plus one multiply per output element for a non-unit alpha."""
    a, b = _need(node, 0, 1)
    a_shape = _fused_matmul_operand(a.need_shape(), node.attr("transBatchA", 0), node.attr("transA", 0))
    b_shape = _fused_matmul_operand(b.need_shape(), node.attr("transBatchB", 0), node.attr("transB", 0))
    dims = matmul_dims(a_shape, b_shape)
    alpha_mults = prod(dims.out_shape) if float(node.attr("alpha", 1.0)) != 1.0 else 0
    return mac_kernel_cost(with_output_shape(node, dims.out_shape, a.dtype), 2 * dims.macs + alpha_mults, dims.macs)


def _fused_matmul_operand(shape: tuple[int, ...], trans_batch: int, trans: int) -> tuple[int, ...]:
    """The shape FusedMatMul multiplies: ``[d0, d1, ..., dn-2, dn-1]`` becomes ``[d1, ..., dn-2, d0, dn-1]`` under
    transBatch (rank 3 and up), then the last two dims swap under trans (rank 2 and up)."""
    if trans_batch and len(shape) >= 3:
        shape = (*shape[1:-1], shape[0], shape[-1])
    if trans and len(shape) >= 2:
        shape = (*shape[:-2], shape[-1], shape[-2])
    return shape


@register("com.microsoft::QGemm", engine="gemm")
def qgemm(node: NodeView) -> Cost:
    """onnxruntime QGemm (A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point): 2*M*N*K
    FLOPs on 8-bit operands, plus per output element one add for the int32 C, one multiply for alpha != 1, and
    either :data:`~onnxroof.costs.common.REQUANTIZE_FLOPS` (with y_scale: a quantized output) or
    :data:`ACCUMULATOR_SCALE_FLOPS` (a float output)."""
    a, b = _need(node, 0, 3)
    dims = gemm_dims(a.need_shape(), b.need_shape(), bool(node.attr("transA", 0)), bool(node.attr("transB", 0)))
    y_scale, a_scale = node.input(7), node.input(1)
    convert = REQUANTIZE_FLOPS if y_scale is not None else ACCUMULATOR_SCALE_FLOPS
    per_output = convert + _present(node, 6) + (float(node.attr("alpha", 1.0)) != 1.0)
    if y_scale is not None:
        y_zero_point = node.input(8)
        fallback = y_zero_point.dtype if y_zero_point is not None else a.dtype
    else:
        fallback = a_scale.dtype if a_scale is not None else a.dtype
    resolved = with_output_shape(node, dims.out_shape, fallback)
    return mac_kernel_cost(resolved, 2 * dims.macs + per_output * prod(dims.out_shape), dims.macs)


# ---------------------------------------------------------------------------------------------------------
# Einsum.


def parse_einsum(equation: str, shapes: Sequence[Sequence[int]]) -> tuple[list[list[str]], list[str], dict[str, int]]:
    """Parse an einsum equation against its operand shapes.

    Returns the labels of each operand, the labels of the output and the size of every label. The dims covered by
    ``...`` get labels ``"...0"``, ``"...1"``, ... aligned from the right across operands (numpy broadcasting).
    Without ``->`` the output is implicit: the ellipsis dims, then the letters that occur exactly once, sorted.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise InvalidNode(f"einsum {equation!r} names {len(terms)} operands, the node has {len(shapes)}")
    ell_ranks = [len(s) - len(t.replace("...", "")) if "..." in t else 0 for t, s in zip(terms, shapes)]
    ell_rank = max(ell_ranks, default=0)
    ell_dims = [tuple(s)[t.index("...") : t.index("...") + r] for t, s, r in zip(terms, shapes, ell_ranks) if r]
    ell_shape = broadcast_shape(*ell_dims) if ell_dims else ()
    sizes: dict[str, int] = {f"...{i}": int(d) for i, d in enumerate(ell_shape)}

    def expand(term: str, rank: int) -> list[str]:
        head, ell, tail = term.partition("...")
        middle = [f"...{i}" for i in range(ell_rank - rank, ell_rank)] if ell else []
        return [*head, *middle, *tail]

    operands = []
    for term, shape, rank in zip(terms, shapes, ell_ranks):
        labels = expand(term, rank)
        if len(labels) != len(shape):
            raise InvalidNode(f"einsum term {term!r} does not match shape {format_shape(shape)}")
        for label, dim in zip(labels, shape):
            if not label.startswith("..."):
                size = sizes.get(label, 1)
                if size != dim and size != 1 and dim != 1:
                    raise InvalidNode(
                        f"einsum {equation!r}: label {label!r} is {size} in one operand and {dim} in another"
                    )
                sizes[label] = max(size, int(dim))
        operands.append(labels)
    if arrow:
        output = expand(rhs, ell_rank)
        missing = [label for label in output if label not in sizes]
        if missing:
            raise InvalidNode(f"einsum {equation!r}: output label {missing[0]!r} names no operand's dim")
    else:
        letters = [c for t in terms for c in t.replace("...", "")]
        output = [f"...{i}" for i in range(ell_rank)] + sorted(c for c in set(letters) if letters.count(c) == 1)
    return operands, output, sizes


def einsum_cost(equation: str, shapes: Sequence[Sequence[int]]) -> tuple[float, float, tuple[int, ...]]:
    """(FLOPs, MACs, output shape) of an einsum, counted as the naive loop nest over every distinct label.

    Two or more operands: every point of the full index space (the product of the sizes of all distinct labels)
    multiplies the operands together and accumulates, which is ``(operands - 1)`` MACs per point, 2 FLOPs each.
    This is exact for contractions such as ``bij,bjk->bik`` and an upper bound for products without a reduction.
    One operand: a transpose, diagonal or copy (no label summed away) costs 0 FLOPs; a sum or trace (some label
    absent from the output) costs one add per input element summed, i.e. the product of its distinct label sizes
    (``ij->j``: i*j; ``ii->``: i). Neither counts as MACs.
    """
    operands, output, sizes = parse_einsum(equation, shapes)
    out_shape = tuple(sizes[label] for label in output)
    labels = {label for labels in operands for label in labels}
    points = prod(sizes[label] for label in labels)
    if len(operands) >= 2:
        macs = points * (len(operands) - 1)
        return 2 * macs, macs, out_shape
    summed = labels - set(output)
    return (points if summed else 0), 0, out_shape


@register("Einsum", engine=OTHER)
def einsum(node: NodeView) -> Cost:
    """ONNX Einsum, counted by :func:`einsum_cost` (naive loop nest; one FLOP per summed element for a single
    operand)."""
    inputs = [t for t in node.inputs if t is not None]
    if not inputs:
        raise UnknownShape(f"{node.name}: no inputs")
    flops, macs, out_shape = einsum_cost(node.text("equation"), [t.need_shape() for t in inputs])
    return mac_kernel_cost(with_output_shape(node, out_shape, inputs[0].dtype), flops, macs)


def det_cost(m: int) -> tuple[int, int]:
    """(FLOPs, MACs) of the determinant of one ``m x m`` matrix by LU factorization with partial pivoting (what
    Eigen's ``determinant()`` runs for onnxruntime's Det). Elimination step k = 0 .. m-2 has j = m-1-k rows below
    the pivot: j comparisons to find the pivot, j divisions for the multipliers and a j x j trailing update of one
    multiply-subtract (1 MAC) per element; then m-1 multiplies of the diagonal. With S1 = sum j = m(m-1)/2 and
    S2 = sum j^2 = (m-1)m(2m-1)/6: MACs = S2, FLOPs = 2 S2 + 2 S1 + (m - 1), about 2/3 m^3 (LAPACK getrf's count).
    Row-swap sign flips are not counted."""
    s1 = m * (m - 1) // 2
    s2 = (m - 1) * m * (2 * m - 1) // 6
    return 2 * s2 + 2 * s1 + max(m - 1, 0), s2


@register("Det", engine=OTHER)
def det(node: NodeView) -> Cost:
    """Det of ``[*, M, M]``: ``prod(*) * det_cost(M)`` (LU with partial pivoting, about 2/3 M^3 FLOPs per matrix;
    the trailing updates are MACs). Reads X, writes the ``[*]`` determinants."""
    (x,) = _need(node, 0)
    shape = x.need_shape()
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise UnknownShape(f"{node.name}: Det input {x.name} of shape {shape} is not a batch of square matrices")
    batch = prod(shape[:-2])
    flops, macs = det_cost(shape[-1])
    return mac_kernel_cost(with_output_shape(node, shape[:-2], x.dtype), batch * flops, batch * macs)


@register_backward("Gemm", "MatMul")
def gemm_backward(node: NodeView, forward: Cost) -> Cost:
    """dA and dB at the forward's MACs each, plus Gemm's bias gradient dC when C is given."""
    return product_backward(forward, node.need_input(0, "A"), node.need_input(1, "B"), node.input(2))


# ---------------------------------------------------------------------------------------------------------
# MoE and QMoE: a mixture of experts, each token through its top k of them.

# Where each op reads its expert weights (fc1, fc2, fc3) and what their element packs: MoE's are plain, QMoE's
# uint8 hold 8 / expert_weight_bits weights each.
_EXPERT_WEIGHTS = {"MoE": (2, 4, 6), "QMoE": (2, 5, 8)}


def _expert_elements(node: NodeView, index: int) -> int:
    """The logical weights of one expert's ``fc`` input at ``index`` (0 where absent)."""
    t = node.input(index)
    if t is None:
        return 0
    shape = t.need_shape()
    packed = 8 // int(node.attr("expert_weight_bits", 4)) if node.op_type == "QMoE" else 1
    return prod(shape[1:]) * packed


@register_packed("com.microsoft::QMoE")
def expert_weights(node: NodeView) -> dict[int, int]:
    """The logical weights of every expert weight input, by index (QMoE's hold 8 / expert_weight_bits a byte)."""
    weights = _EXPERT_WEIGHTS[node.op_type]
    return {i: _expert_elements(node, i) * t.need_shape()[0] for i in weights if (t := node.input(i)) is not None}


@register("com.microsoft::MoE", "com.microsoft::QMoE", engine="gemm")
def mixture_of_experts(node: NodeView) -> Cost:
    """MoE / QMoE: input ``[rows, hidden]`` (or ``[B, S, hidden]``), router_probs ``[rows, E]``, each expert's
    fc1 (and fc3, the gate's other half) and fc2 weights ``[E, ...]``; each row goes through its ``k`` best experts.
    Counted from the weights' element counts, whatever their layout (fc1 ``[E, hidden, inter]`` or transposed, or
    fused with fc3): every weight of an expert is one multiply-add per row it serves.

    - MACs = ``rows * k * W`` with W one expert's weights over fc1, fc2 and fc3;
    - FLOPs = 2 * MACs + softmax over the router's E logits per row (5 each) + the activation per intermediate
      element (``inter`` = fc2's elements / hidden; silu 5, swiglu 6, gelu 5, relu 1) of each of the ``rows * k``
      passes + the weighted sum of the k outputs (2 per output element each) + dequantizing QMoE's weights
      (2 per weight of the experts used);
    - bytes: the input and router read; of every expert tensor (weights, biases, scales) the share of the experts
      used (``min(E, rows * k)`` of E); the output written. Kernels: 3 (routing, fc1, fc2).
    """
    x, router = node.need_input(0, "input"), node.need_input(1, "router_probs")
    rows, experts = prod(x.need_shape()[:-1]), router.need_shape()[-1]
    hidden, k = x.need_shape()[-1], int(node.attr("k", 1))
    fc1, fc2, fc3 = (_expert_elements(node, i) for i in _EXPERT_WEIGHTS[node.op_type])
    per_expert, passes = fc1 + fc2 + fc3, rows * k
    macs = passes * per_expert
    activation = GATE_ACTIVATION_FLOPS.get(node.text("activation_type", "relu").lower(), 1.0)
    flops = 2 * macs + SOFTMAX_FLOPS * rows * experts + activation * passes * (fc2 // hidden) + 2 * passes * hidden
    used = min(experts, passes)
    if node.op_type == "QMoE":
        flops += WEIGHT_DEQUANTIZE_FLOPS * used * per_expert
    tables = [t for t in node.inputs[2:] if t is not None and t.known and t.rank and t.is_weight]
    read = x.nbytes + router.nbytes + sum(t.nbytes * used / t.need_shape()[0] for t in tables)
    logical = expert_weights(node)
    others = [t for i, t in enumerate(node.inputs) if i >= 2 and i not in logical]
    return Cost(
        flops=flops,
        macs=macs,
        bytes_read=read,
        bytes_written=x.nbytes,
        params=weight_params(others) + sum(logical.values()),
        kernels=3,
    )
