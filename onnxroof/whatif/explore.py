"""Every rewrite that applies to a model, ranked by the time it is predicted to save on a device.

Each candidate of CANDIDATES is applied to the model; one that does not apply is listed with the pass's reason.
The ones that apply are analyzed on the device and ranked by predicted speedup (time before / time after). On a
calibrated host the prediction is made on the graph onnxruntime runs, so the Casts its CPU provider inserts
around ops without fp16 kernels and the dynamic quantization of int8 convolutions are predicted, not discovered.
With ``measure`` the top candidates are also timed here against the original, beside this machine's prediction.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onnx import ModelProto

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.passes import Refused
from onnxroof.whatif.compare import direction_agrees, size_agrees, time_pair
from onnxroof.whatif.rewrite import LWU, RewriteRequest, apply_request

__all__ = ["CANDIDATES", "EFFECTS", "Candidate", "Exploration", "explore", "touched_nodes"]

# The rewrites explore tries, by the name its table shows.
CANDIDATES: dict[str, RewriteRequest] = {
    "separable": RewriteRequest(separable=()),
    "lwu": RewriteRequest(strides=LWU),
    "fp16": RewriteRequest(fp16=True, keep_io_types=True),
    "int8-dynamic": RewriteRequest(int8="dynamic"),
    "int8-static": RewriteRequest(int8="static"),
}

# What each candidate does to the model's outputs: what a user weighs against its speedup.
EFFECTS: dict[str, str] = {
    "separable": "approximates each kernel (rank-1 per channel); fine-tune after",
    "lwu": "a different network (skips at half resolution); retrain",
    "fp16": "rounds weights and activations to fp16",
    "int8-dynamic": "quantizes weights, activations at run time",
    "int8-static": "quantizes weights and activations (calibrated)",
}


@dataclass(frozen=True)
class Candidate:
    """One rewrite: the layers it touches and its predicted (and, when timed, measured) times before and after.
    ``refused`` holds the reason where it does not apply."""

    name: str
    command: str
    layers: tuple[str, ...] = ()
    before_s: float = 0.0
    after_s: float = 0.0
    bound_after: str = ""
    refused: str | None = None
    host_before_s: float | None = None
    host_after_s: float | None = None
    measured_before_s: float | None = None
    measured_after_s: float | None = None

    @property
    def predicted_speedup(self) -> float:
        return self.before_s / self.after_s if self.after_s else math.nan

    @property
    def measured_speedup(self) -> float | None:
        if self.measured_before_s is None or not self.measured_after_s:
            return None
        return self.measured_before_s / self.measured_after_s

    @property
    def host_speedup(self) -> float | None:
        if self.host_before_s is None or not self.host_after_s:
            return None
        return self.host_before_s / self.host_after_s

    def to_dict(self) -> dict[str, Any]:
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}
        data["predicted_speedup"] = None if self.refused else self.predicted_speedup
        data["host_predicted_speedup"] = self.host_speedup
        data["measured_speedup"] = self.measured_speedup
        if self.measured_speedup is not None and self.host_speedup is not None:
            data["direction_right"] = direction_agrees(self.host_speedup, self.measured_speedup)
            data["size_right"] = size_agrees(self.host_speedup, self.measured_speedup)
        return data


@dataclass(frozen=True)
class Exploration:
    """The candidates ranked; ``graph_only`` where the model's weights are absent, so that every rewrite was made
    on shapes alone (its weights absent too) and those that need values were refused."""

    model: str
    device: str
    graph: str
    baseline_s: float
    candidates: tuple[Candidate, ...]  # those that apply, best first; then those refused
    graph_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "graph": self.graph,
            "baseline_s": self.baseline_s,
            "graph_only": self.graph_only,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def explore(
    model: str | os.PathLike[str],
    device: str,
    *,
    measure: int = 0,
    threads: int = 1,
    only: tuple[str, ...] = (),
    here: str | Device = "host",
    feeds_path: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Exploration:
    """Try every candidate (or those named in ``only``) on ``model`` and rank them on ``device``; with
    ``measure`` N, time the N best here against the prediction for ``here``, this machine's device (its
    calibrated profile by default), on the inputs at ``feeds_path`` where given."""
    from onnxroof.api import analyze, get_device
    from onnxroof.passes.model_file import read_source

    unknown = [name for name in only if name not in CANDIDATES]
    if unknown:
        raise UserError(f"unknown rewrite {unknown[0]!r}", "choose from " + ", ".join(CANDIDATES))
    say = progress or (lambda _: None)
    target = get_device(device, threads)
    source = read_source(model)
    say(f"analyzing {source.name} on {device}")
    base = analyze(source.model, target, threads=threads)
    applied, refused = [], []
    variants = {}
    for name in only or tuple(CANDIDATES):
        request = CANDIDATES[name]
        command = " ".join(request.describe())
        say(f"rewriting: {command}")
        try:
            done = apply_request(source, request, compare_outputs=False)
        except Refused as exc:
            refused.append(Candidate(name, command, refused=exc.message))
            continue
        if not done.result.changed:
            refused.append(Candidate(name, command, refused="nothing to change"))
            continue
        say(f"analyzing {name} on {device}")
        after = analyze(done.result.model, target, threads=threads)
        layers = touched_nodes(source.model, done.result.model)
        variants[name] = done.result
        applied.append(
            Candidate(
                name,
                command,
                layers,
                base.totals.predicted_time_s,
                after.totals.predicted_time_s,
                after.totals.bound,
            )
        )
    applied.sort(key=lambda c: -c.predicted_speedup)
    if measure:
        applied = _measured(source, applied, variants, Timing(measure, threads, here, feeds_path), say)
    ranked = tuple(applied + refused)
    return Exploration(
        source.name, base.device.key, base.graph, base.totals.predicted_time_s, ranked, source.graph_only
    )


def touched_nodes(before: ModelProto, after: ModelProto) -> tuple[str, ...]:
    """The nodes of ``before`` that a rewrite changed: gone, or with another op, attributes or inputs, or reading
    or writing a tensor of another dtype (an fp16 conversion keeps every node but changes its tensors)."""
    old_types, new_types = _dtypes(before), _dtypes(after)
    rewritten = {n.name: n for n in after.graph.node}
    touched = []
    for node in before.graph.node:
        new = rewritten.get(node.name)
        same = (
            new is not None
            and new.op_type == node.op_type
            and list(new.input) == list(node.input)
            and list(new.attribute) == list(node.attribute)
            and all(old_types.get(t) == new_types.get(t) for t in list(node.input) + list(node.output))
        )
        if not same:
            touched.append(node.name)
    return tuple(touched)


def _dtypes(model: ModelProto) -> dict[str, int]:
    """Every tensor's element type, after onnx's shape inference on the model without its weights' bytes."""
    import onnx

    from onnxroof.load.read import read_model

    lean, _ = read_model(model, weight_bytes=False)
    inferred = onnx.shape_inference.infer_shapes(lean)
    graph = inferred.graph
    types = {i.name: i.data_type for i in graph.initializer}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    return types


