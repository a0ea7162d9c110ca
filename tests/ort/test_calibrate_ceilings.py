"""From samples to figures: binned ceiling points, class ceilings, cache sizes, dram_overlap, network_factor and
the calibration's warnings, on hand-made samples and a hand-made host."""

from __future__ import annotations

from dataclasses import replace

import pytest

from onnxroof.api import analyze
from onnxroof.costs import Cost
from onnxroof.devices import Ceiling, Device, FrozenMap, Peak, WeightWait
from onnxroof.ort.calibrate import ceilings, graphs
from onnxroof.ort.calibrate.jobs import Sample
from onnxroof.ort.calibrate.network import factor_network
from onnxroof.predict import engine
from tests.helpers import CONV, ELEMENTWISE, INT32, UINT8, T, W, calibrated_host, conv, cost_of, gqa, make_node, nbits


def test_binning_merges_close_work_sizes():
    points = [(1e6, 0.5), (1.2e6, 0.7), (1.1e6, 0.6), (1e8, 0.9)]
    # Within 1.6x of 1e6: one group, median 0.6, held from its least work (1e6) to its greatest (1.2e6); 1e8 alone.
    assert ceilings.bin_points(points, least=1) == ((1e6, 0.6), (1.2e6, 0.6), (1e8, 0.9))


def test_memory_points_of_two_levels_are_binned_apart():
    # Bytes within 1.6x of each other, but the third kernel's working set is in L3 where the first two are in L2:
    # an efficiency is a fraction of its own level's bandwidth. Binned together they would hold one median, 0.62;
    # apart, L2's two hold their median (0.6 + 0.62) / 2 = 0.61 and L3's one its own 1.1.
    points = [(1e6, 0.6, "L2"), (1.2e6, 0.62, "L2"), (1.5e6, 1.1, "L3")]
    assert ceilings.bin_points([(w, e) for w, e, _ in points]) == ((1e6, 0.62), (1.5e6, 0.62))
    assert ceilings.bin_levels(points) == ((1e6, 0.61), (1.2e6, 0.61), (1.5e6, 1.1))
    # Within a level the rules of bin_points hold: three L2 points within 1.6x are one group at their median.
    assert ceilings.bin_levels([(1e6, 0.5, "L2"), (1.1e6, 0.7, "L2"), (1.2e6, 0.6, "L2")]) == ((1e6, 0.6), (1.2e6, 0.6))


def test_a_group_holds_its_median_across_its_span_and_interpolation_runs_between_groups():
    # Two groups of three: (100, 120, 150) at median 0.4 and (1000, 1200, 1500) at median 0.8.
    points = [(100, 0.3), (120, 0.4), (150, 0.5), (1000, 0.7), (1200, 0.8), (1500, 0.9)]
    bins = ceilings.bin_points(points)
    assert bins == ((100, 0.4), (150, 0.4), (1000, 0.8), (1500, 0.8))
    ceiling = Ceiling(compute=bins, memory=(), source="test")
    # A kernel of the lower group's greatest work gets that group's median, not one drawn toward the upper group.
    assert ceiling.compute_efficiency(150) == 0.4
    # Between the groups, linear in log(work): 387.3 = sqrt(150 * 1000) lies halfway, 0.4 + (0.8 - 0.4) / 2.
    assert ceiling.compute_efficiency((150 * 1000) ** 0.5) == pytest.approx(0.6)


def test_binning_never_lets_fewer_than_three_kernels_set_a_point():
    # Two kernels at 1e6 and 1.1e6 are short of three: the next one joins them, however far its work is, and the
    # median of (0.9, 0.95, 0.5) ignores the slow outlier. The next two (1e9, 1.2e9) are short of three at the
    # end: they join the group before them, median of (0.8, 0.85, 0.82, 0.9, 0.6) = 0.82 from 1e8 to 1.2e9.
    points = [(1e6, 0.9), (1.1e6, 0.95), (1e7, 0.5), (1e8, 0.8), (1.1e8, 0.85), (1.2e8, 0.82), (1e9, 0.9), (1.2e9, 0.6)]
    assert ceilings.bin_points(points) == ((1e6, 0.9), (1e7, 0.9), (1e8, 0.82), (1.2e9, 0.82))
    # A class with fewer kernels than that gets one group, their median, over the works they span.
    assert ceilings.bin_points([(1e6, 0.4), (1e9, 0.8)]) == ((1e6, 0.6), (1e9, 0.6))
    # Kernels of one work give one point.
    assert ceilings.bin_points([(1e6, 0.4), (1e6, 0.8), (1e6, 0.5)]) == ((1e6, 0.5),)


def test_binning_drops_points_that_measured_nothing():
    assert ceilings.bin_points([(0.0, 0.5), (1e6, 0.0), (1e6, float("inf")), (1e6, float("nan"))]) == ()


