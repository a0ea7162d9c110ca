"""A census as a table, JSON or CSV, and the rows read back from JSON or CSV text (a census file resumes).

JSON is ``{"rows": [ROW, ...]}``; CSV has a header of FIELDS' names and a line per row, an empty cell for a
value that is None, ``true``/``false`` for a fit, numbers as Python writes them (a float reads back exactly). Both
read back to rows of every field with the values of FIELDS' types.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from onnxroof.errors import UserError
from onnxroof.report.format import Column, seconds, si, table, wrap
from onnxroof.whatif.census import FIELDS, KEY

__all__ = ["TEXT_FORMATS", "parse_csv", "parse_json", "render_census", "typed_row"]

TEXT_FORMATS: tuple[str, ...] = ("table", "json", "csv")
BOOLEANS: dict[str, bool] = {"true": True, "false": False}

Row = Mapping[str, Any]


def render_census(rows: Sequence[Row], fmt: str = "table", width: int | None = None) -> str:
    """``fmt`` is table, json or csv. The table lays out within ``width`` columns (None: no limit), model and
    device names cut in the middle, errors wrapped; FLOPs marked where a row's totals leave nodes out."""
    if fmt == "json":
        return json.dumps({"rows": [{k: r.get(k) for k in FIELDS} for r in rows]}, indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(FIELDS)
        writer.writerows([_cell(r.get(k)) for k in FIELDS] for r in rows)
        return out.getvalue()
    return _table(rows, width)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


COLUMNS = (
    Column("model", cut=True),
    Column("device", cut=True),
    Column("batch", right=True),
    Column("precision"),
    Column("time", right=True),
    Column("samples/s", right=True),
    Column("FLOPs", right=True),
    Column("params", right=True, optional=True),
    Column("memory", right=True),
    Column("fits"),
    Column("bound"),
)
ERROR_COLUMN = Column("error", wrap=True)


def _table(rows: Sequence[Row], width: int | None) -> str:
    errors = any(r.get("error") for r in rows)
    columns = (*COLUMNS, ERROR_COLUMN) if errors else COLUMNS
    cells = [_table_row(r, errors) for r in rows]
    models = len({r.get("model") for r in rows})
    devices = len({r.get("device") for r in rows})
    failed = sum(bool(r.get("error")) for r in rows)
    prose = [f"{len(rows)} rows: {models} models on {devices} devices, {failed} failed"]
    if any(r.get("uncounted") for r in rows):
        prose.append("* nodes not counted in full: the row's totals are lower bounds (onnxroof analyze names them)")
    if any(r.get("fits") is None and not r.get("error") for r in rows):
        prose.append("fits -: the device lists no memory capacity")
    lines = table(columns, cells, width)
    return "\n".join([*lines, "", *(line for text in prose for line in wrap(text, width))]) + "\n"


def _table_row(r: Row, errors: bool) -> list[str]:
    batch = r.get("analyzed_batch") or r.get("batch")
    cells = [str(r.get("model")), str(r.get("device")), "-" if batch is None else str(batch), str(r.get("precision"))]
    if r.get("error"):
        cells += ["-"] * 7
    else:
        fits = r.get("fits")
        cells += [
            seconds(r["predicted_time_s"]),
            si(r["throughput_per_s"]),
            si(r["flops"]) + (" *" if r.get("uncounted") else ""),
            si(r["params"]),
            si(r["peak_memory_bytes"], "B"),
            "-" if fits is None else ("yes" if fits else "no"),
            str(r.get("bound")),
        ]
    return [*cells, str(r.get("error") or "")] if errors else cells


def typed_row(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A row of every field from ``values`` (a missing field is None), each value of its field's type: a CSV
    cell's text parsed, a JSON number made the field's int or float. A UserError naming ``where`` (the file) for a
    row that holds no key or a value of the wrong kind: the file is not a census."""
    missing = [k for k in KEY if k not in values]
    if missing:
        raise _not_a_census(where, f"no {missing[0]!r} column")
    try:
        return {name: _typed(values.get(name), kind) for name, kind in FIELDS.items()}
    except (TypeError, ValueError) as exc:
        raise _not_a_census(where, str(exc)) from None


def _typed(value: Any, kind: type) -> Any:
    if value is None or value == "":
        return None
    if kind is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() not in BOOLEANS:
            raise ValueError(f"{value!r} is not true or false")
        return BOOLEANS[str(value).lower()]
    if kind is int and isinstance(value, str):
        return int(value)
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
        raise TypeError(f"{value!r} is not a number")
    return kind(value)


def parse_csv(text: str, where: str) -> list[dict[str, Any]]:
    """The rows of a census CSV."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None:
        return []  # an empty file: a census that has no row yet
    missing = [k for k in KEY if k not in reader.fieldnames]
    if missing:
        raise _not_a_census(where, f"no {missing[0]!r} column")
    return [typed_row(values, where) for values in reader]


def parse_json(text: str, where: str) -> list[dict[str, Any]]:
    """The rows of a census JSON document."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _not_a_census(where, f"not JSON: {exc}") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise _not_a_census(where, 'no "rows" list')
    return [typed_row(r, where) for r in rows]


def _not_a_census(where: str, why: str) -> UserError:
    return UserError(
        f"{where} is not a census output ({why})",
        "'onnxroof census -o FILE' writes one; to replace this file with a census, rerun that with --force",
    )
