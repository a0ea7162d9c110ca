"""Renderings of an Analysis: a terminal table, the JSON contract and CSV rows. Pure text in, text out."""

from __future__ import annotations

import csv
import io

from onnxroof.predict.analysis import Analysis, NodeResult
from onnxroof.predict.gpu_times import shortest_kernel
from onnxroof.predict.profiles import named_profile
from onnxroof.report.analysis_json import to_json
from onnxroof.report.format import Column, dims, seconds, short_op, si, table, wrap

__all__ = ["FORMATS", "render", "to_csv", "to_json", "to_table"]

NAMED = 3  # how many uncounted nodes the headline names


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
    least = "" if t.complete else "at least "
    profile = named_profile(d)
    overlap = profile.overlap if profile is not None and profile.overlap else d.overlap
    launch = f"launch {seconds(d.launch_overhead.value)}"
    if profile is not None and "kernel_latency" in profile.terms:
        launch = f"kernel latency {seconds(shortest_kernel(d))}"
    return [
        f"{a.model} on {d.label()} [{d.key}], precision {precision}",
        f"device: {si(p.peak_flops_s, 'FLOP/s')} {p.precision}, {si(d.memory_bandwidth.value, 'B/s')}, "
        f"ridge {si(p.ridge_point)} FLOP/B, {launch} ({overlap} overlap)",
        f"engine: {d.engine_spec() or 'roofline'}: {a.includes}",
        "",
        *_incomplete(a),
        f"  FLOPs {least}{si(t.flops)}   MACs {least}{si(t.macs)}   params {si(t.params)}   "
        f"read {si(t.bytes_read, 'B')}   written {si(t.bytes_written, 'B')}",
        f"  accumulated intensity {si(t.arithmetic_intensity)} FLOP/B   kernels {t.kernels}   "
        f"nodes {len(a.nodes)} (+{a.folded_nodes} folded: weights, static shapes)",
        f"  predicted {least}{seconds(p.predicted_time_s)}, {_how_summed(a)}",
        f"  terms summed over the nodes: compute {seconds(p.compute_time_s)}, memory {seconds(p.memory_time_s)}, "
        f"overhead {seconds(p.overhead_time_s)}   bound: {p.bound}",
        "  predicted time in nodes bound by "
        + ", ".join(f"{b} {100 * s / (p.predicted_time_s or 1):.0f}%" for b, s in t.time_by_bound.items()),
    ]


def _how_summed(a: Analysis) -> str:
    """How the model's predicted time follows from its nodes' terms on this device: a sum of per-node times,
    not the largest of the summed terms (nodes bound by different terms add up)."""
    per_node = "max(compute, memory) + overhead" if a.device.overlap == "serial" else "largest term"
    text = f"the sum of each node's {per_node} over {len(a.nodes)} nodes"
    run = a.device.run_overhead
    if a.graph == "onnxruntime-optimized" and run is not None and run.value:
        text += f", plus {seconds(run.value)} per run"
    return text


def _incomplete(a: Analysis) -> list[str]:
    """The line that says the totals leave nodes out, naming the first few; none when every node was counted."""
    if a.totals.complete:
        return []
    named = ", ".join(f"{u.name} ({u.reason})" for u in a.uncounted[:NAMED])
    more = f" and {len(a.uncounted) - NAMED} more" if len(a.uncounted) > NAMED else ""
    return [
        f"  INCOMPLETE: {a.totals.uncounted} node(s) not counted in full, so the totals are lower bounds: "
        f"{named}{more}; --format json lists them under uncounted_nodes"
    ]


NODE_COLUMNS = (
    Column("#", right=True),
    Column("node", cut=True),
    Column("op", cut=True),
    Column("shape", cut=True),
    Column("FLOPs", right=True),
    Column("bytes", right=True),
    Column("FLOP/B", right=True, optional=True),  # FLOPs over bytes: left out where the width is too narrow
    Column("bound"),
    Column("time", right=True),
    Column("share", right=True),
)


def _op_name(n: NodeResult) -> str:
    return short_op(f"{n.domain}::{n.op_type}" if n.domain else n.op_type)


# With -v on a calibrated host: each node's op class and why it has it.
CLASS_COLUMN = Column("class", wrap=True)


