"""Drawing the generation figure: time per token against context, one line per device, beside each phase of the
generation on its device's roofline; and writing it to a file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnxroof.errors import UserError
from onnxroof.report.figures.decoder_data import DecoderFigureData, DecoderOnDevice, DeviceSeries, decoder_data
from onnxroof.report.figures.drawing import Drawn, draw_roof, log_axes, new_figure
from onnxroof.report.figures.output import format_of, save
from onnxroof.report.figures.style import PALETTE, SECONDARY_DASHES, device_marker
from onnxroof.report.format import seconds, si

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from onnxroof.report.figures.plane_data import RoofLine

# A dark hue per device (the palette's dark ones), its line, roof and points in the same one.
DEVICE_COLOURS: tuple[str, ...] = PALETTE[0::2]
FIGURE_SIZE: tuple[float, float] = (13.0, 5.5)  # inches: two panels side by side
PREFILL_MARKER = "*"
# One line style per precision a device lists (at most len(PRECISIONS)), for roofs drawn without the precision.
UNKNOWN_PRECISION_STYLES: tuple[Any, ...] = ("-", *SECONDARY_DASHES, (0, (1, 1)), (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))


def device_colour(index: int) -> str:
    return DEVICE_COLOURS[index % len(DEVICE_COLOURS)]


def series_label(s: DeviceSeries, shared_setting: bool) -> str:
    """A device's line in the legend: its time to first token and decode throughput, and its prompt, generation
    and batch where the title does not give them for every line."""
    lower = " (lower bounds)" if not s.complete else ""
    setting = "" if shared_setting else f" ({s.setting})"
    return f"{s.device}{setting}: TTFT {seconds(s.ttft_ms / 1000)}, {s.tokens_per_s:.4g} tokens/s{lower}"


def draw_time_per_token(ax: Axes, data: DecoderFigureData) -> None:
    """One line per device through its decode steps (markers on those analyzed); a measured line dashed with
    open markers where there is one."""
    for i, s in enumerate(data.series):
        colour, marker = device_colour(i), device_marker(i)
        ax.plot(
            [p.context for p in s.decode],
            [p.ms_per_token for p in s.decode],
            color=colour,
            linewidth=1.5,
            marker=marker,
            markersize=5,
            markevery=s.analyzed_indices,
            label=series_label(s, data.shared_setting),
        )
        if s.measured:
            ttft = seconds((s.measured_ttft_ms or 0.0) / 1000)
            ax.plot(
                [c for c, _ in s.measured],
                [ms for _, ms in s.measured],
                color=colour,
                linestyle="--",
                linewidth=1.0,
                marker=marker,
                markerfacecolor="none",
                markersize=5,
                label=f"{s.device} measured: TTFT {ttft}",
            )
    if data.log_context:
        plain_log_ticks(ax)
    if data.log_time:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0.0)
    ax.set_xlabel("context (KV cache rows the step reads)")
    ax.set_ylabel("time per output token (ms)")
    ax.set_title("decode: time per token as the cache grows", fontsize=10)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="best", fontsize=8, title="markers: the decode steps analyzed", title_fontsize=8)


def plain_log_ticks(ax: Axes) -> None:
    """A log context axis ticked at 1, 2 and 5 of each decade and labelled as plain numbers (contexts count
    rows: 50, 100, 200, 500), with no minor labels to overprint them."""
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def roof_style(roof: RoofLine, colour: str, rank: int) -> dict[str, Any]:
    """A roof's line: solid at the precision the steps compute at; where that is not known (no roof primary),
    each of the device's roofs in the next of UNKNOWN_PRECISION_STYLES."""
    dash = "-" if roof.primary else UNKNOWN_PRECISION_STYLES[rank % len(UNKNOWN_PRECISION_STYLES)]
    return {"color": colour, "linestyle": dash, "linewidth": 1.2}


