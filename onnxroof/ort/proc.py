"""What timing and calibration read of the machine from Linux's /proc files (see proc(5)): the first processor's
fields from /proc/cpuinfo, the CPU time of all cores from /proc/stat and the memory available from
/proc/meminfo. Each reads the text it is given, else the file; where there is no such file (macOS, the BSDs) or
its text reads otherwise, the fields are none and the readings None."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onnxroof.units import kernel_bytes

__all__ = ["CpuTicks", "cpu_fields", "cpu_ticks", "memory_available"]


def cpu_fields(text: str | None = None) -> dict[str, str]:
    """The first processor's fields in ``text`` (that of /proc/cpuinfo, read when not given) by their lower-case
    names: 'model name', 'flags' (x86) or 'features' (Arm), 'cpu mhz', ..."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            key, value = (part.strip() for part in line.split(":", 1))
            fields.setdefault(key.lower(), value)  # the first processor's value: it comes first
    return fields


@dataclass(frozen=True)
class CpuTicks:
    """The CPU time of all the machine's cores since boot, in clock ticks (USER_HZ), from /proc/stat's first
    line: ``total`` user through steal, ``busy`` all of it but idle and iowait, ``stolen`` the steal time (what a
    hypervisor gave other guests while this one wanted to run; it counts as busy); and ``cpus``, the cores the
    file lists."""

    total: int
    busy: int
    stolen: int
    cpus: int


def cpu_ticks(text: str | None = None) -> CpuTicks | None:
    """The machine's CPU time from ``text`` (that of /proc/stat, read when not given)."""
    try:
        lines = (Path("/proc/stat").read_text(encoding="ascii") if text is None else text).splitlines()
        fields = lines[0].split()
        ticks = [int(x) for x in fields[1:]] + [0] * 8  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError, IndexError):
        return None
    if fields[0] != "cpu":
        return None
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return CpuTicks(sum(ticks[:8]), sum(ticks[:3]) + sum(ticks[5:8]), ticks[7], max(cpus, 1))


def memory_available(text: str | None = None) -> int | None:
    """MemAvailable in bytes from ``text`` (that of /proc/meminfo, read when not given)."""
    try:
        lines = (Path("/proc/meminfo").read_text(encoding="ascii") if text is None else text).splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(":")
        if name == "MemAvailable":
            return kernel_bytes(value)
    return None
