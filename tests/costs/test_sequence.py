"""Sequence, string, TfIdfVectorizer and ImageDecoder costs against closed forms written from the op definitions.

Sequence-typed values are Tensors with no shape and dtype 0, as the graph builder hands them over (``SEQ``).
"""

from __future__ import annotations

import pytest
from onnx import TensorProto

from onnxroof.costs import Cost
from onnxroof.costs.common import UNKNOWN_TRIPS_NOTE
from onnxroof.costs.sequence import STRING_BYTES_NOTE, UNKNOWN_ELEMENTS_NOTE
from onnxroof.ir import UnknownShape
from tests.helpers import BOOL, FLOAT, FLOAT16, INT32, INT64, UINT8, T, W, cost_of, make_node

STRING = TensorProto.STRING


def SEQ(name: str = "seq"):
    """A sequence-typed value: no shape, dtype 0."""
    return T(None, 0, name=name)


def numbers(cost: Cost) -> tuple:
    return (cost.flops, cost.macs, cost.bytes_read, cost.bytes_written, cost.params, cost.kernels)


# ---------------------------------------------------------------------------------------------------------
# Sequence ops


def test_sequence_construct_copies_each_input_position():
    # inputs a [2,3] float (24 B), b [5] float (20 B), a again: a is read once (24 + 20 = 44 B read) but stored
    # twice in the sequence (24 + 20 + 24 = 68 B written)
    a, b = T([2, 3], name="a"), T([5], name="b")
    cost = cost_of(make_node("SequenceConstruct", [a, b, a], [SEQ()]))
    assert numbers(cost) == (0, 0, 44, 68, 0, 1)
    assert cost.note == ""


def test_sequence_construct_of_a_weight_counts_its_params():
    # a weight [3] float (12 B) and an activation [3] (12 B): params 3
    cost = cost_of(make_node("SequenceConstruct", [W([3]), T([3])], [SEQ()]))
    assert numbers(cost) == (0, 0, 24, 24, 3, 1)


def test_sequence_construct_needs_its_input_shapes():
    with pytest.raises(UnknownShape):
        cost_of(make_node("SequenceConstruct", [T(None)], [SEQ()]))


def test_split_to_sequence_writes_the_input_bytes():
    # data [3,6] float = 72 B; the pieces hold every element once: 72 B written
    x = T([3, 6])
    assert numbers(cost_of(make_node("SplitToSequence", [x], [SEQ()]))) == (0, 0, 72, 72, 0, 1)
    # a scalar int64 split adds 8 B read; axis and keepdims do not change the bytes
    scalar = make_node("SplitToSequence", [x, T([], INT64)], [SEQ()], axis=1, keepdims=0)
    assert numbers(cost_of(scalar)) == (0, 0, 72 + 8, 72, 0, 1)
    # a 1-D split of 2 int64 lengths: 16 B read
    sizes = make_node("SplitToSequence", [x, T([2], INT64)], [SEQ()], axis=1)
    assert numbers(cost_of(sizes)) == (0, 0, 72 + 16, 72, 0, 1)


def test_string_sequences_move_no_modelled_bytes():
    # a string tensor [4] split into a sequence: 0 B either way (string bytes are not modelled), noted
    cost = cost_of(make_node("SplitToSequence", [T([4], STRING)], [SEQ()]))
    assert numbers(cost) == (0, 0, 0, 0, 0, 1)
    assert STRING_BYTES_NOTE in cost.note
    cost = cost_of(make_node("SequenceAt", [SEQ(), T([], INT64)], [T([4], STRING)]))
    assert numbers(cost) == (0, 0, 8, 0, 0, 1)  # only the int64 position is read
    assert STRING_BYTES_NOTE in cost.note


def test_concat_from_sequence_moves_the_output_bytes():
    # output [4,5] float16 = 40 B, gathered from the elements (40 B read) and written (40 B); stacking too
    for new_axis in (0, 1):
        node = make_node("ConcatFromSequence", [SEQ()], [T([4, 5], FLOAT16)], axis=0, new_axis=new_axis)
        assert numbers(cost_of(node)) == (0, 0, 40, 40, 0, 1)
    with pytest.raises(UnknownShape):
        cost_of(make_node("ConcatFromSequence", [SEQ()], [T(None, FLOAT16)], axis=0))


