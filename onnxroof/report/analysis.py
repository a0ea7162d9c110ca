"""Renderings of an Analysis: a terminal table, the JSON contract and CSV rows. Pure text in, text out."""

from __future__ import annotations

import csv
import io

from onnxroof.predict.analysis import Analysis, NodeResult
from onnxroof.report.analysis_json import to_json
from onnxroof.report.format import TABLE_WIDTH, clip, seconds, short_op, si

__all__ = ["FORMATS", "render", "to_csv", "to_json", "to_table"]


def to_csv(analysis: Analysis) -> str:
    """One row per node, with the JSON node fields as columns."""
    rows = [n.to_dict() for n in analysis.nodes]
    out = io.StringIO()
    fields = list(rows[0]) if rows else ["name", "op_type"]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _header(a: Analysis) -> list[str]:
    t, p, d = a.totals, a.totals.prediction, a.device
    precision = a.precision if a.precision != "as-typed" else f"as typed (mostly {p.precision})"
    lines = [
        clip(f"{a.model} on {d.label()} [{d.key}], precision {precision}", TABLE_WIDTH),
        clip(
            f"device: {si(p.peak_flops_s, 'FLOP/s')} {p.precision}, {si(d.memory_bandwidth.value, 'B/s')}, "
            f"ridge {p.ridge_point:.3g} FLOP/B, launch {seconds(d.launch_overhead.value)} ({d.overlap} overlap)",
            TABLE_WIDTH,
        ),
        "",
        f"  FLOPs {si(t.flops)}   MACs {si(t.macs)}   params {si(t.params)}   "
        f"read {si(t.bytes_read, 'B')}   written {si(t.bytes_written, 'B')}",
        f"  accumulated intensity {t.arithmetic_intensity:.3g} FLOP/B   kernels {t.kernels}   "
        f"nodes {len(a.nodes)} (+{a.folded_nodes} folded weight nodes)",
        f"  predicted {seconds(p.predicted_time_s)} = compute {seconds(p.compute_time_s)} | memory "
        f"{seconds(p.memory_time_s)} | overhead {seconds(p.overhead_time_s)}   bound: {p.bound}",
        "  predicted time in nodes bound by "
        + ", ".join(f"{b} {100 * s / (p.predicted_time_s or 1):.0f}%" for b, s in t.time_by_bound.items()),
    ]
    return lines


_NODE_COLUMNS = "{:>4} {:<26} {:<14} {:>8} {:>8} {:>7} {:<8} {:>10} {:>6}"


def _node_rows(a: Analysis, nodes: list[tuple[int, NodeResult]]) -> list[str]:
    total_time = a.totals.predicted_time_s or 1.0
    lines = [_NODE_COLUMNS.format("#", "node", "op", "GFLOP", "MB", "FLOP/B", "bound", "time", "share")]
    for index, n in nodes:
        c, p = n.cost, n.prediction
        lines.append(
            _NODE_COLUMNS.format(
                index,
                clip(n.name, 26),
                clip(short_op(f"{n.domain}::{n.op_type}" if n.domain else n.op_type), 14),
                f"{c.flops / 1e9:.3f}",
                f"{c.bytes / 1e6:.2f}",
                f"{c.arithmetic_intensity:.3g}",
                p.bound,
                seconds(p.predicted_time_s),
                f"{100 * p.predicted_time_s / total_time:.1f}%",
            )
        )
    return lines


_OP_COLUMNS = "{:<24} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6}"


def _op_rows(a: Analysis) -> list[str]:
    total_time = a.totals.predicted_time_s or 1.0
    lines = [_OP_COLUMNS.format("op type", "count", "GFLOP", "GMAC", "MB read", "MB write", "params", "time", "share")]
    for o in a.by_op_type:
        lines.append(
            _OP_COLUMNS.format(
                clip(short_op(o.op_type), 24),
                o.count,
                f"{o.flops / 1e9:.3f}",
                f"{o.macs / 1e9:.3f}",
                f"{o.bytes_read / 1e6:.2f}",
                f"{o.bytes_written / 1e6:.2f}",
                si(o.params),
                seconds(o.predicted_time_s),
                f"{100 * o.predicted_time_s / total_time:.1f}%",
            )
        )
    return lines


def to_table(analysis: Analysis, top: int = 20, by_op_type: bool = False) -> str:
    """The terminal report, at most TABLE_WIDTH columns: header, totals, the ``top`` nodes by predicted time
    (all nodes in graph order when ``top`` is 0), optionally totals by op type, then unsupported ops."""
    a = analysis
    lines = _header(a)
    indexed = list(enumerate(a.nodes))
    if top and top < len(indexed):
        chosen = sorted(indexed, key=lambda item: -item[1].prediction.predicted_time_s)[:top]
        lines += ["", f"Top {top} of {len(indexed)} nodes by predicted time (--top 0 lists all in graph order)"]
    else:
        chosen = indexed
        lines += ["", f"All {len(indexed)} nodes in graph order"]
    lines += _node_rows(a, chosen)
    if by_op_type:
        lines += ["", "By op type"] + _op_rows(a)
    if a.unsupported:
        lines += ["", "Unsupported (charged their tensor bytes only):"]
        lines += [
            f"  {u.count} x {(u.domain + '::') if u.domain else ''}{u.op_type}: {u.reason}" for u in a.unsupported
        ]
    return "\n".join(clip(line, TABLE_WIDTH) for line in lines) + "\n"


FORMATS = ("table", "json", "csv")


def render(analysis: Analysis, fmt: str = "table", top: int = 20, by_op_type: bool = False) -> str:
    if fmt == "json":
        return to_json(analysis)
    if fmt == "csv":
        return to_csv(analysis)
    return to_table(analysis, top=top, by_op_type=by_op_type)
