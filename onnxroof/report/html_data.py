"""The data the report page's script reads: every layer of every analysis as compact rows, in one JSON document
that is safe to place inside a <script> element whatever the layer names hold."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from onnxroof.predict.analysis import Analysis, NodeResult
from onnxroof.report.format import short_op

if TYPE_CHECKING:
    from onnxroof.ort.validate import Validation

__all__ = ["COLUMNS", "MEASURED_COLUMNS", "page_data", "script_json"]

# One row per layer; the page's script reads the fields by these names (see assets/report.js).
COLUMNS = (
    "index",  # position in the graph's execution order
    "name",
    "op",  # op type, with an abbreviated domain when it has one
    "precision",
    "flops",
    "bytes",  # read + written
    "params",
    "intensity",  # FLOP per byte
    "bound",
    "predicted_s",
    "share",  # of the model's summed node time
    "supported",
)
MEASURED_COLUMNS = ("measured_s", "kernel")  # appended to each row where the analysis was measured

_SIGNIFICANT = 6  # digits kept of each number: the page shows three, the rest keeps sorting exact enough


def _number(value: float) -> float | int | None:
    """A float trimmed to a few significant digits (the JSON stays small); None for NaN or infinity."""
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return None
    trimmed = float(f"{value:.{_SIGNIFICANT}g}")
    return int(trimmed) if trimmed.is_integer() and abs(trimmed) < 2**53 else trimmed


def _row(index: int, node: NodeResult, total_s: float) -> list[Any]:
    c, p = node.cost, node.prediction
    op = short_op(f"{node.domain}::{node.op_type}" if node.domain else node.op_type)
    return [
        index,
        node.name,
        op,
        p.precision,
        _number(c.flops),
        _number(c.bytes_read + c.bytes_written),
        c.params,
        _number(c.arithmetic_intensity),
        p.bound,
        _number(p.predicted_time_s),
        _number(p.predicted_time_s / total_s) if total_s else 0,
        node.supported,
    ]


def _analysis_data(analysis: Analysis, measured: Mapping[str, tuple[float, str]] | None) -> dict:
    total_s = sum(n.prediction.predicted_time_s for n in analysis.nodes)
    rows = []
    for index, node in enumerate(analysis.nodes):
        row = _row(index, node, total_s)
        if measured is not None:
            seconds, kernel = measured.get(node.name, (None, None))
            row += [None if seconds is None else _number(seconds), kernel]
        rows.append(row)
    return {
        "label": f"{analysis.model} on {analysis.device.label()}",
        "device": analysis.device.key,
        "measured": measured is not None,
        "rows": rows,
    }


def page_data(analyses: Sequence[Analysis], validation: Validation | None) -> dict[str, Any]:
    """Everything the script needs: the column names and, per analysis, its layers as rows (plus the measured
    columns for the analysis that ``validation`` measured)."""
    # A kernel that computes several nodes puts its time on one and 0 on the others (Validation.measured_by_node).
    measured = validation.measured_by_node() if validation is not None else None
    return {
        "columns": list(COLUMNS),
        "measured_columns": list(MEASURED_COLUMNS),
        "analyses": [
            _analysis_data(a, measured if validation is not None and validation.measured(a) else None) for a in analyses
        ],
    }


# Characters that could end a <script> element or open a comment inside it, and the two line terminators that
# JavaScript source does not allow in strings, written as JSON escapes that JSON.parse reads back unchanged.
_SCRIPT_TABLE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def script_json(data: Any) -> str:
    """``data`` as JSON that can sit between <script type="application/json"> and </script>: no "<", ">" or "&"
    appears in it literally, so neither "</script>" nor "<!--" in a layer name can end or alter the element."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.translate(_SCRIPT_TABLE)
