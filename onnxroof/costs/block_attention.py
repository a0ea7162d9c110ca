"""Cost functions: onnxruntime's attention over block-organized key/value caches, PagedAttention (a paged cache
that a block table maps each sequence onto, for continuous batching) and SparseAttention (Phi-3-small's
block-sparse attention over a cache that past and present share).

They count as the other attention ops do (contrib.py, and the terms in common.py): with N query heads, Nkv key/
value heads of size H (Hv for values), a query of q tokens against a history of L keys makes ``N * q * L`` score
elements (a block-sparse one only those of the blocks it attends), ``H + Hv`` MACs each, 6 FLOPs each for the
scale and softmax (3 more under a softcap), and 3 per rotated element of Q and K. Bytes are the compulsory
traffic: the new Q, K and V and the small inputs read once, of each cache only the valid past rows attended, the
new rows written into the cache, the output written once; of cos/sin caches the rows of the new positions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from math import prod
from typing import NamedTuple

import numpy as np

from onnxroof.costs import Cost, NodeView, register, weight_params
from onnxroof.costs.common import (
    RMS_NORM_FLOPS,
    ROTARY_FLOPS,
    SCALE_FLOPS,
    SOFTCAP_FLOPS,
    SOFTMAX_FLOPS,
    GroupedHeads,
    cache_rows_bytes,
    grouped_heads,
    input_bytes,
)
from onnxroof.ir import Tensor, UnknownShape

__all__ = ["KV_SCALE_FLOPS", "paged_attention", "sparse_attention"]

# FLOPs per element to dequantize a quantized cache's element as it is read, or to quantize one as it is written:
# one multiply by its scale (or its inverse). The quantization is symmetric, no zero point (the op's k_scale/v_scale).
KV_SCALE_FLOPS: float = 1
# FLOPs per softmax row for a head sink: the sink logit's exp and its add into the denominator.
HEAD_SINK_FLOPS: float = 2


def _per_score(node: NodeView) -> float:
    """Scale (1) and softmax (5) on every score element, plus a softcap's 3 where one is set."""
    return SCALE_FLOPS + SOFTMAX_FLOPS + (SOFTCAP_FLOPS if float(node.attr("softcap", 0.0)) > 0 else 0)


def _rotary_flops(node: NodeView, tokens: int, dims: GroupedHeads, cos_index: int) -> float:
    """3 FLOPs per rotated element of the new Q and K with ``do_rotary``: ``tokens * (N + Nkv)`` heads, each
    rotated over twice the cos cache's width (the whole head where no cache is given)."""
    if not node.attr("do_rotary", 0):
        return 0.0
    cos = node.input(cos_index)
    width = min(2 * cos.need_shape()[-1], dims.head_size) if cos is not None else dims.head_size
    return ROTARY_FLOPS * tokens * (dims.heads + dims.kv_heads) * width


def _cache_rows_read(cos: Tensor | None, sin: Tensor | None, positions: int) -> float:
    return sum(cache_rows_bytes(c, positions) for c in (cos, sin) if c is not None)


# ---------------------------------------------------------------------------------------------------------
# PagedAttention: query [T, N*H] (or packed), key/value [T, Nkv*H], key_cache/value_cache [blocks, block_size,
# Nkv, cache_head_size], cumulative_sequence_length [B+1], past_seqlens [B], block_table [B, max_blocks].

_PAGED_KEY_CACHE, _PAGED_VALUE_CACHE = 3, 4
_PAGED_CU_SEQLENS, _PAGED_PAST, _PAGED_TABLE = 5, 6, 7
_PAGED_COS, _PAGED_SIN = 8, 9
_PAGED_HEAD_SINK, _PAGED_Q_NORM = 11, 12


class _History(NamedTuple):
    """What the packed batch attends: ``pairs`` (query, key) pairs per head (``sum q_i * L_i``), the ``past``
    rows of the cache it reads (``sum p_i``), and a note where they were bounded."""

    pairs: int
    past: int
    note: str


