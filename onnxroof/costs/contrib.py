"""Cost functions: onnxruntime's fused transformer ops (com.microsoft Attention, MultiHeadAttention,
GroupQueryAttention, RotaryEmbedding).

The terms below, their constants and the score-matrix counting are defined once in common.py and shared with
the standard-domain Attention and RotaryEmbedding (attention.py). With B batch, S query length, L total key
length (past + new), N heads, H and Hv the query/key and value head sizes:

- score elements: ``B * N * S * L``, one per entry of ``softmax(Q K^T * scale)``;
- MACs: ``B*N*S*L*H`` for ``Q K^T`` and ``B*N*S*L*Hv`` for ``softmax(...) V`` (plus the input projection for
  Attention, which carries its own weights);
- per score element: 1 FLOP for the scale multiply (even where an engine folds it into Q), 5 for the softmax
  (max, subtract, exp, sum, divide, the convention in costs/__init__), and 1 more for each of an additive mask and
  an attention bias;
- 1 FLOP per projected element for a bias add.

The full ``S x L`` score matrix is counted even for causal (unidirectional) attention: unfused kernels compute it
and mask, and it is the bound a roofline wants.

Kernels: the unfused path's launches, stated per op (projection GEMM, ``Q K^T`` GEMM, softmax, context GEMM). A
flash-style fused kernel launches fewer.

Bytes: each input read once and each output written once (past and present key/value caches included), except
RotaryEmbedding's cos/sin caches, of which only the rows of the positions used are read, and GroupQueryAttention,
which reads the valid rows of its cache and writes the rows it adds (see ``_gqa_cache``).
"""

from __future__ import annotations

from typing import NamedTuple

from onnxroof.costs import OTHER, Cost, NodeView, register, weight_params
from onnxroof.costs.common import (
    ROTARY_FLOPS,
    SDPA_KERNELS,
    SOFTCAP_FLOPS,
    AttentionDims,
    cache_rows_bytes,
    grouped_heads,
    input_bytes,
    io_bytes,
    rotated_elements,
    score_flops,
)
from onnxroof.ir import Tensor, UnknownShape

__all__ = [
    "ATTENTION_KERNELS",
    "MHA_KERNELS",
    "attention",
    "group_query_attention",
    "multi_head_attention",
    "rotary_embedding",
]

ATTENTION_KERNELS = 4  # QKV projection GEMM, Q K^T GEMM, softmax, context GEMM
MHA_KERNELS = SDPA_KERNELS  # Q K^T GEMM, softmax, context GEMM (inputs already projected)


def _bsd(node: NodeView, t: Tensor) -> tuple[int, int, int]:
    """A ``[batch, sequence, hidden]`` input's three sizes, or UnknownShape saying what was found."""
    shape = t.need_shape()
    if len(shape) != 3:
        raise UnknownShape(f"{node.name}: {node.op_type} input {t.name} of shape {shape}: expected [B, S, hidden]")
    return shape[0], shape[1], shape[2]


def _num_heads(node: NodeView) -> int:
    """The required ``num_heads`` attribute."""
    heads = int(node.attr("num_heads", 0))
    if heads <= 0:
        raise UnknownShape(f"{node.name}: {node.op_type} has no num_heads attribute")
    return heads


def _past_length(
    node: NodeView, past: Tensor | None, axis: int, shared_buffer: bool, length_input: int, notes: list[str]
) -> int:
    """The past sequence length: the past tensor's length axis, or, when past and present share one buffer (whose
    length is the maximum), the constant ``past_sequence_length`` input; the buffer length, noted, otherwise."""
    if past is None:
        return 0
    buffer_length = past.need_shape()[axis]
    if not shared_buffer:
        return buffer_length
    known = node.constant(length_input)
    if known is not None and known.size == 1:
        return int(known.reshape(-1)[0])
    notes.append("past_sequence_length unknown: the shared buffer's full length counted as past")
    return buffer_length