def test_sequence_at_copies_out_one_element():
    # element [2,3] float = 24 B read and written, plus the int64 scalar position (8 B read)
    cost = cost_of(make_node("SequenceAt", [SEQ(), T([], INT64)], [T([2, 3])]))
    assert numbers(cost) == (0, 0, 24 + 8, 24, 0, 1)
    # a position of unknown shape is a scalar by definition: one int32 element, 4 B
    cost = cost_of(make_node("SequenceAt", [SEQ(), T(None, INT32)], [T([2, 3])]))
    assert cost.bytes_read == 24 + 4
    with pytest.raises(UnknownShape):
        cost_of(make_node("SequenceAt", [SEQ(), T([], INT64)], [T(None)]))


def test_sequence_insert_copies_in_the_tensor():
    # tensor [3] int64 = 24 B read and written; the existing elements' sizes are unknown (noted)
    cost = cost_of(make_node("SequenceInsert", [SEQ(), T([3], INT64)], [SEQ("out")]))
    assert numbers(cost) == (0, 0, 24, 24, 0, 1)
    assert UNKNOWN_ELEMENTS_NOTE in cost.note
    # with an int64 scalar position: 8 B more read
    cost = cost_of(make_node("SequenceInsert", [SEQ(), T([3], INT64), T([], INT64)], [SEQ("out")]))
    assert numbers(cost) == (0, 0, 24 + 8, 24, 0, 1)


def test_sequence_erase_charges_what_is_known_and_notes_the_rest():
    # only the int32 scalar position (4 B) is known; the kept elements' copies are not counted
    cost = cost_of(make_node("SequenceErase", [SEQ(), T([], INT32)], [SEQ("out")]))
    assert numbers(cost) == (0, 0, 4, 0, 0, 1)
    assert UNKNOWN_ELEMENTS_NOTE in cost.note
    cost = cost_of(make_node("SequenceErase", [SEQ()], [SEQ("out")]))
    assert numbers(cost) == (0, 0, 0, 0, 0, 1)
    assert UNKNOWN_ELEMENTS_NOTE in cost.note


def test_sequence_length_and_empty_do_no_work():
    # metadata: no data moved, no kernel, like Shape and Size
    assert numbers(cost_of(make_node("SequenceLength", [SEQ()], [T([], INT64)]))) == (0, 0, 0, 0, 0, 0)
    assert numbers(cost_of(make_node("SequenceEmpty", [], [SEQ()], dtype=FLOAT))) == (0, 0, 0, 0, 0, 0)


BODY = Cost(flops=50, macs=20, bytes_read=8, bytes_written=4, params=7, kernels=3)


def test_sequence_map_counts_one_iteration_and_says_so():
    seen = []

    def coster(attr):
        seen.append(attr)
        return BODY

    node = make_node("SequenceMap", [SEQ(), T([4])], [SEQ("out")], cost_subgraph=coster, body="body")
    cost = cost_of(node)
    # one iteration of the body: its cost unchanged
    assert numbers(cost) == (50, 20, 8, 4, 7, 3)
    assert seen == ["body"]
    assert UNKNOWN_TRIPS_NOTE in cost.note


def test_sequence_map_without_a_subgraph_coster_is_an_error_not_free():
    with pytest.raises(UnknownShape):
        cost_of(make_node("SequenceMap", [SEQ()], [SEQ("out")], body="body"))


# ---------------------------------------------------------------------------------------------------------
# String ops: bytes of string tensors count 0 and are noted


def test_string_concat_one_flop_per_output_element():
    # X [3], Y [1] broadcast to Z [3]: 3 concatenations; string bytes 0
    node = make_node("StringConcat", [T([3], STRING), T([1], STRING)], [T([3], STRING)])
    cost = cost_of(node)
    assert numbers(cost) == (3, 0, 0, 0, 0, 1)
    assert STRING_BYTES_NOTE in cost.note
    # Z of unknown shape: the broadcast of [2,1] and [1,4] is [2,4], 8 concatenations
    node = make_node("StringConcat", [T([2, 1], STRING), T([1, 4], STRING)], [T(None, STRING)])
    assert cost_of(node).flops == 8


def test_regex_full_match_one_flop_per_element_and_bool_output():
    # X [2,5]: 10 matches; Y bool [2,5] = 10 B written; the string input reads 0 B
    node = make_node("RegexFullMatch", [T([2, 5], STRING)], [T([2, 5], BOOL)], pattern="a+")
    cost = cost_of(node)
    assert numbers(cost) == (10, 0, 0, 10, 0, 1)
    assert STRING_BYTES_NOTE in cost.note
    # Y of unknown shape has X's
    node = make_node("RegexFullMatch", [T([2, 5], STRING)], [T(None, BOOL)], pattern="a+")
    assert (cost_of(node).flops, cost_of(node).bytes_written) == (10, 10)


