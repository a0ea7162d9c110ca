"""Standard-domain transformer ops (Attention, RotaryEmbedding, TensorScatter, LinearAttention,
CausalConvWithState, Swish, SwiGLU) against closed forms written from their operator definitions, and against
the contrib ops that count attention the same way."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.ir import UnknownShape
from tests.helpers import BOOL, FLOAT16, INT32, INT64, T, W, cost_of, make_node

MS = "com.microsoft"


# ---------------------------------------------------------------------------------------------------------
# Attention (opsets 23-25).


def test_attention_4d_cross_attention_each_term():
    # Q [2, 4, 8, 16], K and V [2, 4, 10, 16]: B 2, N 4, S 8, L 10, H = Hv = 16
    cost = cost_of(make_node("Attention", [T([2, 4, 8, 16]), T([2, 4, 10, 16]), T([2, 4, 10, 16])], [T([2, 4, 8, 16])]))
    scores = 2 * 4 * 8 * 10  # 640
    assert cost.macs == scores * 16 + scores * 16 == 20480  # Q K^T + softmax(.) V
    assert cost.flops == 2 * 20480 + (1 + 5) * scores == 44800  # scale 1 + softmax 5 per score element
    # Q 2*4*8*16*4 = 4096, K and V 2*4*10*16*4 = 5120 each; Y 4096
    assert (cost.bytes_read, cost.bytes_written) == (4096 + 2 * 5120, 4096)
    assert (cost.params, cost.kernels, cost.note) == (0, 3, "")


def test_attention_3d_grouped_query_counts_query_heads():
    # Q [2, 8, 4*16], K [2, 8, 2*16], V [2, 8, 2*8]: 4 query heads share 2 KV heads, H 16, Hv 8
    inputs = [T([2, 8, 64]), T([2, 8, 32]), T([2, 8, 16])]
    cost = cost_of(make_node("Attention", inputs, [T([2, 8, 32])], q_num_heads=4, kv_num_heads=2))
    scores = 2 * 4 * 8 * 8  # 512: every query head scores its group's keys
    assert cost.macs == scores * (16 + 8) == 12288
    assert cost.flops == 2 * 12288 + 6 * scores == 27648
    assert cost.bytes_written == 2 * 8 * 4 * 8 * 4  # Y [B, S, N*Hv] = [2, 8, 32]: 2048


def test_attention_past_extends_the_key_length_and_writes_present_and_qk():
    # Q [1, 4, 2, 16], new K and V [1, 2, 2, 16], past [1, 2, 6, 16]: L = 6 + 2 = 8
    inputs = [T([1, 4, 2, 16]), T([1, 2, 2, 16]), T([1, 2, 2, 16]), None, T([1, 2, 6, 16]), T([1, 2, 6, 16])]
    outputs = [T([1, 4, 2, 16]), T([1, 2, 8, 16]), T([1, 2, 8, 16]), T([1, 4, 2, 8])]
    cost = cost_of(make_node("Attention", inputs, outputs))
    scores = 1 * 4 * 2 * 8  # 64
    assert cost.macs == scores * 32 == 2048
    assert cost.flops == 2 * 2048 + 6 * scores == 4480
    # read: Q 512 + K 256 + V 256 + past_key 768 + past_value 768
    assert cost.bytes_read == 512 + 256 + 256 + 768 + 768 == 2560
    # written: Y 512 + present_key 1024 + present_value 1024 + qk_matmul_output 1*4*2*8*4 = 256
    assert cost.bytes_written == 512 + 1024 + 1024 + 256 == 2816


def test_attention_outputs_left_unknown_are_sized_from_the_definition():
    inputs = [T([1, 4, 2, 16]), T([1, 2, 2, 16]), T([1, 2, 2, 8]), None, T([1, 2, 6, 16]), T([1, 2, 6, 8])]
    known = [T([1, 4, 2, 8]), T([1, 2, 8, 16]), T([1, 2, 8, 8]), T([1, 4, 2, 8])]
    unknown = [T(None), T(None), T(None), T(None)]
    a = cost_of(make_node("Attention", inputs, known))
    b = cost_of(make_node("Attention", inputs, unknown))
    assert a == b
    # 3D: Y is [B, S, N*Hv]
    q3 = [T([2, 8, 64]), T([2, 8, 32]), T([2, 8, 16], FLOAT16)]
    assert cost_of(make_node("Attention", q3, [T(None)], q_num_heads=4, kv_num_heads=2)).bytes_written == 2048


MASK_CASES = [
    ({"inputs": {3: T([8, 10], BOOL)}}, 1),  # boolean attn_mask: a select per score
    ({"inputs": {3: T([1, 1, 8, 10])}}, 1),  # additive attn_mask: an add per score
    ({"attrs": {"is_causal": 1}}, 1),  # causal mask (the full S x L still counted)
    ({"inputs": {6: T([2], INT64)}}, 1),  # nonpad_kv_seqlen: the padding mask it implies
    ({"attrs": {"left_window_size": 2, "right_window_size": 0}}, 1),  # opset 25 sliding window
    ({"attrs": {"left_window_size": -1, "right_window_size": -1}}, 0),  # both sides unbounded: no window
    ({"attrs": {"is_causal": 1}, "inputs": {3: T([8, 10], BOOL)}}, 2),  # causal composed with a mask: two biases
    ({"attrs": {"is_causal": 0}}, 0),
]


@pytest.mark.parametrize("case, masks", MASK_CASES)
def test_attention_each_mask_adds_one_flop_per_score_element(case, masks):
    base = [T([2, 4, 8, 16]), T([2, 4, 10, 16]), T([2, 4, 10, 16])]
    inputs = base + [None] * 4
    for i, t in case.get("inputs", {}).items():
        inputs[i] = t
    plain = cost_of(make_node("Attention", base, [T([2, 4, 8, 16])]))
    masked = cost_of(make_node("Attention", inputs, [T([2, 4, 8, 16])], **case.get("attrs", {})))
    assert masked.macs == plain.macs
    assert masked.flops - plain.flops == masks * (2 * 4 * 8 * 10)  # scores: 640


def test_attention_softcap_adds_three_per_score_and_scale_adds_nothing():
    inputs = [T([2, 4, 8, 16]), T([2, 4, 10, 16]), T([2, 4, 10, 16])]
    plain = cost_of(make_node("Attention", inputs, [T([2, 4, 8, 16])]))
    capped = cost_of(make_node("Attention", inputs, [T([2, 4, 8, 16])], softcap=30.0))
    zero = cost_of(make_node("Attention", inputs, [T([2, 4, 8, 16])], softcap=0.0))
    scaled = cost_of(make_node("Attention", inputs, [T([2, 4, 8, 16])], scale=0.5, softmax_precision=1))
    assert capped.flops - plain.flops == 3 * 640  # divide, tanh, multiply per score element
    assert zero.flops == scaled.flops == plain.flops


def test_attention_counts_like_contrib_multi_head_attention():
    # The same attention as com.microsoft MultiHeadAttention (query [2,8,64], key [2,10,64], value [2,10,32],
    # 4 heads) and as standard 3D Attention with 4 query and 4 KV heads: equal MACs and FLOPs, masks included.
    q, k, v = T([2, 8, 64]), T([2, 10, 64]), T([2, 10, 32])
    mha = cost_of(make_node("MultiHeadAttention", [q, k, v], [T([2, 8, 32])], domain=MS, num_heads=4))
    std = cost_of(make_node("Attention", [q, k, v], [T([2, 8, 32])], q_num_heads=4, kv_num_heads=4))
    assert (std.macs, std.flops, std.kernels) == (mha.macs, mha.flops, mha.kernels)
    mha_masked = cost_of(
        make_node("MultiHeadAttention", [q, k, v, None, T([2, 10], INT32)], [T([2, 8, 32])], domain=MS, num_heads=4)
    )
    std_masked = cost_of(
        make_node("Attention", [q, k, v, T([2, 1, 1, 10], BOOL)], [T([2, 8, 32])], q_num_heads=4, kv_num_heads=4)
    )
    assert std_masked.flops == mha_masked.flops


def test_attention_counts_like_contrib_group_query_attention():
    # 4 query heads of 16, 2 KV heads, S = L = 4, softcap 30 (no causal mask: GQA's own is not counted)
    q, k, v = T([1, 4, 64]), T([1, 4, 32]), T([1, 4, 32])
    gqa = cost_of(
        make_node(
            "GroupQueryAttention",
            [q, k, v, None, None, T([1], INT32), T([], INT32)],
            [T([1, 4, 64])],
            domain=MS,
            num_heads=4,
            kv_num_heads=2,
            softcap=30.0,
            constants={6: 4},
        )
    )
    std = cost_of(make_node("Attention", [q, k, v], [T([1, 4, 64])], q_num_heads=4, kv_num_heads=2, softcap=30.0))
    assert (std.macs, std.flops) == (gqa.macs, gqa.flops) == (2 * 1 * 4 * 4 * 4 * 16, 2 * 2048 + 9 * 64)


def test_standard_and_contrib_attention_count_one_score_matrix_alike():
    # Projected Q [1, 4, 16], K and V [1, 6, 16], 4 heads: B 1, N 4, S 4, L 6, H = Hv = 4.
    # scores = 1*4*4*6 = 96; MACs = 96 * (4 + 4) = 768 (Q K^T and softmax(.) V);
    # FLOPs = 2*768 + (scale 1 + softmax 5) * 96 = 1536 + 576 = 2112; kernels: Q K^T, softmax, context = 3.
    q, k, v = T([1, 4, 16]), T([1, 6, 16]), T([1, 6, 16])
    std = cost_of(make_node("Attention", [q, k, v], [T([1, 4, 16])], q_num_heads=4, kv_num_heads=4))
    mha = cost_of(make_node("MultiHeadAttention", [q, k, v], [T([1, 4, 16])], domain=MS, num_heads=4))
    assert (std.macs, std.flops, std.kernels) == (mha.macs, mha.flops, mha.kernels) == (768, 2112, 3)


def test_attention_3d_without_head_counts_says_why():
    with pytest.raises(UnknownShape, match="q_num_heads"):
        cost_of(make_node("Attention", [T([2, 8, 64]), T([2, 8, 64]), T([2, 8, 64])], [T([2, 8, 64])]))
    with pytest.raises(UnknownShape, match="V"):
        cost_of(make_node("Attention", [T([2, 8, 64]), T([2, 8, 64]), None], [T([2, 8, 64])], q_num_heads=4))


# ---------------------------------------------------------------------------------------------------------
# RotaryEmbedding (opset 23): X, cos_cache, sin_cache, position_ids.


def test_rotary_embedding_4d_reads_only_the_cache_rows_used():
    # X [2, 4, 8, 16]: 1024 elements, all rotated; 16 query positions (B*S) of a 128-row cache 8 wide
    inputs = [T([2, 4, 8, 16]), W([128, 8]), W([128, 8]), T([2, 8], INT64)]
    cost = cost_of(make_node("RotaryEmbedding", inputs, [T([2, 4, 8, 16])]))
    assert cost.flops == 3 * 1024  # 2 multiplies and 1 add per rotated element
    # X 4096 + position_ids 16*8 + of each cache 16 rows * 8 * 4
    assert cost.bytes_read == 4096 + 128 + 2 * 16 * 8 * 4 == 5248
    assert (cost.bytes_written, cost.params, cost.kernels) == (4096, 2 * 128 * 8, 1)


def test_rotary_embedding_matches_the_contrib_op():
    # 3D [2, 8, 64] with 4 heads: the contrib op takes (input, position_ids, cos, sin), the standard one
    # (X, cos, sin, position_ids)
    x, pos, cos, sin = T([2, 8, 64]), T([2, 8], INT64), W([128, 8]), W([128, 8])
    ms = cost_of(make_node("RotaryEmbedding", [x, pos, cos, sin], [T([2, 8, 64])], domain=MS, num_heads=4))
    std = cost_of(make_node("RotaryEmbedding", [x, cos, sin, pos], [T([2, 8, 64])], num_heads=4))
    assert std == ms


def test_rotary_embedding_partial_and_per_position_caches():
    # rotary_embedding_dim 8 of head size 16: half of the 2*8*64 = 1024 elements rotated
    partial = cost_of(
        make_node(
            "RotaryEmbedding",
            [T([2, 8, 64]), W([128, 4]), W([128, 4]), T([2, 8], INT64)],
            [T([2, 8, 64])],
            num_heads=4,
            rotary_embedding_dim=8,
        )
    )
    assert partial.flops == 3 * 512
    # no position_ids: caches [B, S, H/2] = [2, 8, 8] are read whole, 512 bytes each
    per_position = cost_of(
        make_node("RotaryEmbedding", [T([2, 8, 64]), T([2, 8, 8]), T([2, 8, 8])], [T(None)], num_heads=4)
    )
    assert per_position.flops == 3 * 1024
    assert (per_position.bytes_read, per_position.bytes_written) == (4096 + 2 * 512, 4096)
    with pytest.raises(UnknownShape, match="num_heads"):
        cost_of(
            make_node(
                "RotaryEmbedding", [T([2, 8, 64]), W([128, 4]), W([128, 4])], [T([2, 8, 64])], rotary_embedding_dim=8
            )
        )


# ---------------------------------------------------------------------------------------------------------
# TensorScatter (opset 24).


@pytest.mark.parametrize("max_len", [16, 4096])
def test_tensor_scatter_is_counted_in_place(max_len):
    # update [2, 4, 3, 8] written into a [2, 4, max_len, 8] cache: reads the update (768 B) and write_indices
    # (2 int64), writes the update's 768 bytes; the cache's size does not matter
    inputs = [T([2, 4, max_len, 8]), T([2, 4, 3, 8]), T([2], INT64)]
    cost = cost_of(make_node("TensorScatter", inputs, [T([2, 4, max_len, 8])]))
    assert (cost.flops, cost.macs) == (0, 0)
    assert (cost.bytes_read, cost.bytes_written) == (768 + 16, 768)
    assert (cost.params, cost.kernels) == (0, 1)


def test_tensor_scatter_without_write_indices_and_circular():
    inputs = [T([1, 8, 32, 64], FLOAT16), T([1, 8, 1, 64], FLOAT16)]
    cost = cost_of(make_node("TensorScatter", inputs, [T(None)], mode="circular", axis=2))
    assert (cost.bytes_read, cost.bytes_written) == (8 * 64 * 2, 8 * 64 * 2)  # one fp16 token per head


# ---------------------------------------------------------------------------------------------------------
# LinearAttention (opset 27). B 2, T 3, 4 query heads, 2 KV heads, dk 8, dv 4: per token 2*8*4 = 64 state
# elements and 4*8*4 = 128 output MACs; 6 tokens.

Q, K, V = T([2, 3, 32]), T([2, 3, 16]), T([2, 3, 8])
PER_HEAD_DECAY, PER_KEY_DECAY, BETA = T([2, 3, 2]), T([2, 3, 16]), T([2, 3, 2])


def linear(inputs, **attrs):
    return cost_of(
        make_node("LinearAttention", inputs, [T([2, 3, 16]), T([2, 2, 8, 4])], q_num_heads=4, kv_num_heads=2, **attrs)
    )


def test_linear_attention_linear_rule():
    cost = linear([Q, K, V], update_rule="linear")
    assert cost.macs == 6 * (64 + 128) == 1152  # S += k v^T, o = q^T S
    assert cost.flops == 2 * 1152 + 6 * 4 * 4 == 2400  # + scale: dv per query head per token
    assert cost.kernels == 1


def test_linear_attention_gated_rule_per_head_and_per_key_decay():
    per_head = linear([Q, K, V, None, PER_HEAD_DECAY], update_rule="gated")
    assert per_head.macs == 1152
    assert per_head.flops == 2400 + 6 * 64 + 12  # S *= exp(g): 64 multiplies per token; 2*3*2 exps
    per_key = linear([Q, K, V, None, PER_KEY_DECAY], update_rule="gated")
    assert per_key.flops == 2400 + 6 * 64 + 96  # 2*3*16 exps


def test_linear_attention_delta_rule():
    cost = linear([Q, K, V, None, None, BETA], update_rule="delta")
    assert cost.macs == 6 * (2 * 64 + 128) == 1536  # S^T k and S += k v'^T, then q^T S
    assert cost.flops == 2 * 1536 + 96 + 6 * 2 * 2 * 4 == 3264  # + v - S^T k and beta * (.): 2*dv per KV head


def test_linear_attention_gated_delta_is_the_default():
    # past_state [2, 2, 8, 4]
    inputs = [Q, K, V, T([2, 2, 8, 4]), PER_HEAD_DECAY, BETA]
    cost = linear(inputs)
    assert cost.macs == 1536
    assert cost.flops == 2 * 1536 + 96 + 96 + 6 * 64 + 12 == 3660  # delta's terms on the decayed state
    assert cost == linear(inputs, update_rule="gated_delta")
    # read: query 768, key 384, value 192, past_state 512, decay 48, beta 48; written: output 384, state 512
    assert (cost.bytes_read, cost.bytes_written) == (1952, 896)


def test_linear_attention_unknown_outputs_and_rule():
    inputs = [Q, K, V, None, PER_HEAD_DECAY, BETA]
    known = linear(inputs)
    unknown = cost_of(
        make_node("LinearAttention", inputs, [T(None), T(None)], q_num_heads=4, kv_num_heads=2, update_rule="mystery")
    )
    assert (unknown.flops, unknown.bytes_written) == (known.flops, known.bytes_written)
    assert "update_rule 'mystery' unknown" in unknown.note
    with pytest.raises(UnknownShape, match="q_num_heads"):
        cost_of(make_node("LinearAttention", [Q, K, V], [T(None), T(None)], kv_num_heads=2))


# ---------------------------------------------------------------------------------------------------------
# CausalConvWithState (opset 27): input [2, 8, 5], weight [8, 1, 4].


def test_causal_conv_with_state_plain():
    cost = cost_of(make_node("CausalConvWithState", [T([2, 8, 5]), W([8, 1, 4])], [T([2, 8, 5]), T([2, 8, 3])]))
    assert cost.macs == 2 * 8 * 5 * 4 == 320  # k MACs per output position
    assert cost.flops == 640
    # read: input 320 + weight 128; written: output 320 + present_state [2, 8, 3] 192
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (448, 512, 32, 1)


@pytest.mark.parametrize("activation", ["silu", "swish"])
def test_causal_conv_with_state_bias_silu_and_state(activation):
    inputs = [T([2, 8, 5]), W([8, 1, 4]), W([8]), T([2, 8, 3])]
    cost = cost_of(make_node("CausalConvWithState", inputs, [T(None), T(None)], activation=activation))
    assert cost.macs == 320
    assert cost.flops == 640 + 80 + 5 * 80 == 1120  # + bias add, + x * sigmoid(x) (4 + 1) per output
    assert (cost.bytes_read, cost.bytes_written, cost.params) == (320 + 128 + 32 + 192, 320 + 192, 40)


# ---------------------------------------------------------------------------------------------------------
# Swish (opset 24) and SwiGLU (opset 28).


def test_swish_and_swiglu():
    # [2, 3, 4] = 24 elements
    swish = cost_of(make_node("Swish", [T([2, 3, 4])], [T([2, 3, 4])], alpha=1.0))
    assert swish.flops == 6 * 24  # mul alpha, sigmoid (4), mul x
    assert (swish.bytes_read, swish.bytes_written, swish.kernels) == (96, 96, 1)
    swiglu = cost_of(make_node("SwiGLU", [T([2, 3, 4]), T([2, 3, 4])], [T(None)]))
    assert swiglu.flops == 7 * 24  # Swish (6) of A, mul by B
    assert (swiglu.bytes_read, swiglu.bytes_written, swiglu.kernels) == (192, 96, 1)


# ---------------------------------------------------------------------------------------------------------
# End to end: a model loaded, inferred and analyzed (needs an onnx that knows the ops).


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


@pytest.mark.skipif(onnx.defs.onnx_opset_version() < 24, reason="this onnx has no Attention/TensorScatter opset 24")
def test_decoder_step_end_to_end():
    from onnxroof.api import analyze

    # B 1, 4 query heads and 2 KV heads of 8, S 3 new tokens, P 5 cached: L 8; a 16-long external cache
    nodes = [
        helper.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], num_heads=4),
        helper.make_node(
            "Attention",
            ["qr", "k", "v", "", "pk", "pv"],
            ["y", "prk", "prv", "qk"],
            q_num_heads=4,
            kv_num_heads=2,
            is_causal=1,
        ),
        helper.make_node("Swish", ["y"], ["ys"]),
        helper.make_node("TensorScatter", ["cache", "kup", "wi"], ["cache_out"]),
    ]
    caches = [numpy_helper.from_array(np.ones((32, 4), np.float32), n) for n in ("cos", "sin")]
    inputs = [
        _vi("q", [1, 3, 32]),
        _vi("k", [1, 3, 16]),
        _vi("v", [1, 3, 16]),
        _vi("pk", [1, 2, 5, 8]),
        _vi("pv", [1, 2, 5, 8]),
        _vi("pos", [1, 3], TensorProto.INT64),
        _vi("cache", [1, 2, 16, 8]),
        _vi("kup", [1, 2, 3, 8]),
        _vi("wi", [1], TensorProto.INT64),
    ]
    outputs = [_vi(n, None) for n in ("ys", "prk", "prv", "qk", "cache_out")]
    graph = helper.make_graph(nodes, "decoder_step", inputs, outputs, caches)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no op may be unsupported
        a = analyze(model, device="v100-sxm2", as_exported=True)
    costs = {n.op_type: n.cost for n in a.nodes}
    assert not a.unsupported
    # RotaryEmbedding: 96 elements * 3; reads q 384 + pos 24 + 3 rows of each 4-wide cache (48 B each)
    assert (costs["RotaryEmbedding"].flops, costs["RotaryEmbedding"].bytes_read) == (288, 384 + 24 + 96)
    # Attention: scores 1*4*3*8 = 96; MACs 96 * (8 + 8); FLOPs 2 * 1536 + 96 * (6 + 1 causal)
    assert (costs["Attention"].macs, costs["Attention"].flops) == (1536, 3744)
    # written: Y 384 + present key and value [1, 2, 8, 8] 512 each + qk [1, 4, 3, 8] 384
    assert costs["Attention"].bytes_written == 384 + 1024 + 384
    assert costs["Swish"].flops == 6 * 96
    assert (costs["TensorScatter"].bytes_read, costs["TensorScatter"].bytes_written) == (192 + 8, 192)


@pytest.mark.skipif(onnx.defs.onnx_opset_version() < 27, reason="this onnx has no LinearAttention opset 27")
def test_linear_attention_block_end_to_end():
    from onnxroof.api import analyze

    nodes = [
        helper.make_node("CausalConvWithState", ["x", "w", "", "state"], ["xc", "state_out"], activation="silu"),
        helper.make_node(
            "LinearAttention", ["q", "k", "v", "", "g", "beta"], ["o", "s_out"], q_num_heads=4, kv_num_heads=2
        ),
    ]
    w = numpy_helper.from_array(np.ones((8, 1, 4), np.float32), "w")
    inputs = [
        _vi("x", [2, 8, 5]),
        _vi("state", [2, 8, 3]),
        _vi("q", [2, 3, 32]),
        _vi("k", [2, 3, 16]),
        _vi("v", [2, 3, 8]),
        _vi("g", [2, 3, 2]),
        _vi("beta", [2, 3, 2]),
    ]
    outputs = [_vi(n, None) for n in ("xc", "state_out", "o", "s_out")]
    model = helper.make_model(
        helper.make_graph(nodes, "block", inputs, outputs, [w]), opset_imports=[helper.make_opsetid("", 27)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = analyze(model, device="v100-sxm2", as_exported=True)
    costs = {n.op_type: n.cost for n in a.nodes}
    assert not a.unsupported
    assert (costs["CausalConvWithState"].flops, costs["CausalConvWithState"].bytes_written) == (640 + 400, 512)
    assert (costs["LinearAttention"].flops, costs["LinearAttention"].bytes_written) == (3660, 896)
