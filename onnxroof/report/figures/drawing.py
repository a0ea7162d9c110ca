"""What the drawing modules share: a fresh Agg figure (never pyplot's global state), the record of where each
layer's point went (for the HTML report's hover targets), and the hover text of a point."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onnxroof.report.figures.style import FIGURE_SIZE
from onnxroof.report.format import seconds, si

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from onnxroof.report.figures.plane_data import PlanePoint


TITLE_WIDTH = 70  # characters


@dataclass(frozen=True)
class Mark:
    """One drawn layer point: the axes it is on, its data coordinates as drawn (a floor point at the axes' lower
    corner), its marker area in points^2 and its hover text."""

    layer: str
    axes: Any
    x: float
    y: float
    area: float
    text: str


@dataclass(frozen=True)
class Drawn:
    """A drawn figure, its title as one line (the figure may wrap it), and its layer points."""

    figure: Figure
    title: str
    marks: tuple[Mark, ...] = ()


def new_figure(size: tuple[float, float] = FIGURE_SIZE) -> Figure:
    """A matplotlib Figure on its own Agg canvas, laid out by the constrained layout engine."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def hover_text(point: PlanePoint) -> str:
    """What hovering over a layer's point shows: name, op type, FLOPs, bytes, intensity, times and bound."""
    lines = [
        f"{point.layer} ({point.op_type}) on {point.device}",
        f"{si(point.flops, 'FLOP')}, {si(point.bytes, 'B')} moved, {point.intensity:.3g} FLOP/B",
        f"predicted {seconds(point.time_s)} ({point.bound}-bound)",
    ]
    if point.measured_time_s is not None:
        lines.append(f"measured {seconds(point.measured_time_s)}")
    return "\n".join(lines)


def wrapped_title(title: str) -> str:
    """A figure's title with its devices on a second line when it is longer than TITLE_WIDTH characters."""
    if len(title) > TITLE_WIDTH and " on " in title:
        head, _, tail = title.partition(" on ")
        return f"{head}\non {tail}"
    return title


def draw_roof(
    ax: Axes,
    xs: Any,
    peak_flops_s: float,
    bandwidth_bytes_s: float,
    ridge_point: float,
    style: dict[str, Any],
    name_ridge: bool,
) -> None:
    """A roof over the intensities ``xs``: min(peak, intensity x bandwidth), drawn behind the points with the line
    ``style`` (color, linestyle, linewidth), and a tick at its ridge point. With ``name_ridge`` the ridge's value
    sits left of its tick, in the unattainable region above the roofs, clear of the points; the peak goes in the
    legend (a label on the flat roof would cover the layers that reach it)."""
    import numpy as np

    ax.plot(xs, np.minimum(peak_flops_s, xs * bandwidth_bytes_s), zorder=1, **style)
    ax.plot([ridge_point], [peak_flops_s], marker="|", color=style["color"], markersize=8, zorder=1)
    if name_ridge:
        ax.annotate(
            f"ridge {ridge_point:.3g}",
            (ridge_point, peak_flops_s),
            xytext=(-3, 3),
            textcoords="offset points",
            fontsize=7,
            color=style["color"],
            ha="right",
        )


def log_axes(
    ax: Axes, x_limits: tuple[float, float], y_limits: tuple[float, float], x_label: str, y_label: str
) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*x_limits)
    ax.set_ylim(*y_limits)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