def _paged_history(node: NodeView, tokens: int) -> _History:
    """From each sequence's new tokens (cumulative_sequence_length) and past rows (past_seqlens) where both are
    known constants; else, noted, the bound of every token against its block table's capacity
    (``max_blocks * block_size`` rows, at most the cache's) and every sequence's table full."""
    cumulative, past = node.constant(_PAGED_CU_SEQLENS), node.constant(_PAGED_PAST)
    if cumulative is not None and past is not None:
        bounds = [int(c) for c in cumulative.reshape(-1)]
        new = [b - a for a, b in pairwise(bounds)]
        lengths = [int(p) for p in past.reshape(-1)]
        return _History(sum(q * (p + q) for q, p in zip(new, lengths)), sum(lengths), "")
    batch, max_blocks = node.need_input(_PAGED_TABLE, "block_table").need_shape()
    blocks, block_size = node.need_input(_PAGED_KEY_CACHE, "key_cache").need_shape()[:2]
    capacity = min(max_blocks * block_size, blocks * block_size)
    past_rows = max(min(batch * capacity, blocks * block_size) - tokens, 0)
    return _History(tokens * capacity, past_rows, "sequence lengths unknown: bounded by the block table's capacity")


def _quantized_caches(node: NodeView, latent: bool) -> int:
    """How many of the caches hold quantized elements (a quant type other than NONE)."""
    kinds = ["k_quant_type"] if latent else ["k_quant_type", "v_quant_type"]
    return sum(node.text(kind, "NONE").upper() != "NONE" for kind in kinds)


@register("com.microsoft::PagedAttention", engine="matmul")
def paged_attention(node: NodeView) -> Cost:
    """PagedAttention over B packed sequences, sequence i with ``q_i`` new tokens and ``p_i`` past rows
    (``L_i = p_i + q_i``), T = sum q_i tokens:

    - MACs = ``N * sum(q_i * L_i) * (H + Hv)`` (Hv = ``v_head_size`` in the LATENT layout, else H);
    - FLOPs = 2 * MACs + 6 per score element (+3 with softcap) + 2 per softmax row with a head sink + 3 per
      rotated element of the T new tokens' Q and K with ``do_rotary`` + 4 per element of Q and K with
      q/k norm weights + 1 per element read or written of a quantized cache (its scale);
    - bytes: the new Q, K, V and the small inputs (lengths, block table, norms, scales) read once; of each cache
      (one in the LATENT layout) the ``sum p_i`` past rows read and the T new rows written; cos/sin rows of the
      T positions; the output ``[T, N*Hv]`` written. Kernels: the cache write and the attention, +1 for rotary.
    """
    query = node.need_input(0, "query")
    tokens = query.need_shape()[0]
    dims = grouped_heads(node, query)
    latent = node.text("kv_cache_layout", "SEPARATE").upper() == "LATENT"
    head_v = int(node.attr("v_head_size", 0)) or dims.head_size
    key_cache = node.need_input(_PAGED_KEY_CACHE, "key_cache")
    row_bytes = key_cache.nbytes / prod(key_cache.need_shape()[:2])  # one token's row: Nkv heads, packed as stored
    history = _paged_history(node, tokens)
    scores = dims.heads * history.pairs
    caches = 1 if latent else 2
    flops = (2 * (dims.head_size + head_v) + _per_score(node)) * scores
    flops += HEAD_SINK_FLOPS * tokens * dims.heads * int(node.input(_PAGED_HEAD_SINK) is not None)
    normed = int(node.input(_PAGED_Q_NORM) is not None)
    flops += RMS_NORM_FLOPS * tokens * (dims.heads + dims.kv_heads) * dims.head_size * normed
    flops += _rotary_flops(node, tokens, dims, _PAGED_COS)
    kv_elements = (history.past + tokens) * dims.kv_heads * dims.head_size
    flops += KV_SCALE_FLOPS * _quantized_caches(node, latent) * kv_elements
    cos, sin = node.input(_PAGED_COS), node.input(_PAGED_SIN)
    caches_and_rotary = (_PAGED_KEY_CACHE, _PAGED_VALUE_CACHE, _PAGED_COS, _PAGED_SIN)
    small = [t for i, t in enumerate(node.inputs) if i not in caches_and_rotary]
    read = input_bytes(small) + caches * history.past * row_bytes + _cache_rows_read(cos, sin, tokens)
    written = tokens * dims.heads * head_v * query.itemsize + caches * tokens * row_bytes
    cost = Cost(
        flops=flops,
        macs=scores * (dims.head_size + head_v),
        bytes_read=read,
        bytes_written=written,
        params=weight_params(small),
        kernels=2 + int(bool(node.attr("do_rotary", 0))),
    )
    return cost.with_note(history.note) if history.note else cost


