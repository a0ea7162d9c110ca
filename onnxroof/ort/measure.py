"""Time a whole model with onnxruntime: batched repetitions, robust statistics, and a word when the machine is busy.

Each sample times a batch of back-to-back runs and divides by the batch size, so that timer resolution and the
per-call noise of the Python binding do not dominate models that run in microseconds. The result says which
provider really ran, what was filled in for absent weights, and whether other load or a wide spread between
repetitions makes the numbers doubtful.

At optimization level "disable" onnxruntime folds nothing, so weights that a model stores as ConstantOfShape of a
constant shape (onnx's "light" models do) would be refilled, and timed, on every run; they are turned into
initializers first, since the analysis counts them as weights. Other nodes computed only from weights do run at
that level, as the user asked; a note says how many. Measuring writes no file, so an interrupt leaves nothing.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, numpy_helper

from onnxroof.errors import UserError, first_line
from onnxroof.ir import DEFAULT_DOMAINS
from onnxroof.load.model_spec import ModelSpec, Source
from onnxroof.ort.proc import cpu_ticks
from onnxroof.ort.session_spec import DEFAULT_SESSION, SessionSpec
from onnxroof.ort.sessions import RunnableModel

MIN_SAMPLE_S = 0.01
"""A timed batch lasts at least this long, so that the fixed cost of one call (the Python binding, the clock
reads, scheduler jitter) is a small share of a sample even for a model that runs in microseconds."""

MIN_SAMPLES = 3
"""Fewer samples than this give no meaningful median or spread."""

SPREAD_BOUND = 0.2
"""Warn when (p90 - min) / median exceeds this. A deterministic model does the same work on every run, so on a
quiet machine its batched samples differ by little; a wider spread means something else (other processes,
frequency scaling, swapping) slowed a sizeable share of the samples, so even the median is in doubt."""

OTHERS_LOAD_BOUND = 0.5
"""Warn when other processes keep busy more than this share of the cores the measurement does not use (half a
core when it uses them all). Beyond that they compete for shared caches, memory bandwidth and turbo headroom,
and the scheduler starts taking cores away from the measured threads."""

OWN_CPU_BOUND = 0.9
"""With one thread on the CPU provider the process should be on a core for nearly all of the wall-clock time;
below this share it is being descheduled in favour of other work."""

MIN_LOAD_WINDOW_S = 0.2
"""/proc/stat counts in clock ticks (USER_HZ, 1/100 s on most architectures, see proc(5)): shorter measurements
cannot tell load apart."""

_DISABLE_FILLS_NOTE = (
    "opt level disable: {count} ConstantOfShape weight(s) stored as initializers before timing, so that they "
    "are not recomputed as if they were work"
)
_DISABLE_WEIGHT_NODES_NOTE = (
    "opt level disable: {count} node(s) computed only from weights run on every call and are timed "
    "(onnxruntime folds them at the other levels; the analysis counts them as folded)"
)


@dataclass(frozen=True)
class Measurement:
    """Per-run times of a whole model (from ``samples_s``, each the mean of ``runs_per_sample`` runs) and how
    they were obtained."""

    model: str
    provider: str
    requested_provider: str
    threads: int
    opt_level: str
    warmup: int
    repeat: int
    runs_per_sample: int
    median_s: float
    min_s: float
    max_s: float
    p90_s: float
    fast_s: float  # the idle-machine estimate: mean of the fastest eighth of the samples (see fast_estimate)
    samples_s: tuple[float, ...]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the fields above, tuples as lists."""
        data = asdict(self)
        for key in ("samples_s", "notes", "warnings"):
            data[key] = list(data[key])
        return data


# -------------------------------------------------------------------------------------------------------------
# Statistics and checks (pure)


