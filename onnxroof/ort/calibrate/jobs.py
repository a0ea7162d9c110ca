"""The calibration's timing jobs: each holds the onnxruntime sessions of one benchmark for the whole calibration,
runs them once a pass, and reads what they measured as samples (a node of the optimized graph and its time).

- ``Profiled``: onnxruntime's profiler gives each node's kernel time in each timed run.
- ``Chain``: the wall clock times chains of one node at two lengths; the slope is one node's time, its dispatch
  included.
- ``EpiloguePair``: a convolution profiled with Relu and with Clip; the difference is the Clip's pass.
- ``Reference``: the reference block (``onnxroof.ort.reference``), timed as validation times it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx

from onnxroof.costs import Cost, NodeView, compute_cost, node_view
from onnxroof.ir import UnknownShape
from onnxroof.ort import sessions
from onnxroof.ort.calibrate import graphs
from onnxroof.ort.calibrate.bench import Bench
from onnxroof.ort.calibrate.classes import CONV_CLASSES, REORDER_CLASSES
from onnxroof.ort.calibrate.graphs import FLOAT, Built, Rand
from onnxroof.ort.measure import fast_estimate
from onnxroof.ort.reference import ReferenceSampler
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.predict import engine, op_classes

__all__ = [
    "MASK_VALUE",
    "MIN_PROFILED_S",
    "Chain",
    "ClassJob",
    "EpiloguePair",
    "Flush",
    "Job",
    "Loop",
    "Profiled",
    "Reference",
    "Runner",
    "Sample",
    "WaitPair",
    "class_job",
    "conv_sample",
    "profiled",
    "subnormal_jobs",
    "time_passes",
    "views",
]

MASK_VALUE = -100.0  # the subnormal benchmark's mask, Swin's: exp of a score this far down is a subnormal float
MIN_PROFILED_S = 8e-6  # profiled kernels shorter than this are too coarse (1 us resolution) to calibrate with


@dataclass
class Sample:
    """One measured node: its view and cost on the optimized graph, its kernel time, and the benchmark's label.
    ``part`` is "node" for the whole kernel, "epilogue" for its fused activation's pass over the output."""

    view: NodeView
    cost: Cost
    time_s: float
    label: str
    part: str = "node"


def views(model: onnx.ModelProto) -> dict[str, tuple[NodeView, Cost]]:
    """Every runtime node of an optimized graph, by name: its view and cost, as the analysis pass computes them."""
    from onnxroof.load import load_graph

    graph = load_graph(model)
    out: dict[str, tuple[NodeView, Cost]] = {}
    for node in graph.nodes:
        if node.folded:
            continue
        view = node_view(node, graph)
        try:
            cost, _ = compute_cost(view)
        except UnknownShape:
            continue
        out[node.name] = (view, cost)
    return out


def _weight_bytes(model: onnx.ModelProto) -> int:
    """Bytes of a benchmark's float initializers."""
    return sum(int(np.prod(t.dims)) * 4 for t in model.graph.initializer if t.data_type == FLOAT)