def test_a_class_ceiling_is_the_roofline_time_over_the_measured_time():
    bare = calibrated_host()
    # A 3x3 conv on 56x56 (compute class) and a Gemm by a large weight at batch 1 (matrix-vector: memory-bound).
    view = conv(64, 64, 56, 3)
    cost = Cost(flops=2.3e8, bytes_read=9e5, bytes_written=8e5, kernels=1)
    samples = [Sample(view, cost, 2.3e8 / 100e9 / f, f"conv {f}") for f in (0.5, 0.6, 0.7)]
    gemv = make_node("Gemm", [T((1, 4096)), W((4096, 4096)), W((4096,))], [T((1, 4096))], transB=1)
    gemv_cost = Cost(flops=2 * 4096 * 4096, bytes_read=4 * 4096 * 4097 + 4 * 4096, bytes_written=4 * 4096)
    # 67 MB of weights at the DRAM's 10 GB/s: 6.7 ms; its compute (33.5 MFLOP at 100 GFLOP/s) is 335 us.
    dram_s = (gemv_cost.bytes - 4 * 4096 * 4097) / 10e9 + 4 * 4096 * 4097 / 10e9
    samples.append(Sample(gemv, gemv_cost, dram_s / 0.8, "gemv"))
    out = ceilings.class_ceilings(samples, bare, 1)
    # Three conv kernels at the same FLOPs: one point, their median efficiency.
    assert out["conv"].compute == ((2.3e8, 0.6),) and out["conv"].memory == ()
    assert (
        "by 3 onnxruntime conv kernel(s)" in out["conv"].source and "conv 0.5; conv 0.6; conv 0.7" in out["conv"].source
    )
    # The matrix-vector Gemm (one row) is a memory point of the gemv class: 80% of the bandwidth its data moves at.
    assert out["gemv"].compute == () and out["gemv"].memory == ((float(f"{gemv_cost.bytes:.4g}"), 0.8),)
    assert "weight-bound gemv kernel(s)" in out["gemv"].source


def _conv_integer(cin: int, cout: int, hw: int):
    """A 3x3 ConvInteger (uint8 input and weight, int32 output) on hw x hw, padded to keep the size."""
    return make_node(
        "ConvInteger",
        [T((1, cin, hw, hw), UINT8), W((cout, cin, 3, 3), UINT8), T((), UINT8), W((), UINT8)],
        [T((1, cout, hw, hw), INT32)],
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
    )


def test_an_int8_convolution_is_timed_against_the_int8_peak_and_a_weight_bound_one_gives_a_memory_point():
    bare = replace(
        calibrated_host(),
        peak_flops=FrozenMap({"fp32": Peak(100e9, True, "calibrated: test"), "int8": Peak(400e9, True, "test")}),
    )
    # 64 -> 64 3x3 on 28x28: compute-bound, its compute time at the 400 GOP/s int8 peak 1e8 / 400e9 = 250 us;
    # measured 1 ms, it reaches a quarter of the int8 peak.
    wide = _conv_integer(64, 64, 28)
    wide_cost = Cost(flops=1e8, bytes_read=1e5, bytes_written=1e5, kernels=1)
    # 512 -> 512 3x3 on 2x2: 2,359,296 B of weight at the DRAM's 10 GB/s take 236 us, its 1.9e7 FLOPs 47 us at the
    # peak: weight-bound. Measured 2.36 ms, it reaches a tenth of the bandwidth its weight streams at.
    deep = _conv_integer(512, 512, 2)
    deep_cost = Cost(flops=1.9e7, bytes_read=2359296, bytes_written=0, kernels=1)
    samples = [Sample(wide, wide_cost, 1e-3, "wide")] + [Sample(deep, deep_cost, 2359296 / 1e9, "deep")]
    out = ceilings.class_ceilings(samples, bare, 1)
    assert out["conv_integer"].compute == ((1e8, 0.25),)
    assert out["conv_integer"].memory == ((2.359e6, 0.1),)
    assert "int8 peak" in out["conv_integer"].source and "weight-bound" in out["conv_integer"].source


def test_a_weight_bound_single_position_convolution_gives_a_memory_point():
    # A squeeze-and-excitation product, 1152 -> 48 by a 1x1 kernel on a 1x1 map: its 48 * 1152 * 4 = 221,184 B of
    # weight at the DRAM's 10 GB/s take 22.1 us, its 2 * 1152 * 48 = 110,592 FLOPs 1.1 us at the 100 GFLOP/s peak:
    # weight-bound. Measured 44.2 us, it reaches half the bandwidth its weight streams at.
    view = make_node("Conv", [T((1, 1152, 1, 1)), W((48, 1152, 1, 1))], [T((1, 48, 1, 1))], kernel_shape=[1, 1])
    cost = Cost(flops=110592, bytes_read=221184, bytes_written=0, kernels=1)
    out = ceilings.class_ceilings([Sample(view, cost, 2 * 221184 / 10e9, "SE")], calibrated_host(), 1)
    assert out["conv_vector"].compute == () and out["conv_vector"].memory == ((2.212e5, 0.5),)
    assert "weight-bound conv_vector kernel(s)" in out["conv_vector"].source


