"""Engine-aware analysis and validation against onnxruntime, on tiny models with a hand-made calibrated host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnxroof.api import analyze
from onnxroof.ort.validate import compare, validate
from tests.helpers import CONV, calibrated_host


@pytest.mark.ort
def test_a_calibrated_host_predicts_the_graph_onnxruntime_runs(conv_bn_relu: Path, tmp_path: Path):
    device = calibrated_host({"conv": CONV})
    path = conv_bn_relu
    engine = analyze(str(path), device)
    exported = analyze(str(path), device, as_exported=True)
    assert engine.graph == "onnxruntime-optimized" and exported.graph == "as-exported"
    assert [n.op_type for n in exported.nodes] == ["Conv", "BatchNormalization", "Relu"]
    convs = [n for n in engine.nodes if n.op_type in ("Conv", "FusedConv")]
    assert len(convs) == 1 and "BatchNormalization" not in {n.op_type for n in engine.nodes}
    # One kernel does the conv's MACs: C_out*H*W*C_in*k*k = 16*16*16*8*3*3 = 294912.
    assert convs[0].cost.macs == 16 * 16 * 16 * 8 * 3 * 3
    # Its prediction went through the calibrated conv ceiling and is explained in the JSON.
    node = next(n for n in engine.to_dict()["nodes"] if n["name"] == convs[0].name)
    assert node["engine"]["ceiling"] == "conv" and "of peak" in node["engine"]["explanation"]
    # The run overhead is paid once per model, on top of the nodes' times.
    assert engine.totals.predicted_time_s == pytest.approx(
        sum(n.prediction.predicted_time_s for n in engine.nodes) + 5e-6
    )
    assert exported.totals.predicted_time_s == pytest.approx(sum(n.prediction.predicted_time_s for n in exported.nodes))


@pytest.mark.ort
def test_validate_pairs_every_kernel_and_adds_measured_times(conv_bn_relu: Path, tmp_path: Path):
    path = conv_bn_relu
    v = validate(str(path), calibrated_host({"conv": CONV}), repeat=5, runs=5, spread_s=0.0)
    # Each kernel pairs its profiled fast estimate with the prediction of the engine node of its name: the test
    # host records no profiler overhead and no reference time, so nothing is added and nothing scaled.
    fast = {n.name: n.fast_s for n in v.profile.nodes}
    predicted = {n.name: n.prediction.predicted_time_s for n in v.analysis.nodes}
    assert v.kernels and {k.name for k in v.kernels} <= set(predicted)
    assert all(k.measured_time_s == fast[k.name] for k in v.kernels)
    assert all(k.predicted_time_s == pytest.approx(predicted[k.name]) for k in v.kernels)
    # Longest measured first.
    measured = [k.measured_time_s for k in v.kernels]
    assert measured == sorted(measured, reverse=True)
    data = v.to_dict()
    # The measured latency is the median of the samples, as a timing loop reports it (5 samples: the third
    # smallest); the fast estimate is kept next to it (5 samples: the fastest).
    assert data["totals"]["measured_time_s"] == v.measurement.median_s == sorted(v.measurement.samples_s)[2]
    assert data["totals"]["measured_fast_s"] == v.measurement.fast_s == min(v.measurement.samples_s)
    assert all("measured_time_s" in n for n in data["nodes"])
    assert data["totals"]["error"] == pytest.approx((v.predicted_time_s - v.measured_time_s) / v.measured_time_s)
    # As exported, the fused kernel is predicted as the sum of the three exported nodes it computes.
    exported = analyze(str(path), calibrated_host({"conv": CONV}), as_exported=True)
    rows = compare(exported, v.profile, engine_graph=False)
    fused = next(r for r in rows if set(r.covers) == {"conv", "bn", "relu"})
    assert fused.predicted_time_s == pytest.approx(sum(n.prediction.predicted_time_s for n in exported.nodes))


@pytest.mark.ort
def test_validate_cli_json_with_a_device_file(conv_bn_relu: Path, cli, tmp_path: Path):
    path = conv_bn_relu
    device_file = tmp_path / "host.toml"
    device_file.write_text(calibrated_host({"conv": CONV}).to_toml())
    out = tmp_path / "v.json"
    result = cli(
        "validate",
        str(path),
        "--device",
        str(device_file),
        "--repeat",
        "3",
        "--runs",
        "3",
        "--spread",
        "0.3",
        "--format",
        "json",
        "-o",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["graph"] == "onnxruntime-optimized" and data["validation"]["kernels"]
    assert data["totals"]["measured_fast_s"] == data["measurement"]["fast_s"] <= data["totals"]["measured_time_s"]
    table = cli("validate", str(path), "--device", str(device_file), "--repeat", "3", "--runs", "3", "--spread", "0")
    assert table.returncode == 0 and "kernels:" in table.stdout and "predicted" in table.stdout


def test_shape_only_kernels_are_shown_but_not_scored():
    from onnxroof.ort.validate import KernelComparison, scored

    reshape = KernelComparison("r", "Reshape", ("r",), 3e-7, 8e-6, 0, 0, "overhead", "", shape_only=True)
    conv = KernelComparison("c", "Conv", ("c",), 1e-3, 1.1e-3, 1e6, 1e4, "compute", "")
    reorder = KernelComparison("o", "nchwc::ReorderOutput", (), 0.0, 2e-5, 0, 1e4, "none", "", engine_only=True)
    assert scored([reshape, conv, reorder], engine_graph=True) == [conv, reorder]
    assert scored([reshape, conv, reorder], engine_graph=False) == [conv]
