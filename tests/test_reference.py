"""The reference kernel that tells whether a machine still runs at the speed it was calibrated at."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnx
import pytest

from onnxroof.measure import MIN_SAMPLE_S
from onnxroof.reference import DRIFT_BOUND, REFERENCE_N, ReferenceSampler, drift_warning, reference_model
from onnxroof.validate import validate
from tests.helpers import record_parking
from tests.test_engine import CONV, host
from tests.test_validate import conv_bn_relu


def test_the_reference_model_is_one_square_matmul():
    model = reference_model()
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["MatMul"]
    assert list(model.graph.initializer[0].dims) == [REFERENCE_N, REFERENCE_N]


def test_the_reference_rate_counts_2_n_cubed_flops_per_run():
    # The rate is 2 n^3 FLOPs over the fast estimate of one run's time. A fake clock that advances 1 ms per read:
    # a warm-up run reads 1 ms, so samples batch MIN_SAMPLE_S / 1 ms = 10 runs, and each batch (two clock reads
    # around it) reads 1 ms, i.e. 0.1 ms per run: the rate is 2 n^3 / 1e-4.
    assert MIN_SAMPLE_S == 0.01
    ticks = iter(range(10**6))
    sampler = ReferenceSampler(1, clock=lambda: next(ticks) * 1e-3)
    assert sampler.batch == 10 and sampler.flops_s() is None  # nothing timed yet
    for _ in range(3):
        sampler.sample()
    assert len(sampler.samples) == 3
    assert sampler.flops_s() == pytest.approx(2 * REFERENCE_N**3 / 1e-4)


def test_the_reference_rate_on_this_machine_is_positive():
    sampler = ReferenceSampler(1)
    sampler.sample()
    rate = sampler.flops_s()
    assert rate is not None and rate > 0


def test_drift_is_reported_beyond_the_bound_only():
    assert drift_warning(1.0, 1) is None
    assert drift_warning(1.0 - DRIFT_BOUND / 2, 1) is None
    slower = drift_warning(0.6, 2)
    assert slower is not None and "40% slower" in slower and "--threads 2" in slower
    faster = drift_warning(1.25, 1)
    assert faster is not None and "25% faster" in faster


def test_validate_reports_the_machine_speed_against_the_calibration(tmp_path: Path):
    path = conv_bn_relu(tmp_path)
    # A reference rate no machine reaches: this one is far slower than "calibrated", and validate says so.
    device = host({"conv": CONV})
    device = replace(device, calibration=replace(device.calibration, reference_flops_s=1e18))
    v = validate(str(path), device, repeat=3, runs=3, spread_s=0.0)
    assert v.machine_speed is not None and 0 < v.machine_speed < 0.01
    assert any("slower than when it was calibrated" in w for w in v.warnings)
    assert v.to_dict()["validation"]["machine_speed"] == v.machine_speed
    # Without a reference reading there is nothing to compare.
    assert validate(str(path), host({"conv": CONV}), repeat=3, runs=3, spread_s=0.0).machine_speed is None


def test_the_reference_is_timed_between_the_samples_of_the_measurement(tmp_path: Path, monkeypatch):
    """Timed in the same moments as the model, the reference reads the machine's phase the model ran in."""
    path = conv_bn_relu(tmp_path)
    device = host({"conv": CONV})
    device = replace(device, calibration=replace(device.calibration, reference_flops_s=1e9))
    calls: list[int] = []
    original = ReferenceSampler.sample
    monkeypatch.setattr(ReferenceSampler, "sample", lambda self: (calls.append(1), original(self))[1])
    v = validate(str(path), device, repeat=4, runs=3, spread_s=0.0)
    assert len(calls) == v.measurement.repeat == 4


def test_the_reference_session_is_parked_between_runs_like_the_calibrations(monkeypatch) -> None:
    """Both readings of the reference MatMul must be taken alike; the calibration's sessions park when a run
    returns (see runtime.session_options), so validation's does too."""
    seen = record_parking(monkeypatch)
    ReferenceSampler(1)
    assert seen == [True]
