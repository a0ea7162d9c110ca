"""Byte counts in words, for every stage's messages and reports: binary units for cache and memory sizes
(32 KiB, 1.5 MiB), decimal ones for data moved (1.2 MB), as each is usually quoted."""

from __future__ import annotations

__all__ = ["binary_bytes", "decimal_bytes"]


def binary_bytes(nbytes: float) -> str:
    """Bytes in binary units with three significant digits: '32 KiB', '1.5 MiB', '512 B'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def decimal_bytes(nbytes: float) -> str:
    """Bytes in decimal units with three significant digits: '1.2 MB', '340 kB', '512 B'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"
