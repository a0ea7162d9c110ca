"""Every rewrite that applies to a model, ranked by the time it is predicted to save on a device.

Each candidate of CANDIDATES is applied to the model; one that does not apply is listed with the pass's reason.
The ones that apply are analyzed on the device and ranked by predicted speedup (time before / time after). On a
calibrated host the prediction is made on the graph onnxruntime runs, so the Casts its CPU provider inserts
around ops without fp16 kernels and the dynamic quantization of int8 convolutions are predicted, not discovered.
With ``measure`` the top candidates are also timed here against the original, beside this machine's prediction.

Each variant is a task run through an executor (``whatif.executors``: this process, a local pool, a Dask
cluster): first the baseline (the model as it is, analyzed on the device, and where measured predicted for this
machine), so that a model that cannot be analyzed is refused before any rewrite, as in one process; then each
candidate (the rewrite and its analysis; a refusal is its result); then each of the best timed (the rewrite made
again where the task runs, predicted for this machine and timed against the original). A task names
its model (a path or ``zoo:NAME``) and reads it where it runs, and sends back numbers and names, never a model:
rewriting again to time is cheaper than carrying the rewritten model back and out again. The timings run one at
a time in this process on a local executor; on a cluster each asks for this machine's device resource
(``explore_resources``). The candidates are put back in their order before they are ranked, so the result is the
same wherever the tasks ran.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from onnx import ModelProto

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.passes import Refused
from onnxroof.whatif.compare import direction_agrees, size_agrees, time_pair
from onnxroof.whatif.executors import Executor
from onnxroof.whatif.measuring import measurement_resources, one_at_a_time
from onnxroof.whatif.rewrite import LWU, RewriteRequest, apply_request
from onnxroof.whatif.task_results import Caught, fitted, in_order, recorded

__all__ = [
    "CANDIDATES",
    "EFFECTS",
    "Candidate",
    "Exploration",
    "ExploreTask",
    "explore",
    "explore_resources",
    "run_task",
    "touched_nodes",
]

# The rewrites explore tries, by the name its table shows.
CANDIDATES: dict[str, RewriteRequest] = {
    "separable": RewriteRequest(separable=()),
    "lwu": RewriteRequest(strides=LWU),
    "fp16": RewriteRequest(fp16=True, keep_io_types=True),
    "int8-dynamic": RewriteRequest(int8="dynamic"),
    "int8-static": RewriteRequest(int8="static"),
}

# What each candidate does to the model's outputs: what a user weighs against its speedup.
EFFECTS: dict[str, str] = {
    "separable": "approximates each kernel (rank-1 per channel); fine-tune after",
    "lwu": "a different network (skips at half resolution); retrain",
    "fp16": "rounds weights and activations to fp16",
    "int8-dynamic": "quantizes weights, activations at run time",
    "int8-static": "quantizes weights and activations (calibrated)",
}


@dataclass(frozen=True)
class Candidate:
    """One rewrite: the layers it touches and its predicted (and, when timed, measured) times before and after.
    ``refused`` holds the reason where it does not apply."""

    name: str
    command: str
    layers: tuple[str, ...] = ()
    before_s: float = 0.0
    after_s: float = 0.0
    bound_after: str = ""
    refused: str | None = None
    host_before_s: float | None = None
    host_after_s: float | None = None
    measured_before_s: float | None = None
    measured_after_s: float | None = None

    @property
    def predicted_speedup(self) -> float:
        return self.before_s / self.after_s if self.after_s else math.nan

    @property
    def measured_speedup(self) -> float | None:
        if self.measured_before_s is None or not self.measured_after_s:
            return None
        return self.measured_before_s / self.measured_after_s

    @property
    def host_speedup(self) -> float | None:
        if self.host_before_s is None or not self.host_after_s:
            return None
        return self.host_before_s / self.host_after_s

    def to_dict(self) -> dict[str, Any]:
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}
        data["predicted_speedup"] = None if self.refused else self.predicted_speedup
        data["host_predicted_speedup"] = self.host_speedup
        data["measured_speedup"] = self.measured_speedup
        if self.measured_speedup is not None and self.host_speedup is not None:
            data["direction_right"] = direction_agrees(self.host_speedup, self.measured_speedup)
            data["size_right"] = size_agrees(self.host_speedup, self.measured_speedup)
        return data


@dataclass(frozen=True)
class Exploration:
    """The candidates ranked; ``graph_only`` where the model's weights are absent, so that every rewrite was made
    on shapes alone (its weights absent too) and those that need values were refused."""

    model: str
    device: str
    graph: str
    baseline_s: float
    candidates: tuple[Candidate, ...]  # those that apply, best first; then those refused
    graph_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "graph": self.graph,
            "baseline_s": self.baseline_s,
            "graph_only": self.graph_only,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def explore(
    model: str | os.PathLike[str],
    device: str,
    *,
    measure: int = 0,
    threads: int = 1,
    only: tuple[str, ...] = (),
    here: str | Device = "host",
    feeds_path: str | os.PathLike[str] | None = None,
    executor: Executor | None = None,
    progress: Callable[[str], None] | None = None,
) -> Exploration:
    """Try every candidate (or those named in ``only``) on ``model`` and rank them on ``device``; with
    ``measure`` N, time the N best here against the prediction for ``here``, this machine's device (its
    calibrated profile by default), on the inputs at ``feeds_path`` where given. The variants run as tasks
    through ``executor`` (None: in this process; on a Dask cluster give it ``explore_resources``)."""
    from onnxroof.api import get_device

    unknown = [name for name in only if name not in CANDIDATES]
    if unknown:
        raise UserError(f"unknown rewrite {unknown[0]!r}", "choose from " + ", ".join(CANDIDATES))
    say = progress or (lambda _: None)
    spec = os.fspath(model)
    target = get_device(device, threads)
    host = get_device(here, threads) if measure else None
    names = only or tuple(CANDIDATES)
    say(f"analyzing {spec} and {len(names)} rewrite(s) on {device}")
    (base,) = _run([ExploreTask(spec, None, target, threads, host)], fitted(executor, 1), lambda _: None)
    assert isinstance(base, _Baseline)  # first: a model that cannot be analyzed is refused before any rewrite
    tasks = [ExploreTask(spec, name, target, threads) for name in names]
    found = _run(tasks, fitted(executor, len(tasks)), lambda i: say(f"rewritten and analyzed {i}/{len(tasks)}"))
    candidates = [c for c in found if isinstance(c, Candidate)]
    applied = [replace(c, before_s=base.predicted_s) for c in candidates if c.refused is None]
    refused = [c for c in candidates if c.refused is not None]
    applied.sort(key=lambda c: -c.predicted_speedup)
    if measure and host is not None:
        if base.graph_only:
            raise UserError(
                f"{base.name} has no weights (graph-only), so its rewrites cannot be timed",
                "put the weight file beside the model, or drop --measure",
            )
        timing = Timing(measure, threads, host, feeds_path)
        applied = _measured(spec, base, applied, timing, one_at_a_time(executor), say)
    return Exploration(base.name, base.device, base.graph, base.predicted_s, tuple(applied + refused), base.graph_only)


@dataclass(frozen=True)
class ExploreTask:
    """One variant explore looks at. ``model`` is a path or ``zoo:NAME``, read where the task runs;
    ``candidate`` the rewrite (None: the model as it is, the baseline), analyzed on ``device``; ``here``, this
    machine's profile where the best are timed (the baseline is then also predicted for it). With ``timed`` the
    candidate is predicted for ``device`` (then this machine's) and timed against the original, on the inputs of
    the .npz at ``feeds_path`` (random where None)."""

    model: str
    candidate: str | None
    device: Device
    threads: int = 1
    here: Device | None = None
    timed: bool = False
    feeds_path: str | None = None


@dataclass(frozen=True)
class _Baseline:
    """What the baseline task sends back: the model's name and graph, its time on the device, whether its weights
    are absent, and its time predicted for this machine where the best are timed."""

    name: str
    device: str
    graph: str
    predicted_s: float
    graph_only: bool
    host_s: float | None = None


@dataclass(frozen=True)
class _Timed:
    """What a timing task sends back: the rewrite's time predicted for this machine, and both models' measured
    times."""

    host_after_s: float
    measured_before_s: float
    measured_after_s: float


@dataclass(frozen=True)
class _Result:
    """A task's value and the warnings its analyses raised, for the client to show."""

    value: _Baseline | Candidate | _Timed
    warnings: tuple[Caught, ...] = ()


def explore_resources(task: ExploreTask) -> dict[str, float]:
    """A task's worker resources on a Dask cluster: a timing's device (``device:KEY``), nothing to predict."""
    return measurement_resources(task.device) if task.timed else {}


def _run(
    tasks: list[ExploreTask], executor: Executor, progress: Callable[[int], None]
) -> list[_Baseline | Candidate | _Timed]:
    """Each task's value in the tasks' order, whatever order they finish in (task_results.in_order: the error
    and the warnings of explore in one process); ``progress(count)`` as each finishes."""
    count = 0

    def finished(_: ExploreTask) -> None:
        nonlocal count
        count += 1
        progress(count)

    return [result.value for result in in_order(executor, run_task, tasks, finished)]


def run_task(task: ExploreTask) -> _Result:
    """The task function: the model read where the task runs, then the baseline, the candidate or its timing;
    the warnings recorded for the client."""
    value, caught = recorded(lambda: _value(task))
    return _Result(value, caught)


def _value(task: ExploreTask) -> _Baseline | Candidate | _Timed:
    """The task's value; a rewrite the pass refuses, or that changes nothing, is a refused Candidate."""
    from onnxroof.api import analyze
    from onnxroof.passes.model_file import read_source

    source = read_source(task.model)
    if task.candidate is None:
        base = analyze(source.model, task.device, threads=task.threads)
        host = None
        if task.here is not None and not source.graph_only:
            host = analyze(source.model, task.here, threads=task.threads).totals.predicted_time_s
        t = base.totals
        return _Baseline(source.name, base.device.key, base.graph, t.predicted_time_s, source.graph_only, host)
    request = CANDIDATES[task.candidate]
    command = " ".join(request.describe())
    try:
        done = apply_request(source, request, compare_outputs=False)
    except Refused as exc:
        return Candidate(task.candidate, command, refused=exc.message)
    if not done.result.changed:
        return Candidate(task.candidate, command, refused="nothing to change")
    after = analyze(done.result.model, task.device, threads=task.threads)
    if task.timed:
        before_s, after_s = time_pair(source.model, done.result.model, threads=task.threads, feeds_path=task.feeds_path)
        return _Timed(after.totals.predicted_time_s, before_s, after_s)
    layers = touched_nodes(source.model, done.result.model)
    return Candidate(task.candidate, command, layers, 0.0, after.totals.predicted_time_s, after.totals.bound)


def touched_nodes(before: ModelProto, after: ModelProto) -> tuple[str, ...]:
    """The nodes of ``before`` that a rewrite changed: gone, or with another op, attributes or inputs, or reading
    or writing a tensor of another dtype (an fp16 conversion keeps every node but changes its tensors)."""
    old_types, new_types = _dtypes(before), _dtypes(after)
    rewritten = {n.name: n for n in after.graph.node}
    touched = []
    for node in before.graph.node:
        new = rewritten.get(node.name)
        same = (
            new is not None
            and new.op_type == node.op_type
            and list(new.input) == list(node.input)
            and list(new.attribute) == list(node.attribute)
            and all(old_types.get(t) == new_types.get(t) for t in list(node.input) + list(node.output))
        )
        if not same:
            touched.append(node.name)
    return tuple(touched)


def _dtypes(model: ModelProto) -> dict[str, int]:
    """Every tensor's element type, after onnx's shape inference on the model without its weights' bytes."""
    import onnx

    from onnxroof.load.read import read_model

    lean, _ = read_model(model, weight_bytes=False)
    inferred = onnx.shape_inference.infer_shapes(lean)
    graph = inferred.graph
    types = {i.name: i.data_type for i in graph.initializer}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    return types


@dataclass(frozen=True)
class Timing:
    """How the best candidates are timed: how many, at how many threads, predicted for which device of this
    machine, on which inputs (random where None)."""

    count: int
    threads: int
    here: str | Device
    feeds_path: str | os.PathLike[str] | None = None


def _measured(
    model: str,
    base: _Baseline,
    ranked: list[Candidate],
    timing: Timing,
    executor: Executor,
    say: Callable[[str], None],
) -> list[Candidate]:
    """The ``timing.count`` best candidates timed here against the original, with this machine's prediction;
    the others as they are."""
    here = timing.here
    assert isinstance(here, Device)
    best = ranked[: timing.count]
    feeds = os.fspath(timing.feeds_path) if timing.feeds_path is not None else None
    tasks = [ExploreTask(model, c.name, here, timing.threads, here, True, feeds) for c in best]
    say(f"timing the {len(tasks)} best against the original")
    done = _run(tasks, executor, lambda i: say(f"timed {i}/{len(tasks)} against the original"))
    out = []
    for candidate, timed in zip(best, done):
        assert isinstance(timed, _Timed)
        out.append(
            replace(
                candidate,
                host_before_s=base.host_s,
                host_after_s=timed.host_after_s,
                measured_before_s=timed.measured_before_s,
                measured_after_s=timed.measured_after_s,
            )
        )
    return out + ranked[timing.count :]
