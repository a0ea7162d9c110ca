"""The host's own probes (``onnxroof.ort.calibrate.probes``): its cores' limits, the executor's and the
profiler's overheads, DRAM and the cache levels, the calibration record, how fast weights come back between runs
and the network factor. The probes read on op-class kernels are in ``class_probes``; ``run.host_probes`` lists
them all in timing order. A probe that reads what another measured holds that probe and names it in its
``after``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace

from onnxroof.devices import CacheLevel, Calibration, Device, FrozenMap, Sourced
from onnxroof.errors import UserError
from onnxroof.ort.calibrate import chains, graphs
from onnxroof.ort.calibrate.ceilings import (
    calibration_warnings,
    effective_size,
    efficiencies_over_one,
    network_factor,
    unread_ceilings_warning,
    weight_reuse,
)
from onnxroof.ort.calibrate.graphs import Rand
from onnxroof.ort.calibrate.host import CoreLimits, ReportedCache, core_limits, cpu_model, cpu_times, ort_version
from onnxroof.ort.calibrate.jobs import Chain, Job, Loop, Profiled, Reference
from onnxroof.ort.calibrate.network import factor_network
from onnxroof.ort.calibrate.probes import Reading, Setting
from onnxroof.ort.calibrate.suite import SUITE
from onnxroof.ort.measure import fast_estimate
from onnxroof.ort.reference import QUIET_STRETCHES
from onnxroof.units import binary_bytes

__all__ = [
    "CacheLevels",
    "Dram",
    "Limits",
    "NetworkFactor",
    "Overheads",
    "Record",
    "WeightReuse",
    "held_note",
]


class Limits:
    """The most the calibrated threads' cores can load and store and compute (``load_limit``, ``flop_limit``): no
    job, the CPU's clock, vector width and ports; no calibrated bandwidth or peak is kept above them."""

    name: str = "limits"
    after: tuple[str, ...] = ()
    limits: CoreLimits

    def steps(self, setting: Setting) -> int:
        return 0

    def set_up(self, setting: Setting) -> list[Job]:
        return []

    def read(self, device: Device, reading: Reading) -> Device:
        self.limits = limits = core_limits(reading.run.threads)
        inputs = FrozenMap(cores=limits.threads, clock_hz=limits.clock_hz, vector_bytes=limits.vector_bytes)
        return replace(
            device,
            load_limit=Sourced(float(f"{limits.bandwidth:.4g}"), limits.derivation("bandwidth"), inputs),
            flop_limit=Sourced(float(f"{limits.flops:.4g}"), limits.derivation("flops"), inputs),
        )


class Overheads:
    """The executor's and the profiler's own costs, on 16 floats, from chains of Neg (per node: the device's
    ``launch_overhead``), of Neg + Reshape pairs (a shape-only node), a one-node graph (per run:
    ``run_overhead``), chains of If each running one Neg (per If: ``branch_overhead``) and 64 Neg profiled (per
    profiled node: what every profiled kernel's time is read net of); their graphs from one Rand(1). Everything
    timed by chains is read net of ``node_s``, everything profiled net of ``profiler_s``."""

    name: str = "overheads"
    after: tuple[str, ...] = ()
    node_s: float  # seconds per node the executor adds
    profiler_s: float  # seconds per node the profiler adds to a kernel's time

    def steps(self, setting: Setting) -> int:
        return 3

    def set_up(self, setting: Setting) -> list[Job]:
        tiny, runner, lengths = Rand(1), setting.runner, setting.suite.overhead_lengths

        def neg(n: int) -> graphs.Built:
            return chains.activation_chain(tiny, n, "Neg", (16,))

        self.node = Chain(runner, "chains of Neg on 16 floats", neg, lengths)
        self.reshape = Chain(
            runner, "chains of Neg + Reshape on 16 floats", lambda n: chains.neg_reshape_chain(tiny, n), lengths
        )
        self.single = Chain(runner, "a one-node graph", neg, (1, 2))
        self.branches = Chain(
            runner, "chains of If, each a branch of one Neg on 16 floats", lambda n: chains.if_chain(tiny, n), lengths
        )
        self.profiler = Profiled(runner, "64 Neg on 16 floats", neg(64))
        setting.advance(3)
        return [self.node, self.reshape, self.single, self.branches, self.profiler]

    def read(self, device: Device, reading: Reading) -> Device:
        self.node_s = node = self.node.per_node()
        reshape = max(self.reshape.per_node() - node, 0.0)
        one_node_s = fast_estimate(self.single.t_lo)
        run = max(one_node_s - node, 0.0)
        if_s = self.branches.per_node()
        branch = max(if_s - node, 0.0)
        probe = [t for ts in self.profiler.kernel_times().values() for t in ts]
        self.profiler_s = fast_estimate(probe) if probe else 0.0
        lo, hi, how = self.node.lo, self.node.hi, reading.how
        slope = reading.inputs(
            chain_lo=lo,
            chain_hi=hi,
            lo_run_s=fast_estimate(self.node.t_lo),
            hi_run_s=fast_estimate(self.node.t_hi),
            reshape_s=reshape,
        )
        return replace(
            device,
            launch_overhead=Sourced(
                node,
                f"calibrated: slope of session.run time over chains of {lo} and {hi} Neg nodes on 16 floats; a "
                f"Reshape between them adds {reshape * 1e6:.2f} us; {how}",
                slope,
            ),
            run_overhead=Sourced(
                run,
                f"calibrated: session.run time of a one-node graph minus one node; {how}",
                reading.inputs(run_s=one_node_s, node_s=node),
            ),
            branch_overhead=Sourced(
                branch,
                f"calibrated: slope of {self.branches.label} over Neg's, per node; {how}",
                reading.inputs(if_node_s=if_s, node_s=node),
            ),
        )


