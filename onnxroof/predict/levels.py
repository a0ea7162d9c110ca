"""Where a node's data is served from on a device: the memory level its working set fits in, the core's own cache,
and the bytes a node touches and the weights among them.

Only cache levels with a measured bandwidth count; a private (per-core) cache counts once per thread the device's
profile was calibrated with.
"""

from __future__ import annotations

from onnxroof.costs import Cost, NodeView
from onnxroof.devices import Device

__all__ = ["PRIVATE_SCOPES", "core_cache_bytes", "memory_level", "threads", "weight_bytes", "working_set"]

# The cache scopes private to a core (or a GPU's multiprocessor), of the device schema's CACHE_SCOPES.
PRIVATE_SCOPES = frozenset({"per-core", "per-sm"})


def weight_bytes(view: NodeView, cost: Cost) -> float:
    """Bytes of the distinct weights (initializers) a node reads, at most what its cost says it reads."""
    seen: set[str] = set()
    total = 0.0
    for t in view.inputs:
        if t is not None and t.is_weight and t.known and t.name not in seen:
            seen.add(t.name)
            total += t.nbytes
    return min(total, cost.bytes_read)


def working_set(view: NodeView, cost: Cost) -> float:
    """Bytes a kernel touches while it runs: every distinct input it reads and every output it writes (the
    compulsory traffic of its Cost). This decides which memory level its data is served from."""
    return cost.bytes_read + cost.bytes_written


def threads(device: Device) -> int:
    """The threads the device's profile was calibrated with (1 without a calibration)."""
    return device.calibration.threads if device.calibration is not None else 1


def _capacity(device: Device, size: float, scope: str) -> float:
    """A cache's capacity for one run: a private cache counts once per thread the profile was measured with."""
    return size * threads(device) if scope in PRIVATE_SCOPES else size


def memory_level(device: Device, nbytes: float) -> tuple[str, float]:
    """(level name, bandwidth in bytes/s) of the smallest memory level ``nbytes`` fits in.

    Only cache levels with a measured bandwidth count; a working set larger than all of them is served from
    DRAM at ``device.memory_bandwidth``. Fitting means ``nbytes <= capacity``, the capacity of a per-core
    cache being multiplied by the thread count of the calibration.
    """
    levels = sorted((c for c in device.caches if c.bandwidth is not None), key=lambda c: c.size)
    for cache in levels:
        if nbytes <= _capacity(device, cache.size, cache.scope):
            return cache.level, float(cache.bandwidth)  # type: ignore[arg-type]
    return "DRAM", device.memory_bandwidth.value


def core_cache_bytes(device: Device) -> float:
    """What the largest private (per-core) cache level with a measured bandwidth holds over the profile's threads;
    zero on a device without one."""
    private = [c for c in device.caches if c.bandwidth is not None and c.scope in PRIVATE_SCOPES]
    return max((_capacity(device, c.size, c.scope) for c in private), default=0.0)
