"""Two models side by side: totals, predicted speedup per device, measured speedup, and per-layer deltas."""

from __future__ import annotations

import json

from onnxroof.report.format import Column, seconds, si, table, wrap
from onnxroof.whatif.compare import Comparison, Side

__all__ = ["render_compare"]

TOTAL_COLUMNS = (Column(""), Column("A", right=True), Column("B", right=True), Column("B/A", right=True))
DEVICE_COLUMNS = (
    Column("device", cut=True),
    Column("graph"),
    Column("A", right=True),
    Column("B", right=True),
    Column("speedup", right=True),
    Column("bound A -> B"),
)
LAYER_COLUMNS = (
    Column("A", cut=True),
    Column("B", cut=True),
    *(Column(h, right=True) for h in ("FLOPs A", "FLOPs B", "time A", "time B")),
)


def render_compare(c: Comparison, fmt: str = "table", top: int = 20, width: int | None = None) -> str:
    """The comparison as a table (the ``top`` layers whose predicted time changed most) or as JSON. Within
    ``width`` columns (None: no limit) names are cut in the middle and prose is wrapped; nothing else is cut."""
    if fmt == "json":
        return json.dumps(c.to_dict(), indent=2) + "\n"
    a, b = c.a, c.b
    lines = [*wrap(f"A: {a.name}", width), *wrap(f"B: {b.name}", width), ""]
    totals = [
        [label, si(va, unit), si(vb, unit), _ratio(vb, va)]
        for label, va, vb, unit in (
            ("FLOPs", a.flops, b.flops, "FLOP"),
            ("bytes moved", a.bytes_moved, b.bytes_moved, "B"),
            ("params", float(a.params), float(b.params), ""),
            ("nodes", float(a.nodes), float(b.nodes), ""),
            ("intensity", a.intensity, b.intensity, "FLOP/B"),
        )
    ]
    lines += table(TOTAL_COLUMNS, totals, width)
    lines += [line for side, label in ((a, "A"), (b, "B")) for line in _incomplete(side, label, width)]
    devices = [
        [
            d.device,
            _graph(d.graph),
            seconds(d.time_a_s),
            seconds(d.time_b_s),
            f"{d.speedup:.2f}x",
            f"{d.bound_a} -> {d.bound_b}",
        ]
        for d in c.devices
    ]
    lines += ["", *table(DEVICE_COLUMNS, devices, width)]
    m = c.measured
    if m is not None:
        verdict = ("direction right" if m.direction_right else "direction WRONG") + (
            ", size within 20%" if m.size_right else ", size off by more than 20%"
        )
        lines += [
            "",
            *wrap(
                f"measured here ({m.threads} thread{'s' if m.threads != 1 else ''}): A {seconds(m.time_a_s)}, "
                f"B {seconds(m.time_b_s)}, speedup {m.speedup:.2f}x",
                width,
            ),
            *wrap(
                f"predicted for this machine: A {seconds(m.predicted_a_s)}, B {seconds(m.predicted_b_s)}, "
                f"speedup {m.predicted:.2f}x ({verdict})",
                width,
            ),
        ]
    changed = sorted(c.layers, key=lambda d: -abs(d.time_b_s - d.time_a_s))[: top or None]
    if changed:
        lines += ["", *wrap(f"layers on {c.devices[0].device}, largest change in predicted time first:", width)]
        rows = [
            [
                ",".join(layer.a) or "-",
                ",".join(layer.b) or "-",
                si(layer.flops_a),
                si(layer.flops_b),
                seconds(layer.time_a_s),
                seconds(layer.time_b_s),
            ]
            for layer in changed
        ]
        lines += table(LAYER_COLUMNS, rows, width, indent="  ")
    return "\n".join(lines) + "\n"


def _incomplete(side: Side, label: str, width: int | None) -> list[str]:
    """A line saying that a side's totals leave nodes out; none when every node was counted."""
    if side.complete:
        return []
    text = (
        f"  INCOMPLETE: {label}'s totals are lower bounds, {side.uncounted} node(s) not counted in full "
        "(onnxroof analyze names them)"
    )
    return wrap(text, width)


def _ratio(new: float, old: float) -> str:
    return f"{new / old:.3f}" if old else "-"


def _graph(graph: str) -> str:
    return "onnxruntime" if graph == "onnxruntime-optimized" else graph
