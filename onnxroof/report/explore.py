"""The rewrites explore found, ranked by predicted speedup, with measured speedups where they were timed."""

from __future__ import annotations

import json

from onnxroof.report.format import TABLE_WIDTH, clip, seconds
from onnxroof.whatif.explore import EFFECTS, Exploration

__all__ = ["render_explore"]


def render_explore(e: Exploration, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(e.to_dict(), indent=2) + "\n"
    lines = [
        clip(f"{e.model} on {e.device} ({e.graph} graph): predicted {seconds(e.baseline_s)} as it is", TABLE_WIDTH),
        "",
        f"{'rewrite':14}{'layers':>7}{'after':>11}{'speedup':>9}{'here: predicted':>17}{'measured':>10}  bound after",
    ]
    refused = []
    for c in e.candidates:
        if c.refused:
            refused.append(c)
            continue
        host = f"{c.host_speedup:.2f}x" if c.host_speedup is not None else "-"
        measured = f"{c.measured_speedup:.2f}x" if c.measured_speedup is not None else "-"
        lines.append(
            f"{c.name:14}{len(c.layers):>7}{seconds(c.after_s):>11}{c.predicted_speedup:>8.2f}x{host:>17}"
            f"{measured:>10}  {c.bound_after}"
        )
    lines += ["", "what each rewrite does to the outputs, and the command that builds it:"]
    lines += [
        f"  {c.name:14}{EFFECTS.get(c.name, '')}; onnxroof rewrite MODEL -o OUT {c.command}"
        for c in e.candidates
        if not c.refused
    ]
    if refused:
        lines += ["", "does not apply:"]
        lines += [clip(f"  {c.name:14}{c.refused}", TABLE_WIDTH) for c in refused]
    return "\n".join(lines) + "\n"
