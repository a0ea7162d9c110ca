"""The roofline of paper 001 as pure functions: a Cost on a Device at a precision -> a Prediction.

For one kernel: ``t_compute = FLOPs / peak[precision]``, ``t_memory = bytes / bandwidth``,
``t_overhead = kernels * launch_overhead``. The bound is the largest of the three terms. How they combine is
a property of the device: ``max`` of all three where launches overlap execution (a GPU stream), or
``max(compute, memory) + overhead`` where dispatch is serial (onnxruntime's CPU executor). Ridge point =
``peak / bandwidth``; attainable FLOP/s = ``min(peak, AI * bandwidth)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from onnxroof.costs import Cost
from onnxroof.devices import Device

BOUNDS = ("compute", "memory", "overhead")
NO_BOUND = "none"  # a node that costs nothing at run time (shape-only ops)


@dataclass(frozen=True, slots=True)
class Prediction:
    """Where one kernel (or a sum of kernels) sits on a device's roofline, and how long it should take."""

    compute_time_s: float
    memory_time_s: float
    overhead_time_s: float
    predicted_time_s: float
    bound: str
    peak_flops_s: float
    bandwidth_bytes_s: float
    precision: str
    # A pass an engine makes over a kernel's output after it, outside the roofline terms (included in
    # predicted_time_s): onnxruntime applies a fused activation other than Relu that way. 0 for the plain roofline.
    epilogue_time_s: float = 0.0

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte at which this device turns from memory- to compute-bound at this precision."""
        return self.peak_flops_s / self.bandwidth_bytes_s


def bound_of(compute_s: float, memory_s: float, overhead_s: float) -> str:
    """The term that dominates: 'compute', 'memory' or 'overhead' ('none' when all are zero)."""
    terms = (compute_s, memory_s, overhead_s)
    largest = max(terms)
    return BOUNDS[terms.index(largest)] if largest > 0 else NO_BOUND


def combine(overlap: str, compute_s: float, memory_s: float, overhead_s: float) -> float:
    """Predicted time from the three terms under the device's overlap model ('max' or 'serial')."""
    if overlap == "serial":
        return max(compute_s, memory_s) + overhead_s
    return max(compute_s, memory_s, overhead_s)


def attainable_flops(arithmetic_intensity: float, peak_flops_s: float, bandwidth_bytes_s: float) -> float:
    """Paper 001 eq. 1 / paper 000 eq. 2: ``min(peak, AI * bandwidth)``."""
    return min(peak_flops_s, arithmetic_intensity * bandwidth_bytes_s)


@dataclass(frozen=True, slots=True)
class Roof:
    """A device's roofline at one precision: the numbers every prediction at that precision needs."""

    peak_flops_s: float
    bandwidth_bytes_s: float
    launch_overhead_s: float
    overlap: str
    precision: str


def roof_of(device: Device, precision: str) -> Roof:
    """The device's roof at a precision (the device may fall back to another precision, see Device.peak)."""
    peak, used = device.peak(precision)
    return Roof(peak, device.memory_bandwidth.value, device.launch_overhead.value, device.overlap, used)


def predict_on(cost: Cost, roof: Roof) -> Prediction:
    """Place one node's cost under a roof."""
    compute = cost.flops / roof.peak_flops_s
    memory = (cost.bytes_read + cost.bytes_written) / roof.bandwidth_bytes_s
    overhead = cost.kernels * roof.launch_overhead_s
    return Prediction(
        compute_time_s=compute,
        memory_time_s=memory,
        overhead_time_s=overhead,
        predicted_time_s=combine(roof.overlap, compute, memory, overhead),
        bound=bound_of(compute, memory, overhead),
        peak_flops_s=roof.peak_flops_s,
        bandwidth_bytes_s=roof.bandwidth_bytes_s,
        precision=roof.precision,
    )


def predict(cost: Cost, device: Device, precision: str) -> Prediction:
    """Place one node's cost on the device's roofline at a precision."""
    return predict_on(cost, roof_of(device, precision))


def total(
    predictions: Iterable[Prediction], device: Device, precision: str, counts: Iterable[int] | None = None
) -> Prediction:
    """The whole model: each time term summed over kernels; the bound is the term with the largest sum.
    ``counts`` says how many nodes each prediction stands for (one each by default)."""
    compute = memory = overhead = predicted = 0.0
    for p, n in zip(predictions, itertools.repeat(1) if counts is None else counts):
        compute += p.compute_time_s * n
        memory += p.memory_time_s * n
        overhead += p.overhead_time_s * n
        predicted += p.predicted_time_s * n
    peak, used = device.peak(precision)
    return Prediction(
        compute_time_s=compute,
        memory_time_s=memory,
        overhead_time_s=overhead,
        predicted_time_s=predicted,
        bound=bound_of(compute, memory, overhead),
        peak_flops_s=peak,
        bandwidth_bytes_s=device.memory_bandwidth.value,
        precision=used,
    )
