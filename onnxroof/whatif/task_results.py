"""A command's task results as the command would have them in one process: in the tasks' order, the first
failure in that order raised, and the tasks' warnings shown once each.

Tasks finish in any order (a pool, a cluster), but a command's output and its error must not depend on where
they ran: ``in_order`` hands back each result in the tasks' order and raises the error of the first task that
failed in that order, as soon as every task before it is done (the error a run in one process, stopping at the
first failure, would raise). A task that runs in a pool worker or on a Dask worker would print its warnings (an
op without a cost function, a fallback precision) to that process's stderr, once per worker, or to a worker's log
that no one reads; the task function records them instead (``recorded``) and returns them with its result, and
``in_order`` shows them here, in the tasks' order, each distinct warning once. A warning is a plain value
(message, category, where it was raised): it pickles.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from onnxroof.whatif.executors import Done, Executor, InProcess, ProcessPool

__all__ = ["Caught", "Warned", "fitted", "in_order", "recorded", "replay"]

R = TypeVar("R")
T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class Caught:
    """One warning as a task raised it: its text, its category and the line that raised it."""

    message: str
    category: type[Warning]
    filename: str
    lineno: int


class Warned(Protocol):
    """A task's result that carries the warnings the task raised."""

    @property
    def warnings(self) -> tuple[Caught, ...]: ...


W = TypeVar("W", bound=Warned)


def recorded(fn: Callable[[], R]) -> tuple[R, tuple[Caught, ...]]:
    """``fn()``'s result and every warning it raised, none of them shown here."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, tuple(Caught(str(w.message), w.category, w.filename, w.lineno) for w in caught)


def replay(caught: Iterable[Caught], seen: set[Caught]) -> None:
    """Show ``caught`` through this process's warning filters, but those in ``seen``, the run's record of what
    it has shown (updated), so that a warning every task raised is shown once. (A registry of the warnings module
    would not do: every change to the filters, as each task's recording makes in this process, clears it.)"""
    for w in caught:
        if w not in seen:
            seen.add(w)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def fitted(executor: Executor | None, count: int) -> Executor:
    """The executor ``count`` tasks run through: in this process where none is given, or where a local pool
    would get one task (a worker process started for one task costs more than the task)."""
    if executor is None or (isinstance(executor, ProcessPool) and count <= 1):
        return InProcess()
    return executor


def in_order(
    executor: Executor, fn: Callable[[T], W], tasks: Sequence[T], progress: Callable[[T], None] | None = None
) -> list[W]:
    """``fn``'s result for each of ``tasks`` through ``executor``, in the tasks' order; ``progress(task)`` as each
    finishes. The first failure in the tasks' order is raised once the tasks before it are done; the warnings
    of the results are shown as their turn comes. Stopped early (an error, an interrupt), the executor is closed
    at once: what has not started is cancelled."""
    outcomes: dict[T, Done[T, W]] = {}
    results: list[W] = []
    seen: set[Caught] = set()
    running = executor.run(fn, tasks)
    try:
        for done in running:
            outcomes[done.task] = done
            if progress is not None:
                progress(done.task)
            while len(results) < len(tasks) and tasks[len(results)] in outcomes:
                first = outcomes[tasks[len(results)]]
                if first.result is None:
                    raise first.error or RuntimeError(f"a task returned nothing: {first.task!r}")
                replay(first.result.warnings, seen)
                results.append(first.result)
    finally:
        close = getattr(running, "close", None)  # a generator's: the pool or the cluster client let go at once
        if close is not None:
            close()
    return results
