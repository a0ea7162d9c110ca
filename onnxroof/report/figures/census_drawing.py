"""Drawing the census figure: FLOPs against the memory each model needs, log-log, a point per model and device,
shaped by device, coloured by arithmetic intensity; each device's memory capacity a dashed vertical line."""

from __future__ import annotations

from typing import Any

from onnxroof.report.figures.census_data import CensusData, CensusPoint
from onnxroof.report.figures.drawing import Drawn, log_axes, new_figure, wrapped_title
from onnxroof.report.figures.style import FLOOR_COLOUR, MODEL_MARKER_AREA, device_marker, short_name
from onnxroof.report.format import si

CAPACITY_COLOURS: tuple[str, ...] = ("#222222", "#1a5e9a", "#8b1a1a", "#2e6b2e", "#6a3d9a")
COLOUR_MAP = "viridis"


def draw_census(data: CensusData) -> Drawn:
    """The points by device (one legend entry each, in grey: the colour is the intensity's; the first device's
    filled, the others' hollow, so that a model needing the same memory on two devices shows both), the colour
    bar, the capacity lines and, where there are few points, each point's model once."""
    import matplotlib
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LogNorm

    figure = new_figure()
    ax = figure.add_subplot()
    log_axes(ax, data.x_limits, data.y_limits, "memory needed (bytes: weights + peak live activations)", "FLOPs")
    norm = LogNorm(*data.intensity_limits)
    cmap = matplotlib.colormaps[COLOUR_MAP]
    handles: list[Any] = []
    labels: list[str] = []
    for i, device in enumerate(data.devices):
        handles.append(_device_points(ax, [p for p in data.points if p.device == device], i, norm, cmap))
        labels.append(device)
    for i, capacity in enumerate(data.capacities):
        handles.append(ax.axvline(capacity.bytes, color=_colour(i), linestyle="--", linewidth=1.0, zorder=1))
        labels.append(f"{capacity.device} memory: {si(capacity.bytes, 'B')}")
    if data.labelled:
        for model, x, y in dict.fromkeys((p.model, p.memory_bytes, p.flops) for p in data.points):
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
            [p.memory_bytes for p in points],
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


def _colour(index: int) -> str:
    return CAPACITY_COLOURS[index % len(CAPACITY_COLOURS)]