def held_note(measured: float, kept: float) -> str:
    """What a figure's source says where the cores' limit held it down."""
    return (
        ""
        if kept >= measured
        else f"; held at the cores' limit (load_limit, flop_limit): the benchmark measured {measured:.4g}, beyond them"
    )


class Dram:
    """DRAM's bandwidth (``memory_bandwidth``): a matrix-vector product streaming an operand the suite sizes past
    the last cache level, never above the cores' limit; ``measured`` is the benchmark's own figure."""

    name: str = "dram"
    after: tuple[str, ...] = ("overheads", "limits")
    measured: float  # bytes/s, before the cores' limit

    def __init__(self, overheads: Overheads, limits: Limits) -> None:
        self.overheads, self.limits = overheads, limits

    def steps(self, setting: Setting) -> int:
        return 0

    def set_up(self, setting: Setting) -> list[Job]:
        model, feeds = graphs.streaming_gemv(setting.suite.dram_bytes(setting.caches))
        k, n = feeds["b"].shape
        label = f"MatMul (1x{k}) @ ({k}x{n}) streaming a {binary_bytes(4 * k * n)} operand"
        self.job = Profiled(setting.runner, label, (model, feeds))
        return [self.job]

    def read(self, device: Device, reading: Reading) -> Device:
        times = self.job.kernel_times().get("gemv", [])
        if not times:
            raise UserError("calibration failed: the DRAM bandwidth benchmark produced no timings", "run it again")
        b = self.job.feeds["b"]  # the streamed (K x N) operand; the (1 x K) vector and the (1 x N) result move too
        nbytes = 4.0 * (b.size + b.shape[0] + b.shape[1])
        kernel_s, profiler_s = fast_estimate(times), self.overheads.profiler_s
        self.measured = measured = nbytes / max(kernel_s - profiler_s, 1e-9)
        kept = min(measured, self.limits.limits.bandwidth)
        source = f"calibrated: {self.job.label}; {reading.how}" + held_note(measured, kept)
        inputs = reading.inputs(bytes=nbytes, kernel_s=kernel_s, profiler_s=profiler_s, measured_bytes_s=measured)
        return replace(device, memory_bandwidth=Sourced(kept, source, inputs))


