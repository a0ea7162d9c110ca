"""The numbers behind the plane figures (roofline, time-based roofline, complexity), as frozen dataclasses.

Each figure is drawn from these alone, so that tests check what a figure shows without reading pixels. A layer
whose coordinates cannot sit on a log axis (no FLOPs, no bytes, no time) keeps its point with ``on_floor`` set:
the drawing pins it to the axes' lower corner and says so in the legend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnxroof.devices import PRECISIONS, Device
from onnxroof.ort.validate import Validation
from onnxroof.predict.analysis import Analysis, NodeResult
from onnxroof.predict.engine import product_precision
from onnxroof.predict.gpu_times import achievable_dram, achievable_rate
from onnxroof.predict.profiles import named_profile
from onnxroof.report.figures.style import log_limits

DRAM = "DRAM"
ACHIEVABLE = "achievable"  # the roof published microbenchmarks reached (a GPU's GpuFigures)
FLOOR_INSET = 1.6  # a floor point sits this factor inside the axes' lower limits, clear of the spines


@dataclass(frozen=True)
class RoofLine:
    """One roof: a device's peak at a precision under the bandwidth of one memory level (DRAM or a cache)."""

    device: str
    level: str
    precision: str
    peak_flops_s: float
    bandwidth_bytes_s: float
    primary: bool  # the precision the analysis computes at (drawn solid); others are drawn dashed

    @property
    def ridge_point(self) -> float:
        """FLOP/byte where the slanted memory roof meets the flat compute roof: peak / bandwidth."""
        return self.peak_flops_s / self.bandwidth_bytes_s


@dataclass(frozen=True)
class PlanePoint:
    """One layer (or kernel) on a plane: its coordinates, its share of the model's time and what it stands for.

    ``measured`` marks a point read from a measurement (drawn open) rather than predicted (drawn closed)."""

    layer: str
    op_type: str
    device: str
    x: float
    y: float
    share: float
    flops: float
    bytes: float
    time_s: float
    bound: str
    measured: bool = False
    measured_time_s: float | None = None

    @property
    def on_floor(self) -> bool:
        return not (self.x > 0 and self.y > 0)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass(frozen=True)
class ModelPoint:
    """The whole model on a device: accumulated FLOPs over accumulated bytes, FLOPs over predicted time."""

    device: str
    precision: str
    x: float
    y: float
    time_s: float


@dataclass(frozen=True)
class Isocurve:
    """The layers that take ``time_s`` on the time plane: with launches overlapped (``max``), the L through the
    corner (``corner_s``, ``corner_s``) where corner = time; with serial dispatch the corner is the time less the
    launch overhead, the time being max(compute, memory) + overhead."""

    device: str
    time_s: float
    corner_s: float


@dataclass(frozen=True)
class BalanceLine:
    """Paper 001's machine balance on the complexity plane: FLOPs = balance x bytes, balance = peak / bandwidth."""

    device: str
    precision: str
    balance: float


@dataclass(frozen=True)
class PlaneData:
    """Everything one plane figure shows. ``x_limits`` and ``y_limits`` are the log axes' ranges; a floor point
    sits at their lower ends."""

    kind: str
    title: str
    x_label: str
    y_label: str
    x_limits: tuple[float, float]
    y_limits: tuple[float, float]
    points: tuple[PlanePoint, ...]
    labelled: tuple[str, ...] = ()  # the layers whose names are written next to their points
    roofs: tuple[RoofLine, ...] = ()
    models: tuple[ModelPoint, ...] = ()
    isocurves: tuple[Isocurve, ...] = ()
    overhead_boxes: tuple[tuple[str, float], ...] = ()  # (device, launch overhead in s) on the time plane
    balances: tuple[BalanceLine, ...] = ()
    # (device, bytes, FLOPs) on the complexity plane: a kernel inside moves fewer bytes than the bandwidth moves in
    # one launch overhead and does fewer FLOPs than the peak does in it, so its launch dominates (paper 001)
    launch_boxes: tuple[tuple[str, float, float], ...] = ()

    @property
    def floor(self) -> tuple[float, float]:
        """Where a layer that cannot sit on the log axes is drawn: just inside the lower-left corner."""
        return (self.x_limits[0] * FLOOR_INSET, self.y_limits[0] * FLOOR_INSET)


def title_of(analyses: Sequence[Analysis], what: str) -> str:
    """``what``, the model, its devices and precisions: 'Roofline of resnet50 on v100-sxm2 (fp32)'."""
    first = analyses[0]
    targets = ", ".join(f"{a.device.tag()} ({a.totals.prediction.precision})" for a in analyses)
    return f"{what} of {first.model} on {targets}"


