"""onnxruntime contrib attention ops against closed forms written from their operator definitions."""

from __future__ import annotations

import pytest

from onnxroof.ir import UnknownShape
from tests.helpers import FLOAT16, INT32, INT64, UINT8, T, W, cost_of, make_node

MS = "com.microsoft"

# Attention test case: batch 2, sequence 8, hidden 64, 4 heads of 16.
B, S, D, N = 2, 8, 64, 4
HS = D // N  # 16


def attention_node(*, past=None, mask=None, qkv=None, **attrs):
    dq, dk, dv = qkv or (D, D, D)
    inputs = [T([B, S, D]), W([D, dq + dk + dv]), W([dq + dk + dv]), mask, past]
    if qkv:
        attrs["qkv_hidden_sizes"] = list(qkv)
    return make_node("Attention", inputs, [T([B, S, dv])], domain=MS, num_heads=N, **attrs)


def test_attention_each_term():
    cost = cost_of(attention_node())
    projection = B * S * D * (D + D + D)  # 2*8*64*192 = 196608: Q, K and V projections
    scores = B * N * S * S * HS  # 2*4*8*8*16 = 8192: Q K^T
    context = B * N * S * S * HS  # 8192: softmax(.) V
    assert (projection, scores, context) == (196608, 8192, 8192)
    assert cost.macs == projection + scores + context == 212992
    bias_adds = B * S * 3 * D  # 3072: one add per projected Q/K/V element
    score_elements = B * N * S * S  # 512
    softmax, scale = 5 * score_elements, 1 * score_elements  # 2560, 512
    assert cost.flops == 2 * 212992 + bias_adds + softmax + scale == 432128
    assert cost.params == D * 3 * D + 3 * D == 12480
    # input 2*8*64*4 + weights 64*192*4 + bias 192*4; output 2*8*64*4
    assert (cost.bytes_read, cost.bytes_written) == (4096 + 49152 + 768, 4096)
    assert cost.kernels == 4


def test_attention_past_extends_the_key_length():
    # past [2, B, N, 6, HS]: total key length 8 + 6 = 14
    cost = cost_of(attention_node(past=T([2, B, N, 6, HS])))
    assert cost.macs == B * S * D * 3 * D + 2 * (B * N * S * 14 * HS) == 225280
    assert cost.flops == 2 * 225280 + B * S * 3 * D + 6 * (B * N * S * 14)


def test_attention_shared_buffer_uses_the_past_sequence_length_input():
    # past_present_share_buffer: the past is a 32-long buffer of which past_sequence_length = 6 is filled,
    # so the key length is 8 + 6 = 14 as in the test above
    inputs = [T([B, S, D]), W([D, 3 * D]), W([3 * D]), None, T([2, B, N, 32, HS]), None, T([1], INT32)]
    node = make_node(
        "Attention", inputs, [T([B, S, D])], domain=MS, constants={6: [6]}, num_heads=N, past_present_share_buffer=1
    )
    assert cost_of(node).macs == 225280


def test_attention_qkv_hidden_sizes():
    # Q and K 64 wide, V 32 wide: Hv = 32/4 = 8
    cost = cost_of(attention_node(qkv=(64, 64, 32)))
    assert cost.macs == B * S * D * 160 + B * N * S * S * 16 + B * N * S * S * 8 == 176128


def test_attention_mask_adds_one_per_score_element():
    plain = cost_of(attention_node())
    masked = cost_of(attention_node(mask=T([B, S], INT32)))
    assert masked.flops - plain.flops == B * N * S * S


def mha(inputs, outputs=None, constants=None):
    return cost_of(
        make_node("MultiHeadAttention", inputs, outputs or [T([B, S, 32])], domain=MS, num_heads=N, constants=constants)
    )


def test_mha_separate_qkv():
    # query [2,8,64], key [2,10,64], value [2,10,32]: L = 10, H = 16, Hv = 8
    cost = mha([T([B, S, D]), T([B, 10, D]), T([B, 10, 32])])
    assert cost.macs == B * S * 10 * D + B * S * 10 * 32 == 10240 + 5120
    score_elements = B * N * S * 10  # 640
    assert cost.flops == 2 * 15360 + (5 + 1) * score_elements == 34560
    assert cost.kernels == 3