def test_the_epilogue_ceiling_is_the_level_bandwidth_over_the_clip_s_extra_time():
    bare = calibrated_host()
    clip = make_node(
        "Conv",
        [T((1, 64, 28, 28)), W((64, 64, 1, 1)), W((64,))],
        [T((1, 64, 28, 28))],
        domain="com.microsoft.nchwc",
        kernel_shape=[1, 1],
        activation="Clip",
        activation_params=[0.0, 6.0],
    )
    cost = Cost(flops=6.4e6, bytes_read=2.2e5, bytes_written=2e5, kernels=1)
    # The Clip pass reads and writes the 64x28x28 fp32 output: 2 * 200,704 = 401,408 B, which fits the test
    # host's L2 (1 MiB at 50 GB/s): 8.028 us at full bandwidth. Measured at 20 us over the Relu twin, the pass
    # reached 8.028 / 20 = 40.1% of it.
    extra = Sample(clip, cost, 20e-6, "Conv 64->64 1x1 @28x28", part="epilogue")
    ceiling = ceilings.class_ceilings([extra], bare, 1)["epilogue"]
    assert ceiling.compute == ()
    assert ceiling.memory == ((401400.0, pytest.approx(401408 / 50e9 / 20e-6, rel=1e-3)),)  # 4 figures kept
    assert "Clip less their time with Relu" in ceiling.source and "Conv 64->64 1x1 @28x28" in ceiling.source


def test_a_shared_cache_serves_only_the_working_sets_at_which_its_bandwidth_holds():
    mib = 2**20
    nominal = 300 * mib  # what a virtual machine reports: the host's whole last-level cache
    # Measured at 32 MiB: 20 GB/s. At 64 MiB 16 GB/s is 80% of it (holds, >= 75%); at 128 MiB 10 GB/s is 50%
    # (falls): the level serves up to 64 MiB, and larger working sets go to DRAM.
    size, note = ceilings.effective_size(nominal, 32 * mib, 20e9, [(128 * mib, 10e9), (64 * mib, 16e9)])
    assert size == 64 * mib
    assert "serves up to 64 MiB" in note and "at 128 MiB" in note and "50%" in note
    # Falling at the first probe leaves only the working set the level was measured on.
    assert ceilings.effective_size(nominal, 32 * mib, 20e9, [(64 * mib, 14e9)])[0] == 32 * mib
    # Every probe holding (a real last-level cache of that size): the reported size stands, with no note.
    assert ceilings.effective_size(nominal, 32 * mib, 20e9, [(64 * mib, 19e9), (128 * mib, 15e9)]) == (nominal, "")
    assert ceilings.effective_size(nominal, 32 * mib, 20e9, []) == (nominal, "")


def test_warnings_name_load_from_elsewhere_not_the_spread_a_machine_always_has():
    assert ceilings.calibration_warnings(10.0, 120.0, 0.0, 0.1, cpus=2, threads=1) == []
    # The hypervisor took 30% of the CPU time (over STEAL_WARN, 5%).
    assert any("hypervisor took 30%" in w for w in ceilings.calibration_warnings(10.0, 120.0, 0.3))
    # One thread calibrated on 2 cores leaves 1 free: other processes may use OTHERS_LOAD_BOUND (0.5) of it
    # before the calibration says so; 0.8 of a core is past that, 0.4 is not.
    busy = ceilings.calibration_warnings(10.0, 120.0, 0.0, 0.8, cpus=2, threads=1)
    assert busy and "other processes kept 0.8 of 2 CPU cores busy" in busy[0]
    assert ceilings.calibration_warnings(10.0, 120.0, 0.0, 0.4, cpus=2, threads=1) == []
    # With every core calibrated, half a core of other load is the bound (max(cpus - threads, 1) = 1).
    assert ceilings.calibration_warnings(10.0, 120.0, None, 0.6, cpus=2, threads=2)
    assert any("over its 120 s budget" in w for w in ceilings.calibration_warnings(130.0, 120.0))


@pytest.mark.ort
def test_the_network_factor_is_the_factor_networks_measured_work_over_its_predicted_work():
    device = calibrated_host({"conv": CONV})
    model, _ = factor_network()
    net = analyze(model, device)
    # The fixed costs, the run overhead (5 us) and one dispatch per node (1 us each), are not the kernels' work:
    # a network measured at fixed + 1.5 x (predicted - fixed) ran its kernels 1.5 times as long as predicted.
    fixed = 5e-6 + 1e-6 * len(net.nodes)
    assert sum(n.prediction.overhead_time_s for n in net.nodes) == pytest.approx(1e-6 * len(net.nodes))
    measured = fixed + 1.5 * (net.totals.predicted_time_s - fixed)
    factor = ceilings.network_factor(device, model, measured, "test")
    assert factor.value == pytest.approx(1.5)
    assert factor.source.startswith("calibrated: the factor network (onnxroof.ort.calibrate.network) ran")
    # With the factor the device predicts the network at what it measured.
    scaled = analyze(model, replace(device, network_factor=factor))
    assert scaled.totals.predicted_time_s == pytest.approx(measured)


