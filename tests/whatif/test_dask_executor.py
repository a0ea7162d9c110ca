"""The Dask executor against a real cluster: a scheduler and two workers as separate processes on 127.0.0.1."""

from __future__ import annotations

import sys
import time

import pytest

from onnxroof.errors import UserError
from onnxroof.whatif import dask_executor
from onnxroof.whatif.dask_executor import DaskExecutor, device_resource, executor_for
from onnxroof.whatif.executors import InProcess, ProcessPool
from tools.dask_cluster import dask_cluster

pytest.importorskip("distributed")


def square(n: int) -> int:
    return n * n


def slow_square(n: int) -> int:
    time.sleep(0.2)
    return n * n


def worker_name(n: int) -> str:
    from distributed import get_worker

    return str(get_worker().name)


def fails_on_three(n: int) -> int:
    if n == 3:
        raise ValueError("three")
    return n


def test_tasks_run_on_the_cluster_as_they_would_here(tmp_path):
    with dask_cluster(tmp_path, {"a": "", "b": ""}) as cluster:
        done = list(DaskExecutor(cluster.address).run(square, list(range(12))))
        assert sorted(d.result for d in done) == [n * n for n in range(12)]
        assert all(d.result == d.task * d.task and d.error is None for d in done)
        failed = {d.task: d.error for d in DaskExecutor(str(cluster.scheduler_file)).run(fails_on_three, [1, 3])}
        assert failed[1] is None and isinstance(failed[3], ValueError)  # its error, after its retry


def test_a_task_needing_a_device_runs_on_the_worker_that_holds_it(tmp_path):
    with dask_cluster(tmp_path, {"a": device_resource("host-a") + "=1", "b": ""}) as cluster:
        executor = DaskExecutor(cluster.address, resources=lambda task: {device_resource("host-a"): 1})
        assert {d.result for d in executor.run(worker_name, list(range(8)))} == {"a"}


def test_a_task_needing_a_device_no_worker_holds_is_refused(tmp_path):
    with dask_cluster(tmp_path, {"a": ""}) as cluster:
        executor = DaskExecutor(cluster.address, resources=lambda task: {device_resource("host-b"): 1})
        with pytest.raises(UserError, match="no worker declares device:host-b") as error:
            list(executor.run(worker_name, [1]))
        assert "--resources device:host-b=1" in error.value.hint


def test_a_worker_lost_mid_run_loses_no_task(tmp_path):
    with dask_cluster(tmp_path, {"a": "", "b": ""}) as cluster:
        outcomes = DaskExecutor(cluster.address).run(slow_square, list(range(20)))
        done = [next(outcomes), next(outcomes)]
        cluster.kill("b")  # with tasks of its own in flight
        done += list(outcomes)
        assert sorted(d.task for d in done) == list(range(20)) and all(d.error is None for d in done)


def test_no_scheduler_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(UserError, match="no Dask scheduler answered") as error:
        list(DaskExecutor("tcp://127.0.0.1:9").run(square, [1]))
    assert "dask scheduler" in error.value.hint


def test_the_executor_named(monkeypatch):
    assert isinstance(executor_for("local", 1), InProcess) and isinstance(executor_for("local", 2), ProcessPool)
    assert isinstance(executor_for("tcp://127.0.0.1:8786"), DaskExecutor)
    with pytest.raises(UserError, match="--jobs 2 sizes the local pool"):
        executor_for("tcp://127.0.0.1:8786", 2)
    monkeypatch.setitem(sys.modules, "distributed", None)  # as where the extra is not installed
    with pytest.raises(UserError, match="Dask distributed is not installed") as error:
        executor_for("tcp://127.0.0.1:8786")
    assert "onnxroof[distributed]" in error.value.hint
