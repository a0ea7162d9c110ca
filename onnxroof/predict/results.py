"""What an analysis produces: each node's result, the totals, the totals by op type, the nodes that could not be
costed exactly, and the Analysis that holds them. ``Analysis.to_dict`` is the JSON contract."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from onnxroof.costs import Cost
from onnxroof.devices import Device
from onnxroof.predict import roofline
from onnxroof.predict.engine import EngineNote
from onnxroof.predict.roofline import Prediction

__all__ = ["Analysis", "NodeResult", "OpTypeTotals", "Totals", "Uncounted", "Unsupported"]


class NodeResult(NamedTuple):
    """One runtime node: its cost, the precision it computes at, and its place on the device's roofline.

    A named tuple rather than a dataclass: immutable like a frozen one, and built per node (tens of thousands on a
    large graph) by a C-level constructor, with no Python-level __init__ to run.
    """

    name: str
    op_type: str
    domain: str
    precision: str
    cost: Cost
    prediction: Prediction
    supported: bool = True
    engine: EngineNote | None = None  # why an engine-aware prediction is what it is (calibrated hosts only)
    output_shape: tuple[int, ...] | None = None  # the node's first output's, None where unknown

    def to_dict(self) -> dict[str, Any]:
        """The node's part of the JSON contract: name first, then what follows from op type, domain, output
        shape, cost, prediction, support and engine note alone (the JSON text of nodes that share these is made
        once)."""
        c, p = self.cost, self.prediction
        return {
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "output_shape": None if self.output_shape is None else list(self.output_shape),
            "precision": p.precision,
            "flops": c.flops,
            "macs": c.macs,
            "bytes_read": c.bytes_read,
            "bytes_written": c.bytes_written,
            "params": c.params,
            "kernels": c.kernels,
            "arithmetic_intensity": c.arithmetic_intensity,
            "attainable_flops_s": roofline.attainable_flops(
                c.arithmetic_intensity, p.peak_flops_s, p.bandwidth_bytes_s
            ),
            "ridge_point": p.ridge_point,
            "bound": p.bound,
            "compute_time_s": p.compute_time_s,
            "memory_time_s": p.memory_time_s,
            "overhead_time_s": p.overhead_time_s,
            "predicted_time_s": p.predicted_time_s,
            "supported": self.supported,
            "note": c.note,
            "engine": None if self.engine is None else self.engine.to_dict(),
        }


@dataclass(frozen=True)
class Totals:
    """The whole model: summed cost and time terms, distinct params, accumulated intensity (paper 000)."""

    flops: float
    macs: float
    bytes_read: float
    bytes_written: float
    params: int
    kernels: int
    prediction: Prediction
    time_by_bound: Mapping[str, float] = field(default_factory=dict)
    # Nodes (at any depth of subgraphs) whose FLOPs could not be counted, for want of a shape or a cost function:
    # the sums hold the bytes of their known tensors only, so they are lower bounds (Analysis.uncounted names them).
    uncounted: int = 0

    @property
    def complete(self) -> bool:
        """Whether every node was counted in full, so that the sums are the model's and not a lower bound."""
        return self.uncounted == 0

    @property
    def arithmetic_intensity(self) -> float:
        moved = self.bytes_read + self.bytes_written
        return self.flops / moved if moved else 0.0

    @property
    def predicted_time_s(self) -> float:
        return self.prediction.predicted_time_s

    @property
    def bound(self) -> str:
        return self.prediction.bound

    def to_dict(self) -> dict[str, Any]:
        p = self.prediction
        return {
            "flops": self.flops,
            "macs": self.macs,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "params": self.params,
            "kernels": self.kernels,
            "arithmetic_intensity": self.arithmetic_intensity,
            "attainable_flops_s": roofline.attainable_flops(
                self.arithmetic_intensity, p.peak_flops_s, p.bandwidth_bytes_s
            ),
            "ridge_point": p.ridge_point,
            "precision": p.precision,
            "compute_time_s": p.compute_time_s,
            "memory_time_s": p.memory_time_s,
            "overhead_time_s": p.overhead_time_s,
            "predicted_time_s": p.predicted_time_s,
            "bound": p.bound,
            "time_by_bound": dict(self.time_by_bound),
            "complete": self.complete,
            "uncounted": self.uncounted,
        }


@dataclass(frozen=True)
class OpTypeTotals:
    """Costs and time of every node of one op type (paper 000 Figs. 3-4, paper 004 Fig. 8)."""

    op_type: str
    count: int
    flops: float
    macs: float
    bytes_read: float
    bytes_written: float
    params: int
    predicted_time_s: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Unsupported:
    """Nodes that could not be costed exactly, by op and reason; they are still charged their tensor bytes."""

    op_type: str
    domain: str
    count: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Uncounted:
    """One node not counted in full: its FLOPs left out, its tensors charged where their shapes are known.
    ``reason`` is "shape unknown" or "no cost function"; a node inside a subgraph is named by its path from the
    top-level node that holds it (``loop/body_matmul``)."""

    name: str
    op_type: str
    domain: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


ROOFLINE_INCLUDES = "each node's roofline time on the device's figures, summed"


@dataclass(frozen=True)
class Analysis:
    """Everything ``onnxroof analyze`` reports; ``to_dict`` is the JSON contract."""

    model: str
    device: Device
    precision: str
    totals: Totals
    nodes: tuple[NodeResult, ...]
    by_op_type: tuple[OpTypeTotals, ...]
    unsupported: tuple[Unsupported, ...]
    folded_nodes: int = 0
    warnings: tuple[str, ...] = field(default_factory=tuple)
    graph: str = "as-exported"  # or "onnxruntime-optimized": the graph the engine runs, after its fusions
    uncounted: tuple[Uncounted, ...] = ()  # the nodes behind totals.uncounted, in graph order
    includes: str = ROOFLINE_INCLUDES  # what the predicted time holds, as the engine's profile says
    fused: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # a fused kernel's name -> its graph nodes

    @property
    def complete(self) -> bool:
        return self.totals.complete

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "graph": self.graph,
            "device": {
                "key": self.device.key,
                "name": self.device.name,
                "label": self.device.label(),
                "calibration": None if self.device.calibration is None else asdict(self.device.calibration),
                "peak_flops_s": self.totals.prediction.peak_flops_s,
                "memory_bandwidth_bytes_s": self.device.memory_bandwidth.value,
                "launch_overhead_s": self.device.launch_overhead.value,
                "run_overhead_s": self.device.run_overhead.value if self.device.run_overhead else 0.0,
                "engine": self.device.engine,
                "engine_release": self.device.engine_release,
                "overlap": self.device.overlap,
            },
            "includes": self.includes,
            "precision": self.precision,
            "totals": self.totals.to_dict(),
            "nodes": [n.to_dict() for n in self.nodes],
            "by_op_type": [o.to_dict() for o in self.by_op_type],
            "unsupported": [u.to_dict() for u in self.unsupported],
            "uncounted_nodes": [u.to_dict() for u in self.uncounted],
            "folded_nodes": self.folded_nodes,
            "fused_kernels": {name: list(nodes) for name, nodes in self.fused.items()},
            "warnings": list(self.warnings),
        }
