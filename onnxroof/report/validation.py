"""Terminal table of a validation: the model's predicted and measured latency, agreement, and each kernel."""

from __future__ import annotations

from onnxroof.ort.validate import Validation
from onnxroof.report.format import Column, seconds, short_op, table, wrap

KERNEL_COLUMNS = (
    Column("kernel", cut=True),
    Column("op", cut=True),
    Column("measured", right=True),
    Column("share", right=True),
    Column("predicted", right=True),
    Column("ratio", right=True),
    Column("bound"),
    Column("why", wrap=True),
)


def validation_table(v: Validation, top: int = 20, width: int | None = None) -> str:
    """Header with the model's error and the per-kernel agreement, then the compared kernels by measured share,
    within ``width`` columns (None: no limit; names are cut in the middle, prose wrapped, nothing else cut)."""
    a, m, s = v.analysis, v.measurement, v.agreement
    graph = "onnxruntime's optimized graph" if a.graph == "onnxruntime-optimized" else "the graph as exported"
    compared = v.compared
    prose = [
        f"{a.model} on {a.device.label()} [{a.device.key}], predicted on {graph}",
        f"measured on {m.provider}, {m.threads} thread(s), optimization level {m.opt_level}",
        "",
        f"  model: measured {seconds(v.measured_time_s)} (median of {m.repeat} samples; fastest eighth "
        f"{seconds(v.measured_fast_s)}), predicted {seconds(v.predicted_at_speed_s)}, error {v.model_error:+.1%}",
    ]
    if v.machine_speed is not None:
        prose.append(
            f"  the machine ran at {v.machine_speed:.2f}x its calibrated speed while timed (a reference block "
            "between the samples): predictions are scaled to that speed. Unscaled, the calibrated prediction is "
            f"{seconds(v.predicted_time_s)} ({v.uncorrected_error:+.1%} against the measurement)"
        )
    if compared:
        rho = f"{s.spearman:.3f}" if s.spearman is not None else "n/a"
        median = f"{s.median_abs_error:.1%}" if s.median_abs_error is not None else "n/a"
        within = f"{s.within_25_percent:.0%}" if s.within_25_percent is not None else "n/a"
        prose.append(
            f"  kernels: {len(compared)} compared, Spearman {rho}, median |error| {median}, {within} within 25%"
        )
    lines = [line for text in prose for line in wrap(text, width)]
    total = sum(k.measured_time_s for k in v.kernels) or 1.0
    shown = compared[: top or None]
    rows = [
        [
            k.name,
            short_op(k.op_type),
            seconds(k.measured_time_s),
            f"{k.measured_time_s / total:.1%}",
            seconds(k.predicted_time_s),
            f"{k.ratio:.2f}" if k.ratio is not None else "-",
            k.bound,
            k.explanation + (" (floor)" if k.floor_dominated else ""),
        ]
        for k in shown
    ]
    lines += ["", *table(KERNEL_COLUMNS, rows, width, indent="  ")]
    if len(compared) > len(shown):
        more = f"  ... {len(compared) - len(shown)} more (--top 0 lists all; --format json has every kernel and node)"
        lines += wrap(more, width)
    lines += _not_compared(v, width)
    worst = [f"{k.name} ({k.ratio:.2f}x)" for k in v.worst() if k.ratio is not None]
    if worst:
        lines += ["", *wrap("  worst mispredictions by time: " + ", ".join(worst), width)]
    if v.profile.unmapped:
        lines += wrap(
            f"  {len(v.profile.unmapped)} graph node(s) not run by onnxruntime (folded or removed): see --format json",
            width,
        )
    return "\n".join(lines) + "\n"


def _not_compared(v: Validation, width: int | None) -> list[str]:
    """The timed kernels left out of the comparison, counted by why (each is in --format json's kernels)."""
    left = len(v.kernels) - len(v.compared)
    if not left:
        return []
    shape_only = sum(k.shape_only for k in v.kernels)
    reasons = [f"{shape_only} shape-only (no data moved: their time is the profiler's own)"] if shape_only else []
    if left > shape_only:
        reasons.append(f"{left - shape_only} engine-only (the exported graph has no node for them)")
    return wrap(f"  {left} more kernel(s) timed, not compared: " + "; ".join(reasons), width)
