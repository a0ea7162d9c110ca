"""Engine-aware per-node prediction: the roofline corrected by a calibrated host profile's per-op-class ceilings.

A single peak and a single bandwidth miss how an engine's kernels really run: kernels of different kinds reach
very different fractions of the peak (onnxruntime's blocked NCHWc convolution most of it, a depthwise
convolution or LRN, which do little arithmetic per element they load, far less), and a kernel whose data sits
in a cache streams faster than one that reads DRAM. This module predicts the time an engine spends on one node of
the graph it runs (``onnxroof.ort.optimized.engine_graph`` for onnxruntime) from

- the node's op class (``op_classes.op_class``): conv, depthwise, 1x1, gemm, pooling, LRN, ... (``OP_CLASSES``),
  the base class its op registers with its cost function refined by the node's shapes;
- that class's ceiling on the device (:class:`onnxroof.devices.Ceiling`): the fraction of the peak and of the
  memory level's bandwidth such kernels reach, interpolated by kernel size (``class_work.ceiling_work``: one
  product, group or time step where the kernel repeats one);
- the memory level the node's working set fits in (``levels.memory_level``), whose measured bandwidth applies to
  the activations it moves; weights are charged at DRAM bandwidth, because a weight is read once per inference
  and the rest of the model streams through the caches in between, unless the whole model is small enough that
  its weights come back from the caches between back-to-back runs: then at the DRAM bandwidth times the device's
  calibrated ``weight_reuse`` speedup at the bytes one inference of the model moves (its ``traffic``);
- the device's ``network_factor``: what the ceilings, read on kernels run alone, miss of a network's kernels run
  one after the other (a recurrent op takes it on its first time step only, :func:`step_network_factor`);
- the prediction terms its engine profile charges (``onnxroof.predict.terms``, ``onnxroof.predict.profiles``),
  combined by the profile's overlap rule (``terms.combine``).

These facts make one :class:`~onnxroof.predict.terms.NodeContext` (:func:`node_context`), built once per node;
each term is a pure function of it and the device. The node's :class:`EngineNote` keeps the facts and each term's
seconds as charged, so that a report can say why a prediction is what it is.

Every node the executor runs pays the per-node overhead (the ``dispatch`` term), shape-only nodes (Reshape,
Flatten, Squeeze, ...) too: they cost no FLOPs and no bytes (their output aliases their input), and the
calibration measures the per-node overhead as what a Reshape between two nodes adds to a run, so they predict
exactly that overhead. What onnxruntime's profiler reports for them on top of that is its own per-node bookkeeping
(``device.calibration.profiler_overhead``), which a comparison with profiled per-node times adds to every
prediction. The device's ``run_overhead`` (the fixed cost of one ``session.run``) is not part of any node: the
analysis adds it once per model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from onnxroof.costs import SHAPE, Cost, NodeView
from onnxroof.devices import Device, FrozenMap
from onnxroof.devices.classes import CLASSES
from onnxroof.predict import roofline
from onnxroof.predict.class_work import ceiling_work, repeats
from onnxroof.predict.levels import memory_level, weight_bytes, working_set
from onnxroof.predict.op_classes import ceiling_for, classify
from onnxroof.predict.profiles import EngineProfile, engine_profile, profile_terms
from onnxroof.predict.roofline import Prediction
from onnxroof.predict.term_times import COLD_WEIGHTS, READ_COLD, RECURRENT_CLASSES, epilogue_activation
from onnxroof.predict.terms import ALONE, EXPOSED, InModel, NodeContext, charge, combine, shown, total
from onnxroof.units import decimal_bytes

__all__ = [
    "COLD_WEIGHTS",
    "EngineNote",
    "InModel",
    "epilogue_activation",
    "memory_level",
    "node_context",
    "predict_engine",
    "step_network_factor",
    "weight_bytes",
    "weight_speedup",
]


@dataclass(frozen=True)
class EngineNote:
    """Why a node got its engine prediction: its op class and why, the ceiling applied, where its data was taken
    from, and each prediction term's seconds as charged (``terms``, by name, in the registry's order).

    ``ceiling`` names the class whose ceiling the device had (the node's own class, or the class it falls back
    to, see CLASS_FALLBACK); None when the device has none and the plain roofline's rates applied. ``level`` is the
    smallest memory level the node's working set fits in and ``level_bandwidth`` that level's bandwidth, which
    applies to the activations; ``weight_bytes`` of weights are charged at the DRAM bandwidth times
    ``weight_speedup`` (above 1 where the model's weights stay in the caches between runs, see
    :class:`onnxroof.devices.WeightReuse`). ``network_factor`` is the factor its work took, ``epilogue`` the fused
    activation applied in a second pass over its output, if any. An If's note names the ``branch`` whose nodes'
    predictions it sums and what running it adds (``branch_overhead_s``, ``onnxroof.predict.control``).
    """

    op_class: str
    reason: str
    ceiling: str | None
    compute_efficiency: float
    memory_efficiency: float
    level: str
    level_bandwidth: float
    working_set: float
    weight_bytes: float
    weight_speedup: float = 1.0
    network_factor: float = 1.0
    epilogue: str | None = None
    terms: Mapping[str, float] = field(default_factory=FrozenMap)
    branch: str | None = None
    branch_overhead_s: float = 0.0

    def describe(self) -> str:
        """One line for a report: the class, the efficiencies applied, the memory level and the terms' lines."""
        if self.op_class == SHAPE:
            return "shape-only: per-node overhead only"
        if self.branch is not None:
            return f"If: its {self.branch}'s nodes as predicted, plus {self.branch_overhead_s * 1e6:.3g} us to run it"
        if self.ceiling is None:
            head = f"{self.op_class}: no ceiling (plain roofline)"
        else:
            via = "" if self.ceiling == self.op_class else f" via {self.ceiling}"
            head = (
                f"{self.op_class}{via}: {self.compute_efficiency:.0%} of peak, "
                f"{self.memory_efficiency:.0%} of bandwidth"
            )
        data = f"data in {self.level} ({decimal_bytes(self.working_set)}, {self.level_bandwidth / 1e9:.3g} GB/s)"
        kept = f"at {self.weight_speedup:.2g}x DRAM's rate (cached between runs)"
        source = "from DRAM" if self.weight_speedup == 1.0 else kept
        weights = f", weights {decimal_bytes(self.weight_bytes)} {source}" if self.weight_bytes else ""
        network = f"; x{self.network_factor:.3g} in a network" if self.network_factor != 1.0 else ""
        return f"{head}; {data}{weights}{shown(self.terms, self)}{network}"

    def to_dict(self) -> dict[str, Any]:
        """The note's part of the JSON contract: its facts, the seconds of the terms each figure sums, the
        explanation, then ``class``, ``reason`` and ``terms`` (name -> seconds)."""
        term = self.terms.get
        return {
            "op_class": self.op_class,
            "ceiling": self.ceiling,
            "compute_efficiency": self.compute_efficiency,
            "memory_efficiency": self.memory_efficiency,
            "level": self.level,
            "level_bandwidth": self.level_bandwidth,
            "working_set": self.working_set,
            "weight_bytes": self.weight_bytes,
            "epilogue": self.epilogue,
            "epilogue_time_s": term("epilogue", 0.0),
            "exposed_memory_s": total(self.terms, EXPOSED),
            "network_factor": self.network_factor,
            "weight_speedup": self.weight_speedup,
            "subnormal_time_s": term("subnormal", 0.0),
            "projection_s": term("projection", 0.0),
            "distant_s": term("distant_reads", 0.0),
            "bias_pass_s": term("bias_pass", 0.0),
            "write_allocate_s": term("write_allocate", 0.0),
            "branch": self.branch,
            "branch_overhead_s": self.branch_overhead_s,
            "explanation": self.describe(),
            "class": self.op_class,
            "reason": self.reason,
            "terms": dict(self.terms),
        }


