"""Deploy-time fit: does a model, at a batch and precision, fit a device's memory and meet a latency budget; the
largest batch that does; and which of several devices serves it best.

A check compares a predicted figure with a budget: the latency is the analysis' predicted time (on a calibrated
host, of the graph onnxruntime runs), the memory the estimate of :mod:`onnxroof.predict.memory` (weights plus the
peak of live activations over the execution order; on a host, onnxruntime's order). The memory budget defaults
to the device's memory capacity; a device that lists none and no ``--memory-budget`` leave the memory check out,
and the result says so. On an onnxruntime host the memory is the process's predicted peak: the graph's need scaled
by this host's calibrated session and arena factors (:mod:`onnxroof.ort.memory_calibration`), since onnxruntime
holds transient copies of the weights while it creates a session and grows its arena in chunks. Batch sizes are
rewrites of the model (the batch pass repairs hard-coded shapes), analyzed without their weights' bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from onnx import ModelProto

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.predict.profiles import named_profile, reads_host_memory
from onnxroof.units import Amount

__all__ = [
    "Check",
    "DeviceFit",
    "Fit",
    "MaxBatch",
    "MemoryDetail",
    "Training",
    "device_memory",
    "fit",
    "largest_passing",
    "max_batch",
    "rank_devices",
]

MAX_BATCH_LIMIT = 1 << 16  # the largest batch --max-batch tries
# The most fits the search for it makes: batches 1, 2, 4, ... up to the limit, then halving the last gap.
SEARCH_FITS = 2 * MAX_BATCH_LIMIT.bit_length()


@dataclass(frozen=True)
class Training:
    """Check a training step instead of inference: the optimizer whose state is held and whether the weights are
    trained in mixed precision (fp16 compute, fp32 master weights and optimizer state)."""

    optimizer: str = "adam"
    mixed_precision: bool = False


@dataclass(frozen=True)
class Check:
    """One budget: the predicted value, the budget (None: none given, the check is skipped) and the verdict."""

    name: str
    value: float
    budget: float | None
    unit: str
    budget_unit: str | None = None  # the unit the budget was written in ('ms', 'GiB'), which both are shown in

    @property
    def passed(self) -> bool:
        return self.budget is None or self.value <= self.budget

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "passed": self.passed, "skipped": self.budget is None}


@dataclass(frozen=True)
class Fit:
    """The model at one batch and precision on one device: predicted latency and memory against the budgets."""

    model: str
    device: str
    batch: int
    precision: str
    graph: str
    latency_s: float
    memory_bytes: float
    checks: tuple[Check, ...]
    notes: tuple[str, ...] = ()
    training: Any = None  # the TrainingEstimate behind a training check
    memory: MemoryDetail | None = None  # where the memory goes (a single fit's, not every fit of a search)
    uncounted: int = 0  # nodes not counted in full (Totals.uncounted): the latency is then a lower bound

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def complete(self) -> bool:
        return self.uncounted == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "batch": self.batch,
            "precision": self.precision,
            "graph": self.graph,
            "latency_s": self.latency_s,
            "memory_bytes": self.memory_bytes,
            "passed": self.passed,
            "complete": self.complete,
            "uncounted": self.uncounted,
            "checks": [c.to_dict() for c in self.checks],
            "notes": list(self.notes),
            "training": self.training.to_dict() if self.training is not None else None,
            "memory": self.memory.to_dict() if self.memory is not None else None,
        }


@dataclass(frozen=True)
class MemoryDetail:
    """Where the memory of one fit goes: the estimate in the order that counts on the device (onnxruntime's on a
    host, the stored one elsewhere), with the peak's node and what is live there; the stored order's peak and the
    best order found beside it; and paper 004's footprint (weights, inputs and every activation, nothing reused)."""

    estimate: Any  # MemoryEstimate
    stored_peak_bytes: int
    best_peak_bytes: int
    engine_order: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate.to_dict(),
            "stored_order_total_bytes": self.stored_peak_bytes,
            "best_order_total_bytes": self.best_peak_bytes,
            "order": "onnxruntime" if self.engine_order else "stored",
        }


