"""Formatting shared by the renderers: SI prefixes, durations, clipped cells and short op names."""

from __future__ import annotations

import math

__all__ = ["TABLE_WIDTH", "clip", "seconds", "short_op", "si"]

TABLE_WIDTH = 100  # terminal tables fit this many columns


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """1.23e9 -> '1.23 G' + unit; keeps three significant digits."""
    if value == 0 or not math.isfinite(value):
        return f"0 {unit}".rstrip() if value == 0 else str(value)
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}".rstrip()
    return f"{value:.{digits}g} {unit}".rstrip()


def seconds(value: float) -> str:
    """A duration with a readable unit: 1.2 s, 3.4 ms, 56 us, 7.8 ns."""
    for factor, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value * 1e9:.3g} ns" if value else "0"


_DOMAIN_ABBREVIATIONS = (("com.microsoft.nchwc::", "nchwc::"), ("com.microsoft::", "ms::"))


def short_op(op: str) -> str:
    """An op type with onnxruntime's long domains abbreviated for the table (JSON and CSV keep them whole)."""
    for long, short in _DOMAIN_ABBREVIATIONS:
        if op.startswith(long):
            return short + op[len(long) :]
    return op


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, a cut one ending in '~'."""
    return text if len(text) <= width else text[: width - 1] + "~"