def test_a_padded_nchwc_convolution_gives_back_its_measured_time():
    """The ceiling read on a padded NCHWc convolution predicts that convolution at its measured time: both count the
    taps inside the input only. 256 -> 256 channels, 3x3, pad 1, on 7x7: per axis 19 of the 21 (output, tap) pairs
    read the input, (19/21)^2 = 0.819 of the taps."""
    view = conv(256, 256, 7, 3, pad=1)
    flops = 2 * 256 * 256 * 9 * 7 * 7
    cost = Cost(flops=flops, bytes_read=4 * (256 * 49 + 256 * 256 * 9 + 256), bytes_written=4 * 256 * 49, kernels=1)
    measured = 1e-3
    bare = calibrated_host()
    fitted = ceilings.class_ceilings([Sample(view, cost, measured, f"conv {i}") for i in range(3)], bare, 1)
    # One point, at the inside FLOPs, of the roofline time of those FLOPs over the measured time (to 4 digits).
    ((work, efficiency),) = fitted["conv_small"].compute
    inside = flops * (19 / 21) ** 2
    assert work == pytest.approx(inside, rel=1e-3) and efficiency == pytest.approx(inside / 100e9 / measured, rel=1e-3)
    pred, _ = engine.predict_engine(view, cost, "fp32", replace(bare, ceilings=FrozenMap(fitted)))
    assert pred.compute_time_s == pytest.approx(measured, rel=1e-3)


def test_a_convolution_read_on_cold_weights_gives_back_its_measured_time():
    """With the device's conv_weight_wait, a dense convolution's point is read on its time less the share of its
    cold weights' read the prediction adds back. The padded 256 -> 256 3x3 on 7x7 above: 4 * (256 * 256 * 9 + 256)
    = 2,360,320 B of weights (past COLD_WEIGHTS), half of whose read at DRAM's 10 GB/s is 118.0 us."""
    view = conv(256, 256, 7, 3, pad=1)
    flops, weights = 2 * 256 * 256 * 9 * 7 * 7, 4 * (256 * 256 * 9 + 256)
    cost = Cost(flops=flops, bytes_read=4 * 256 * 49 + weights, bytes_written=4 * 256 * 49, kernels=1)
    measured = 1e-3
    bare = replace(calibrated_host(), conv_weight_wait=WeightWait(((1e5, 0.5),), "calibrated: test"))
    fitted = ceilings.class_ceilings([Sample(view, cost, measured, f"conv {i}") for i in range(3)], bare, 1)
    ((_, efficiency),) = fitted["conv_small"].compute
    inside = flops * (19 / 21) ** 2
    assert efficiency == pytest.approx(inside / 100e9 / (measured - 0.5 * weights / 10e9), rel=1e-3)
    pred, _ = engine.predict_engine(view, cost, "fp32", replace(bare, ceilings=FrozenMap(fitted)))
    assert pred.predicted_time_s - pred.overhead_time_s == pytest.approx(measured, rel=1e-3)


def test_the_conv_weight_wait_is_the_cold_runs_extra_time_over_the_weights_read():
    """Per convolution (weight bytes, output bytes, seconds the cold run took longer), at DRAM's 10 GB/s: the
    extra time less the output's write-allocate (its bytes read at DRAM's rate), over the weights' read."""
    waits = [
        # 1 MB of weights, a 100 kB output (10 us): (100 - 10) us over 100 us = 0.9; (80 - 10) -> 0.7; (60 - 10) -> 0.5
        (1e6, 1e5, 100e-6),
        (1e6, 1e5, 80e-6),
        (1e6, 1e5, 60e-6),
        (4e6, 0.0, 100e-6),  # 100 us over 400 us: 0.25
        (2e5, 5e5, 20e-6),  # its output's 50 us exceed the 20 us it took longer: 0, never below
    ]
    wait = ceilings.conv_weight_wait(waits, 10e9, "test")
    assert wait is not None and wait.points == ((2e5, 0.0), (1e6, 0.7), (4e6, 0.25))
    assert wait.source.startswith("calibrated: 5 convolution(s)")
    assert ceilings.conv_weight_wait([], 10e9, "test") is None


