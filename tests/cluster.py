"""A real Dask distributed cluster for the tests: a scheduler and workers started as separate processes on
127.0.0.1, found through a scheduler file, stopped when the test ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60


@dataclass
class Cluster:
    """The scheduler's file and address, and each worker's process by its name."""

    scheduler_file: Path
    address: str
    workers: dict[str, subprocess.Popen]

    def kill(self, name: str) -> None:
        """Kill a worker outright (no nanny restarts it), as a machine lost mid-run."""
        process = self.workers[name]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _spawn(module: str, args: Sequence[str], log: Path) -> subprocess.Popen:
    out = log.open("w")
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def _wait_for(predicate, what: str, logs: Sequence[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: " + " | ".join(p.read_text()[-400:] for p in logs))
        time.sleep(0.1)


@contextmanager
def dask_cluster(directory: Path, workers: dict[str, str]) -> Iterator[Cluster]:
    """A scheduler and one single-threaded worker per entry of ``workers`` (name -> resources, e.g.
    ``"device:a=1"``, or "" for none)."""
    from distributed import Client

    scheduler_file = directory / "scheduler.json"
    args = ["--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)]
    logs = [directory / "scheduler.log"]
    processes = [_spawn("distributed.cli.dask_scheduler", args, logs[0])]
    started: dict[str, subprocess.Popen] = {}
    try:
        _wait_for(scheduler_file.exists, "the scheduler", logs)
        address = json.loads(scheduler_file.read_text())["address"]
        for name, resources in workers.items():
            logs.append(directory / f"worker-{name}.log")
            worker = ["--scheduler-file", str(scheduler_file), "--name", name, "--nthreads", "1"]
            worker += ["--no-nanny", "--no-dashboard", "--host", "127.0.0.1"]
            worker += ["--resources", resources] if resources else []
            started[name] = _spawn("distributed.cli.dask_worker", worker, logs[-1])
        processes += started.values()
        with Client(address, timeout=START_TIMEOUT_S, set_as_default=False) as client:
            client.wait_for_workers(len(workers), timeout=START_TIMEOUT_S)
        yield Cluster(scheduler_file, address, started)
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
