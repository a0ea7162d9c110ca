"""A sweep as a table, JSON or CSV: one row per combination of batch, input size, precision and device."""

from __future__ import annotations

import csv
import io
import json

from onnxroof.report.format import Column, seconds, si, table, wrap
from onnxroof.whatif.sweep import Sweep, SweepRow

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
MEASURED_FIELDS = ("measured_time_s", "error")  # after FIELDS where the sweep was measured

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
MEASURED_COLUMNS = (Column("measured", right=True), Column("error", right=True))


def render_sweep(s: Sweep, fmt: str = "table", width: int | None = None) -> str:
    """``fmt`` is table, json or csv. The table's precision column marks what-if rows (analysis at that
    precision, graph unchanged) and rewrite rows (the graph converted); a row whose totals leave nodes out has
    its FLOPs marked; a measured sweep adds each row's measured time and the prediction's error. Within ``width``
    columns (None: no limit) device names are cut in the middle and prose is wrapped; nothing else is cut."""
    if fmt == "json":
        return json.dumps(s.to_dict(), indent=2) + "\n"
    if fmt == "csv":
        return _csv(s)
    columns = COLUMNS + (MEASURED_COLUMNS if s.measured else ())
    rows = [_cells(r) + (_measured_cells(r) if s.measured else []) for r in s.rows]
    prose = [
        "",
        "what-if: every float tensor analyzed at that precision, graph unchanged; rewrite: the graph converted "
        "(its Casts and quantize nodes included)",
    ]
    if s.measured:
        prose.append(
            "measured: the whole model's median time per run with onnxruntime on the device's own machine; "
            "error: predicted / measured - 1"
        )
    incomplete = [r for r in s.rows if not r.complete]
    if incomplete:
        most = max(r.uncounted for r in incomplete)
        prose.append(
            f"* INCOMPLETE: up to {most} node(s) not counted in full, so the row's totals are lower bounds "
            "(onnxroof analyze names them)"
        )
    lines = [*wrap(s.model, width), *table(columns, rows, width)]
    lines += [line for text in prose for line in wrap(text, width)]
    return "\n".join(lines) + "\n"


def _csv(s: Sweep) -> str:
    """One line per row of FIELDS (and MEASURED_FIELDS where the sweep was measured)."""
    fields = FIELDS + (MEASURED_FIELDS if s.measured else ())
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in s.rows:
        writer.writerow({k: v for k, v in row.to_dict().items() if k in fields})
    return out.getvalue()


def _cells(r: SweepRow) -> list[str]:
    """A row's cells under COLUMNS."""
    return [
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


def _measured_cells(r: SweepRow) -> list[str]:
    """A measured row's cells under MEASURED_COLUMNS ("-" where the row was not timed)."""
    if r.measured_time_s is None or r.error is None:
        return ["-", "-"]
    return [seconds(r.measured_time_s), f"{r.error:+.1%}"]
