"""The engine's prediction terms, one class per term: each term's seconds in closed form, its derivation in a
comment, and where it does not apply."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from onnxroof.costs import Cost, NodeView
from onnxroof.devices import CacheLevel, Ceiling, Sourced, WeightReuse, WeightWait
from onnxroof.predict import engine, levels, term_times
from onnxroof.predict.subnormal import SubnormalWork
from onnxroof.predict.terms import InModel
from tests.helpers import CONV, ELEMENTWISE, INT64, T, W, calibrated_host, conv, make_node

NCHWC = "com.microsoft.nchwc"


class TestExposedDram:
    """exposed_dram: (1 - dram_overlap) x the memory time of a convolution served from DRAM, added to its arithmetic."""

    def test_a_conv_served_from_dram_adds_the_traffic_its_compute_does_not_hide(self):
        dev = replace(
            calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE}), dram_overlap=Sourced(0.25, "calibrated: test")
        )
        view = conv(64, 64, 112, 3, out_hw=56)
        cost = Cost(flops=1e9, bytes_read=3e6, bytes_written=1e6, kernels=1)
        pred, note = engine.predict_engine(view, cost, "fp32", dev)
        # eff_c = 0.9 past 1e8 FLOPs -> compute = 1e9 / 90e9 = 11.111 ms. The 4 MB working set is past L2 (1 MiB, the
        # last level with a bandwidth): all of it at DRAM's 10 GB/s -> memory = 400 us, a quarter of it hidden:
        # max(11.111 ms, 400 us) + 1 us overhead + 0.75 * 400 us = 11.412 ms.
        assert note.level == "DRAM" and pred.memory_time_s == pytest.approx(400e-6)
        assert note.terms["exposed_dram"] == pytest.approx(300e-6)
        assert pred.predicted_time_s == pytest.approx(1e9 / 90e9 + 1e-6 + 300e-6)
        assert pred.bound == "compute" and "300 us of memory traffic not hidden by compute" in note.describe()
        # The same conv with its data in L2, a memory-bound kernel in DRAM, or a device without the figure: max() alone.
        in_cache = Cost(flops=1e9, bytes_read=400_000, bytes_written=200_000, kernels=1)
        assert engine.predict_engine(view, in_cache, "fp32", dev)[1].terms["exposed_dram"] == 0.0
        relu = make_node("Relu", [T((1, 64, 112, 112))], [T((1, 64, 112, 112))])
        streaming = Cost(flops=802816, bytes_read=3211264, bytes_written=3211264, kernels=1)
        assert engine.predict_engine(relu, streaming, "fp32", dev)[1].terms["exposed_dram"] == 0.0
        plain, _ = engine.predict_engine(view, cost, "fp32", calibrated_host({"conv": CONV}))
        assert plain.predicted_time_s == pytest.approx(1e9 / 90e9 + 1e-6)
        # A level no faster than DRAM serves the data at DRAM bandwidth: the same traffic is exposed there.
        slow_l3 = CacheLevel("L3", 8 * 1024 * 1024, 10e9, "calibrated: test", "shared")
        same_speed = replace(dev, caches=(*dev.caches[:2], slow_l3))
        _, via_l3 = engine.predict_engine(view, cost, "fp32", same_speed)
        assert via_l3.level == "L3" and via_l3.terms["exposed_dram"] == pytest.approx(300e-6)
        # The figure, read on a convolution, does not apply to a compute-bound product by a weight in DRAM: it waits
        # for its weights in full instead (exposed_weight_time). 128 x 768 by 768 x 3072 (GPT-2's MLP): 604 MFLOP,
        # 768 * 3072 * 4 + 3072 * 4 = 9,449,472 B of weights at 10 GB/s = 944.9 us, not 0.75 of its traffic; and its
        # working set being past the core's 1 MiB L2, the write of its 128 * 3072 * 4 = 1,572,864 B output, read and
        # written at the working set's DRAM (output_write_time): 3,145,728 B at 10 GB/s = 314.6 us.
        gemm = make_node("Gemm", [T((128, 768)), W((768, 3072)), W((3072,))], [T((128, 3072))])
        gemm_cost = Cost(
            flops=2 * 128 * 768 * 3072, bytes_read=4 * (128 * 768 + 768 * 3072 + 3072), bytes_written=4 * 128 * 3072
        )
        _, gemm_note = engine.predict_engine(gemm, gemm_cost, "fp32", dev)
        assert gemm_note.level == "DRAM" and gemm_note.terms["exposed_dram"] == 0.0
        assert gemm_note.terms["weight_wait"] == pytest.approx(9_449_472 / 10e9)
        assert gemm_note.terms["output_write"] == pytest.approx(3_145_728 / 10e9)


class TestWeightWait:
    """weight_wait: the weights' read a product (all of it), a dense convolution (conv_weight_wait's share) or a
    recurrent op (in a model) waits for on top of its arithmetic."""

    def test_a_compute_bound_product_waits_for_its_cold_weights_on_top_of_its_arithmetic(self):
        """A Gemm of 50 rows by a 768 x 768 weight (a speech encoder's projection over 50 frames) runs its arithmetic
        plus its weights' read: the two add up instead of overlapping."""
        dev = calibrated_host()
        gemm = make_node("Gemm", [T((50, 768)), W((768, 768)), W((768,))], [T((50, 768))], transB=1)
        weights = 4 * (768 * 768 + 768)  # 2,362,368 B, past COLD_WEIGHTS (1 MiB)
        cost = Cost(flops=2 * 50 * 768 * 768, bytes_read=4 * 50 * 768 + weights, bytes_written=4 * 50 * 768, kernels=1)
        pred, note = engine.predict_engine(gemm, cost, "fp32", dev)
        # compute = 58,982,400 FLOPs / 100 GFLOP/s = 589.8 us; the 2.67 MB working set is past L2 (1 MiB), so every
        # byte goes at DRAM's 10 GB/s: memory = 2,669,568 / 10e9 = 267.0 us, of which the weights 236.2 us. The bias
        # C is written into the 153,600 B output and read back at L2's 50 GB/s: 307,200 / 50e9 = 6.1 us. The working
        # set past the core's cache, the output's write is read and written at DRAM's rate too (output_write_time):
        # 307,200 / 10e9 = 30.7 us. time = max(589.8, 267.0) + 236.2 + 30.7 + 6.1 + 1 us of dispatch = 863.9 us.
        out_write = 2 * 153_600 / 10e9
        assert pred.compute_time_s == pytest.approx(58_982_400 / 100e9)
        assert note.terms["weight_wait"] == pytest.approx(weights / 10e9)
        assert note.terms["output_write"] == pytest.approx(out_write)
        assert pred.predicted_time_s == pytest.approx(
            58_982_400 / 100e9 + weights / 10e9 + out_write + 2 * 153_600 / 50e9 + 1e-6
        )
        # Weights kept between runs (a reuse of 2x at the model's traffic) arrive in half the time.
        reused = replace(dev, weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test"))
        assert engine.predict_engine(gemm, cost, "fp32", reused, InModel(traffic=1e6))[1].terms[
            "weight_wait"
        ] == pytest.approx(weights / 20e9)
        # A gemm memory ceiling of 50% (read on products with small weights, mostly their dispatch) slows the memory
        # time, 267.0 / 0.5 = 533.9 us, still under the compute; the weights' 236.2 us wait at DRAM's rate, not half.
        slow_memory = Ceiling(compute=(), memory=((1e5, 0.5),), source="calibrated: test gemm memory")
        _, slowed = engine.predict_engine(gemm, cost, "fp32", calibrated_host({"gemm": slow_memory}))
        assert slowed.memory_efficiency == 0.5 and slowed.terms["weight_wait"] == pytest.approx(weights / 10e9)
        # Under COLD_WEIGHTS the ceiling carries the weights' read (calibrated warm): nothing is added.
        small = make_node("Gemm", [T((50, 256)), W((256, 256)), W((256,))], [T((50, 256))], transB=1)
        small_weights = 4 * (256 * 256 + 256)
        small_cost = Cost(
            flops=2 * 50 * 256 * 256, bytes_read=4 * 50 * 256 + small_weights, bytes_written=4 * 50 * 256, kernels=1
        )
        assert engine.predict_engine(small, small_cost, "fp32", dev)[1].terms["weight_wait"] == 0.0
        # In a model (a traffic given), the rest of an inference has passed through the caches since the layer last
        # ran: its 263,168 B of weights come where the model's traffic leaves them, DRAM's 10 GB/s times the reuse of
        # 2x = 13.2 us on top of its 65.5 us of arithmetic (6,553,600 FLOPs at 100 GFLOP/s; its memory time, 2.0 us of
        # activations in L2 and 26.3 us of weights at DRAM's rate, stays under it).
        in_model = engine.predict_engine(small, small_cost, "fp32", reused, InModel(traffic=1e6))[1]
        assert in_model.terms["weight_wait"] == pytest.approx(small_weights / 20e9)
        assert engine.predict_engine(small, small_cost, "fp32", dev, InModel(traffic=1e6))[1].terms[
            "weight_wait"
        ] == pytest.approx(small_weights / 10e9)
        # A product of one row (class gemv) is bound by its weight's read, which max() counts already.
        gemv = make_node("Gemm", [T((1, 768)), W((768, 768)), W((768,))], [T((1, 768))], transB=1)
        gemv_cost = Cost(flops=2 * 768 * 768, bytes_read=4 * 768 + weights, bytes_written=4 * 768, kernels=1)
        assert term_times.exposed_weight_time(dev, "gemv", weights, 236e-6) == 0.0
        assert engine.predict_engine(gemv, gemv_cost, "fp32", dev)[1].terms["weight_wait"] == 0.0

    def test_a_recurrent_op_reads_its_weights_once_in_a_model_and_not_outside_one(self):
        # The LSTM above: W and R, 2 x 4 x 1024 x 256 = 2,097,152 B. Its ceiling is read on warm weights, so outside a
        # model nothing is added; in a model whose traffic gives a reuse of 2 they come once at 2 x 10 GB/s: 104.9 us
        # on top of the arithmetic (the projection at the 100 GFLOP/s peak, 671.1 us, and the steps at 25%, 2,684.4
        # us), whatever the number of steps that then run on them.
        lstm_ceiling = Ceiling(compute=((1e6, 0.25),), memory=(), source="calibrated: test lstm")
        dev = replace(
            calibrated_host({"lstm": lstm_ceiling}), weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test")
        )
        lstm = make_node("LSTM", [T((128, 1, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T((128, 1, 1, 256))])
        weights = 2 * 4 * 1024 * 256
        projection, steps = 2 * 128 * 1024 * 256, 128 * 2 * 1024 * 256
        cost = Cost(
            flops=projection + steps, bytes_read=weights + 4 * 128 * 256, bytes_written=4 * 128 * 256, kernels=1
        )
        alone, alone_note = engine.predict_engine(lstm, cost, "fp32", dev)
        assert alone_note.terms["weight_wait"] == 0.0
        assert alone.predicted_time_s == pytest.approx(projection / 100e9 + steps / 25e9 + 1e-6)
        in_model, note = engine.predict_engine(lstm, cost, "fp32", dev, InModel(traffic=1e6))
        assert note.terms["weight_wait"] == pytest.approx(weights / 20e9)
        assert in_model.predicted_time_s == pytest.approx(alone.predicted_time_s + weights / 20e9)

    def test_a_compute_bound_convolution_waits_for_the_calibrated_share_of_its_weights_read(self):
        """conv_weight_wait: the share of its weights' read a dense convolution's time grows by when they come from
        memory, outside a model for cold weights only (as the calibration reads them), in a model from where the
        model's traffic leaves them."""
        wait = WeightWait(((1e5, 0.5), (1e7, 0.5)), "calibrated: test")
        dev = replace(calibrated_host(), conv_weight_wait=wait)
        # MobileNetV2's last-stage 1x1 on a 7x7 map, 1024 -> 256: 2 * 1024 * 256 * 49 = 25,690,112 FLOPs take 256.9 us
        # at 100 GFLOP/s; 4 * (1024 * 256 + 256) = 1,049,600 B of weights and bias (past COLD_WEIGHTS), 200,704 B in and
        # 50,176 B out: 1,300,480 B past the 1 MiB L2, all at DRAM's 10 GB/s: 130.0 us, under the arithmetic.
        big = conv(1024, 256, 7, 1)
        weights = 4 * (1024 * 256 + 256)
        big_cost = Cost(flops=2 * 1024 * 256 * 49, bytes_read=200_704 + weights, bytes_written=50_176, kernels=1)
        pred, note = engine.predict_engine(big, big_cost, "fp32", dev)
        assert note.op_class == "conv1x1" and pred.compute_time_s > pred.memory_time_s
        # read cold: half of 1,049,600 B at 10 GB/s = 52.5 us on top of the arithmetic
        assert note.terms["weight_wait"] == pytest.approx(0.5 * weights / 10e9)
        assert pred.predicted_time_s == pytest.approx(25_690_112 / 100e9 + 0.5 * weights / 10e9 + 1e-6)
        # in a model whose traffic gives a reuse of 2, half of them at 20 GB/s: 26.2 us
        reused = replace(dev, weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test"))
        assert engine.predict_engine(big, big_cost, "fp32", reused, InModel(traffic=1e6))[1].terms[
            "weight_wait"
        ] == pytest.approx(0.5 * weights / 20e9)
        # without the calibrated share, none (the ceiling then carries the weights' read as its samples had it)
        assert engine.predict_engine(big, big_cost, "fp32", calibrated_host())[1].terms["weight_wait"] == 0.0
        # A 128 -> 128 3x3 on 28x28: 4 * (128 * 128 * 9 + 128) = 590,336 B of weights, under COLD_WEIGHTS: read warm by
        # the calibration, so nothing outside a model; in one, half of them at 20 GB/s = 14.8 us.
        small = conv(128, 128, 28, 3, pad=1)
        small_weights = 4 * (128 * 128 * 9 + 128)
        acts = 4 * 128 * 28 * 28
        small_cost = Cost(flops=2 * 128 * 128 * 9 * 784, bytes_read=acts + small_weights, bytes_written=acts, kernels=1)
        assert engine.predict_engine(small, small_cost, "fp32", dev)[1].terms["weight_wait"] == 0.0
        in_model = engine.predict_engine(small, small_cost, "fp32", reused, InModel(traffic=1e6))[1]
        assert in_model.terms["weight_wait"] == pytest.approx(0.5 * small_weights / 20e9)
        # A depthwise convolution is no dense one: no wait, whatever its weights.
        assert term_times.exposed_weight_time(dev, "depthwise", weights, 1e-4) == 0.0


class TestOutputWrite:
    """output_write: 2 x a product's output bytes at its working set's level, where that is past the core's cache."""

    def test_a_product_whose_working_set_leaves_the_cores_cache_waits_for_its_output_writes(self):
        """Write-allocate: each line of the output is read before it is written, and the stores stall the kernel."""
        dev = calibrated_host()
        # Swin's first MLP product without C (a MatMul): 3136 x 96 by 96 x 384, 231,211,008 FLOPs at 100 GFLOP/s =
        # 2312 us. Its working set (1,204,224 B of input, 147,456 B of weight, 4,816,896 B of output) is past the 1 MiB
        # L2 and fits only L3, which has no bandwidth here: the output is read and written at DRAM's 10 GB/s,
        # 2 x 4,816,896 / 10e9 = 963.4 us on top.
        matmul = make_node("MatMul", [T((3136, 96)), W((96, 384))], [T((3136, 384))])
        cost = Cost(flops=2 * 3136 * 96 * 384, bytes_read=4 * (3136 * 96 + 96 * 384), bytes_written=4 * 3136 * 384)
        pred, note = engine.predict_engine(matmul, cost, "fp32", dev)
        assert note.terms["output_write"] == pytest.approx(2 * 4_816_896 / 10e9)
        assert pred.predicted_time_s == pytest.approx(2 * 3136 * 96 * 384 / 100e9 + 2 * 4_816_896 / 10e9 + 1e-6)
        # 196 rows: 75,264 + 147,456 + 301,056 = 523,776 B fit the L2, where the ceilings were read: nothing added.
        short = make_node("MatMul", [T((196, 96)), W((96, 384))], [T((196, 384))])
        short_cost = Cost(flops=2 * 196 * 96 * 384, bytes_read=4 * (196 * 96 + 96 * 384), bytes_written=4 * 196 * 384)
        assert engine.predict_engine(short, short_cost, "fp32", dev)[1].terms["output_write"] == 0.0
        # At 2 threads the two cores' L2s hold 2 MiB; the large product still leaves them.
        two = calibrated_host(threads=2)
        assert term_times.output_write_time(matmul, two, "gemm", 6_168_576) == pytest.approx(963.4e-6, 1e-4)
        # Another class waits for nothing more.
        assert term_times.output_write_time(matmul, dev, "matmul", 6_168_576) == 0.0


class TestBiasPass:
    """bias_pass: 2 x a Gemm's output bytes for its C input, at the output's level (one thread's share of the shared
    level on several)."""

    def test_a_gemm_writes_its_c_into_the_output_and_reads_it_back(self):
        """onnxruntime's Gemm broadcasts C into Y before the product and accumulates onto it (beta 1): a pass writing
        and reading the output, twice its bytes at the bandwidth of the level the output fits in."""
        dev = calibrated_host()
        # A 3136 x 96 by 96 x 384 product, 231 MFLOP at 100 GFLOP/s = 2312 us; its output, 3136 x 384 floats =
        # 4,816,896 B, fits only L3, which has no bandwidth here: DRAM's 10 GB/s, 2 x 4,816,896 / 10e9 = 963 us.
        gemm = make_node("Gemm", [T((3136, 96)), W((384, 96)), W((384,))], [T((3136, 384))], transB=1)
        weights = 4 * (384 * 96 + 384)
        cost = Cost(flops=2 * 3136 * 96 * 384, bytes_read=4 * 3136 * 96 + weights, bytes_written=4 * 3136 * 384)
        pred, note = engine.predict_engine(gemm, cost, "fp32", dev)
        assert note.terms["bias_pass"] == pytest.approx(2 * 4_816_896 / 10e9)
        # the product's own write of that output adds as much again (see the next test)
        assert pred.predicted_time_s == pytest.approx(2 * 3136 * 96 * 384 / 100e9 + 2 * 2 * 4_816_896 / 10e9 + 1e-6)
        # 196 rows: the 301,056 B output fits L2 (50 GB/s): 2 x 301,056 / 50e9 = 12.0 us.
        short = make_node("Gemm", [T((196, 96)), W((384, 96)), W((384,))], [T((196, 384))], transB=1)
        short_cost = Cost(flops=2 * 196 * 96 * 384, bytes_read=4 * 196 * 96 + weights, bytes_written=4 * 196 * 384)
        assert engine.predict_engine(short, short_cost, "fp32", dev)[1].terms["bias_pass"] == pytest.approx(
            2 * 301_056 / 50e9
        )
        # No C, beta 0, or a MatMul: no pass.
        bare = make_node("Gemm", [T((3136, 96)), W((384, 96))], [T((3136, 384))], transB=1)
        assert engine.predict_engine(bare, cost, "fp32", dev)[1].terms["bias_pass"] == 0.0
        unscaled = make_node("Gemm", [T((3136, 96)), W((384, 96)), W((384,))], [T((3136, 384))], transB=1, beta=0.0)
        assert engine.predict_engine(unscaled, cost, "fp32", dev)[1].terms["bias_pass"] == 0.0
        matmul = make_node("MatMul", [T((3136, 96)), W((96, 384))], [T((3136, 384))])
        assert engine.predict_engine(matmul, cost, "fp32", dev)[1].terms["bias_pass"] == 0.0
        # On 2 threads one thread writes C and both read it back through the shared L3 (20 GB/s here): one thread's
        # share, 10 GB/s, for any output, 2 x 301,056 / 10e9 = 60.2 us for the 196-row one; without an L3 bandwidth, its
        # own level's share (L2: 25 GB/s), 24.1 us.
        l3 = CacheLevel("L3", 8 * 1024 * 1024, 20e9, "calibrated: test", "shared")
        two = replace(calibrated_host(threads=2), caches=(*dev.caches[:2], l3))
        assert engine.predict_engine(short, short_cost, "fp32", two)[1].terms["bias_pass"] == pytest.approx(
            2 * 301_056 / 10e9
        )
        two_without_l3 = calibrated_host(threads=2)
        assert engine.predict_engine(short, short_cost, "fp32", two_without_l3)[1].terms["bias_pass"] == pytest.approx(
            2 * 301_056 / 25e9
        )
        # A short product's output is a few rows: no pass.
        assert term_times.bias_pass_time(gemm, dev, "gemm_short") == 0.0


class TestProjection:
    """projection: a recurrent op's input projection, one product at its product class's ceiling."""

    def test_a_recurrent_ops_input_projection_runs_at_its_products_ceiling(self):
        # An LSTM over 128 steps, input and hidden 256: the projection X W^T is one 128-row product of
        # 2 * 128 * 1024 * 256 = 67,108,864 FLOPs at the gemm ceiling (80% of the 100 GFLOP/s peak): 838.9 us. The
        # steps' 128 recurrent products, 2 * 1024 * 256 = 524,288 FLOPs each, run at the lstm ceiling (25%): 2,684.4 us.
        gemm = Ceiling(compute=((1e6, 0.8),), memory=(), source="calibrated: test gemm")
        lstm_ceiling = Ceiling(compute=((1e6, 0.25),), memory=(), source="calibrated: test lstm")
        dev = calibrated_host({"gemm": gemm, "lstm": lstm_ceiling})
        lstm = make_node("LSTM", [T((128, 1, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T((128, 1, 1, 256))])
        projection, steps = 2 * 128 * 1024 * 256, 128 * 2 * 1024 * 256
        cost = Cost(flops=projection + steps, bytes_read=4 * 2 * 1024 * 256, bytes_written=4 * 128 * 256, kernels=1)
        pred, note = engine.predict_engine(lstm, cost, "fp32", dev)
        assert note.terms["projection"] == pytest.approx(projection / 80e9)
        assert pred.compute_time_s == pytest.approx(projection / 80e9 + steps / 25e9)
        assert "input projection 839 us as one product" in note.describe()
        # Without a gemm ceiling the projection runs at the peak.
        alone, _ = engine.predict_engine(lstm, cost, "fp32", calibrated_host({"lstm": lstm_ceiling}))
        assert alone.compute_time_s == pytest.approx(projection / 100e9 + steps / 25e9)


class TestDistantReads:
    """distant_reads: an input written long before, at the bandwidth of the level its reuse distance fits in, in place
    of its share of the node's level."""

    def test_an_input_written_long_before_is_read_from_the_level_its_distance_fits_in(self):
        # An Add of two 256 KiB inputs into a 256 KiB output: 786,432 B, in the hand-made host's L2 (1 MiB, 50 GB/s):
        # memory 786,432 / 50e9 = 15.73 us. One input was written 4 MB of traffic ago, past L2: it comes from DRAM
        # (10 GB/s), 262,144 / 10e9 = 26.21 us in place of 262,144 / 50e9 = 5.24 us, 20.97 us more.
        dev = calibrated_host()
        shape = (1, 64, 32, 32)  # 65,536 elements, 262,144 B
        add = make_node("Add", [T(shape), T(shape)], [T(shape)])
        cost = Cost(flops=65536, bytes_read=2 * 262144, bytes_written=262144, kernels=1)
        near, _ = engine.predict_engine(add, cost, "fp32", dev, InModel(reads=((262144, 0.0), (262144, 100e3))))
        far, note = engine.predict_engine(add, cost, "fp32", dev, InModel(reads=((262144, 0.0), (262144, 4e6))))
        assert near.memory_time_s == pytest.approx(786432 / 50e9)
        assert note.terms["distant_reads"] == pytest.approx(262144 / 10e9 - 262144 / 50e9)
        assert far.memory_time_s == pytest.approx(786432 / 50e9 + note.terms["distant_reads"])
        assert "21 us more reading inputs written long before" in note.describe()
        # A shape-only node reads no data, however far back its input was written.
        shape_of = make_node("Shape", [T(shape)], [T((4,), INT64)])
        _, shape_note = engine.predict_engine(
            shape_of, Cost(bytes_written=32), "fp32", dev, InModel(reads=((262144, 4e6),))
        )
        assert shape_note.terms["distant_reads"] == 0.0


class TestWriteAllocate:
    """write_allocate: 2 x a streaming kernel's output bytes at the level that holds its working set and the one
    before it, where its own level does not hold both."""

    def test_a_streaming_kernel_writes_into_lines_the_node_before_pushed_out_of_its_level(self):
        # The hand-made host: L2 1 MiB at 50 GB/s, no L3 bandwidth, DRAM 10 GB/s. An Add of two 1x64x32x32 fp32
        # tensors (256 KiB each) into a third: working set 786,432 B, in L2. After a node whose working set is 1 MiB,
        # the two no longer fit L2 together: the output's 262,144 bytes are read from DRAM before they are written
        # and written back there, 2 x 262,144 / 10e9 = 52.43 us. After a 100 kB node both fit L2: nothing.
        dev = calibrated_host({"elementwise": ELEMENTWISE})
        assert term_times.write_allocate_time(dev, "elementwise", 786432, 2**20, 262144) == pytest.approx(
            2 * 262144 / 10e9
        )
        assert term_times.write_allocate_time(dev, "elementwise", 786432, 100_000, 262144) == 0.0
        assert term_times.write_allocate_time(dev, "elementwise", 786432, 0.0, 262144) == 0.0  # nothing ran before
        # a convolution computes while its output streams out: not a streaming class
        assert term_times.write_allocate_time(dev, "conv", 786432, 2**20, 262144) == 0.0
        t = T((1, 64, 32, 32))
        add = make_node("Add", [t, t], [t])
        cost = Cost(flops=65536, bytes_read=524288, bytes_written=262144, kernels=1)
        alone, _ = engine.predict_engine(add, cost, "fp32", dev)
        after, note = engine.predict_engine(add, cost, "fp32", dev, InModel(after=2**20))
        assert note.terms["write_allocate"] == pytest.approx(2 * 262144 / 10e9)
        assert after.predicted_time_s - alone.predicted_time_s == pytest.approx(note.terms["write_allocate"])
        assert "us writing over lines the node before pushed out of L2" in note.describe()


def _clip_conv(hw: int) -> NodeView:
    """A 64 -> 64 3x3 NCHWc convolution on hw x hw fused with Clip (ReLU6), which onnxruntime applies in a second
    pass over the output."""
    return make_node(
        "Conv",
        [T((1, 64, hw, hw)), W((64, 64, 3, 3)), W((64,))],
        [T((1, 64, hw, hw))],
        domain=NCHWC,
        kernel_shape=[3, 3],
        activation="Clip",
        activation_params=[0.0, 6.0],
    )


class TestEpilogue:
    """epilogue: a fused activation other than Relu, a pass reading and writing the output at its level and the
    epilogue ceiling, after the kernel."""

    def test_an_activation_other_than_relu_is_a_second_pass_over_the_output(self):
        dev = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})
        cost = Cost(flops=1e7, bytes_read=400_000, bytes_written=200_000, kernels=1)
        relu = make_node(
            "Conv",
            [T((1, 64, 28, 28)), W((64, 64, 3, 3)), W((64,))],
            [T((1, 64, 28, 28))],
            domain=NCHWC,
            kernel_shape=[3, 3],
            activation="Relu",
        )
        clip = _clip_conv(28)
        assert term_times.epilogue_activation(relu) is None and term_times.epilogue_activation(clip) == "Clip"
        base, _ = engine.predict_engine(relu, cost, "fp32", dev)
        pred, note = engine.predict_engine(clip, cost, "fp32", dev)
        # the output (200,704 B) is read and written again: 401,408 B moved, in L2 (50 GB/s) at the elementwise
        # ceiling's 0.5 + 0.5 * log(401408/1e4) / log(100) = 0.9009 -> 8.91 us on top of the Relu conv's time
        eff = 0.5 + 0.5 * math.log(401408 / 1e4) / math.log(100)
        assert pred.epilogue_time_s == pytest.approx(401408 / (50e9 * eff))
        assert pred.predicted_time_s == pytest.approx(base.predicted_time_s + 401408 / (50e9 * eff))
        assert base.epilogue_time_s == 0.0
        assert note.epilogue == "Clip" and "second pass" in note.describe()
        plain = make_node("Relu", [T((1, 64, 28, 28))], [T((1, 64, 28, 28))])
        assert term_times.epilogue_activation(plain) is None
        assert term_times.epilogue_time(relu, dev) == 0.0

    def test_a_calibrated_epilogue_ceiling_replaces_the_elementwise_one_for_the_second_pass(self):
        epilogue = Ceiling(compute=(), memory=((1e5, 0.2), (1e7, 0.8)), source="calibrated: test epilogue")
        dev = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE, "epilogue": epilogue})
        clip = _clip_conv(28)
        # 401,408 B moved in L2 (50 GB/s) at the epilogue ceiling's 0.2 + 0.6 * log(401408/1e5) / log(100) = 0.3808
        eff = 0.2 + 0.6 * math.log(401408 / 1e5) / math.log(100)
        assert term_times.epilogue_bytes(clip) == 401408
        assert term_times.epilogue_time(clip, dev) == pytest.approx(401408 / (50e9 * eff))
        pred, _ = engine.predict_engine(clip, Cost(flops=1e7, bytes_read=400_000, bytes_written=200_000), "fp32", dev)
        assert pred.epilogue_time_s == pytest.approx(401408 / (50e9 * eff))
        # without an elementwise ceiling either, the pass streams at the level's full bandwidth
        assert term_times.epilogue_time(clip, calibrated_host({"conv": CONV})) == pytest.approx(401408 / 50e9)

    def test_the_second_pass_runs_in_the_level_its_outputs_fit_in_though_it_moves_them_twice(self):
        dev = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})
        clip = _clip_conv(56)
        # The output is 64 * 56 * 56 * 4 = 802,816 B: it fits the 1 MiB L2 (50 GB/s), the 1,605,632 B the pass reads and
        # writes do not. Rewritten in place, it stays in L2: 1,605,632 B at 50 GB/s and the elementwise ceiling's 1.0
        # (held beyond its 1e6 B point) = 32.1 us, where DRAM's 10 GB/s would give 160.6 us.
        assert term_times.epilogue_bytes(clip) == 1_605_632
        assert term_times.epilogue_time(clip, dev) == pytest.approx(1_605_632 / 50e9)

    def test_an_output_larger_than_the_cores_cache_is_rewritten_there_a_block_at_a_time(self):
        clip = _clip_conv(224)
        # The output is 64 * 224 * 224 * 4 = 12,845,056 B, larger than the 1 MiB L2 (50 GB/s), the largest private
        # cache: the activation runs on each block of it while the block is in L2, so the 25,690,112 B the pass moves
        # stream at L2's 50 GB/s (the elementwise ceiling's 1.0 beyond its 1e6 B point) = 513.8 us, not DRAM's 10 GB/s
        # (2569 us).
        one = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})
        assert levels.core_cache_bytes(one) == 1024 * 1024
        assert term_times.epilogue_time(clip, one) == pytest.approx(25_690_112 / 50e9)
        # At 2 threads each core rewrites its share in its own L2: 2 MiB of private cache, the same level.
        two = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE}, threads=2)
        assert levels.core_cache_bytes(two) == 2 * 1024 * 1024
        assert term_times.epilogue_time(clip, two) == pytest.approx(25_690_112 / 50e9)
        # An output of 64 * 8 * 8 * 4 = 16,384 B fits the 32 KiB L1 (100 GB/s): 32,768 B moved at the elementwise
        # ceiling's 0.5 + 0.5 * log(32768/1e4) / log(100) = 0.6288 -> 0.521 us.
        eff = 0.5 + 0.5 * math.log(32768 / 1e4) / math.log(100)
        assert term_times.epilogue_time(_clip_conv(8), one) == pytest.approx(32768 / (100e9 * eff))


