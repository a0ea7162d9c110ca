"""The reference kernel that tells whether a machine still runs at the speed it was calibrated at."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import onnx
import pytest

from onnxroof.ort.measure import MIN_SAMPLE_S
from onnxroof.ort.reference import (
    CHANNELS,
    DRIFT_BOUND,
    REFERENCE_INPUT,
    ReferenceSampler,
    drift_warning,
    reference_model,
)
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.ort.validate import validate
from tests.helpers import CONV, calibrated_host, record_parking


def test_the_reference_model_is_a_small_convolutional_block():
    """Dense, depthwise and pointwise convolutions, elementwise, pooling and a Gemm: what models spend time in."""
    model = reference_model()
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    groups = [next((a.i for a in n.attribute if a.name == "group"), 1) for n in model.graph.node if n.op_type == "Conv"]
    assert sorted(groups) == [1, 1, 1, CHANNELS]  # three dense convolutions and one depthwise
    assert {"Relu", "Add", "MaxPool", "GlobalAveragePool", "Gemm"} <= set(ops)
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == REFERENCE_INPUT


@pytest.mark.ort
def test_the_reference_time_is_the_fast_estimate_of_one_run():
    # A fake clock that advances 1 ms per read: a warm-up run (two reads around it) reads 1 ms, so samples batch
    # MIN_SAMPLE_S / 1 ms runs, and each batch reads 1 ms in all, i.e. 1 ms / batch per run.
    ticks = iter(range(10**6))
    sampler = ReferenceSampler(1, clock=lambda: next(ticks) * 1e-3)
    assert sampler.batch == math.ceil(MIN_SAMPLE_S / 1e-3) > 1
    assert sampler.time_s() is None and sampler.speed(1.0) is None  # nothing timed yet
    for _ in range(3):
        sampler.sample()
    assert len(sampler.samples) == 3
    per_run = 1e-3 / sampler.batch
    assert sampler.time_s() == pytest.approx(per_run)
    # Calibrated at 0.8 of today's time a run, the machine now runs at 0.8 of its calibrated speed.
    assert sampler.speed(0.8 * per_run) == pytest.approx(0.8)


@pytest.mark.ort
def test_the_reference_on_this_machine_reads_the_fastest_of_its_samples():
    sampler = ReferenceSampler(1)
    sampler.sample(reps=3)
    assert len(sampler.samples) == 3
    seconds = sampler.time_s()
    assert seconds == min(sampler.samples)  # three samples: the fastest eighth is the fastest one
    # As fast as at calibration: speed 1; calibrated at twice today's time: twice as fast now.
    assert sampler.speed(seconds) == 1.0 and sampler.speed(2 * seconds) == pytest.approx(2.0)


@pytest.mark.ort
def test_the_typical_run_is_the_median_of_the_quietest_stretch():
    # Nine samples in three stretches of three: medians 5, 2 (of 1, 2, 3) and 9; the quietest stretch's is 2, where
    # the median of all nine would be 5 (a slow phase would set it).
    sampler = ReferenceSampler(1)
    sampler.samples = [5.0, 4.0, 6.0, 1.0, 3.0, 2.0, 9.0, 9.0, 9.0]
    assert sampler.typical_s() == 2.0
    assert sampler.typical_s(stretches=1) == 5.0  # one stretch: the median of every sample
    # Four samples in three stretches: ceil(4 / 3) = 2 a stretch, medians 1.5 and 5.5
    sampler.samples = [1.0, 2.0, 5.0, 6.0]
    assert sampler.typical_s() == 1.5


def test_drift_is_reported_beyond_the_bound_only():
    assert drift_warning(1.0, 1) is None
    assert drift_warning(1.0 - DRIFT_BOUND / 2, 1) is None
    slower = drift_warning(0.6, 2)
    assert slower is not None and "40% slower" in slower and "--threads 2" in slower
    faster = drift_warning(1.25, 1)
    assert faster is not None and "25% faster" in faster


@pytest.mark.ort
def test_validate_reports_the_machine_speed_against_the_calibration(conv_bn_relu: Path, tmp_path: Path):
    path = conv_bn_relu
    # A reference time no machine reaches: this one is far slower than "calibrated", and validate says so.
    device = calibrated_host({"conv": CONV})
    device = replace(device, calibration=replace(device.calibration, reference_time_s=1e-9))
    v = validate(str(path), device, repeat=3, runs=3, spread_s=0.0)
    assert v.machine_speed is not None and 0 < v.machine_speed < 0.01
    assert any("slower than when it was calibrated" in w for w in v.warnings)
    assert v.to_dict()["validation"]["machine_speed"] == v.machine_speed
    # Without a reference reading there is nothing to compare.
    assert validate(str(path), calibrated_host({"conv": CONV}), repeat=3, runs=3, spread_s=0.0).machine_speed is None


@pytest.mark.ort
def test_the_reference_is_timed_between_the_samples_of_the_measurement(conv_bn_relu: Path, tmp_path: Path, monkeypatch):
    """Timed in the same moments as the model, the reference reads the machine's phase the model ran in."""
    path = conv_bn_relu
    device = calibrated_host({"conv": CONV})
    device = replace(device, calibration=replace(device.calibration, reference_time_s=1.0))
    calls: list[int] = []
    original = ReferenceSampler.sample
    monkeypatch.setattr(ReferenceSampler, "sample", lambda self: (calls.append(1), original(self))[1])
    v = validate(str(path), device, repeat=4, runs=3, spread_s=0.0)
    assert len(calls) == v.measurement.repeat == 4


