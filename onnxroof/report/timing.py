"""Terminal tables for measurements: the whole-model timing and, when profiled, the slowest kernels."""

from __future__ import annotations

from onnxroof.ort.measure import Measurement
from onnxroof.ort.profile import NodeProfile
from onnxroof.report.format import Column, seconds, short_op, table, wrap

KERNEL_COLUMNS = (
    Column("kernel", cut=True),
    Column("op", cut=True),
    Column("time", right=True),
    Column("share", right=True),
    Column("covers"),
)


def measurement_table(
    m: Measurement, kernels: NodeProfile | None = None, top: int = 20, width: int | None = None
) -> str:
    """The timing summary, then (with a profile) the ``top`` slowest kernels and what each covers, within
    ``width`` columns (None: no limit; names are cut in the middle, prose wrapped, nothing else cut)."""
    threads = f"{m.threads} thread{'s' if m.threads != 1 else ''}"
    prose = [
        f"{m.model} on {m.provider}, {threads}, optimization level {m.opt_level}",
        f"  median {seconds(m.median_s)}   min {seconds(m.min_s)}   p90 {seconds(m.p90_s)}   max {seconds(m.max_s)}"
        f"   fast {seconds(m.fast_s)}",
        f"  {m.repeat} samples of {m.runs_per_sample} run{'s' if m.runs_per_sample != 1 else ''} "
        f"after {m.warmup} warm-up runs",
        *(f"  note: {n}" for n in m.notes),
    ]
    lines = [line for text in prose for line in wrap(text, width)]
    if kernels is not None:
        lines += ["", *_kernel_lines(kernels, top, width)]
    return "\n".join(lines) + "\n"


def _kernel_lines(p: NodeProfile, top: int, width: int | None) -> list[str]:
    timed = [(n, n.median_s) for n in p.nodes if n.median_s is not None]
    total = sum(median for _, median in timed) or 1.0
    shown = sorted(timed, key=lambda item: -item[1])[: top or None]
    lines = wrap(
        f"  kernels: {len(timed)} timed, sum {seconds(p.kernel_sum_s)} of a {seconds(p.run_median_s)} profiled run; "
        f"{len(p.unmapped)} graph node(s) not run",
        width,
    )
    rows = []
    for n, median in shown:
        flags = " engine-only" if n.engine_only else ""
        flags += " floor" if n.floor_dominated else ""
        covers = f"{len(n.covers)} node{'s' if len(n.covers) != 1 else ''}{flags}"
        op = short_op(f"{n.domain}::{n.op_type}" if n.domain else n.op_type)
        rows.append([n.name, op, seconds(median), f"{median / total:.1%}", covers])
    lines += ["", *table(KERNEL_COLUMNS, rows, width, indent="  ")]
    if len(timed) > len(shown):
        lines += wrap(
            f"  ... {len(timed) - len(shown)} more (--top 0 lists all, --format json gives every kernel)", width
        )
    if any(n.floor_dominated for n, _ in timed):
        lines += wrap(
            "  floor: under a few microseconds, dominated by per-kernel dispatch rather than the op's work", width
        )
    return lines
