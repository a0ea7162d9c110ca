"""Two models side by side: totals, per-layer deltas, predicted speedup per device, measured speedup here.

Layers are matched by name; a layer of A whose name prefixes layers of B (``conv1`` -> ``conv1.depthwise``,
``conv1.pointwise``, as a rewrite names what it makes) is matched to all of them; the rest are matched by position
among the unmatched layers of the same op type, and what is left is listed as only in A or only in B.

A speedup is ``time(A) / time(B)``: above 1, B is faster. A predicted speedup agrees with a measured one in
direction when both are on the same side of 1, or when the measured change is within MEASURED_NOISE (no change
beyond the noise of a shared machine) and the prediction is within PREDICTED_FLAT of 1; in size when the predicted
speedup is within SIZE_TOLERANCE of the measured one (relative).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onnx import ModelProto

from onnxroof.devices import Device
from onnxroof.predict.analysis import Analysis, NodeResult

__all__ = [
    "MEASURED_NOISE",
    "PREDICTED_FLAT",
    "SIZE_TOLERANCE",
    "Comparison",
    "DeviceSpeedup",
    "LayerDelta",
    "MeasuredSpeedup",
    "Side",
    "compare",
    "direction_agrees",
    "match_layers",
    "size_agrees",
]

MEASURED_NOISE = 0.03  # a measured speedup within 3% of 1 is no change on a shared machine
PREDICTED_FLAT = 0.10  # ... and then a prediction within 10% of 1 agrees with it
SIZE_TOLERANCE = 0.20  # the predicted speedup within 20% of the measured one


def direction_agrees(predicted: float, measured: float) -> bool:
    """Whether a predicted speedup gets the measured one's direction (see the module docstring)."""
    if abs(math.log(measured)) < math.log1p(MEASURED_NOISE):
        return abs(math.log(predicted)) < math.log1p(PREDICTED_FLAT)
    return (predicted > 1) == (measured > 1)


def size_agrees(predicted: float, measured: float) -> bool:
    """Whether a predicted speedup is within SIZE_TOLERANCE of the measured one."""
    return abs(predicted / measured - 1) <= SIZE_TOLERANCE


@dataclass(frozen=True)
class Side:
    """One model's totals on the first device."""

    name: str
    flops: float
    bytes_moved: float
    params: int
    nodes: int
    intensity: float
    uncounted: int = 0  # nodes not counted in full (Totals.uncounted): the totals are then lower bounds

    @property
    def complete(self) -> bool:
        return self.uncounted == 0

    @classmethod
    def of(cls, analysis: Analysis) -> Side:
        t = analysis.totals
        return cls(
            analysis.model,
            t.flops,
            t.bytes_read + t.bytes_written,
            t.params,
            len(analysis.nodes),
            t.arithmetic_intensity,
            t.uncounted,
        )


@dataclass(frozen=True)
class LayerDelta:
    """Layers matched between A and B: names, op types, FLOPs and predicted times on the first device."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    op_a: str
    op_b: str
    flops_a: float
    flops_b: float
    time_a_s: float
    time_b_s: float
    matched_by: str  # name, prefix, position, only-a, only-b

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class DeviceSpeedup:
    """Predicted times of A and B on one device, with their bounds."""

    device: str
    graph: str
    time_a_s: float
    time_b_s: float
    bound_a: str
    bound_b: str

    @property
    def speedup(self) -> float:
        return self.time_a_s / self.time_b_s if self.time_b_s else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "speedup": self.speedup}


@dataclass(frozen=True)
class MeasuredSpeedup:
    """Both models timed here (the idle-machine estimate of each, alternating A and B), against the prediction
    for this machine's calibrated profile."""

    time_a_s: float
    time_b_s: float
    predicted_a_s: float
    predicted_b_s: float
    threads: int

    @property
    def speedup(self) -> float:
        return self.time_a_s / self.time_b_s

    @property
    def predicted(self) -> float:
        return self.predicted_a_s / self.predicted_b_s

    @property
    def direction_right(self) -> bool:
        return direction_agrees(self.predicted, self.speedup)

    @property
    def size_right(self) -> bool:
        return size_agrees(self.predicted, self.speedup)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "speedup": self.speedup,
            "predicted_speedup": self.predicted,
            "direction_right": self.direction_right,
            "size_right": self.size_right,
        }


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    devices: tuple[DeviceSpeedup, ...]
    layers: tuple[LayerDelta, ...]
    measured: MeasuredSpeedup | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": {**self.a.__dict__, "complete": self.a.complete},
            "b": {**self.b.__dict__, "complete": self.b.complete},
            "devices": [d.to_dict() for d in self.devices],
            "layers": [layer.to_dict() for layer in self.layers],
            "measured": self.measured.to_dict() if self.measured else None,
        }


