"""Formatting shared by the renderers: numbers in engineering units, names cut in the middle, prose wrapped,
tables laid out to a width, short op names, the format an output file's extension names.

Numbers keep three significant digits under the prefix their own size picks, never an exponent:
``si(13510) == "13.5 k"``, ``si(999.6) == "1.00 k"``, ``seconds(1000e-6) == "1.00 ms"``, ``seconds(2e-10) ==
"0.200 ns"``; a whole count under 1000 is written whole (``si(16, "FLOP") == "16 FLOP"``).

Widths: a renderer takes ``width``, the columns its lines may fill, or None for no limit (nothing cut, nothing
wrapped); ``output_width`` says which applies to the text a command prints. Within a width, names are cut in the
middle and prose is wrapped; headers, numbers and prose are never cut."""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from onnxroof.errors import UserError

__all__ = [
    "ELLIPSIS",
    "Column",
    "dims",
    "format_by_extension",
    "middle",
    "output_width",
    "seconds",
    "short_op",
    "si",
    "table",
    "wrap",
]

ELLIPSIS = "…"  # where a name was cut

# (power of ten, prefix), smallest first: SI prefixes for counts and rates, and the units of a duration.
SI_PREFIXES = ((0, ""), (3, "k"), (6, "M"), (9, "G"), (12, "T"), (15, "P"), (18, "E"))
TIME_PREFIXES = ((-9, "n"), (-6, "u"), (-3, "m"), (0, ""))


def format_by_extension(path: str | os.PathLike[str], formats: Mapping[str, str], what: str) -> str:
    """The format ``path``'s extension names in ``formats`` (``".png" -> "png"``, any case); a UserError naming
    ``what`` the formats are of (a figure, a census) and the extensions to use otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in formats:
        raise UserError(
            f"{path}: the extension {suffix or '(none)'} names no {what} format",
            f"end the file name in one of {', '.join(formats)}",
        )
    return formats[suffix]


def output_width(output: str | None = None) -> int | None:
    """The width a command's text is laid out in: the terminal's columns when it goes to a terminal, None (no
    limit) when it goes to a file (``output``) or stdout is a pipe or a file."""
    if output is not None or not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def engineering(value: float, unit: str, prefixes: Sequence[tuple[int, str]]) -> str:
    """``value`` to three significant digits under the largest prefix not above it (the smallest below them
    all): 999.6 rounds to 1.00e3 first, so it reads "1.00 k", never "1e+03". A whole number that needs no prefix
    (a count of FLOPs or nodes under 1000) is written whole."""
    if value == 0:
        return f"0 {unit}".rstrip()
    if not math.isfinite(value):
        return f"{value} {unit}".rstrip()
    if prefixes[0][0] == 0 and abs(value) < 999.5 and value == int(value):
        return f"{int(value)} {unit}".rstrip()
    mantissa, exponent = f"{value:.2e}".split("e")  # rounded once, to three significant digits
    power, prefix = next(((p, x) for p, x in reversed(prefixes) if p <= int(exponent)), prefixes[0])
    shift = int(exponent) - power  # 0 to 2 within the prefixes' range; more above, negative below
    return f"{float(mantissa) * 10**shift:.{max(0, 2 - shift)}f} {prefix}{unit}".rstrip()


def si(value: float, unit: str = "") -> str:
    """A count or rate with an SI prefix: 1.23e9 -> '1.23 G' + unit, 512 -> '512', 0.0227 -> '0.0227'."""
    return engineering(value, unit, SI_PREFIXES)


def seconds(value: float) -> str:
    """A duration in s, ms, us or ns: 1.20 s, 3.40 ms, 56.0 us, 7.80 ns; '0 s' for nothing."""
    return engineering(value, "s", TIME_PREFIXES)


def dims(shape: Sequence[int] | None) -> str:
    """A shape as a table shows it: 1x64x56x56, 'scalar' for rank 0, '?' when unknown."""
    if shape is None:
        return "?"
    return "x".join(map(str, shape)) if len(shape) else "scalar"


_DOMAIN_ABBREVIATIONS = (("com.microsoft.nchwc::", "nchwc::"), ("com.microsoft::", "ms::"))


def short_op(op: str) -> str:
    """An op type with onnxruntime's long domains abbreviated for the table (JSON and CSV keep them whole)."""
    for long, short in _DOMAIN_ABBREVIATIONS:
        if op.startswith(long):
            return short + op[len(long) :]
    return op


def middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle where it is longer: its start and, at twice
    that length, its end, which tells exported layers apart (``/encoder/la…/conv2/Conv``)."""
    if len(text) <= width:
        return text
    keep = max(width - len(ELLIPSIS), 0)
    head = keep // 3
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head) :]


GLUE = "\u00a0"  # holds a number to its unit while prose is wrapped: textwrap breaks at ASCII whitespace only
_NUMBER_AND_UNIT = re.compile(r"(?<=\d) (?=[A-Za-z%])")


def wrap(text: str, width: int | None) -> list[str]:
    """Prose in lines of at most ``width`` characters (None: one line), its continuations indented two more
    spaces than its first line. Words are never broken, so a path longer than the width keeps its line, and a
    number stays on the line of its unit ("12.6 us")."""
    if width is None or len(text) <= width:
        return [text]
    lead = text[: len(text) - len(text.lstrip(" "))]
    glued = _NUMBER_AND_UNIT.sub(GLUE, text)
    lines = textwrap.wrap(glued, width, subsequent_indent=lead + "  ", break_long_words=False, break_on_hyphens=False)
    return [line.replace(GLUE, " ") for line in lines] or [text]


MIN_CUT = 12  # a name column is never cut below this many characters (or its header's width)
MIN_WRAP = 24  # nor is a prose column wrapped narrower


@dataclass(frozen=True)
class Column:
    """A table's column: its header, whether its cells align right (numbers) or left, and what gives way when
    the table is wider than its width: a ``cut`` column (names) is cut in the middle, a ``wrap`` column (prose,
    the last one) continues on the next lines, and an ``optional`` one (a figure the others give, such as FLOPs
    per byte) is left out when cutting and wrapping are not enough. Other columns and every header keep their
    full width."""

    header: str
    right: bool = False
    cut: bool = False
    wrap: bool = False
    optional: bool = False


def table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None, indent: str = "") -> list[str]:
    """The header line and a line per row, columns one space apart, as wide as their widest cell. Past
    ``width`` the prose column is wrapped first, then the widest name column loses a character at a time,
    down to their minimums, then optional columns are left out, the last first; a table that still does not fit
    runs past the width rather than lose more."""
    widths = [max([len(c.header), *(len(row[i]) for row in rows)]) for i, c in enumerate(columns)]
    if width is not None:
        _fit(columns, widths, width - len(indent) - (len(columns) - 1))
        optional = [i for i, c in enumerate(columns) if c.optional]
        if optional and len(indent) + sum(widths) + len(columns) - 1 > width:
            kept = [i for i in range(len(columns)) if i != optional[-1]]
            return table([columns[i] for i in kept], [[row[i] for i in kept] for row in rows], width, indent)
    lines = [_line([c.header for c in columns], columns, widths, indent)]
    for row in rows:
        cells = [middle(cell, w) if c.cut else cell for cell, c, w in zip(row, columns, widths)]
        if columns and columns[-1].wrap and len(cells[-1]) > widths[-1]:
            first, *rest = textwrap.wrap(cells[-1], widths[-1], break_long_words=False, break_on_hyphens=False)
            lines.append(_line([*cells[:-1], first], columns, widths, indent))
            start = len(indent) + sum(widths[:-1]) + len(columns) - 1
            lines += [" " * start + more for more in rest]
        else:
            lines.append(_line(cells, columns, widths, indent))
    return lines


def _fit(columns: Sequence[Column], widths: list[int], room: int) -> None:
    """Narrow the prose column, then the name columns, until the cells fit in ``room`` characters."""
    excess = sum(widths) - room
    if excess > 0 and columns and columns[-1].wrap:
        floor = max(len(columns[-1].header), MIN_WRAP)
        taken = min(excess, max(widths[-1] - floor, 0))
        widths[-1] -= taken
        excess -= taken
    floors = {i: max(len(c.header), MIN_CUT) for i, c in enumerate(columns) if c.cut}
    while excess > 0:
        narrowable = [i for i, floor in floors.items() if widths[i] > floor]
        if not narrowable:
            return
        widest = max(narrowable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1


def _line(cells: Sequence[str], columns: Sequence[Column], widths: Sequence[int], indent: str) -> str:
    text = " ".join(cell.rjust(w) if c.right else cell.ljust(w) for cell, c, w in zip(cells, columns, widths))
    return (indent + text).rstrip()