@pytest.mark.ort
def test_the_reference_session_is_parked_between_runs_like_the_calibrations(monkeypatch) -> None:
    """Both readings of the reference block must be taken alike; the calibration's sessions park when a run
    returns (see sessions.session_options), so validation's does too."""
    seen = record_parking(monkeypatch)
    ReferenceSampler(1)
    assert seen == [True]


@pytest.mark.ort
def test_the_prediction_compared_with_the_measurement_is_scaled_to_the_machine_speed(
    conv_bn_relu: Path, tmp_path: Path
):
    """The block's time moves with models' times between a shared machine's phases, so the prediction the
    measurement is compared with is the calibrated one over the speed (1/speed times the calibrated time)."""
    from onnxroof.ort.validate import compare, profiler_overhead
    from onnxroof.report.validation import validation_table

    path = conv_bn_relu
    device = calibrated_host({"conv": CONV})
    device = replace(device, calibration=replace(device.calibration, reference_time_s=1e-4))
    v = validate(str(path), device, repeat=3, runs=3, spread_s=0.0)
    speed = v.machine_speed
    assert speed is not None and speed != 1.0
    assert v.predicted_at_speed_s == pytest.approx(v.predicted_time_s / speed)
    assert v.model_error == pytest.approx(v.predicted_time_s / speed / v.measured_time_s - 1)
    assert v.uncorrected_error == pytest.approx(v.predicted_time_s / v.measured_time_s - 1)
    totals = v.to_dict()["totals"]
    assert totals["predicted_at_speed_s"] == v.predicted_at_speed_s and totals["error"] == v.model_error
    assert totals["predicted_time_s"] == v.predicted_time_s and totals["uncorrected_error"] == v.uncorrected_error
    # Each kernel's prediction is scaled alike.
    overhead = profiler_overhead(device)
    as_calibrated = {k.name: k.predicted_time_s for k in compare(v.analysis, v.profile, True, overhead)}
    assert as_calibrated and all(k.predicted_time_s == pytest.approx(as_calibrated[k.name] / speed) for k in v.kernels)
    assert "predictions are scaled to that speed" in validation_table(v)


@pytest.mark.ort
def test_without_a_reference_reading_the_prediction_is_the_calibrated_one(conv_bn_relu: Path, tmp_path: Path):
    v = validate(str(conv_bn_relu), calibrated_host({"conv": CONV}), repeat=3, runs=3, spread_s=0.0)
    assert v.machine_speed is None
    assert v.predicted_at_speed_s == v.predicted_time_s and v.model_error == v.uncorrected_error


def test_the_calibration_summary_shows_the_reference_time():
    from onnxroof.report.calibration import calibration_table

    device = calibrated_host({"conv": CONV})
    assert "reference block" not in calibration_table(device)  # no reading, no line
    device = replace(device, calibration=replace(device.calibration, reference_time_s=1.9e-3))
    assert "reference block: 1.90 ms a run" in calibration_table(device)


@pytest.mark.ort
def test_the_timed_model_parks_its_threads_when_the_reference_runs_between_its_samples(
    conv_bn_relu: Path, tmp_path: Path, monkeypatch
):
    """Two sessions taking turns: a model's pool that kept spinning after its run would take the cores the
    reference is timed on, and read the machine as slower than it is."""
    from onnxroof.ort.measure import measure

    path = str(conv_bn_relu)
    seen = record_parking(monkeypatch)
    measure(path, SessionSpec(threads=2), repeat=3, warmup=1, between=lambda: None)
    measure(path, SessionSpec(threads=2), repeat=3, warmup=1)
    assert seen == [True, False]
