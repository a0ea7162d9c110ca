"""Device names as users give them, ``host`` included: this machine's calibrated profile, which the caller
supplies (calibrating is the business of ``onnxroof.ort``, a stage above this one)."""

from __future__ import annotations

import os
from collections.abc import Callable

from onnxroof.devices import Device, load_device
from onnxroof.devices.engines import split_engine, with_engine
from onnxroof.errors import UserError

HOST = "host"  # the device name that means "this machine, calibrated for onnxruntime"
DEFAULT_DEVICE = "v100-sxm2"  # the device a command predicts for when none is named


def resolve_device(device: str | os.PathLike | Device, *, host: Callable[[], Device] | None = None) -> Device:
    """A Device as it is, ``host`` as ``host()`` gives it (this machine's calibrated profile), anything else as a
    catalog key or a device file; ``NAME@ENGINE`` is that device run by the engine (``devices.engines``)."""
    if isinstance(device, Device):
        return device
    name, engine = split_engine(str(device))
    if engine is not None:
        return with_engine(resolve_device(name, host=host), engine)
    if str(device) == HOST:
        if host is None:
            raise UserError(
                "device 'host' needs this machine's calibration here", "pass a catalog key or a device file"
            )
        return host()
    return load_device(device)