# ---------------------------------------------------------------------------------------------------------
# SparseAttention: query [B, S, N*H] (or packed), key/value [B, S, Nkv*H], past_key/past_value [B, Nkv, M, H]
# (the buffer present shares), block_row_indices [layouts, R+1] and block_col_indices [layouts, max_nnz], the
# CSR form of each layout's R x R block mask; head h uses layout h % layouts.

_SPARSE_PAST_KEY = 3
_SPARSE_ROWS, _SPARSE_COLS = 5, 6
_SPARSE_TOTAL, _SPARSE_KEY_TOTALS = 7, 8
_SPARSE_COS, _SPARSE_SIN = 9, 10


class _SparseWork(NamedTuple):
    """A call's score elements and, per key/value head, the past rows its query heads attend (summed over the
    batch)."""

    scores: int
    past_rows: tuple[int, ...]


def _block_keys(cols: np.ndarray, block: int, length: int) -> int:
    """Keys of the blocks ``cols`` that exist in a history of ``length`` keys: each block ``block`` keys, the
    last one only up to ``length``."""
    return int(np.clip(length - cols * block, 0, block).sum())


def _layout_rows(rows: np.ndarray, cols: np.ndarray) -> list[np.ndarray]:
    """Each block row's attended column blocks of one layout, from its CSR arrays (padding -1 dropped)."""
    return [c[c >= 0] for c in (cols[rows[r] : rows[r + 1]] for r in range(len(rows) - 1))]


