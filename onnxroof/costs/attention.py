"""Cost functions: the standard-domain (ai.onnx) transformer ops, Attention (opsets 23-25), RotaryEmbedding (23),
TensorScatter (24), LinearAttention (27) and CausalConvWithState (27). The scaled dot-product attention terms
below are shared with onnxruntime's contrib attention ops (contrib.py), so that both domains count attention one
way: their constants and the score-matrix count live in common.py.

Scaled dot-product attention, with B batch, S query length, L total key length (past + new), N query heads, Nkv
key/value heads, H and Hv the query/key and value head sizes:

- score elements: ``B * N * S * L``, one per entry of ``softmax(Q K^T * scale)``. The full ``S x L`` matrix is
  counted even where a causal, padding or window mask discards part of it: unfused kernels compute it and mask,
  and it is the bound a roofline wants;
- MACs: ``B*N*S*L*H`` for ``Q K^T`` and ``B*N*S*L*Hv`` for ``softmax(.) V``. With grouped-query attention
  (Nkv < N) every query head still multiplies against its group's keys and values, so N, not Nkv, counts;
- per score element: 1 FLOP for the scale (standard Attention's pattern scales Q and K by ``sqrt(scale)`` each;
  it is counted as one multiply per score, as for the contrib ops), 5 for the softmax (max, subtract, exp, sum,
  divide), 3 for a softcap (divide, tanh, multiply) and 1 for each mask or bias added to the scores.

Standard Attention's masks each add a ``0 / -inf`` (or float) bias to the scores, and the reference sums them:
1 FLOP per score element for each of ``attn_mask`` (boolean, a select, or additive, an add), ``is_causal``,
``nonpad_kv_seqlen`` (the padding mask it implies) and a sliding window (``left_window_size`` /
``right_window_size`` >= 0, opset 25). ``softmax_precision`` casts the scores before and after the softmax;
conversions are not arithmetic (as for Cast) and are free.

Kernels: the unfused path's launches, stated per op (``Q K^T`` GEMM, softmax, context GEMM for attention). A
flash-style fused kernel launches fewer.

Bytes: each input read once and each output written once (Attention's present key/value caches and its
optional ``qk_matmul_output`` included); outputs whose shapes inference left unknown are sized from the op's
definition. Exceptions:

- RotaryEmbedding's cos/sin caches indexed by ``position_ids``: only the rows of the positions used are read;
- TensorScatter is counted in place, as its definition models it ("a functional operation that models an
  in-place update to a KV cache buffer": past and present caches have one shape so that they can share one
  buffer, and onnxruntime's kernel aliases them). It reads the update (and ``write_indices``) and writes the
  update's bytes into the cache; the rest of the cache is neither read nor written. A runtime that cannot alias
  the two buffers also copies the whole cache (onnxruntime then logs a warning), which is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from onnxroof.costs import OTHER, Cost, NodeView, register, weight_params
from onnxroof.costs.common import (
    ROTARY_FLOPS,
    SDPA_KERNELS,
    SILU_FLOPS,
    AttentionDims,
    cache_rows_bytes,
    input_bytes,
    output_bytes,
    rotated_elements,
    score_flops,
)
from onnxroof.ir import Tensor, UnknownShape

__all__ = [
    "attention",
    "causal_conv_with_state",
    "linear_attention",
    "rotary_embedding",
    "tensor_scatter",
]


def _cost(
    node: NodeView,
    flops: float,
    macs: float,
    kernels: int,
    shapes: Mapping[int, Sequence[int]],
    dtypes: Mapping[int, int],
    notes: list[str] | None = None,
) -> Cost:
    """Each input read once, each output written once (``shapes``/``dtypes`` stand in for outputs inference left
    unknown), params of the weight inputs, notes joined."""
    cost = Cost(
        flops=flops,
        macs=macs,
        bytes_read=input_bytes(node.inputs),
        bytes_written=output_bytes(node, shapes, dtypes),
        params=weight_params(node.inputs),
        kernels=kernels,
    )
    return cost.with_note("; ".join(notes)) if notes else cost


# ---------------------------------------------------------------------------------------------------------
# Attention and RotaryEmbedding (opset 23).


def _split_heads(node: NodeView, t: Tensor, heads_attr: str, what: str) -> tuple[int, int, int, int]:
    """(batch, heads, sequence, head size) of a 4D ``[B, N, S, H]`` input, or of a 3D ``[B, S, N*H]`` one whose
    head count the ``heads_attr`` attribute gives."""
    shape = t.need_shape()
    if len(shape) == 4:
        return shape[0], shape[1], shape[2], shape[3]
    if len(shape) == 3:
        heads = int(node.attr(heads_attr, 0) or 0)
        if heads <= 0:
            raise UnknownShape(f"{node.name}: Attention {what} {t.name} of shape {shape} is 3D and needs {heads_attr}")
        return shape[0], heads, shape[1], shape[2] // heads
    raise UnknownShape(f"{node.name}: Attention {what} {t.name} of shape {shape}: expected [B, N, S, H] or [B, S, N*H]")


def _has_window(node: NodeView) -> bool:
    """Whether opset 25's sliding window bounds either side (-1, the default, leaves a side unbounded)."""
    return any(int(node.attr(side, -1)) >= 0 for side in ("left_window_size", "right_window_size"))