def roofs_of(device: Device, primary_precision: str, every_precision: bool = True) -> list[RoofLine]:
    """The device's roofs: under DRAM one per listed precision (only the primary one unless ``every_precision``),
    and at the primary precision one per cache level whose bandwidth is known (a calibrated host's L1/L2/...) and, on
    a GPU with published microbenchmark figures, the achievable roof: their large-product rate and DRAM bandwidth."""
    out = [
        RoofLine(device.key, DRAM, p, device.peak_flops[p].value, device.memory_bandwidth.value, p == primary_precision)
        for p in PRECISIONS
        if p in device.peak_flops and (every_precision or p == primary_precision)
    ]
    peak = device.peak(primary_precision)[0]
    out += [
        RoofLine(device.key, cache.level, primary_precision, peak, cache.bandwidth, True)
        for cache in device.caches
        if cache.bandwidth
    ]
    if device.gpu is not None:  # what published benchmarks reached, at the precision the engine's products run
        profile = named_profile(device)
        runs = primary_precision if profile is None else product_precision(profile, "conv", primary_precision, device)
        rate, dram = achievable_rate(device, runs), achievable_dram(device)
        out.append(RoofLine(device.key, ACHIEVABLE, runs, rate, dram, True))
    return out


def layer_time_sum(analysis: Analysis) -> float:
    """The sum of the layers' predicted times: what a layer's share is a share of."""
    return sum(n.prediction.predicted_time_s for n in analysis.nodes)


def _layer_point(node: NodeResult, device: str, total: float, x: float, y: float) -> PlanePoint:
    c, p = node.cost, node.prediction
    return PlanePoint(
        layer=node.name,
        op_type=node.op_type,
        device=device,
        x=x,
        y=y,
        share=p.predicted_time_s / total if total > 0 else 0.0,
        flops=c.flops,
        bytes=c.bytes_read + c.bytes_written,
        time_s=p.predicted_time_s,
        bound=p.bound,
    )


def plain_op_type(qualified: str) -> str:
    """A kernel's op type without its domain ('com.microsoft.nchwc::Conv' -> 'Conv'): an engine's layout variant
    of an op is coloured and listed as the op."""
    return qualified.rsplit("::", 1)[-1]


def _measured_for(analysis: Analysis, validation: Validation | None) -> Validation | None:
    """The validation when it measured ``analysis`` (its kernels are that analysis' measured points), else None."""
    return validation if validation is not None and validation.measured(analysis) else None


def top_layers(points: Sequence[PlanePoint], count: int) -> tuple[str, ...]:
    """The names of the ``count`` predicted points that take the longest (ties by name), for labelling."""
    ranked = sorted((p for p in points if not p.measured), key=lambda p: (-p.time_s, p.layer))
    return tuple(dict.fromkeys(p.layer for p in ranked[:count]))


def roofline_data(analyses: Sequence[Analysis], validation: Validation | None = None, top: int = 5) -> PlaneData:
    """Paper 002's per-layer roofline (point = (FLOPs/bytes, FLOPs/predicted time), sized by time share), paper
    000's accumulated model point, paper 004's devices side by side (one device: a roof per precision it lists;
    several: each at its analysis' precision, so that the figure stays readable); with a validation, each
    measured kernel's point (FLOPs/measured time) beside its predicted one (FLOPs/predicted time) at the kernel's
    intensity."""
    analyses = validation.beside(analyses) if validation is not None else list(analyses)
    points: list[PlanePoint] = []
    roofs: list[RoofLine] = []
    models: list[ModelPoint] = []
    for a in analyses:
        key = a.device.key
        precision = a.totals.prediction.precision
        roofs += roofs_of(a.device, precision, every_precision=len(analyses) == 1)
        total = layer_time_sum(a)
        measured = _measured_for(a, validation)
        if measured is None:
            for n in a.nodes:
                t = n.prediction.predicted_time_s
                points.append(_layer_point(n, key, total, n.cost.arithmetic_intensity, n.cost.flops / t if t else 0))
        else:
            kernel_total = sum(k.predicted_time_s for k in measured.kernels)
            for k in measured.kernels:
                share = k.predicted_time_s / kernel_total if kernel_total else 0.0
                for time_s, is_measured in ((k.predicted_time_s, False), (k.measured_time_s, True)):
                    points.append(
                        PlanePoint(
                            k.name,
                            plain_op_type(k.op_type),
                            key,
                            k.arithmetic_intensity,
                            k.flops / time_s if time_s > 0 else 0.0,
                            share,
                            k.flops,
                            k.bytes,
                            k.predicted_time_s,
                            k.bound,
                            is_measured,
                            k.measured_time_s,
                        )
                    )
        totals = a.totals
        time_s = totals.predicted_time_s
        models.append(
            ModelPoint(key, precision, totals.arithmetic_intensity, totals.flops / time_s if time_s else 0.0, time_s)
        )
    xs = [p.x for p in points] + [m.x for m in models] + [r.ridge_point for r in roofs]
    ys = [p.y for p in points] + [m.y for m in models] + [r.peak_flops_s for r in roofs]
    return PlaneData(
        kind="roofline",
        title=title_of(analyses, "Roofline"),
        x_label="arithmetic intensity (FLOP/byte)",
        y_label="performance (FLOP/s)",
        x_limits=log_limits(xs),
        y_limits=log_limits(ys),
        points=tuple(points),
        labelled=top_layers(points, top),
        roofs=tuple(roofs),
        models=tuple(models),
    )


