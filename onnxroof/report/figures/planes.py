"""Drawing the plane figures (roofline, time-based roofline, complexity) from their data alone."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from onnxroof.report.figures.drawing import Drawn, Mark, draw_roof, hover_text, log_axes, new_figure, wrapped_title
from onnxroof.report.figures.plane_data import DRAM, PlaneData, PlanePoint
from onnxroof.report.figures.style import (
    FLOOR_COLOUR,
    MODEL_MARKER_AREA,
    SECONDARY_DASHES,
    device_marker,
    marker_area,
    marker_radius,
    op_colour,
    short_name,
)
from onnxroof.report.format import seconds, si

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# Roof colours per device (dark, so that the op types' colours stay the points').
DEVICE_LINE_COLOURS: tuple[str, ...] = ("#222222", "#1a5e9a", "#8b1a1a", "#2e6b2e", "#6a3d9a")
CACHE_DASH = (0, (1, 1.5))
RIDGE_MERGE = 1.3  # cache ridges closer than this factor share one label
LEGEND_WIDTH = 48  # characters per legend line
# Vertical offsets (points) a layer's name tries in turn until it overprints no name already placed.
LABEL_OFFSETS: tuple[float, ...] = (5, -14, 14, -23, 23, -32, 32, -41, 41, -50, 50, 59, 68, 77)
FLOOR_MARKER = "X"  # a layer pinned to the lower-left corner: not where its numbers would put it


def _device_index(data: PlaneData) -> dict[str, int]:
    keys = [p.device for p in data.points] + [r.device for r in data.roofs] + [m.device for m in data.models]
    keys += [b.device for b in data.balances] + [d for d, _ in data.overhead_boxes]
    return {key: i for i, key in enumerate(dict.fromkeys(keys))}


def _line_colour(index: int) -> str:
    return DEVICE_LINE_COLOURS[index % len(DEVICE_LINE_COLOURS)]


def _scatter_layers(ax: Axes, data: PlaneData, devices: dict[str, int]) -> tuple[list[Mark], list[Any], list[str]]:
    """Every layer point: closed (predicted) or open (measured), coloured by op type, sized by time share, shaped
    by device; floor points pinned to the lower-left corner. Returns the marks and the op-type legend entries."""
    from matplotlib.lines import Line2D

    floor_x, floor_y = data.floor
    marks: list[Mark] = []
    by_key: dict[tuple[str, int, bool], list[tuple[float, float, float]]] = {}
    floor_count = 0
    for p in data.points:
        x, y = (floor_x, floor_y) if p.on_floor else (p.x, p.y)
        floor_count += p.on_floor and not p.measured
        area = marker_area(p.share)
        by_key.setdefault((p.op_type, -1 if p.on_floor else devices[p.device], p.measured), []).append((x, y, area))
        marks.append(Mark(p.layer, ax, x, y, area, hover_text(p)))
    for (op, index, measured), xys in by_key.items():
        xs, ys, areas = zip(*xys)
        colour = op_colour(op)
        ax.scatter(
            xs,
            ys,
            s=areas,
            marker=FLOOR_MARKER if index < 0 else device_marker(index),
            facecolors="none" if measured else colour,
            edgecolors=colour if measured else "white",
            linewidths=1.2 if measured else 0.4,
            alpha=0.9,
            zorder=3,
            clip_on=False,
        )
    handles: list[Any] = []
    labels: list[str] = []
    for op in sorted({p.op_type for p in data.points}):
        handles.append(Line2D([], [], marker="o", linestyle="", color=op_colour(op), markersize=7))
        labels.append(op)
    with_points = {p.device for p in data.points}
    if len(with_points) > 1:
        for key, index in devices.items():
            if key not in with_points:
                continue
            handles.append(Line2D([], [], marker=device_marker(index), linestyle="", color="#777777", markersize=7))
            labels.append(f"layers on {key}")
    if any(p.measured for p in data.points):
        handles.append(Line2D([], [], marker="o", linestyle="", color="#777777", markersize=7))
        labels.append("predicted (closed)")
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none", color="#777777", markersize=7))
        labels.append("measured (open)")
    if floor_count:
        handles.append(Line2D([], [], marker=FLOOR_MARKER, linestyle="", color=FLOOR_COLOUR, markersize=7))
        labels.append(f"{floor_count} layer(s) with no FLOPs or time:\nshown at the lower-left corner")
    handles.append(Line2D([], [], marker="o", linestyle="", color="#bbbbbb", markersize=4))
    labels.append("area ~ share of predicted time")
    return marks, handles, labels


def _join_pairs(ax: Axes, points: Sequence[PlanePoint], data: PlaneData) -> None:
    """A thin line from each layer's predicted point to its measured one (paper 001's paired symbols)."""
    predicted = {(p.device, p.layer): p for p in points if not p.measured and not p.on_floor}
    for m in points:
        p = predicted.get((m.device, m.layer))
        if m.measured and p is not None and not m.on_floor:
            ax.plot([p.x, m.x], [p.y, m.y], color="#999999", linewidth=0.7, zorder=2)


def _label_top(ax: Axes, data: PlaneData) -> None:
    """The slowest layers' names next to their predicted points (on the first device that has them); a name that
    would overprint one already placed, or leave the axes, tries places further above and below the point."""
    figure = ax.get_figure()
    # The layout (legend beside the axes) is settled first: the names are placed where they will be drawn.
    figure.draw_without_rendering()  # type: ignore[union-attr]
    renderer = figure.canvas.get_renderer()  # type: ignore[union-attr]
    # Names keep clear of the texts already there (ridge values, region notes) and of the model's stars.
    placed: list[Any] = [t.get_window_extent(renderer) for t in ax.texts]
    placed += [_star_box(ax, m.x, m.y) for m in data.models]
    done: set[str] = set()
    for p in data.points:
        if p.layer not in data.labelled or p.layer in done or p.measured or p.on_floor:
            continue
        done.add(p.layer)
        text = ax.annotate(
            short_name(p.layer),
            (p.x, p.y),
            xytext=(6, 5),
            textcoords="offset points",
            fontsize=7,
            color="#333333",
            zorder=5,
            bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.7},
            arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.5},
        )
        text.set_in_layout(False)  # inside the axes: the settled layout stays as it is
        inside = ax.get_window_extent(renderer)
        for dy, dx in itertools.product(LABEL_OFFSETS, (6, -6)):  # right of the point, else left of it
            text.set_position((dx, dy))
            text.set_horizontalalignment("left" if dx > 0 else "right")
            box = _text_box(text, renderer)
            clear = not any(box.overlaps(other) for other in placed)
            if clear and inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1):
                break
        else:
            text.set_position((6, LABEL_OFFSETS[0]))
            text.set_horizontalalignment("left")
        placed.append(_text_box(text, renderer))


def _star_box(ax: Axes, x: float, y: float) -> Any:
    """The display box a model's star covers."""
    from matplotlib.transforms import Bbox

    half = marker_radius(MODEL_MARKER_AREA) * ax.get_figure().dpi / 72.0  # type: ignore[union-attr]
    cx, cy = ax.transData.transform((x, y))
    return Bbox.from_extents(cx - half, cy - half, cx + half, cy + half)


