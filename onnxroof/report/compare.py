"""Two models side by side: totals, predicted speedup per device, measured speedup, and per-layer deltas."""

from __future__ import annotations

import json

from onnxroof.report.format import TABLE_WIDTH, clip, seconds, si
from onnxroof.whatif.compare import Comparison

__all__ = ["render_compare"]


def render_compare(c: Comparison, fmt: str = "table", top: int = 20) -> str:
    """The comparison as a table (the ``top`` layers whose predicted time changed most) or as JSON."""
    if fmt == "json":
        return json.dumps(c.to_dict(), indent=2) + "\n"
    a, b = c.a, c.b
    lines = [
        clip(f"A: {a.name}", TABLE_WIDTH),
        clip(f"B: {b.name}", TABLE_WIDTH),
        "",
        f"{'':16}{'A':>14}{'B':>14}{'B/A':>10}",
    ]
    for label, va, vb, unit in (
        ("FLOPs", a.flops, b.flops, "FLOP"),
        ("bytes moved", a.bytes_moved, b.bytes_moved, "B"),
        ("params", float(a.params), float(b.params), ""),
        ("nodes", float(a.nodes), float(b.nodes), ""),
    ):
        lines.append(f"{label:16}{si(va, unit):>14}{si(vb, unit):>14}{_ratio(vb, va):>10}")
    lines.append(
        f"{'intensity':16}{a.intensity:>10.2f} F/B{b.intensity:>10.2f} F/B{_ratio(b.intensity, a.intensity):>10}"
    )
    lines += ["", f"{'device':22}{'graph':>14}{'A':>11}{'B':>11}{'speedup':>9}  bound A -> B"]
    for d in c.devices:
        lines.append(
            f"{d.device:22}{_graph(d.graph):>14}{seconds(d.time_a_s):>11}{seconds(d.time_b_s):>11}"
            f"{d.speedup:>8.2f}x  {d.bound_a} -> {d.bound_b}"
        )
    m = c.measured
    if m is not None:
        verdict = ("direction right" if m.direction_right else "direction WRONG") + (
            ", size within 20%" if m.size_right else ", size off by more than 20%"
        )
        lines += [
            "",
            f"measured here ({m.threads} thread{'s' if m.threads != 1 else ''}): A {seconds(m.time_a_s)}, "
            f"B {seconds(m.time_b_s)}, speedup {m.speedup:.2f}x",
            f"predicted for this machine: A {seconds(m.predicted_a_s)}, B {seconds(m.predicted_b_s)}, "
            f"speedup {m.predicted:.2f}x ({verdict})",
        ]
    changed = sorted(c.layers, key=lambda d: -abs(d.time_b_s - d.time_a_s))[: top or None]
    if changed:
        lines += ["", f"layers on {c.devices[0].device}, largest change in predicted time first:"]
        lines.append(f"  {'A':30} {'B':30}{'FLOPs A':>9}{'FLOPs B':>9}{'time A':>9}{'time B':>9}")
        for layer in changed:
            name_a = ",".join(layer.a) or "-"
            name_b = ",".join(layer.b) or "-"
            lines.append(
                f"  {clip(name_a, 30):30} {clip(name_b, 30):30}{si(layer.flops_a):>9}{si(layer.flops_b):>9}"
                f"{seconds(layer.time_a_s):>9}{seconds(layer.time_b_s):>9}"
            )
    return "\n".join(lines) + "\n"


def _ratio(new: float, old: float) -> str:
    return f"{new / old:.3f}" if old else "-"


def _graph(graph: str) -> str:
    return "onnxruntime" if graph == "onnxruntime-optimized" else graph