class CacheLevels:
    """The cache levels the OS reports, each with the bandwidth of a chain of Neg over a working set it holds
    (see Suite.level_bytes) and, for a shared level, the size it serves at that bandwidth, from chains over the
    suite's multiples of that working set that still fit its reported size (``ceilings.effective_size``)."""

    name: str = "caches"
    after: tuple[str, ...] = ("overheads", "dram", "limits")

    def __init__(self, overheads: Overheads, dram: Dram, limits: Limits) -> None:
        self.overheads, self.dram, self.limits = overheads, dram, limits

    def steps(self, setting: Setting) -> int:
        return len(setting.caches)

    def set_up(self, setting: Setting) -> list[Job]:
        suite, runner = setting.suite, setting.runner
        self.levels: list[tuple[ReportedCache, Chain, int]] = []  # each level, its chain and the floats it streams
        self.wide: dict[str, list[tuple[int, Chain]]] = {}  # per shared level: chains on larger working sets
        jobs: list[Job] = []
        for cache in setting.caches:
            n_floats = max(suite.level_bytes(cache, runner.threads) // 8, 16)
            label = f"chain of Neg over {n_floats} floats ({binary_bytes(8 * n_floats)} read + written per node)"
            chain = Chain(runner, label, _neg_over(n_floats), target_s=suite.chain_target_s)
            self.levels.append((cache, chain, n_floats))
            jobs.append(chain)
            for factor in suite.probe_factors if cache.scope == "shared" else ():
                wider = factor * n_floats
                if 8 * wider <= cache.size:  # chains of 1 and 3 nodes: each node streams tens of MiB
                    wide = Chain(runner, f"chain of Neg over {wider} floats", _neg_over(wider), (1, 3))
                    self.wide.setdefault(cache.level, []).append((8 * wider, wide))
                    jobs.append(wide)
            setting.advance(1)
        return jobs

    def read(self, device: Device, reading: Reading) -> Device:
        node = self.overheads.node_s
        measured = {
            cache.level: (8 * n_floats / max(chain.per_node() - node, 1e-9), chain.label)
            for cache, chain, n_floats in self.levels
        }
        sizes = {
            cache.level: effective_size(
                cache.size,
                8 * n_floats,
                measured[cache.level][0],
                [(nbytes, nbytes / max(wide.per_node() - node, 1e-9)) for nbytes, wide in self.wide[cache.level]],
            )
            for cache, _, n_floats in self.levels
            if cache.level in self.wide
        }
        return replace(device, caches=self._levels(measured, sizes, reading))

    def _levels(
        self, measured: dict[str, tuple[float, str]], sizes: dict[str, tuple[int, str]], reading: Reading
    ) -> tuple[CacheLevel, ...]:
        """The levels with their bandwidths and sizes. A smaller level is never slower than a larger one (or DRAM):
        a tiny level's chain is mostly dispatch, and its measured bandwidth is raised to the next level's when it
        comes out lower. A level measured faster than the cores can load and store was not measured at all (a
        chain whose node barely outlasts its dispatch divides its bytes by the noise): it gets the next level's
        bandwidth too, and its source says so."""
        limit = self.limits.limits.bandwidth
        floor = min(self.dram.measured, limit)
        bandwidths: dict[str, float] = {}
        for cache, _, _ in reversed(self.levels):
            bandwidth = measured[cache.level][0]
            floor = bandwidths[cache.level] = max(bandwidth if bandwidth <= limit else 0.0, floor)
        out = []
        for c, chain, n_floats in self.levels:
            bandwidth, what = measured[c.level]
            size, size_note = sizes.get(c.level, (c.size, ""))
            if bandwidth > limit:
                held = (
                    f" measured {bandwidth / 1e9:.4g} GB/s, above the cores' limit (load_limit): no measurement; "
                    "the next level's"
                )
            else:
                held = "" if bandwidths[c.level] == bandwidth else ", raised to the next level's"
            where = f"; {size_note}; reported size from {c.source}" if size_note else f"; size from {c.source}"
            source = f"calibrated: bandwidth of a {what}{held}{where}"
            node, dispatch = chain.per_node(), self.overheads.node_s
            inputs = reading.inputs(bytes=8 * n_floats, node_s=node, dispatch_s=dispatch, measured_bytes_s=bandwidth)
            out.append(CacheLevel(c.level, size, bandwidths[c.level], source, c.scope, inputs))
        return tuple(out)


def _neg_over(n_floats: int) -> Callable[[int], graphs.Built]:
    """A builder of Neg chains over ``n_floats`` floats, each from its own Rand(2)."""
    rand = Rand(2)
    return lambda n: chains.activation_chain(rand, n, "Neg", (n_floats,))


class Record:
    """The calibration record: provider, threads, onnxruntime, CPU, when, how long, the warnings (the machine's
    load, a class the suite measures left without its ceiling, efficiencies over 100%), the profiler's cost per
    node, the suite, and the reference block's time, timed in every pass like the ceilings (validation times it
    again to read the machine's speed against its speed while calibrating)."""

    name: str = "record"
    after: tuple[str, ...] = ("overheads", "ceilings")

    def __init__(self, overheads: Overheads) -> None:
        self.overheads = overheads

    def steps(self, setting: Setting) -> int:
        return 1

    def set_up(self, setting: Setting) -> list[Job]:
        self.reference = Reference(setting.runner.threads, setting.runner.provider)
        setting.advance(1)
        return [self.reference]

    def read(self, device: Device, reading: Reading) -> Device:
        run, duration = reading.run, reading.elapsed_s()
        notes = [unread_ceilings_warning(reading.suite.measures, device), efficiencies_over_one(device)]
        cpu_start, cpu_end = run.cpu_start, cpu_times()
        steal = others = None
        if cpu_start is not None and cpu_end is not None and cpu_end[0] > cpu_start[0]:
            steal = (cpu_end[1] - cpu_start[1]) / (cpu_end[0] - cpu_start[0])
            machine_busy_s = (cpu_end[2] - cpu_start[2]) / os.sysconf("SC_CLK_TCK")
            others = max(0.0, machine_busy_s - (time.process_time() - run.own_cpu_start)) / max(duration, 1e-9)
        load = calibration_warnings(duration, run.budget_s, steal, others, os.cpu_count() or 1, run.threads)
        reference = self.reference.sampler.time_s()
        record = Calibration(
            provider=run.provider,
            threads=run.threads,
            onnxruntime=ort_version(),
            cpu=cpu_model(),
            date=reading.now(),
            duration_s=round(duration, 1),
            warnings=(*load, *(n for n in notes if n)),
            profiler_overhead=float(f"{self.overheads.profiler_s:.4g}"),
            reference_time_s=float(f"{reference:.4g}") if reference else None,
            suite=SUITE,
        )
        return replace(device, calibration=record)


class WeightReuse:
    """How fast weights come back between back-to-back runs (``weight_reuse``): per fraction of the suite's
    ``reuse_fractions``, a chain of matrix-vector products whose weights total that fraction of the last cache
    level's reported size, timed as a user's loop times a model."""

    name: str = "weight_reuse"
    after: tuple[str, ...] = ("dram_overlap", "subnormal")

    def steps(self, setting: Setting) -> int:
        return 1

    def set_up(self, setting: Setting) -> list[Job]:
        self.loops = [
            Loop(setting.runner, f"4 MatMul (1xN) @ (NxN), {binary_bytes(n)} of weights", graphs.gemv_chain(n))
            for n in setting.suite.reuse_bytes(setting.caches)
        ]
        setting.advance(1)
        return list(self.loops)

    def read(self, device: Device, reading: Reading) -> Device:
        loops = [(loop.model, seconds) for loop in self.loops if (seconds := loop.time_s()) is not None]
        return replace(device, weight_reuse=weight_reuse(device, loops, reading.how))


class NetworkFactor:
    """How many times their predictions a network's kernels take run one after the other (``network_factor``):
    the factor network (``network.factor_network``), timed in every pass as the reference block is, read last,
    against every other figure. Its median run, as a user's timing loop reports a model's time: the factor carries
    this machine's usual run-to-run jitter into every prediction, which the ceilings' fast estimates set aside.
    The median is that of the quietest third of the calibration, as a model's measured time is that of its
    quietest round."""

    name: str = "network_factor"
    after: tuple[str, ...] = ("record", "dram_overlap", "subnormal", "weight_reuse")

    def steps(self, setting: Setting) -> int:
        return 1

    def set_up(self, setting: Setting) -> list[Job]:
        self.job = Reference(setting.runner.threads, setting.runner.provider, factor_network())
        setting.advance(1)
        return [self.job]

    def read(self, device: Device, reading: Reading) -> Device:
        sampler = self.job.sampler
        typical = sampler.typical_s()
        if typical is None:
            return device
        what = f"the median of its runs in the quietest of {QUIET_STRETCHES} stretches of {len(sampler.samples)} runs"
        factor = network_factor(device, sampler.model, typical, f"{what}; {reading.how}")
        inputs = reading.inputs(**factor.inputs, runs=len(sampler.samples))
        return replace(device, network_factor=replace(factor, inputs=inputs))