def test_a_product_read_on_cold_weights_gives_back_its_measured_time():
    """The gemm ceiling is read on the arithmetic's share of a product's time, its cold weights' read, its pass
    over the output for C and its output's write taken off as the prediction adds them back: the ceiling predicts
    the benchmark at its measured time. 197 x 768 by 768 x 768: 232,390,656 FLOPs, 4 * (768 * 768 + 768) =
    2,362,368 B of weights, read at DRAM's 10 GB/s in 236.2 us; its 605,184 B output written and read back for C at
    L2's 50 GB/s in 24.2 us, and, the working set (3,572,736 B) past the 1 MiB L2, written by the product at DRAM's
    rate, read first: 1,210,368 B in 121.0 us."""
    view = make_node("Gemm", [T((197, 768)), W((768, 768)), W((768,))], [T((197, 768))], transB=1)
    flops, weights = 2 * 197 * 768 * 768, 4 * (768 * 768 + 768)
    cost = Cost(flops=flops, bytes_read=4 * 197 * 768 + weights, bytes_written=4 * 197 * 768, kernels=1)
    measured = 3e-3
    bare = calibrated_host()
    fitted = ceilings.class_ceilings([Sample(view, cost, measured, f"gemm {i}") for i in range(3)], bare, 1)
    # One point (to 4 digits): 2.3239 ms at the 100 GFLOP/s peak over the 3 ms less 236.2, 24.2 and 121.0 us, 0.8875.
    ((work, efficiency),) = fitted["gemm"].compute
    assert work == pytest.approx(flops, rel=1e-3) and efficiency == pytest.approx(
        (flops / 100e9) / (measured - weights / 10e9 - 2 * 605_184 / 50e9 - 2 * 605_184 / 10e9), rel=1e-3
    )
    pred, _ = engine.predict_engine(view, cost, "fp32", replace(bare, ceilings=FrozenMap(fitted)))
    assert pred.predicted_time_s - pred.overhead_time_s == pytest.approx(measured, rel=1e-3)


def _gemv_chain_time(n: int, speedup: float) -> float:
    """The hand-made host's prediction for graphs.gemv_chain's 4 products (1 x n) @ (n x n), memory-bound, their
    weights read at ``speedup`` times DRAM's 10 GB/s: 5 us a run, and per node 1 us of dispatch plus its vector in
    and out (each working set is past the 1 MiB L2, so at DRAM's 10 GB/s) and its weight."""
    per_node = 1e-6 + (2 * 4 * n) / 10e9 + (4 * n * n) / (10e9 * speedup)
    return 5e-6 + 4 * per_node


@pytest.mark.ort
def test_the_weight_reuse_speedup_is_the_one_at_which_a_chain_is_predicted_at_its_measured_time():
    device = calibrated_host()
    small, large = graphs.gemv_chain(4 * 2**20), graphs.gemv_chain(16 * 2**20)  # n = 512 and 1024
    assert small[1]["x"].shape == (1, 512) and large[1]["x"].shape == (1, 1024)
    reuse = ceilings.weight_reuse(
        device, [(large[0], _gemv_chain_time(1024, 1.25)), (small[0], _gemv_chain_time(512, 2.0))], "test"
    )
    assert reuse is not None
    (f_small, x_small), (f_large, x_large) = reuse.points
    # Each point sits at the bytes its graph moves a run: its weights, and each product's vector in and out.
    assert 4 * 2**20 < f_small < 4 * 2**20 + 64 * 1024 and 16 * 2**20 < f_large < 16 * 2**20 + 64 * 1024
    assert (x_small, x_large) == (2.0, 1.25)
    assert reuse.source.startswith("calibrated: chains of 4 MatMul (1xN) @ (NxN) timed back to back")
    # A larger model never keeps more of its weights: a faster large chain is held to the smaller one's speedup.
    faster = ceilings.weight_reuse(
        device, [(small[0], _gemv_chain_time(512, 2.0)), (large[0], _gemv_chain_time(1024, 3.0))], "test"
    )
    assert faster is not None and [x for _, x in faster.points] == [2.0, 2.0]
    # A chain slower than its cold prediction gives 1, never less; no chains, no table.
    slower = ceilings.weight_reuse(device, [(small[0], 2 * _gemv_chain_time(512, 1.0))], "test")
    assert slower is not None and slower.points[0][1] == 1.0
    assert ceilings.weight_reuse(device, [], "test") is None


def test_dram_overlap_is_the_share_of_a_dram_conv_s_traffic_its_compute_hid():
    device = calibrated_host({"conv": CONV})
    view = conv(64, 64, 112, 3, out_hw=56)
    cost = Cost(flops=1e9, bytes_read=3e6, bytes_written=1e6, kernels=1)
    # compute = 1e9 / (100e9 * 0.9) = 11.111 ms at the conv ceiling; the 4 MB working set is past the test host's
    # L2, so memory = 4e6 / 10e9 = 400 us at DRAM. Measured 300 us over the compute: 1 - 300/400 = 0.25 hidden.
    measured = Sample(view, cost, 1e9 / 90e9 + 300e-6, "a batched conv")
    hidden = ceilings.dram_overlap(measured, device, "test")
    assert hidden is not None and hidden.value == pytest.approx(0.25)
    assert hidden.source.startswith("calibrated: a batched conv ran 11.4 ms")
    # Faster than its compute alone: all hidden (1); slower than compute plus all the traffic: none hidden (0).
    faster = ceilings.dram_overlap(replace(measured, time_s=0.011), device, "test")
    slower = ceilings.dram_overlap(replace(measured, time_s=0.013), device, "test")
    assert faster is not None and faster.value == 1.0
    assert slower is not None and slower.value == 0.0
    # A conv whose data sits in a cache, or one that is memory-bound, measures nothing.
    in_cache = replace(measured, cost=Cost(flops=1e9, bytes_read=4e5, bytes_written=2e5))
    assert ceilings.dram_overlap(in_cache, device, "test") is None
    memory_bound = replace(measured, cost=Cost(flops=1e6, bytes_read=3e6, bytes_written=1e6))
    assert ceilings.dram_overlap(memory_bound, device, "test") is None


