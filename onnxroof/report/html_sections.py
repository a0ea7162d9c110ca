"""The sections of the HTML report that the page renders on the server side: summary, devices, time by op type,
unsupported ops and warnings, and predicted against measured. Each function returns an HTML fragment; every text
that comes from a model or a device file is escaped."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from onnxroof.devices import Device
from onnxroof.predict.analysis import Analysis
from onnxroof.predict.roofline import BOUNDS
from onnxroof.report.format import seconds, short_op, si
from onnxroof.units import binary_bytes

if TYPE_CHECKING:
    from onnxroof.ort.validate import Validation

__all__ = [
    "bound_badge",
    "devices_section",
    "op_type_section",
    "summary_section",
    "table_section",
    "validation_section",
    "warnings_section",
]

esc = html.escape


def bound_badge(bound: str) -> str:
    """The bound as a coloured word (the colour repeats the word, it never replaces it)."""
    return f'<span class="bound bound-{esc(bound)}">{esc(bound)}</span>'


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], css: str = "", numeric: Sequence[int] = ()) -> str:
    """An HTML table; cells are already HTML (callers escape what they put in them); the ``numeric`` columns are
    right-aligned."""

    def cell(tag: str, index: int, content: str) -> str:
        return f'<{tag} class="num">{content}</{tag}>' if index in numeric else f"<{tag}>{content}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _facts(items: Sequence[tuple[str, str]]) -> str:
    """Label/value pairs as a definition list (values are HTML)."""
    return '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _time_by_bound_bar(a: Analysis) -> str:
    """A bar split by the share of the predicted node time each bound holds, with its legend in words."""
    times = a.totals.time_by_bound
    whole = sum(times.values())
    if not whole:
        return '<p class="empty">No node takes predicted time.</p>'
    order = [b for b in BOUNDS if times.get(b)] + [b for b in times if b not in BOUNDS and times[b]]
    parts = "".join(
        f'<span class="bar-part bound-{esc(b)}" style="width:{100 * times[b] / whole:.2f}%" '
        f'title="{esc(b)}: {seconds(times[b])}"></span>'
        for b in order
    )
    legend = ", ".join(f"{bound_badge(b)} {seconds(times[b])} ({_share(times[b], whole)})" for b in order)
    return f'<div class="bar">{parts}</div><p class="legend">Predicted time in layers bound by {legend}</p>'


def _graph_label(a: Analysis) -> str:
    return "onnxruntime's optimized graph" if a.graph == "onnxruntime-optimized" else "the graph as exported"


def summary_section(analyses: Sequence[Analysis]) -> str:
    """Per analysis: model, device, precision, totals, the predicted time and its split by bound."""
    blocks = []
    for a in analyses:
        t, p = a.totals, a.totals.prediction
        precision = a.precision if a.precision != "as-typed" else f"as typed (mostly {p.precision})"
        facts = [
            ("model", esc(a.model)),
            ("graph", esc(_graph_label(a))),
            ("device", f"{esc(a.device.label())} <code>{esc(a.device.key)}</code>"),
            ("precision", esc(precision)),
            ("predicted time", f"<strong>{seconds(p.predicted_time_s)}</strong> {bound_badge(p.bound)}"),
            (
                "time terms",
                f"compute {seconds(p.compute_time_s)}, memory {seconds(p.memory_time_s)}, "
                f"overhead {seconds(p.overhead_time_s)}",
            ),
            ("FLOPs", f"{si(t.flops, 'FLOP')} ({si(t.macs, 'MAC')})"),
            ("memory traffic", f"{si(t.bytes_read, 'B')} read, {si(t.bytes_written, 'B')} written"),
            ("parameters", si(t.params)),
            ("intensity", f"{t.arithmetic_intensity:.3g} FLOP/B (ridge {p.ridge_point:.3g} FLOP/B)"),
            (
                "layers",
                f"{len(a.nodes)} ({t.kernels} kernels, {a.folded_nodes} folded: weights, static shapes)",
            ),
        ]
        blocks.append(
            f'<div class="card"><h3>{esc(a.model)} on {esc(a.device.label())}</h3>{_facts(facts)}'
            f"{_time_by_bound_bar(a)}</div>"
        )
    return '<section id="summary"><h2>Summary</h2><div class="cards">' + "".join(blocks) + "</div></section>"


def _device_block(d: Device) -> str:
    peaks = [
        (
            esc(precision),
            si(peak.value, "FLOP/s" if precision != "int8" else "OP/s"),
            f"{d.memory_bandwidth.value and peak.value / d.memory_bandwidth.value:.3g} FLOP/B",
            '<span class="source">' + esc(peak.source) + "</span>",
        )
        for precision, peak in d.peak_flops.items()
    ]
    rows = [
        ("memory bandwidth", si(d.memory_bandwidth.value, "B/s"), d.memory_bandwidth.source),
        ("launch overhead", seconds(d.launch_overhead.value) + " per kernel", d.launch_overhead.source),
    ]
    if d.memory_capacity is not None:
        rows.append(("memory capacity", si(d.memory_capacity.value, "B"), d.memory_capacity.source))
    if d.run_overhead is not None:
        rows.append(("run overhead", seconds(d.run_overhead.value) + " per run", d.run_overhead.source))
    numbers = [(esc(name), value, f'<span class="source">{esc(source)}</span>') for name, value, source in rows]
    caches = [
        (
            esc(c.level),
            binary_bytes(c.size),
            esc(c.scope),
            si(c.bandwidth, "B/s") if c.bandwidth else "-",
            f'<span class="source">{esc(c.source)}</span>',
        )
        for c in d.caches
    ]
    overlap = "launches overlap execution (max of the terms)" if d.overlap == "max" else "serial dispatch"
    text = f'<div class="card"><h3>{esc(d.name)} <code>{esc(d.key)}</code></h3>'
    text += f"<p>{esc(d.kind)}, {esc(overlap)}{', engine ' + esc(d.engine_spec() or '') if d.engine else ''}</p>"
    text += _table(("precision", "peak", "ridge point", "source"), peaks, "numbers", (1, 2))
    text += _table(("", "value", "source"), numbers, "numbers", (1,))
    if caches:
        text += _table(("cache", "size", "scope", "bandwidth", "source"), caches, "numbers", (1, 3))
    if d.calibration is not None:
        c = d.calibration
        text += (
            f"<p>Calibrated on {esc(c.cpu)} with onnxruntime {esc(c.onnxruntime)}, {esc(c.provider)}, "
            f"{c.threads} thread(s), {esc(c.date)}.</p>"
        )
    return text + "</div>"


def devices_section(analyses: Sequence[Analysis]) -> str:
    """Each distinct device: peaks per precision, bandwidth, caches, overheads, and the source of each number."""
    seen: dict[str, Device] = {}
    for a in analyses:
        seen.setdefault(a.device.key, a.device)
    blocks = "".join(_device_block(d) for d in seen.values())
    return f'<section id="devices"><h2>Devices</h2><div class="cards">{blocks}</div></section>'


def table_section(analyses: Sequence[Analysis]) -> str:
    """The per-layer table's frame and controls; its rows come from the page data (see assets/report.js)."""
    choose = ""
    if len(analyses) > 1:
        options = "".join(
            f'<option value="{i}">{esc(a.model)} on {esc(a.device.label())}</option>' for i, a in enumerate(analyses)
        )
        choose = f'<label>analysis <select id="analysis-select">{options}</select></label>'
    return (
        '<section id="layers"><h2>Layers</h2><div class="controls">'
        f"{choose}"
        '<label>op type <select id="op-filter"><option value="">all</option></select></label>'
        '<label>bound <select id="bound-filter"><option value="">all</option></select></label>'
        '<label>name <input id="name-filter" type="search" placeholder="search layer names"></label>'
        '<span id="row-count"></span></div>'
        '<div class="scroll"><table id="layer-table" class="numbers sortable"><thead></thead><tbody></tbody>'
        "</table></div>"
        "<noscript><p>The layer table needs JavaScript; the same data is in the JSON output.</p></noscript>"
        "</section>"
    )


