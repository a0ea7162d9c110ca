"""The decoder accuracy benchmark's verdicts and its run on a tiny decoder (tools/llm_accuracy.py is a script,
loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

_PATH = Path(__file__).resolve().parent.parent / "tools" / "llm_accuracy.py"
_spec = importlib.util.spec_from_file_location("onnxroof_llm_accuracy_tool", _PATH)
tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = tool  # its dataclasses look their module up there
_spec.loader.exec_module(tool)


def _case(phase: str, predicted: float, measured: float):
    return tool.Case("m", 1, phase, 128, predicted, measured, 0.0, 0, 0)


def test_decode_within_ten_percent_and_prefill_within_fifteen():
    # 1.09 / 1 - 1 = +9% and 0.91 / 1 - 1 = -9% are within the decode target; +11% is not
    assert _case("decode", 1.09, 1.0).within and _case("decode", 0.91, 1.0).within
    assert not _case("decode", 1.11, 1.0).within
    # +14% is within the prefill target, -16% is not
    assert _case("prefill", 1.14, 1.0).within and not _case("prefill", 0.84, 1.0).within
    assert _case("decode", 1.5, 1.0).error == pytest.approx(0.5)


@pytest.mark.ort
def test_a_case_measures_the_step_it_predicts(monkeypatch):
    from tests.helpers import calibrated_host

    monkeypatch.setattr("onnxroof.api.get_device", lambda *a, **k: calibrated_host())
    args = SimpleNamespace(repeat=3, rounds=1)
    case = tool._case("tiny-decoder-int4", 1, "decode", 16, args)
    # tiny-decoder: 2 layers x (K and V) x 2 KV heads x 16 = 128 fp32 elements a cached token: 16 x 128 x 4 bytes
    assert case.kv_predicted == case.kv_fed == 16 * 128 * 4
    assert case.predicted_s > 0 and case.measured_s > 0