def node_context(
    view: NodeView, cost: Cost, precision: str, device: Device, profile: EngineProfile, around: InModel = ALONE
) -> NodeContext:
    """The facts every term of the node reads, once: its class, the ceiling its profile finds for it (none for a
    class outside the profile's), the efficiencies read there at its work, the peak at its precision, its memory
    level, its weights and the rate they come at, and its network factor."""
    cls, reason = classify(view)
    peak, used = device.peak(precision)
    found = ceiling_for(device, cls) if cls in profile.classes else None
    ceiling_name, ceiling = found if found is not None else (None, None)
    flops_key, bytes_key = ceiling_work(view, cost, cls)
    eff_c = ceiling.compute_efficiency(flops_key) if ceiling is not None and cost.flops > 0 else 1.0
    eff_m = ceiling.memory_efficiency(bytes_key) if ceiling is not None and cost.bytes > 0 else 1.0
    ws = working_set(view, cost)
    level, bw = memory_level(device, ws)
    weights = weight_bytes(view, cost)
    factor = device.network_factor.value if device.network_factor is not None else 1.0
    speedup = weight_speedup(device, around.traffic)
    # Weights under COLD_WEIGHTS were read warm by the calibration: their ceilings carry that read.
    reuse = speedup if weights >= COLD_WEIGHTS or cls in READ_COLD else 1.0
    return NodeContext(
        view=view,
        cost=cost,
        op_class=cls,
        reason=reason,
        ceiling=ceiling_name,
        compute_efficiency=eff_c,
        memory_efficiency=eff_m,
        peak=peak,
        precision=used,
        level=level,
        level_bandwidth=bw,
        working_set=ws,
        weights=weights,
        network=step_network_factor(factor, view, cls),
        dram=device.memory_bandwidth.value,
        speedup=speedup,
        reuse=reuse,
        around=around,
        product_precision=product_precision(profile, cls, precision, device),
    )


