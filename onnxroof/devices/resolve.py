"""Device names as users give them, ``host`` included: this machine's calibrated onnxruntime profile."""

from __future__ import annotations

import os
from typing import Callable

from onnxroof.devices import Device, load_device

HOST = "host"  # the device name that means "this machine, calibrated for onnxruntime"


def resolve_device(
    device: str | os.PathLike | Device, threads: int = 1, provider: str = "cpu", progress: Callable[[int, int], None] | None = None
) -> Device:
    """``host`` is this machine's cached calibrated profile for the thread count and provider, calibrating first
    when none is cached; anything else is a catalog key, a device file or a Device."""
    if isinstance(device, Device):
        return device
    if str(device) == HOST:
        from onnxroof.calibrate import host_device

        return host_device(threads=threads, provider=provider, progress=progress)
    return load_device(device)
