"""Where a census' tasks run: the seam between the work planned and the machines that do it.

An executor takes a task function and its tasks and yields each outcome as it completes (in completion order,
not submission order): the result, or the exception that ended the task. A task function is a pure function of
its task, a picklable value that names its model (a path or ``zoo:NAME``, read where the task runs) rather than
holding it, so that a task can go to another process or another machine. That is all an executor does: the
census plans the tasks, turns a failed task into rows that say so, and writes the rows; a distributed executor
(Dask distributed, ``--executor ADDRESS``) is one more class with ``run``.

``local_executor(jobs)``: with one job, the tasks run one after the other in this process; with more, in a pool
of worker processes (concurrent.futures, started fresh with ``spawn`` so that no worker inherits this process's
threads or onnxruntime sessions). A worker that dies (killed for memory, a crash inside a native library) breaks
the pool: the tasks it took down are run again once in a fresh pool, and fail if it breaks again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from onnxroof.errors import UserError

__all__ = ["Done", "Executor", "InProcess", "ProcessPool", "default_jobs", "local_executor"]

T = TypeVar("T")
R = TypeVar("R")

RETRIES = 1  # how many times a task a broken pool took down runs again


@dataclass(frozen=True)
class Done(Generic[T, R]):
    """One task's outcome: its ``result``, or the ``error`` that ended it (``result`` is then None)."""

    task: T
    result: R | None
    error: Exception | None = None


class Executor(Protocol):
    """Runs a task function over tasks and yields each outcome as it completes."""

    def run(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[Done[T, R]]: ...


class InProcess:
    """The tasks one after the other, in this process (``--jobs 1``): no pickling, tracebacks where they arise."""

    def run(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[Done[T, R]]:
        for task in tasks:
            try:
                result = fn(task)
            except Exception as exc:
                yield Done(task, None, exc)
                continue
            yield Done(task, result)


class ProcessPool:
    """The tasks in ``jobs`` worker processes at most (fewer where there are fewer tasks)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[Done[T, R]]:
        pending, attempts = list(tasks), 0
        while pending:
            broken: list[T] = []
            for done in self._round(fn, pending):
                if isinstance(done.error, BrokenProcessPool) and attempts < RETRIES:
                    broken.append(done.task)
                else:
                    yield done
            pending, attempts = broken, attempts + 1

    def _round(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[Done[T, R]]:
        """One pool over ``tasks``; when the caller stops early (an interrupt), what has not started is cancelled
        and the workers are left to end rather than waited for."""
        import multiprocessing

        pool = ProcessPoolExecutor(
            max_workers=min(self.jobs, len(tasks)), mp_context=multiprocessing.get_context("spawn")
        )
        finished = False
        try:
            futures: dict[Future[R], T] = {pool.submit(fn, task): task for task in tasks}
            for future in as_completed(futures):
                yield _outcome(futures[future], future)
            finished = True
        finally:
            pool.shutdown(wait=finished, cancel_futures=True)


def _outcome(task: T, future: Future[R]) -> Done[T, R]:
    try:
        return Done(task, future.result())
    except Exception as exc:
        return Done(task, None, exc)


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity where the platform says, else the machine's count)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def local_executor(jobs: int | None = None) -> Executor:
    """In this process for one job, a process pool of ``jobs`` workers for more (None: default_jobs())."""
    count = default_jobs() if jobs is None else jobs
    if count < 1:
        raise UserError(f"--jobs {count}: expected a positive count", "e.g. --jobs 4, or --jobs 1 to run in-process")
    return InProcess() if count == 1 else ProcessPool(count)
