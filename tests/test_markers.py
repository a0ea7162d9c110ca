"""The markers that let a lane leave tests out: registered, applied where a test needs onnxruntime, and never
used by .ci/run to leave anything out."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.conftest import refuse_sessions
from tests.helpers import tiny_model

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_the_markers_are_registered_and_strict():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert sorted(m.split(":")[0] for m in options["markers"]) == ["browser", "calibrate", "ort"]
    assert "--strict-markers" in options["addopts"].split()


def test_ci_runs_every_test():
    pytest_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if " -m pytest" in line]
    assert pytest_lines and all(" -m " not in line.split(" -m pytest", 1)[1] for line in pytest_lines)


def test_a_session_in_a_test_without_the_ort_marker_fails_it(monkeypatch: pytest.MonkeyPatch):
    import onnxruntime

    refuse_sessions(monkeypatch, "tests/x.py::test_y")
    with pytest.raises(pytest.fail.Exception, match=re.escape("tests/x.py::test_y opens an onnxruntime session")):
        onnxruntime.InferenceSession(tiny_model().SerializeToString())


@pytest.mark.ort
def test_a_test_with_the_ort_marker_opens_sessions():
    import onnxruntime

    session = onnxruntime.InferenceSession(tiny_model().SerializeToString(), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == [i.name for i in tiny_model().graph.input]