@dataclass(frozen=True)
class MaxBatch:
    """The largest batch within the budgets (0: not even batch 1), the budget that stops the next one, and the fit
    at that batch."""

    batch: int
    stopped_by: str
    best: Fit | None
    first_failing: Fit | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "stopped_by": self.stopped_by,
            "fit": self.best.to_dict() if self.best else None,
            "first_failing": self.first_failing.to_dict() if self.first_failing else None,
        }


@dataclass(frozen=True)
class DeviceFit:
    """One device of a ranking: the fit at the asked batch and the largest fitting batch with its throughput."""

    fit: Fit
    largest: MaxBatch

    @property
    def throughput(self) -> float:
        """Samples per second at the largest fitting batch (0 where none fits)."""
        best = self.largest.best
        return best.batch / best.latency_s if best is not None and best.latency_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.fit.to_dict(), "max_batch": self.largest.to_dict(), "throughput_per_s": self.throughput}


# ------------------------------------------------------------------------------------------------------ fitting

ModelSource = str | os.PathLike[str] | ModelProto
# A budget: seconds or bytes, or an Amount (units.parse_seconds, units.parse_bytes), which is shown in its own unit.
Budget = float | Amount | None


def fit(
    model: ModelSource,
    device: str | Device,
    *,
    batch: int | None = None,
    precision: str | None = None,
    latency_budget: Budget = None,
    memory_budget: Budget = None,
    threads: int = 1,
    training: Training | None = None,
) -> Fit:
    """The model at ``batch`` (None: its own) and ``precision`` on ``device``, checked against the budgets (the
    memory budget defaults to the device's memory capacity) and with where its memory goes; with ``training``, a
    training step's time and memory instead of an inference's."""
    base, name = _weightless(model)
    budgets = _Budgets(precision, latency_budget, memory_budget, threads, training)
    return _fit_at(base, name, _device(device, threads), batch, budgets, detail=True)


