"""Deploy-time fit as text or JSON: one summary line first (PASS or FAIL with the numbers), then the checks, the
largest fitting batch, or the ranking of devices."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from onnxroof.predict.training import PAPER_004_LATENCY_RATIOS
from onnxroof.report.format import Column, seconds, si, table, wrap
from onnxroof.units import in_unit
from onnxroof.whatif.fit import Check, DeviceFit, Fit, MaxBatch, MemoryDetail

__all__ = ["check_text", "render_fit", "render_max_batch", "render_ranking", "summary"]


def _shown(value: float, check: Check) -> str:
    """A check's figure in the unit its budget was written in, else in the unit that reads best."""
    if check.budget_unit is not None:
        return in_unit(value, check.budget_unit)
    return seconds(value) if check.unit == "s" else si(value, "B")


def check_text(check: Check) -> str:
    """A check as text: its figure against its budget, in the budget's unit."""
    if check.budget is None:
        return f"{check.name} {_shown(check.value, check)} (no budget)"
    return f"{check.name} {_shown(check.value, check)} {'<=' if check.passed else '>'} {_shown(check.budget, check)}"


def summary(f: Fit) -> str:
    """PASS or FAIL, the model, device, batch and precision, and each check with its numbers; a latency whose
    totals leave nodes out says it is a lower bound."""
    lower = f" (INCOMPLETE, a lower bound: {f.uncounted} node(s) not counted in full)" if not f.complete else ""
    checks = "; ".join(check_text(c) + (lower if c.name == "latency" else "") for c in f.checks)
    return f"{'PASS' if f.passed else 'FAIL'} {f.model} on {f.device}, batch {f.batch}, {f.precision}: {checks}"


def render_fit(f: Fit, fmt: str = "table", width: int | None = None) -> str:
    """The fit as text (its PASS or FAIL line whole, the rest wrapped within ``width`` columns, None: no limit) or
    as JSON."""
    if fmt == "json":
        return json.dumps(f.to_dict(), indent=2) + "\n"
    lines: list[str] = []
    if f.memory is not None:
        lines += _memory_lines(f.memory)
    lines += [f"  note: {n}" for n in f.notes]
    if f.training is not None:
        lines += _training_lines(f.training)
    return "\n".join([summary(f), *(part for line in lines for part in wrap(line, width))]) + "\n"


def _memory_lines(detail: MemoryDetail) -> list[str]:
    """The graph's need in the order that counts, its peak's node and the largest live tensors there, and the
    stored order, the best order found and paper 004's footprint beside it."""
    e = detail.estimate
    order = "onnxruntime's order" if detail.engine_order else "stored order"
    live = ", ".join(f"{t.name} {si(t.bytes, 'B')}" for t in e.live_at_peak[:4])
    return [
        f"  graph needs {si(e.total_bytes, 'B')} in {order}: weights {si(e.weights_bytes, 'B')} + peak live "
        f"{si(e.peak_activation_bytes, 'B')} at {e.peak_node} ({live})",
        f"  stored order {si(detail.stored_peak_bytes, 'B')}, best order found {si(detail.best_peak_bytes, 'B')}, "
        f"paper 004's footprint (no reuse) {si(e.footprint_bytes, 'B')}",
    ]


def _training_lines(step: Any) -> list[str]:
    """The step's parts, its memory, and backward:forward FLOPs by op type beside paper 004's measured ratio."""
    m = step.memory
    lines = [
        f"  step {seconds(step.step_time_s)} = forward {seconds(step.forward_time_s)} + backward "
        f"{seconds(step.backward_time_s)} + {step.optimizer} update {seconds(step.optimizer_time_s)}",
        f"  memory {si(m.total, 'B')} = weights {si(m.weights, 'B')} + gradients {si(m.gradients, 'B')}"
        f" + master weights {si(m.master_weights, 'B')} + optimizer state {si(m.optimizer_state, 'B')}"
        f" + activations kept {si(m.activations, 'B')}",
        f"  backward:forward FLOPs {step.backward_flops / step.forward_flops:.2f} for the model; paper 004 measures "
        + ", ".join(f"{k} {v:.2f}" for k, v in PAPER_004_LATENCY_RATIOS.items())
        + " (latency, whole model)",
        "  by op type:  " + ", ".join(f"{r.op_type} {r.ratio:.2f}" for r in step.ratios),
    ]
    lines += [f"  note: {n}" for n in step.notes]
    return lines


def render_max_batch(m: MaxBatch, device: str, fmt: str = "table", width: int | None = None) -> str:
    """The largest fitting batch: a PASS or FAIL line, whole, then the fits on either side of it, wrapped within
    ``width`` columns (None: no limit); or JSON."""
    if fmt == "json":
        return json.dumps({"device": device, **m.to_dict()}, indent=2) + "\n"
    if m.best is None:
        failing = m.first_failing
        tail = f": {summary(failing)}" if failing is not None else ""
        return f"FAIL no batch fits on {device} ({m.stopped_by} at batch 1){tail}\n"
    lines = [f"  at {m.best.batch}: {summary(m.best)}"]
    if m.first_failing is not None:
        lines.append(f"  at {m.first_failing.batch}: {summary(m.first_failing)}")
    head = f"PASS largest batch on {device}: {m.best.batch} ({m.stopped_by} stops batch {_next(m)})"
    return "\n".join([head, *(part for line in lines for part in wrap(line, width))]) + "\n"


def _next(m: MaxBatch) -> str:
    return str(m.first_failing.batch) if m.first_failing is not None else "none"


RANKING_COLUMNS = (
    Column("device", cut=True),
    Column("fits", right=True),
    Column("latency", right=True),
    Column("memory", right=True),
    Column("max batch", right=True),
    Column("samples/s", right=True),
    Column("stopped by"),
)


def render_ranking(ranked: Sequence[DeviceFit], fmt: str = "table", width: int | None = None) -> str:
    """Devices ranked: a PASS or FAIL line, whole, then a row per device within ``width`` columns (None: no
    limit; device names cut in the middle, nothing else), a latency whose totals leave nodes out marked; or
    JSON."""
    if fmt == "json":
        data: list[dict[str, Any]] = [d.to_dict() for d in ranked]
        return json.dumps({"devices": data}, indent=2) + "\n"
    fitting = sum(d.fit.passed for d in ranked)
    first = ranked[0].fit if ranked else None
    head = f"{'PASS' if fitting else 'FAIL'} {fitting} of {len(ranked)} devices fit" + (
        f"; fastest: {first.device} ({seconds(first.latency_s)})" if first is not None and first.passed else ""
    )
    rows = [
        [
            d.fit.device,
            "yes" if d.fit.passed else "NO",
            seconds(d.fit.latency_s) + ("" if d.fit.complete else " *"),
            si(d.fit.memory_bytes, "B"),
            str(d.largest.batch),
            si(d.throughput),
            d.largest.stopped_by,
        ]
        for d in ranked
    ]
    lines = [head, *table(RANKING_COLUMNS, rows, width, indent="  ")]
    if any(not d.fit.complete for d in ranked):
        note = (
            "  * INCOMPLETE: nodes not counted in full, so the latency is a lower bound (onnxroof analyze names them)"
        )
        lines += wrap(note, width)
    return "\n".join(lines) + "\n"