def _class_and_reason(n: NodeResult) -> str:
    """A node's op class and the reason for it; "-" without an engine note."""
    if n.engine is None:
        return "-"
    return f"{n.engine.op_class}: {n.engine.reason}" if n.engine.reason else n.engine.op_class


def _node_rows(a: Analysis, nodes: list[tuple[int, NodeResult]], width: int | None, classes: bool) -> list[str]:
    total_time = a.totals.predicted_time_s or 1.0
    rows = [
        [
            str(index),
            n.name,
            _op_name(n),
            dims(n.output_shape),
            si(n.cost.flops),
            si(n.cost.bytes, "B"),
            si(n.cost.arithmetic_intensity),
            n.prediction.bound,
            seconds(n.prediction.predicted_time_s),
            f"{100 * n.prediction.predicted_time_s / total_time:.1f}%",
        ]
        for index, n in nodes
    ]
    if classes and any(n.engine is not None for _, n in nodes):
        return table(
            (*NODE_COLUMNS, CLASS_COLUMN), [[*row, _class_and_reason(n)] for row, (_, n) in zip(rows, nodes)], width
        )
    return table(NODE_COLUMNS, rows, width)


OP_COLUMNS = (
    Column("op type", cut=True),
    *(Column(h, right=True) for h in ("count", "FLOPs", "MACs", "read", "written", "params", "time", "share")),
)


def _op_rows(a: Analysis, width: int | None) -> list[str]:
    total_time = a.totals.predicted_time_s or 1.0
    rows = [
        [
            short_op(o.op_type),
            str(o.count),
            si(o.flops),
            si(o.macs),
            si(o.bytes_read, "B"),
            si(o.bytes_written, "B"),
            si(o.params),
            seconds(o.predicted_time_s),
            f"{100 * o.predicted_time_s / total_time:.1f}%",
        ]
        for o in a.by_op_type
    ]
    return table(OP_COLUMNS, rows, width)


def to_table(
    analysis: Analysis, top: int = 20, by_op_type: bool = False, width: int | None = None, classes: bool = False
) -> str:
    """The terminal report: header, totals, the ``top`` nodes by predicted time (all nodes in graph order when
    ``top`` is 0), optionally totals by op type, then unsupported ops. With ``classes``, on a calibrated host, the
    nodes' table ends with each node's op class and why. Within ``width`` columns (None: no limit) names are cut in
    the middle and prose is wrapped; nothing else is cut."""
    a = analysis
    lines = _header(a)
    indexed = list(enumerate(a.nodes))
    if top and top < len(indexed):
        chosen = sorted(indexed, key=lambda item: -item[1].prediction.predicted_time_s)[:top]
        lines += ["", f"Top {top} of {len(indexed)} nodes by predicted time (--top 0 lists all in graph order)"]
    else:
        chosen = indexed
        lines += ["", f"All {len(indexed)} nodes in graph order"]
    prose = [line for text in lines for line in wrap(text, width)]
    prose += _node_rows(a, chosen, width, classes)
    listed = [(i, r.name) for i, r in chosen if r.name in a.fused]
    if listed:
        prose += ["", "Fused kernels listed above, with the graph nodes each runs:"]
        for i, name in listed:
            prose += wrap(f"  {i:>3} {name}: {', '.join(a.fused[name])}", width)
    if by_op_type:
        prose += ["", "By op type", *_op_rows(a, width)]
    if a.unsupported:
        prose += ["", "Unsupported (charged their tensor bytes only):"]
        for u in a.unsupported:
            prose += wrap(f"  {u.count} x {(u.domain + '::') if u.domain else ''}{u.op_type}: {u.reason}", width)
    return "\n".join(prose) + "\n"


FORMATS = ("table", "json", "csv")


def render(
    analysis: Analysis,
    fmt: str = "table",
    top: int = 20,
    by_op_type: bool = False,
    width: int | None = None,
    classes: bool = False,
) -> str:
    if fmt == "json":
        return to_json(analysis)
    if fmt == "csv":
        return to_csv(analysis)
    return to_table(analysis, top=top, by_op_type=by_op_type, width=width, classes=classes)