def max_batch(
    model: ModelSource,
    device: str | Device,
    *,
    precision: str | None = None,
    latency_budget: Budget = None,
    memory_budget: Budget = None,
    threads: int = 1,
    training: Training | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MaxBatch:
    """The largest batch whose predicted latency and memory stay within the budgets: doubling from 1 until a
    budget fails, then bisecting. Latency and memory grow with the batch, so the first failure bounds it.
    ``progress(done, total)`` is called after each fit, ``total`` being the most the search can make
    (SEARCH_FITS), and once more with ``done == total`` when it ends."""
    target = _device(device, threads)
    if latency_budget is None and default_memory_budget(target, memory_budget) is None:
        raise UserError(
            f"{target.key} lists no memory capacity and no budget was given: every batch fits",
            "pass --memory-budget or --latency-budget",
        )
    base, name = _weightless(model)
    budgets = _Budgets(precision, latency_budget, memory_budget, threads, training)
    return _largest_batch(base, name, target, budgets, progress)


def rank_devices(
    model: ModelSource,
    devices: Sequence[str | Device],
    *,
    batch: int | None = None,
    precision: str | None = None,
    latency_budget: Budget = None,
    memory_budget: Budget = None,
    threads: int = 1,
    training: Training | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[DeviceFit, ...]:
    """Every device's fit at ``batch`` and its largest fitting batch, ranked: those that fit first, by predicted
    latency; then those that do not. The model is read once for all of them. ``progress(done, total)`` is called
    before the first device and after each."""
    base, name = _weightless(model)
    budgets = _Budgets(precision, latency_budget, memory_budget, threads, training)
    ranked = []
    if progress:
        progress(0, len(devices))
    for spec in devices:
        target = _device(spec, threads)
        at_batch = _fit_at(base, name, target, batch, budgets)
        if latency_budget is None and default_memory_budget(target, memory_budget) is None:
            largest = MaxBatch(0, "no budget to stop it (the device lists no memory capacity)", None, None)
        else:
            largest = _largest_batch(base, name, target, budgets)
        ranked.append(DeviceFit(at_batch, largest))
        if progress:
            progress(len(ranked), len(devices))
    return tuple(sorted(ranked, key=lambda d: (not d.fit.passed, d.fit.latency_s)))


@dataclass(frozen=True)
class _Budgets:
    """What every fit of one request shares: the precision, the budgets, the threads and the training options."""

    precision: str | None
    latency: Budget
    memory: Budget
    threads: int
    training: Training | None


def _largest_batch(
    base: ModelProto,
    name: str,
    device: Device,
    budgets: _Budgets,
    progress: Callable[[int, int], None] | None = None,
) -> MaxBatch:
    """The search of max_batch on a model already read."""
    seen: dict[int, Fit] = {}

    def at(n: int) -> Fit:
        if n not in seen:
            seen[n] = _fit_at(base, name, device, n, budgets)
            if progress:
                progress(len(seen), SEARCH_FITS)
        return seen[n]

    found = _search(at)
    if progress:
        progress(SEARCH_FITS, SEARCH_FITS)
    return found


class Passing(Protocol):
    """A fit of any kind: its checks and whether they all pass."""

    @property
    def passed(self) -> bool: ...

    @property
    def checks(self) -> tuple[Check, ...]: ...


FitT = TypeVar("FitT", bound=Passing)


def largest_passing(at: Callable[[int], FitT], limit: int) -> tuple[int, str, FitT | None, FitT | None]:
    """The largest n in 1 .. ``limit`` whose fit ``at(n)`` passes, found by doubling from 1 until a fit fails, then
    bisecting the last gap (the fits' figures grow with n, so the first failure bounds it): (n, what stops n + 1,
    the fit at n, the first failing fit), n 0 where even 1 fails."""
    if not at(1).passed:
        return 0, stopper(at(1)), None, at(1)
    good, bad = 1, None
    while bad is None:
        trial = min(good * 2, limit)
        if trial == good:
            return good, f"the search limit ({limit})", at(good), None
        if at(trial).passed:
            good = trial
        else:
            bad = trial
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if at(middle).passed else (good, middle)
    return good, stopper(at(bad)), at(good), at(bad)


def _search(at: Callable[[int], Fit]) -> MaxBatch:
    return MaxBatch(*largest_passing(at, MAX_BATCH_LIMIT))


def _device(device: str | Device, threads: int) -> Device:
    from onnxroof.api import get_device

    return device if isinstance(device, Device) else get_device(device, threads)


def _weightless(model: ModelSource) -> tuple[ModelProto, str]:
    from onnxroof.load.read import read_model

    return read_model(model, weight_bytes=False)


def default_memory_budget(device: Device, budget: Budget) -> Budget:
    """The budget given, else the device's memory capacity (None where it lists none)."""
    if budget is not None:
        return budget
    return device.memory_capacity.value if device.memory_capacity is not None else None


def budget_check(name: str, value: float, budget: Budget, unit: str) -> Check:
    """A check of ``value`` against ``budget``, which keeps the unit an Amount was written in."""
    if isinstance(budget, Amount):
        return Check(name, value, budget.value, unit, budget.unit)
    return Check(name, value, budget, unit)


def stopper(failed: Passing) -> str:
    """The budgets a failing fit misses, named."""
    names = [c.name for c in failed.checks if not c.passed]
    return " and ".join(names) + (" budget" if len(names) == 1 else " budgets")


def _fit_at(
    base: ModelProto, name: str, device: Device, batch: int | None, budgets: _Budgets, detail: bool = False
) -> Fit:
    """One fit of the model (read without its weights' bytes) at ``batch``; with ``detail``, where its memory goes.
    On an onnxruntime host the graph onnxruntime runs is built once and serves both the latency and the memory."""
    model = base if batch is None else _rebatched(base, batch)
    budget = default_memory_budget(device, budgets.memory)
    notes = [] if budget is not None else [f"{device.key} lists no memory capacity: pass --memory-budget to check it"]
    if budgets.training is not None:
        return _training_fit(model, name, device, budgets, budget, notes)
    from onnxroof.api import analyze

    precision = budgets.precision
    graph = _memory_graph(model, device)
    analysis = analyze(graph, device, precision=precision, threads=budgets.threads)
    memory, total, said = device_memory(graph, device, precision, budgets.threads)
    notes += said
    engine = named_profile(device) is not None
    time_s = analysis.totals.predicted_time_s
    checks = (budget_check("latency", time_s, budgets.latency, "s"), budget_check("memory", total, budget, "B"))
    where = _memory_detail(model, graph, memory, engine, precision) if detail else None
    return Fit(
        name,
        device.tag(),
        _batch_of(model),
        analysis.precision,
        analysis.graph,
        time_s,
        total,
        checks,
        tuple(notes),
        memory=where,
        uncounted=analysis.totals.uncounted,
    )


def device_memory(graph: Any, device: Device, precision: str | None, threads: int = 1) -> tuple[Any, float, list[str]]:
    """The memory ``graph`` (the graph the device runs: ``api.prediction_graph``) needs on ``device`` at the
    what-if ``precision``: (the estimate over the graph's order, the bytes checked against a budget, notes). The
    bytes are the estimate's weights plus peak of live activations, or on an onnxruntime host the process's
    predicted peak (this host's calibrated session and arena factors, calibrated first where none are cached)."""
    from onnxroof.predict.memory import estimate_memory

    memory = estimate_memory(graph, precision=precision)
    notes = []
    if memory.lower_bound:
        notes.append(f"{len(memory.unknown)} tensor(s) of unknown shape count 0 bytes: the memory is a lower bound")
    total: float = memory.total_bytes
    if reads_host_memory(device):
        from onnxroof.ort.memory_calibration import host_memory_factors
        from onnxroof.predict.process_memory import process_peak_bytes, weights_by_kind

        factors = host_memory_factors(threads)
        total = process_peak_bytes(memory, weights_by_kind(graph, precision=precision), factors)
        notes.append(
            f"memory is onnxruntime's predicted process peak: the graph's need ({memory.total_bytes / 1e6:.1f} MB) "
            "with this host's calibrated session and arena factors (docs/accuracy.md says how close it comes)"
        )
    return memory, total, notes


def _memory_detail(model: ModelProto, graph: Any, counted: Any, engine: bool, precision: str | None) -> MemoryDetail:
    """Where the memory goes: ``counted`` (the estimate on ``graph``, the order that counts on the device) beside
    the stored order's total and the best order's found on the stored graph (``graph`` itself off an engine)."""
    from onnxroof.load import load_graph
    from onnxroof.predict.memory import best_order, estimate_memory

    stored_graph = load_graph(model) if engine else graph
    stored = estimate_memory(stored_graph, precision=precision) if engine else counted
    best = estimate_memory(stored_graph, precision=precision, order=best_order(stored_graph, precision=precision))
    return MemoryDetail(counted, stored.total_bytes, best.total_bytes, engine)


def _rebatched(model: ModelProto, n: int) -> ModelProto:
    from onnxroof.passes.batch import batch as rebatch

    return rebatch(model, n).model


def _training_fit(
    model: ModelProto, name: str, device: Device, budgets: _Budgets, memory_budget: Budget, notes: list[str]
) -> Fit:
    """A training step of the exported graph (a training framework runs the model as exported, not onnxruntime's
    inference graph): step time and the memory of weights, gradients, optimizer state and kept activations."""
    from onnxroof.load import load_graph
    from onnxroof.predict.training import estimate_training

    training = budgets.training or Training()
    step = estimate_training(
        load_graph(model),
        device,
        optimizer=training.optimizer,
        mixed_precision=training.mixed_precision,
        precision=budgets.precision,
    )
    memory = step.memory.total
    checks = (
        budget_check("step time", step.step_time_s, budgets.latency, "s"),
        budget_check("memory", memory, memory_budget, "B"),
    )
    return Fit(
        name,
        device.tag(),
        _batch_of(model),
        step.precision,
        "as-exported",
        step.step_time_s,
        memory,
        checks,
        tuple(notes),
        step,
    )


def _memory_graph(model: ModelProto, device: Device) -> Any:
    """The graph whose execution order the memory estimate follows: onnxruntime's optimized graph on a calibrated
    host, the model as stored elsewhere."""
    if named_profile(device) is not None:
        from onnxroof.ort.optimized import engine_graph

        return engine_graph(model, device)
    from onnxroof.load import load_graph

    return load_graph(model)


def _batch_of(model: ModelProto) -> int:
    """The first graph input's leading dim (1 when symbolic or absent)."""
    from onnxroof.load.inputs import runtime_inputs

    inputs = runtime_inputs(model.graph)
    dims = inputs[0].type.tensor_type.shape.dim if inputs else []
    return int(dims[0].dim_value) if dims and dims[0].dim_value > 0 else 1
