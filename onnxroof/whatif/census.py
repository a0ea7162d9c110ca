"""A census: many models, each on every device at every batch and what-if precision, one row per combination.

A row is a plain dict of FIELDS: the combination (model, device, engine, batch, precision: the row's key, KEY)
and what was predicted there (FLOPs, MACs, params, bytes moved, intensity, predicted time, throughput, bound, the
memory the model needs on the device and whether it fits the device's capacity, and paper 004's memory footprint),
or its one-line ``error``. A
model that cannot be read, inferred or rewritten gives rows that say why; the census goes on.

The work is planned as tasks (``plan``) and run through an executor (``whatif.executors``) by ``run_task``, the
task function, a pure function of its Task. A task is one model at one batch with the (device, precision)
combinations still to do there: reading the model and rewriting it to the batch (the batch pass and onnx's strict
inference) are the expensive steps and are done once per task, while each row is one analysis of the rewritten
graph, loaded once for all the devices that predict the graph as exported. A task per row would read and
rewrite the model once per row; a task per model would serialize its batches on one worker and lose every row it
had computed when it is stopped. Tasks stay resumable per row because ``plan`` leaves out the rows a previous run
holds (``resume``), and a task with nothing left to do is never made.

A row is the sweep's (``whatif.sweep``: the same batch rewrite, the same what-if precision, the same SweepRow) with
the memory of ``fit`` (``whatif.fit.device_memory``); ``batch`` is the batch asked for (None: the model's own) and
``analyzed_batch`` the one the analysis ran at.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onnxroof.devices import Device
from onnxroof.devices.engines import ROOFLINE
from onnxroof.errors import UserError, first_line
from onnxroof.whatif.executors import Executor

__all__ = [
    "FIELDS",
    "KEY",
    "STORED",
    "Config",
    "Key",
    "Task",
    "census",
    "config_key",
    "engine_name",
    "error_rows",
    "one_line",
    "ordered",
    "plan",
    "planned_keys",
    "resume",
    "row_key",
    "run_task",
    "timed_task",
]

# Every column of a row and the type of its values (None is every column's empty value, an error row's numbers).
FIELDS: dict[str, type] = {
    "model": str,
    "device": str,
    "engine": str,
    "batch": int,  # asked for; empty: the model's own
    "precision": str,  # the what-if precision, or STORED
    "analyzed_batch": int,
    "flops": float,
    "macs": float,
    "params": int,
    "bytes_moved": float,
    "intensity": float,
    "predicted_time_s": float,
    "throughput_per_s": float,
    "bound": str,
    "peak_memory_bytes": float,
    "footprint_bytes": float,  # paper 004's: weights + inputs + every tensor a node writes, no reuse
    "memory_capacity_bytes": float,  # empty where the device lists none
    "fits": bool,  # peak memory within the capacity; empty where the device lists none
    "uncounted": int,
    "error": str,
}
KEY: tuple[str, ...] = ("model", "device", "engine", "batch", "precision")
STORED = "stored"  # the precision of a row analyzed at the tensors' own dtypes

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Config:
    """One row's setting within a task: the device and the what-if precision (None: the stored dtypes)."""

    device: Device
    precision: str | None


@dataclass(frozen=True)
class Task:
    """One model (a path or ``zoo:NAME``, read where the task runs) at one ``batch`` (None: its own), with the
    configs whose rows are still to do; ``threads`` picks a calibrated host's profile."""

    model: str
    batch: int | None
    configs: tuple[Config, ...]
    threads: int = 1

    def row_keys(self) -> list[Key]:
        """The keys of the rows this task computes, one per config."""
        return [config_key(self.model, self.batch, c) for c in self.configs]


def engine_name(device: Device) -> str:
    """What runs the model on ``device``, as --engine names it: its engine, or the plain roofline."""
    return device.engine_spec() or ROOFLINE


def config_key(model: str, batch: int | None, config: Config) -> Key:
    """The key of the row ``config`` gives ``model`` at ``batch``, known before the row is computed."""
    device = config.device
    return (model, device.spec(), engine_name(device), batch, config.precision or STORED)


def row_key(row: Mapping[str, Any]) -> Key:
    """A row's key: the values of its KEY fields, as config_key gives them."""
    return tuple(row.get(name) for name in KEY)


def _configs(devices: Sequence[Device], precisions: Sequence[str | None]) -> list[Config]:
    """Every device at every precision (none: the stored dtypes), device by device."""
    return [Config(d, p) for d in devices for p in (list(precisions) or [None])]


def planned_keys(
    models: Sequence[str], devices: Sequence[Device], batches: Sequence[int | None], precisions: Sequence[str | None]
) -> list[Key]:
    """Every row's key, in the order a census file lists them: by model, batch, device, precision."""
    configs = _configs(devices, precisions)
    return [config_key(m, b, c) for m in models for b in (list(batches) or [None]) for c in configs]


def plan(
    models: Sequence[str],
    devices: Sequence[Device],
    batches: Sequence[int | None] = (),
    precisions: Sequence[str | None] = (),
    done: Collection[Key] = (),
    threads: int = 1,
) -> list[Task]:
    """One task per model and batch (empty ``batches``: the model's own) with every device x precision config
    (empty ``precisions``: the stored dtypes) whose key is not in ``done``; none where every one is."""
    configs = _configs(devices, precisions)
    tasks = []
    for model, batch in itertools.product(models, list(batches) or [None]):
        todo = tuple(c for c in configs if config_key(model, batch, c) not in done)
        if todo:
            tasks.append(Task(model, batch, todo, threads))
    return tasks