def test_string_normalizer_per_input_element_steps():
    def flops(**attrs):
        node = make_node("StringNormalizer", [T([1, 6], STRING)], [T([1, 4], STRING)], **attrs)
        return cost_of(node)

    # X [1,6] = 6 elements: stopword lookup (1) + case change (1) = 2 per element = 12
    cost = flops(stopwords=["monday"], case_change_action="UPPER")
    assert numbers(cost) == (12, 0, 0, 0, 0, 1)
    assert STRING_BYTES_NOTE in cost.note
    # case sensitivity only reorders the steps: still 12
    assert flops(stopwords=["monday"], case_change_action="LOWER", is_case_sensitive=1).flops == 12
    # stopwords alone: 6; case change alone: 6; neither (a copy): 0, still one kernel
    assert flops(stopwords=["monday"]).flops == 6
    assert flops(stopwords=["monday"], case_change_action="NONE").flops == 6
    assert flops(case_change_action="LOWER").flops == 6
    assert numbers(flops()) == (0, 0, 0, 0, 0, 1)


def test_string_split_one_flop_per_input_element_and_int64_counts():
    # X [2,3] = 6 splits; Z int64 [2,3] = 48 B written; X and the substrings Y are strings (0 B)
    outputs = [T([2, 3, 4], STRING), T([2, 3], INT64)]
    cost = cost_of(make_node("StringSplit", [T([2, 3], STRING)], outputs, delimiter="."))
    assert numbers(cost) == (6, 0, 0, 48, 0, 1)
    assert STRING_BYTES_NOTE in cost.note
    # maxsplit does not change the count; Z of unknown shape takes X's: 48 B
    outputs = [T(None, STRING), T(None, INT64)]
    cost = cost_of(make_node("StringSplit", [T([2, 3], STRING)], outputs, maxsplit=1))
    assert numbers(cost) == (6, 0, 0, 48, 0, 1)


# ---------------------------------------------------------------------------------------------------------
# TfIdfVectorizer: probes of the n-gram trie, as the reference implementation walks it, if every probe matches

# The pool of onnx's backend test cases: 4 unigrams (items 0-3) then 3 bigrams (items 4-9), 7 n-grams in all.
POOL = dict(ngram_counts=[0, 4], ngram_indexes=list(range(7)), pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7])


def tfidf(x, out, **attrs):
    return cost_of(make_node("TfIdfVectorizer", [x], [out], **{**POOL, "mode": "TF", **attrs}))


def test_tfidf_bigrams_without_skips():
    # C = 12, bigrams only (min 2, max 2, trie depth 2), skip distance 1 only: starts p with p + 1 < 12 are
    # p = 0..10 (11 starts), each probing items p and p+1: 22 probes. X int32 [12] = 48 B; Y float [7] = 28 B.
    cost = tfidf(T([12], INT32), T([7]), min_gram_length=2, max_gram_length=2, max_skip_count=0)
    assert numbers(cost) == (22, 0, 48, 28, 0, 1)
    assert "upper bound" in cost.note


def test_tfidf_bigrams_with_skips():
    # C = 12, bigrams, skip distances s = 1..6: starts p with p + s < 12, i.e. 12 - s of them, 2 probes each:
    # 2 * (11 + 10 + 9 + 8 + 7 + 6) = 102
    cost = tfidf(T([12], INT32), T([7]), min_gram_length=2, max_gram_length=2, max_skip_count=5)
    assert cost.flops == 102


def test_tfidf_unigrams_and_bigrams_in_a_batch():
    # X [2,6]: 2 rows of C = 6; min 1, max 2, skips up to 5, trie depth 2.
    # s = 1 (unigrams allowed): all 6 starts; p = 0..4 reach 2 items, p = 5 only 1: 11 probes.
    # s = 2..6 (bigrams only): 6 - s starts of 2 probes: 2 * (4 + 3 + 2 + 1 + 0) = 20.
    # 31 per row, 62 in all. X int32 2*6*4 = 48 B; Y float [2,7] = 56 B.
    cost = tfidf(T([2, 6], INT32), T([2, 7]), min_gram_length=1, max_gram_length=2, max_skip_count=5)
    assert numbers(cost) == (62, 0, 48, 56, 0, 1)