@dataclass(frozen=True)
class Timing:
    """How the best candidates are timed: how many, at how many threads, predicted for which device of this
    machine, on which inputs (random where None)."""

    count: int
    threads: int
    here: str | Device
    feeds_path: str | os.PathLike[str] | None = None


def _measured(
    source: Any, ranked: list[Candidate], variants: dict[str, Any], timing: Timing, say: Callable[[str], None]
) -> list[Candidate]:
    """The ``timing.count`` best runnable candidates timed here against the original, with this machine's
    prediction."""
    from dataclasses import replace

    from onnxroof.api import analyze

    if source.graph_only:
        raise UserError(
            f"{source.name} has no weights (graph-only), so its rewrites cannot be timed",
            "put the weight file beside the model, or drop --measure",
        )
    say("predicting on this machine's calibrated profile")
    host_before = analyze(source.model, timing.here, threads=timing.threads).totals.predicted_time_s
    out = []
    for i, candidate in enumerate(ranked):
        if i >= timing.count:
            out.append(candidate)
            continue
        say(f"timing {candidate.name} against the original ({i + 1}/{min(timing.count, len(ranked))})")
        variant = variants[candidate.name].model
        host_after = analyze(variant, timing.here, threads=timing.threads).totals.predicted_time_s
        before, after = time_pair(source.model, variant, threads=timing.threads, feeds_path=timing.feeds_path)
        out.append(
            replace(
                candidate,
                host_before_s=host_before,
                host_after_s=host_after,
                measured_before_s=before,
                measured_after_s=after,
            )
        )
    return out
