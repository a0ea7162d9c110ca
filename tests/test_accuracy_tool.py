"""The accuracy benchmark's reading of a model's rounds (tools/accuracy.py is a script, loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

_PATH = Path(__file__).resolve().parent.parent / "tools" / "accuracy.py"
_spec = importlib.util.spec_from_file_location("onnxroof_accuracy_tool", _PATH)
accuracy = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = accuracy  # its dataclasses look their module up there
_spec.loader.exec_module(accuracy)


def _row() -> object:
    # Three rounds of eight samples: each round's fast estimate is its fastest eighth, one sample (its minimum):
    # 10, 12 and 11 ms. The measured latency is their median, 11 ms.
    rounds = [
        [0.010, 0.013, 0.015, 0.020, 0.011, 0.014, 0.016, 0.018],
        [0.012, 0.019, 0.013, 0.017, 0.015, 0.016, 0.014, 0.018],
        [0.011, 0.012, 0.030, 0.013, 0.014, 0.015, 0.016, 0.017],
    ]
    validation = SimpleNamespace(
        predicted_time_s=0.0099, machine_speed=0.95, agreement=SimpleNamespace(to_dict=lambda: {"count": 3})
    )
    # The machine ran at 0.9, 1.0 and 1.2 of its calibrated speed in the three rounds.
    return accuracy.Row("zoo:test", "zoo:test", validation, None, rounds, [0.9, 1.0, 1.2])


def test_a_model_is_read_as_the_median_of_its_rounds_fast_estimates():
    row = _row()
    assert row.round_estimates == pytest.approx([0.010, 0.012, 0.011])
    assert row.measured_s == pytest.approx(0.011)
    assert len(row.samples) == 24


def test_each_round_is_read_at_the_calibrated_speed_through_its_reference_reading():
    # Fast estimates 10, 12, 11 ms at speeds 0.9, 1.0, 1.2: at the calibrated speed 9, 12, 13.2 ms, median 12 ms,
    # and that is what the prediction is compared with.
    row = _row()
    assert row.at_calibrated_speed_s == pytest.approx(0.012)
    assert row.compared_s == pytest.approx(0.012)
    # The rounds' medians: (14 + 15) / 2 = 14.5, (15 + 16) / 2 = 15.5 and (14 + 15) / 2 = 14.5 ms; at the
    # calibrated speed 13.05, 15.5 and 17.4 ms, median 15.5 ms.
    assert row.compared_median_s == pytest.approx(0.0155)
    # A round without a reading (an uncalibrated device) leaves nothing to read at the calibrated speed: the
    # prediction is compared with the measurement as it is, and with the plain median of all 24 samples
    # (the 12th and 13th smallest are both 15 ms).
    row.speeds[1] = None
    assert row.at_calibrated_speed_s is None
    assert row.compared_s == pytest.approx(0.011)
    assert row.compared_median_s == pytest.approx(0.015)


def test_the_json_row_carries_measured_latency_and_error():
    out = accuracy.row_dict(_row())
    assert out["model"] == "zoo:test"
    assert out["measured_time_s"] == pytest.approx(0.011)
    assert out["predicted_time_s"] == 0.0099 and out["machine_speed"] == 0.95
    # The error is taken at the calibrated speed: 9.9 ms against 12 ms, (9.9 - 12) / 12 = -17.5%;
    # uncorrected, 9.9 ms against 11 ms measured: (9.9 - 11) / 11 = -10%.
    assert out["measured_at_calibrated_speed_s"] == pytest.approx(0.012)
    assert out["error"] == pytest.approx(-0.175)
    assert out["uncorrected_error"] == pytest.approx(-0.10)
    assert out["round_speeds"] == [0.9, 1.0, 1.2]
    assert len(out["rounds_samples_s"]) == 3