def summarize(samples: Sequence[float]) -> tuple[float, float, float, float]:
    """(median, min, max, p90) of per-run times; always ordered min <= median <= p90 <= max."""
    values = np.asarray(samples, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no samples")
    median, p90 = np.percentile(values, [50, 90])
    return float(median), float(values.min()), float(values.max()), float(p90)


def fast_estimate(samples: Sequence[float]) -> float:
    """The time a run takes on an otherwise idle machine: the mean of the fastest eighth of ``samples``.

    Timing noise from other work only ever adds time, so the fastest runs are the least disturbed (Chen and
    Revels, "Robust benchmarking in noisy environments", 2016, take the minimum for this reason); averaging the
    fastest eighth rather than taking the single minimum keeps one lucky sample from setting the figure.
    Calibration measures its ceilings the same way, so predictions and measurements are read on one clock.
    """
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    head = ordered[: max(1, len(ordered) // 8)]
    return sum(head) / len(head)


def runs_per_sample(run_s: float, min_sample_s: float = MIN_SAMPLE_S) -> int:
    """How many back-to-back runs make a timed batch of at least ``min_sample_s``, given one run's time."""
    if run_s <= 0:
        return max(1, math.ceil(min_sample_s / 1e-7))
    return max(1, math.ceil(min_sample_s / run_s))


def spread_warning(samples: Sequence[float], bound: float = SPREAD_BOUND) -> str | None:
    """A warning when the repetitions disagree by more than ``bound`` ((p90 - min) / median), else None."""
    if len(samples) < MIN_SAMPLES:
        return None
    median, low, _, p90 = summarize(samples)
    spread = (p90 - low) / median if median > 0 else 0.0
    if spread <= bound:
        return None
    return (
        f"repetitions spread by {spread:.0%} ((p90 - min) / median, more than {bound:.0%}): other load or "
        "frequency scaling disturbed the timing; re-run on a quiet machine or trust min_s more than median_s"
    )


def load_warnings(
    wall_s: float,
    own_cpu_s: float,
    machine_busy_s: float | None,
    cpus: int,
    threads: int,
    on_cpu: bool,
    idle_s: float = 0.0,
) -> list[str]:
    """Warnings about other load during a measurement of ``wall_s`` seconds.

    ``own_cpu_s`` is this process's CPU time over the window, ``machine_busy_s`` the busy time of all ``cpus``
    cores together (None where the system does not say). Other processes' load is the machine's busy time minus
    ours; descheduling shows as a single-threaded CPU run that got less than OWN_CPU_BOUND of a core of the time
    it was running (``idle_s`` of the window it spent idle on purpose, between spread samples).
    """
    messages: list[str] = []
    if wall_s < MIN_LOAD_WINDOW_S:
        return messages
    if machine_busy_s is not None:
        others = max(0.0, (machine_busy_s - own_cpu_s) / wall_s)
        spare = max(0, cpus - threads)
        if others > OTHERS_LOAD_BOUND * max(spare, 1):
            messages.append(
                f"other processes kept {others:.1f} of {cpus} CPU cores busy during the measurement "
                f"({threads} thread(s) measured): times may be inflated; measure on an idle machine"
            )
    if on_cpu and threads == 1 and wall_s - idle_s >= MIN_LOAD_WINDOW_S:
        share = own_cpu_s / (wall_s - idle_s)
        if share < OWN_CPU_BOUND:
            messages.append(
                f"the measured thread ran only {share:.0%} of the wall-clock time: other work took the CPU "
                "away, so times may be inflated"
            )
    return messages


def _machine_busy() -> tuple[float, int] | None:
    """(busy seconds of all cores since boot, number of cores) from /proc/stat; None where it is absent."""
    try:
        hertz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    ticks = cpu_ticks()
    return None if ticks is None else (ticks.busy / hertz, ticks.cpus)


# -------------------------------------------------------------------------------------------------------------
# Weights stored as ConstantOfShape


def materialize_weight_fills(model: ModelProto) -> int:
    """Replace, in place, every top-level ConstantOfShape whose shape is an initializer by an initializer of
    its value. Returns how many were replaced.

    Some models (onnx's bundled "light" models among them) store their weights as ConstantOfShape of a constant
    shape to stay small. onnxruntime folds those at every optimization level but "disable", where they would
    run, and be timed, on every call; the analysis counts them as weights, so they are weights here too.
    """
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    kept: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = []
    for node in graph.node:
        is_fill = node.op_type == "ConstantOfShape" and node.domain in DEFAULT_DOMAINS and bool(node.input)
        if not is_fill or node.input[0] not in initializers:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(initializers[node.input[0]]).reshape(-1))
        value_attr = next((a.t for a in node.attribute if a.name == "value"), None)
        fill = numpy_helper.to_array(value_attr).reshape(-1)[0] if value_attr is not None else np.float32(0)
        added.append(numpy_helper.from_array(np.full(shape, fill, dtype=np.asarray(fill).dtype), node.output[0]))
    if not added:
        return 0
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(added)
    if model.ir_version < 4:  # IR 3 lists every initializer among the graph inputs
        for tensor in added:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    return len(added)


def weight_only_nodes(model: ModelProto) -> int:
    """How many top-level nodes the analysis counts as folded (computed from weights only), Constant excluded:
    the nodes onnxruntime runs on every call when its optimizations are disabled."""
    from onnxroof.load import graph_nodes

    nodes = graph_nodes(model.graph)
    return sum(1 for n in nodes if n.folded and n.op_type != "Constant")


# -------------------------------------------------------------------------------------------------------------
# Measuring


def measure(
    model: ModelSpec | RunnableModel | Source,
    session: SessionSpec = DEFAULT_SESSION,
    *,
    warmup: int = 5,
    repeat: int = 30,
    batch: int | None = None,
    spread_s: float = 0.0,
    feeds_path: str | os.PathLike | None = None,
    timeout_s: float = 300.0,
    progress: Callable[[int, int], None] | None = None,
    between: Callable[[], None] | None = None,
    feeds: Mapping[str, Any] | None = None,
) -> Measurement:
    """Time the whole model in one session of ``session``: ``warmup`` untimed runs, then ``repeat`` samples of
    ``batch`` runs each.

    ``batch`` (runs per sample) is chosen so that a sample lasts at least MIN_SAMPLE_S when not given.
    ``spread_s`` spreads the samples evenly over at least that many seconds, idling between them: on a shared
    machine other work comes and goes in phases of seconds, and spread samples catch the quiet moments. Inputs are
    random unless ``feeds_path`` names an .npz of them or ``feeds`` are given (already loaded); the model spec's
    values (``--value``) feed the inputs they name. Sampling stops when ``timeout_s`` has passed (checked
    between batches) with a warning, or a UserError when fewer than MIN_SAMPLES samples were taken.
    ``progress(done, total)`` is called after each sample, ``between()`` too (untimed: see time_runs; the model's
    session then parks its threads when a run returns). Nothing is written to disk. ``model`` may be a
    RunnableModel already loaded; it is not modified.
    """
    from onnxroof.ort.sessions import load_feeds, make_session, random_feeds, runnable_model

    _check_counts(warmup=warmup, repeat=repeat, batch=batch, timeout_s=timeout_s, spread_s=spread_s)
    runnable = model if isinstance(model, RunnableModel) else runnable_model(model)
    proto = runnable.model
    if session.opt_level == "disable":  # prepare_for_level rewrites in place: keep the caller's copy as it is
        proto = ModelProto()
        proto.CopyFrom(runnable.model)
    notes = list(runnable.notes) + prepare_for_level(proto, session.opt_level)
    if feeds is None:
        feeds = load_feeds(feeds_path, runnable) if feeds_path is not None else random_feeds(runnable)
    # With a reference timed between the samples, two sessions take turns: the model's pool parks when a run
    # returns, as the reference's does, or its threads would keep spinning through the reference's runs and take
    # the cores the reference is timed on.
    made, actual = make_session(proto, session, park_when_idle=between is not None)
    timing = time_runs(
        checked_run(made, feeds),
        warmup=warmup,
        repeat=repeat,
        batch=batch,
        timeout_s=timeout_s,
        progress=progress,
        spread_s=spread_s,
        between=between,
    )
    median, low, high, p90 = summarize(timing.samples)
    requested = session.provider_name
    warnings = [f"asked for {requested}, ran on {actual}"] if actual != requested else []
    warnings.extend(timing.warnings)
    spread = spread_warning(timing.samples)
    if spread:
        warnings.append(spread)
    on_cpu = actual == "CPUExecutionProvider"
    warnings.extend(
        load_warnings(
            timing.wall_s, timing.own_cpu_s, timing.machine_busy_s, timing.cpus, session.threads, on_cpu, timing.idle_s
        )
    )
    return Measurement(
        model=runnable.name,
        provider=actual,
        requested_provider=requested,
        threads=session.threads,
        opt_level=session.opt_level,
        warmup=timing.warmup,
        repeat=len(timing.samples),
        runs_per_sample=timing.runs_per_sample,
        median_s=median,
        min_s=low,
        max_s=high,
        p90_s=p90,
        fast_s=fast_estimate(timing.samples),
        samples_s=tuple(timing.samples),
        notes=tuple(notes),
        warnings=tuple(warnings),
    )


def prepare_for_level(model: ModelProto, opt_level: str) -> list[str]:
    """Adjust a runnable copy, in place, for the optimization level it will run at, and say what was done.

    Only "disable" needs anything: weights stored as ConstantOfShape become initializers (onnxruntime folds
    them at every other level), and nodes computed only from weights, which then run on every call, are counted.
    """
    if opt_level != "disable":
        return []
    notes = []
    filled = materialize_weight_fills(model)
    if filled:
        notes.append(_DISABLE_FILLS_NOTE.format(count=filled))
    remaining = weight_only_nodes(model)
    if remaining:
        notes.append(_DISABLE_WEIGHT_NODES_NOTE.format(count=remaining))
    return notes


# Output types numpy has no dtype for: onnxruntime's run() cannot return them as arrays.
_NON_NUMPY_OUTPUTS = (
    "tensor(bfloat16)",
    "tensor(float8",
    "tensor(int4)",
    "tensor(uint4)",
    "tensor(float4",
    "tensor(int2)",
    "tensor(uint2)",
)


def checked_run(session: Any, feeds: Mapping[str, Any]) -> Callable[[], None]:
    """One run of an onnxruntime session as onnxroof times it, as a function; a failure of the model itself
    becomes a UserError.

    The run is ``session.run``, as calibration times it, unless an output has a type numpy lacks (bfloat16,
    float8, sub-byte): ``run`` cannot return those, so the run keeps its outputs as OrtValues instead.
    """
    if not any(o.type.startswith(_NON_NUMPY_OUTPUTS) for o in session.get_outputs()):
        return lambda: _checked(session.run, None, feeds)
    from onnxroof.ort.sessions import ort

    ort_value = ort().OrtValue
    values = {k: v if isinstance(v, ort_value) else ort_value.ortvalue_from_numpy(v) for k, v in feeds.items()}
    names = [o.name for o in session.get_outputs()]
    return lambda: _checked(session.run_with_ort_values, names, values)


def _checked(run: Callable[..., Any], *args: Any) -> None:
    """``run(*args)``, with onnxruntime's failure of the model turned into a UserError."""
    try:
        run(*args)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidArgument/RuntimeException types
        raise UserError(
            f"onnxruntime failed while running the model: {first_line(exc)}",
            "check that the model runs with onnxruntime on inputs of these shapes (or pass real inputs as an .npz)",
        ) from exc


def _check_counts(*, warmup: int, repeat: int, batch: int | None, timeout_s: float, spread_s: float = 0.0) -> None:
    """UserErrors for settings that cannot give a measurement (the session's are checked by its spec)."""
    if warmup < 0:
        raise UserError(f"warm-up runs cannot be negative, got {warmup}", "pass --warmup 0 or more")
    if repeat < MIN_SAMPLES:
        raise UserError(f"{repeat} repetition(s) give no median or spread", f"pass --repeat {MIN_SAMPLES} or more")
    if batch is not None and batch < 1:
        raise UserError(f"runs per sample must be at least 1, got {batch}", "leave it out to choose it automatically")
    if not timeout_s > 0:
        raise UserError(f"the timeout must be positive, got {timeout_s}", "pass --timeout in seconds, e.g. 300")
    if not spread_s >= 0:
        raise UserError(
            f"the spread must be zero or more seconds, got {spread_s}", "pass --spread 0 to sample back to back"
        )
    if spread_s >= timeout_s:
        raise UserError(
            f"a {spread_s:g} s spread does not fit in the {timeout_s:g} s timeout", "lower --spread or raise --timeout"
        )


@dataclass(frozen=True)
class _Timing:
    """Raw result of the timing loop: per-run samples, what was done, and the load over the sampling window."""

    samples: list[float]
    warmup: int
    runs_per_sample: int
    warnings: list[str]
    wall_s: float
    own_cpu_s: float
    machine_busy_s: float | None
    cpus: int
    idle_s: float = 0.0  # time spent idle between spread samples


def time_runs(
    run_once: Callable[[], None],
    *,
    warmup: int,
    repeat: int,
    batch: int | None,
    timeout_s: float,
    progress: Callable[[int, int], None] | None,
    spread_s: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
    between: Callable[[], None] | None = None,
) -> _Timing:
    """Warm up, size the batches, take the samples; stops at the deadline. ``run_once`` runs the model once;
    ``clock`` is the wall clock in seconds and ``sleep`` idles for a while. With ``spread_s``, sample ``i`` starts
    no earlier than ``i * spread_s / repeat`` seconds after the first, and one untimed run after each idle gap
    warms the model again: the samples spread the steady state over the window, not cold starts. ``between`` is
    called after every sample, outside its timing (a reference kernel timed in the same moments)."""

    def timed() -> float:
        """One run's wall time."""
        start = clock()
        run_once()
        return clock() - start

    deadline = clock() + timeout_s
    warm_times: list[float] = []
    while len(warm_times) < warmup and (not warm_times or clock() < deadline):
        warm_times.append(timed())
        _check_single_run(warm_times[-1], timeout_s, warmup)
    samples: list[float] = []
    if batch is None and warm_times:
        # The first run pays for allocations and lazy initialization; the fastest later one is the steady state.
        batch = runs_per_sample(min(warm_times[1:] or warm_times))
    elif batch is None:  # no warm-up asked for: the first sample is one run, and sizes the others
        samples.append(timed())
        _check_single_run(samples[0], timeout_s, warmup)
        batch = runs_per_sample(samples[0])
        if progress is not None:
            progress(1, repeat)

    cpu_start, machine_start, wall_start = time.process_time(), _machine_busy(), clock()
    idle = 0.0
    while len(samples) < repeat:
        if spread_s > 0:
            wait = min(wall_start + len(samples) * spread_s / repeat - clock(), deadline - clock())
            if wait > 0:
                before = clock()
                sleep(wait)
                idle += clock() - before
                run_once()  # idling lets caches, branch predictors and clocks go cold: warm them again, untimed
        if clock() > deadline:
            break
        batch_start = clock()
        for _ in range(batch):
            run_once()
        elapsed = clock() - batch_start
        if batch == 1:
            _check_single_run(elapsed, timeout_s, warmup)
        samples.append(elapsed / batch)
        if between is not None:
            between()
        if progress is not None:
            progress(len(samples), repeat)
    wall = clock() - wall_start
    own_cpu = time.process_time() - cpu_start
    machine_end = _machine_busy()
    machine_busy = machine_end[0] - machine_start[0] if machine_start and machine_end else None
    cpus = machine_end[1] if machine_end else (os.cpu_count() or 1)
    if machine_busy is None and hasattr(os, "getloadavg"):
        machine_busy = os.getloadavg()[0] * wall  # coarse: the last minute's average run queue

    warnings: list[str] = []
    if len(samples) < repeat:
        per_run = float(np.median(samples)) if samples else min(warm_times, default=0.0)
        if len(samples) < MIN_SAMPLES:
            needed = (len(warm_times) + MIN_SAMPLES * batch) * per_run
            raise UserError(
                f"only {len(samples)} of {repeat} samples fit in the {timeout_s:g} s timeout",
                f"raise --timeout to at least {math.ceil(needed * 1.5 + 1)} s, or lower --warmup/--repeat",
            )
        warnings.append(f"stopped at the {timeout_s:g} s timeout after {len(samples)} of {repeat} samples")
    return _Timing(samples, len(warm_times), batch, warnings, wall, own_cpu, machine_busy, cpus, idle)


def _check_single_run(run_s: float, timeout_s: float, warmup: int) -> None:
    """A UserError when one run alone outlasts the timeout: no sample could ever be taken."""
    if run_s > timeout_s:
        needed = (warmup + MIN_SAMPLES) * run_s * 1.5
        raise UserError(
            f"one run took {run_s:.3g} s, longer than the {timeout_s:g} s timeout",
            f"raise --timeout (at least {math.ceil(needed)} s for {warmup} warm-up runs and {MIN_SAMPLES} samples)",
        )
