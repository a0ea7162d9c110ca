"""A sweep as a table, JSON or CSV: one row per combination of batch, input size, precision and device."""

from __future__ import annotations

import csv
import io
import json

from onnxroof.report.format import Column, seconds, si, table, wrap
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
    "complete",
    "uncounted",
)

COLUMNS = (
    Column("batch", right=True),
    Column("size", right=True),
    Column("precision"),
    Column("device", cut=True),
    Column("time", right=True),
    Column("samples/s", right=True),
    Column("FLOPs", right=True),
    Column("bytes", right=True),
    Column("FLOP/B", right=True, optional=True),  # FLOPs over bytes: left out where the width is too narrow
    Column("bound"),
)


def render_sweep(s: Sweep, fmt: str = "table", width: int | None = None) -> str:
    """``fmt`` is table, json or csv. The table's precision column marks what-if rows (analysis at that
    precision, graph unchanged) and rewrite rows (the graph converted); a row whose totals leave nodes out has
    its FLOPs marked. Within ``width`` columns (None: no limit) device names are cut in the middle and prose is
    wrapped; nothing else is cut."""
    if fmt == "json":
        return json.dumps(s.to_dict(), indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in s.rows:
            writer.writerow({k: v for k, v in row.to_dict().items() if k in FIELDS})
        return out.getvalue()
    rows = [
        [
            str(r.batch),
            r.input_size,
            {"what-if": f"{r.precision} (what-if)", "rewrite": f"{r.precision} (rewrite)"}.get(r.kind, r.precision),
            r.device,
            seconds(r.predicted_time_s),
            si(r.throughput),
            si(r.flops) + ("" if r.complete else " *"),
            si(r.bytes_moved, "B"),
            si(r.intensity),
            r.bound,
        ]
        for r in s.rows
    ]
    prose = [
        "",
        "what-if: every float tensor analyzed at that precision, graph unchanged; rewrite: the graph converted "
        "(its Casts and quantize nodes included)",
    ]
    incomplete = [r for r in s.rows if not r.complete]
    if incomplete:
        most = max(r.uncounted for r in incomplete)
        prose.append(
            f"* INCOMPLETE: up to {most} node(s) not counted in full, so the row's totals are lower bounds "
            "(onnxroof analyze names them)"
        )
    lines = [*wrap(s.model, width), *table(COLUMNS, rows, width)]
    lines += [line for text in prose for line in wrap(text, width)]
    return "\n".join(lines) + "\n"
