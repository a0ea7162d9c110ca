"""Predicted against measured: one model analyzed, timed and profiled on this machine, compared per kernel.

The unit of comparison is the kernel onnxruntime runs. On a device profile whose engine is onnxruntime (a
calibrated host) the prediction is made on the very graph that was profiled, node for node. Otherwise (a catalog
device, or ``as_exported``) each kernel's prediction is the sum over the exported nodes it computes, so a fused
Conv+BatchNormalization+Relu is compared as one kernel, as it runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from onnxroof.devices import Device
from onnxroof.devices.resolve import HOST, resolve_device
from onnxroof.load import load_graph
from onnxroof.load.model_spec import ModelSpec, Source, model_spec
from onnxroof.ort.agreement import Agreement, agreement, relative_error
from onnxroof.ort.calibrate import host_device
from onnxroof.ort.measure import Measurement, measure
from onnxroof.ort.optimized import with_softmax_masks
from onnxroof.ort.profile import NodeProfile, profile_nodes
from onnxroof.ort.reference import ReferenceSampler, drift_warning
from onnxroof.ort.session_spec import DEFAULT_SESSION, SessionSpec
from onnxroof.ort.sessions import load_feeds, runnable_model
from onnxroof.passes.input_shapes import at_input_shapes
from onnxroof.predict.analysis import Analysis, NodeResult, analyze_graph
from onnxroof.predict.engine import EngineNote
from onnxroof.predict.profiles import named_profile

WORST = 5  # how many of the worst mispredictions are named
SPREAD_S = 5.0  # the whole-model samples are spread over this many seconds (see measure's spread_s)


@dataclass(frozen=True)
class KernelComparison:
    """One measured kernel: its prediction, its measured time (the fast estimate over the profiled runs, read
    like the calibration and the model's latency), and paper 001's reading of both points."""

    name: str
    op_type: str
    covers: tuple[str, ...]
    predicted_time_s: float
    measured_time_s: float
    flops: float
    bytes: float
    bound: str
    explanation: str
    engine_only: bool = False
    floor_dominated: bool = False
    shape_only: bool = False  # no FLOPs and no bytes: the kernel only relabels its input (Reshape, Flatten, ...)

    @property
    def ratio(self) -> float | None:
        """Predicted over measured (1.0 is exact)."""
        return self.predicted_time_s / self.measured_time_s if self.measured_time_s > 0 else None

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        measured_perf = self.flops / self.measured_time_s if self.measured_time_s > 0 else None
        predicted_perf = self.flops / self.predicted_time_s if self.predicted_time_s > 0 else None
        return {
            "name": self.name,
            "op_type": self.op_type,
            "covers": list(self.covers),
            "predicted_time_s": self.predicted_time_s,
            "measured_time_s": self.measured_time_s,
            "ratio": self.ratio,
            "error": relative_error(self.predicted_time_s, self.measured_time_s) if self.measured_time_s > 0 else None,
            "arithmetic_intensity": self.arithmetic_intensity,
            "predicted_flops_s": predicted_perf,
            "measured_flops_s": measured_perf,
            "bound": self.bound,
            "explanation": self.explanation,
            "engine_only": self.engine_only,
            "floor_dominated": self.floor_dominated,
            "shape_only": self.shape_only,
        }


@dataclass(frozen=True)
class Validation:
    """A model's prediction next to its measurement: per kernel, their agreement, and the whole model."""

    analysis: Analysis
    measurement: Measurement
    profile: NodeProfile
    kernels: tuple[KernelComparison, ...]
    agreement: Agreement
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # the reference block's time at calibration over its time between the measurement's samples (1.0: the same)
    machine_speed: float | None = None

    @property
    def predicted_time_s(self) -> float:
        """The model's predicted latency on the machine as calibrated."""
        return self.analysis.totals.predicted_time_s

    @property
    def measured_time_s(self) -> float:
        """The model's measured latency as a user's timing loop reports it: the median of its spread samples. The
        prediction targets it (the calibration's network factor is read on the reference block's median run)."""
        return self.measurement.median_s

    @property
    def measured_fast_s(self) -> float:
        """The fast estimate of the samples (see measure.fast_estimate): the machine's best moments, with other
        processes' load and its usual jitter set aside."""
        return self.measurement.fast_s

    @property
    def predicted_at_speed_s(self) -> float:
        """The predicted latency at the speed the machine ran at while the model was timed: the calibrated
        prediction over ``machine_speed`` (the reference block's time at calibration over its time between the
        model's samples), or the calibrated prediction where there is no reading. On a shared machine the
        speed moves between phases, and the block, a mix of the kernels models spend their time in, moves with
        them."""
        return self.predicted_time_s / self.machine_speed if self.machine_speed else self.predicted_time_s

    @property
    def model_error(self) -> float:
        """Signed relative error of the model's predicted latency, at the machine's speed while timed, against its
        measured latency."""
        return relative_error(self.predicted_at_speed_s, self.measured_time_s)

    @property
    def uncorrected_error(self) -> float:
        """Signed relative error of the prediction at the calibrated speed against the measured latency: what
        the error would be if the machine ran as it did when calibrated."""
        return relative_error(self.predicted_time_s, self.measured_time_s)

    @property
    def compared(self) -> list[KernelComparison]:
        """The kernels the agreement statistics are computed over (see ``scored``), longest measured first."""
        return scored(self.kernels, self.analysis.graph == "onnxruntime-optimized")

    def worst(self, count: int = WORST) -> list[KernelComparison]:
        """The compared kernels whose misprediction costs the most time, largest first."""
        return sorted(self.compared, key=lambda k: -abs(k.predicted_time_s - k.measured_time_s))[:count]

    def measured(self, analysis: Analysis) -> bool:
        """Whether this validation measured ``analysis``: its own, or one of the same model on the same device,
        graph and precision (a validation carries its own copy of the analysis)."""
        v = self.analysis
        return analysis is v or (analysis.model, analysis.device.key, analysis.graph, analysis.precision) == (
            v.model,
            v.device.key,
            v.graph,
            v.precision,
        )

    def beside(self, analyses: Sequence[Analysis]) -> list[Analysis]:
        """``analyses`` with this validation's own analysis appended when none of them is the one it measured, so
        that its measured times have layers to sit beside."""
        out = list(analyses)
        return out if any(self.measured(a) for a in out) else [*out, self.analysis]

    def measured_by_node(self) -> dict[str, tuple[float, str]]:
        """Node name -> (measured seconds, kernel name) for the nodes a measured kernel covers (see
        _measured_per_node)."""
        return _measured_per_node(self.analysis, self.profile, self.kernels)

    def to_dict(self) -> dict[str, Any]:
        """The analysis JSON with ``measured_time_s`` next to ``predicted_time_s`` in totals and nodes, plus the
        per-kernel comparison, the agreement statistics, the measurement and the profile's mapping."""
        data = self.analysis.to_dict()
        data["totals"]["measured_time_s"] = self.measured_time_s
        data["totals"]["measured_fast_s"] = self.measured_fast_s
        data["totals"]["predicted_at_speed_s"] = self.predicted_at_speed_s
        data["totals"]["error"] = self.model_error
        data["totals"]["uncorrected_error"] = self.uncorrected_error
        measured = self.measured_by_node()
        for node in data["nodes"]:
            node["measured_time_s"], node["measured_kernel"] = measured.get(node["name"], (None, None))
        data["validation"] = {
            "agreement": self.agreement.to_dict(),
            "model_error": self.model_error,
            "machine_speed": self.machine_speed,
            "worst": [k.name for k in self.worst()],
            "kernels": [k.to_dict() for k in self.kernels],
            "unmapped": [u.to_dict() for u in self.profile.unmapped],
        }
        data["measurement"] = self.measurement.to_dict()
        data["warnings"] = list(data["warnings"]) + list(self.warnings)
        return data


def validate(
    model: ModelSpec | Source,
    device: str | os.PathLike | Device = HOST,
    session: SessionSpec = DEFAULT_SESSION,
    *,
    as_exported: bool = False,
    feeds_path: str | os.PathLike | None = None,
    repeat: int = 30,
    runs: int = 20,
    spread_s: float = SPREAD_S,
    timeout_s: float = 300.0,
    stage: Callable[[str], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Validation:
    """Analyze, time and profile ``model`` on this machine in sessions of ``session`` and compare every kernel's
    prediction with its time (``host`` resolves to the calibration of the session's threads and provider).

    The whole model is timed in ``repeat`` samples spread over ``spread_s`` seconds; its measured latency is their
    median, as a user's timing loop reports it (the fast estimate is kept alongside). On a calibrated host the
    reference block is timed again between those samples: the machine's speed relative to its calibration
    (``machine_speed``) scales the prediction that the measurement is compared with, and a speed off by more
    than reference.DRIFT_BOUND is reported (a
    warning). Both runs take their inputs from ``feeds_path`` (an .npz) where given, random ones otherwise; the
    model spec's values are fed and written into the analysed graph."""
    say = stage or (lambda text: None)
    spec = model_spec(model)
    threads, provider = session.threads, session.provider
    dev = resolve_device(device, host=lambda: host_device(threads=threads, provider=provider, progress=progress))
    warnings = _device_warnings(dev, session)
    runnable = runnable_model(spec)  # weights read (or filled) once, for both runs
    feeds = load_feeds(feeds_path, runnable) if feeds_path is not None else None
    say("timing the whole model")
    calibrated_time = _reference_reading(dev, session)
    reference = ReferenceSampler(threads, provider) if calibrated_time is not None else None
    timing = measure(
        runnable,
        session,
        repeat=repeat,
        spread_s=spread_s,
        timeout_s=timeout_s,
        progress=progress,
        between=reference.sample if reference is not None else None,
        feeds=feeds,
    )
    say("profiling each kernel")
    profile = profile_nodes(runnable, session, runs=runs, feeds=feeds)
    speed = reference.speed(calibrated_time) if reference is not None and calibrated_time is not None else None
    if speed is not None:
        warnings.extend(filter(None, [drift_warning(speed, threads)]))
    say("predicting")
    engine_mode = named_profile(dev) is not None and not as_exported
    if engine_mode:
        ran = with_softmax_masks(load_graph(profile.engine_model, values=runnable.values), profile.engine_model)
        analysis = analyze_graph(ran, dev, engine=True)
        analysis = _renamed(analysis, timing.model)
    else:
        graph = load_graph(spec.source, inputs=spec.inputs, dims=spec.dims, reshape=at_input_shapes, values=spec.values)
        analysis = analyze_graph(graph, dev)
    kernels = compare(
        analysis, profile, engine_graph=engine_mode, profiler_overhead_s=profiler_overhead(dev), speed=speed or 1.0
    )
    counted = scored(kernels, engine_mode)
    stats = agreement([k.predicted_time_s for k in counted], [k.measured_time_s for k in counted])
    return Validation(analysis, timing, profile, tuple(kernels), stats, tuple(warnings), speed)


def _reference_reading(device: Device, session: SessionSpec) -> float | None:
    """The reference block's time when ``device`` was calibrated on this machine (None for a device without a
    reading, or calibrated on another provider or thread count than ``session``'s)."""
    c = device.calibration
    if (
        c is None
        or c.reference_time_s is None
        or c.threads != session.threads
        or not c.provider.lower().startswith(session.provider.lower())
    ):
        return None
    return c.reference_time_s


def scored(kernels: Sequence[KernelComparison], engine_graph: bool) -> list[KernelComparison]:
    """The kernels the agreement statistics are computed over. Shape-only kernels (Reshape, Flatten, ...) are left
    out: they move no data, so the time the profiler reports for them is its own per-kernel bookkeeping, which
    no prediction of their work accounts for. On the exported graph, engine-only kernels (NCHWc reorders) are
    left out too: that graph has no node for them."""
    return [k for k in kernels if not k.shape_only and not (k.engine_only and not engine_graph)]


def profiler_overhead(device: Device) -> float:
    """What onnxruntime's profiler adds to each kernel it times, beyond the per-node dispatch the prediction
    already holds (calibrated hosts record it; 0 elsewhere)."""
    c = device.calibration
    extra = (c.profiler_overhead or 0.0) - device.launch_overhead.value if c is not None else 0.0
    return max(extra, 0.0)


def compare(
    analysis: Analysis, profile: NodeProfile, engine_graph: bool, profiler_overhead_s: float = 0.0, speed: float = 1.0
) -> list[KernelComparison]:
    """Pair each timed kernel with its prediction: the same-named node of the analyzed engine graph, or the sum
    over the exported nodes the kernel covers, plus ``profiler_overhead_s`` (what the profiler adds to every
    kernel it times, so that both sides are read on the same clock), over ``speed`` (the machine's speed when
    measured relative to its calibration). Sorted by measured time, longest first."""
    nodes = {n.name: n for n in analysis.nodes}
    out = []
    for kernel in profile.nodes:
        if kernel.fast_s is None:
            continue
        members = (
            [nodes[kernel.name]]
            if engine_graph and kernel.name in nodes
            else [nodes[c] for c in kernel.covers if c in nodes]
        )
        predicted = (sum(n.prediction.predicted_time_s for n in members) + profiler_overhead_s) / speed
        flops = sum(n.cost.flops for n in members)
        moved = sum(n.cost.bytes_read + n.cost.bytes_written for n in members)
        bound = members[0].prediction.bound if len(members) == 1 else _dominant_bound(members)
        note = members[0].engine if engine_graph and members else None
        explanation = _with_reason(note) if note is not None else _as_exported(members)
        out.append(
            KernelComparison(
                kernel.name,
                _qualified(kernel.domain, kernel.op_type),
                kernel.covers,
                predicted,
                kernel.fast_s,
                flops,
                moved,
                bound,
                explanation,
                kernel.engine_only,
                kernel.floor_dominated,
                shape_only=bool(members) and flops == 0 and moved == 0,
            )
        )
    return sorted(out, key=lambda k: -k.measured_time_s)


def _with_reason(note: EngineNote) -> str:
    """An engine note's line, and why the node has its op class where the note says."""
    return f"{note.describe()}; class: {note.reason}" if note.reason else note.describe()


def _as_exported(members: Sequence[NodeResult]) -> str:
    if not members:
        return "no exported node: an engine-only kernel, predicted 0"
    if len(members) == 1:
        return "plain roofline of the exported node"
    return f"plain roofline, sum of {len(members)} exported nodes run as one kernel"


def _dominant_bound(members: Sequence[NodeResult]) -> str:
    times: dict[str, float] = {}
    for n in members:
        times[n.prediction.bound] = times.get(n.prediction.bound, 0.0) + n.prediction.predicted_time_s
    return max(times, key=times.__getitem__) if times else "none"


def _qualified(domain: str, op_type: str) -> str:
    return f"{domain}::{op_type}" if domain else op_type


def _measured_per_node(
    analysis: Analysis, profile: NodeProfile, kernels: Sequence[KernelComparison]
) -> dict[str, tuple[float, str]]:
    """Node name -> (measured seconds, kernel name). A kernel's time goes to the node it is named after or, for
    an exported graph, to the last node it covers (the one whose output it writes); the other nodes it covers
    get 0 with the same kernel name, so that node times add up to the kernels'."""
    names = {n.name for n in analysis.nodes}
    out: dict[str, tuple[float, str]] = {}
    for k in kernels:
        if k.name in names:
            out[k.name] = (k.measured_time_s, k.name)
            continue
        covered = [c for c in k.covers if c in names]
        for c in covered:
            out[c] = (0.0, k.name)
        if covered:
            out[covered[-1]] = (k.measured_time_s, k.name)
    return out


def _renamed(analysis: Analysis, name: str) -> Analysis:
    return replace(analysis, model=name)


def _device_warnings(dev: Device, session: SessionSpec) -> list[str]:
    """Say when the profile was calibrated for another thread count or provider than the session measured."""
    c = dev.calibration
    if c is None:
        return []
    out = []
    if c.threads != session.threads:
        out.append(f"device {dev.key} was calibrated at {c.threads} thread(s), the model runs at {session.threads}")
    if not c.provider.lower().startswith(session.provider.lower()):
        out.append(f"device {dev.key} was calibrated on {c.provider}, the model runs on {session.provider}")
    return out
