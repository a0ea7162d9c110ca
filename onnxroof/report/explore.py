"""The rewrites explore found, ranked by predicted speedup, with measured speedups where they were timed."""

from __future__ import annotations

import json

from onnxroof.report.format import Column, seconds, table, wrap
from onnxroof.whatif.explore import EFFECTS, Exploration

__all__ = ["render_explore"]

COLUMNS = (
    Column("rewrite"),
    Column("layers", right=True),
    Column("after", right=True),
    Column("speedup", right=True),
    Column("here: predicted", right=True),
    Column("measured", right=True),
    Column("bound after"),
)


def render_explore(e: Exploration, fmt: str = "table", width: int | None = None) -> str:
    """The candidates as a table, prose wrapped within ``width`` columns (None: no limit), or as JSON."""
    if fmt == "json":
        return json.dumps(e.to_dict(), indent=2) + "\n"
    applied = [c for c in e.candidates if not c.refused]
    refused = [c for c in e.candidates if c.refused]
    rows = [
        [
            c.name,
            str(len(c.layers)),
            seconds(c.after_s),
            f"{c.predicted_speedup:.2f}x",
            f"{c.host_speedup:.2f}x" if c.host_speedup is not None else "-",
            f"{c.measured_speedup:.2f}x" if c.measured_speedup is not None else "-",
            c.bound_after,
        ]
        for c in applied
    ]
    lines = [
        *wrap(f"{e.model} on {e.device} ({e.graph} graph): predicted {seconds(e.baseline_s)} as it is", width),
        "",
        *table(COLUMNS, rows, width),
    ]
    prose = ["", "what each rewrite does to the outputs, and the command that builds it:"]
    prose += [f"  {c.name:14}{EFFECTS.get(c.name, '')}; onnxroof rewrite MODEL -o OUT {c.command}" for c in applied]
    if refused:
        prose += ["", "does not apply:"]
        prose += [f"  {c.name:14}{c.refused}" for c in refused]
    lines += [line for text in prose for line in wrap(text, width)]
    return "\n".join(lines) + "\n"
