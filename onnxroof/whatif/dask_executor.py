"""Tasks on an existing Dask distributed cluster: ``--executor tcp://HOST:PORT`` (or a scheduler file).

Dask distributed (the ``distributed`` extra) runs each task where its scheduler places it and keeps it through a
worker's loss: a task whose worker dies is run again on another worker (up to the scheduler's
``distributed.scheduler.allowed-failures``), so no row is lost. What a task needs of a machine is a *worker
resource*: a measurement task for device ``host-a`` asks for one unit of ``device:host-a``, which only the workers
started on that machine declare (``dask worker ADDRESS --resources device:host-a=1``), so each config is timed on
its own device. Tasks that only analyze ask for nothing and go to any worker.

Each task's result comes back once, when it completes, and is released on the cluster at once: the client holds
the rows it was given and nothing else. A task names its model (a path or ``zoo:NAME``); the worker reads it, so a
model's file travels to no worker through the client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from onnxroof.errors import UserError
from onnxroof.whatif.executors import Done, Executor, local_executor

__all__ = ["CONNECT_TIMEOUT_S", "DEVICE_RESOURCE", "DaskExecutor", "device_resource", "executor_for"]

T = TypeVar("T")
R = TypeVar("R")

CONNECT_TIMEOUT_S = 10  # how long the client waits for the scheduler before it gives up
DEVICE_RESOURCE = "device:"  # a worker resource naming the device a worker can time on, before the device's key


def device_resource(device_key: str) -> str:
    """The worker resource a measurement on ``device_key`` needs: ``device:KEY``."""
    return f"{DEVICE_RESOURCE}{device_key}"


class DaskExecutor:
    """Runs tasks on the Dask cluster whose scheduler is at ``address`` (``tcp://HOST:PORT``, or the path of a
    scheduler file). ``resources`` gives a task's worker resources (none: any worker runs it)."""

    def __init__(
        self, address: str, resources: Callable[[Any], Mapping[str, float]] | None = None, retries: int = 1
    ) -> None:
        self.address = address
        self.resources = resources
        self.retries = retries

    def run(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[Done[T, R]]:
        from distributed import as_completed

        client = _connect(self.address)
        try:
            needed = [dict(self.resources(task)) for task in tasks] if self.resources is not None else []
            _check_resources(client, self.address, needed)
            with client.as_current():
                futures = {self._submit(client, fn, task): task for task in tasks}
                for future in as_completed(futures):
                    yield _outcome(futures.pop(future), future)
                    future.release()
        finally:
            client.close()

    def _submit(self, client: Any, fn: Callable[[T], R], task: T) -> Any:
        """One task: not cached by value (``pure=False``: a rerun times again), with its resources, and run
        again on a failure that raised (``retries``), besides the reruns of a lost worker's tasks."""
        resources = dict(self.resources(task)) if self.resources is not None else None
        return client.submit(fn, task, pure=False, retries=self.retries, resources=resources or None)


def _connect(address: str) -> Any:
    """A client of the scheduler at ``address``, or a UserError that says how to start one."""
    from distributed import Client

    try:
        if address.startswith(("tcp://", "tls://", "inproc://", "ws://", "wss://")):
            return Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        return Client(scheduler_file=address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UserError(
            f"--executor {address}: no Dask scheduler answered ({str(exc).splitlines()[0] if str(exc) else exc})",
            "start one with `dask scheduler` and workers with `dask worker ADDRESS`, or use --executor local",
        ) from None


def _check_resources(client: Any, address: str, needed: Sequence[Mapping[str, float]]) -> None:
    """A UserError naming a resource the tasks ask for that no worker of the cluster declares: the scheduler would
    hold such a task until one joins, which is a census that never ends."""
    declared: set[str] = set()
    for worker in client.scheduler_info()["workers"].values():
        declared.update(worker.get("resources") or {})
    missing = sorted({name for wanted in needed for name in wanted} - declared)
    if missing:
        raise UserError(
            f"--executor {address}: no worker declares {missing[0]}, which a task needs",
            f"start one on that machine with `dask worker {address} --resources {missing[0]}=1`",
        )


def _outcome(task: T, future: Any) -> Done[T, R]:
    try:
        return Done(task, future.result())
    except Exception as exc:
        return Done(task, None, exc)


def executor_for(
    address: str, jobs: int | None = None, resources: Callable[[Any], Mapping[str, float]] | None = None
) -> Executor:
    """``local``: a process pool of ``jobs`` (onnxroof.whatif.executors); else the Dask scheduler at
    ``address``, whose workers set their own parallelism. A UserError for --jobs with a cluster, and one naming
    the extra where Dask distributed is not installed."""
    if address == "local":
        return local_executor(jobs)
    if jobs is not None:
        raise UserError(
            f"--jobs {jobs} sizes the local pool; a cluster's workers run as many tasks as they were started with",
            "drop --jobs, or use --executor local",
        )
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UserError(
            f"--executor {address}: Dask distributed is not installed", "pip install 'onnxroof[distributed]'"
        ) from None
    return DaskExecutor(address, resources)
