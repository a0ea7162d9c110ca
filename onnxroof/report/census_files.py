"""Census files: CSV, JSON or Parquet by the extension, written atomically, read back to resume or to plot, and
rewritten as rows arrive (``Checkpoint``) so that a census stopped midway keeps what it had done.

Parquet needs pyarrow, an optional extra (``pip install 'onnxroof[parquet]'``): its columns take FIELDS' types
(string, int64, float64, bool), every one nullable.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from onnxroof.atomic import write_bytes, write_text
from onnxroof.errors import UserError
from onnxroof.report.census import parse_csv, parse_json, render_census, typed_row
from onnxroof.report.format import format_by_extension
from onnxroof.whatif.census import FIELDS, Key, ordered

__all__ = [
    "CHECKPOINT_ROWS",
    "CHECKPOINT_S",
    "FORMATS",
    "PARQUET_HINT",
    "Checkpoint",
    "census_format",
    "read_census",
    "require_parquet",
    "write_census",
]

FORMATS: dict[str, str] = {".csv": "csv", ".json": "json", ".parquet": "parquet"}
PARQUET_HINT = "pip install 'onnxroof[parquet]'"
CHECKPOINT_S = 5.0  # a census file is rewritten at most this many seconds after a row arrives
CHECKPOINT_ROWS = 500  # or as soon as this many rows have arrived since the last write

Row = dict[str, Any]


def census_format(path: str | os.PathLike[str]) -> str:
    """The format a census file's extension names; a UserError for any other."""
    return format_by_extension(path, FORMATS, "census")


def require_parquet() -> tuple[Any, Any]:
    """pyarrow and pyarrow.parquet; a UserError saying how to install them where they are missing."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise UserError("writing or reading Parquet needs pyarrow, which is not installed", PARQUET_HINT) from None
    return pyarrow, pyarrow.parquet


def read_census(path: str | os.PathLike[str]) -> list[Row]:
    """The rows of a census file, each of every field; a UserError for a file that is not one."""
    fmt, where = census_format(path), os.fspath(path)
    if fmt == "parquet":
        _, parquet = require_parquet()
        try:
            records = parquet.read_table(where).to_pylist()
        except Exception as exc:  # pyarrow raises ArrowInvalid and others for a file that is not Parquet
            raise UserError(
                f"{where} is not a census output (not Parquet: {type(exc).__name__})",
                "'onnxroof census -o FILE' writes one; to replace this file with a census, rerun that with --force",
            ) from None
        return [typed_row(r, where) for r in records]
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {where}: {exc}", "check the file, or write the census elsewhere") from None
    return parse_csv(text, where) if fmt == "csv" else parse_json(text, where)


def write_census(path: str | os.PathLike[str], rows: Sequence[Row]) -> None:
    """``rows`` to ``path`` in the format its extension names, atomically."""
    fmt = census_format(path)
    if fmt != "parquet":
        write_text(path, render_census(rows, fmt))
        return
    arrow, parquet = require_parquet()
    types = {str: arrow.string(), int: arrow.int64(), float: arrow.float64(), bool: arrow.bool_()}
    schema = arrow.schema([(name, types[kind]) for name, kind in FIELDS.items()])
    buffer = io.BytesIO()
    parquet.write_table(arrow.Table.from_pylist([{k: r.get(k) for k in FIELDS} for r in rows], schema=schema), buffer)
    write_bytes(path, buffer.getvalue())


class Checkpoint:
    """A census file as its rows arrive: the rows kept from before and every row added, in the planned order,
    rewritten whole and atomically once ``interval_s`` seconds have passed since the last write or ``every`` rows
    have arrived, and at ``close``. A reader, or a census that resumes, sees the file as of the last write."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        kept: Sequence[Row],
        planned: Sequence[Key],
        interval_s: float = CHECKPOINT_S,
        every: int = CHECKPOINT_ROWS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.rows: list[Row] = list(kept)
        self.planned = planned
        self.interval_s, self.every, self.clock = interval_s, every, clock
        self.pending = 0
        self.writes = 0
        self.last = clock()

    def add(self, rows: Sequence[Row]) -> None:
        self.rows += rows
        self.pending += len(rows)
        if self.pending >= self.every or (self.pending and self.clock() - self.last >= self.interval_s):
            self.write()

    def write(self) -> None:
        self.rows = ordered(self.rows, self.planned)
        write_census(self.path, self.rows)
        self.pending, self.writes, self.last = 0, self.writes + 1, self.clock()

    def close(self) -> None:
        """The last write, whatever is pending (the file is written even where nothing new arrived)."""
        self.write()
