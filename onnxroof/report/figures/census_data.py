"""The numbers behind the census figure: paper 004's view of a model zoo, each model's FLOPs against its memory
footprint (weights + inputs + every tensor a node writes, none reused; log-log), coloured by its arithmetic
intensity, the points of models that do not fit a device's memory (their peak need against its capacity) marked.

One point per row of the census that has an analysis (a model on a device at a batch and precision; one per model
and device where the census has one batch and precision); rows with an error, no FLOPs or no footprint (a census
file written before the footprint was a column) are left out and counted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onnxroof.report.figures.style import log_limits

LABELLED_POINTS = 30  # up to this many points are named by their model beside them
ZOO_PREFIX = "zoo:"


@dataclass(frozen=True)
class CensusPoint:
    """One row on the plane: the footprint (bytes) on x, FLOPs on y, coloured by FLOP/byte; ``fits`` whether its
    peak need fits the device's memory (None where the device lists no capacity)."""

    model: str  # short: a file's stem or a zoo name
    device: str
    footprint_bytes: float
    flops: float
    intensity: float
    fits: bool | None


@dataclass(frozen=True)
class CensusData:
    title: str
    points: tuple[CensusPoint, ...]
    devices: tuple[str, ...]  # in the order the rows name them: the legend's
    x_limits: tuple[float, float]
    y_limits: tuple[float, float]
    intensity_limits: tuple[float, float]
    labelled: bool  # few enough points to name each
    left_out: int  # rows without a point: an error, or no FLOPs or footprint


def short_model(model: str) -> str:
    """A model as a point's label names it: a zoo model by its name, a file by its stem."""
    if model.startswith(ZOO_PREFIX):
        return model[len(ZOO_PREFIX) :]
    return os.path.splitext(os.path.basename(model))[0] or model


def _point(row: Mapping[str, Any]) -> CensusPoint | None:
    footprint, flops = row.get("footprint_bytes"), row.get("flops")
    if row.get("error") or not footprint or not flops or footprint <= 0 or flops <= 0:
        return None
    return CensusPoint(
        short_model(str(row["model"])),
        str(row["device"]),
        footprint,
        flops,
        row.get("intensity") or 0.0,
        row.get("fits"),
    )


def census_data(rows: Sequence[Mapping[str, Any]]) -> CensusData:
    """The census figure's points and devices from a census' rows."""
    found = [_point(r) for r in rows]
    points = tuple(p for p in found if p is not None)
    devices = tuple(dict.fromkeys(str(r["device"]) for r in rows))
    models = len({p.model for p in points})
    intensities = [p.intensity for p in points if p.intensity > 0]
    return CensusData(
        title=f"Census of {models} model{'s' if models != 1 else ''}: FLOPs against footprint on {', '.join(devices)}",
        points=points,
        devices=devices,
        x_limits=log_limits([p.footprint_bytes for p in points]),
        y_limits=log_limits([p.flops for p in points]),
        intensity_limits=_spread(intensities),
        labelled=len(points) <= LABELLED_POINTS,
        left_out=len(found) - len(points),
    )


def _spread(values: list[float]) -> tuple[float, float]:
    """The colour scale's limits: the values' range, widened to a factor of 2 either side of a single value."""
    if not values:
        return (1.0, 10.0)
    low, high = min(values), max(values)
    return (low, high) if high > low else (low / 2, high * 2)
