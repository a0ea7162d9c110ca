"""This host's calibrated profiles, cached per CPU, onnxruntime version, provider and thread count: read where a
current one is cached, else calibrated (``run.calibrate``) under the key's lock and written atomically."""

from __future__ import annotations

from collections.abc import Callable

from onnxroof.devices import Device, load_device, save_device
from onnxroof.ort.calibrate import run
from onnxroof.ort.calibrate.host import cache_lock, cache_path, cached_profile
from onnxroof.ort.calibrate.suite import SUITE

__all__ = ["host_device"]


def host_device(
    threads: int = 1,
    provider: str = "cpu",
    recalibrate: bool = False,
    progress: Callable[[int, int], None] | None = None,
    budget_s: float = 120.0,
) -> Device:
    """This machine's calibrated profile: read from the cache (see :func:`cache_path`), or calibrated and cached
    first when there is none, when it cannot be read (a profile beyond its cores' limits does not read), when an
    older benchmark suite measured it (``SUITE``), or when ``recalibrate`` is set. A calibration holds the key's
    lock (``cache_lock``): a second process that wants the same profile waits for it and reads it rather than
    calibrating beside it, and two asked to recalibrate take turns. The file is written atomically, so a reader
    never sees half a profile."""
    path = cache_path(threads, provider)
    cached = None if recalibrate else cached_profile(path, SUITE)
    if cached is not None:
        return cached
    with cache_lock(path):
        # another process may have calibrated it while this one waited
        cached = None if recalibrate else cached_profile(path, SUITE)
        if cached is not None:
            return cached
        device = run.calibrate(threads=threads, provider=provider, budget_s=budget_s, progress=progress)
        save_device(device, path)
        return load_device(path)