def test_the_peak_is_read_on_whole_kernels_never_on_an_epilogue_pass():
    view = conv(64, 64, 56, 3)
    cost = Cost(flops=2 * 64 * 56 * 56 * 64 * 9, bytes_read=1e6, bytes_written=8e5, kernels=1)  # 231,211,008 FLOPs
    whole = Sample(view, cost, 2.3e-3, "Conv 64->64 3x3 @56x56")  # 231.2e6 / 2.3e-3 = 100.5 GFLOP/s
    # The same convolution's Clip pass: 200 us of the kernel's time, but the cost of the whole convolution.
    epilogue = Sample(view, cost, 2e-4, "Conv 64->64 3x3 @56x56", part="epilogue")
    short = Sample(view, Cost(flops=1e6, kernels=1), 5e-6, "a 5 us kernel")  # under PEAK_MIN_S: fixed costs rule
    # An 8-bit convolution runs on the int8 peak: its rate says nothing of the fp32 one.
    int8 = Sample(_conv_integer(64, 64, 56), cost, 5e-4, "ConvInteger 64->64 3x3 @56x56")
    rates = ceilings.peak_candidates([whole, epilogue, short, int8])
    assert rates == [(pytest.approx(231211008 / 2.3e-3), "Conv 64->64 3x3 @56x56")]
    # A padded NCHWc convolution computes only its taps inside the input: DeepLab's rate-24 branch on 14x14 (960 ->
    # 256 channels, pad 24) reads only its centre tap, a ninth of the 867,141,632 FLOPs counted.
    aspp = conv(960, 256, 14, 3, pad=24, dilation=24)
    counted = 2 * 960 * 256 * 9 * 14 * 14
    dilated = Sample(aspp, Cost(flops=counted, bytes_read=1e7, bytes_written=2e5, kernels=1), 2e-3, "ASPP rate 24")
    assert ceilings.peak_candidates([dilated]) == [(pytest.approx(counted / 9 / 2e-3), "ASPP rate 24")]


def test_a_batched_matmul_gives_a_point_at_the_work_of_one_product():
    # 12 per-head products of 197x64 by 64x197 (2*197*64*197 = 4.97 MFLOP each), run at half the 100 GFLOP/s
    # peak: the point is read where the prediction reads it, at one product's FLOPs (class_work.ceiling_work).
    scores = make_node("MatMul", [T((1, 12, 197, 64)), T((1, 12, 64, 197))], [T((1, 12, 197, 197))])
    one = 2 * 197 * 64 * 197
    cost = Cost(flops=12 * one, bytes_read=2 * 12 * 197 * 64 * 4, bytes_written=12 * 197 * 197 * 4, kernels=1)
    samples = [Sample(scores, cost, 12 * one / 100e9 / 0.5, f"scores {i}") for i in range(3)]
    out = ceilings.class_ceilings(samples, calibrated_host(), 1)
    assert out["matmul"].compute == ((float(f"{one:.4g}"), 0.5),)


def _int8_host() -> Device:
    """The hand-made host with an int8 peak of 400 GOP/s beside its 100 GFLOP/s fp32 one."""
    peaks = {"fp32": Peak(100e9, True, "calibrated: test"), "int8": Peak(400e9, True, "calibrated: test")}
    return replace(calibrated_host(), peak_flops=FrozenMap(peaks))


