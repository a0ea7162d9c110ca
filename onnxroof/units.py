"""Byte counts and durations in words, for every stage's messages and reports: binary units for cache and memory
sizes (32 KiB, 1.5 MiB), decimal ones for data moved (1.2 MB), as each is usually quoted; and amounts a user
writes with their unit (``10ms``, ``4GiB``), read back with the unit kept so that they are shown as given; and
sizes as Linux writes them (``48K``, ``1234 kB``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from onnxroof.errors import UserError

__all__ = ["Amount", "binary_bytes", "decimal_bytes", "in_unit", "kernel_bytes", "parse_bytes", "parse_seconds"]

_BINARY = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_DECIMAL = (("GB", 1e9), ("MB", 1e6), ("kB", 1e3))

# The units an amount may be written in, by their lower-case spelling: (how it is shown, its size in the base unit).
TIME_UNITS: dict[str, tuple[str, float]] = {
    "s": ("s", 1.0),
    "ms": ("ms", 1e-3),
    "us": ("us", 1e-6),
    "\u00b5s": ("us", 1e-6),  # micro sign
    "\u03bcs": ("us", 1e-6),  # Greek mu
    "ns": ("ns", 1e-9),
}
BYTE_UNITS: dict[str, tuple[str, float]] = {
    "b": ("B", 1),
    "kb": ("kB", 10**3),
    "mb": ("MB", 10**6),
    "gb": ("GB", 10**9),
    "tb": ("TB", 10**12),
    "kib": ("KiB", 2**10),
    "mib": ("MiB", 2**20),
    "gib": ("GiB", 2**30),
    "tib": ("TiB", 2**40),
}
# A prefix alone (4G) could mean either power: refused, with both spellings in the hint.
_AMBIGUOUS_BYTES = {"k": "k", "m": "M", "g": "G", "t": "T"}
_AMOUNT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(\S*)\s*")
_KERNEL_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:i?B)?\s*", re.IGNORECASE)


def _scaled(nbytes: float, units: tuple[tuple[str, float], ...]) -> str:
    """``nbytes`` in the largest of ``units`` (largest first) it reaches, three significant digits; else bytes."""
    for unit, scale in units:
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def binary_bytes(nbytes: float) -> str:
    """Bytes in binary units with three significant digits: '32 KiB', '1.5 MiB', '512 B'."""
    return _scaled(nbytes, _BINARY)


def decimal_bytes(nbytes: float) -> str:
    """Bytes in decimal units with three significant digits: '1.2 MB', '340 kB', '512 B'."""
    return _scaled(nbytes, _DECIMAL)


@dataclass(frozen=True)
class Amount:
    """An amount a user wrote with its unit: ``value`` in the base unit (seconds, bytes) and ``unit``, the unit it
    was written in as it is shown ('ms', 'GiB'). Shown in that unit: ``str(parse_bytes('4GiB'))`` is '4 GiB'."""

    value: float
    unit: str

    def __str__(self) -> str:
        return in_unit(self.value, self.unit)


def in_unit(value: float, unit: str) -> str:
    """``value`` (seconds or bytes) in ``unit`` (a shown spelling of TIME_UNITS or BYTE_UNITS), four significant
    digits: in_unit(4 * 2**30, 'GiB') is '4 GiB', in_unit(0.0125, 'ms') '12.5 ms'."""
    scale = dict((*TIME_UNITS.values(), *BYTE_UNITS.values()))[unit]
    return f"{value / scale:.4g} {unit}"


def parse_seconds(text: str, what: str = "a latency budget") -> Amount:
    """'10ms' -> Amount(0.01, 'ms'); units s, ms, us (or µs), ns. A bare number is refused: '10' could be a CI
    gate of 10 s that never fails where 10 ms was meant."""
    return _parse(text, TIME_UNITS, what, ("ms", "s", "us"))


def parse_bytes(text: str, what: str = "a memory budget") -> Amount:
    """'4GiB' -> Amount(4 * 2**30, 'GiB'), '512MB' -> Amount(512e6, 'MB'); B, kB/MB/GB/TB (powers of 10),
    KiB/MiB/GiB/TiB (powers of 2), any case. A bare number and a prefix alone ('4G': GB or GiB?) are refused."""
    return _parse(text, BYTE_UNITS, what, ("GiB", "GB", "MiB"))


def _parse(text: str, units: dict[str, tuple[str, float]], what: str, examples: tuple[str, str, str]) -> Amount:
    """An Amount from ``text`` in one of ``units``; a UserError whose hint writes its number in the ``examples``."""
    match = _AMOUNT.fullmatch(text)
    number = match[1] if match is not None and float(match[1]) > 0 else "10"
    example = f"{number}{examples[0]}, {number}{examples[1]} or {number}{examples[2]}"
    if match is None or float(match[1]) <= 0:
        raise UserError(f"{text!r} is not {what}: expected a positive number and its unit", f"e.g. {example}")
    unit = match[2].lower()
    if not unit:
        raise UserError(f"{text!r} has no unit: {what} is written with one", f"write it as {example}")
    if units is BYTE_UNITS and unit in _AMBIGUOUS_BYTES:
        prefix, power = _AMBIGUOUS_BYTES[unit], " kmgt".index(unit)
        raise UserError(
            f"{text!r} is ambiguous: {prefix} could be 10^{3 * power} or 2^{10 * power}",
            f"write {number}{prefix}B ({number} x 10^{3 * power} bytes) or {number}{prefix.upper()}iB "
            f"({number} x 2^{10 * power} bytes)",
        )
    if unit not in units:
        raise UserError(f"{text!r} is not {what}: unknown unit {match[2]!r}", f"e.g. {example}")
    shown, scale = units[unit]
    return Amount(float(number) * scale, shown)


def kernel_bytes(text: str) -> int | None:
    """A size as Linux and its tools write it, in bytes: sysfs '48K', lscpu '1.5 MiB', /proc's '1234 kB'. Their
    K, M and G are powers of 2 however they are spelt (the kernel's kB is 1024 bytes); a bare number is bytes.
    None where ``text`` is no such size. (A user's amount goes through parse_bytes, which refuses '4G'.)"""
    match = _KERNEL_SIZE.fullmatch(text)
    if match is None:
        return None
    return int(float(match[1]) * 1024 ** " KMG".index(match[2].upper() or " "))
