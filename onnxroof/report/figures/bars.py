"""Drawing the layers figure: per-layer arithmetic intensity against each device's ridge point, and FLOPs, bytes
and predicted time by op type."""

from __future__ import annotations

from typing import Any

from onnxroof.report.figures.bar_data import LayersData
from onnxroof.report.figures.drawing import Drawn, new_figure, wrapped_title
from onnxroof.report.figures.style import FLOOR_COLOUR, op_colour

RIDGE_COLOURS: tuple[str, ...] = ("#222222", "#1a5e9a", "#8b1a1a", "#2e6b2e", "#6a3d9a")
NAMED_LAYERS = 40  # up to this many layers each get their name under their bar
TOP_OP_TYPES = 12  # the op-type panels show the op types that take the longest; the rest are summed as "other"


def draw_layers(data: LayersData) -> Drawn:
    """Top: one bar per layer (log scale; a layer of zero intensity drawn as a grey tick at the floor) and a
    ridge line per device. Bottom: three panels of per-op-type shares of FLOPs, bytes and predicted time."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    figure = new_figure((11.0, 8.0))
    grid = figure.add_gridspec(2, 3, height_ratios=(1.3, 1.0))
    ax = figure.add_subplot(grid[0, :])
    intensities = [b.intensity for b in data.bars]
    positive = [v for v in intensities if v > 0]
    ridges = [r.ridge_point for r in data.ridges]
    low = min(positive + ridges) / 3 if positive or ridges else 0.1
    high = max(positive + ridges) * 3 if positive or ridges else 10.0
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    positions = range(len(data.bars))
    heights = [v if v > 0 else low * 1.4 for v in intensities]
    colours = [op_colour(b.op_type) if b.intensity > 0 else FLOOR_COLOUR for b in data.bars]
    ax.bar(positions, [h - low for h in heights], bottom=low, color=colours, width=0.8)
    handles: list[Any] = []
    labels: list[str] = []
    for i, r in enumerate(data.ridges):
        colour = RIDGE_COLOURS[i % len(RIDGE_COLOURS)]
        ax.axhline(r.ridge_point, color=colour, linestyle="--", linewidth=1.2)
        handles.append(Line2D([], [], color=colour, linestyle="--"))
        labels.append(f"ridge {r.device} {r.precision}: {r.ridge_point:.3g} FLOP/B")
    for op in sorted({b.op_type for b in data.bars}):
        handles.append(Line2D([], [], marker="s", linestyle="", color=op_colour(op)))
        labels.append(op)
    zero = sum(1 for b in data.bars if b.intensity <= 0)
    if zero:
        handles.append(Line2D([], [], marker="s", linestyle="", color=FLOOR_COLOUR))
        labels.append(f"{zero} layer(s) with no FLOPs: a stub at the floor")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.set_ylabel("arithmetic intensity (FLOP/byte)")
    ax.set_xlim(-0.6, len(data.bars) - 0.4)
    if len(data.bars) <= NAMED_LAYERS:
        ax.set_xticks(list(positions), [b.layer for b in data.bars], rotation=60, ha="right", fontsize=7)
        ax.set_xlabel("layer (graph order)")
    else:
        ax.set_xlabel(f"layer index (graph order, {len(data.bars)} layers)")
    ax.set_title(
        wrapped_title(data.title) + "\n(below a ridge line, a layer is memory-bound on that device)", fontsize=10
    )
    ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)

    shown = list(data.op_types[:TOP_OP_TYPES])
    rest = data.op_types[TOP_OP_TYPES:]
    names = [s.op_type for s in shown] + (["other"] if rest else [])
    flops = [s.flops for s in shown] + ([sum(s.flops for s in rest)] if rest else [])
    moved = [s.bytes for s in shown] + ([sum(s.bytes for s in rest)] if rest else [])
    panels: list[tuple[str, list[list[float]]]] = [("FLOPs (%)", [flops]), ("bytes moved (%)", [moved])]
    times = [
        [s.time_s[d] for s in shown] + ([sum(s.time_s[d] for s in rest)] if rest else [])
        for d in range(len(data.devices))
    ]
    panels.append(("predicted time (%)", times))
    colours_by_op = [op_colour(n) if n != "other" else "#cccccc" for n in names]
    for column, (title, series) in enumerate(panels):
        panel = figure.add_subplot(grid[1, column])
        count = len(series)
        height = 0.8 / count
        for d, values in enumerate(series):
            total = sum(values)
            percent = [100.0 * v / total if total else 0.0 for v in values]
            offsets = [i - 0.4 + height * (d + 0.5) for i in range(len(names))]
            panel.barh(offsets, percent, height=height, color=colours_by_op, alpha=1.0 - 0.35 * d, edgecolor="white")
        panel.set_yticks(range(len(names)), names if column == 0 else [""] * len(names), fontsize=7)
        panel.invert_yaxis()
        panel.set_xlabel(title, fontsize=8)
        if count > 1:  # which shade is which device; the op types that take least time, at the bottom, leave room
            shades = [Patch(facecolor="#555555", alpha=1.0 - 0.35 * d) for d in range(count)]
            panel.legend(shades, list(data.devices), loc="lower right", fontsize=6.5, frameon=True)
        panel.tick_params(axis="x", labelsize=7)
        panel.grid(True, axis="x", color="#dddddd", linewidth=0.6)
        panel.set_axisbelow(True)
    return Drawn(figure, data.title)
