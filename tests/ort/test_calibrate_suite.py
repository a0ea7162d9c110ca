"""The benchmark suite as data: what it measures, how its rows build their graphs, and how it sizes the memory
benchmarks."""

from __future__ import annotations

import numpy as np
import pytest

from onnxroof.devices import CEILING_NAMES, OP_CLASSES
from onnxroof.ort import sessions
from onnxroof.ort.calibrate import bench, ceilings, chains, graphs, jobs, suite
from onnxroof.ort.calibrate.host import ReportedCache
from onnxroof.predict import op_classes
from onnxroof.predict.op_classes import CLASS_FALLBACK

MiB = 2**20


def test_every_op_class_is_measured_or_falls_back_to_one_that_is():
    unmeasured = [c for c in OP_CLASSES if c not in suite.FULL.measures]
    assert [c for c in unmeasured if c not in CLASS_FALLBACK] == []
    assert suite.FULL.measures <= set(CEILING_NAMES)
    assert suite.QUICK.measures <= suite.FULL.measures


@pytest.mark.parametrize("chosen", [suite.FULL, suite.QUICK], ids=["full", "quick"])
def test_every_benchmark_has_its_own_label_and_a_known_kind(chosen: suite.Suite):
    rows = [*chosen.benches, *chosen.peaks, *([chosen.batched_conv] if chosen.batched_conv else [])]
    labels = [b.label for b in rows]
    assert len(labels) == len(set(labels))
    assert {b.kind for b in rows} <= {"profile", "chain", "epilogue", "wait"}
    assert all(b.kind == "profile" for b in chosen.peaks)


def test_a_row_builds_its_graph_from_its_arguments():
    conv = suite.QUICK.benches[0]
    chain = next(b for b in suite.QUICK.benches if b.kind == "chain")
    pair = next(b for b in suite.QUICK.benches if b.kind == "epilogue")
    # A profiled row: graph(rand, *args), with a Neg after the output.
    model, feeds = conv.build(graphs.Rand(0))
    assert conv.label == "Conv 32->32 3x3/1 @28x28" and conv.args == (32, 32, 28, 3, 1)
    assert [n.op_type for n in model.graph.node] == ["Conv", "Relu", "Neg"] and feeds["x"].shape == (1, 32, 28, 28)
    # A chain row takes the chain length first, and is not tailed.
    model, _ = chain.build(graphs.Rand(0), 3)
    assert [n.op_type for n in model.graph.node] == ["BatchNormalization"] * 3
    # An epilogue row takes the activation.
    model, _ = pair.build(graphs.Rand(0), activation="Clip")
    assert [n.op_type for n in model.graph.node] == ["Conv", "Clip", "Neg"]


