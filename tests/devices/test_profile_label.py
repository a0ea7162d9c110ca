"""Every output that predicts on a calibrated host names the profile it used: CPU, threads, onnxruntime and the
calibration's date, in the one line Device.label() gives; a datasheet device keeps its name and key."""

from __future__ import annotations

import json

import pytest

from onnxroof.api import analyze
from onnxroof.report.analysis import render
from onnxroof.report.calibration import calibration_table
from onnxroof.report.figures.plane_data import title_of
from tests.helpers import calibrated_host, tiny_model

LABEL = "host (test cpu, 1 thread, onnxruntime 1.0, calibrated 2025-01-01)"


@pytest.mark.ort
def test_analyze_names_the_profile_in_its_table_json_and_figures():
    host = calibrated_host()
    assert host.label() == LABEL
    a = analyze(tiny_model(), host)
    assert render(a, "table").splitlines()[0].startswith(f"tiny on {LABEL} [test-host]")
    device = json.loads(render(a, "json"))["device"]
    assert device["label"] == LABEL
    assert {k: device["calibration"][k] for k in ("cpu", "threads", "onnxruntime", "date")} == {
        "cpu": "test cpu",
        "threads": 1,
        "onnxruntime": "1.0",
        "date": "2025-01-01",
    }
    assert title_of([a], "Roofline").endswith(f"on {LABEL} (fp32)")
    assert calibration_table(host).startswith(LABEL)


def test_a_datasheet_device_keeps_its_name_and_key():
    a = analyze(tiny_model(), "v100-sxm2")
    assert json.loads(render(a, "json"))["device"]["label"] == a.device.name
    assert json.loads(render(a, "json"))["device"]["calibration"] is None
    assert title_of([a], "Roofline").endswith("on v100-sxm2 (fp32)")