def resume(existing: Sequence[Mapping[str, Any]], planned: Collection[Key]) -> tuple[list[dict[str, Any]], set[Key]]:
    """What a rerun keeps of a census file's rows and the keys it need not compute again: every row is kept but
    the error rows of planned keys, which are computed again (a failure may have been the machine's, and a fixed
    file should be counted); the keys done are those of the rows without an error."""
    kept = [dict(r) for r in existing if not (r.get("error") and row_key(r) in planned)]
    return kept, {row_key(r) for r in kept if not r.get("error")}


def ordered(rows: Sequence[dict[str, Any]], planned: Sequence[Key]) -> list[dict[str, Any]]:
    """``rows`` in the planned order (whatever order the tasks completed in), the rows of other keys (a previous
    run's) after them in their own order."""
    index = {key: i for i, key in enumerate(planned)}
    return sorted(rows, key=lambda r: index.get(row_key(r), len(index)))


def census(tasks: Sequence[Task], executor: Executor) -> Iterator[list[dict[str, Any]]]:
    """Each task's rows as it completes: its results, or where the task itself failed (a worker that died),
    one error row per config saying why."""
    for done in executor.run(run_task, tasks):
        yield error_rows(done.task, one_line(done.error)) if done.error is not None else list(done.result or ())


def one_line(exc: BaseException) -> str:
    """What an error row says: a UserError's message, else the exception's type and first line."""
    if isinstance(exc, UserError):
        return exc.message.replace("\n", " ")
    return f"{type(exc).__name__}: {first_line(exc)}"


def error_rows(task: Task, message: str) -> list[dict[str, Any]]:
    """A row per config of ``task``, each with its key, its device's capacity and ``message`` as its error."""
    return [_row(task, c, message=message) for c in task.configs]


def run_task(task: Task) -> list[dict[str, Any]]:
    """The task function: the model read (without its weights' bytes) and rewritten to the task's batch once,
    then a row per config; a failure of the reading or the rewrite is every row's error, a failure of one
    analysis that row's. Warnings are left out: a census of hundreds of models would bury its progress in them."""
    from onnxroof.whatif.sweep import sweep_source, variant_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            variant = variant_model(sweep_source(task.model, rewrites=False), task.batch)
        except Exception as exc:
            return error_rows(task, one_line(exc))
        graphs: dict[str | None, Any] = {}
        return [_predicted_row(task, variant, c, graphs) for c in task.configs]


def timed_task(task: Task) -> tuple[list[dict[str, Any]], float]:
    """``run_task``'s rows and the seconds it took, timed where it ran: what an executor adds per task is the
    wall time its workers spent less these (tools/bench_census.py)."""
    start = time.perf_counter()
    rows = run_task(task)
    return rows, time.perf_counter() - start


def _predicted_row(task: Task, variant: Any, config: Config, graphs: dict[str | None, Any]) -> dict[str, Any]:
    """One config's row; ``graphs`` holds the graphs loaded so far, one for every device that predicts the graph
    as exported and one per device whose engine runs a graph of its own."""
    from onnxroof.api import analyze, prediction_graph
    from onnxroof.predict.profiles import named_profile
    from onnxroof.whatif.fit import device_memory
    from onnxroof.whatif.sweep import sweep_row

    device = config.device
    try:
        which = None if named_profile(device) is None else device.spec()
        if which not in graphs:
            graphs[which] = prediction_graph(variant, device)
        analysis = analyze(graphs[which], device, precision=config.precision, threads=task.threads)
        estimate, memory, _ = device_memory(graphs[which], device, config.precision, task.threads)
    except Exception as exc:
        return _row(task, config, message=one_line(exc))
    swept = sweep_row(variant, analysis, config.precision, None)
    t = analysis.totals
    capacity = _capacity(device)
    return _row(
        task,
        config,
        analyzed_batch=swept.batch or None,
        flops=swept.flops,
        macs=t.macs,
        params=t.params,
        bytes_moved=swept.bytes_moved,
        intensity=swept.intensity,
        predicted_time_s=swept.predicted_time_s,
        throughput_per_s=swept.throughput,
        bound=swept.bound,
        peak_memory_bytes=float(memory),
        footprint_bytes=float(estimate.footprint_bytes),
        fits=None if capacity is None else memory <= capacity,
        uncounted=swept.uncounted,
    )


def _capacity(device: Device) -> float | None:
    """The device's memory capacity in bytes; None where it lists none (fits is then left empty, not guessed)."""
    return device.memory_capacity.value if device.memory_capacity is not None else None


def _row(task: Task, config: Config, message: str | None = None, **values: Any) -> dict[str, Any]:
    """A row of every field: the config's key, the device's capacity, ``values``, None for the rest."""
    model, device, engine, batch, precision = config_key(task.model, task.batch, config)
    row: dict[str, Any] = dict.fromkeys(FIELDS)
    row.update(model=model, device=device, engine=engine, batch=batch, precision=precision)
    row.update(memory_capacity_bytes=_capacity(config.device), error=message, **values)
    return row
