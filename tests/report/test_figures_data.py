"""The numbers behind each figure: roofs, ridge points, point coordinates, isocurves, balances, bars, trajectories,
each derived by hand from the device's datasheet numbers and the model's shapes (tests/report/figure_models.py)."""

from __future__ import annotations

import math

import pytest

from onnxroof.api import analyze
from onnxroof.report.figures.bar_data import layers_data
from onnxroof.report.figures.plane_data import ACHIEVABLE, DRAM, complexity_data, roofline_data, roofs_of, time_data
from onnxroof.report.figures.sweep_data import sweep_data
from onnxroof.whatif.sweep import Sweep, SweepRow
from tests.helpers import CONV, calibrated_host
from tests.report.figure_models import (
    MATMUL_BYTES,
    MATMUL_FLOPS,
    RELU_BYTES,
    RELU_FLOPS,
    V100_BANDWIDTH,
    V100_LAUNCH,
    V100_PEAK,
    matmul_relu_reshape,
)


@pytest.fixture(scope="module")
def v100():
    return analyze(matmul_relu_reshape(), "v100-sxm2")


@pytest.fixture(scope="module")
def t4():
    return analyze(matmul_relu_reshape(), "t4")


def test_the_roofline_holds_the_devices_roofs_with_their_ridge_points(v100):
    data = roofline_data([v100])
    fp32 = next(r for r in data.roofs if r.precision == "fp32" and r.level == DRAM)
    assert fp32.peak_flops_s == V100_PEAK and fp32.bandwidth_bytes_s == V100_BANDWIDTH and fp32.primary
    assert fp32.ridge_point == pytest.approx(15.7e12 / 900e9)  # 17.44 FLOP/B
    assert fp32.ridge_point == pytest.approx(17.444, abs=1e-3)
    # one device: a roof per precision it lists (V100: fp64 7.8, fp32 15.7, fp16 125 TFLOP/s ...), fp32 solid
    precisions = {r.precision for r in data.roofs}
    assert {"fp64", "fp32", "fp16"} <= precisions
    assert [r.precision for r in data.roofs if r.primary and r.level == DRAM] == ["fp32"]
    assert [r.level for r in data.roofs if r.primary and r.level != DRAM] == [ACHIEVABLE]  # published figures'
    assert data.title == "Roofline of mm on v100-sxm2 (fp32)"


def test_a_layer_sits_at_its_intensity_and_its_flops_over_its_predicted_time(v100):
    data = roofline_data([v100])
    matmul = next(p for p in data.points if p.layer == "matmul")
    assert matmul.op_type == "MatMul" and not matmul.measured
    assert matmul.x == pytest.approx(MATMUL_FLOPS / MATMUL_BYTES)  # 18.29 FLOP/B
    # compute 4.19e6 / 15.7e12 = 0.267 us, memory 229_376 / 900e9 = 0.255 us, one launch 4.2 us: the launch bounds
    # it, so the point sits at 4_194_304 FLOPs / 4.2 us = 0.999 TFLOP/s, far under the roof
    assert matmul.y == pytest.approx(MATMUL_FLOPS / V100_LAUNCH)
    assert matmul.bound == "overhead"
    # matmul and relu take one launch each (4.2 us), reshape nothing: half the time each
    assert matmul.share == pytest.approx(0.5)
    relu = next(p for p in data.points if p.layer == "relu")
    assert relu.x == pytest.approx(RELU_FLOPS / RELU_BYTES)
    assert relu.share == pytest.approx(0.5)


def test_a_layer_of_no_flops_is_kept_on_the_floor_not_dropped(v100):
    data = roofline_data([v100])
    reshape = next(p for p in data.points if p.layer == "reshape")
    assert reshape.on_floor and reshape.flops == 0
    assert data.floor[0] < data.x_limits[0] * 2 and data.floor[1] < data.y_limits[0] * 2
    assert data.floor[0] > data.x_limits[0] and data.floor[1] > data.y_limits[0]  # inside the axes


def test_the_model_point_accumulates_flops_over_bytes_and_time(v100):
    (model,) = roofline_data([v100]).models
    flops, moved = MATMUL_FLOPS + RELU_FLOPS, MATMUL_BYTES + RELU_BYTES
    assert model.x == pytest.approx(flops / moved)
    assert model.time_s == pytest.approx(2 * V100_LAUNCH)  # two launches, reshape none
    assert model.y == pytest.approx(flops / (2 * V100_LAUNCH))


def test_several_devices_share_one_roofline_each_at_its_precision(v100, t4):
    data = roofline_data([v100, t4])
    assert {(r.device, r.precision) for r in data.roofs} == {("v100-sxm2", "fp32"), ("t4", "fp32")}
    t4_roof = next(r for r in data.roofs if r.device == "t4")
    # T4: 8.1 TFLOP/s fp32 over 320 GB/s (its datasheet) -> ridge 25.3 FLOP/B
    assert t4_roof.ridge_point == pytest.approx(8.1e12 / 320e9)
    assert {p.device for p in data.points} == {"v100-sxm2", "t4"}
    assert [m.device for m in data.models] == ["v100-sxm2", "t4"]
    assert data.x_limits[0] <= RELU_FLOPS / RELU_BYTES and data.x_limits[1] >= 25.3


