"""Terminal table of a validation: the model's predicted and measured latency, agreement, and each kernel."""

from __future__ import annotations

from onnxroof.ort.validate import Validation
from onnxroof.report.format import TABLE_WIDTH, clip, seconds, short_op


def validation_table(v: Validation, top: int = 20) -> str:
    """Header with the model's error and the per-kernel agreement, then the kernels by measured share."""
    a, m, s = v.analysis, v.measurement, v.agreement
    graph = "onnxruntime's optimized graph" if a.graph == "onnxruntime-optimized" else "the graph as exported"
    lines = [
        clip(f"{a.model} on {a.device.label()} [{a.device.key}], predicted on {graph}", TABLE_WIDTH),
        clip(f"measured on {m.provider}, {m.threads} thread(s), optimization level {m.opt_level}", TABLE_WIDTH),
        "",
        f"  model: measured {seconds(v.measured_time_s)} (median of {m.repeat} samples; fastest eighth "
        f"{seconds(v.measured_fast_s)}), predicted {seconds(v.predicted_at_speed_s)}, error {v.model_error:+.1%}",
    ]
    if v.machine_speed is not None:
        lines += [
            f"  machine speed while timed / at calibration: {v.machine_speed:.2f}x (a reference block between samples)",
            f"  predictions are scaled to that speed; as calibrated the model's is {seconds(v.predicted_time_s)}, "
            f"error {v.uncorrected_error:+.1%}",
        ]
    if s.count:
        rho = f"{s.spearman:.3f}" if s.spearman is not None else "n/a"
        lines.append(
            f"  kernels: {s.count} compared, Spearman {rho}, median |error| {s.median_abs_error:.1%}, "
            f"{s.within_25_percent:.0%} within 25%"
        )
    total = sum(k.measured_time_s for k in v.kernels) or 1.0
    lines += [
        "",
        f"  {'kernel':<26} {'op':<16} {'measured':>9} {'share':>6} {'predicted':>9} {'ratio':>6}  {'bound':<8} why",
    ]
    for k in v.kernels[: top or None]:
        ratio = f"{k.ratio:.2f}" if k.ratio is not None else "-"
        flag = " (floor)" if k.floor_dominated else ""
        lines.append(
            clip(
                f"  {clip(k.name, 26):<26} {clip(short_op(k.op_type), 16):<16} {seconds(k.measured_time_s):>9} "
                f"{k.measured_time_s / total:>6.1%} {seconds(k.predicted_time_s):>9} {ratio:>6}  {k.bound:<8} "
                f"{k.explanation}{flag}",
                TABLE_WIDTH,
            )
        )
    if len(v.kernels) > (top or len(v.kernels)):
        lines.append(f"  ... {len(v.kernels) - top} more (--top 0 lists all; --format json has every kernel and node)")
    worst = [f"{k.name} ({k.ratio:.2f}x)" for k in v.worst() if k.ratio is not None]
    if worst:
        lines += ["", clip("  worst mispredictions by time: " + ", ".join(worst), TABLE_WIDTH)]
    if v.profile.unmapped:
        lines.append(
            f"  {len(v.profile.unmapped)} graph node(s) not run by onnxruntime (folded or removed): see --format json"
        )
    return "\n".join(lines) + "\n"
