"""PagedAttention and SparseAttention, each checked against a closed form from the op's definition in
onnxruntime's ContribOperators.md.

Conventions (costs/common.py): a query against L keys is L score elements a head, H + Hv MACs each; 6 FLOPs per
score element (scale 1, softmax 5); 3 per rotated element. fp16 is 2 bytes, int8 1, int32 4. Every case has
N = 4 query heads (or 2), Nkv = 2 (or 1) key/value heads of H = 8.
"""

from __future__ import annotations

from onnxroof.costs import NodeView
from tests.helpers import FLOAT, FLOAT16, INT8, INT32, T, W, cost_of, make_node

MS = "com.microsoft"


def paged_node(cache_dtype: int = FLOAT16, lengths: bool = True, extra=(), **attrs) -> NodeView:
    """Two packed sequences: 3 new tokens after 5 cached, 1 after 10 (T = 4); caches of 8 blocks of 4 rows."""
    inputs = [
        T([4, 32], FLOAT16),  # query [T, N*H]: 256 bytes
        T([4, 16], FLOAT16),  # key [T, Nkv*H]: 128 bytes
        T([4, 16], FLOAT16),  # value: 128 bytes
        T([8, 4, 2, 8], cache_dtype),  # key_cache [blocks, block_size, Nkv, H]
        T([8, 4, 2, 8], cache_dtype),  # value_cache
        T([3], INT32),  # cumulative_sequence_length: 12 bytes
        T([2], INT32),  # past_seqlens: 8 bytes
        T([2, 4], INT32),  # block_table [B, max_blocks]: 32 bytes
        *extra,
    ]
    constants = {5: [0, 3, 4], 6: [5, 10]} if lengths else {}
    outputs = [T([4, 32], FLOAT16)]
    return make_node(
        "PagedAttention", inputs, outputs, domain=MS, constants=constants, num_heads=4, kv_num_heads=2, **attrs
    )


def test_paged_attention_counts_each_sequence_against_its_history():
    c = cost_of(paged_node())
    # (query, key) pairs: 3 * (5 + 3) + 1 * (10 + 1) = 35 a head; 4 heads: 140 score elements
    assert c.macs == 140 * (8 + 8)  # = 2240
    assert c.flops == 2 * 2240 + 6 * 140  # = 5320
    # one token's cache row is Nkv*H fp16 = 32 bytes; of each of the two caches the 5 + 10 past rows are read
    assert c.bytes_read == 256 + 128 + 128 + 12 + 8 + 32 + 2 * 15 * 32  # = 1524
    # the output [4, 32] fp16, and the 4 new rows into each cache (not the caches whole)
    assert c.bytes_written == 4 * 32 * 2 + 2 * 4 * 32  # = 512
    assert c.kernels == 2
    assert c.note == ""


def test_paged_attention_without_lengths_is_bounded_by_the_block_table():
    c = cost_of(paged_node(lengths=False))
    # every token against a table's capacity, min(4 blocks * 4 rows, the cache's 32 rows) = 16 keys: 4 * 16 pairs a
    # head; past rows: both tables full, min(2 * 16, 32) rows less the 4 new ones = 28
    assert c.macs == 4 * (4 * 16) * 16
    assert c.bytes_read == 256 + 128 + 128 + 12 + 8 + 32 + 2 * 28 * 32
    assert "capacity" in c.note


def test_paged_attention_quantized_cache_and_rotary():
    extra = [
        W([64, 4], FLOAT16),  # cos_cache [max positions, H/2]: 2 rows of 8 bytes a token read
        W([64, 4], FLOAT16),  # sin_cache
        None,  # slot_mapping
        None,  # head_sink
        None,  # q_norm_weight
        None,  # k_norm_weight
        W([1], FLOAT),  # k_scale: 4 bytes
        W([1], FLOAT),  # v_scale: 4 bytes
    ]
    quantized = {"k_quant_type": "PER_TENSOR", "v_quant_type": "PER_TENSOR"}
    c = cost_of(paged_node(INT8, extra=extra, do_rotary=1, **quantized))
    # as the first case (5320), + rotary 3 per element of the 4 tokens' Q and K heads over min(2 * 4, 8) = 8:
    # 3 * 4 * (4 + 2) * 8 = 576, + one scale multiply per cache element read or written: 2 caches * (15 + 4) rows
    # * 2 heads * 8 = 608
    assert c.flops == 5320 + 576 + 608
    # int8 cache rows are 16 bytes; the cos/sin rows of the 4 positions, 4 * 4 * 2 bytes each
    assert c.bytes_read == 256 + 128 + 128 + 12 + 8 + 32 + 2 * 15 * 16 + 2 * 4 * 8 + 4 + 4
    assert c.bytes_written == 4 * 32 * 2 + 2 * 4 * 16
    assert c.kernels == 3