@register("Attention", engine="matmul")
def attention(node: NodeView) -> Cost:
    """Attention (opsets 23-25) on already-projected Q ``[B, N, S, H]``, K ``[B, Nkv, Skv, H]`` and V
    ``[B, Nkv, Skv, Hv]``, or their 3D forms ``[B, S, N*H]`` etc. with ``q_num_heads`` and ``kv_num_heads``.
    past_key/past_value ``[B, Nkv, P, H]`` extend the key length to L = P + Skv; without them L = Skv (with
    ``nonpad_kv_seqlen``, K and V are the whole padded cache and all of it is counted).

    - MACs = ``B*N*S*L*H`` (scores) + ``B*N*S*L*Hv`` (context); grouped-query attention (Nkv < N) the same;
    - FLOPs = 2 * MACs + 6 per score element ``B*N*S*L`` (scale 1, softmax 5) + 3 per score element with
      ``softcap`` > 0 + 1 per score element for each of ``attn_mask``, ``is_causal``, ``nonpad_kv_seqlen`` and a
      sliding window.

    Bytes: Q, K, V, the mask, the past caches and nonpad_kv_seqlen read once; Y ``[B, N, S, Hv]`` (or
    ``[B, S, N*Hv]``), present_key/present_value ``[B, Nkv, L, H|Hv]`` (the concatenation of past and new, a
    copy) and qk_matmul_output ``[B, N, S, L]`` written once each where present. Kernels: 3.
    """
    q, k, v = node.need_input(0, "Q"), node.need_input(1, "K"), node.need_input(2, "V")
    b, heads, s, h = _split_heads(node, q, "q_num_heads", "Q")
    _, kv_heads, kv_len, _ = _split_heads(node, k, "kv_num_heads", "K")
    hv = _split_heads(node, v, "kv_num_heads", "V")[3]
    past_key = node.input(4)
    total = kv_len + (past_key.need_shape()[2] if past_key is not None else 0)
    dims = AttentionDims(b, s, kv_len, total, heads, h, hv)
    masks = (node.input(3) is not None) + bool(node.attr("is_causal", 0)) + (node.input(6) is not None)
    masks += _has_window(node)
    flops = 2 * dims.macs + score_flops(dims, masks=masks, softcap=float(node.attr("softcap", 0.0)) > 0)
    y_shape = (b, heads, s, hv) if q.rank == 4 else (b, s, heads * hv)
    shapes = {0: y_shape, 1: (b, kv_heads, total, h), 2: (b, kv_heads, total, hv), 3: (b, heads, s, total)}
    dtypes = {0: q.dtype, 1: k.dtype, 2: v.dtype, 3: q.dtype}
    return _cost(node, flops, dims.macs, SDPA_KERNELS, shapes, dtypes)


@register("RotaryEmbedding", engine=OTHER)
def rotary_embedding(node: NodeView) -> Cost:
    """RotaryEmbedding (opset 23): X ``[B, N, S, H]`` or ``[B, S, N*H]`` (with ``num_heads``), cos_cache,
    sin_cache, optional position_ids ``[B, S]``. 3 FLOPs per rotated element (``x1*cos - x2*sin``: 2 multiplies,
    1 add); elements beyond ``rotary_embedding_dim`` of each head pass through at no cost.

    Bytes: X and position_ids read once, Y written once. A cache indexed by position_ids
    (``[max_position, rotary_dim/2]``) is read only in the rows of the positions used (at most one per query
    position, at most the cache's length); a cache given per position (``[B, S, rotary_dim/2]``, no
    position_ids) is read whole. Kernels: 1.
    """
    x = node.need_input(0, "X")
    rotated, positions = rotated_elements(node, x)
    position_ids = node.input(3)
    read = input_bytes([x, position_ids])
    for cache in (node.input(1), node.input(2)):
        if cache is None:
            continue
        indexed = position_ids is not None and cache.known and cache.rank == 2
        read += cache_rows_bytes(cache, positions) if indexed else cache.nbytes
    return Cost(
        flops=ROTARY_FLOPS * rotated,
        bytes_read=read,
        bytes_written=output_bytes(node, {0: x.need_shape()}),
        params=weight_params(node.inputs),
        kernels=1,
    )


# ---------------------------------------------------------------------------------------------------------
# TensorScatter (opset 24): the KV-cache update.


@register("TensorScatter", engine="movement")
def tensor_scatter(node: NodeView) -> Cost:
    """TensorScatter: writes ``update`` ``[B, ..., S, ...]`` into ``past_cache`` ``[B, ..., max_S, ...]`` at
    each batch's write index along ``axis`` (modulo max_S in ``circular`` mode). 0 FLOPs (index arithmetic is
    free, as for Gather). Counted in place (see the module docstring): reads the update and write_indices,
    writes the update's bytes into the cache. Params: weights among the tensors read. Kernels: 1.
    """
    update = node.need_input(1, "update")
    read = [update, node.input(2)]
    return Cost(bytes_read=input_bytes(read), bytes_written=update.nbytes, params=weight_params(read), kernels=1)