def test_mha_bias_adds_one_per_projected_element():
    plain = mha([T([B, S, D]), T([B, 10, D]), T([B, 10, 32])])
    biased = mha([T([B, S, D]), T([B, 10, D]), T([B, 10, 32]), W([D + D + 32])])
    # Q: 2*8*64 = 1024 adds; K and V: 2*10*(64+32) = 1920 adds
    assert biased.flops - plain.flops == B * S * D + B * 10 * (D + 32) == 2944


def test_mha_packed_qkv():
    # query [B, S, N, 3, H]: self-attention with L = S = 8, D = Dv = 64
    cost = mha([T([B, S, N, 3, HS])], [T([B, S, D])])
    assert cost.macs == 2 * (B * S * S * D) == 16384
    assert cost.flops == 2 * 16384 + 6 * (B * N * S * S)


def test_mha_packed_kv_and_head_layout_kv_match_separate_kv():
    separate = mha([T([B, S, D]), T([B, 10, D]), T([B, 10, D])])
    packed_kv = mha([T([B, S, D]), T([B, 10, N, 2, HS])])
    head_layout = mha([T([B, S, D]), T([B, N, 10, HS]), T([B, N, 10, HS])])
    assert separate.macs == packed_kv.macs == head_layout.macs == 2 * (B * S * 10 * D)


def test_mha_past_key_extends_the_key_length():
    # past_key [B, N, 6, H]: L = 10 new + 6 past = 16
    inputs = [T([B, S, D]), T([B, 10, D]), T([B, 10, 32]), None, None, None, T([B, N, 6, HS]), T([B, N, 6, 8])]
    assert mha(inputs).macs == B * S * 16 * D + B * S * 16 * 32


def test_mha_unsupported_layout_says_why():
    with pytest.raises(UnknownShape, match="key"):
        mha([T([B, S, D])])


def test_group_query_attention():
    # 4 query heads of 16, 2 KV heads; total_sequence_length = 10 (a constant)
    inputs = [T([1, 4, 64]), T([1, 4, 32]), T([1, 4, 32]), None, None, T([1], INT32), T([], INT32)]
    node = make_node(
        "GroupQueryAttention", inputs, [T([1, 4, 64])], domain=MS, num_heads=4, kv_num_heads=2, constants={6: 10}
    )
    cost = cost_of(node)
    assert cost.macs == 2 * (1 * 4 * 4 * 10 * 16) == 5120
    assert cost.flops == 2 * 5120 + 6 * (1 * 4 * 4 * 10) == 11200


def gqa_step(past_rows: int, total: int | None, *, seq: int = 1, rotary: bool = False):
    """A GroupQueryAttention call in fp16: batch 1, ``seq`` new tokens, 4 query heads of 16 sharing 2 KV heads,
    a past cache of ``past_rows`` rows, total_sequence_length ``total`` (None: not a constant)."""
    half = FLOAT16
    past_key = T([1, 2, past_rows, 16], half) if past_rows else None
    past_value = T([1, 2, past_rows, 16], half) if past_rows else None
    inputs = [T([1, seq, 64], half), T([1, seq, 32], half), T([1, seq, 32], half), past_key, past_value]
    inputs += [T([1], INT32), T([], INT32)]
    if rotary:
        inputs += [W([64, 8], half), W([64, 8], half)]
    outputs = [T([1, seq, 64], half), T(None, half), T(None, half)]
    attrs = {"do_rotary": 1} if rotary else {}
    constants = {6: total} if total is not None else {}
    return make_node(
        "GroupQueryAttention", inputs, outputs, domain=MS, num_heads=4, kv_num_heads=2, constants=constants, **attrs
    )


# One row of one fp16 cache at batch 1: 2 KV heads x 16 x 2 bytes.
KV_ROW = 2 * 16 * 2  # 64