def _score_flops(node: NodeView, dims: AttentionDims, mask_input: int, bias_input: int) -> int:
    """Scale and softmax on every score element, plus an additive mask and attention bias where given."""
    masked = mask_input >= 0 and node.input(mask_input) is not None
    return score_flops(dims, masks=int(masked), biases=int(node.input(bias_input) is not None))


def _cost(node: NodeView, macs: int, flops: float, kernels: int, notes: list[str]) -> Cost:
    """Assemble an attention op's Cost: compulsory-traffic bytes, params of its weights, notes joined."""
    read, written = io_bytes(node)
    cost = Cost(
        flops=flops,
        macs=macs,
        bytes_read=read,
        bytes_written=written,
        params=weight_params(node.inputs),
        kernels=kernels,
    )
    return cost.with_note("; ".join(notes)) if notes else cost


@register("com.microsoft::Attention", engine="matmul")
def attention(node: NodeView) -> Cost:
    """Attention with its own input projection: input ``[B, S, D_in]``, weights ``[D_in, Dq + Dk + Dv]``
    (``qkv_hidden_sizes`` = [Dq, Dk, Dv], else three equal parts), bias ``[Dq + Dk + Dv]``, past
    ``[2, B, N, P, H]``. With N = num_heads, H = Dq / N, Hv = Dv / N and L = S + P:

    - MACs = ``B*S*D_in*(Dq+Dk+Dv)`` (projection) + ``B*N*S*L*H`` (scores) + ``B*N*S*L*Hv`` (context);
    - FLOPs = 2 * MACs + ``B*S*(Dq+Dk+Dv)`` bias adds (when bias is given) + 6 per score element (scale 1,
      softmax 5) + 1 per score element for each of mask_index and attention_bias + 3 per rotated Q/K element
      with ``do_rotary``.
    """
    x, w = node.need_input(0, "input"), node.need_input(1, "weights")
    batch, seq, d_in = _bsd(node, x)
    heads = _num_heads(node)
    sizes = node.attr("qkv_hidden_sizes")
    if sizes is not None and len(sizes) == 3:
        dq, dk, dv = (int(s) for s in sizes)
    else:
        total = w.need_shape()[-1]
        dq = dk = dv = total // 3
    notes: list[str] = []
    past = _past_length(node, node.input(4), 3, bool(node.attr("past_present_share_buffer", 0)), 6, notes)
    dims = AttentionDims(batch, seq, seq, seq + past, heads, dq // heads, dv // heads)
    projected = batch * seq * (dq + dk + dv)
    macs = projected * d_in + dims.macs
    flops = 2 * macs + (projected if node.input(2) is not None else 0) + _score_flops(node, dims, 3, 5)
    if node.attr("do_rotary", 0):
        rotary_dim = int(node.attr("rotary_embedding_dim", 0)) or dims.head_size
        flops += ROTARY_FLOPS * batch * seq * heads * 2 * min(rotary_dim, dims.head_size)
    return _cost(node, macs, flops, ATTENTION_KERNELS, notes)


def _mha_dims(node: NodeView, heads: int) -> tuple[int, int, int, int, int, bool]:
    """(B, S, L_new, H, Hv, kv_projected_here) from MultiHeadAttention's query/key/value layouts:

    - query ``[B, S, D]``, key ``[B, L, D]``, value ``[B, L, Dv]``;
    - packed QKV: query ``[B, S, N, 3, H]`` with no key and value;
    - packed KV: query ``[B, S, D]``, key ``[B, L, N, 2, H]``, no value;
    - cached cross-attention: query ``[B, S, D]``, key ``[B, N, L, H]``, value ``[B, N, L, Hv]`` (already in
      head layout, so no bias is added to them).
    """
    q, k, v = node.need_input(0, "query"), node.input(1), node.input(2)
    q_shape = q.need_shape()
    if len(q_shape) == 5:
        b, s, _, _, h = q_shape
        return b, s, s, h, h, True
    if len(q_shape) != 3 or k is None:
        raise UnknownShape(
            f"{node.name}: MultiHeadAttention query {q.name} of shape {q_shape} with "
            f"{'no key' if k is None else 'a key'}: expected [B,S,D] with a key, or packed [B,S,N,3,H]"
        )
    b, s, d = q_shape
    k_shape = k.need_shape()
    if len(k_shape) == 5 and v is None:
        return b, s, k_shape[1], k_shape[4], k_shape[4], True
    if v is None:
        raise UnknownShape(f"{node.name}: MultiHeadAttention key {k.name} of shape {k_shape} needs a value input")
    v_shape = v.need_shape()
    if len(k_shape) == 3 and len(v_shape) == 3:
        return b, s, k_shape[1], d // heads, v_shape[2] // heads, True
    if len(k_shape) == 4 and len(v_shape) == 4:
        return b, s, k_shape[2], k_shape[3], v_shape[3], False
    raise UnknownShape(f"{node.name}: MultiHeadAttention key {k_shape} / value {v_shape}: unsupported layout")


@register("com.microsoft::MultiHeadAttention", engine="matmul")
def multi_head_attention(node: NodeView) -> Cost:
    """MultiHeadAttention on already-projected Q, K, V (layouts in ``_mha_dims``), with D = N*H, Dv = N*Hv and
    L = past_key length + new key length:

    - MACs = ``B*S*L*D`` (scores) + ``B*S*L*Dv`` (context);
    - FLOPs = 2 * MACs + 6 per score element ``B*N*S*L`` (scale 1, softmax 5) + 1 per score element for each of
      key_padding_mask and attention_bias + with a bias input, 1 add per projected element
      (``B*S*D`` for Q, and ``B*L_new*(D + Dv)`` for K and V unless they come in head layout).
    """
    heads = _num_heads(node)
    b, s, kv_new, h, hv, kv_projected = _mha_dims(node, heads)
    notes: list[str] = []
    past = _past_length(node, node.input(6), 2, node.input(8) is not None, 8, notes)
    dims = AttentionDims(b, s, kv_new, kv_new + past, heads, h, hv)
    flops = 2 * dims.macs + _score_flops(node, dims, 4, 5)
    if node.input(3) is not None:
        flops += b * s * heads * h + (b * kv_new * heads * (h + hv) if kv_projected else 0)
    return _cost(node, dims.macs, flops, MHA_KERNELS, notes)


# GroupQueryAttention's inputs (onnxruntime's bert_defs.cc): query, key, value, past_key, past_value, seqlens_k,
# total_sequence_length, cos_cache, sin_cache, position_ids, attention_bias, head_sink.
_GQA_PAST_KEY, _GQA_TOTAL, _GQA_COS, _GQA_SIN, _GQA_BIAS = 3, 6, 7, 8, 10
_GQA_PLAIN = (0, 1, 2, 5, 6, 9, 10, 11)


class _KvCache(NamedTuple):
    """GroupQueryAttention's key/value cache this call: ``total`` rows L attended, ``past`` valid rows read from
    the past buffer, ``written`` rows written to each present cache, and one row's bytes of one cache."""

    total: int
    past: int
    written: int
    row_bytes: float


def _gqa_cache(node: NodeView, b: int, s: int, kv_heads: int, h: int, notes: list[str]) -> _KvCache:
    """The cache onnxruntime's GroupQueryAttention runs on. Its present length is ``max(total_sequence_length,
    past length)`` (group_query_attention_helper.h), and past rows are right-padded to the buffer, so:

    - a past buffer at least ``total_sequence_length`` long is the buffer past and present share
      (``past_present_share_buffer``, what onnxruntime GenAI runs): its ``L - S`` valid rows are read and only
      the S new rows are written;
    - a shorter past is all valid (``L - S`` rows) and the present is a new tensor of all L rows.
    """
    past = node.input(_GQA_PAST_KEY)
    buffer = past.need_shape()[2] if past is not None else 0
    dtype_of = past or node.input(1) or node.need_input(0, "query")
    row_bytes = b * kv_heads * h * dtype_of.itemsize
    known = node.constant(_GQA_TOTAL)
    if known is not None and known.size == 1:
        total = int(known.reshape(-1)[0])
    else:
        total = buffer + s
        if past is not None:
            notes.append("total_sequence_length unknown: the past buffer counted as all valid")
    shared = past is not None and buffer >= total
    return _KvCache(total, max(total - s, 0), s if shared else total, row_bytes)


@register("com.microsoft::GroupQueryAttention", engine="matmul")
def group_query_attention(node: NodeView) -> Cost:
    """GroupQueryAttention: N query heads share ``kv_num_heads`` key/value heads; query ``[B, S, N*H]`` with key
    and value ``[B, S, Nkv*H]``, or packed ``[B, S, (N + 2*Nkv)*H]``; L the total key length (``_gqa_cache``).

    - MACs = ``2 * B*N*S*L*H`` (scores and context; every query head reads its group's K and V);
    - FLOPs = 2 * MACs + 6 per score element (scale 1, softmax 5) + 3 per score element with ``softcap``
      + 1 per score element with attention_bias + 3 per rotated element of Q and K with ``do_rotary``
      (``B*S*(N + Nkv)*H``).

    Bytes: the new Q, K and V and the small inputs read once; of the past caches the ``L - S`` valid rows of K
    and V; of cos_cache and sin_cache the rows of the S new positions (per batch entry, at most the cache's
    length); the output written once and each present cache's rows written (the S new ones in a shared buffer,
    all L otherwise). Kernels: 3, plus 1 for the rotary embedding.
    """
    q = node.need_input(0, "query")
    b, s, _ = _bsd(node, q)  # a [B, S, hidden] query
    heads, kv_heads, h = grouped_heads(node, q)
    notes: list[str] = []
    cache = _gqa_cache(node, b, s, kv_heads, h, notes)
    dims = AttentionDims(b, s, s, cache.total, heads, h, h)
    flops = 2 * dims.macs + _score_flops(node, dims, -1, _GQA_BIAS)
    if float(node.attr("softcap", 0.0)) > 0:
        flops += SOFTCAP_FLOPS * dims.scores
    kernels = MHA_KERNELS
    if node.attr("do_rotary", 0):
        flops += ROTARY_FLOPS * b * s * (heads + kv_heads) * h
        kernels += 1
    read = input_bytes([node.input(i) for i in _GQA_PLAIN]) + 2 * cache.past * cache.row_bytes
    for rotary in (node.input(_GQA_COS), node.input(_GQA_SIN)):
        if rotary is not None:
            read += cache_rows_bytes(rotary, b * s)
    written = b * s * heads * h * q.itemsize + 2 * cache.written * cache.row_bytes
    qk = node.output(3)
    if qk is not None:
        written += dims.scores * q.itemsize
    cost = Cost(
        flops=flops,
        macs=dims.macs,
        bytes_read=read,
        bytes_written=written,
        params=weight_params(node.inputs),
        kernels=kernels,
    )
    return cost.with_note("; ".join(notes)) if notes else cost


@register("com.microsoft::RotaryEmbedding", engine=OTHER)
def rotary_embedding(node: NodeView) -> Cost:
    """RotaryEmbedding: 3 FLOPs per rotated element (``x1*cos - x2*sin``: 2 multiplies, 1 add); elements beyond
    ``rotary_embedding_dim`` of each head pass through at no cost. Input ``[B, S, N*H]`` (then ``num_heads`` gives
    H when a partial rotary dim is set) or ``[B, N, S, H]``.

    Bytes: the input and position_ids read once, the output written once, and of each cos/sin cache
    ``[max_len, rotary_dim/2]`` only the rows of the positions used (at most one per query position, at most the
    cache's length).
    """
    x = node.need_input(0, "input")
    rotated, positions = rotated_elements(node, x)
    caches = [node.input(2), node.input(3)]
    read, written = io_bytes(node, [x, node.input(1)])
    for cache in (c for c in caches if c is not None):
        read += cache_rows_bytes(cache, positions)
    return Cost(
        flops=ROTARY_FLOPS * rotated,
        bytes_read=read,
        bytes_written=written,
        params=weight_params(node.inputs),
        kernels=1,
    )
