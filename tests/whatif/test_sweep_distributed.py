"""sweep and explore on a real Dask cluster (a scheduler and two workers started as separate processes on
127.0.0.1): the rows of a run in this process, and measurements only on the worker that declares their device."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from onnxroof.cli import main
from onnxroof.whatif.dask_executor import DaskExecutor, device_resource
from onnxroof.whatif.explore import explore, explore_resources
from onnxroof.whatif.sweep import sweep, sweep_resources
from tests.helpers import host_file, matmul_model
from tools.dask_cluster import dask_cluster

UNET = "zoo:unet?size=16&depth=1"
AXES = ["--batch", "1,2", "--input-size", "16,32", "-p", "fp32,fp16", "-d", "v100-sxm2,t4"]

pytest.importorskip("distributed")


def executed(dask_worker: Any) -> tuple[str, int]:
    """A worker's name and how many tasks it has run."""
    return str(dask_worker.name), int(dask_worker.state.executed_count)


def _executed_by_name(address: str) -> dict[str, int]:
    from distributed import Client

    with Client(address, set_as_default=False) as client:
        return dict(client.run(executed).values())


def test_a_sweep_and_an_exploration_on_a_cluster_give_the_serial_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sweep", UNET, *AXES, "-f", "json"]
    assert main([*args, "--jobs", "1"]) == 0
    serial = capsys.readouterr().out
    only = ["--only", "lwu,fp16"]
    assert main(["explore", UNET, "-d", "rtx2060-super", *only, "-f", "json", "--jobs", "1"]) == 0
    explored = capsys.readouterr().out
    with dask_cluster(tmp_path, {"a": "", "b": ""}) as running:
        assert main([*args, "--executor", running.address]) == 0
        assert capsys.readouterr().out == serial
        assert len(json.loads(serial)["rows"]) == 16  # 2 batches x 2 sizes x 2 precisions x 2 devices
        explore_args = ["explore", UNET, "-d", "rtx2060-super", *only, "-f", "json"]
        assert main([*explore_args, "--executor", running.address]) == 0
        assert capsys.readouterr().out == explored


@pytest.mark.ort
def test_a_measurement_runs_only_on_the_worker_that_declares_its_device(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    lab = host_file(tmp_path, "lab-a")  # its key is the resource only worker a declares
    with dask_cluster(tmp_path, {"a": f"{device_resource('lab-a')}=1", "b": ""}) as running:
        executor = DaskExecutor(running.address, resources=sweep_resources)
        result = sweep(model, [lab], batches=[1, 2, 4], measure=True, executor=executor)
        assert _executed_by_name(running.address) == {"a": 3, "b": 0}  # three measurements, all on a
        assert [r.batch for r in result.rows] == [1, 2, 4]
        assert all(r.measured_time_s and r.measured_time_s > 0 for r in result.rows)
        timed = explore(
            "zoo:unet?size=16&depth=1",
            "v100-sxm2",
            measure=1,
            only=("lwu",),
            here=lab,
            executor=DaskExecutor(running.address, resources=explore_resources),
        )
        (lwu,) = timed.candidates
        assert lwu.measured_speedup is not None and lwu.measured_speedup > 0
