"""A census on a real Dask cluster (a scheduler and two workers started as separate processes on 127.0.0.1): the
rows equal the local run's, also when a worker is killed mid-census."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from onnxroof.api import get_device
from onnxroof.cli import main
from onnxroof.report.census_files import read_census
from onnxroof.whatif.census import Task, census, ordered, plan, planned_keys, run_task
from onnxroof.whatif.dask_executor import DaskExecutor
from onnxroof.whatif.executors import InProcess
from tests.helpers import matmul_model
from tools.dask_cluster import dask_cluster

pytest.importorskip("distributed")

DEVICES = "v100-sxm2,t4,jetson-agx-orin"


def _models(folder: Path, count: int) -> list[str]:
    folder.mkdir()
    return [matmul_model(folder / f"m{i:02}.onnx") for i in range(count)]


def test_a_census_on_a_cluster_writes_the_rows_of_a_local_one(tmp_path: Path) -> None:
    models = _models(tmp_path / "models", 4)
    local, remote = str(tmp_path / "local.csv"), str(tmp_path / "remote.csv")
    args = ["census", *models, "-d", DEVICES, "--batch", "1,2", "-p", "fp32,fp16"]
    assert main([*args, "-o", local, "--jobs", "1"]) == 0
    with dask_cluster(tmp_path, {"a": "", "b": ""}) as cluster:
        assert main([*args, "-o", remote, "--executor", cluster.address]) == 0
    assert read_census(remote) == read_census(local)  # 4 models x 3 devices x 2 batches x 2 precisions = 48 rows
    assert len(read_census(local)) == 48


def slow_task(task: Task) -> list[dict[str, Any]]:
    """The census' task function, a tenth of a second slower: a worker killed after the first rows still holds
    tasks of its own."""
    time.sleep(0.1)
    return run_task(task)


def test_a_worker_killed_mid_census_loses_no_row(tmp_path: Path) -> None:
    models = _models(tmp_path / "models", 12)
    devices = [get_device(d) for d in DEVICES.split(",")]
    tasks = plan(models, devices, [1, 2, 4], ["fp32", "fp16"])  # 36 tasks of 6 rows
    planned = planned_keys(models, devices, [1, 2, 4], ["fp32", "fp16"])
    expected = ordered([row for rows in census(tasks, InProcess()) for row in rows], planned)
    with dask_cluster(tmp_path, {"a": "", "b": ""}) as cluster:
        arriving = DaskExecutor(cluster.address).run(slow_task, tasks)
        done = [next(arriving)]
        cluster.kill("b")  # the tasks it holds are run again on a
        done += list(arriving)
    assert all(d.error is None for d in done)
    rows = [row for d in done for row in d.result or ()]
    assert ordered(rows, planned) == expected and not any(r["error"] for r in rows)
