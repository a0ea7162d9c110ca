"""Every combination of batch, input size, precision and device: predicted time, throughput, intensity, bound.

Two kinds of precision row, never mixed up: a *what-if* row analyzes the graph as if every float tensor were
stored and computed at that precision (bytes and peak per precision, paper 000 section 4.4), the graph itself
unchanged; a *rewrite* row analyzes the graph that the --fp16 or --int8 rewrite produces (Casts, quantize and
dequantize nodes, integer kernels included), which on an onnxruntime host is what really runs. Batch and input
size are rewrites of the graph (the batch and input-size passes, which repair hard-coded shapes).

The combinations run as tasks through an executor (``whatif.executors``: this process, a local pool, a Dask
cluster). A task is one variant of the model (a batch, an input size, a what-if precision or a rewrite) with
every device it is predicted on: reading the model and rewriting it (the batch and input-size passes with
onnx's strict inference, the fp16 and int8 conversions) are the expensive steps and are done once per variant,
while each device is one analysis of the variant; a task per row would rewrite the model once per device, and a
task per model would serialize its variants on one worker. A task names its model (a path or ``zoo:NAME``) and
the worker reads it, so no model travels through the client; it returns the rows, small values, once. With
``measure`` a task is one variant on one device instead, since a measurement belongs to one machine: on a Dask
cluster it asks for that device's worker resource (``sweep_resources``), so it runs on a worker of that machine.
The rows are put back in the order of the combinations whatever order the tasks finish in, so that a sweep gives
the same rows wherever it runs.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from onnx import ModelProto

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.passes.model_file import Source
from onnxroof.whatif.executors import Executor
from onnxroof.whatif.measuring import check_measurable, is_local, measurement_resources, median_time, one_at_a_time
from onnxroof.whatif.rewrite import RewriteRequest, apply_request
from onnxroof.whatif.task_results import Caught, fitted, in_order, recorded

if TYPE_CHECKING:
    from onnxroof.predict.analysis import Analysis

__all__ = [
    "PRECISION_REWRITES",
    "Sweep",
    "SweepRow",
    "SweepTask",
    "SweepTaskResult",
    "plan",
    "run_task",
    "sweep",
    "sweep_resources",
    "sweep_row",
    "sweep_source",
    "variant_model",
]

# The rewrites a sweep can add as rows, and the request each stands for.
PRECISION_REWRITES: dict[str, RewriteRequest] = {
    "fp16": RewriteRequest(fp16=True, keep_io_types=True),
    "int8-dynamic": RewriteRequest(int8="dynamic"),
    "int8-static": RewriteRequest(int8="static"),
}


@dataclass(frozen=True)
class SweepRow:
    """One combination and its prediction. ``kind`` is "what-if" (precision applied in the analysis) or
    "rewrite" (the graph rewritten to ``precision``); ``precision`` "stored" means the tensors' own dtypes."""

    batch: int
    input_size: str
    precision: str
    kind: str
    device: str
    graph: str
    predicted_time_s: float
    flops: float
    bytes_moved: float
    intensity: float
    bound: str
    uncounted: int = 0  # nodes not counted in full (Totals.uncounted): the row's totals are then lower bounds
    measured_time_s: float | None = None  # measured: the whole model's median time per run on the device's machine

    @property
    def complete(self) -> bool:
        return self.uncounted == 0

    @property
    def throughput(self) -> float:
        """Samples per second at this batch."""
        return self.batch / self.predicted_time_s if self.predicted_time_s else 0.0

    @property
    def error(self) -> float | None:
        """predicted / measured - 1 where the row was measured (above 0: predicted slower than it runs)."""
        return self.predicted_time_s / self.measured_time_s - 1 if self.measured_time_s else None

    def to_dict(self) -> dict[str, Any]:
        """The row's fields with its throughput and completeness; the measured time and the error only where it
        was measured, so that a sweep that measures nothing has the columns it always had."""
        data = {**self.__dict__, "throughput_per_s": self.throughput, "complete": self.complete}
        if self.measured_time_s is None:
            del data["measured_time_s"]
        else:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class Sweep:
    model: str
    rows: tuple[SweepRow, ...]

    @property
    def measured(self) -> bool:
        """Whether the rows were timed (--measure): the renderers then add the measured time and the error."""
        return any(r.measured_time_s is not None for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "rows": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True)