def test_a_4_bit_product_of_one_row_reads_its_weight_at_a_share_of_dram_and_a_longer_one_at_the_int8_peak():
    # One row of 896 by a 896 x 4864 weight in 4 bits at accuracy_level 4: 2,179,072 B packed and 544,768 B of scales
    # (2,723,840 B, read cold at DRAM's 10 GB/s), its 3584 B row and 19,456 B output (the 2,746,880 B working set is
    # past L2: DRAM too): 274.688 us, against 17,435,264 OP at the 400 GOP/s int8 peak, 43.6 us. Timed at exactly
    # 2,746,880 B / 6 GB/s it reaches 0.6 of the rate its bytes come at.
    row = nbits(1, 896, 4864, 4)
    row_cost = cost_of(row)
    assert (row_cost.flops, row_cost.bytes) == (17_435_264, 2_746_880)
    # 128 rows by an 896 x 896 weight: 207,470,592 OP, 518.68 us at the int8 peak, 1,419,264 B, 141.9 us at DRAM's
    # rate: compute-bound. Timed at a third of the int8 peak's rate, 0.3 of it.
    rows = nbits(128, 896, 896, 4)
    rows_cost = cost_of(rows)
    assert rows_cost.flops == 207_470_592
    samples = [Sample(row, row_cost, 2_746_880 / 6e9, f"one row {i}") for i in range(3)]
    samples += [Sample(rows, rows_cost, 207_470_592 / (400e9 * 0.3), f"128 rows {i}") for i in range(3)]
    out = ceilings.class_ceilings(samples, _int8_host(), 1)
    assert out["gemv_nbits_int8"].compute == () and out["gemv_nbits_int8"].memory == ((2.747e6, 0.6),)
    assert out["gemm_nbits_int8"].compute == ((2.075e8, 0.3),) and out["gemm_nbits_int8"].memory == ()
    assert (
        "int8 peak" in out["gemm_nbits_int8"].source and "weight-bound gemv_nbits_int8" in out["gemv_nbits_int8"].source
    )


def test_a_gqa_decode_step_gives_a_point_by_its_heads_work():
    # 14 query heads over 2 key/value heads and 1025 rows: 3,759,700 FLOPs (37.6 us at the 100 GFLOP/s peak) and
    # 2,106,376 B past L2 (210.6 us at DRAM's 10 GB/s): bytes-bound on the roofline, but its heads share their caches,
    # and it gives a compute point, by one head's 3,759,700 / 14 = 268,550 FLOPs: timed at an eighth of the peak's
    # rate, 0.125.
    shared = gqa(14, 2, 1024)
    shared_cost = cost_of(shared)
    assert (shared_cost.flops, shared_cost.bytes) == (3_759_700, 2_106_376)
    # 16 heads, each over a key/value head of its own: 16,801,800 B at DRAM's rate, 1.68 ms, against 43 us of
    # products: a memory point by one head's 1,050,112.5 B. Timed at exactly its bytes / 8 GB/s, 0.8 of the rate.
    own = gqa(16, 16, 1024)
    own_cost = cost_of(own)
    assert own_cost.bytes == 16_801_800
    # A prefill of 128 tokens, 8 heads over 2: 34,340,864 FLOPs, 4,292,608 a head, at 0.6 of the peak's rate.
    prefill = gqa(8, 2, 0, 128)
    prefill_cost = cost_of(prefill)
    assert prefill_cost.flops == 34_340_864
    samples = [Sample(shared, shared_cost, 3_759_700 / (100e9 * 0.125), f"shared {i}") for i in range(3)]
    samples += [Sample(own, own_cost, 16_801_800 / 8e9, f"own {i}") for i in range(3)]
    samples += [Sample(prefill, prefill_cost, 34_340_864 / (100e9 * 0.6), f"prefill {i}") for i in range(3)]
    out = ceilings.class_ceilings(samples, calibrated_host(), 1)
    assert out["attention_decode"].compute == ((2.686e5, 0.125),)
    assert out["attention_decode"].memory == ((1.05e6, 0.8),)
    assert "data-bound attention_decode kernel(s)" in out["attention_decode"].source
    assert out["attention"].compute == ((4.293e6, 0.6),) and out["attention"].memory == ()
    # Read back by the prediction, each gives its measured time (and 1 us of dispatch): the shared caches' read at
    # 0.8 of DRAM's rate, 263.3 us, stays under their heads' products.
    fitted = replace(calibrated_host(), ceilings=FrozenMap(out))
    for s in (samples[0], samples[3], samples[6]):
        pred, _ = engine.predict_engine(s.view, s.cost, "fp32", fitted)
        assert pred.predicted_time_s - pred.overhead_time_s == pytest.approx(s.time_s, rel=1e-3), s.label


