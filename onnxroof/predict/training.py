"""A training step's estimate: per layer forward and backward cost and time, the optimizer update, and the memory a
step holds.

Time: each node's forward cost is the analysis's (``analyze_graph``); its backward cost is the op's backward rule
(``onnxroof.costs.backward_cost``), both placed on the device's roofline (``predict.roofline``) at the node's
precision. The optimizer update is one memory-bound pass over the parameters: it reads the weights, gradients
and optimizer state and writes the weights and state. Step time = forward + backward + update.

Memory: weights + gradients (one per trained weight) + optimizer state (``OPTIMIZER_STATE``: 0, 1 or 2 copies of the
weights) + the activations kept for the backward. Mixed precision keeps fp16 weights and gradients, an fp32 master
copy of the weights, and the optimizer state at fp32 (with Adam, 2 + 2 + 4 + 8 = 16 bytes per parameter, the count
of Rajbhandari et al., "ZeRO", 2020). Activations: every forward activation is kept, as PyTorch's autograd keeps
each layer's inputs: the graph's inputs and every runtime node's outputs, each once, except the outputs of
shape-only ops (views of their input, no storage of their own).

Paper 004 measures the forward:backward ratio of whole models (its Table 3, "Model Latency and Measured FLOPs
Comparison"): latency 1 : 2.00 for AlexNet and 1 : 2.02 for ResNet18. Its per-layer-type breakdowns (Figs. 8-9)
are plots without numbers in the text; the FLOPs ratios in Table 3 (1 : 0.1642, 1 : 0.0006) are, as the paper
says, the PyTorch profiler missing backward FLOPs, and are not used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from onnxroof.costs import SHAPE, Cost, backward_cost, engine_class, node_view
from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.ir import Graph, Tensor, UnknownShape, dtype_size
from onnxroof.predict import roofline
from onnxroof.predict.analysis import Analysis, analyze_graph
from onnxroof.predict.precision import PRECISION_DTYPE
from onnxroof.protos import TensorProto

__all__ = [
    "OPTIMIZER_FLOPS",
    "OPTIMIZER_STATE",
    "PAPER_004_LATENCY_RATIOS",
    "LayerStep",
    "TrainingEstimate",
    "TrainingMemory",
    "TypeRatio",
    "estimate_training",
]

# Copies of the weights an optimizer keeps: SGD none, momentum a velocity, Adam the first and second moments.
OPTIMIZER_STATE: dict[str, int] = {"sgd": 0, "momentum": 1, "adam": 2}
# FLOPs per parameter of the update. SGD: p -= lr * g (mul, sub). Momentum: m = mu * m + g (mul, add), p -= lr * m
# (mul, sub). Adam: m = b1 * m + (1 - b1) * g (mul, mul, add), v = b2 * v + (1 - b2) * g^2 (mul, mul, mul, add),
# p -= lr * m / (sqrt(v) + eps) (sqrt, add, div, mul, sub), the bias corrections folded into lr once per step.
OPTIMIZER_FLOPS: dict[str, int] = {"sgd": 2, "momentum": 4, "adam": 12}
# Paper 004, Table 3: measured backward latency per unit of forward latency, whole models (PyTorch, GPU).
PAPER_004_LATENCY_RATIOS: dict[str, float] = {"AlexNet": 2.00, "ResNet18": 2.02}

_FLOAT = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})
_FP32 = dtype_size(TensorProto.FLOAT)


@dataclass(frozen=True)
class LayerStep:
    """One runtime node's forward and backward cost and predicted time; ``backward_rule`` is False where the op
    has no backward rule and its forward cost was charged again."""

    name: str
    op_type: str
    precision: str
    forward: Cost
    backward: Cost
    forward_time_s: float
    backward_time_s: float
    backward_rule: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_type": self.op_type,
            "precision": self.precision,
            "forward_flops": self.forward.flops,
            "backward_flops": self.backward.flops,
            "forward_bytes": self.forward.bytes,
            "backward_bytes": self.backward.bytes,
            "forward_time_s": self.forward_time_s,
            "backward_time_s": self.backward_time_s,
            "backward_rule": self.backward_rule,
        }


@dataclass(frozen=True)
class TypeRatio:
    """Backward:forward FLOPs of every node of one op type."""

    op_type: str
    count: int
    forward_flops: float
    backward_flops: float

    @property
    def ratio(self) -> float:
        return self.backward_flops / self.forward_flops if self.forward_flops else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "ratio": self.ratio}


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes a training step holds."""

    weights: float
    gradients: float
    master_weights: float
    optimizer_state: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.master_weights + self.optimizer_state + self.activations

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "total": self.total}


