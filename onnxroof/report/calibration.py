"""Terminal summary of a calibrated host profile: peaks, memory levels, overheads and per-class ceilings."""

from __future__ import annotations

from pathlib import Path

from onnxroof.devices import PRECISIONS, Device
from onnxroof.report.format import Column, seconds, si, table, wrap

CEILING_COLUMNS = (Column("op class"), Column("compute efficiency (by FLOPs)"), Column("memory efficiency (by bytes)"))


def calibration_table(device: Device, cached_at: Path | None = None, width: int | None = None) -> str:
    """What the calibration measured, one line per number family, and where the profile was written; prose
    wrapped within ``width`` columns (None: no limit), nothing cut."""
    c = device.calibration
    prose = [f"{device.label()} [{device.key}]"]
    if c is not None:
        prose.append(
            f"  onnxruntime {c.onnxruntime} on {c.provider}, {c.threads} thread(s), {c.duration_s:.0f} s, {c.date}"
        )
    prose.append("")
    peaks = [f"{p} {si(device.peak_flops[p].value, 'FLOP/s')}" for p in PRECISIONS if p in device.peak_flops]
    prose.append("  peak: " + ", ".join(peaks))
    levels = [
        f"{cache.level} {si(cache.size, 'B')} at {si(cache.bandwidth, 'B/s')}"
        for cache in device.caches
        if cache.bandwidth
    ]
    levels.append(f"DRAM {si(device.memory_bandwidth.value, 'B/s')}")
    prose.append("  bandwidth: " + ", ".join(levels))
    run = seconds(device.run_overhead.value) if device.run_overhead else "-"
    prose.append(f"  overhead: {seconds(device.launch_overhead.value)} per node, {run} per run")
    if c is not None and c.reference_time_s is not None:
        prose.append(
            f"  reference block: {seconds(c.reference_time_s)} a run (validate reads the machine's speed by it)"
        )
    if device.weight_reuse is not None:
        reuse = " ".join(f"{si(f, 'B')}:{x:.2g}x" for f, x in device.weight_reuse.points)
        prose.append(f"  weights between runs, by the bytes a run moves, over DRAM's rate: {reuse}")
    if device.conv_weight_wait is not None:
        wait = " ".join(f"{si(b, 'B')}:{x:.2g}" for b, x in device.conv_weight_wait.points)
        prose.append(f"  a convolution waits for its weights' DRAM read, by their bytes: {wait}")
    if device.network_factor is not None:
        prose.append(f"  network factor: x{device.network_factor.value:.3g} on every kernel run in a network")
    if device.softmax_underflow is not None and device.subnormal_product is not None:
        prose.append(
            f"  subnormal floats: {seconds(device.softmax_underflow.value)} per Softmax element whose exp underflows, "
            f"{seconds(device.subnormal_product.value)} per multiply-add on one"
        )
    lines = [line for text in prose for line in wrap(text, width)]
    if device.ceilings:
        lines += ["", *_ceiling_lines(device, width)]
    if cached_at is not None:
        lines += ["", *wrap(f"  saved as {cached_at}: '--device host' uses it", width)]
    return "\n".join(lines) + "\n"


def _ceiling_lines(device: Device, width: int | None) -> list[str]:
    """Each op class's efficiencies by work: a table where it fits the width, else a wrapped line per class."""
    rows = [
        [
            name,
            " ".join(f"{si(w)}:{e:.0%}" for w, e in ceiling.compute) or "-",
            " ".join(f"{si(w, 'B')}:{e:.0%}" for w, e in ceiling.memory) or "-",
        ]
        for name, ceiling in device.ceilings.items()
    ]
    lines = table(CEILING_COLUMNS, rows, width, indent="  ")
    if width is None or max(map(len, lines)) <= width:
        return lines
    prose = [
        f"  {name}: compute efficiency (by FLOPs) {compute}; memory (by bytes) {memory}"
        for name, compute, memory in rows
    ]
    return [line for text in prose for line in wrap(text, width)]