def test_tfidf_unigrams_only_run_one_pass():
    # min = max = 1, trie depth 1: the s = 1 pass probes each of the 12 items once, and no further skip
    # distance runs (unigrams are counted once): 12, whatever max_skip_count is
    pool = dict(ngram_counts=[0], ngram_indexes=[0, 1, 2, 3], pool_int64s=[2, 3, 5, 4])
    for skips in (0, 3):
        cost = tfidf(T([12], INT64), T([4]), min_gram_length=1, max_gram_length=1, max_skip_count=skips, **pool)
        # X int64 12*8 = 96 B; Y float [4] = 16 B
        assert numbers(cost) == (12, 0, 96, 16, 0, 1)


def test_tfidf_trie_depth_comes_from_the_pool_not_max_gram_length():
    # max 3, but the pool holds no trigram: the trie is 2 deep. C = 5, s = 1 only (max_skip_count 0):
    # p = 0..3 probe 2 items, p = 4 one: 9 (a 3-deep trie would give 3+3+3+2+1 = 12)
    cost = tfidf(T([5], INT32), T([7]), min_gram_length=1, max_gram_length=3, max_skip_count=0)
    assert cost.flops == 9


def test_tfidf_empty_level_and_empty_trie():
    # ngram_counts [0, 0]: no unigram, 6 items = 3 bigrams; as in the bigrams case without skips: 22 probes
    pool = dict(ngram_counts=[0, 0], ngram_indexes=[0, 1, 2], pool_int64s=[5, 6, 7, 8, 6, 7])
    cost = tfidf(T([12], INT32), T([3]), min_gram_length=2, max_gram_length=2, max_skip_count=0, **pool)
    # Y float [3] = 12 B
    assert numbers(cost) == (22, 0, 48, 12, 0, 1)
    # trigrams asked for, none pooled: an empty trie, no probe and no note; only the bytes
    cost = tfidf(T([12], INT32), T([7]), min_gram_length=3, max_gram_length=3, max_skip_count=2)
    assert numbers(cost) == (0, 0, 48, 28, 0, 1)
    assert cost.note == ""


def test_tfidf_weighting_modes():
    base = dict(min_gram_length=2, max_gram_length=2, max_skip_count=0)
    # 22 probes (see above) + 1 per element of Y [7] for IDF (a test and select) or weighted TFIDF (a multiply)
    assert tfidf(T([12], INT32), T([7]), mode="IDF", **base).flops == 22 + 7
    assert tfidf(T([12], INT32), T([7]), mode="TFIDF", weights=[1.0] * 7, **base).flops == 22 + 7
    # unweighted TFIDF and TF copy the counts: 22
    assert tfidf(T([12], INT32), T([7]), mode="TFIDF", **base).flops == 22


def test_tfidf_output_of_unknown_shape_from_ngram_indexes():
    # Y of unknown shape: [2, max(ngram_indexes) + 1] = [2, 7] float = 56 B
    cost = tfidf(T([2, 6], INT32), T(None, FLOAT), min_gram_length=1, max_gram_length=2, max_skip_count=5)
    assert cost.bytes_written == 56


def test_tfidf_string_input():
    # pool_strings with a string X [4]: bigrams without skips, 3 starts x 2 probes = 6; X reads 0 B (noted)
    pool = dict(ngram_counts=[0, 0], ngram_indexes=[0], pool_strings=["a", "b"], pool_int64s=None)
    cost = tfidf(T([4], STRING), T([1]), min_gram_length=2, max_gram_length=2, max_skip_count=0, **pool)
    assert numbers(cost) == (6, 0, 0, 4, 0, 1)
    assert STRING_BYTES_NOTE in cost.note


# ---------------------------------------------------------------------------------------------------------
# ImageDecoder


def test_image_decoder_one_flop_per_decoded_value():
    # 1058 B encoded stream read; RGB image uint8 [32,32,3] = 3072 values, 1 FLOP and 1 B each
    node = make_node("ImageDecoder", [T([1058], UINT8)], [T([32, 32, 3], UINT8)], pixel_format="RGB")
    assert numbers(cost_of(node)) == (3072, 0, 1058, 3072, 0, 1)
    # Grayscale [32,32,1]: 1024 values
    node = make_node("ImageDecoder", [T([1058], UINT8)], [T([32, 32, 1], UINT8)], pixel_format="Grayscale")
    assert numbers(cost_of(node)) == (1024, 0, 1058, 1024, 0, 1)


def test_image_decoder_needs_the_image_shape():
    with pytest.raises(UnknownShape):
        cost_of(make_node("ImageDecoder", [T([1058], UINT8)], [T(None, UINT8)]))
