"""The numbers behind the layers figure: per-layer arithmetic intensity against each device's ridge point (paper
000 Fig. 5), and FLOPs, bytes and predicted time by op type (paper 000 Figs. 3-4, paper 004 Fig. 8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnxroof.predict.analysis import Analysis
from onnxroof.report.figures.plane_data import plain_op_type, title_of


@dataclass(frozen=True)
class LayerBar:
    """One layer's arithmetic intensity (FLOPs / bytes moved), in graph order."""

    layer: str
    op_type: str
    intensity: float


@dataclass(frozen=True)
class RidgeLine:
    """A device's ridge point at the analysis' precision: peak / bandwidth; layers below it are memory-bound."""

    device: str
    precision: str
    ridge_point: float


@dataclass(frozen=True)
class OpTypeShare:
    """One op type's FLOPs and bytes (the same on every device) and its predicted time on each device, in the
    order of the analyses."""

    op_type: str
    count: int
    flops: float
    bytes: float
    time_s: tuple[float, ...]


@dataclass(frozen=True)
class LayersData:
    title: str
    bars: tuple[LayerBar, ...]
    ridges: tuple[RidgeLine, ...]
    op_types: tuple[OpTypeShare, ...]  # largest predicted time on the first device first
    devices: tuple[str, ...]


def _by_plain_op_type(analysis: Analysis) -> dict[str, tuple[int, float, float, float]]:
    """(count, FLOPs, bytes, predicted time) per op type without its domain: an engine's NCHWc Conv is a Conv
    (on a calibrated host the engine's graph is analyzed, where a Conv carries the BatchNormalization and Relu
    fused into it)."""
    out: dict[str, tuple[int, float, float, float]] = {}
    for o in analysis.by_op_type:
        name = plain_op_type(o.op_type)
        count, flops, moved, time_s = out.get(name, (0, 0.0, 0.0, 0.0))
        out[name] = (
            count + o.count,
            flops + o.flops,
            moved + o.bytes_read + o.bytes_written,
            time_s + o.predicted_time_s,
        )
    return out


def layers_data(analyses: Sequence[Analysis]) -> LayersData:
    """Bars of every layer of the first analysis (costs do not depend on the device), a ridge line per analysis,
    and per op type the first analysis' FLOPs and bytes and each analysis' predicted time (an op type that one
    analysis' graph lacks, as a fused engine graph lacks BatchNormalization, has no time there)."""
    first = analyses[0]
    bars = tuple(LayerBar(n.name, n.op_type, n.cost.arithmetic_intensity) for n in first.nodes)
    ridges = tuple(
        RidgeLine(a.device.key, used, peak / a.device.memory_bandwidth.value)
        for a in analyses
        for peak, used in [a.device.peak(a.totals.prediction.precision)]
    )
    per_analysis = [_by_plain_op_type(a) for a in analyses]
    shares = []
    for name in dict.fromkeys(name for totals in per_analysis for name in totals):
        count, flops, moved, _ = per_analysis[0].get(name, (0, 0.0, 0.0, 0.0))
        times = tuple(totals.get(name, (0, 0.0, 0.0, 0.0))[3] for totals in per_analysis)
        shares.append(OpTypeShare(name, count, flops, moved, times))
    shares.sort(key=lambda s: (-s.time_s[0], s.op_type))
    return LayersData(
        title=title_of(analyses, "Layers"),
        bars=bars,
        ridges=ridges,
        op_types=tuple(shares),
        devices=tuple(a.device.key for a in analyses),
    )
