"""The calibration-spread benchmark's summaries (tools/calibration_spread.py is a script, loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "tools" / "calibration_spread.py"
_spec = importlib.util.spec_from_file_location("onnxroof_calibration_spread_tool", _PATH)
spread_tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = spread_tool  # its dataclasses look their module up there
_spec.loader.exec_module(spread_tool)

# Three models predicted on two calibrations (seconds); the second calibration reads 10% slower on every model.
PREDICTED = {"a": [0.010, 0.011], "b": [0.020, 0.022], "c": [0.100, 0.110]}


def test_a_models_spread_is_its_predictions_range_over_the_lowest():
    # (12 - 10) / 10 = 20%
    assert spread_tool.spread([0.010, 0.012, 0.011]) == pytest.approx(0.20)


def test_the_set_shift_is_the_median_ratio_between_two_calibrations():
    # every model x1.1 on the second calibration; x1 against itself
    assert spread_tool.set_shift(PREDICTED, 0, 1) == pytest.approx(1.1)
    assert spread_tool.set_shift(PREDICTED, 0, 0) == pytest.approx(1.0)


def test_each_calibration_is_scored_against_the_measured_models_only():
    # Measured: a 10.2 ms, b 25 ms (c unmeasured). Calibration 1: a 10 / 10.2 - 1 = -1.96% (within 10%), b 20 / 25
    # - 1 = -20%: one within, the median their mean. Calibration 2: a 11 / 10.2 - 1 = +7.84% (within), b 22 / 25 - 1
    # = -12%: one within.
    lines = spread_tool.profile_lines(PREDICTED, {"a": 0.0102, "b": 0.025}, [1.05, 1.11])
    assert [(line.factor, line.models, line.within) for line in lines] == [(1.05, 2, 1), (1.11, 2, 1)]
    assert lines[0].median_error == pytest.approx((10 / 10.2 - 1 - 0.20) / 2)
    assert lines[1].median_error == pytest.approx((11 / 10.2 - 1 - 0.12) / 2)


def test_without_measurements_a_calibration_has_no_error():
    lines = spread_tool.profile_lines(PREDICTED, {}, [None, 1.2])
    assert [(line.models, line.within, line.median_error) for line in lines] == [(0, None, None), (0, None, None)]