def _text_box(annotation: Any, renderer: Any) -> Any:
    """The display box of an annotation's text alone (its leader line may cross other names)."""
    from matplotlib.text import Text

    annotation.update_positions(renderer)
    return Text.get_window_extent(annotation, renderer)


def _name_cache_ridges(ax: Axes, data: PlaneData, devices: dict[str, int]) -> None:
    """Each cache level's name under its ridge tick; levels whose ridges lie within a factor RIDGE_MERGE of each
    other share one label ("L1d, L2"), which would otherwise overprint."""
    caches = sorted((r for r in data.roofs if r.level != DRAM), key=lambda r: (r.device, r.ridge_point))
    groups: list[list[Any]] = []
    for roof in caches:
        last = groups[-1][-1] if groups else None
        if last is not None and last.device == roof.device and roof.ridge_point <= last.ridge_point * RIDGE_MERGE:
            groups[-1].append(roof)
        else:
            groups.append([roof])
    for group in groups:
        first = group[0]
        ax.annotate(
            ", ".join(r.level for r in group),
            (first.ridge_point, first.peak_flops_s),
            xytext=(3, -10),
            textcoords="offset points",
            fontsize=6.5,
            color=_line_colour(devices[first.device]),
        )


def _finish(ax: Axes, data: PlaneData, handles: list[Any], labels: list[str]) -> None:
    """The title (the devices on a line of their own when long) and the legend beside the axes, each entry
    wrapped so that a long device name does not squeeze the plot."""
    ax.set_title(wrapped_title(data.title), fontsize=10)
    wrapped = [textwrap.fill(label, LEGEND_WIDTH, subsequent_indent="  ") for label in labels]
    ax.legend(handles, wrapped, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def draw_roofline(data: PlaneData) -> Drawn:
    """Log-log FLOP/s against FLOP/byte: roofs per device, precision and memory level with their ridge points,
    layer points, the model's accumulated point per device."""
    import numpy as np
    from matplotlib.lines import Line2D

    figure = new_figure()
    ax = figure.add_subplot()
    log_axes(ax, data.x_limits, data.y_limits, data.x_label, data.y_label)
    devices = _device_index(data)
    xs = np.geomspace(*data.x_limits, 400)
    roof_handles: list[Any] = []
    roof_labels: list[str] = []
    dashes = {
        p: SECONDARY_DASHES[i % len(SECONDARY_DASHES)]
        for i, p in enumerate(dict.fromkeys(r.precision for r in data.roofs if not r.primary))
    }
    for roof in data.roofs:
        colour = _line_colour(devices[roof.device])
        style: Any = (
            "-"
            if roof.primary and roof.level == DRAM
            else (CACHE_DASH if roof.level != DRAM else dashes[roof.precision])
        )
        width = 1.8 if roof.primary and roof.level == DRAM else 1.0
        line = {"color": colour, "linestyle": style, "linewidth": width}
        named = roof.primary and roof.level == DRAM
        draw_roof(ax, xs, roof.peak_flops_s, roof.bandwidth_bytes_s, roof.ridge_point, line, named)
        if not roof.primary:
            roof_handles.append(Line2D([], [], color=colour, linestyle=style, linewidth=width))
            roof_labels.append(
                f"{roof.device} {roof.precision} {si(roof.peak_flops_s, 'FLOP/s')}, ridge {roof.ridge_point:.3g}"
            )
            continue
        bandwidth, peak = si(roof.bandwidth_bytes_s, "B/s"), si(roof.peak_flops_s, "FLOP/s")
        name = f"{roof.device} {roof.level} {bandwidth}, {roof.precision} {peak}, ridge {roof.ridge_point:.3g}"
        roof_handles.append(Line2D([], [], color=colour, linestyle=style, linewidth=width))
        roof_labels.append(name)
    _name_cache_ridges(ax, data, devices)
    marks, handles, labels = _scatter_layers(ax, data, devices)
    _join_pairs(ax, data.points, data)
    # The whole model's star is edged in its device's roof colour; its time is in the legend, where a label
    # beside the star would overprint the other devices' stars and the layers around them.
    for m in data.models:
        colour = _line_colour(devices[m.device])
        ax.scatter(
            [m.x], [m.y], s=MODEL_MARKER_AREA, marker="*", color="gold", edgecolors=colour, linewidths=1.5, zorder=4
        )
        roof_handles.append(
            Line2D([], [], marker="*", linestyle="", color="gold", markeredgecolor=colour, markersize=12)
        )
        roof_labels.append(f"whole model on {m.device}: {seconds(m.time_s)}")
    _finish(ax, data, roof_handles + handles, roof_labels + labels)
    _label_top(ax, data)
    return Drawn(figure, data.title, tuple(marks))


def draw_time(data: PlaneData) -> Drawn:
    """Compute time against memory time (log-log): the compute = memory diagonal, each device's launch-overhead
    box, runtime isocurves, layer points (predicted closed, measured open, joined)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    figure = new_figure()
    ax = figure.add_subplot()
    log_axes(ax, data.x_limits, data.y_limits, data.x_label, data.y_label)
    devices = _device_index(data)
    low, high = data.x_limits
    ax.plot([low, high], [low, high], color="#444444", linewidth=1.0, zorder=1)
    ax.text(0.03, 0.97, "above the diagonal: compute-bound", transform=ax.transAxes, fontsize=8, va="top")
    ax.text(0.97, 0.03, "below: memory-bound", transform=ax.transAxes, fontsize=8, ha="right", color="#444444")
    handles: list[Any] = [Line2D([], [], color="#444444")]
    labels: list[str] = ["compute time = memory time"]
    # Devices with the same launch overhead share one box and one label (which would otherwise overprint).
    by_overhead: dict[float, list[str]] = {}
    for key, overhead in data.overhead_boxes:
        by_overhead.setdefault(overhead, []).append(key)
    for overhead, keys in by_overhead.items():
        colour = _line_colour(devices[keys[0]])
        ax.add_patch(
            Rectangle(
                (low, low), overhead - low, overhead - low, facecolor=colour, alpha=0.08, edgecolor=colour, zorder=0
            )
        )
        ax.text(
            low * 1.3,
            overhead / 1.5,
            f"launch overhead\n{seconds(overhead)} ({', '.join(keys)})",
            fontsize=7,
            color=colour,
            va="top",
        )
    for curve in data.isocurves:
        colour = _line_colour(devices[curve.device])
        c = curve.corner_s
        ax.plot([low, c, c], [c, c, low], color=colour, linestyle=":", linewidth=0.8, zorder=1)
        ax.text(c, c, f" {seconds(curve.time_s)}", fontsize=7, color=colour, va="bottom", ha="left", clip_on=True)
    handles.append(Line2D([], [], color="#777777", linestyle=":"))
    on = f" on {data.isocurves[0].device}" if data.isocurves else ""
    labels.append(f"runtime isocurves{on} (time per layer)")
    marks, point_handles, point_labels = _scatter_layers(ax, data, devices)
    _join_pairs(ax, data.points, data)
    _finish(ax, data, handles + point_handles, labels + point_labels)
    _label_top(ax, data)
    return Drawn(figure, data.title, tuple(marks))


def draw_complexity(data: PlaneData) -> Drawn:
    """FLOPs against bytes per layer (log-log), each device's machine-balance diagonal and launch-overhead box."""
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    figure = new_figure()
    ax = figure.add_subplot()
    log_axes(ax, data.x_limits, data.y_limits, data.x_label, data.y_label)
    devices = _device_index(data)
    xs = np.geomspace(*data.x_limits, 50)
    handles: list[Any] = []
    labels: list[str] = []
    for b in data.balances:
        colour = _line_colour(devices[b.device])
        ax.plot(xs, xs * b.balance, color=colour, linewidth=1.4, zorder=1)
        handles.append(Line2D([], [], color=colour))
        labels.append(f"machine balance {b.device} {b.precision}:\nFLOPs = {b.balance:.3g} x bytes")
    for key, moved, flops in data.launch_boxes:
        colour = _line_colour(devices[key])
        low_x, low_y = data.x_limits[0], data.y_limits[0]
        ax.add_patch(
            Rectangle((low_x, low_y), moved - low_x, flops - low_y, facecolor=colour, alpha=0.08, edgecolor=colour)
        )
        ax.text(low_x * 1.3, flops / 1.5, f"launch-bound ({key})", fontsize=7, color=colour, va="top")
    ax.text(0.03, 0.95, "above a diagonal: compute-bound there", transform=ax.transAxes, fontsize=8, va="top")
    ax.text(0.97, 0.05, "below: memory-bound", transform=ax.transAxes, fontsize=8, ha="right")
    marks, point_handles, point_labels = _scatter_layers(ax, data, devices)
    _finish(ax, data, handles + point_handles, labels + point_labels)
    _label_top(ax, data)
    return Drawn(figure, data.title, tuple(marks))
