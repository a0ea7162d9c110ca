"""The probes read on op-class kernels (``onnxroof.ort.calibrate.probes``): the op-class samples and the
convolutions' weight wait, the fp32, fp16 and int8 peaks, the ceilings, dram_overlap and the costs of subnormal
floats. They read net of the overheads ``host_probes.Overheads`` measures."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from onnxroof.devices import Device, FrozenMap, Peak
from onnxroof.errors import UserError
from onnxroof.ort.calibrate import graphs
from onnxroof.ort.calibrate.ceilings import (
    class_ceilings,
    conv_weight_wait,
    dram_overlap,
    matrix_rate,
    peak_candidates,
    subnormal_costs,
)
from onnxroof.ort.calibrate.host_probes import Dram, Limits, Overheads, held_note
from onnxroof.ort.calibrate.jobs import (
    MASK_VALUE,
    Chain,
    ClassJob,
    Job,
    Profiled,
    Sample,
    WaitPair,
    class_job,
    conv_sample,
    profiled,
    subnormal_jobs,
)
from onnxroof.ort.calibrate.probes import Reading, Setting
from onnxroof.predict import op_classes

__all__ = ["Ceilings", "ClassBenches", "DramOverlap", "Fp32Peak", "LowPrecision", "Subnormal"]


class DramOverlap:
    """The share of a compute-bound convolution's DRAM traffic time its computation hides (``dram_overlap``), from
    the suite's batched convolution, whose data is larger than any cache, against the conv ceiling; its
    harvested nodes are op-class samples too (:meth:`samples`)."""

    name: str = "dram_overlap"
    after: tuple[str, ...] = ("ceilings", "record")

    def __init__(self, overheads: Overheads) -> None:
        self.overheads = overheads

    def steps(self, setting: Setting) -> int:
        return 1

    def set_up(self, setting: Setting) -> list[Job]:
        bench = setting.suite.batched_conv
        self.job = profiled(bench, setting.runner, setting.rand) if bench is not None else None
        setting.advance(1)
        return [self.job] if self.job is not None else []

    def samples(self) -> list[Sample]:
        """The harvested nodes of the batched convolution, net of the profiler's cost per node (once the
        overheads are read)."""
        return self.job.samples(self.overheads.profiler_s) if self.job is not None else []

    def read(self, device: Device, reading: Reading) -> Device:
        conv = conv_sample(self.job, self.overheads.profiler_s) if self.job is not None else None
        if conv is None:
            return device
        hidden = dram_overlap(conv, device, reading.how)
        if hidden is None:
            return device
        return replace(device, dram_overlap=replace(hidden, inputs=reading.inputs(**hidden.inputs)))


class ClassBenches:
    """The op-class benchmarks of the suite (an op this onnxruntime build lacks leaves its benchmark out): their
    ``samples``, the batched convolution's included, which the peaks and the ceilings are read on, and the
    convolutions' weight wait (``conv_weight_wait``) from the suite's cold and warm pairs."""

    name: str = "classes"
    after: tuple[str, ...] = ("overheads", "dram")
    samples: list[Sample]

    def __init__(self, overheads: Overheads, dram: Dram, batched: DramOverlap) -> None:
        self.overheads, self.dram, self.batched = overheads, dram, batched

    def steps(self, setting: Setting) -> int:
        return len(setting.suite.benches)

    def set_up(self, setting: Setting) -> list[Job]:
        self.jobs: list[ClassJob] = []
        for bench in setting.suite.benches:
            with contextlib.suppress(UserError):  # an op this onnxruntime build lacks leaves its class out
                self.jobs.append(class_job(bench, setting.runner, setting.rand, setting.suite.chain_target_s))
            setting.advance(1)
        return list(self.jobs)

    def read(self, device: Device, reading: Reading) -> Device:
        node, profiler = self.overheads.node_s, self.overheads.profiler_s
        own = [x for job in self.jobs for x in (job.samples(node) if isinstance(job, Chain) else job.samples(profiler))]
        self.samples = own + self.batched.samples()
        waits = [w for job in self.jobs if isinstance(job, WaitPair) and (w := job.wait(profiler))]
        return replace(device, conv_weight_wait=conv_weight_wait(waits, self.dram.measured, reading.how))


class Fp32Peak:
    """The fp32 peak: the best rate of the peak benchmarks and of the op-class kernels a peak may be read on (see
    ceilings.peak_candidates), never above the cores' limit."""

    name: str = "fp32_peak"
    after: tuple[str, ...] = ("overheads", "classes", "limits")

    def __init__(self, overheads: Overheads, classes: ClassBenches, limits: Limits) -> None:
        self.overheads, self.classes, self.limits = overheads, classes, limits

    def steps(self, setting: Setting) -> int:
        return 1

    def set_up(self, setting: Setting) -> list[Job]:
        self.jobs = [profiled(bench, setting.runner, setting.rand) for bench in setting.suite.peaks]
        setting.advance(1)
        return list(self.jobs)

    def read(self, device: Device, reading: Reading) -> Device:
        rates = [
            (
                x.cost.flops * op_classes.taps_inside(x.view) / x.time_s,
                f"{x.label} ({x.view.domain or 'ai.onnx'}::{x.view.op_type})",
            )
            for job in self.jobs
            for x in job.samples(self.overheads.profiler_s)
        ]
        candidates = rates + peak_candidates(self.classes.samples)
        if not candidates:
            raise UserError("calibration failed: no compute benchmark produced a timing", "run the calibration again")
        measured, what = max(candidates)
        value = min(measured, self.limits.limits.flops)
        source = f"calibrated: best fp32 rate of large kernels, {what}; {reading.how}" + held_note(measured, value)
        peak = Peak(value, True, source, inputs=reading.inputs(measured_flops_s=measured))
        return replace(device, peak_flops=FrozenMap({**device.peak_flops, "fp32": peak}))


