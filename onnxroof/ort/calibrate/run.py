"""The calibration run: a fold over the host's probes (:func:`host_probes`). Every probe's jobs
are set up once, timed in passes within the budget, then each probe reads what the passes measured into the
device (``onnxroof.ort.calibrate.cache`` keeps this host's)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence

from onnxroof.devices import Device, FrozenMap, Sourced
from onnxroof.errors import UserError
from onnxroof.ort.calibrate.accelerator import GPU, TINY, calibrate_roofline
from onnxroof.ort.calibrate.bench import Suite
from onnxroof.ort.calibrate.class_probes import Ceilings, ClassBenches, DramOverlap, Fp32Peak, LowPrecision, Subnormal
from onnxroof.ort.calibrate.graphs import Rand
from onnxroof.ort.calibrate.host import cache_levels, cpu_model, cpu_times, host_key, ort_version
from onnxroof.ort.calibrate.host_probes import (
    CacheLevels,
    Dram,
    Limits,
    NetworkFactor,
    Overheads,
    Record,
    WeightReuse,
)
from onnxroof.ort.calibrate.jobs import Flush, Runner, time_passes
from onnxroof.ort.calibrate.probes import Probe, Reading, Run, Setting, fold, set_up
from onnxroof.ort.calibrate.suite import FULL, QUICK
from onnxroof.ort.session_spec import provider_name
from onnxroof.predict.profiles import ONNXRUNTIME

__all__ = ["calibrate", "host_probes", "run_probes"]


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
    run = Run(threads, "cpu", budget_s, time.perf_counter(), cpu_times(), time.process_time())
    return run_probes(host_probes(), run, QUICK if quick else FULL, progress)


def host_probes() -> list[Probe]:
    """The host's probes (``host_probes``, ``class_probes``) in the order each pass times their jobs: the order
    decides what each job finds in the caches, and the op-class benchmarks' graphs come from one Rand in this
    order too. They read in the order their ``after`` gives (``probes.read_order``)."""
    limits, overheads = Limits(), Overheads()
    dram = Dram(overheads, limits)
    batched = DramOverlap(overheads)
    classes = ClassBenches(overheads, dram, batched)
    fp32 = Fp32Peak(overheads, classes, limits)
    return [
        limits,
        overheads,
        Record(overheads),
        NetworkFactor(),
        CacheLevels(overheads, dram, limits),
        dram,
        fp32,
        batched,
        LowPrecision(overheads, classes),
        classes,
        Ceilings(classes),
        WeightReuse(),
        Subnormal(),
    ]


def run_probes(
    probes: Sequence[Probe], run: Run, suite: Suite, progress: Callable[[int, int], None] | None = None
) -> Device:
    """The device ``probes`` measure: every probe's jobs set up in the probes' order, timed in that order in
    passes until the suite's passes are done or the next one would overrun the budget (at least two passes), then
    read (:func:`probes.fold`) into a device that holds only what names the host (key, name, kind, engine)."""
    with tempfile.TemporaryDirectory(prefix="onnxroof-calibrate-") as tmp:
        runner = Runner(run.threads, run.provider, tmp)
        caches = cache_levels()
        steps = _Progress(progress)
        setting = Setting(suite, caches, runner, Rand(0), steps.advance)
        steps.total = sum(p.steps(setting) for p in probes) + suite.passes
        jobs = set_up(probes, setting)
        deadline = run.start + run.budget_s - 1.0
        passes = time_passes(jobs, suite.reps, suite.passes, deadline, Flush(suite.flush_bytes), steps.advance)
        steps.finish()
        return fold(probes, _blank(run), Reading(run, suite, passes))


def _blank(run: Run) -> Device:
    """The calibrated device before any probe reads into it: what names the host, and empty figures the probes
    replace."""
    return Device(
        key=host_key(run.threads, run.provider),
        name=f"{cpu_model()}, onnxruntime {ort_version()} {run.provider}, {run.threads} thread(s) (calibrated)",
        kind="cpu",
        overlap="serial",
        peak_flops=FrozenMap(),
        memory_bandwidth=Sourced(0.0, "not calibrated"),
        memory_capacity=None,
        launch_overhead=Sourced(0.0, "not calibrated"),
        engine=ONNXRUNTIME,
    )


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

    def __init__(self, callback: Callable[[int, int], None] | None, total: int = 0) -> None:
        self.total, self.callback, self.done = total, callback, 0

    def advance(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        if self.callback is not None:
            self.callback(self.done, self.total)

    def finish(self) -> None:
        self.advance(self.total)