def draw_roofs(ax: Axes, data: DecoderFigureData, colours: dict[str, str]) -> tuple[list[Any], list[str]]:
    """Each roof in its device's colour, its ridge named beside it where it is one device's primary roof (several
    devices' ridge labels would overprint: the legend gives every ridge); its legend entries."""
    import numpy as np
    from matplotlib.lines import Line2D

    xs = np.geomspace(*data.x_limits, 400)
    handles: list[Any] = []
    labels: list[str] = []
    ranks: dict[str, int] = {}
    one_device = len({r.device for r in data.roofs}) == 1
    for roof in data.roofs:
        rank = ranks[roof.device] = ranks.get(roof.device, -1) + 1
        style = roof_style(roof, colours[roof.device], rank)
        named = roof.primary and one_device
        draw_roof(ax, xs, roof.peak_flops_s, roof.bandwidth_bytes_s, roof.ridge_point, style, named)
        handles.append(Line2D([], [], **style))
        peak, bandwidth = si(roof.peak_flops_s, "FLOP/s"), si(roof.bandwidth_bytes_s, "B/s")
        labels.append(f"roof {roof.device} {roof.precision}: {peak}, {bandwidth}, ridge {roof.ridge_point:.3g} FLOP/B")
    return handles, labels


def roofs_title(data: DecoderFigureData) -> str:
    """What the roofs are: peak FLOP/s under DRAM bandwidth, at the steps' precision where every device's is known."""
    if all(r.primary for r in data.roofs):
        return "roofs: peak at the steps' precision, DRAM bandwidth"
    return "roofs: DRAM bandwidth; every precision listed\nwhere the steps' precision is not given"


def draw_phases(ax: Axes, s: DeviceSeries, colour: str, marker: str) -> None:
    """The prefill as a star; the decode steps (first, last) joined by a dotted line; each named by its phase."""
    shown = [ph for ph in s.phases if ph.intensity > 0 and ph.flops_s > 0]
    prefill = [ph for ph in shown if ph.phase == "prefill"]
    decode = [ph for ph in shown if ph.phase != "prefill"]
    ax.plot(
        [ph.intensity for ph in prefill],
        [ph.flops_s for ph in prefill],
        linestyle="",
        marker=PREFILL_MARKER,
        markersize=12,
        color=colour,
        zorder=3,
        label=f"{s.device} prefill",
    )
    ax.plot(
        [ph.intensity for ph in decode],
        [ph.flops_s for ph in decode],
        linestyle=":",
        marker=marker,
        markersize=7,
        color=colour,
        zorder=3,
        label=f"{s.device} decode, first to last",
    )
    for ph in shown:
        ax.annotate(
            ph.label, (ph.intensity, ph.flops_s), xytext=(6, -10), textcoords="offset points", fontsize=7, color=colour
        )


def draw_phase_roofline(ax: Axes, data: DecoderFigureData) -> None:
    """The devices' roofs, and each device's prefill and decode points on them (log-log)."""
    log_axes(ax, data.x_limits, data.y_limits, "arithmetic intensity (FLOP/byte)", "performance (FLOP/s)")
    colours = {s.device: device_colour(i) for i, s in reversed(list(enumerate(data.series)))}
    handles, labels = draw_roofs(ax, data, colours)
    for i, s in enumerate(data.series):
        draw_phases(ax, s, device_colour(i), device_marker(i))
    points, names = ax.get_legend_handles_labels()
    ax.set_title("each phase on its roofline", fontsize=10)
    ax.legend(
        handles + points,
        labels + names,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
        title=roofs_title(data),
        title_fontsize=8,
    )


def draw_decoder(data: DecoderFigureData) -> Drawn:
    """Left: ms per token against context, one line per device. Right: the roofline of each device with its
    prefill and decode steps."""
    figure = new_figure(FIGURE_SIZE)
    left, right = figure.subplots(1, 2)
    draw_time_per_token(left, data)
    draw_phase_roofline(right, data)
    figure.suptitle(data.title, fontsize=11)
    return Drawn(figure, data.title)


def check_figure_path(path: str | os.PathLike[str], force: bool) -> None:
    """Refuse a figure's file before anything is drawn: an extension that names no format, a folder, or an
    existing file without ``force`` (the refusals 'onnxroof plot' makes)."""
    format_of(path)
    target = Path(path)
    if target.is_dir():
        raise UserError(f"{path} is a folder: the output is a file", f"name a file, e.g. {target / 'NAME.svg'}")
    if target.exists() and not force:
        raise UserError(f"{path} exists", "pass --force to replace it, or choose another file")


def write_decoder_figure(runs: Sequence[DecoderOnDevice], path: str | os.PathLike[str], force: bool = False) -> None:
    """Draw the generation figure of ``runs`` (one prediction per device) and write it to ``path`` atomically,
    as PNG, SVG or PDF by its extension; an existing file is replaced only with ``force``."""
    check_figure_path(path, force)
    save(draw_decoder(decoder_data(runs)).figure, path)