class TestWeights:
    """weights: the weights at DRAM's bandwidth times their reuse between runs, on the memory side."""

    def test_a_one_row_products_small_weight_is_kept_between_runs_as_a_large_one_is(self):
        """gemv's ceiling is read on cold weights only: a weight under COLD_WEIGHTS is read at DRAM's rate times the
        model's reuse too."""
        reused = replace(calibrated_host(), weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test"))
        # A 1000-way classifier on 128 features: 4 * (128 * 1000 + 1000) = 516,000 B of weights and bias, 512 + 4,000 B
        # of activations; 256,000 FLOPs take 2.56 us at 100 GFLOP/s, so it is bound by its memory time. The working set
        # (520,512 B) fits the 1 MiB L2 (50 GB/s): activations 4,512 / 50e9 = 0.09 us; weights 516,000 / 10e9 = 51.6 us
        # read cold, 516,000 / (10e9 * 2) = 25.8 us in a model whose traffic gives a reuse of 2.
        gemv = make_node("Gemm", [T((1, 128)), W((1000, 128)), W((1000,))], [T((1, 1000))], transB=1)
        cost = Cost(flops=256_000, bytes_read=512 + 516_000, bytes_written=4_000, kernels=1)
        cold, note = engine.predict_engine(gemv, cost, "fp32", reused)
        assert note.op_class == "gemv" and cold.memory_time_s == pytest.approx(4_512 / 50e9 + 516_000 / 10e9)
        kept, note = engine.predict_engine(gemv, cost, "fp32", reused, InModel(traffic=1e6))
        assert note.weight_speedup == 2.0 and kept.memory_time_s == pytest.approx(4_512 / 50e9 + 516_000 / 20e9)

    def test_a_small_models_weights_are_read_at_the_calibrated_reuse_speedup(self):
        """Weights are charged at DRAM bandwidth times the device's weight-reuse speedup at the bytes the model moves a
        run; the activations keep their level's bandwidth, and a node predicted without that traffic reads its weights
        cold."""
        reuse = WeightReuse(((4e6, 2.5), (32e6, 1.0)), "calibrated: test")
        dev = replace(calibrated_host(), weight_reuse=reuse)
        # A 1 x 1024 by 1024 x 1024 MatMul: 2,097,152 FLOPs; reads 4 KiB of activation and 4 MiB of weight, writes
        # 4 KiB. Its 4.2 MB working set is past L2: the activations go at DRAM's 10 GB/s too (no ceiling: eff 1).
        gemv = make_node("MatMul", [T((1, 1024)), W((1024, 1024))], [T((1, 1024))])
        weights = 1024 * 1024 * 4
        cost = Cost(flops=2 * 1024 * 1024, bytes_read=4 * 1024 + weights, bytes_written=4 * 1024, kernels=1)
        activations = 2 * 4 * 1024
        # At a 16 MB traffic the speedup is interpolated in log(traffic): ln(16/4) / ln(32/4) = 2/3 of the way
        # from 2.5 to 1.0, i.e. 1.5; the weights go at 1.5 x 10 GB/s.
        pred, note = engine.predict_engine(gemv, cost, "fp32", dev, InModel(traffic=16e6))
        assert note.weight_speedup == pytest.approx(1.5)
        assert pred.memory_time_s == pytest.approx(activations / 10e9 + weights / 15e9)
        assert "at 1.5x DRAM's rate" in note.describe()
        # Below the first point the first speedup holds; beyond the last, the last (1: from DRAM).
        assert engine.predict_engine(gemv, cost, "fp32", dev, InModel(traffic=1e6))[1].weight_speedup == 2.5
        cold, cold_note = engine.predict_engine(gemv, cost, "fp32", dev, InModel(traffic=1e9))
        assert (
            cold.memory_time_s == pytest.approx((activations + weights) / 10e9) and "from DRAM" in cold_note.describe()
        )
        # No traffic, or no calibration of the reuse: cold weights.
        assert engine.predict_engine(gemv, cost, "fp32", dev)[1].weight_speedup == 1.0
        assert (
            engine.predict_engine(gemv, cost, "fp32", calibrated_host(), InModel(traffic=1e6))[1].weight_speedup == 1.0
        )
        # A node whose weights are under COLD_WEIGHTS (1 MiB) reads them as its ceiling was calibrated, warm: no speedup
        # (but a one-row product, whose ceiling is read cold: see the test above).
        small = make_node("MatMul", [T((32, 256)), W((256, 256))], [T((32, 256))])
        small_cost = Cost(
            flops=2 * 32 * 256 * 256, bytes_read=4 * 32 * 256 + 4 * 256 * 256, bytes_written=4 * 32 * 256, kernels=1
        )
        assert engine.predict_engine(small, small_cost, "fp32", dev, InModel(traffic=1e6))[1].weight_speedup == 1.0
        # A speedup is never below 1, whatever a table says.
        slower = replace(dev, weight_reuse=WeightReuse(((4e6, 0.8),), "calibrated: test"))
        assert engine.weight_speedup(slower, 4e6) == 1.0


class TestSubnormal:
    """subnormal: the node's elements on the slow path of subnormal floats at the device's calibrated costs, times
    the network factor, after the kernel (its counting: tests/predict/test_subnormal.py)."""

    def test_underflowing_elements_and_subnormal_products_at_their_calibrated_costs(self):
        dev = replace(
            calibrated_host(),
            softmax_underflow=Sourced(2e-8, "calibrated: test"),
            subnormal_product=Sourced(1e-9, "calibrated: test"),
            network_factor=Sourced(1.5, "calibrated: test"),
        )
        view = make_node("Softmax", [T((4, 3, 49, 49))], [T((4, 3, 49, 49))], axis=-1)
        cost = Cost(flops=1e6, bytes_read=4e5, bytes_written=4e5, kernels=1)
        work = SubnormalWork(underflows=1000, products=3000)
        plain, _ = engine.predict_engine(view, cost, "fp32", dev)
        slowed, note = engine.predict_engine(view, cost, "fp32", dev, InModel(subnormal=work))
        # 1.5 x (1000 x 20 ns + 3000 x 1 ns) = 1.5 x 23 us = 34.5 us, after the combine
        assert note.terms["subnormal"] == pytest.approx(34.5e-6)
        assert slowed.predicted_time_s == pytest.approx(plain.predicted_time_s + 34.5e-6)
        assert slowed.compute_time_s == plain.compute_time_s and slowed.memory_time_s == plain.memory_time_s
        # without the calibrated costs, none
        _, bare = engine.predict_engine(view, cost, "fp32", calibrated_host(), InModel(subnormal=work))
        assert bare.terms["subnormal"] == 0.0


class TestDispatch:
    """dispatch: one per-node overhead (device.launch_overhead) for every node, shape-only ones too, outside the
    network factor."""

    def test_every_node_pays_one_launch_overhead(self):
        dev = replace(calibrated_host({"conv": CONV}), network_factor=Sourced(1.5, "calibrated: test"))
        reshape = make_node("Reshape", [T((1, 197, 768)), W((2,), INT64)], [T((197, 768))])
        pred, note = engine.predict_engine(reshape, Cost(), "fp32", dev)
        # no FLOPs, no bytes: the hand-made host's 1 us of dispatch alone, not 1.5 us
        assert note.terms["dispatch"] == 1e-6 and pred.predicted_time_s == 1e-6 and pred.bound == "overhead"
        _, conv_note = engine.predict_engine(conv(64, 64, 28, 3), Cost(flops=1e7, bytes_read=4e5), "fp32", dev)
        assert conv_note.terms["dispatch"] == 1e-6