class Flush:
    """Reads a buffer larger than the caches hold for the benchmarks with weights, before each timed run: a model
    reads each weight once per inference and streams the rest of the model through the caches in between, so its
    kernels find their weights in DRAM, not where the previous repetition left them."""

    def __init__(self, nbytes: int) -> None:
        self.buffer = np.ones(max(nbytes // 4, 1), dtype=np.float32)

    def __call__(self) -> None:
        float(self.buffer.sum())


class Runner:
    """Creates sessions in a scratch directory. Sessions kept for the whole calibration park their thread pools
    when a run returns, so that the idle sessions do not take cores from the one being timed (see
    sessions.session_options); within a run they spin as a user's session does.

    On several threads a profiled benchmark and a loop open a session for each pass instead (``per_pass``,
    ``pass_session``): its pool spins from one run to the next, as in a user's loop, where a parked pool wakes at
    every run's first parallel kernel and runs small parallel kernels slower; the session is closed when the pass
    ends, which stops its threads before the next benchmark runs. The chains keep their parked sessions: a chain's
    node time is the difference of two runs' times, in which the wake-up at each run's start cancels. One thread
    has no pool to park."""

    def __init__(self, threads: int, provider: str, tmp: str) -> None:
        self.threads, self.provider, self.tmp = threads, provider, tmp
        self.count = 0

    @property
    def per_pass(self) -> bool:
        """Whether profiled benchmarks and loops open a session for each pass (on several threads)."""
        return self.threads > 1

    def _path(self, stem: str) -> str:
        self.count += 1
        return os.path.join(self.tmp, f"{stem}{self.count}")

    def session(self, model: onnx.ModelProto, *, profile: bool = False) -> tuple[Any, onnx.ModelProto]:
        """A session on the model, and the optimized graph onnxruntime saved while creating it."""
        opt = self._path("opt") + ".onnx"
        prefix = self._path("prof") if profile else None
        spec = SessionSpec(self.provider, self.threads)
        sess, _ = sessions.make_session(model, spec, profile_prefix=prefix, optimized_path=opt, park_when_idle=True)
        return sess, onnx.load(opt, load_external_data=False)

    def pass_session(self, serialized: bytes, *, profile: bool = False) -> Any:
        """A session for one pass on a serialized model (serialized once for all passes), its pool spinning
        between runs; the caller closes it."""
        prefix = self._path("prof") if profile else None
        sess, _ = sessions.make_session(serialized, SessionSpec(self.provider, self.threads), profile_prefix=prefix)
        return sess


class Job(Protocol):
    """What a pass does with every job: run it, ``reps`` timed runs after an untimed one."""

    def run_pass(self, reps: int, flush: Flush) -> None: ...


def _timed(sess: Any, feeds: Mapping[str, np.ndarray]) -> float:
    """Wall-clock seconds of one session.run."""
    t0 = time.perf_counter()
    sess.run(None, feeds)
    return time.perf_counter() - t0


def _profile_times(sess: Any, timed: list[bool]) -> dict[str, list[float]]:
    """End ``sess``'s profiling and read, per node, its kernel times (seconds) in the runs ``timed`` marks (one
    flag per run, in order); the profile file is deleted."""
    path = sess.end_profiling()
    try:
        events = json.loads(Path(path).read_text(encoding="utf-8"))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    per: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            per.setdefault(e["name"][: -len("_kernel_time")], []).append(float(e["dur"]) * 1e-6)
    return {name: [t for t, on in zip(ts, timed) if on] for name, ts in per.items()}


class Profiled:
    """A benchmark timed by onnxruntime's profiler: every node's kernel time in each timed run.

    Each pass runs the benchmark once untimed (to re-warm code and data after the other benchmarks) and ``reps``
    times timed, a cold benchmark reading the flush buffer before each timed run. On one thread the session
    lives for the whole calibration; on several, each pass has a session of its own (Runner.per_pass), whose
    profile is read when the pass ends."""

    def __init__(
        self, runner: Runner, label: str, built: Built, harvest: frozenset[str] | None = None, cold: bool | None = None
    ) -> None:
        model, self.feeds = built
        self.label, self.harvest = label, harvest
        self.cold = _weight_bytes(model) >= engine.COLD_WEIGHTS if cold is None else cold
        self.runner = runner
        # Per pass, this first session gives the optimized graph only, and need not profile.
        first, self.opt = runner.session(model, profile=not runner.per_pass)
        self.sess: Any = None if runner.per_pass else first
        self.serialized = model.SerializeToString() if runner.per_pass else None  # what each pass's session loads
        self.timed: list[bool] = []  # per run of the lasting session, in order: whether it was a timed one
        self._passes: dict[str, list[float]] = {}  # per node, the timed kernel times of the passes' sessions
        self._times: dict[str, list[float]] | None = None

    def run_pass(self, reps: int, flush: Flush) -> None:
        """One untimed run, then ``reps`` timed ones."""
        sess = self.sess if self.serialized is None else self.runner.pass_session(self.serialized, profile=True)
        timed = [False] + [True] * reps
        sess.run(None, self.feeds)
        for _ in range(reps):
            if self.cold:
                flush()
                for value in self.feeds.values():  # the activations come back: a model hands them over hot
                    float(value.sum())
            sess.run(None, self.feeds)
        if self.sess is not None:
            self.timed += timed
            return
        for name, ts in _profile_times(sess, timed).items():
            self._passes.setdefault(name, []).extend(ts)

    def kernel_times(self) -> dict[str, list[float]]:
        """Per node, its kernel times (seconds) in the timed runs; the first call ends the profiling."""
        if self._times is None:
            self._times = _profile_times(self.sess, self.timed) if self.sess is not None else self._passes
        return self._times

    def discard(self) -> None:
        """End the profiling of a benchmark that will not be timed."""
        if self.sess is not None:
            _profile_times(self.sess, [])

    def samples(self, profiler_overhead: float) -> list[Sample]:
        """The nodes of the harvested classes, their kernel time net of the profiler's own cost per node."""
        by_name = views(self.opt)
        found = []
        for name, ts in self.kernel_times().items():
            if name not in by_name or not ts:
                continue
            view, cost = by_name[name]
            cls = op_classes.op_class(view)
            if self.harvest is not None and cls not in self.harvest:
                continue
            if self.cold and cls in REORDER_CLASSES:
                continue  # the flush pushed out the activation it reads, which a model would hand it hot
            fast = fast_estimate(ts)
            if fast < MIN_PROFILED_S or fast - profiler_overhead <= 0:
                continue
            found.append(Sample(view, cost, fast - profiler_overhead, self.label))
        return found


def conv_sample(job: Profiled, profiler_overhead: float) -> Sample | None:
    """The convolution kernel of a profiled benchmark, its time net of the profiler's cost per node."""
    by_name = views(job.opt)
    for name, ts in job.kernel_times().items():
        if name in by_name and ts and op_classes.op_class(by_name[name][0]) in CONV_CLASSES:
            view, cost = by_name[name]
            return Sample(view, cost, max(fast_estimate(ts) - profiler_overhead, 1e-9), job.label)
    return None


class EpiloguePair:
    """A convolution profiled with Relu (applied inside the kernel) and with Clip (applied in a pass over the
    output afterwards), one after the other in each pass: the difference of their kernel times is the time of
    the Clip's pass. Measured by difference because it is a part of a kernel the profiler cannot time apart.
    A depthwise Relu twin is also a sample of the depthwise class, which then need not time the same graph again."""

    def __init__(self, runner: Runner, label: str, build: Callable[[str], Built]) -> None:
        self.label = label
        self.relu = Profiled(runner, f"{label} + Relu", build("Relu"), frozenset({"depthwise"}), cold=False)
        self.clip = Profiled(runner, f"{label} + Clip", build("Clip"), CONV_CLASSES, cold=False)

    def run_pass(self, reps: int, flush: Flush) -> None:
        """A pass of each twin, Relu first."""
        self.relu.run_pass(reps, flush)
        self.clip.run_pass(reps, flush)

    def samples(self, profiler_overhead: float) -> list[Sample]:
        """A depthwise Relu twin's kernel, and the Clip's pass as an epilogue sample of the Clip convolution; no
        epilogue sample when onnxruntime does not fuse the activations as expected or the difference is lost in
        the noise."""
        found = self.relu.samples(profiler_overhead)
        relu, clip = conv_sample(self.relu, profiler_overhead), conv_sample(self.clip, profiler_overhead)
        if relu is None or clip is None or engine.epilogue_activation(clip.view) != "Clip":
            return found
        if engine.epilogue_activation(relu.view) is not None or clip.time_s <= relu.time_s:
            return found
        return found + [Sample(clip.view, clip.cost, clip.time_s - relu.time_s, self.label, part="epilogue")]


class Reference:
    """The reference block (or ``built``, another graph and its feeds) as a calibration job: ``reps`` batches a
    pass, timed as validation times the block."""

    def __init__(self, threads: int, provider: str, built: Built | None = None) -> None:
        self.sampler = ReferenceSampler(threads, provider, built=built)

    def run_pass(self, reps: int, flush: Flush) -> None:
        """``reps`` more samples of the graph, its runs back to back as a user's loop runs a model."""
        self.sampler.sample(reps)


class Loop:
    """A graph timed as a user's loop times a model: runs back to back by the wall clock, nothing read between
    them, so that each run finds in the caches what the run before it left there. On several threads each pass
    has a session of its own (Runner.per_pass)."""

    def __init__(self, runner: Runner, label: str, built: Built) -> None:
        self.model, self.feeds = built
        self.label, self.runner = label, runner
        self.sess: Any = None if runner.per_pass else runner.session(self.model)[0]
        self.serialized = self.model.SerializeToString() if runner.per_pass else None  # what each pass's session loads
        self.times: list[float] = []

    def run_pass(self, reps: int, flush: Flush) -> None:
        """One untimed run (it brings the graph back after the other benchmarks), then ``reps`` timed ones."""
        sess = self.sess if self.serialized is None else self.runner.pass_session(self.serialized)
        sess.run(None, self.feeds)
        self.times.extend(_timed(sess, self.feeds) for _ in range(reps))

    def time_s(self) -> float | None:
        """Seconds per run (the fast estimate of the timed runs); None before the first."""
        return fast_estimate(self.times) if self.times else None


class Chain:
    """A benchmark timed by the wall clock: two chains of the same node, ``lo`` and ``hi`` long, run alternately;
    the difference of their run times over ``hi - lo`` is one node's time, its dispatch included.

    Without ``lengths``, the longer chain is sized from a first timing of a two-node chain to run about
    ``target_s`` (4 to 200 nodes more than the shorter one)."""

    def __init__(
        self,
        runner: Runner,
        label: str,
        build: Callable[[int], Built],
        lengths: tuple[int, int] | None = None,
        target_s: float = 0.004,
    ) -> None:
        self.label = label
        if lengths is None:
            model, feeds = build(2)
            sess, _ = runner.session(model)
            sess.run(None, feeds)
            per_node = max(min(_timed(sess, feeds) for _ in range(3)) / 2, 1e-7)
            lengths = (2, 2 + int(min(max(target_s / per_node, 4), 200)))
        self.lo, self.hi = lengths
        self.model_lo, self.feeds_lo = build(self.lo)
        model_hi, self.feeds_hi = build(self.hi)
        self.sess_lo, self.opt = runner.session(self.model_lo)
        self.sess_hi, _ = runner.session(model_hi)
        self.t_lo: list[float] = []
        self.t_hi: list[float] = []

    def run_pass(self, reps: int, flush: Flush) -> None:
        """One untimed run of each chain, then ``reps`` timed runs of each, alternately."""
        self.sess_lo.run(None, self.feeds_lo)
        self.sess_hi.run(None, self.feeds_hi)
        for _ in range(reps):
            self.t_lo.append(_timed(self.sess_lo, self.feeds_lo))
            self.t_hi.append(_timed(self.sess_hi, self.feeds_hi))

    def per_node(self) -> float:
        """Seconds per chain node, dispatch included."""
        return max((fast_estimate(self.t_hi) - fast_estimate(self.t_lo)) / (self.hi - self.lo), 0.0)

    def samples(self, node_overhead: float) -> list[Sample]:
        """The chain's middle node (reorders aside), its time net of the executor's cost per node."""
        chain_nodes = [vc for vc in views(self.opt).values() if op_classes.op_class(vc[0]) not in REORDER_CLASSES]
        if not chain_nodes:
            return []
        view, cost = chain_nodes[len(chain_nodes) // 2]
        return [Sample(view, cost, max(self.per_node() - node_overhead, 1e-9), self.label)]


class WaitPair:
    """A convolution profiled with its weights cold (a buffer larger than the caches read before each timed run)
    and warm (where its previous run left them), one after the other in each pass: the difference of their kernel
    times is what its weights' read from memory adds to it. It gives no sample of its class: its reading is
    :meth:`wait`, the device's ``conv_weight_wait``."""

    def __init__(self, runner: Runner, label: str, built: Built) -> None:
        self.label = label
        self.warm = Profiled(runner, f"{label} warm", built, CONV_CLASSES, cold=False)
        self.cold = Profiled(runner, f"{label} cold", built, CONV_CLASSES, cold=True)

    def run_pass(self, reps: int, flush: Flush) -> None:
        """A pass of each twin, the warm one first."""
        self.warm.run_pass(reps, flush)
        self.cold.run_pass(reps, flush)

    def samples(self, profiler_overhead: float) -> list[Sample]:
        """None: the pair is timed for its weights' wait only."""
        return []

    def wait(self, profiler_overhead: float) -> tuple[float, float, float] | None:
        """(weight bytes, output bytes, seconds the cold run's convolution took longer than the warm one's), or
        None when either kernel went unmeasured. The cold run finds its output's lines out of the caches too, and
        reads each from memory before writing it (write-allocate), which a model's kernel, writing into a buffer
        the run has just used, does not."""
        warm, cold = conv_sample(self.warm, profiler_overhead), conv_sample(self.cold, profiler_overhead)
        if warm is None or cold is None:
            return None
        out = cold.view.output(0)
        # the weights as the prediction counts them on the optimized node, which it looks the share up by
        weights = engine.weight_bytes(cold.view, cold.cost)
        return weights, float(out.nbytes if out is not None and out.known else 0), cold.time_s - warm.time_s


ClassJob = Profiled | Chain | EpiloguePair | WaitPair


def time_passes(
    jobs: Sequence[Job], reps: int, passes: int, deadline: float, flush: Flush, step: Callable[[], None]
) -> int:
    """Run every job in passes of ``reps`` timed runs until ``passes`` are done or the next pass, as long as the
    last, would end past ``deadline`` (a ``time.perf_counter()`` reading) with a fifth to spare; at least two
    passes. ``step()`` after each pass; the number of passes run."""
    done, pass_time = 0, 0.0
    while done < passes:
        if done >= 2 and deadline - time.perf_counter() < 1.2 * pass_time:
            break
        t0 = time.perf_counter()
        for job in jobs:
            job.run_pass(reps, flush)
        pass_time = time.perf_counter() - t0
        done += 1
        step()
    return done


def profiled(bench: Bench, runner: Runner, rand: Rand) -> Profiled:
    """The profiled job of a "profile" benchmark, its graph built from ``rand``."""
    return Profiled(runner, bench.label, bench.build(rand), bench.harvest, bench.cold)


def class_job(bench: Bench, runner: Runner, rand: Rand, chain_target_s: float) -> ClassJob:
    """The job that times ``bench``, its graphs built from ``rand`` (a UserError when onnxruntime cannot load
    them)."""
    if bench.kind == "chain":
        return Chain(runner, bench.label, lambda n: bench.build(rand, n), target_s=chain_target_s)
    if bench.kind == "epilogue":
        return EpiloguePair(runner, bench.label, lambda activation: bench.build(rand, activation=activation))
    if bench.kind == "profile":
        return profiled(bench, runner, rand)
    if bench.kind == "wait":
        return WaitPair(runner, bench.label, bench.build(rand))
    raise ValueError(f"unknown benchmark kind {bench.kind!r} ({bench.label})")


def subnormal_jobs(
    sizes: tuple[int, int, int, int] | None, runner: Runner, rand: Rand
) -> tuple[Profiled, Profiled] | None:
    """The masked attention block of ``sizes`` (map size, window, heads, d) with its mask at 0 and at -100
    (Swin's), the same scores and values in both; None where the suite has no such block."""
    if sizes is None:
        return None
    size, window, heads, d = sizes
    plain = graphs.masked_attention(rand, size, window, heads, d, 0.0)
    masked_model, _ = graphs.masked_attention(rand, size, window, heads, d, MASK_VALUE)
    label = f"Softmax + MatMul in Swin's shifted {window}x{window} windows over {size}x{size}, {heads} heads"
    slowed = Profiled(runner, f"{label}, mask at {MASK_VALUE:g}", (masked_model, plain[1]))
    return Profiled(runner, f"{label}, mask at 0", plain), slowed
