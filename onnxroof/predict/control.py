"""An If on a calibrated host: the nodes of the branch it runs, each under its own class's ceiling, plus what the If
itself adds (the device's ``branch_overhead``: the execution of a subgraph, its frame and its outputs passed out).

onnxruntime runs an If's branch as a graph of its own, node by node: its kernels are the branch's Convs, LSTMs and
Gemms, each as fast as its class runs anywhere else, not the whole branch's FLOPs and bytes at the device's plain
peak and bandwidth. The branch is the one a constant condition selects, else the slower one as predicted: the worst
case, as the If's cost counts its costlier branch.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from onnxroof.costs import OTHER, Cost, NodeView
from onnxroof.devices import Device
from onnxroof.ir import Graph, Node
from onnxroof.predict import roofline
from onnxroof.predict.engine import EngineNote, predict_engine
from onnxroof.predict.profiles import EngineProfile
from onnxroof.predict.roofline import Prediction
from onnxroof.predict.terms import InModel

__all__ = ["BRANCHES", "branch_of", "if_prediction", "node_engine", "summed"]

# A branch's own analysis: its nodes' results, each with its ``prediction`` (``analysis._analyze_graph`` on the
# calibrated host, which the analysis hands over: this module sits below it).
BranchAnalysis = Callable[[Graph], Any]


def node_engine(
    node: Node,
    view: NodeView,
    cost: Cost,
    precision: str,
    device: Device,
    around: InModel,
    analyze_branch: BranchAnalysis,
    profile: EngineProfile | None = None,
) -> tuple[Prediction, EngineNote]:
    """A node's engine prediction: an If's from its branches (each analyzed by ``analyze_branch``), any other
    node's from ``predict_engine`` at its place in the model, ``around``, on ``profile`` (None: the device's)."""
    if node.op_type != "If" or node.domain or not node.subgraphs:
        return predict_engine(view, cost, precision, device, around, profile)
    branches = {}
    for name, branch in node.subgraphs.items():
        with warnings.catch_warnings():  # what the branch's nodes cannot cost, the If's own cost warned of
            warnings.simplefilter("ignore")
            results = analyze_branch(branch).nodes
        branches[name] = summed([r.prediction for r in results], device)
    return if_prediction(view, device, branches)


def summed(predictions: Sequence[Prediction], device: Device) -> Prediction:
    """The nodes' predictions as one: each term and the time summed (the run overhead apart: a branch runs inside
    the model's run), the fastest peak and bandwidth any of them ran under."""

    def total(term: str) -> float:
        return sum(getattr(p, term) for p in predictions)

    compute, memory, overhead = total("compute_time_s"), total("memory_time_s"), total("overhead_time_s")
    return Prediction(
        compute_time_s=compute,
        memory_time_s=memory,
        overhead_time_s=overhead,
        predicted_time_s=total("predicted_time_s"),
        bound=roofline.bound_of(compute, memory, overhead),
        peak_flops_s=max((p.peak_flops_s for p in predictions), default=device.peak("fp32")[0]),
        bandwidth_bytes_s=max((p.bandwidth_bytes_s for p in predictions), default=device.memory_bandwidth.value),
        precision=predictions[0].precision if predictions else "fp32",
        epilogue_time_s=total("epilogue_time_s"),
    )


BRANCHES = ("then_branch", "else_branch")


def branch_of(view: NodeView, branches: Mapping[str, Prediction]) -> str:
    """The branch an If's prediction follows: the one its constant condition selects, else the slower one."""
    value = view.constant(0)
    if value is not None and value.size == 1:
        return BRANCHES[0] if bool(value.reshape(-1)[0]) else BRANCHES[1]
    return max(BRANCHES, key=lambda name: branches[name].predicted_time_s if name in branches else -1.0)


def if_prediction(view: NodeView, device: Device, branches: Mapping[str, Prediction]) -> tuple[Prediction, EngineNote]:
    """The If's prediction from each branch's, the sum of its nodes' engine predictions (``branches``, by attribute
    name): the chosen branch's compute, memory and overhead terms, its overhead plus the device's branch_overhead,
    its time plus the same."""
    name = branch_of(view, branches)
    inner = branches[name]
    own = device.branch_overhead.value if device.branch_overhead is not None else 0.0
    prediction = Prediction(
        compute_time_s=inner.compute_time_s,
        memory_time_s=inner.memory_time_s,
        overhead_time_s=inner.overhead_time_s + own,
        predicted_time_s=inner.predicted_time_s + own,
        bound=roofline.bound_of(inner.compute_time_s, inner.memory_time_s, inner.overhead_time_s + own),
        peak_flops_s=inner.peak_flops_s,
        bandwidth_bytes_s=inner.bandwidth_bytes_s,
        precision=inner.precision,
        epilogue_time_s=inner.epilogue_time_s,
    )
    note = EngineNote(
        op_class=OTHER,
        reason="",
        ceiling=None,
        compute_efficiency=1.0,
        memory_efficiency=1.0,
        level="-",
        level_bandwidth=0.0,
        working_set=0.0,
        weight_bytes=0.0,
        branch=name,
        branch_overhead_s=own,
    )
    return prediction, note