class SweepTask:
    """One variant of a sweep's model and the devices it is predicted on. ``model`` is a path or ``zoo:NAME``,
    read where the task runs, with its weights where ``weights`` (the sweep's choice, the same for every task, so
    that each row is the one a sweep in one process gives); ``batch`` and ``size`` (None: the model's own), and
    the what-if ``precision`` or the ``rewrite`` (None: the stored dtypes) make the variant. With ``measure``
    its one device is also timed there, on the inputs of the .npz at ``feeds_path`` (random where None)."""

    model: str
    batch: int | None
    size: tuple[int, int] | None
    precision: str | None
    rewrite: str | None
    devices: tuple[Device, ...]
    weights: bool = False
    threads: int = 1
    measure: bool = False
    feeds_path: str | None = None


@dataclass(frozen=True)
class SweepTaskResult:
    """What a task sends back: the model's display name, its rows in its devices' order, and the warnings the
    analyses raised, for the client to show."""

    name: str
    rows: tuple[SweepRow, ...]
    warnings: tuple[Caught, ...] = ()


def sweep(
    model: str | os.PathLike[str],
    devices: Sequence[str | Device],
    *,
    batches: Sequence[int] = (),
    sizes: Sequence[tuple[int, int]] = (),
    precisions: Sequence[str] = (),
    rewrites: Sequence[str] = (),
    threads: int = 1,
    measure: bool = False,
    feeds_path: str | os.PathLike[str] | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Sweep:
    """Analyze every combination of ``batches`` x ``sizes`` x (``precisions`` what-ifs and ``rewrites``) on
    every device. An empty ``batches`` or ``sizes`` keeps the model's own; no precision and no rewrite analyzes
    the stored dtypes. With ``measure`` each row is also timed on its device's machine (host profiles only; on
    the inputs at ``feeds_path`` where given). The tasks run through ``executor`` (None: in this process; on a
    Dask cluster give it ``sweep_resources``, so that measurements go to the workers of their devices)."""
    from onnxroof.api import get_device

    targets = [get_device(d, threads) for d in devices]  # resolved (and a bad name refused) before any work
    _check_axes(precisions, rewrites, measure)
    if measure:
        check_measurable(targets, is_local(executor))
    feeds = os.fspath(feeds_path) if feeds_path is not None else None
    axes = (batches, sizes, precisions, rewrites)
    tasks = plan(os.fspath(model), targets, *axes, threads=threads, measure=measure, feeds_path=feeds)
    runner = one_at_a_time(executor) if measure else fitted(executor, len(tasks))
    return _gathered(os.fspath(model), tasks, runner, progress)


def _check_axes(precisions: Sequence[str], rewrites: Sequence[str], measure: bool) -> None:
    """A UserError for an unknown precision or rewrite, and for a what-if precision to measure: no graph runs it."""
    from onnxroof.predict.precision import check_precision

    for p in precisions:
        check_precision(p)
    unknown = [r for r in rewrites if r not in PRECISION_REWRITES]
    if unknown:
        raise UserError(f"unknown rewrite {unknown[0]!r}", "use " + ", ".join(PRECISION_REWRITES))
    if measure and precisions:
        raise UserError(
            f"--measure times graphs that run: --precision {precisions[0]} is a what-if of the analysis alone",
            "use --rewrite fp16,int8-dynamic to time converted graphs, or drop --precision",
        )


def plan(
    model: str,
    devices: Sequence[Device],
    batches: Sequence[int] = (),
    sizes: Sequence[tuple[int, int]] = (),
    precisions: Sequence[str] = (),
    rewrites: Sequence[str] = (),
    *,
    threads: int = 1,
    measure: bool = False,
    feeds_path: str | None = None,
) -> list[SweepTask]:
    """The sweep's tasks in the order of its rows (by batch, input size, precision case, then device): one per
    variant with every device, or where measured one per variant and device."""
    cases: list[tuple[str | None, str | None]] = [(p, None) for p in precisions] or ([] if rewrites else [(None, None)])
    cases += [(None, r) for r in rewrites]
    groups = [(d,) for d in devices] if measure else [tuple(devices)]
    weights = bool(rewrites) or measure  # a conversion needs the weights, and so does a run
    batch_options: list[int | None] = list(batches) or [None]
    size_options: list[tuple[int, int] | None] = list(sizes) or [None]
    return [
        SweepTask(model, batch, size, precision, rewrite, group, weights, threads, measure, feeds_path)
        for batch, size, (precision, rewrite) in itertools.product(batch_options, size_options, cases)
        for group in groups
    ]


def sweep_resources(task: SweepTask) -> dict[str, float]:
    """A task's worker resources on a Dask cluster: a measurement's device (``device:KEY``), nothing to predict."""
    return measurement_resources(task.devices[0]) if task.measure else {}


def _gathered(
    model: str, tasks: Sequence[SweepTask], executor: Executor, progress: Callable[[int, int], None] | None
) -> Sweep:
    """The rows of every task in the tasks' order, whatever order they finish in (task_results.in_order: the
    error and the warnings of a sweep in one process)."""
    total, done = sum(len(t.devices) for t in tasks), 0

    def finished(task: SweepTask) -> None:
        nonlocal done
        done += len(task.devices)
        if progress:
            progress(done, total)

    results = in_order(executor, run_task, tasks, finished)
    rows = tuple(row for result in results for row in result.rows)
    name = results[0].name if results else sweep_source(model, rewrites=False).name
    return Sweep(name, rows)


def run_task(task: SweepTask) -> SweepTaskResult:
    """The task function: the model read where the task runs and rewritten to the variant once, then a row per
    device (an analysis, and with ``measure`` a timing there); the warnings recorded for the client."""
    (name, rows), caught = recorded(lambda: _rows(task))
    return SweepTaskResult(name, rows, caught)


def _rows(task: SweepTask) -> tuple[str, tuple[SweepRow, ...]]:
    """The model's display name and the task's rows, one per device."""
    from onnxroof.api import analyze

    source = sweep_source(task.model, rewrites=task.weights)
    variant = variant_model(source, task.batch, task.size, task.rewrite)
    rows = []
    for device in task.devices:
        analysis = analyze(variant, device, precision=task.precision, threads=task.threads)
        row = sweep_row(variant, analysis, task.precision, task.rewrite)
        if task.measure:
            row = replace(row, measured_time_s=median_time(variant, device, task.feeds_path))
        rows.append(row)
    return source.name, tuple(rows)


def sweep_source(model: str | os.PathLike[str], rewrites: bool) -> Source:
    """The model as a sweep reads it: with its weights where a precision rewrite needs them (fp16 converts them,
    static int8 calibrates on them), without their bytes where only shapes and what-if precisions change."""
    from onnxroof.passes.model_file import read_source

    return read_source(model) if rewrites else _weightless(model)


def variant_model(
    source: Source, batch: int | None, size: tuple[int, int] | None = None, rewrite: str | None = None
) -> ModelProto:
    """The model at ``batch`` and input ``size`` (None: its own), converted by the precision rewrite ``rewrite``
    (a key of PRECISION_REWRITES) where one is given: the batch and input-size passes repair hard-coded shapes or
    refuse, a UserError naming the node. The source itself where nothing changes."""
    base = PRECISION_REWRITES[rewrite] if rewrite else RewriteRequest()
    request = replace(base, batch=batch, input_size=size)
    return source.model if request.empty else apply_request(source, request, compare_outputs=False).result.model


def sweep_row(variant: ModelProto, analysis: Analysis, precision: str | None, rewrite: str | None) -> SweepRow:
    """The row of ``analysis``, the prediction of ``variant`` at the what-if ``precision`` (None: the stored
    dtypes) or of its ``rewrite``: batch and input size read from the variant's first input."""
    shape = _input_shape(variant)
    t = analysis.totals
    return SweepRow(
        batch=shape[0] if shape else 1,
        input_size="x".join(map(str, shape[2:])) if len(shape) == 4 else "-",
        precision=rewrite or precision or "stored",
        kind="rewrite" if rewrite else ("what-if" if precision else "stored"),
        device=analysis.device.spec(),
        graph=analysis.graph,
        predicted_time_s=t.predicted_time_s,
        flops=t.flops,
        bytes_moved=t.bytes_read + t.bytes_written,
        intensity=t.arithmetic_intensity,
        bound=t.bound,
        uncounted=t.uncounted,
    )


def _weightless(model: str | os.PathLike[str]) -> Source:
    """The model without its weights' bytes (a sweep of shapes and what-if precisions needs none)."""
    from onnxroof.load.read import read_model

    proto, name = read_model(model, weight_bytes=False)
    return Source(proto, name, True)


def _input_shape(model: ModelProto) -> tuple[int, ...]:
    """The first graph input's shape (0 for a symbolic dim)."""
    from onnxroof.load.inputs import runtime_inputs

    inputs = runtime_inputs(model.graph)
    return tuple(d.dim_value for d in inputs[0].type.tensor_type.shape.dim) if inputs else ()