def test_each_recurrent_benchmark_is_a_point_of_its_own_read_on_its_steps():
    # Three LSTMs (hidden 64, 256, 512 over 64 steps of inputs as wide) beside three Gemms at 80% of the 100 GFLOP/s
    # peak. Each LSTM's input projection (64 rows by its 4H x H weight: 2 * 64 * 4H * H FLOPs) runs as one product
    # at the gemm ceiling; its steps (the recurrent products, 2 * 4H * H FLOPs each) at 50%, 35% and 38%. Each
    # sample is one kernel's rate over its 64 steps: each gives a point at the work of one step, where three
    # kernels of any other class would merge into one median point.
    gemm = make_node("Gemm", [T((197, 256)), W((256, 256))], [T((197, 256))], transB=1)
    # by a weight under COLD_WEIGHTS and without C: none of its time is its weight's read or a pass over its output
    gemm_flops = 2 * 197 * 256 * 256
    gemm_cost = Cost(flops=gemm_flops, bytes_read=4 * 197 * 256 * 2, bytes_written=4 * 197 * 256, kernels=1)
    samples = [Sample(gemm, gemm_cost, gemm_flops / 100e9 / 0.8, f"gemm {i}") for i in range(3)]
    for hidden, efficiency in ((64, 0.5), (256, 0.35), (512, 0.38)):
        lstm = make_node(
            "LSTM",
            [T((64, 1, hidden)), W((1, 4 * hidden, hidden)), W((1, 4 * hidden, hidden)), W((1, 8 * hidden))],
            [T((64, 1, 1, hidden))],
            hidden_size=hidden,
        )
        projection, step = 2 * 64 * 4 * hidden * hidden, 2 * 4 * hidden * hidden
        cost = Cost(
            flops=projection + 64 * step, bytes_read=4 * 8 * hidden**2, bytes_written=4 * 64 * hidden, kernels=1
        )
        measured = projection / (100e9 * 0.8) + 64 * step / (100e9 * efficiency)
        samples.append(Sample(lstm, cost, measured, f"LSTM {hidden}"))
    out = ceilings.class_ceilings(samples, calibrated_host(), 1)
    steps = [2 * 4 * h * h for h in (64, 256, 512)]  # 32,768, 524,288 and 2,097,152 FLOPs a step
    assert out["lstm"].compute == tuple((float(f"{s:.4g}"), e) for s, e in zip(steps, (0.5, 0.35, 0.38)))
    assert "per time step, their input projection apart" in out["lstm"].source
    # The fitted device predicts each LSTM back at its measured time.
    fitted = replace(calibrated_host(), ceilings=FrozenMap(out))
    for s in samples[3:]:
        pred, note = engine.predict_engine(s.view, s.cost, "fp32", fitted)
        assert pred.compute_time_s == pytest.approx(s.time_s, rel=1e-3)
        assert note.terms["projection"] == pytest.approx(
            2 * 64 * s.view.input(1).shape[1] * s.view.input(1).shape[2] / 80e9
        )


def test_subnormal_costs_are_the_masked_blocks_extra_time_per_element():
    # The masked block's Softmax ran 400 us against 100 us unmasked over 18,816 underflowing elements: 15.9 ns
    # each; its product 2,000 us against 300 us over 602,112 multiply-adds on subnormal operands: 2.82 ns each.
    plain = {"softmax": [100e-6, 101e-6, 100e-6], "context": [300e-6] * 3, "mask": [50e-6] * 3}
    masked = {"softmax": [400e-6] * 3, "context": [2000e-6, 2100e-6, 2000e-6], "mask": [50e-6] * 3}
    underflow, product = ceilings.subnormal_costs(plain, masked, 18816, 602112, "test")
    # (the figures are kept to 3 significant digits)
    assert underflow is not None and underflow.value == pytest.approx(300e-6 / 18816, rel=5e-3)
    assert product is not None and product.value == pytest.approx(1700e-6 / 602112, rel=5e-3)
    assert "18816 elements whose exp underflows" in underflow.source
    # A CPU without a slow path times both alike (or the masked one faster): 0, not a negative time.
    same, faster = ceilings.subnormal_costs(plain, {"softmax": [99e-6], "context": [300e-6]}, 18816, 602112, "test")
    assert same is not None and same.value == 0.0 and faster is not None and faster.value == 0.0
    # A node the profile lacks gives no figure.
    assert ceilings.subnormal_costs(plain, {"context": [2e-3]}, 18816, 602112, "test")[0] is None


def test_a_measured_class_left_without_its_ceiling_is_named_with_what_predicts_it_instead():
    device = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})
    assert ceilings.unread_ceilings_warning({"conv", "elementwise"}, device) is None
    # The epilogue falls back to the elementwise ceiling (op_classes.CLASS_FALLBACK); softmax has no fallback.
    warning = ceilings.unread_ceilings_warning({"conv", "epilogue", "softmax"}, device)
    assert warning is not None
    assert warning.startswith("no ceiling read for epilogue, softmax: ")
    assert "epilogue uses the elementwise ceiling; softmax the peak and bandwidth" in warning


def test_efficiencies_over_100_percent_are_named_with_their_reason():
    device = replace(
        calibrated_host(),
        ceilings=FrozenMap(
            {
                "elementwise": Ceiling((), ((1e5, 0.9), (1.2e6, 1.33)), "test"),
                "qconv": Ceiling(((1e7, 0.6), (5e7, 1.04)), (), "test"),
                "conv": CONV,  # at most 0.9: not named
            }
        ),
    )
    assert ceilings.efficiencies_over_one(device) == (
        "efficiencies over 100%: memory for elementwise (133%): faster than the level their working set is counted "
        "in (one just past a level's size finds part of its data in the faster level; a level's bandwidth is its "
        "chain of Neg's); compute for qconv (104%): faster than the benchmarks their peak was read on; predictions "
        "read each kernel's own rate back"
    )
    assert ceilings.efficiencies_over_one(calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})) is None