def _sparse_work(
    dims: GroupedHeads, block: int, masks: list[list[np.ndarray]], spans: Sequence[tuple[int, int]]
) -> _SparseWork:
    """Scores and attended past rows of queries at positions ``[start, end)`` of each batch entry (``spans``),
    each head's query in block row r attending the blocks of row r of its layout (head h's is h % layouts)."""
    group = dims.heads // dims.kv_heads
    scores, past = 0, [0] * dims.kv_heads
    for start, end in spans:
        rows = range(start // block, (end - 1) // block + 1)
        for g in range(dims.kv_heads):
            layouts = Counter(h % len(masks) for h in range(g * group, (g + 1) * group))
            attended: set[int] = set()
            for layout, heads in layouts.items():
                for r in (r for r in rows if r < len(masks[layout])):
                    queries = min(end, (r + 1) * block) - max(start, r * block)
                    scores += heads * queries * _block_keys(masks[layout][r], block, end)
                    attended.update(int(c) for c in masks[layout][r])
            past[g] += _block_keys(np.array(sorted(attended), dtype=np.int64), block, start)
    return _SparseWork(scores, tuple(past))


def _dense_masks(rows: int) -> list[list[np.ndarray]]:
    """One causal layout of every block at or below the diagonal: the bound where the mask is unknown."""
    return [[np.arange(r + 1, dtype=np.int64) for r in range(rows)]]


def _sparse_masks(node: NodeView) -> tuple[list[list[np.ndarray]], str]:
    """Each layout's block rows from the constant CSR inputs, or the dense causal mask (noted) where unknown."""
    rows, cols = node.constant(_SPARSE_ROWS), node.constant(_SPARSE_COLS)
    if rows is not None and cols is not None:
        rows, cols = rows.reshape(rows.shape[0], -1), cols.reshape(cols.shape[0], -1)
        return [_layout_rows(r.astype(np.int64), c.astype(np.int64)) for r, c in zip(rows, cols)], ""
    blocks = node.need_input(_SPARSE_ROWS, "block_row_indices").need_shape()[-1] - 1
    return _dense_masks(blocks), "block mask unknown: every block at or below the diagonal counted"


def _sparse_spans(node: NodeView, batch: int, seq: int, buffer: int, notes: list[str]) -> list[tuple[int, int]]:
    """Each batch entry's new positions ``[L_b - S, L_b)``: L_b from key_total_sequence_lengths, else
    total_sequence_length, else (noted) the buffer's length."""
    totals = node.constant(_SPARSE_KEY_TOTALS)
    total = node.constant(_SPARSE_TOTAL)
    if totals is not None and totals.size == batch:
        lengths = [int(t) for t in totals.reshape(-1)]
    elif total is not None and total.size == 1:
        lengths = [int(total.reshape(-1)[0])] * batch
    else:
        notes.append("total_sequence_length unknown: the cache buffer counted as all valid")
        lengths = [buffer] * batch
    return [(max(length - seq, 0), length) for length in lengths]


@register("com.microsoft::SparseAttention", engine="matmul")
def sparse_attention(node: NodeView) -> Cost:
    """SparseAttention of B entries of S new tokens at positions ``[L_b - S, L_b)``: each query head's query in
    block row r attends the key blocks of row r of its layout (the whole block, the last one up to L_b).

    - MACs = ``2 * H`` per attended (query, key) pair, summed over heads and entries;
    - FLOPs = 2 * MACs + 6 per score element + 3 per rotated element of Q and K with ``do_rotary``;
    - bytes: the new Q, K, V, the CSR indices and lengths read once; of each cache, per key/value head, the past
      rows of the blocks its query heads attend; cos/sin rows of the ``B * S`` positions; the output and the S
      new rows of each cache (the buffer is shared) written. Kernels: 2 (attention, cache copy), +1 for rotary.
    """
    query = node.need_input(0, "query")
    batch, seq = query.need_shape()[0], query.need_shape()[1]
    dims = grouped_heads(node, query)
    block = int(node.attr("sparse_block_size", 0))
    if block <= 0:
        raise UnknownShape(f"{node.name}: SparseAttention has no sparse_block_size attribute")
    past_key = node.need_input(_SPARSE_PAST_KEY, "past_key")
    notes: list[str] = []
    masks, mask_note = _sparse_masks(node)
    notes += [mask_note] if mask_note else []
    work = _sparse_work(dims, block, masks, _sparse_spans(node, batch, seq, past_key.need_shape()[2], notes))
    row_bytes = dims.head_size * past_key.itemsize  # one key/value head's row
    flops = (2 * 2 * dims.head_size + _per_score(node)) * work.scores
    flops += _rotary_flops(node, batch * seq, dims, _SPARSE_COS)
    cos, sin = node.input(_SPARSE_COS), node.input(_SPARSE_SIN)
    small = [node.input(i) for i in (0, 1, 2, _SPARSE_ROWS, _SPARSE_COLS, _SPARSE_TOTAL, _SPARSE_KEY_TOTALS)]
    read = input_bytes(small) + 2 * sum(work.past_rows) * row_bytes + _cache_rows_read(cos, sin, batch * seq)
    written = batch * seq * dims.heads * dims.head_size * query.itemsize
    written += 2 * batch * seq * dims.kv_heads * row_bytes
    cost = Cost(
        flops=flops,
        macs=2 * dims.head_size * work.scores,
        bytes_read=read,
        bytes_written=written,
        params=weight_params(small),
        kernels=2 + int(bool(node.attr("do_rotary", 0))),
    )
    return cost.with_note("; ".join(notes)) if notes else cost
