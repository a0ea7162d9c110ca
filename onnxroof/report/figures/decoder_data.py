"""The numbers behind the generation figure: a decoder's time per token against its context, one series per
device, and each phase of its generation (the prefill, the first and the last decode step) on the device's roofline.

A DecoderPrediction names its device by key only; the roofs need the Device itself and the precision the steps
compute at, so each prediction comes with them as a DecoderOnDevice. Drawn from these alone, the figure is
checked by tests without reading pixels.

A prediction split over N GPUs (tensor parallelism) has each step's FLOPs and bytes for the whole model and its
time for one GPU, all-reduces included: its points are what the N GPUs attain together, under N times the
device's roofs (the ridge points unchanged), and the device is named "N x DEVICE".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onnxroof.devices import PRECISIONS, Device
from onnxroof.report.figures.plane_data import DRAM, RoofLine
from onnxroof.report.figures.style import log_limits
from onnxroof.whatif.decoder import DecoderPrediction, Step

LINE_POINTS = 1000  # a decode line with more steps than this is drawn through this many, the analyzed ones kept
LOG_SPAN = 10.0  # an axis whose values span more than this factor is drawn on a log scale


@dataclass(frozen=True)
class DecoderOnDevice:
    """A prediction and what its roofs are drawn from: the Device it was made on and the precision its steps
    compute at (an Analysis' ``totals.prediction.precision``; None where it is not known: a roof per precision
    the device lists)."""

    prediction: DecoderPrediction
    device: Device
    precision: str | None = None


@dataclass(frozen=True)
class DecodePoint:
    """One decode step on the time-per-token line: the cache it reads, its time, and whether it was analyzed
    (else interpolated between the analyzed steps, as the prediction's mean is)."""

    context: int
    ms_per_token: float
    analyzed: bool


@dataclass(frozen=True)
class PhasePoint:
    """One step of a generation on the roofline: (FLOPs / bytes, FLOPs / predicted time)."""

    phase: str  # "prefill", "decode first" or "decode last"
    context: int
    new_tokens: int
    flops: float
    bytes: float
    time_s: float
    bound: str

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/byte; 0 for a step that moves nothing (it then has no point)."""
        return self.flops / self.bytes if self.bytes > 0 else 0.0

    @property
    def flops_s(self) -> float:
        """Attained FLOP/s at the predicted time; 0 for a step that takes none."""
        return self.flops / self.time_s if self.time_s > 0 else 0.0

    @property
    def label(self) -> str:
        if self.phase == "prefill":
            return f"prefill ({self.new_tokens} tokens)"
        return f"decode, cache {self.context}"


@dataclass(frozen=True)
class DeviceSeries:
    """One device's generation: its decode line, its time to first token, and its phases on the roofline;
    the measured prefill and decode steps where the prediction holds a measurement."""

    device: str  # as the user names it (Device.tag)
    setting: str  # "prompt P, G generated, batch B"
    ttft_ms: float
    decode_mean_ms: float
    tokens_per_s: float
    complete: bool  # every node counted; else the times are lower bounds
    decode: tuple[DecodePoint, ...]
    phases: tuple[PhasePoint, ...]
    measured_ttft_ms: float | None = None
    measured: tuple[tuple[int, float], ...] = ()  # (context, ms per token) of the measured decode steps

    @property
    def analyzed_indices(self) -> list[int]:
        """Where on the decode line the analyzed steps are (their markers)."""
        return [i for i, p in enumerate(self.decode) if p.analyzed]


@dataclass(frozen=True)
class DecoderFigureData:
    """Everything the generation figure shows: the left panel's series and scales, the right panel's roofs,
    phases and log limits."""

    title: str
    series: tuple[DeviceSeries, ...]
    shared_setting: bool  # every series' prompt, generation and batch the same: said once, in the title
    roofs: tuple[RoofLine, ...]
    log_context: bool
    log_time: bool
    x_limits: tuple[float, float]  # the roofline's FLOP/byte
    y_limits: tuple[float, float]  # the roofline's FLOP/s


def milliseconds(seconds: float) -> float:
    return 1000.0 * seconds


def spans_decade(values: Sequence[float]) -> bool:
    """Whether the positive ``values`` span more than LOG_SPAN times: a log axis then shows them all."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) > LOG_SPAN * min(positive)


def line_contexts(prediction: DecoderPrediction, limit: int = LINE_POINTS) -> list[int]:
    """The contexts the decode line passes through: every step's, P .. P+G-1, or ``limit`` of them evenly
    spaced where there are more, with every analyzed step's kept."""
    first, last = prediction.prompt, prediction.prompt + prediction.generate - 1
    analyzed = {s.context for s in prediction.decode}
    if prediction.generate <= limit:
        return list(range(first, last + 1))
    spaced = {round(float(c)) for c in np.linspace(first, last, limit)}
    return sorted(spaced | analyzed)


def decode_line(prediction: DecoderPrediction, limit: int = LINE_POINTS) -> tuple[DecodePoint, ...]:
    """Each decode step's time per token, the steps not analyzed interpolated linearly between those analyzed
    (what ``mean_step_time`` averages), in ms."""
    analyzed = {s.context: s.time_s for s in prediction.decode}
    contexts = line_contexts(prediction, limit)
    known = sorted(analyzed)
    times = np.interp(np.array(contexts, dtype=float), known, [analyzed[c] for c in known])
    return tuple(DecodePoint(c, milliseconds(float(t)), c in analyzed) for c, t in zip(contexts, times.tolist()))


def phase_point(phase: str, step: Step) -> PhasePoint:
    return PhasePoint(phase, step.context, step.new_tokens, step.flops, step.bytes, step.time_s, step.bound)


def phases_of(prediction: DecoderPrediction) -> tuple[PhasePoint, ...]:
    """The prefill, the first decode step and (where it is another step) the last."""
    first, last = prediction.decode[0], prediction.decode[-1]
    points = [phase_point("prefill", prediction.prefill), phase_point("decode first", first)]
    if len(prediction.decode) > 1:
        points.append(phase_point("decode last", last))
    return tuple(points)


def series_of(run: DecoderOnDevice, limit: int = LINE_POINTS) -> DeviceSeries:
    p, measured = run.prediction, run.prediction.measured
    return DeviceSeries(
        device=device_name(run),
        setting=f"prompt {p.prompt}, {p.generate} generated, batch {p.batch}",
        ttft_ms=milliseconds(p.prefill.time_s),
        decode_mean_ms=milliseconds(p.decode_mean_s),
        tokens_per_s=p.tokens_per_s,
        complete=p.complete,
        decode=decode_line(p, limit),
        phases=phases_of(p),
        measured_ttft_ms=milliseconds(measured.prefill_s) if measured else None,
        measured=tuple((c, milliseconds(t)) for c, t in measured.decode) if measured else (),
    )


def device_name(run: DecoderOnDevice) -> str:
    """The device as the user names it (Device.tag), "N x DEVICE" where the model is split over N of them."""
    ranks = run.prediction.tensor_parallel
    return run.device.tag() if ranks == 1 else f"{ranks} x {run.device.tag()}"


def device_roofs(run: DecoderOnDevice) -> list[RoofLine]:
    """The device's DRAM roof at the run's precision (its fallback where the device lists no peak for it, see
    Device.peak), or where that is None one per precision it lists, none of them primary; N times the device's
    where the model is split over N. A roof names its device as the series do, so that each is drawn in its
    series' colour."""
    device, ranks, name = run.device, run.prediction.tensor_parallel, device_name(run)
    bandwidth = ranks * device.memory_bandwidth.value
    if run.precision is None:
        listed = [p for p in PRECISIONS if p in device.peak_flops]
        return [RoofLine(name, DRAM, p, ranks * device.peak_flops[p].value, bandwidth, False) for p in listed]
    peak, used = device.peak(run.precision)
    return [RoofLine(name, DRAM, used, ranks * peak, bandwidth, True)]


def check_runs(runs: Sequence[DecoderOnDevice]) -> None:
    """A ValueError for no runs, or for a prediction given with another device than the one it was made on."""
    if not runs:
        raise ValueError("the generation figure needs at least one prediction")
    for run in runs:
        if run.prediction.device != run.device.key:
            raise ValueError(f"a prediction on {run.prediction.device} given with device {run.device.key}")


def title_of(runs: Sequence[DecoderOnDevice], series: Sequence[DeviceSeries]) -> str:
    """'Generation of NAME on DEVICES: prompt P, G generated, batch B', the setting where every series shares it
    (else each series' legend entry says its own)."""
    devices = ", ".join(s.device for s in series)
    head = f"Generation of {runs[0].prediction.model} on {devices}"
    settings = {s.setting for s in series}
    return f"{head}: {series[0].setting}" if len(settings) == 1 else head


def decoder_data(runs: Sequence[DecoderOnDevice], limit: int = LINE_POINTS) -> DecoderFigureData:
    """The generation figure's data: each device's decode line and phases, their roofs, and the axes' scales
    (the context and time axes logarithmic where their values span more than LOG_SPAN times)."""
    check_runs(runs)
    series = tuple(series_of(run, limit) for run in runs)
    roofs = tuple(dict.fromkeys(roof for run in runs for roof in device_roofs(run)))
    phases = [ph for s in series for ph in s.phases]
    contexts = [float(d.context) for s in series for d in s.decode]
    times = [d.ms_per_token for s in series for d in s.decode] + [ms for s in series for _, ms in s.measured]
    return DecoderFigureData(
        title=title_of(runs, series),
        series=series,
        shared_setting=len({s.setting for s in series}) == 1,
        roofs=roofs,
        log_context=spans_decade(contexts),
        log_time=spans_decade(times),
        x_limits=log_limits([ph.intensity for ph in phases] + [r.ridge_point for r in roofs]),
        y_limits=log_limits([ph.flops_s for ph in phases] + [r.peak_flops_s for r in roofs]),
    )
