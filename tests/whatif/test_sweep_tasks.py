"""sweep and explore as tasks: the same rows in this process, in a pool and (test_sweep_distributed.py) on a
cluster; --measure on host devices only, on this machine only where nothing else can reach another."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from onnxroof.cli import main
from onnxroof.whatif.dask_executor import device_resource
from onnxroof.whatif.executors import InProcess, ProcessPool
from onnxroof.whatif.explore import ExploreTask, explore, explore_resources
from onnxroof.whatif.sweep import plan, sweep, sweep_resources
from tests.helpers import calibrated_host, host_file, matmul_model

UNET = "zoo:unet?size=16&depth=1"
AXES = ["--batch", "1,2", "--input-size", "16,32", "-p", "fp32,fp16", "-d", "v100-sxm2,t4"]


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> object:
    assert main([*args, "-f", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_one_job_and_two_give_the_rows_of_the_serial_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    serial = sweep(UNET, ["v100-sxm2", "t4"], batches=[1, 2], sizes=[(16, 16), (32, 32)], precisions=["fp32", "fp16"])
    assert len(serial.rows) == 2 * 2 * 2 * 2
    one = _json(["sweep", UNET, *AXES, "--jobs", "1"], capsys)
    two = _json(["sweep", UNET, *AXES, "--jobs", "2"], capsys)
    assert one == two == json.loads(json.dumps(serial.to_dict()))


def test_a_pool_explores_as_this_process_does() -> None:
    only = ("lwu", "fp16", "separable")
    here = explore(UNET, "rtx2060-super", only=only)
    pooled = explore(UNET, "rtx2060-super", only=only, executor=ProcessPool(2))
    assert (
        pooled.to_dict() == here.to_dict() == explore(UNET, "rtx2060-super", only=only, executor=InProcess()).to_dict()
    )


def test_only_measurements_ask_for_a_device() -> None:
    device = calibrated_host()
    predicted = plan("m.onnx", [device, device], [1, 2])
    assert len(predicted) == 2 and all(len(t.devices) == 2 and sweep_resources(t) == {} for t in predicted)
    measured = plan("m.onnx", [device, device], [1, 2], measure=True)
    assert len(measured) == 4 and all(sweep_resources(t) == {device_resource("test-host"): 1} for t in measured)
    timed = ExploreTask("m.onnx", "fp16", device, here=device, timed=True)
    assert explore_resources(timed) == {device_resource("test-host"): 1}
    assert explore_resources(replace(timed, timed=False)) == {}


def test_measure_on_a_catalog_device_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    assert main(["sweep", model, "-d", "v100-sxm2", "--measure"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "v100-sxm2 is a datasheet device, not a host" in line and "hint:" in line


def test_measure_of_another_machines_profile_here_says_how_to_reach_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    foreign = host_file(tmp_path, "lab-b", cpu="Some Other CPU (family 1 model 2, AVX2)")
    assert main(["sweep", model, "-d", foreign, "--measure", "--jobs", "1"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "describes Some Other CPU" in line and "not this machine" in line
    assert "--executor ADDRESS" in line and "dask worker ADDRESS --resources device:lab-b=1" in line


def test_measure_refuses_a_what_if_precision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    here = host_file(tmp_path, "lab-a")
    assert main(["sweep", model, "-d", here, "--measure", "-p", "fp16"]) == 2
    assert "--precision fp16 is a what-if" in capsys.readouterr().err
    assert main(["sweep", model, "-d", "t4", "--inputs", "x.npz"]) == 2
    assert "--inputs feeds the runs of --measure" in capsys.readouterr().err


@pytest.mark.ort
def test_measure_times_each_row_on_this_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    here = host_file(tmp_path, "lab-a")  # a profile of this machine, as `onnxroof calibrate -o` writes one
    data = _json(["sweep", model, "-d", here, "--batch", "1,2", "--measure", "--jobs", "1"], capsys)
    assert isinstance(data, dict)
    rows = data["rows"]
    assert [r["batch"] for r in rows] == [1, 2] and all(r["measured_time_s"] > 0 for r in rows)
    for r in rows:
        assert r["error"] == pytest.approx(r["predicted_time_s"] / r["measured_time_s"] - 1)
    assert main(["sweep", model, "-d", here, "--measure", "-f", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.endswith(",uncounted,measured_time_s,error")
    assert main(["sweep", model, "-d", here, "--measure"]) == 0
    header = capsys.readouterr().out.splitlines()[1]
    assert header.split()[-3:] == ["bound", "measured", "error"]


@pytest.mark.ort
def test_measure_runs_on_the_inputs_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    here = host_file(tmp_path, "lab-a")
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    np.savez(good, x=np.ones((1, 64), np.float32))
    np.savez(bad, x=np.ones((3, 5), np.float32))
    assert main(["sweep", model, "-d", here, "--measure", "--inputs", str(good)]) == 0
    capsys.readouterr()
    assert main(["sweep", model, "-d", here, "--measure", "--inputs", str(bad)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "hint:" in line