def decades(low: float, high: float) -> list[float]:
    """The powers of ten from ``low`` to ``high`` inclusive (both powers of ten)."""
    import math

    first, last = round(math.log10(low)), round(math.log10(high))
    return [10.0**e for e in range(first, last + 1)]


def time_data(analyses: Sequence[Analysis], validation: Validation | None = None, top: int = 5) -> PlaneData:
    """Paper 001's time-based roofline: each layer at (memory time, compute time) on a device, the launch-overhead
    box, and runtime isocurves at every decade of the axes; with a validation, each measured kernel's open point
    beside its predicted one, on the same intensity diagonal, scaled by measured / predicted time."""
    analyses = validation.beside(analyses) if validation is not None else list(analyses)
    points: list[PlanePoint] = []
    boxes: list[tuple[str, float]] = []
    for a in analyses:
        key = a.device.key
        boxes.append((key, a.device.launch_overhead.value))
        total = layer_time_sum(a)
        measured = _measured_for(a, validation)
        if measured is None:
            for n in a.nodes:
                p = n.prediction
                points.append(_layer_point(n, key, total, p.memory_time_s, p.compute_time_s))
            continue
        peak = a.totals.prediction.peak_flops_s
        bandwidth = a.device.memory_bandwidth.value
        kernel_total = sum(k.predicted_time_s for k in measured.kernels)
        for k in measured.kernels:
            memory, compute = k.bytes / bandwidth, k.flops / peak
            share = k.predicted_time_s / kernel_total if kernel_total else 0.0
            scale = k.measured_time_s / k.predicted_time_s if k.predicted_time_s > 0 else 0.0
            for factor, is_measured in ((1.0, False), (scale, True)):
                points.append(
                    PlanePoint(
                        layer=k.name,
                        op_type=plain_op_type(k.op_type),
                        device=key,
                        x=memory * factor,
                        y=compute * factor,
                        share=share,
                        flops=k.flops,
                        bytes=k.bytes,
                        time_s=k.predicted_time_s,
                        bound=k.bound,
                        measured=is_measured,
                        measured_time_s=k.measured_time_s,
                    )
                )
    values = [v for p in points for v in (p.x, p.y)] + [o for _, o in boxes]
    low, high = log_limits(values)
    isocurves = []
    # One device's isocurves: the measured one's where there is a measurement, else the first's (several sets of
    # Ls one decade apart would be unreadable).
    measured_keys = [a.device.key for a in analyses if _measured_for(a, validation) is not None]
    for a in [a for a in analyses if a.device.key == (measured_keys or [analyses[0].device.key])[0]][:1]:
        overhead = a.device.launch_overhead.value if a.device.overlap == "serial" else 0.0
        # every decade inside the axes (the one at the lower limit would be a corner with no room for its L)
        isocurves += [Isocurve(a.device.key, t, t - overhead) for t in decades(low, high)[1:] if t - overhead > 0]
    return PlaneData(
        kind="time",
        title=title_of(analyses, "Time-based roofline"),
        x_label="memory (bandwidth) time (s)",
        y_label="compute time (s)",
        x_limits=(low, high),
        y_limits=(low, high),
        points=tuple(points),
        labelled=top_layers(points, top),
        isocurves=tuple(isocurves),
        overhead_boxes=tuple(boxes),
    )


def complexity_data(analyses: Sequence[Analysis], top: int = 5) -> PlaneData:
    """Paper 001 Fig. 2(b): each layer at (bytes moved, FLOPs) -- the same for every device, so drawn once from
    the first analysis -- each device's machine-balance diagonal, FLOPs = (peak / bandwidth) x bytes, and its
    launch-overhead box: bytes below bandwidth x overhead and FLOPs below peak x overhead."""
    first = analyses[0]
    total = layer_time_sum(first)
    points = [
        _layer_point(n, first.device.key, total, n.cost.bytes_read + n.cost.bytes_written, n.cost.flops)
        for n in first.nodes
    ]
    balances = [
        BalanceLine(a.device.key, used, peak / a.device.memory_bandwidth.value)
        for a in analyses
        for peak, used in [a.device.peak(a.totals.prediction.precision)]
    ]
    boxes = [
        (
            a.device.key,
            a.device.memory_bandwidth.value * launch,
            a.device.peak(a.totals.prediction.precision)[0] * launch,
        )
        for a in analyses
        for launch in [a.device.launch_overhead.value]
    ]
    xs = [p.x for p in points] + [b for _, b, _ in boxes]
    ys = [p.y for p in points] + [f for _, _, f in boxes]
    return PlaneData(
        kind="complexity",
        title=title_of(analyses, "Computational vs bandwidth complexity"),
        x_label="bandwidth complexity (bytes moved)",
        y_label="computational complexity (FLOPs)",
        x_limits=log_limits(xs),
        y_limits=log_limits(ys),
        points=tuple(points),
        labelled=top_layers(points, top),
        balances=tuple(balances),
        launch_boxes=tuple(boxes),
    )
