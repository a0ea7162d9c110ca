"""Cost functions: control flow (If, Loop, Scan).

A control-flow node costs what its subgraphs run. The caller hands each node a ``cost_subgraph(attr_name)``
callback that costs the graph held in that attribute (kernels included); this module decides how many times each
subgraph runs and says so in the Cost's note whenever it had to choose or guess:

- If: the branch taken when the condition is a known constant, else the costlier branch (by FLOPs, then bytes),
  with a note naming it: a roofline wants the worst case, and a branch never taken costs nothing.
- Loop: the body x the trip count when that count is known at analysis time; one iteration, flagged in the note,
  when it is not. The count is never silently assumed.
- Scan: the body x the length of the scan axis of the first scan input.
"""

from __future__ import annotations

import numpy as np

from onnxroof.costs import OTHER, Cost, NodeView, register
from onnxroof.costs.common import UNKNOWN_TRIPS_NOTE, subgraph_coster
from onnxroof.ir import UnknownShape

__all__ = ["if_", "loop", "scan"]


def _scalar(value: np.ndarray | None) -> float | None:
    """A constant input's single value, or None when it is not a known one-element constant."""
    if value is None or value.size != 1:
        return None
    return value.reshape(-1)[0].item()


@register("If", engine=OTHER)
def if_(node: NodeView) -> Cost:
    """If: the branch a constant condition selects, else the costlier of then_branch and else_branch, compared
    by FLOPs and then by bytes. The note says which branch was counted and why."""
    cost_subgraph = subgraph_coster(node)
    cond = _scalar(node.constant(0))
    if cond is not None:
        branch = "then_branch" if cond else "else_branch"
        return cost_subgraph(branch).with_note(f"condition is constant {bool(cond)}: {branch} counted")
    then_cost, else_cost = cost_subgraph("then_branch"), cost_subgraph("else_branch")
    if (else_cost.flops, else_cost.bytes) > (then_cost.flops, then_cost.bytes):
        return else_cost.with_note("else_branch counted: the costlier branch")
    return then_cost.with_note("then_branch counted: the costlier branch")


@register("Loop", engine=OTHER)
def loop(node: NodeView) -> Cost:
    """Loop: the body's cost x the trip count.

    The count is input 0 (M) when it is a known constant. A constant initial condition of false runs no
    iteration. When M is known and a condition input is present, the body's own condition may stop the loop
    earlier: M is then an upper bound and the note says so. When M is absent or not a constant, one iteration is
    counted and the note says ``trip count unknown: one iteration counted``.
    """
    cost_subgraph = subgraph_coster(node)
    body = cost_subgraph("body")
    cond_known = _scalar(node.constant(1))
    if cond_known is not None and not cond_known:
        return (body * 0).with_note("initial condition is constant false: no iteration runs")
    trips = _scalar(node.constant(0)) if node.input(0) is not None else None
    if trips is None:
        return body.with_note(UNKNOWN_TRIPS_NOTE)
    trips = max(int(trips), 0)
    cost = body * trips
    if node.input(1) is not None and cond_known is None:
        return cost.with_note(f"{trips} iterations counted: the trip count M, an upper bound the condition may cut")
    return cost


@register("Scan", engine=OTHER)
def scan(node: NodeView) -> Cost:
    """Scan (opset 9 and later): the body's cost x the sequence length, the size of the first scan input along
    its scan axis (``scan_input_axes[0]``, default 0). The scan inputs are the last ``num_scan_inputs`` inputs.
    When that length is unknown, one iteration is counted and the note says so."""
    cost_subgraph = subgraph_coster(node)
    body = cost_subgraph("body")
    num_scan_inputs = int(node.attr("num_scan_inputs", 0))
    if num_scan_inputs <= 0 or num_scan_inputs > len(node.inputs):
        raise UnknownShape(f"{node.name}: Scan has num_scan_inputs={num_scan_inputs} and {len(node.inputs)} inputs")
    first = node.inputs[len(node.inputs) - num_scan_inputs]
    if first is None or not first.known:
        return body.with_note("sequence length unknown: " + UNKNOWN_TRIPS_NOTE)
    axes = node.attr("scan_input_axes")
    shape = first.need_shape()
    axis = int(axes[0]) % len(shape) if axes is not None and len(axes) else 0
    return body * shape[axis]
