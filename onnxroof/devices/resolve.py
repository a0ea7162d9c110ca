"""Device names as users give them, ``host`` included: this machine's calibrated profile, which the caller
supplies (calibrating is the business of ``onnxroof.ort``, a stage above this one)."""

from __future__ import annotations

import os
from collections.abc import Callable

from onnxroof.devices import Device, load_device
from onnxroof.errors import UserError

HOST = "host"  # the device name that means "this machine, calibrated for onnxruntime"


def resolve_device(device: str | os.PathLike | Device, *, host: Callable[[], Device] | None = None) -> Device:
    """A Device as it is, ``host`` as ``host()`` gives it (this machine's calibrated profile), anything else as a
    catalog key or a device file."""
    if isinstance(device, Device):
        return device
    if str(device) == HOST:
        if host is None:
            raise UserError(
                "device 'host' needs this machine's calibration here", "pass a catalog key or a device file"
            )
        return host()
    return load_device(device)