def test_a_calibrated_host_has_a_roof_per_cache_level_with_a_bandwidth():
    roofs = roofs_of(calibrated_host(), "fp32")
    # 100 GFLOP/s under DRAM 10 GB/s (ridge 10), L1 100 GB/s (ridge 1), L2 50 GB/s (ridge 2); L3 has no bandwidth
    assert {(r.level, r.ridge_point) for r in roofs} == {(DRAM, 10.0), ("L1d", 1.0), ("L2", 2.0)}


def test_a_gpu_has_an_achievable_roof_beside_its_datasheet_one_at_its_engines_product_precision():
    from onnxroof.devices import load_device
    from onnxroof.devices.engines import with_engine
    from onnxroof.predict import gpu_times

    device = with_engine(load_device("a100-sxm4-80gb"), "tensorrt")
    gpu = device.gpu
    assert gpu is not None and gpu.dram_achievable is not None
    (roof,) = [r for r in roofs_of(device, "fp32") if r.level == ACHIEVABLE]
    # TensorRT computes fp32 products in TF32 on an A100: the TF32 product rate (no published one: the datasheet's
    # 156 TFLOP/s at the sustained clock) under the published DRAM bandwidth, not the datasheet's 2.04 TB/s
    assert roof.precision == "tf32"
    assert roof.peak_flops_s == gpu_times.achievable_rate(device, "tf32")
    assert roof.bandwidth_bytes_s == gpu.dram_achievable.value != device.memory_bandwidth.value
    assert not [r for r in roofs_of(load_device("grace-cpu"), "fp32") if r.level == ACHIEVABLE]


def test_the_time_plane_puts_a_layer_at_its_memory_and_compute_times(v100):
    data = time_data([v100])
    matmul = next(p for p in data.points if p.layer == "matmul")
    assert matmul.x == pytest.approx(MATMUL_BYTES / V100_BANDWIDTH)  # 0.255 us
    assert matmul.y == pytest.approx(MATMUL_FLOPS / V100_PEAK)  # 0.267 us
    assert data.overhead_boxes == (("v100-sxm2", V100_LAUNCH),)
    # launches overlap on a GPU: a layer of time T has max(compute, memory, launch) = T, the L's corner at (T, T)
    assert data.isocurves and all(c.corner_s == c.time_s for c in data.isocurves)
    times = [c.time_s for c in data.isocurves]
    assert all(math.isclose(math.log10(t), round(math.log10(t))) for t in times)  # one per decade
    assert data.x_limits[0] < min(times) and max(times) <= data.x_limits[1]


def test_serial_dispatch_moves_the_isocurves_corner_by_the_launch_overhead(tmp_path):
    host = calibrated_host()
    analysis = analyze(matmul_relu_reshape(), host, as_exported=True)
    data = time_data([analysis])
    # the test host dispatches serially: time = max(compute, memory) + 1 us, so the corner of time T is T - 1 us
    assert data.isocurves and all(c.corner_s == pytest.approx(c.time_s - 1e-6) for c in data.isocurves)
    assert all(c.time_s > 1e-6 for c in data.isocurves)


def test_the_complexity_plane_puts_layers_at_bytes_and_flops_under_the_machine_balance(v100, t4):
    data = complexity_data([v100, t4])
    matmul = next(p for p in data.points if p.layer == "matmul")
    assert (matmul.x, matmul.y) == (MATMUL_BYTES, MATMUL_FLOPS)
    assert {p.device for p in data.points} == {"v100-sxm2"}  # costs are the device's own: drawn once
    balances = {b.device: b.balance for b in data.balances}
    assert balances == pytest.approx({"v100-sxm2": 15.7e12 / 900e9, "t4": 8.1e12 / 320e9})


def test_the_layers_figure_holds_each_layers_intensity_ridges_and_op_type_totals(v100, t4):
    data = layers_data([v100, t4])
    assert [b.layer for b in data.bars] == ["matmul", "relu", "reshape"]
    assert data.bars[0].intensity == pytest.approx(MATMUL_FLOPS / MATMUL_BYTES)
    assert data.bars[2].intensity == 0.0
    assert [(r.device, round(r.ridge_point, 3)) for r in data.ridges] == [
        ("v100-sxm2", round(15.7e12 / 900e9, 3)),
        ("t4", round(8.1e12 / 320e9, 3)),
    ]
    matmul = next(s for s in data.op_types if s.op_type == "MatMul")
    assert (matmul.flops, matmul.bytes, matmul.count) == (MATMUL_FLOPS, MATMUL_BYTES, 1)
    # one launch each on both devices: V100 4.2 us; T4's datasheet launch overhead is the catalog's own number
    assert matmul.time_s[0] == pytest.approx(V100_LAUNCH)
    assert matmul.time_s[1] == pytest.approx(t4.device.launch_overhead.value)
    assert data.op_types[-1].op_type == "Reshape"  # ordered by predicted time, the free reshape last


