"""A real Dask distributed cluster on this machine: a scheduler and single-threaded workers started as separate
processes on 127.0.0.1 (from the checkout's root, so that they import this checkout), found through a scheduler
file, stopped when the context ends. tools/bench_census.py times a census on it; the tests run theirs on it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "START_TIMEOUT_S", "STOP_TIMEOUT_S", "Cluster", "dask_cluster"]

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60  # how long the scheduler and the workers may take to start
STOP_TIMEOUT_S = 20  # how long a process may take to end once told to, before it is killed


@dataclass
class Cluster:
    """The scheduler's file and address, and each worker's process by its name."""

    scheduler_file: Path
    address: str
    workers: dict[str, subprocess.Popen[bytes]]

    def kill(self, name: str) -> None:
        """Kill a worker outright (no nanny restarts it), as a machine lost mid-run."""
        process = self.workers[name]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _spawn(module: str, args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """``python -m module args`` from the checkout's root, its output to ``log``."""
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def _wait_for(predicate: Callable[[], bool], what: str, logs: Sequence[Path]) -> None:
    """Wait until ``predicate`` holds; a RuntimeError with the logs' last lines after START_TIMEOUT_S."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: " + " | ".join(p.read_text()[-400:] for p in logs))
        time.sleep(0.1)


def _address(scheduler_file: Path) -> str | None:
    """The scheduler's address from its file; None until the file is there and written in full."""
    try:
        return str(json.loads(scheduler_file.read_text())["address"])
    except (OSError, ValueError, KeyError):
        return None


def _worker_args(scheduler_file: Path, name: str, resources: str) -> list[str]:
    """A single-threaded worker without a nanny (a killed worker stays dead) or a dashboard."""
    args = ["--scheduler-file", str(scheduler_file), "--name", name, "--nthreads", "1"]
    args += ["--no-nanny", "--no-dashboard", "--host", "127.0.0.1"]
    return args + (["--resources", resources] if resources else [])


def _stop(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Stop the workers, and only once they are gone the scheduler (the first process): a worker told to stop
    while its scheduler stops too waits out Dask's close timeout. What lingers past STOP_TIMEOUT_S is killed."""
    scheduler, workers = processes[0], processes[1:]
    for group in (workers, [scheduler]):
        for process in group:
            if process.poll() is None:
                process.terminate()
        for process in group:
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def dask_cluster(directory: Path, workers: dict[str, str]) -> Iterator[Cluster]:
    """A scheduler and one single-threaded worker per entry of ``workers`` (name -> resources, e.g.
    ``"device:a=1"``, or "" for none); the scheduler file and the logs go to ``directory``."""
    from distributed import Client

    scheduler_file = directory / "scheduler.json"
    args = ["--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)]
    logs = [directory / "scheduler.log"]
    processes = [_spawn("distributed.cli.dask_scheduler", args, logs[0])]
    started: dict[str, subprocess.Popen[bytes]] = {}
    try:
        _wait_for(lambda: _address(scheduler_file) is not None, "the scheduler", logs)
        address = str(_address(scheduler_file))
        for name, resources in workers.items():
            logs.append(directory / f"worker-{name}.log")
            args = _worker_args(scheduler_file, name, resources)
            started[name] = _spawn("distributed.cli.dask_worker", args, logs[-1])
        processes += started.values()
        with Client(address, timeout=START_TIMEOUT_S, set_as_default=False) as client:
            client.wait_for_workers(len(workers), timeout=START_TIMEOUT_S)
        yield Cluster(scheduler_file, address, started)
    finally:
        _stop(processes)
