"""What a rewrite did: the passes, a line per change, the output comparison, and the files written."""

from __future__ import annotations

import json
from collections.abc import Sequence

from onnxroof.report.format import wrap
from onnxroof.whatif.rewrite import Rewritten

__all__ = ["render_rewrite"]

GRAPH_ONLY = (
    "graph-only: the weights are absent (shapes without values); analyze works on it, measure fills random weights, "
    "and its outputs mean nothing"
)


def render_rewrite(done: Rewritten, written: Sequence[str], fmt: str = "table", width: int | None = None) -> str:
    """The rewrite as text, prose wrapped within ``width`` columns (None: no limit), or as JSON (``to_dict`` plus
    the files written)."""
    if fmt == "json":
        return json.dumps({**done.to_dict(), "written": list(written)}, indent=2) + "\n"
    result = done.result
    lines = [f"{done.source}: {', '.join(result.passes)}" + ("" if result.changed else " (nothing changed)")]
    lines += [f"  {note}" for note in result.notes]
    if done.differences:
        lines.append("outputs against the original, on the same random inputs:")
        for d in done.differences:
            flags = "".join(f", {count} new {kind}" for kind, count in (("NaN", d.nan), ("inf", d.inf)) if count)
            lines.append(f"  {d.name}: max |difference| {d.max_abs:.3g} (relative {d.max_rel:.3g}){flags}")
    elif done.comparison_skipped:
        lines.append(f"outputs not compared: {done.comparison_skipped}")
    if result.graph_only:
        lines.append(GRAPH_ONLY)
    lines.append("wrote " + ", ".join(written))
    return "\n".join(line for text in lines for line in wrap(text, width)) + "\n"