# ---------------------------------------------------------------------------------------------------------
# LinearAttention and CausalConvWithState (opset 27): linear-attention and state-space blocks.

_LINEAR_RULES = ("linear", "gated", "delta", "gated_delta")


@register("LinearAttention", engine=OTHER)
def linear_attention(node: NodeView) -> Cost:
    """LinearAttention: query ``[B, T, Nq*dk]``, key ``[B, T, Nkv*dk]``, value ``[B, T, Nkv*dv]``, a recurrent
    state ``[B, Nkv, dk, dv]`` per key/value head, counted as its definition runs it, token by token (a
    chunk-parallel kernel computes the same result with a different operation count). Per token, for each of
    the ``B*T*Nkv`` (batch, token, kv head) triples, with ``update_rule``:

    - linear: ``S += k v^T``: dk*dv MACs;
    - gated: also ``exp(g)`` (one exp per decay element: dk per head, or 1 for a per-head decay) and
      ``S *= exp(g)``: dk*dv multiplies;
    - delta: ``S^T k`` (dk*dv MACs), ``v - S^T k`` and ``beta * (.)`` (2*dv FLOPs), then
      ``S += k (.)^T`` (dk*dv MACs);
    - gated_delta (the default): gated's decay, then delta's update on the decayed state (computed once);

    and for each of the ``B*T*Nq`` query heads (each reads its group's state) ``o = scale * q^T S``: dk*dv MACs
    and dv multiplies. FLOPs = 2 * MACs + the other terms above.

    Bytes: the inputs read once, output ``[B, T, Nq*dv]`` and present_state written once. Kernels: 1 (the op is
    one fused recurrent or chunked kernel).
    """
    q, v = node.need_input(0, "query"), node.need_input(2, "value")
    node.need_input(1, "key")
    heads, kv_heads = int(node.attr("q_num_heads", 0) or 0), int(node.attr("kv_num_heads", 0) or 0)
    if heads <= 0 or kv_heads <= 0:
        raise UnknownShape(f"{node.name}: LinearAttention needs q_num_heads and kv_num_heads")
    q_shape, v_shape = q.need_shape(), v.need_shape()
    if len(q_shape) != 3 or len(v_shape) != 3:
        raise UnknownShape(f"{node.name}: LinearAttention query {q_shape} / value {v_shape}: expected [B, T, N*D]")
    b, t = q_shape[0], q_shape[1]
    dk, dv = q_shape[2] // heads, v_shape[2] // kv_heads
    notes: list[str] = []
    rule = node.text("update_rule", "gated_delta")
    if rule not in _LINEAR_RULES:
        notes.append(f"update_rule {rule!r} unknown: counted as gated_delta")
        rule = "gated_delta"
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    tokens, state = b * t, kv_heads * dk * dv
    macs = tokens * (state * (2 if delta else 1) + heads * dk * dv)
    flops = 2 * macs + tokens * heads * dv
    if gated:
        decay = node.input(4)
        flops += tokens * state + (decay.numel if decay is not None else 0)
    if delta:
        flops += tokens * kv_heads * 2 * dv
    past = node.input(3)
    shapes = {0: (b, t, heads * dv), 1: (b, kv_heads, dk, dv)}
    dtypes = {0: q.dtype, 1: past.dtype if past is not None else q.dtype}
    return _cost(node, flops, macs, 1, shapes, dtypes, notes)


@register("CausalConvWithState", engine=OTHER)
def causal_conv_with_state(node: NodeView) -> Cost:
    """CausalConvWithState: a depthwise causal 1D convolution of input ``[B, C, L]`` with weight ``[C, 1, k]``
    over the past state ``[B, C, k-1]`` (zeros when absent) followed by the input:

    - MACs = ``B*C*L*k`` (every output position, including those over zero padding, as Conv counts pads);
    - FLOPs = 2 * MACs + 1 per output element with a bias + 5 per output element with
      ``activation`` silu or swish (``x * sigmoid(x)``: sigmoid 4, mul 1).

    Bytes: input, weight, bias and past_state read once; output ``[B, C, L]`` and present_state
    ``[B, C, k-1]`` (the last k-1 positions, a copy) written once. Params: weight and bias. Kernels: 1.
    """
    x, w = node.need_input(0, "input"), node.need_input(1, "weight")
    shape = x.need_shape()
    if len(shape) != 3:
        raise UnknownShape(f"{node.name}: CausalConvWithState input {x.name} of shape {shape}: expected [B, C, L]")
    b, c, length = shape
    k = w.need_shape()[-1]
    outputs = b * c * length
    macs = outputs * k
    flops = 2 * macs + (outputs if node.input(2) is not None else 0)
    if node.text("activation", "none") in ("silu", "swish"):
        flops += SILU_FLOPS * outputs
    shapes = {0: (b, c, length), 1: (b, c, max(k - 1, 0))}
    return _cost(node, flops, macs, 1, shapes, {0: x.dtype, 1: x.dtype})