def test_the_decoder_rows_build_one_node_of_their_class_with_its_cache_and_weight():
    decode = next(b for b in suite.QUICK.benches if b.label.startswith("GroupQueryAttention") and "256 past" in b.label)
    prefill = next(b for b in suite.QUICK.benches if b.label.startswith("GroupQueryAttention") and "0 past" in b.label)
    # A decode step, 8 heads over 2 key/value heads of 64, one token over 256 rows: untailed, its lengths those of a
    # cache of 257 rows (seqlens_k = 257 - 1), its rotary tables a row per position.
    model, feeds = decode.build(graphs.Rand(0))
    assert [n.op_type for n in model.graph.node] == ["GroupQueryAttention"] and not decode.cold
    assert feeds["past_key"].shape == (1, 2, 256, 64) and feeds["query"].shape == (1, 1, 8 * 64)
    assert int(feeds["seqlens_k"][0]) == 256 and int(feeds["total_sequence_length"]) == 257
    assert [tuple(t.dims) for t in model.graph.initializer] == [(257, 32), (257, 32)]
    ((view, cost),) = jobs.views(model).values()
    assert op_classes.op_class(view) == "attention_decode"
    # 2 * 2*8*257*64 FLOPs of products and 6 per score; 3 per rotated element of Q and K, (8 + 2) * 64 of them
    assert cost.flops == 2 * 2 * 8 * 257 * 64 + 6 * 8 * 257 + 3 * 10 * 64
    # A prefill of 32 tokens over no past is the other class.
    model, _ = prefill.build(graphs.Rand(0))
    assert op_classes.op_class(next(iter(jobs.views(model).values()))[0]) == "attention"
    # A MatMulNBits row: one row of 896 by an 896 x 4864 weight in blocks of 32, 4 bits each, read cold.
    row = next(b for b in suite.QUICK.benches if b.label == "MatMulNBits 1x896x4864 accuracy_level 4")
    model, feeds = row.build(graphs.Rand(0))
    assert row.cold and feeds["a"].shape == (1, 1, 896)
    weights = {t.name: tuple(t.dims) for t in model.graph.initializer}
    assert weights == {"b": (4864, 896 // graphs.NBITS_BLOCK, graphs.NBITS_BLOCK // 2), "scales": (4864 * 28,)}
    nodes = {op_classes.op_class(v) for v, _ in jobs.views(model).values()}
    assert nodes == {"gemv_nbits_int8", "elementwise"}  # the tail's Neg


def test_a_squeeze_and_excitation_chain_alternates_its_products_each_with_a_weight_of_its_own():
    model, feeds = chains.vector_conv_chain(graphs.Rand(0), 3, 96, 4)
    weights = {t.name: tuple(t.dims) for t in model.graph.initializer}
    # 96 -> 4, 4 -> 96, 96 -> 4 on a 1x1 map: three weights, none shared (a network reads each once a run)
    assert [weights[n.input[1]] for n in model.graph.node] == [(4, 96, 1, 1), (96, 4, 1, 1), (4, 96, 1, 1)]
    assert len({n.input[1] for n in model.graph.node}) == 3 and feeds["x"].shape == (1, 96, 1, 1)
    # every node is the class the chain calibrates: one output position
    assert {op_classes.op_class(view) for view, _ in jobs.views(model).values()} == {"conv_vector"}


@pytest.mark.ort
@pytest.mark.parametrize(
    ("exponent", "cls"), [(2.0, "pow_multiplied"), (3.0, "pow_multiplied"), (2.5, "activation_pow")]
)
def test_a_pow_chain_keeps_its_values_finite_and_away_from_one(exponent: float, cls: str):
    model, feeds = chains.pow_chain(graphs.Rand(0), 4, (2, 8), exponent)
    assert {op_classes.op_class(view) for view, _ in jobs.views(model).values()} == {cls}
    out = sessions.make_session(model)[0].run(None, feeds)[0]
    if exponent in (2.0, 3.0):  # multiplied: every power of one is one
        assert np.all(feeds["x"] == 1.0) and np.all(out == 1.0)
    else:  # x^2.5, then ^0.4 back, twice: the input again, none of it at one (the C library's fast path)
        assert np.all(feeds["x"] >= 2.0)
        np.testing.assert_allclose(out, feeds["x"], rtol=1e-4)


def _normal(values: np.ndarray) -> bool:
    """Whether every value is a normal float: finite, and no smaller in magnitude than the smallest normal one (a
    value in the subnormal range takes many times longer per operation, so a chain that drifts there times the slow
    path instead of the kernel)."""
    return bool(np.all(np.isfinite(values)) and np.all(np.abs(values) >= np.finfo(np.float32).tiny))


@pytest.mark.ort
def test_a_long_per_channel_mul_chain_neither_underflows_nor_overflows():
    # 400 products by the same per-channel scale: any scale but +-1 takes a channel's values below 1.2e-38 or
    # above 3.4e38 within that many nodes (0.8 ** 400 ~ 1e-39, 1.25 ** 400 ~ 1e39).
    model, feeds = chains.per_channel_chain(graphs.Rand(0), 400, "Mul", (1, 16, 4, 4))
    assert _normal(sessions.make_session(model)[0].run(None, feeds)[0])


@pytest.mark.ort
@pytest.mark.parametrize(
    ("op", "alpha"),
    [("QuickGelu", 1.0), ("QuickGelu", 1.702), ("Gelu", None), ("FastGelu", None)],
)
def test_a_long_chain_of_an_activation_that_halves_small_inputs_stays_normal(op: str, alpha: float | None):
    # x * sigmoid(x) keeps 98% of an input of 4, 62% of one of 0.5 (0.5 * sigmoid(0.5) = 0.31) and half of one near
    # 0, so from inputs of 4 the values fall below 1.2e-38 within 400 nodes; from 12 up each node keeps all but 6e-6
    # of them.
    model, feeds = chains.activation_chain(graphs.Rand(0), 400, op, (1, 64), "com.microsoft", alpha)
    assert _normal(sessions.make_session(model)[0].run(None, feeds)[0])


def test_the_swin_mask_masks_the_token_pairs_from_different_regions_of_a_shifted_window():
    # A 7x7 window shifted by 3: a window on the map's last row (not its corner) holds two regions, 4 rows of 7
    # tokens and 3 rows, and masks every pair across them, 2 * 28 * 21 = 1,176 (the last column alike); the
    # corner window holds four, 16, 12, 12 and 9 tokens: 49^2 - (16^2 + 12^2 + 12^2 + 9^2) = 1,776. Over P x P
    # windows: 2 (P - 1) * 1,176 + 1,776, torchvision's Swin-T masks 18,240, 8,832 and 4,128 at P = 8, 4, 2.
    for size, expected in ((56, 18240), (28, 8832), (14, 4128)):
        mask = graphs.swin_mask(size, 7, -100.0)
        assert mask.shape == ((size // 7) ** 2, 1, 49, 49) and int((mask == -100.0).sum()) == expected
        assert set(np.unique(mask)) == {0.0, -100.0}
    assert (graphs.swin_mask(28, 7, -100.0)[0] == 0).all()  # the first window holds one region


def test_the_masked_attention_block_adds_the_mask_before_its_softmax_and_product():
    model, feeds = graphs.masked_attention(graphs.Rand(0), 28, 7, 3, 32, -100.0)
    assert [(n.name, n.op_type) for n in model.graph.node] == [
        ("mask", "Add"),
        ("softmax", "Softmax"),
        ("context", "MatMul"),
    ]
    assert feeds["scores"].shape == (16, 3, 49, 49) and feeds["v"].shape == (16, 3, 49, 32)
    assert suite.FULL.masked_attention == (28, 7, 3, 32)


def test_the_same_rand_builds_the_same_graph():
    bench = suite.FULL.benches[0]
    first, second = bench.build(graphs.Rand(0)), bench.build(graphs.Rand(0))
    assert first[0].SerializeToString() == second[0].SerializeToString()
    assert (first[1]["x"] == second[1]["x"]).all()


def test_cache_level_working_sets():
    l1 = ReportedCache("L1d", 48 * 1024, "per-core", "test")
    l3 = ReportedCache("L3", 300 * MiB, "shared", "test")
    # Half of a private level over the threads' cores; a quarter of the shared last level, at most 32 MiB.
    assert suite.FULL.level_bytes(l1, 2) == 48 * 1024
    assert suite.FULL.level_bytes(l3, 2) == 32 * MiB
    assert suite.FULL.level_bytes(ReportedCache("L3", 8 * MiB, "shared", "test"), 4) == 2 * MiB
    assert suite.QUICK.level_bytes(l3, 1) == 4 * MiB  # the quick suite caps every working set


def test_the_dram_operand_is_twice_the_last_level_within_bounds_and_memory(monkeypatch: pytest.MonkeyPatch):
    l3 = ReportedCache("L3", 300 * MiB, "shared", "test")
    monkeypatch.setattr(bench, "memory_available", lambda: 16 * 1024 * MiB)
    assert suite.FULL.dram_bytes([l3]) == 600 * MiB
    assert suite.FULL.dram_bytes([ReportedCache("L3", 8 * MiB, "shared", "test")]) == 256 * MiB
    assert suite.FULL.dram_bytes([ReportedCache("L3", 1024 * MiB, "shared", "test")]) == 1024 * MiB
    monkeypatch.setattr(bench, "memory_available", lambda: 1024 * MiB)  # at most a quarter of the free memory
    assert suite.FULL.dram_bytes([l3]) == 256 * MiB
    monkeypatch.setattr(bench, "memory_available", lambda: None)
    assert suite.FULL.dram_bytes([l3]) == 600 * MiB
    assert suite.QUICK.dram_bytes([l3]) == 64 * MiB and suite.QUICK.dram_bytes([]) == 16 * MiB


def test_the_full_suite_bins_layer_norm_rows_of_each_length_with_rows_like_them():
    # A LayerNormalization's ceiling is read by the FLOPs of one row, 7 per element with its bias (costs).
    works = [7.0 * b.args[-1] for b in suite.FULL.benches if b.label.startswith("LayerNormalization ")]
    bins = ceilings.bin_points([(w, w / 1e4) for w in works])
    # Groups of at least three within 1.6x: rows of 96 (x2, 672 FLOPs) with 128 (896), median 0.0672; 192 (x2,
    # 1344) with 256 (1792), 0.1344; 384 (x2, 2688) with 512 (3584), 0.2688; 768 (x2, 5376) with 1024 (7168), 0.5376.
    assert bins == (
        (672, 0.0672),
        (896, 0.0672),
        (1344, 0.1344),
        (1792, 0.1344),
        (2688, 0.2688),
        (3584, 0.2688),
        (5376, 0.5376),
        (7168, 0.5376),
    )


def test_the_full_suite_bins_softmax_rows_of_each_length_with_rows_like_them():
    # A Softmax's ceiling is read by the FLOPs of one row, 5 per element (costs: max, subtract, exp, sum, scale).
    works = [5.0 * b.args[0][-1] for b in suite.FULL.benches if b.label.startswith("Softmax ")]
    # Each point's efficiency is its work / 10^4, so that a group's median tells which rows it holds.
    bins = ceilings.bin_points([(w, w / 1e4) for w in works])
    # Groups of at least three within 1.6x: rows of 49 (x3, 245 FLOPs) with 64 (320), median 0.0245; rows of 128
    # (x2, 640) with 197 (x2, 985), median (0.064 + 0.0985) / 2 = 0.08125; rows of 1000 (x3, 5000), 0.5.
    assert bins == ((245, 0.0245), (320, 0.0245), (640, 0.08125), (985, 0.08125), (5000, 0.5))
