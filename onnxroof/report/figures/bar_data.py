"""The numbers behind the layers figure: per-layer arithmetic intensity against each device's ridge point (paper
000 Fig. 5), and FLOPs, bytes and predicted time by op type (paper 000 Figs. 3-4, paper 004 Fig. 8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnxroof.predict.analysis import Analysis
from onnxroof.report.figures.plane_data import title_of


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


def layers_data(analyses: Sequence[Analysis]) -> LayersData:
    """Bars of every layer of the first analysis (costs do not depend on the device), a ridge line per analysis,
    and the op types' totals with each analysis' predicted time."""
    first = analyses[0]
    bars = tuple(LayerBar(n.name, n.op_type, n.cost.arithmetic_intensity) for n in first.nodes)
    ridges = tuple(
        RidgeLine(a.device.key, used, peak / a.device.memory_bandwidth.value)
        for a in analyses
        for peak, used in [a.device.peak(a.totals.prediction.precision)]
    )
    times = [{o.op_type: o.predicted_time_s for o in a.by_op_type} for a in analyses]
    shares = [
        OpTypeShare(
            o.op_type, o.count, o.flops, o.bytes_read + o.bytes_written, tuple(t.get(o.op_type, 0.0) for t in times)
        )
        for o in first.by_op_type
    ]
    shares.sort(key=lambda s: (-s.time_s[0], s.op_type))
    return LayersData(
        title=title_of(analyses, "Layers"),
        bars=bars,
        ridges=ridges,
        op_types=tuple(shares),
        devices=tuple(a.device.key for a in analyses),
    )