def _row(batch: int, precision: str, device: str, flops: float, moved: float, time_s: float) -> SweepRow:
    return SweepRow(
        batch, "224x224", precision, "what-if", device, "as-exported", time_s, flops, moved, flops / moved, "compute"
    )


def test_a_sweep_becomes_trajectories_along_its_varied_axis_under_its_devices_roofs():
    from onnxroof.devices.resolve import resolve_device

    rows = (
        _row(8, "fp32", "v100-sxm2", 8e9, 4e8, 1e-3),
        _row(1, "fp32", "v100-sxm2", 1e9, 1e8, 2e-4),
        _row(1, "fp16", "v100-sxm2", 1e9, 5e7, 1e-4),
        _row(8, "fp16", "v100-sxm2", 8e9, 2e8, 4e-4),
    )
    data = sweep_data(Sweep("net", rows), [resolve_device("v100-sxm2")])
    assert data.axis == "batch"
    by_precision = {t.precision: t for t in data.trajectories}
    fp32 = by_precision["fp32"]
    assert [p.label for p in fp32.points] == ["1", "8"]  # ordered by batch, whatever the rows' order
    # batch 1: intensity 1e9 / 1e8 = 10 FLOP/B, 1e9 FLOPs in 0.2 ms = 5 TFLOP/s
    assert (fp32.points[0].x, fp32.points[0].y) == pytest.approx((10.0, 5e12))
    assert (by_precision["fp16"].points[1].x, by_precision["fp16"].points[1].y) == pytest.approx((40.0, 2e13))
    roofs = {r.precision: r for r in data.roofs}
    assert set(roofs) == {"fp32", "fp16"}
    assert roofs["fp32"].ridge_point == pytest.approx(15.7e12 / 900e9)
    assert roofs["fp16"].ridge_point == pytest.approx(125e12 / 900e9)  # V100's tensor cores: 125 TFLOP/s fp16


@pytest.mark.ort
def test_op_types_of_an_engine_graph_are_matched_without_their_domain(conv_bn_relu, v100):
    """On a calibrated host the engine's graph is analyzed: one NCHWc Conv carrying the BatchNormalization and Relu
    fused into it, plus layout reorders. Its Conv time is listed as Conv's, and the fused ops get none."""
    host = analyze(str(conv_bn_relu), calibrated_host({"conv": CONV}))
    exported = analyze(str(conv_bn_relu), "v100-sxm2")
    data = layers_data([exported, host])
    shares = {s.op_type: s for s in data.op_types}
    assert {"Conv", "BatchNormalization", "Relu"} <= set(shares)
    host_conv = sum(o.predicted_time_s for o in host.by_op_type if o.op_type.endswith("::Conv") or o.op_type == "Conv")
    assert host_conv > 0 and shares["Conv"].time_s[1] == pytest.approx(host_conv)
    assert shares["BatchNormalization"].time_s[1] == 0.0 and shares["BatchNormalization"].time_s[0] > 0
    # every op type of either graph is listed: each analysis' times add up to its own total
    for index, analysis in enumerate((exported, host)):
        assert sum(s.time_s[index] for s in data.op_types) == pytest.approx(
            sum(o.predicted_time_s for o in analysis.by_op_type)
        )


@pytest.mark.ort
def test_a_validation_brings_its_own_analysis_and_each_kernels_measured_point(conv_bn_relu):
    """The validation's analysis joins the figure even when not passed among the analyses; each kernel has its
    predicted point (FLOPs / predicted time) and its measured one (FLOPs / measured time) at its intensity."""
    from onnxroof.ort.validate import validate

    validation = validate(str(conv_bn_relu), calibrated_host({"conv": CONV}), repeat=3, runs=3, spread_s=0.0)
    data = roofline_data([analyze(str(conv_bn_relu), "v100-sxm2")], validation)
    assert {r.device for r in data.roofs} == {"v100-sxm2", "test-host"}
    host = [p for p in data.points if p.device == "test-host"]
    assert len(host) == 2 * len(validation.kernels)
    for kernel in validation.kernels:
        predicted, measured = (
            next(p for p in host if p.layer == kernel.name and p.measured is flag) for flag in (False, True)
        )
        assert predicted.x == measured.x == pytest.approx(kernel.arithmetic_intensity)
        if kernel.flops:
            assert predicted.y == pytest.approx(kernel.flops / kernel.predicted_time_s)
            assert measured.y == pytest.approx(kernel.flops / kernel.measured_time_s)
    assert [m.device for m in data.models] == ["v100-sxm2", "test-host"]


def test_the_complexity_plane_boxes_what_a_launch_overhead_dominates(v100):
    (box,) = complexity_data([v100]).launch_boxes
    # in 4.2 us V100 moves 900e9 * 4.2e-6 = 3.78 MB and computes 15.7e12 * 4.2e-6 = 65.9 MFLOP (fp32)
    assert box == ("v100-sxm2", pytest.approx(3.78e6), pytest.approx(6.594e7))
    # the matmul (4.19 MFLOP, 229 kB) sits inside it: overhead-bound, as its prediction says
    assert box[1] > MATMUL_BYTES and box[2] > MATMUL_FLOPS
