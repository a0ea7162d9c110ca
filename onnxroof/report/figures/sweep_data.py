"""The numbers behind the sweep figure: a sweep's rows as trajectories across the roofline (paper 000 Figs.
12-14), one per device and fixed setting, its points ordered along the axis the sweep varies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnxroof.devices import PRECISIONS, Device
from onnxroof.report.figures.plane_data import DRAM, RoofLine
from onnxroof.report.figures.style import log_limits
from onnxroof.whatif.sweep import Sweep, SweepRow

# The sweep axes in the order a trajectory follows them: the first that takes several values is varied.
AXES: tuple[str, ...] = ("batch", "input_size", "precision")
STORED_ROOF = "fp32"  # the roof a row of the tensors' own dtypes is drawn under


@dataclass(frozen=True)
class SweepPoint:
    """One sweep row on the roofline: (FLOPs / bytes, FLOPs / predicted time), ``label`` its varied value."""

    label: str
    x: float
    y: float
    time_s: float
    bound: str


@dataclass(frozen=True)
class Trajectory:
    """The rows of one device and one fixed setting, in the order of the varied axis."""

    device: str
    name: str  # the fixed setting: "fp32, 224x224"
    precision: str  # the roof precision its rows are drawn against
    points: tuple[SweepPoint, ...]


@dataclass(frozen=True)
class SweepData:
    title: str
    axis: str  # the varied axis: batch, input_size or precision
    trajectories: tuple[Trajectory, ...]
    roofs: tuple[RoofLine, ...]
    x_limits: tuple[float, float]
    y_limits: tuple[float, float]


def roof_precision(row_precision: str) -> str:
    """The precision whose peak a row computes at: a what-if or rewrite name, fp32 for the stored dtypes."""
    if row_precision in PRECISIONS:
        return row_precision
    if row_precision.startswith("int8"):
        return "int8"
    if row_precision == "fp16":
        return "fp16"
    return STORED_ROOF


def varied_axis(rows: Sequence[SweepRow]) -> str:
    for axis in AXES:
        if len({getattr(r, axis) for r in rows}) > 1:
            return axis
    return AXES[0]


def _order(axis: str, value: object) -> tuple[float, str]:
    """Sort key along an axis: batch by number, input size by pixel count, precision by name."""
    if axis == "batch":
        return (float(value), "")  # type: ignore[arg-type]
    if axis == "input_size":
        dims = [int(d) for d in str(value).split("x") if d.isdigit()]
        area = 1.0
        for d in dims:
            area *= d
        return (area, str(value))
    return (0.0, str(value))


def sweep_data(result: Sweep, devices: Sequence[Device] = ()) -> SweepData:
    """Trajectories of ``result`` and the DRAM roof of each device in ``devices`` (matched to rows by key) at
    each precision its rows use."""
    rows = result.rows
    axis = varied_axis(rows)
    groups: dict[tuple[str, ...], list[SweepRow]] = {}
    for r in rows:
        fixed = tuple(f"{getattr(r, a)}" for a in AXES if a != axis)
        groups.setdefault((r.device, *fixed), []).append(r)
    trajectories = []
    for (device, *settings), members in groups.items():
        members.sort(key=lambda r: _order(axis, getattr(r, axis)))
        points = tuple(
            SweepPoint(
                str(getattr(r, axis)),
                r.intensity,
                r.flops / r.predicted_time_s if r.predicted_time_s else 0.0,
                r.predicted_time_s,
                r.bound,
            )
            for r in members
        )
        precision = roof_precision(members[0].precision) if axis != "precision" else STORED_ROOF
        names = [f"batch {v}" if a == "batch" else v for a, v in zip([a for a in AXES if a != axis], settings)]
        trajectories.append(Trajectory(device, ", ".join(n for n in names if n != "-"), precision, points))
    wanted: dict[str, set[str]] = {}
    for r in rows:
        wanted.setdefault(r.device, set()).add(roof_precision(r.precision))
    roofs = [
        RoofLine(d.key, DRAM, used, peak, d.memory_bandwidth.value, True)
        for d in devices
        for used in sorted({d.peak(p)[1] for p in wanted.get(d.key, ())}, key=PRECISIONS.index)
        for peak in [d.peak(used)[0]]
    ]
    xs = [p.x for t in trajectories for p in t.points] + [r.ridge_point for r in roofs]
    ys = [p.y for t in trajectories for p in t.points] + [r.peak_flops_s for r in roofs]
    keys = ", ".join(dict.fromkeys(r.device for r in rows))
    label = {"batch": "batch", "input_size": "input size", "precision": "precision"}[axis]
    return SweepData(
        title=f"Sweep of {result.model} over {label} on {keys}",
        axis=axis,
        trajectories=tuple(trajectories),
        roofs=tuple(roofs),
        x_limits=log_limits(xs),
        y_limits=log_limits(ys),
    )