def match_layers(a: Sequence[NodeResult], b: Sequence[NodeResult]) -> list[LayerDelta]:
    """Pair the nodes of A and B (see the module docstring), in A's order, then B's unmatched ones."""
    b_by_name = {n.name: n for n in b}
    used: set[str] = set()
    out: list[LayerDelta | None] = []
    pending: list[NodeResult] = []
    for node in a:
        if node.name and node.name in b_by_name and node.name not in used:
            used.add(node.name)
            out.append(_delta([node], [b_by_name[node.name]], "name"))
            continue
        grown = [m for m in b if node.name and m.name.startswith(node.name + ".") and m.name not in used]
        if grown:
            used.update(m.name for m in grown)
            out.append(_delta([node], grown, "prefix"))
            continue
        pending.append(node)
        out.append(None)  # filled by position below
    rest_b = [m for m in b if m.name not in used]
    by_op: dict[str, list[NodeResult]] = {}
    for m in rest_b:
        by_op.setdefault(m.op_type, []).append(m)
    filled = iter(pending)
    result: list[LayerDelta] = []
    taken: set[int] = set()
    for item in out:
        if item is not None:
            result.append(item)
            continue
        node = next(filled)
        candidates = by_op.get(node.op_type, [])
        if candidates:
            match = candidates.pop(0)
            taken.add(id(match))
            result.append(_delta([node], [match], "position"))
        else:
            result.append(_delta([node], [], "only-a"))
    result += [_delta([], [m], "only-b") for m in rest_b if id(m) not in taken]
    return result


def _delta(a: Sequence[NodeResult], b: Sequence[NodeResult], how: str) -> LayerDelta:
    return LayerDelta(
        tuple(n.name for n in a),
        tuple(n.name for n in b),
        "+".join(sorted({n.op_type for n in a})),
        "+".join(sorted({n.op_type for n in b})),
        sum(n.cost.flops for n in a),
        sum(n.cost.flops for n in b),
        sum(n.prediction.predicted_time_s for n in a),
        sum(n.prediction.predicted_time_s for n in b),
        how,
    )


Model = str | os.PathLike[str] | ModelProto


def compare(
    a: Model,
    b: Model,
    devices: Sequence[str],
    *,
    measure: bool = False,
    threads: int = 1,
    repeat: int = 20,
    here: str | Device = "host",
    feeds_path: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """Compare ``a`` and ``b`` on each of ``devices`` (the first gives the per-layer table) and, with
    ``measure``, time both here at ``threads`` threads (on the inputs at ``feeds_path`` where given) against the
    prediction for ``here``, this machine's device (its calibrated profile by default)."""
    from onnxroof.api import analyze

    say = progress or (lambda _: None)
    speedups = []
    first: tuple[Analysis, Analysis] | None = None
    for device in devices:
        say(f"analyzing on {device}")
        pa, pb = analyze(a, device, threads=threads), analyze(b, device, threads=threads)
        first = first or (pa, pb)
        speedups.append(
            DeviceSpeedup(
                pa.device.spec(),
                pa.graph,
                pa.totals.predicted_time_s,
                pb.totals.predicted_time_s,
                pa.totals.bound,
                pb.totals.bound,
            )
        )
    assert first is not None, "compare needs at least one device"
    measured = None
    if measure:
        say("predicting on this machine's calibrated profile")
        ha, hb = analyze(a, here, threads=threads), analyze(b, here, threads=threads)
        say("timing both models here")
        ta, tb = time_pair(a, b, threads=threads, repeat=repeat, feeds_path=feeds_path)
        measured = MeasuredSpeedup(ta, tb, ha.totals.predicted_time_s, hb.totals.predicted_time_s, threads)
    layers = tuple(match_layers(first[0].nodes, first[1].nodes))
    return Comparison(Side.of(first[0]), Side.of(first[1]), tuple(speedups), layers, measured)


def time_pair(
    a: Model,
    b: Model,
    *,
    threads: int = 1,
    repeat: int = 20,
    rounds: int = 2,
    feeds_path: str | os.PathLike[str] | None = None,
) -> tuple[float, float]:
    """Both models timed in alternating rounds on this machine, on random inputs or both on the .npz at
    ``feeds_path``; each one's best idle-machine estimate (the fastest rounds are the quiet ones on a shared
    machine)."""
    from onnxroof.ort.measure import measure
    from onnxroof.ort.session_spec import SessionSpec
    from onnxroof.ort.sessions import load_feeds, runnable_model

    models = [runnable_model(a), runnable_model(b)]
    feeds = [load_feeds(feeds_path, m) if feeds_path is not None else None for m in models]
    best = [math.inf, math.inf]
    for _ in range(rounds):
        for i, model in enumerate(models):
            timing = measure(model, SessionSpec(threads=threads), repeat=repeat, warmup=3, feeds=feeds[i])
            best[i] = min(best[i], timing.fast_s)
    return best[0], best[1]