class LowPrecision:
    """The fp16 and int8 peaks where the provider has kernels for them: n x n x n matrix products (the fp16 one
    left out where onnxruntime runs it in fp32 between Casts), the int8 one the best of the integer product and
    of the 8-bit convolutions (QLinearConv's kernels outrun MatMulInteger's: a peak below them would give their
    ceilings efficiencies over 100%)."""

    name: str = "low_precision"
    after: tuple[str, ...] = ("overheads", "classes", "fp32_peak")

    def __init__(self, overheads: Overheads, classes: ClassBenches) -> None:
        self.overheads, self.classes = overheads, classes

    def steps(self, setting: Setting) -> int:
        return 2

    def set_up(self, setting: Setting) -> list[Job]:
        n, runner = setting.suite.matrix_size, setting.runner
        self.n, self.int8, self.fp16 = n, None, None
        with contextlib.suppress(UserError):
            self.int8 = Profiled(runner, f"MatMulInteger uint8 ({n}x{n}) @ int8 ({n}x{n})", graphs.int8_matmul(n))
        with contextlib.suppress(UserError):
            self.fp16 = Profiled(runner, f"MatMul fp16 ({n}x{n}) @ ({n}x{n})", graphs.fp16_matmul(n))
            if any(node.op_type == "Cast" for node in self.fp16.opt.graph.node):
                self.fp16.discard()
                self.fp16 = None
        setting.advance(2)
        return [job for job in (self.int8, self.fp16) if job is not None]

    def read(self, device: Device, reading: Reading) -> Device:
        profiler, how = self.overheads.profiler_s, reading.how
        peaks = dict(device.peak_flops)
        fp16 = matrix_rate(self.fp16, profiler, self.n)
        if fp16 is not None and self.fp16 is not None:
            inputs = reading.inputs(size=self.n, measured_flops_s=fp16)
            peaks["fp16"] = Peak(fp16, True, f"calibrated: {self.fp16.label}; {how}", inputs=inputs)
        int8_rate = matrix_rate(self.int8, profiler, self.n)
        int8 = [(int8_rate, self.int8.label)] if int8_rate is not None and self.int8 is not None else []
        int8 += peak_candidates(self.classes.samples, "int8")
        if int8:
            rate, label = max(int8)
            what = f"calibrated: best int8 rate, {label} (OP/s, a multiply-accumulate counts 2); {how}"
            peaks["int8"] = Peak(rate, True, what, inputs=reading.inputs(measured_flops_s=rate))
        return replace(device, peak_flops=FrozenMap(peaks))


class Ceilings:
    """The op-class ceilings, read on the op-class samples against the device every figure before it makes: no
    dram_overlap, subnormal costs, weight_reuse or network factor yet, and no calibration record, so that the
    predictions the ceilings are read against count a private cache once whatever the threads (the record gives
    the prediction its threads)."""

    name: str = "ceilings"
    after: tuple[str, ...] = ("limits", "overheads", "dram", "caches", "classes", "fp32_peak", "low_precision")

    def __init__(self, classes: ClassBenches) -> None:
        self.classes = classes

    def steps(self, setting: Setting) -> int:
        return 0

    def set_up(self, setting: Setting) -> list[Job]:
        return []

    def read(self, device: Device, reading: Reading) -> Device:
        ceilings = class_ceilings(self.classes.samples, device, reading.run.threads)
        return replace(device, ceilings=FrozenMap(ceilings))


class Subnormal:
    """What subnormal floats cost (``softmax_underflow``, ``subnormal_product``): the suite's masked attention
    block timed with its mask at 0 and at -100 (Swin's), over every masked score of every head."""

    name: str = "subnormal"
    after: tuple[str, ...] = ("dram_overlap",)

    def steps(self, setting: Setting) -> int:
        return 0

    def set_up(self, setting: Setting) -> list[Job]:
        self.jobs = subnormal_jobs(setting.suite.masked_attention, setting.runner, setting.rand)
        return list(self.jobs or ())

    def read(self, device: Device, reading: Reading) -> Device:
        sizes = reading.suite.masked_attention
        if self.jobs is None or sizes is None:
            return device
        size, window, heads, d = sizes
        # every masked score of every head, each a subnormal probability at -100, read by d multiply-adds
        underflows = int(graphs.swin_mask(size, window, MASK_VALUE).astype(bool).sum()) * heads
        plain, masked = self.jobs[0].kernel_times(), self.jobs[1].kernel_times()
        costs = subnormal_costs(plain, masked, underflows, underflows * d, reading.how)
        underflow, product = (None if x is None else replace(x, inputs=reading.inputs(**x.inputs)) for x in costs)
        return replace(device, softmax_underflow=underflow, subnormal_product=product)
