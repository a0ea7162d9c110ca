"""The calibration run, phase by phase: set up every benchmark's sessions, time them in passes within the budget,
read what the passes measured, and assemble the device (``onnxroof.ort.calibrate.cache`` keeps this host's)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from onnxroof.devices import CacheLevel, Calibration, Device, FrozenMap, Peak, Sourced
from onnxroof.errors import UserError
from onnxroof.ort.calibrate import chains, graphs
from onnxroof.ort.calibrate.accelerator import GPU, TINY, calibrate_roofline
from onnxroof.ort.calibrate.bench import Suite
from onnxroof.ort.calibrate.ceilings import (
    calibration_warnings,
    class_ceilings,
    conv_weight_wait,
    dram_overlap,
    effective_size,
    efficiencies_over_one,
    matrix_rate,
    network_factor,
    peak_candidates,
    subnormal_costs,
    unread_ceilings_warning,
    weight_reuse,
)
from onnxroof.ort.calibrate.graphs import Rand
from onnxroof.ort.calibrate.host import (
    CoreLimits,
    ReportedCache,
    cache_levels,
    core_limits,
    cpu_model,
    cpu_times,
    host_key,
    ort_version,
)
from onnxroof.ort.calibrate.jobs import (
    MASK_VALUE,
    Chain,
    ClassJob,
    Flush,
    Job,
    Loop,
    Profiled,
    Reference,
    Runner,
    Sample,
    WaitPair,
    class_job,
    conv_sample,
    profiled,
    subnormal_jobs,
    time_passes,
)
from onnxroof.ort.calibrate.network import factor_network
from onnxroof.ort.calibrate.suite import FULL, QUICK, SUITE
from onnxroof.ort.measure import fast_estimate
from onnxroof.ort.reference import QUIET_STRETCHES
from onnxroof.ort.session_spec import provider_name
from onnxroof.predict import op_classes
from onnxroof.units import binary_bytes

__all__ = ["calibrate"]


def calibrate(
    threads: int = 1,
    provider: str = "cpu",
    budget_s: float = 120.0,
    progress: Callable[[int, int], None] | None = None,
    *,
    quick: bool = False,
) -> Device:
    """Measure this host's onnxruntime roofline and per-op-class ceilings; return it as a calibrated Device.

    ``threads`` is onnxruntime's intra-op thread count, ``provider`` the execution provider ("cuda" measures the
    GPU's roofline only: ``accelerator.calibrate_roofline``), ``budget_s`` the time the run may take: every
    benchmark is set up once, then timed in passes spread over the budget (a few runs each per pass), so that a
    benchmark a busy moment slowed down in one pass is measured again in the next; a kernel's time is the mean of
    its fastest eighth of runs. ``progress(done, total)`` is called as benchmarks are set up and passes run.
    ``quick`` runs the quick suite (a reduced set of small shapes in two passes, for tests and smoke checks). Other
    processes' load while calibrating (CPU time the machine spent beyond this process's own), the hypervisor's
    steal, a class the suite measures that got no ceiling and ceiling points over 100% (with their reason) are
    reported in ``device.calibration.warnings``; nothing is raised for them. The spread between runs is not: a
    shared virtual machine's runs spread with nothing else running, so a spread says nothing of load from
    elsewhere.
    """
    _check_arguments(threads, provider, budget_s)
    if provider_name(provider) == "CUDAExecutionProvider":
        return calibrate_roofline("cuda", threads, budget_s, progress, TINY if quick else GPU)
    run = _Run(threads, "cpu", budget_s, time.perf_counter(), cpu_times(), time.process_time())
    chosen = QUICK if quick else FULL
    caches = cache_levels()
    steps = _Progress(len(chosen.benches) + len(caches) + 10 + chosen.passes, progress)
    with tempfile.TemporaryDirectory(prefix="onnxroof-calibrate-") as tmp:
        jobs = _set_up(chosen, caches, Runner(threads, run.provider, tmp), steps)
        passes = _time_passes(jobs.in_order(), chosen, run, steps)
        readings = _read(jobs, chosen.matrix_size)
    return _assemble(readings, jobs, chosen, passes, run)


@dataclass(frozen=True)
class _Run:
    """What one calibration was asked for, and when it started (``time.perf_counter()`` and /proc/stat's
    ticks)."""

    threads: int
    provider: str
    budget_s: float
    start: float
    cpu_start: tuple[int, int, int] | None
    own_cpu_start: float  # time.process_time(): this process's CPU time, every thread's


def _check_arguments(threads: int, provider: str, budget_s: float) -> None:
    """A UserError for what cannot be calibrated: a provider other than the CPU's and CUDA's, a thread count or
    budget below 1."""
    provider_name(provider)  # a UserError for any other provider
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise UserError(f"threads must be a positive integer, got {threads!r}", "pass threads=1 or more")
    if budget_s <= 0:
        raise UserError(f"the calibration budget must be positive, got {budget_s!r} s", "pass budget_s=120")


class _Progress:
    """Reports (done, total) to the caller as the set-up steps and passes complete, never past the total."""

    def __init__(self, total: int, callback: Callable[[int, int], None] | None) -> None:
        self.total, self.callback, self.done = total, callback, 0

    def advance(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        if self.callback is not None:
            self.callback(self.done, self.total)

    def finish(self) -> None:
        self.advance(self.total)


# ---------------------------------------------------------------------------------------------------- set up


@dataclass
class _Jobs:
    """Every timing job of one calibration."""

    node_chain: Chain  # Neg on 16 floats: the executor's cost per node
    reshape_chain: Chain  # Neg + Reshape pairs: what a shape-only node adds
    single: Chain  # a one-node graph: the cost per run
    branches: Chain  # If nodes each running a branch of one Neg: what an If adds to its branch's nodes
    profiler_probe: Profiled  # tiny nodes: what the profiler adds per node
    reference: Reference
    network: Reference  # the factor network (network.factor_network), timed as the block is
    levels: list[tuple[ReportedCache, Chain, int]]  # per cache level: its Neg chain and the floats it streams
    probes: dict[str, list[tuple[int, Chain]]]  # per shared level: chains on larger working sets (bytes, chain)
    dram: Profiled
    peaks: list[Profiled]
    batched: Profiled | None
    int8: Profiled | None
    fp16: Profiled | None
    classes: list[ClassJob]
    reuse: list[Loop]  # matrix-vector chains timed back to back: how fast weights come back between runs
    subnormal: tuple[Profiled, Profiled] | None  # a masked attention block, with its mask at 0 and at -100

    def in_order(self) -> list[Job]:
        """The jobs in the order each pass times them."""
        order: list[Job] = [self.node_chain, self.reshape_chain, self.single, self.branches, self.profiler_probe]
        order += [self.reference, self.network]
        for cache, chain, _ in self.levels:
            order += [chain, *(wide for _, wide in self.probes.get(cache.level, []))]
        order += [self.dram, *self.peaks]
        order += [job for job in (self.batched, self.int8, self.fp16) if job is not None]
        return order + list(self.classes) + list(self.reuse) + list(self.subnormal or ())


def _set_up(chosen: Suite, caches: Sequence[ReportedCache], runner: Runner, steps: _Progress) -> _Jobs:
    """Every benchmark's sessions, created once for the whole calibration. The op-class benchmarks' graphs come
    from one Rand in suite order (after the peaks'), so that a suite builds the same graphs every time; an op this
    onnxruntime build lacks leaves its benchmark out."""
    node_chain, reshape_chain, single, branches, profiler_probe = _overhead_jobs(chosen.overhead_lengths, runner)
    # The reference block, timed in every pass like the ceilings: validation times it again to read the machine's
    # speed against its speed while calibrating. The factor network, timed so too: its prediction from the
    # ceilings gives the network factor.
    reference = Reference(runner.threads, runner.provider)
    network = Reference(runner.threads, runner.provider, factor_network())
    steps.advance(5)
    levels, probes = _level_jobs(chosen, caches, runner, steps)
    dram = _dram_job(chosen.dram_bytes(caches), runner)
    rand = Rand(0)
    peaks = [profiled(bench, runner, rand) for bench in chosen.peaks]
    batched = profiled(chosen.batched_conv, runner, rand) if chosen.batched_conv is not None else None
    steps.advance(2)
    int8, fp16 = _low_precision_jobs(chosen.matrix_size, runner)
    steps.advance(2)
    classes: list[ClassJob] = []
    for bench in chosen.benches:
        with contextlib.suppress(UserError):  # an op this onnxruntime build lacks leaves its class out
            classes.append(class_job(bench, runner, rand, chosen.chain_target_s))
        steps.advance()
    reuse = _reuse_jobs(chosen, caches, runner)
    subnormal = subnormal_jobs(chosen.masked_attention, runner, rand)
    steps.advance()
    return _Jobs(
        node_chain=node_chain,
        reshape_chain=reshape_chain,
        single=single,
        branches=branches,
        profiler_probe=profiler_probe,
        reference=reference,
        network=network,
        levels=levels,
        probes=probes,
        dram=dram,
        peaks=peaks,
        batched=batched,
        int8=int8,
        fp16=fp16,
        classes=classes,
        reuse=reuse,
        subnormal=subnormal,
    )


def _overhead_jobs(lengths: tuple[int, int], runner: Runner) -> tuple[Chain, Chain, Chain, Chain, Profiled]:
    """The executor's and the profiler's own costs, on 16 floats: chains of Neg ``lengths`` long (per node),
    of Neg + Reshape pairs (a shape-only node), a one-node graph (per run), chains of If each running one Neg (per
    If) and 64 Neg profiled (per profiled node); their graphs from one Rand(1)."""
    tiny = Rand(1)

    def neg(n: int) -> graphs.Built:
        return chains.activation_chain(tiny, n, "Neg", (16,))

    node_chain = Chain(runner, "chains of Neg on 16 floats", neg, lengths)
    reshape_chain = Chain(
        runner, "chains of Neg + Reshape on 16 floats", lambda n: chains.neg_reshape_chain(tiny, n), lengths
    )
    single = Chain(runner, "a one-node graph", neg, (1, 2))
    branches = Chain(
        runner, "chains of If, each a branch of one Neg on 16 floats", lambda n: chains.if_chain(tiny, n), lengths
    )
    return node_chain, reshape_chain, single, branches, Profiled(runner, "64 Neg on 16 floats", neg(64))


def _level_jobs(
    chosen: Suite, caches: Sequence[ReportedCache], runner: Runner, steps: _Progress
) -> tuple[list[tuple[ReportedCache, Chain, int]], dict[str, list[tuple[int, Chain]]]]:
    """Per cache level, a chain of Neg over a working set the level holds (see Suite.level_bytes); per shared
    level, chains over the suite's multiples of that working set that still fit its reported size."""
    levels: list[tuple[ReportedCache, Chain, int]] = []
    probes: dict[str, list[tuple[int, Chain]]] = {}
    for cache in caches:
        n_floats = max(chosen.level_bytes(cache, runner.threads) // 8, 16)
        chain = Chain(
            runner,
            f"chain of Neg over {n_floats} floats ({binary_bytes(8 * n_floats)} read + written per node)",
            _neg_over(n_floats),
            target_s=chosen.chain_target_s,
        )
        levels.append((cache, chain, n_floats))
        for factor in chosen.probe_factors if cache.scope == "shared" else ():
            wider = factor * n_floats
            if 8 * wider <= cache.size:  # chains of 1 and 3 nodes: each node streams tens of MiB
                wide = Chain(runner, f"chain of Neg over {wider} floats", _neg_over(wider), (1, 3))
                probes.setdefault(cache.level, []).append((8 * wider, wide))
        steps.advance()
    return levels, probes


def _neg_over(n_floats: int) -> Callable[[int], graphs.Built]:
    """A builder of Neg chains over ``n_floats`` floats, each from its own Rand(2)."""
    rand = Rand(2)
    return lambda n: chains.activation_chain(rand, n, "Neg", (n_floats,))


def _reuse_jobs(chosen: Suite, caches: Sequence[ReportedCache], runner: Runner) -> list[Loop]:
    """Per fraction of the suite's ``reuse_fractions``, a chain of matrix-vector products whose weights total that
    fraction of the last cache level's reported size, timed as a user's loop times a model."""
    return [
        Loop(runner, f"4 MatMul (1xN) @ (NxN), {binary_bytes(nbytes)} of weights", graphs.gemv_chain(nbytes))
        for nbytes in chosen.reuse_bytes(caches)
    ]


def _dram_job(nbytes: int, runner: Runner) -> Profiled:
    """A matrix-vector product streaming an ``nbytes`` operand from DRAM."""
    model, feeds = graphs.streaming_gemv(nbytes)
    k, n = feeds["b"].shape
    return Profiled(runner, f"MatMul (1x{k}) @ ({k}x{n}) streaming a {binary_bytes(4 * k * n)} operand", (model, feeds))


def _low_precision_jobs(n: int, runner: Runner) -> tuple[Profiled | None, Profiled | None]:
    """The int8 and fp16 n x n x n matrix products, each None where onnxruntime cannot run it; the fp16 one also
    where onnxruntime runs it in fp32 between Casts (the provider has no fp16 kernel)."""
    int8 = fp16 = None
    with contextlib.suppress(UserError):
        int8 = Profiled(runner, f"MatMulInteger uint8 ({n}x{n}) @ int8 ({n}x{n})", graphs.int8_matmul(n))
    with contextlib.suppress(UserError):
        fp16 = Profiled(runner, f"MatMul fp16 ({n}x{n}) @ ({n}x{n})", graphs.fp16_matmul(n))
        if any(node.op_type == "Cast" for node in fp16.opt.graph.node):
            fp16.discard()
            fp16 = None
    return int8, fp16


# ---------------------------------------------------------------------------------------------------- time


def _time_passes(jobs: Sequence[Job], chosen: Suite, run: _Run, steps: _Progress) -> int:
    """Time every job in passes until the suite's passes are done or the next one would overrun the budget (at
    least two passes); the number of passes."""
    deadline = run.start + run.budget_s - 1.0
    passes = time_passes(jobs, chosen.reps, chosen.passes, deadline, Flush(chosen.flush_bytes), steps.advance)
    steps.finish()
    return passes


# ---------------------------------------------------------------------------------------------------- read


@dataclass
class _Readings:
    """What the passes measured."""

    node_overhead: float  # seconds per node the executor adds
    reshape_cost: float  # seconds a shape-only node adds beyond that
    run_overhead: float  # seconds per session.run beyond its nodes
    branch_overhead: float  # seconds an If adds to the nodes of its branch
    profiler_overhead: float  # seconds per node the profiler adds to a kernel's time
    level_bandwidths: dict[str, tuple[float, str]]  # per cache level: bytes/s and what measured it
    level_sizes: dict[str, tuple[int, str]]  # per shared level probed: the size it serves, and how it was found
    dram_bandwidth: float
    fp32_rates: list[tuple[float, str]]  # FLOP/s of the peak benchmarks' kernels, and what they are
    int8_rate: float | None
    fp16_rate: float | None
    samples: list[Sample]  # the op-class samples
    batched_conv: Sample | None  # the convolution whose data is larger than any cache
    waits: list[tuple[float, float, float]]  # per WaitPair: weight and output bytes, seconds its cold run took longer
    subnormal_times: tuple[dict[str, list[float]], dict[str, list[float]]] | None  # per node: unmasked, masked


def _read(jobs: _Jobs, matrix_size: int) -> _Readings:
    """Every job's times, read once the passes are over: the overheads first, then everything net of them
    (``matrix_size``: n of the n x n x n int8 and fp16 matrix products)."""
    node_overhead = jobs.node_chain.per_node()
    reshape_cost = max(jobs.reshape_chain.per_node() - node_overhead, 0.0)
    run_overhead = max(fast_estimate(jobs.single.t_lo) - node_overhead, 0.0)
    branch_overhead = max(jobs.branches.per_node() - node_overhead, 0.0)
    probe = [t for ts in jobs.profiler_probe.kernel_times().values() for t in ts]
    profiler_overhead = fast_estimate(probe) if probe else 0.0
    level_bandwidths, level_sizes = _read_levels(jobs, node_overhead)
    dram_times = jobs.dram.kernel_times().get("gemv", [])
    if not dram_times:
        raise UserError("calibration failed: the DRAM bandwidth benchmark produced no timings", "run it again")
    b = jobs.dram.feeds["b"]  # the streamed (K x N) operand; the (1 x K) vector and the (1 x N) result move too
    dram_bandwidth = 4.0 * (b.size + b.shape[0] + b.shape[1]) / max(fast_estimate(dram_times) - profiler_overhead, 1e-9)
    fp32_rates = [
        (
            x.cost.flops * op_classes.taps_inside(x.view) / x.time_s,
            f"{x.label} ({x.view.domain or 'ai.onnx'}::{x.view.op_type})",
        )
        for job in jobs.peaks
        for x in job.samples(profiler_overhead)
    ]
    int8_rate = matrix_rate(jobs.int8, profiler_overhead, matrix_size)
    fp16_rate = matrix_rate(jobs.fp16, profiler_overhead, matrix_size)
    samples = [
        x
        for job in jobs.classes + ([jobs.batched] if jobs.batched is not None else [])
        for x in (job.samples(node_overhead) if isinstance(job, Chain) else job.samples(profiler_overhead))
    ]
    batched_conv = conv_sample(jobs.batched, profiler_overhead) if jobs.batched is not None else None
    waits = [w for job in jobs.classes if isinstance(job, WaitPair) and (w := job.wait(profiler_overhead))]
    subnormal_times = (jobs.subnormal[0].kernel_times(), jobs.subnormal[1].kernel_times()) if jobs.subnormal else None
    return _Readings(
        node_overhead=node_overhead,
        reshape_cost=reshape_cost,
        run_overhead=run_overhead,
        branch_overhead=branch_overhead,
        profiler_overhead=profiler_overhead,
        level_bandwidths=level_bandwidths,
        level_sizes=level_sizes,
        dram_bandwidth=dram_bandwidth,
        fp32_rates=fp32_rates,
        int8_rate=int8_rate,
        fp16_rate=fp16_rate,
        samples=samples,
        batched_conv=batched_conv,
        waits=waits,
        subnormal_times=subnormal_times,
    )


def _read_levels(jobs: _Jobs, node_overhead: float) -> tuple[dict[str, tuple[float, str]], dict[str, tuple[int, str]]]:
    """Per cache level, the bandwidth of its chain (bytes read and written per node over the node's time net of
    its dispatch); per probed shared level, the working set it serves at that bandwidth (``effective_size``)."""
    bandwidths = {
        cache.level: (8 * n_floats / max(chain.per_node() - node_overhead, 1e-9), chain.label)
        for cache, chain, n_floats in jobs.levels
    }
    sizes = {
        cache.level: effective_size(
            cache.size,
            8 * n_floats,
            bandwidths[cache.level][0],
            [
                (nbytes, nbytes / max(wide.per_node() - node_overhead, 1e-9))
                for nbytes, wide in jobs.probes[cache.level]
            ],
        )
        for cache, _, n_floats in jobs.levels
        if cache.level in jobs.probes
    }
    return bandwidths, sizes


# ---------------------------------------------------------------------------------------------------- assemble


def _assemble(readings: _Readings, jobs: _Jobs, chosen: Suite, passes: int, run: _Run) -> Device:
    """The calibrated device: the bare device from the peaks, memory levels and overheads, the class ceilings read
    against it, the calibration record, then dram_overlap and network_factor read against the ceilings."""
    how = (
        f"onnxruntime {ort_version()} {run.provider} provider, {run.threads} thread(s), "
        f"fastest eighth of {passes} passes"
    )
    bare = _bare_device(readings, jobs, chosen, run, how)
    device = replace(bare, ceilings=FrozenMap(class_ceilings(readings.samples, bare, run.threads)))
    reference = jobs.reference.sampler.time_s()
    notes = [unread_ceilings_warning(chosen.measures, device), efficiencies_over_one(device)]
    device = replace(device, calibration=_record(readings, reference, run, [n for n in notes if n]))
    if readings.batched_conv is not None:
        device = replace(device, dram_overlap=dram_overlap(readings.batched_conv, device, how))
    if readings.subnormal_times is not None and chosen.masked_attention is not None:
        size, window, heads, d = chosen.masked_attention
        # every masked score of every head, each a subnormal probability at -100, read by d multiply-adds
        underflows = int(graphs.swin_mask(size, window, MASK_VALUE).astype(bool).sum()) * heads
        underflow, product = subnormal_costs(*readings.subnormal_times, underflows, underflows * d, how)
        device = replace(device, softmax_underflow=underflow, subnormal_product=product)
    loops = [(loop.model, seconds) for loop in jobs.reuse if (seconds := loop.time_s()) is not None]
    device = replace(device, weight_reuse=weight_reuse(device, loops, how))
    # The factor network's median run, as a user's timing loop reports a model's time: the factor carries this
    # machine's usual run-to-run jitter into every prediction, which the ceilings' fast estimates set aside. The
    # median is that of the quietest third of the calibration, as a model's measured time is that of its quietest
    # round.
    typical = jobs.network.sampler.typical_s()
    if typical is None:
        return device
    samples = len(jobs.network.sampler.samples)
    what = f"the median of its runs in the quietest of {QUIET_STRETCHES} stretches of {samples} runs; {how}"
    return replace(device, network_factor=network_factor(device, jobs.network.sampler.model, typical, what))


def _bare_device(readings: _Readings, jobs: _Jobs, chosen: Suite, run: _Run, how: str) -> Device:
    """The calibrated device without its ceilings, dram_overlap, network_factor and calibration record: the
    ceilings are read against it."""
    lo, hi = chosen.overhead_lengths
    cpu = cpu_model()
    limits = core_limits(run.threads)
    dram = min(readings.dram_bandwidth, limits.bandwidth)
    return Device(
        key=host_key(run.threads, run.provider),
        name=f"{cpu}, onnxruntime {ort_version()} {run.provider}, {run.threads} thread(s) (calibrated)",
        kind="cpu",
        overlap="serial",
        peak_flops=FrozenMap(_peak_flops(readings, jobs, how, limits)),
        memory_bandwidth=Sourced(dram, f"calibrated: {jobs.dram.label}; {how}" + _held(readings.dram_bandwidth, dram)),
        memory_capacity=None,
        launch_overhead=Sourced(
            readings.node_overhead,
            (
                f"calibrated: slope of session.run time over chains of {lo} and {hi} Neg nodes on 16 floats; a "
                f"Reshape between them adds {readings.reshape_cost * 1e6:.2f} us; {how}"
            ),
        ),
        caches=_memory_levels(readings, jobs.levels, limits),
        engine="onnxruntime",
        run_overhead=Sourced(
            readings.run_overhead, f"calibrated: session.run time of a one-node graph minus one node; {how}"
        ),
        conv_weight_wait=conv_weight_wait(readings.waits, readings.dram_bandwidth, how),
        branch_overhead=Sourced(
            readings.branch_overhead, f"calibrated: slope of {jobs.branches.label} over Neg's, per node; {how}"
        ),
        load_limit=Sourced(float(f"{limits.bandwidth:.4g}"), limits.derivation("bandwidth")),
        flop_limit=Sourced(float(f"{limits.flops:.4g}"), limits.derivation("flops")),
    )


def _held(measured: float, kept: float) -> str:
    """What a figure's source says where the cores' limit held it down."""
    return (
        ""
        if kept >= measured
        else f"; held at the cores' limit (load_limit, flop_limit): the benchmark measured {measured:.4g}, beyond them"
    )


def _peak_flops(readings: _Readings, jobs: _Jobs, how: str, limits: CoreLimits) -> dict[str, Peak]:
    """The fp32 peak, the best rate of the peak benchmarks and of the op-class kernels a peak may be read on (see
    ceilings.peak_candidates), never above the cores' limit; the int8 and fp16 peaks where the provider has kernels
    for them, the int8 one the best of the integer product and of the 8-bit convolutions (QLinearConv's kernels
    outrun MatMulInteger's: a peak below them would give their ceilings efficiencies over 100%)."""
    candidates = readings.fp32_rates + peak_candidates(readings.samples)
    if not candidates:
        raise UserError("calibration failed: no compute benchmark produced a timing", "run the calibration again")
    measured, what = max(candidates)
    value = min(measured, limits.flops)
    peaks = {
        "fp32": Peak(
            value, True, f"calibrated: best fp32 rate of large kernels, {what}; {how}" + _held(measured, value)
        )
    }
    if readings.fp16_rate is not None and jobs.fp16 is not None:
        peaks["fp16"] = Peak(readings.fp16_rate, True, f"calibrated: {jobs.fp16.label}; {how}")
    int8 = [(readings.int8_rate, jobs.int8.label)] if readings.int8_rate is not None and jobs.int8 is not None else []
    int8 += peak_candidates(readings.samples, "int8")
    if int8:
        rate, label = max(int8)
        peaks["int8"] = Peak(
            rate, True, f"calibrated: best int8 rate, {label} (OP/s, a multiply-accumulate counts 2); {how}"
        )
    return peaks


def _memory_levels(
    readings: _Readings, levels: Sequence[tuple[ReportedCache, Chain, int]], limits: CoreLimits
) -> tuple[CacheLevel, ...]:
    """The cache levels with their measured bandwidths and the sizes they serve. A smaller level is never slower
    than a larger one (or DRAM): a tiny level's chain is mostly dispatch, and its measured bandwidth is raised to
    the next level's when it comes out lower. A level measured faster than the cores can load and store
    (``limits.bandwidth``) was not measured at all (a chain whose node barely outlasts its dispatch divides its
    bytes by the noise): it gets the next level's bandwidth too, and its source says so."""
    floor = min(readings.dram_bandwidth, limits.bandwidth)
    bandwidths: dict[str, float] = {}
    for cache, _, _ in reversed(levels):
        measured = readings.level_bandwidths[cache.level][0]
        floor = bandwidths[cache.level] = max(measured if measured <= limits.bandwidth else 0.0, floor)
    out = []
    for c, _, _ in levels:
        measured, what = readings.level_bandwidths[c.level]
        size, size_note = readings.level_sizes.get(c.level, (c.size, ""))
        out.append(
            CacheLevel(
                c.level,
                size,
                bandwidths[c.level],
                f"calibrated: bandwidth of a {what}"
                + (
                    f" measured {measured / 1e9:.4g} GB/s, above the cores' limit (load_limit): no measurement; "
                    "the next level's"
                    if measured > limits.bandwidth
                    else ""
                    if bandwidths[c.level] == measured
                    else ", raised to the next level's"
                )
                + (f"; {size_note}; reported size from {c.source}" if size_note else f"; size from {c.source}"),
                c.scope,
            )
        )
    return tuple(out)


def _record(readings: _Readings, reference: float | None, run: _Run, warnings: Sequence[str]) -> Calibration:
    """How the device was measured: provider, threads, onnxruntime, CPU, when, how long, warnings (those of
    the machine's load and ``warnings``), the profiler's cost per node, the reference block's time and the
    suite."""
    duration = time.perf_counter() - run.start
    cpu_start, cpu_end = run.cpu_start, cpu_times()
    steal = others = None
    if cpu_start is not None and cpu_end is not None and cpu_end[0] > cpu_start[0]:
        steal = (cpu_end[1] - cpu_start[1]) / (cpu_end[0] - cpu_start[0])
        machine_busy_s = (cpu_end[2] - cpu_start[2]) / os.sysconf("SC_CLK_TCK")
        others = max(0.0, machine_busy_s - (time.process_time() - run.own_cpu_start)) / max(duration, 1e-9)
    return Calibration(
        provider=run.provider,
        threads=run.threads,
        onnxruntime=ort_version(),
        cpu=cpu_model(),
        date=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        duration_s=round(duration, 1),
        warnings=(
            *calibration_warnings(duration, run.budget_s, steal, others, os.cpu_count() or 1, run.threads),
            *warnings,
        ),
        profiler_overhead=float(f"{readings.profiler_overhead:.4g}"),
        reference_time_s=float(f"{reference:.4g}") if reference else None,
        suite=SUITE,
    )
