"""A sweep as a table, JSON or CSV: one row per combination of batch, input size, precision and device."""

from __future__ import annotations

import csv
import io
import json

from onnxroof.report.format import seconds, si
from onnxroof.whatif.sweep import Sweep

__all__ = ["render_sweep"]

FIELDS = (
    "batch",
    "input_size",
    "precision",
    "kind",
    "device",
    "graph",
    "predicted_time_s",
    "throughput_per_s",
    "flops",
    "bytes_moved",
    "intensity",
    "bound",
)


def render_sweep(s: Sweep, fmt: str = "table") -> str:
    """``fmt`` is table, json or csv. The table's precision column marks what-if rows (analysis at that
    precision, graph unchanged) and rewrite rows (the graph converted)."""
    if fmt == "json":
        return json.dumps(s.to_dict(), indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in s.rows:
            writer.writerow({k: v for k, v in row.to_dict().items() if k in FIELDS})
        return out.getvalue()
    lines = [
        s.model,
        f"{'batch':>5} {'size':>9} {'precision':22} {'device':20}{'time':>10}{'samples/s':>11}{'FLOPs':>10}"
        f"{'bytes':>10}{'FLOP/B':>8}  bound",
    ]
    for r in s.rows:
        precision = {"what-if": f"{r.precision} (what-if)", "rewrite": f"{r.precision} (rewrite)"}.get(
            r.kind, r.precision
        )
        lines.append(
            f"{r.batch:>5} {r.input_size:>9} {precision:22} {r.device[:20]:20}{seconds(r.predicted_time_s):>10}"
            f"{r.throughput:>11.4g}{si(r.flops):>10}{si(r.bytes_moved, 'B'):>10}{r.intensity:>8.1f}  {r.bound}"
        )
    lines += [
        "",
        "what-if: every float tensor analyzed at that precision, graph unchanged; rewrite: the graph converted "
        "(its Casts and quantize nodes included)",
    ]
    return "\n".join(lines) + "\n"