# The two 4 x 4 block layouts of the op's own example, as CSR (block_col_indices padded with -1):
#   layout 0: [[1,0,0,0], [1,1,0,0], [0,1,1,0], [0,1,1,1]]
#   layout 1: [[1,0,0,0], [1,1,0,0], [1,1,1,0], [1,0,1,1]]
ROWS = [[0, 1, 3, 5, 8], [0, 1, 3, 6, 9]]
COLS = [[0, 0, 1, 1, 2, 1, 2, 3, -1], [0, 0, 1, 0, 1, 2, 0, 2, 3]]


def sparse_node(seq: int, total: int, heads: int, kv_heads: int, layouts: int, known: bool = True) -> NodeView:
    """SparseAttention of S new tokens at positions [total - S, total) in blocks of 4, a 16-row shared cache."""
    inputs = [
        T([1, seq, heads * 8], FLOAT16),  # query
        T([1, seq, kv_heads * 8], FLOAT16),  # key
        T([1, seq, kv_heads * 8], FLOAT16),  # value
        T([1, kv_heads, 16, 8], FLOAT16),  # past_key [B, Nkv, max_cache_sequence_length, H]
        T([1, kv_heads, 16, 8], FLOAT16),  # past_value
        W([layouts, 5], INT32),  # block_row_indices
        W([layouts, 9], INT32),  # block_col_indices
        T([], INT32),  # total_sequence_length
        T([1], INT32),  # key_total_sequence_lengths
    ]
    constants = {7: total, 8: [total]}
    if known:
        constants |= {5: ROWS[:layouts], 6: COLS[:layouts]}
    outputs = [T([1, seq, heads * 8], FLOAT16), inputs[3], inputs[4]]
    return make_node(
        "SparseAttention",
        inputs,
        outputs,
        domain=MS,
        constants=constants,
        num_heads=heads,
        kv_num_heads=kv_heads,
        sparse_block_size=4,
    )


def test_sparse_attention_decode_attends_its_row_s_blocks():
    # One token at position 13 (block row 3) of 14 keys; heads 0, 2 use layout 0, heads 1, 3 layout 1.
    # Layout 0's row 3 holds blocks 1, 2, 3: 4 + 4 + 2 keys (block 3 holds keys 12 and 13) = 10; layout 1's
    # blocks 0, 2, 3: 10. 4 heads: 40 score elements, 2 H = 16 MACs each.
    c = cost_of(sparse_node(1, 14, heads=4, kv_heads=2, layouts=2))
    assert c.macs == 16 * 40  # = 640
    assert c.flops == 2 * 640 + 6 * 40  # = 1520
    # each key/value head's two query heads attend blocks {1,2,3} and {0,2,3}: all 13 past rows, 16 bytes a row
    # (H fp16) of K and of V: 2 * 2 heads * 13 * 16 = 832; the small inputs: query 64, key 32, value 32, the CSR
    # arrays 10 * 4 and 18 * 4, the two lengths 4 each: 248
    assert c.bytes_read == 248 + 2 * 2 * 13 * 16
    # output 32 fp16 = 64 bytes, and one new row of each head into each cache (a shared buffer): 2 * 2 * 16
    assert c.bytes_written == 64 + 2 * 2 * 16


def test_sparse_attention_reads_only_the_blocks_it_attends():
    # One layout for all heads: row 3's blocks 1, 2, 3; block 0 (4 past rows) is never read. Past rows below 13:
    # 4 + 4 + 1 = 9 of the single key/value head.
    c = cost_of(sparse_node(1, 14, heads=2, kv_heads=1, layouts=1))
    assert c.macs == 16 * 2 * 10
    assert c.bytes_read == 32 + 16 + 16 + 5 * 4 + 9 * 4 + 4 + 4 + 2 * 9 * 16


def test_sparse_attention_prefill_counts_each_query_block():
    # 8 tokens at positions 0-7, one layout: block row 0 (4 queries) attends block 0 (4 keys) and row 1 (4
    # queries) blocks 0 and 1 (8 keys): 16 + 32 = 48 pairs a head, 2 heads: 96; no past row to read.
    c = cost_of(sparse_node(8, 8, heads=2, kv_heads=1, layouts=1))
    assert c.macs == 16 * 96
    assert c.bytes_read == 8 * 16 * 2 + 2 * 8 * 8 * 2 + 5 * 4 + 9 * 4 + 4 + 4


def test_sparse_attention_with_an_unknown_mask_counts_it_dense():
    # Every block at or below the diagonal: the token at 13 attends all 14 keys (N*S*L = 2 * 1 * 14 = 28 score
    # elements) and reads the 13 past rows, as a dense causal attention would.
    c = cost_of(sparse_node(1, 14, heads=2, kv_heads=1, layouts=1, known=False))
    assert c.macs == 16 * 28
    assert c.bytes_read == 32 + 16 + 16 + 5 * 4 + 9 * 4 + 4 + 4 + 2 * 13 * 16
    assert "block mask unknown" in c.note
