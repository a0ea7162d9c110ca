"""Drawing the census figure: FLOPs against each model's memory footprint (paper 004), log-log, a point per model
and device, shaped by device, coloured by arithmetic intensity; a red cross over a model that does not fit the
device's memory."""

from __future__ import annotations

from typing import Any

from onnxroof.report.figures.census_data import CensusData, CensusPoint
from onnxroof.report.figures.drawing import Drawn, log_axes, new_figure, wrapped_title
from onnxroof.report.figures.style import FLOOR_COLOUR, MODEL_MARKER_AREA, device_marker, short_name

COLOUR_MAP = "viridis"
MISFIT_COLOUR = "#c0392b"


def draw_census(data: CensusData) -> Drawn:
    """The points by device (one legend entry each, in grey: the colour is the intensity's; the first device's
    filled, the others' hollow, so that a model of the same footprint on two devices shows both), the colour bar,
    a cross on each point that does not fit its device and, where there are few points, each point's model once."""
    import matplotlib
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LogNorm

    figure = new_figure()
    ax = figure.add_subplot()
    x_label = "memory footprint (bytes: weights + inputs + every activation, none reused)"
    log_axes(ax, data.x_limits, data.y_limits, x_label, "FLOPs")
    norm = LogNorm(*data.intensity_limits)
    cmap = matplotlib.colormaps[COLOUR_MAP]
    handles: list[Any] = []
    labels: list[str] = []
    for i, device in enumerate(data.devices):
        handles.append(_device_points(ax, [p for p in data.points if p.device == device], i, norm, cmap))
        labels.append(device)
    misfits = [p for p in data.points if p.fits is False]
    if misfits:
        xs, ys = [p.footprint_bytes for p in misfits], [p.flops for p in misfits]
        handles.append(ax.scatter(xs, ys, marker="x", color=MISFIT_COLOUR, s=40, linewidths=1.2, zorder=9))
        labels.append("does not fit the device's memory")
    if data.labelled:
        for model, x, y in dict.fromkeys((p.model, p.footprint_bytes, p.flops) for p in data.points):
            ax.annotate(short_name(model), (x, y), xytext=(5, 3), textcoords="offset points", fontsize=7)
    figure.colorbar(ScalarMappable(norm, cmap), ax=ax, label="arithmetic intensity (FLOP/byte)")
    title = data.title + (f" ({data.left_out} rows left out: an error, or no FLOPs)" if data.left_out else "")
    ax.set_title(wrapped_title(title), fontsize=10)
    ax.legend(handles, labels, loc="upper left", fontsize=8, frameon=False)
    return Drawn(figure, data.title)


def _device_points(ax: Any, points: list[CensusPoint], index: int, norm: Any, cmap: Any) -> Any:
    """One device's points, filled for the first device and hollow after it; the legend's handle for it."""
    from matplotlib.lines import Line2D

    marker, hollow = device_marker(index), index > 0
    if points:
        colours = [cmap(norm(max(p.intensity, norm.vmin))) for p in points]
        ax.scatter(
            [p.footprint_bytes for p in points],
            [p.flops for p in points],
            marker=marker,
            s=MODEL_MARKER_AREA / (2 if hollow else 3),
            facecolors="none" if hollow else colours,
            edgecolors=colours if hollow else "white",
            linewidths=1.4 if hollow else 0.5,
            zorder=3 + index,
        )
    face = "none" if hollow else FLOOR_COLOUR
    return Line2D([], [], marker=marker, linestyle="", markerfacecolor=face, markeredgecolor=FLOOR_COLOUR, markersize=7)