def product_precision(profile: EngineProfile, cls: str, precision: str, device: Device) -> str:
    """The precision a node's product runs at on the engine: TF32 for an fp32 product of a class the engine runs
    in TF32 by default, on a device with a TF32 rate; ``precision`` otherwise."""
    op_class = CLASSES.get(cls)
    if precision != "fp32" or op_class is None or op_class.base not in profile.tf32_products:
        return precision
    gpu = device.gpu
    has_tf32 = "tf32" in device.peak_flops or (gpu is not None and "tf32" in gpu.gemm_achievable)
    return "tf32" if has_tf32 else precision


def predict_engine(
    view: NodeView,
    cost: Cost,
    precision: str,
    device: Device,
    around: InModel = ALONE,
    profile: EngineProfile | None = None,
) -> tuple[Prediction, EngineNote]:
    """The time the device's engine spends on one node, and why: the node's context (:func:`node_context`), each
    term of the device's engine profile charged on it and combined by the profile's overlap rule
    (``terms.combine``). ``around`` is the node's place in its model (none: a kernel run alone).

    The Prediction's ``peak_flops_s`` and ``bandwidth_bytes_s`` are the node's own ceilings (peak x eff_c over the
    network factor, the effective bandwidth), so its ridge point and attainable FLOP/s read against the roof it
    actually runs under. The device's ``run_overhead`` is not included: it is paid once per ``session.run``.
    ``profile`` replaces the one the device names (``profiles.engine_profile``)."""
    profile = profile or engine_profile(device)
    node = node_context(view, cost, precision, device, profile, around)
    combined = combine(charge(node, device, profile_terms(profile)), profile.overlap or device.overlap)
    compute, memory, overhead = combined.compute_s, combined.memory_s, combined.overhead_s
    unbounded = node.level_bandwidth * node.memory_efficiency / node.network  # the rate a node moving nothing had
    effective_bw = cost.bytes / memory if memory > 0 else unbounded
    prediction = Prediction(
        compute_time_s=compute,
        memory_time_s=memory,
        overhead_time_s=overhead,
        predicted_time_s=combined.time_s,
        bound=roofline.bound_of(compute, memory, overhead),
        peak_flops_s=node.peak * node.compute_efficiency / node.network,
        bandwidth_bytes_s=effective_bw,
        precision=node.precision,
        epilogue_time_s=combined.terms.get("epilogue", 0.0),
    )
    note = EngineNote(
        op_class=node.op_class,
        reason=node.reason,
        ceiling=node.ceiling,
        compute_efficiency=node.compute_efficiency,
        memory_efficiency=node.memory_efficiency,
        level=node.level,
        level_bandwidth=node.level_bandwidth,
        working_set=node.working_set,
        weight_bytes=node.weights,
        weight_speedup=node.reuse,
        network_factor=node.network,
        epilogue=epilogue_activation(view),
        terms=combined.terms,
    )
    return prediction, note


def step_network_factor(factor: float, view: NodeView, cls: str) -> float:
    """The network factor a node's work takes: ``factor``, but for a recurrent op, whose time steps run one after
    the other on the state and weights the step before left in the caches, as its class's benchmarks run them:
    only its first step follows the kernels before it, and the factor's excess over 1 is spread over its steps,
    ``1 + (factor - 1) / steps``."""
    if cls not in RECURRENT_CLASSES:
        return factor
    return 1.0 + (factor - 1.0) / max(repeats(view, cls), 1)


def weight_speedup(device: Device, traffic: float | None) -> float:
    """How many times DRAM's rate a model's weights are read at when one inference moves ``traffic`` bytes: the
    device's calibrated weight-reuse speedup there; 1 without a traffic or without that calibration."""
    if traffic is None or device.weight_reuse is None:
        return 1.0
    return device.weight_reuse.speedup(traffic)
