"""Byte counts in words, for every stage's messages and reports: binary units for cache and memory sizes
(32 KiB, 1.5 MiB), decimal ones for data moved (1.2 MB), as each is usually quoted."""

from __future__ import annotations

__all__ = ["binary_bytes", "decimal_bytes"]

_BINARY = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_DECIMAL = (("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


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