def test_group_query_attention_shared_buffer_decode():
    # A 64-row buffer holding 10 valid rows; one new token makes L = 11 (total_sequence_length).
    cost = cost_of(gqa_step(64, 11, rotary=True))
    assert cost.macs == 2 * (1 * 4 * 1 * 11 * 16) == 1408
    scores = 1 * 4 * 1 * 11  # 44
    rotated = 1 * 1 * (4 + 2) * 16  # 96 elements of Q and K
    assert cost.flops == 2 * 1408 + 6 * scores + 3 * rotated == 3368
    # query 64*2 + key 32*2 + value 32*2 + seqlens_k 4 + total 4; the 10 valid rows of both caches; of cos and
    # sin the one row of the new position (8 fp16 each); not the 54 empty rows of the buffer
    new_inputs = 128 + 64 + 64 + 4 + 4
    assert cost.bytes_read == new_inputs + 2 * 10 * KV_ROW + 2 * 1 * 8 * 2 == 1576
    # the output 64*2, and only the new row of each cache: the buffer is shared with the present
    assert cost.bytes_written == 128 + 2 * 1 * KV_ROW == 256


def test_group_query_attention_concatenating_past():
    # A past of exactly the 10 valid rows: the present is a new tensor of all 11 rows
    cost = cost_of(gqa_step(10, 11))
    assert cost.bytes_read == (128 + 64 + 64 + 4 + 4) + 2 * 10 * KV_ROW
    assert cost.bytes_written == 128 + 2 * 11 * KV_ROW


def test_group_query_attention_prefill():
    # 8 prompt tokens, no past: L = S = 8; both present caches written in full
    cost = cost_of(gqa_step(0, 8, seq=8))
    assert cost.macs == 2 * (4 * 8 * 8 * 16) == 8192
    assert cost.bytes_read == 8 * (128 + 64 + 64) + 4 + 4
    assert cost.bytes_written == 8 * 128 + 2 * 8 * KV_ROW


def test_group_query_attention_unknown_total_counts_the_buffer():
    cost = cost_of(gqa_step(64, None))
    # L = 64 + 1: the whole buffer counted as valid past, and said so
    assert cost.macs == 2 * (4 * 1 * 65 * 16)
    assert "total_sequence_length unknown" in cost.note


def test_rotary_embedding():
    inputs = [T([B, S, D]), T([B, S], INT64), W([128, 8]), W([128, 8])]
    cost = cost_of(make_node("RotaryEmbedding", inputs, [T([B, S, D])], domain=MS))
    # 3 FLOPs per rotated element (2 multiplies, 1 add), all 2*8*64 = 1024 elements rotated
    assert cost.flops == 3 * 1024
    # input 1024*4 + position ids 16*8 + of each cache only the 16 rows used, 8 floats wide
    assert cost.bytes_read == 1024 * 4 + 16 * 8 + 2 * 16 * 8 * 4
    partial = cost_of(
        make_node("RotaryEmbedding", inputs, [T([B, S, D])], domain=MS, num_heads=N, rotary_embedding_dim=8)
    )
    # rotary dim 8 of head size 16: half the elements rotated
    assert partial.flops == 3 * 1024 // 2


def test_gather_block_quantized():
    # A 4-bit table of 100 rows x 64 values packed as uint8 [100, 32], fp16 scales [100, 2] (blocks of 32);
    # indices [2, 3] gather 6 rows: output [2, 3, 64] fp16.
    inputs = [W([100, 32], UINT8), T([2, 3], INT64), W([100, 2], FLOAT16)]
    node = make_node(
        "GatherBlockQuantized", inputs, [T([2, 3, 64], FLOAT16)], domain=MS, bits=4, block_size=32, quantize_axis=1
    )
    cost = cost_of(node)
    # (q - zero_point) * scale per output element: 2 * 6 * 64
    assert cost.flops == 2 * 6 * 64 == 768
    # indices 6 x 8 bytes; of the table and its scales the 6 rows gathered: 6 x 32 + 6 x 2 x 2
    assert cost.bytes_read == 48 + 6 * 32 + 6 * 2 * 2 == 264
    assert cost.bytes_written == 6 * 64 * 2
    # params: the table's 100 x 64 weights (two a byte), its 200 scales
    assert cost.params == 100 * 64 + 200
