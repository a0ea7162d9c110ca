"""Terminal summary of a calibrated host profile: peaks, memory levels, overheads and per-class ceilings."""

from __future__ import annotations

from pathlib import Path

from onnxroof.devices import PRECISIONS, Device
from onnxroof.report.format import TABLE_WIDTH, clip, seconds, si


def calibration_table(device: Device, cached_at: Path | None = None) -> str:
    """What the calibration measured, one line per number family, and where the profile was written."""
    c = device.calibration
    lines = [clip(f"{device.label()} [{device.key}]", TABLE_WIDTH)]
    if c is not None:
        lines.append(
            clip(
                f"  onnxruntime {c.onnxruntime} on {c.provider}, {c.threads} thread(s), {c.duration_s:.0f} s, {c.date}",
                TABLE_WIDTH,
            )
        )
    lines.append("")
    peaks = [f"{p} {si(device.peak_flops[p].value, 'FLOP/s')}" for p in PRECISIONS if p in device.peak_flops]
    lines.append(clip("  peak: " + ", ".join(peaks), TABLE_WIDTH))
    levels = [
        f"{cache.level} {si(cache.size, 'B')} at {si(cache.bandwidth, 'B/s')}"
        for cache in device.caches
        if cache.bandwidth
    ]
    levels.append(f"DRAM {si(device.memory_bandwidth.value, 'B/s')}")
    lines.append(clip("  bandwidth: " + ", ".join(levels), TABLE_WIDTH))
    run = seconds(device.run_overhead.value) if device.run_overhead else "-"
    lines.append(f"  overhead: {seconds(device.launch_overhead.value)} per node, {run} per run")
    if c is not None and c.reference_time_s is not None:
        lines.append(
            f"  reference block: {seconds(c.reference_time_s)} a run (validate reads the machine's speed by it)"
        )
    if device.weight_reuse is not None:
        reuse = " ".join(f"{si(f, 'B')}:{x:.2g}x" for f, x in device.weight_reuse.points)
        lines.append(clip(f"  weights between runs, by the bytes a run moves, over DRAM's rate: {reuse}", TABLE_WIDTH))
    if device.conv_weight_wait is not None:
        wait = " ".join(f"{si(b, 'B')}:{x:.2g}" for b, x in device.conv_weight_wait.points)
        lines.append(clip(f"  a convolution waits for its weights' DRAM read, by their bytes: {wait}", TABLE_WIDTH))
    if device.network_factor is not None:
        lines.append(f"  network factor: x{device.network_factor.value:.3g} on every kernel run in a network")
    if device.softmax_underflow is not None and device.subnormal_product is not None:
        lines.append(
            f"  subnormal floats: {seconds(device.softmax_underflow.value)} per Softmax element whose exp underflows, "
            f"{seconds(device.subnormal_product.value)} per multiply-add on one"
        )
    if device.ceilings:
        width = max(len("op class"), *(len(name) for name in device.ceilings))
        lines += ["", f"  {'op class':<{width}} {'compute efficiency (by FLOPs)':<36} memory efficiency (by bytes)"]
        for name, ceiling in device.ceilings.items():
            compute = " ".join(f"{si(w)}:{e:.0%}" for w, e in ceiling.compute) or "-"
            memory = " ".join(f"{si(w, 'B')}:{e:.0%}" for w, e in ceiling.memory) or "-"
            lines.append(clip(f"  {name:<{width}} {clip(compute, 36):<36} {memory}", TABLE_WIDTH))
    if cached_at is not None:
        lines += ["", clip(f"  saved as {cached_at}: '--device host' uses it", TABLE_WIDTH)]
    return "\n".join(lines) + "\n"