@dataclass(frozen=True)
class TrainingEstimate:
    """Everything a training-step estimate reports; ``to_dict`` is its JSON form."""

    model: str
    device: str
    precision: str
    optimizer: str
    mixed_precision: bool
    params: int
    layers: tuple[LayerStep, ...]
    optimizer_cost: Cost
    optimizer_time_s: float
    memory: TrainingMemory
    ratios: tuple[TypeRatio, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def forward_flops(self) -> float:
        return sum(layer.forward.flops for layer in self.layers)

    @property
    def backward_flops(self) -> float:
        return sum(layer.backward.flops for layer in self.layers)

    @property
    def step_flops(self) -> float:
        return self.forward_flops + self.backward_flops + self.optimizer_cost.flops

    @property
    def forward_time_s(self) -> float:
        return sum(layer.forward_time_s for layer in self.layers)

    @property
    def backward_time_s(self) -> float:
        return sum(layer.backward_time_s for layer in self.layers)

    @property
    def step_time_s(self) -> float:
        return self.forward_time_s + self.backward_time_s + self.optimizer_time_s

    def to_dict(self) -> dict[str, Any]:
        total_f = self.forward_flops
        return {
            "model": self.model,
            "device": self.device,
            "precision": self.precision,
            "optimizer": self.optimizer,
            "mixed_precision": self.mixed_precision,
            "params": self.params,
            "forward_flops": total_f,
            "backward_flops": self.backward_flops,
            "optimizer_flops": self.optimizer_cost.flops,
            "step_flops": self.step_flops,
            "backward_forward_ratio": self.backward_flops / total_f if total_f else 0.0,
            "paper_004_latency_ratios": dict(PAPER_004_LATENCY_RATIOS),
            "forward_time_s": self.forward_time_s,
            "backward_time_s": self.backward_time_s,
            "optimizer_time_s": self.optimizer_time_s,
            "step_time_s": self.step_time_s,
            "memory": self.memory.to_dict(),
            "ratios": [r.to_dict() for r in self.ratios],
            "layers": [layer.to_dict() for layer in self.layers],
            "notes": list(self.notes),
        }


def _retyped(tensor: Tensor | None, dtype: int | None) -> Tensor | None:
    if tensor is None or dtype is None or tensor.dtype not in _FLOAT:
        return tensor
    return Tensor(tensor.name, dtype, tensor.shape, tensor.is_weight)


def _kept_activations(graph: Graph, dtype: int | None) -> float:
    """Bytes of every forward activation: the graph's inputs and each runtime node's outputs, once each, except
    the outputs of shape-only ops (views) and weights."""
    names = list(graph.inputs)
    for node in graph.nodes:
        if not node.folded and engine_class(node.domain, node.op_type) != SHAPE:
            names.extend(node.outputs)
    total = 0.0
    for name in dict.fromkeys(n for n in names if n):
        t = _retyped(graph.tensor(name), dtype)
        if t is not None and not t.is_weight and t.known:
            total += t.nbytes
    return total


def _weight_bytes(graph: Graph, dtype: int | None) -> tuple[float, float, int]:
    """(bytes of every floating-point weight the runtime nodes read, bytes and elements of the trainable ones),
    each weight once. A BatchNormalization's running mean and variance (inputs 3 and 4) are buffers, not
    trained: they have no gradient and no optimizer state."""
    read: dict[str, bool] = {}
    for node in graph.nodes:
        if node.folded:
            continue
        for i, name in enumerate(node.inputs):
            buffer = node.op_type == "BatchNormalization" and i >= 3
            read[name] = read.get(name, True) and buffer
    total = trainable = 0.0
    elements = 0
    for name, buffer in read.items():
        t = _retyped(graph.tensor(name), dtype)
        if t is not None and t.is_weight and t.dtype in _FLOAT and t.known:
            total += t.nbytes
            if not buffer:
                trainable += t.nbytes
                elements += t.numel
    return total, trainable, elements


def estimate_training(
    graph: Graph,
    device: Device,
    *,
    optimizer: str = "adam",
    mixed_precision: bool = False,
    precision: str | None = None,
) -> TrainingEstimate:
    """Estimate one training step of a loaded graph on a device (see the module docstring for the model).

    ``precision`` stores and computes every float tensor at P, as ``analyze_graph`` does; ``mixed_precision``
    computes at ``precision`` (fp16 when not given) and keeps fp32 master weights and fp32 optimizer state.
    """
    if optimizer not in OPTIMIZER_STATE:
        raise UserError(f"unknown optimizer {optimizer!r}", "choose one of " + ", ".join(OPTIMIZER_STATE))
    if mixed_precision and precision is None:
        precision = "fp16"
    analysis = analyze_graph(graph, device, precision=precision)
    dtype = PRECISION_DTYPE[precision] if precision is not None else None
    layers, without_rule = _layer_steps(graph, device, analysis, dtype)
    params, memory, update = _update(graph, dtype, optimizer, mixed_precision)
    notes = [
        "activations kept for the backward: the graph's inputs and every node's outputs (views excepted)",
        "forward costs are the graph's own: a BatchNormalization exported for inference is counted at 2 FLOPs "
        "per element, not the batch statistics training computes",
    ]
    if without_rule:
        notes.append(f"no backward rule, backward = forward assumed: {', '.join(sorted(without_rule))}")
    return TrainingEstimate(
        model=graph.name,
        device=device.key,
        precision=precision or analysis.precision,
        optimizer=optimizer,
        mixed_precision=mixed_precision,
        params=params,
        layers=tuple(layers),
        optimizer_cost=update,
        optimizer_time_s=roofline.predict(update, device, "fp32").predicted_time_s,
        memory=memory,
        ratios=_ratios(layers),
        notes=tuple(notes),
    )


def _layer_steps(
    graph: Graph, device: Device, analysis: Analysis, dtype: int | None
) -> tuple[list[LayerStep], set[str]]:
    """Each runtime node's forward (from ``analysis``) and backward step, and the op types without a backward
    rule (their backward is charged as their forward)."""
    runtime = [n for n in graph.nodes if not n.folded]
    roofs: dict[str, roofline.Roof] = {}
    layers: list[LayerStep] = []
    without_rule: set[str] = set()
    for node, result in zip(runtime, analysis.nodes):
        ins = tuple(_retyped(graph.tensor(n), dtype) for n in node.inputs)
        outs = tuple(_retyped(graph.tensor(n), dtype) for n in node.outputs)
        view = node_view(node, graph, ins, outs)
        try:
            back, covered = backward_cost(view, result.cost)
        except UnknownShape:  # a shape a rule needs is unknown: charge the forward again, as for an op without one
            back, covered = result.cost, False
        if not covered:
            without_rule.add(node.op_type)
        roof = roofs.get(result.precision) or roofs.setdefault(
            result.precision, roofline.roof_of(device, result.precision)
        )
        forward_s = result.prediction.predicted_time_s
        backward_s = roofline.predict_on(back, roof).predicted_time_s
        layers.append(
            LayerStep(node.name, node.op_type, result.precision, result.cost, back, forward_s, backward_s, covered)
        )
    return layers, without_rule


def _update(graph: Graph, dtype: int | None, optimizer: str, mixed_precision: bool) -> tuple[int, TrainingMemory, Cost]:
    """The parameters, the step's memory and the optimizer update's cost. The update reads the weights (the master
    copy under mixed precision), the gradients and the state, and writes the weights and the state; under mixed
    precision it also writes the low-precision copy."""
    weights, trained, params = _weight_bytes(graph, dtype)
    state_copies = OPTIMIZER_STATE[optimizer]
    if mixed_precision:
        master, state = float(params * _FP32), float(state_copies * params * _FP32)
    else:
        master, state = 0.0, state_copies * trained
    memory = TrainingMemory(weights, trained, master, state, _kept_activations(graph, dtype))
    updated = master if mixed_precision else trained
    update = Cost(
        flops=OPTIMIZER_FLOPS[optimizer] * params,
        bytes_read=updated + trained + state,
        bytes_written=updated + state + (trained if mixed_precision else 0.0),
        kernels=1,
    )
    return params, memory, update


def _ratios(layers: list[LayerStep]) -> tuple[TypeRatio, ...]:
    by_type: dict[str, list[LayerStep]] = {}
    for layer in layers:
        by_type.setdefault(layer.op_type, []).append(layer)
    rows: Mapping[str, TypeRatio] = {
        op: TypeRatio(op, len(ls), sum(x.forward.flops for x in ls), sum(x.backward.flops for x in ls))
        for op, ls in by_type.items()
    }
    return tuple(sorted(rows.values(), key=lambda r: -r.forward_flops))