def op_type_section(analyses: Sequence[Analysis]) -> str:
    """Costs and predicted time per op type, per analysis, most time first."""
    blocks = []
    for a in analyses:
        whole = sum(o.predicted_time_s for o in a.by_op_type)
        ordered = sorted(a.by_op_type, key=lambda o: -o.predicted_time_s)
        rows = [
            (
                esc(short_op(o.op_type)),
                str(o.count),
                si(o.flops, "FLOP"),
                si(o.bytes_read + o.bytes_written, "B"),
                si(o.params),
                seconds(o.predicted_time_s),
                _share(o.predicted_time_s, whole),
            )
            for o in ordered
        ]
        header = ("op type", "count", "FLOPs", "memory traffic", "params", "predicted", "share")
        table = _table(header, rows, "numbers", (1, 2, 3, 4, 5, 6))
        blocks.append(f'<div class="card"><h3>{esc(a.model)} on {esc(a.device.label())}</h3>{table}</div>')
    return '<section id="op-types"><h2>By op type</h2><div class="cards">' + "".join(blocks) + "</div></section>"


def warnings_section(analyses: Sequence[Analysis], validation: Validation | None) -> str:
    """Ops that could not be costed exactly (they are charged their tensor bytes only) and every warning."""
    parts = []
    for a in analyses:
        title = f"<h3>{esc(a.model)} on {esc(a.device.label())}</h3>"
        if a.unsupported:
            rows = [
                (esc(f"{u.domain}::{u.op_type}" if u.domain else u.op_type), str(u.count), esc(u.reason))
                for u in a.unsupported
            ]
            parts.append(
                title
                + "<p>Unsupported ops are charged their tensor bytes only.</p>"
                + _table(("op", "count", "reason"), rows, "unsupported", (1,))
            )
        else:
            parts.append(title + "<p>Every op has a cost function.</p>")
        if a.warnings:
            parts.append('<ul class="warnings">' + "".join(f"<li>{esc(w)}</li>" for w in a.warnings) + "</ul>")
    if validation is not None and (validation.warnings or validation.measurement.warnings):
        notes = list(validation.warnings) + list(validation.measurement.warnings)
        parts.append(
            '<h3>Measurement</h3><ul class="warnings">' + "".join(f"<li>{esc(w)}</li>" for w in notes) + "</ul>"
        )
    return '<section id="warnings"><h2>Unsupported ops and warnings</h2>' + "".join(parts) + "</section>"


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def validation_section(validation: Validation | None) -> str:
    """The model's predicted and measured latency, the per-kernel agreement, and every kernel; nothing without a
    validation."""
    if validation is None:
        return ""
    v, m, s = validation, validation.measurement, validation.agreement
    facts = [
        ("measured on", f"{esc(m.provider)}, {m.threads} thread(s), optimization level {esc(m.opt_level)}"),
        ("measured", f"<strong>{seconds(v.measured_time_s)}</strong> (fastest eighth {seconds(v.measured_fast_s)})"),
        (
            "predicted",
            f"<strong>{seconds(v.predicted_at_speed_s)}</strong> (as calibrated {seconds(v.predicted_time_s)})",
        ),
        ("error", f"{v.model_error:+.1%}"),
    ]
    if s.count:
        rho = f"{s.spearman:.3f}" if s.spearman is not None else "n/a"
        median = f"{s.median_abs_error:.1%}" if s.median_abs_error is not None else "n/a"
        within = f"{s.within_25_percent:.0%}" if s.within_25_percent is not None else "n/a"
        facts.append(("kernels", f"{s.count} compared, Spearman {rho}, median |error| {median}, {within} within 25%"))
    rows = [
        (
            f'<span class="layer-name">{esc(k.name)}</span>',
            esc(short_op(k.op_type)),
            seconds(k.measured_time_s),
            seconds(k.predicted_time_s),
            _ratio(k.ratio),
            bound_badge(k.bound),
            esc(k.explanation),
        )
        for k in v.kernels
    ]
    header = ("kernel", "op", "measured", "predicted", "predicted / measured", "bound", "why")
    return (
        '<section id="validation"><h2>Predicted against measured</h2>'
        f'<div class="card">{_facts(facts)}</div>' + _table(header, rows, "numbers kernels", (2, 3, 4)) + "</section>"
    )
