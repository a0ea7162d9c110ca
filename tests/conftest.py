"""Fixtures shared by the tests: the command line as a user runs it, small model files, and empty directories."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]

RunCli = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def cli() -> RunCli:
    """``cli("analyze", "zoo:resnet50")``: the command line in a separate process, from the checkout's root."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "onnxroof", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
        )

    return run


@pytest.fixture
def conv_bn_relu(tmp_path: Path) -> Path:
    """A model file: Conv 3x3 (8 -> 16 channels, 16x16) + BatchNormalization + Relu, which onnxruntime runs as one
    fused kernel."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.ones(16, np.float32), "scale"),
        numpy_helper.from_array(np.zeros(16, np.float32), "bias"),
        numpy_helper.from_array(np.zeros(16, np.float32), "mean"),
        numpy_helper.from_array(np.ones(16, np.float32), "var"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"),
        helper.make_node("Relu", ["b"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "cbr",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])],
        inits,
    )
    path = tmp_path / "cbr.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


@pytest.fixture
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(working directory, temporary directory): both empty, both in ``tmp_path``, both in use for the test, so that
    it can check that what it ran left no file behind."""
    work, temp = tmp_path / "cwd", tmp_path / "tmp"
    work.mkdir()
    temp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return work, temp


def refuse_sessions(monkeypatch: pytest.MonkeyPatch, test: str) -> None:
    """Make an onnxruntime session opened in this process fail ``test``, naming the marker it lacks. The failure
    is pytest's outcome, a BaseException, so that code catching a session's Exception does not swallow it."""
    import onnxruntime

    def refuse(self: object, *args: object, **kwargs: object) -> None:
        pytest.fail(f"{test} opens an onnxruntime session: mark it @pytest.mark.ort", pytrace=False)

    monkeypatch.setattr(onnxruntime.InferenceSession, "__init__", refuse)


@pytest.fixture(autouse=True)
def _sessions_need_the_ort_marker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test without the ``ort`` marker may not open an onnxruntime session in this process, so that
    ``-m "not ort"`` leaves out every test that opens one here. (A session that a command the test runs opens in
    a process of its own is not seen: those tests carry the marker by review.)"""
    if request.node.get_closest_marker("ort") is None:
        refuse_sessions(monkeypatch, request.node.nodeid)
