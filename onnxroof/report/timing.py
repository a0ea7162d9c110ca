"""Terminal tables for measurements: the whole-model timing and, when profiled, the slowest kernels."""

from __future__ import annotations

from onnxroof.ort.measure import Measurement
from onnxroof.ort.profile import NodeProfile
from onnxroof.report.format import TABLE_WIDTH, clip, seconds, short_op


def measurement_table(m: Measurement, kernels: NodeProfile | None = None, top: int = 20) -> str:
    """The timing summary, then (with a profile) the ``top`` slowest kernels and what each covers."""
    threads = f"{m.threads} thread{'s' if m.threads != 1 else ''}"
    lines = [
        clip(f"{m.model} on {m.provider}, {threads}, optimization level {m.opt_level}", TABLE_WIDTH),
        f"  median {seconds(m.median_s)}   min {seconds(m.min_s)}   p90 {seconds(m.p90_s)}   max {seconds(m.max_s)}"
        f"   fast {seconds(m.fast_s)}",
        f"  {m.repeat} samples of {m.runs_per_sample} run{'s' if m.runs_per_sample != 1 else ''} "
        f"after {m.warmup} warm-up runs",
    ]
    lines += [clip(f"  note: {n}", TABLE_WIDTH) for n in m.notes]
    if kernels is not None:
        lines += ["", *_kernel_lines(kernels, top)]
    return "\n".join(lines) + "\n"


def _kernel_lines(p: NodeProfile, top: int) -> list[str]:
    timed = [(n, n.median_s) for n in p.nodes if n.median_s is not None]
    total = sum(median for _, median in timed) or 1.0
    shown = sorted(timed, key=lambda item: -item[1])[: top or None]
    lines = [
        f"  kernels: {len(timed)} timed, sum {seconds(p.kernel_sum_s)} of a {seconds(p.run_median_s)} profiled run; "
        f"{len(p.unmapped)} graph node(s) not run",
        "",
        f"  {'kernel':<34} {'op':<22} {'time':>9} {'share':>6}  covers",
    ]
    for n, median in shown:
        op = short_op(f"{n.domain}::{n.op_type}" if n.domain else n.op_type)
        flags = " engine-only" if n.engine_only else ""
        flags += " floor" if n.floor_dominated else ""
        covers = f"{len(n.covers)} node{'s' if len(n.covers) != 1 else ''}{flags}"
        lines.append(
            clip(
                f"  {clip(n.name, 34):<34} {clip(op, 22):<22} {seconds(median):>9} {median / total:>6.1%}  {covers}",
                TABLE_WIDTH,
            )
        )
    if len(timed) > len(shown):
        lines.append(f"  ... {len(timed) - len(shown)} more (--top 0 lists all, --format json gives every kernel)")
    if any(n.floor_dominated for n, _ in timed):
        lines.append("  floor: under a few microseconds, dominated by per-kernel dispatch rather than the op's work")
    return lines
