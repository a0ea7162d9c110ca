"""Terminal table for peak memory: onnxruntime's memory configurations side by side."""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.ort.memory import PeakMemory
from onnxroof.report.format import Column, table, wrap


def mib(value: int) -> str:
    """Bytes as MiB with one decimal: 67108864 -> '64.0 MiB'."""
    return f"{value / 2**20:.1f} MiB"


def configuration(m: PeakMemory) -> str:
    """The memory settings a result was measured with, as the table names them."""
    if m.arena and m.pattern:
        return "arena + pattern (default)"
    if not m.arena and not m.pattern:
        return "no arena, no pattern"
    return "arena only" if m.arena else "pattern only"


COLUMNS = (
    Column("configuration"),
    *(Column(h, right=True) for h in ("session", "runs add", "peak adds", "peak RSS")),
)


def memory_table(results: Sequence[PeakMemory], width: int | None = None) -> str:
    """One row per configuration: what the session, the runs and the two together added to the process, and its
    peak resident set; then the baseline, what the peak covers, and the notes (each once), prose wrapped within
    ``width`` columns (None: no limit)."""
    if not results:
        return ""
    first = results[0]
    threads = f"{first.threads} thread{'s' if first.threads != 1 else ''}"
    runs = f"{first.runs} run{'s' if first.runs != 1 else ''}"
    rows = [
        [configuration(m), mib(m.session_bytes), mib(m.run_added_bytes), mib(m.peak_added_bytes), mib(m.peak_rss_bytes)]
        for m in results
    ]
    lines = [
        *wrap(f"peak memory of {first.model} on the CPU provider, {threads}, {runs} in a fresh process", width),
        *table(COLUMNS, rows, width, indent="  "),
    ]
    baselines = " / ".join(mib(m.baseline_bytes) for m in results)
    prose = [f"  before the session (Python, onnxruntime, inputs): {baselines}"]
    prose += [f"  peak: {scope}" for scope in sorted({_scope(m) for m in results})]
    prose += [f"  note: {n}" for n in dict.fromkeys(n for m in results for n in m.notes)]
    lines += [line for text in prose for line in wrap(text, width)]
    return "\n".join(lines) + "\n"


def _scope(m: PeakMemory) -> str:
    """What a result's peak covers, in words."""
    if m.source != "VmHWM":
        return f"{m.source}, the process's peak so far"
    return "VmHWM over the runs alone" if m.peak_reset else "VmHWM over the session's creation and the runs"
