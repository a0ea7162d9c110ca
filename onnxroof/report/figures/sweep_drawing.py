"""Drawing the sweep figure: each trajectory of a sweep across the roofline of its devices."""

from __future__ import annotations

from typing import Any

from onnxroof.report.figures.drawing import Drawn, draw_roof, log_axes, new_figure, wrapped_title
from onnxroof.report.figures.style import PALETTE, SECONDARY_DASHES, device_marker
from onnxroof.report.figures.sweep_data import SweepData
from onnxroof.report.format import si

ROOF_COLOURS: tuple[str, ...] = ("#222222", "#1a5e9a", "#8b1a1a", "#2e6b2e", "#6a3d9a")


def draw_sweep(data: SweepData) -> Drawn:
    """Roofs (one per device and precision) and one line per trajectory, each point named by its varied value."""
    import numpy as np
    from matplotlib.lines import Line2D

    figure = new_figure()
    ax = figure.add_subplot()
    log_axes(ax, data.x_limits, data.y_limits, "arithmetic intensity (FLOP/byte)", "performance (FLOP/s)")
    devices = {
        key: i
        for i, key in enumerate(dict.fromkeys([t.device for t in data.trajectories] + [r.device for r in data.roofs]))
    }
    xs = np.geomspace(*data.x_limits, 400)
    handles: list[Any] = []
    labels: list[str] = []
    precisions = list(dict.fromkeys(r.precision for r in data.roofs))
    for roof in data.roofs:
        colour = ROOF_COLOURS[devices[roof.device] % len(ROOF_COLOURS)]
        style: Any = (
            "-"
            if precisions.index(roof.precision) == 0
            else SECONDARY_DASHES[(precisions.index(roof.precision) - 1) % 3]
        )
        line = {"color": colour, "linestyle": style, "linewidth": 1.3}
        draw_roof(ax, xs, roof.peak_flops_s, roof.bandwidth_bytes_s, roof.ridge_point, line, name_ridge=True)
        handles.append(Line2D([], [], color=colour, linestyle=style))
        peak = si(roof.peak_flops_s, "FLOP/s")
        labels.append(f"roof {roof.device} {roof.precision}: {peak}, ridge {roof.ridge_point:.3g} FLOP/B")
    for i, t in enumerate(data.trajectories):
        colour = PALETTE[1 + i % (len(PALETTE) - 1)]  # PALETTE[0]'s blue is too close to a roof's
        marker = device_marker(devices[t.device])
        xs_t = [p.x for p in t.points if p.x > 0 and p.y > 0]
        ys_t = [p.y for p in t.points if p.x > 0 and p.y > 0]
        ax.plot(xs_t, ys_t, color=colour, marker=marker, linewidth=1.2, markersize=6, zorder=3)
        for j, p in enumerate(q for q in t.points if q.x > 0 and q.y > 0):
            # alternately below-right and above-left, so that neighbouring values do not overprint
            offset, align = ((5, -10), "left") if j % 2 == 0 else ((-5, 5), "right")
            ax.annotate(
                p.label, (p.x, p.y), xytext=offset, textcoords="offset points", fontsize=7, color=colour, ha=align
            )
        handles.append(Line2D([], [], color=colour, marker=marker))
        labels.append(f"{t.device}" + (f", {t.name}" if t.name else ""))
    ax.set_title(wrapped_title(data.title), fontsize=10)
    axis = {"batch": "batch", "input_size": "input size", "precision": "precision"}[data.axis]
    ax.legend(
        handles,
        labels,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
        title=f"points named by {axis}",
        title_fontsize=8,
    )
    return Drawn(figure, data.title)
