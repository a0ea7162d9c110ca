"""Per-op cost functions, their registry, and the counting conventions they all follow.

Counting conventions (pinned by tests in tests/costs/):

- 1 multiply-accumulate (MAC) = 2 FLOPs. Every Cost carries FLOPs and MACs separately; MACs count only the
  multiply-accumulates of matrix-like products (Conv, Gemm, MatMul, Einsum, recurrent gates, attention).
- Conv: ``2 * N * C_out * prod(out_spatial) * (C_in / group) * prod(kernel)`` FLOPs, plus one add per output
  element for a bias. Gemm/MatMul: ``2*M*N*K`` per batch, plus one FLOP per output element for each of a bias
  add, a non-unit alpha and a non-unit beta.
- Elementwise ops: one FLOP per output element per arithmetic step; transcendental functions (exp, log, tanh,
  erf, sqrt, sin, ...) count as one step each. Compound ops state their per-element constant where they are
  registered (Sigmoid = 4: neg, exp, add, div; Softmax = 5; LayerNormalization = 7; inference
  BatchNormalization = 2 because engines fold it to a per-channel scale and shift).
- Bytes: each distinct input tensor is read once and each output written once, at its dtype's size (the
  compulsory-traffic model). Ops that touch only part of an input (Gather, Slice) read only what they use.
- Weights (initializers, Constant, ConstantOfShape of a constant shape, and anything computed only from them)
  are read like any other input and never cost compute. Params = elements of the weight tensors a node reads,
  except int64 and bool tensors, which ONNX uses for shapes, axes and indices.
- Shape-only ops (Shape, Reshape, Squeeze, Unsqueeze, Identity, Flatten, Dropout at inference) cost 0 FLOPs,
  0 bytes and 0 kernels. Data-movement ops (Transpose, Concat, Slice, Gather, Pad, Resize, ...) cost bytes.
- Kernels: how many device kernels the op launches on a GPU-style engine (paper 001's launch-overhead count);
  1 for most ops, 0 for shape-only ops, per time step for recurrent ops.
- An op with no cost function is never free: it is listed as unsupported and charged its tensor bytes.

Backward costs (a training step's gradient pass) have a second registry beside the first: ``register_backward``
names a rule ``(node, forward cost) -> Cost`` for one or more ops, written in the family module next to the
op's forward cost; ``backward_cost`` applies it. An op without a backward rule is charged its forward cost again
(backward = forward) and the caller says so.

Every registration names the op's engine class next to its cost function (``register(*ops, engine=...)``): the
class of kernel an engine runs it with, one of ``onnxroof.devices.OP_CLASSES``, or SHAPE for shape-only ops, or
OTHER where no class describes the op. ``onnxroof.predict.op_classes`` takes that base class and refines it by the
node's shapes; an op without a cost function is OTHER.

The family modules (one per kind of op) take their shared helpers and constants from ``onnxroof.costs.common``
and nothing from each other. Every module of this package is found and imported on the first lookup, so that
adding a family is adding its module, and ``import onnxroof`` stays light.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from math import prod
from typing import Any

import numpy as np

from onnxroof.devices import OP_CLASSES
from onnxroof.ir import Graph, InvalidNode, Node, Tensor, UnknownShape, op_domain
from onnxroof.protos import TensorProto

__all__ = [
    "ENGINE_CLASSES",
    "FUSED_ANCHOR",
    "FUSED_BODY",
    "OTHER",
    "SHAPE",
    "BackwardFn",
    "Cost",
    "CostFn",
    "NodeView",
    "as_text",
    "backward_cost",
    "compute_cost",
    "distinct_tensors",
    "engine_class",
    "logical_weights",
    "lookup",
    "node_view",
    "reads_packed",
    "register",
    "register_backward",
    "register_packed",
    "registered_backward_ops",
    "registered_ops",
    "weight_params",
]


@dataclass(frozen=True)
class NodeView:
    """What a cost function sees of one node: its resolved inputs/outputs (None for an omitted optional input),
    its attributes as plain Python values (ints, floats, str, lists, numpy arrays for tensors, the attribute name
    for a graph), the values of small constant inputs, and, for If/Loop/Scan, a callback that costs the subgraph
    held in a named attribute."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[Tensor | None, ...]
    outputs: tuple[Tensor | None, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    constants: Mapping[int, np.ndarray] = field(default_factory=dict)
    cost_subgraph: Callable[[str], Cost] | None = None
    anchor: NodeView | None = None  # a fused kernel's: the view of the node it is built around (FUSED_ANCHOR)

    def input(self, i: int) -> Tensor | None:
        """The i-th input, or None when it is absent or omitted."""
        return self.inputs[i] if i < len(self.inputs) else None

    def need_input(self, i: int, what: str = "") -> Tensor:
        """The i-th input, or UnknownShape naming the node and the missing input (``what`` it is, if given)."""
        t = self.input(i)
        if t is None or not t.name:
            raise UnknownShape(f"{self.name}: {self.op_type} needs its {what or f'input {i}'}")
        return t

    def output(self, i: int = 0) -> Tensor | None:
        return self.outputs[i] if i < len(self.outputs) else None

    def constant(self, i: int) -> np.ndarray | None:
        """The value of input i when it is a small constant known at analysis time (a trip count, K of TopK)."""
        return self.constants.get(i)

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute's value, ``default`` when absent. With a number as ``default``, InvalidNode unless the
        value is a number too: a cost function reads it as one."""
        value = self.attrs.get(name)
        if value is None:  # absent, or of a kind the loader does not read
            return default
        if isinstance(default, (int, float)) and not isinstance(value, (int, float)):
            raise InvalidNode(f"attribute {name} is {value!r}, not a number")
        return value

    def text(self, name: str, default: str = "") -> str:
        """A string attribute as ``str``, ``default`` when absent."""
        return as_text(self.attrs.get(name), default)


def node_view(
    node: Node,
    graph: Graph,
    inputs: tuple[Tensor | None, ...] | None = None,
    outputs: tuple[Tensor | None, ...] | None = None,
    cost_subgraph: Callable[[str], Cost] | None = None,
) -> NodeView:
    """What a cost function sees of ``node`` of ``graph``: its tensors as the graph holds them (``inputs`` and
    ``outputs`` where the caller has them already, or retypes them), its attributes, the values of those of its
    inputs the graph knows as constants, and ``cost_subgraph`` for a node with subgraphs."""
    constants = {i: graph.constants[name] for i, name in enumerate(node.inputs) if name in graph.constants}
    ins = tuple(map(graph.tensor, node.inputs)) if inputs is None else inputs
    outs = tuple(map(graph.tensor, node.outputs)) if outputs is None else outputs
    anchor = _anchor_view(node)
    return NodeView(node.name, node.op_type, node.domain, ins, outs, node.attrs, constants, cost_subgraph, anchor)


# A fused kernel (``onnxroof::FusedKernel``, built by ``onnxroof.predict.fusion``) holds its nodes in this
# subgraph, and names the node it is built around (its convolution or product) in this attribute.
FUSED_BODY, FUSED_ANCHOR = "body", "anchor"


def _anchor_view(node: Node) -> NodeView | None:
    """A fused kernel's anchor node as a view of its body; None for any other node, or a kernel without one."""
    body = node.subgraphs.get(FUSED_BODY) if node.subgraphs else None
    name = node.attrs.get(FUSED_ANCHOR) if body is not None else None
    if body is None or not name:
        return None
    anchor = next((n for n in body.nodes if n.name == name), None)
    return node_view(anchor, body) if anchor is not None else None


def as_text(value: object, default: str = "") -> str:
    """A string attribute's value as ``str`` (ONNX stores strings as bytes; the loader passes them decoded)."""
    if value is None:
        return default
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class Cost:
    """The cost of one kernel or a sum of them. Adds with ``+`` and scales with ``*`` (a loop body x trips)."""

    flops: float = 0.0
    macs: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    params: int = 0
    kernels: int = 0
    note: str = ""

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (0 where nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        notes = "; ".join(n for n in (self.note, other.note) if n)
        return Cost(
            self.flops + other.flops,
            self.macs + other.macs,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
            self.params + other.params,
            self.kernels + other.kernels,
            notes,
        )

    def __mul__(self, times: int | float) -> Cost:
        """The cost of running this ``times`` times over (params and notes are not multiplied)."""
        return Cost(
            self.flops * times,
            self.macs * times,
            self.bytes_read * times,
            self.bytes_written * times,
            self.params,
            int(self.kernels * times),
            self.note,
        )

    __rmul__ = __mul__

    def with_note(self, note: str) -> Cost:
        return replace(self, note="; ".join(n for n in (self.note, note) if n))


CostFn = Callable[[NodeView], Cost]
# A backward rule: the node and its forward cost -> the cost of the gradients it sends back.
BackwardFn = Callable[[NodeView, Cost], Cost]

SHAPE = "shape"  # shape-only ops: no FLOPs, no bytes, no kernel; an engine pays only its per-node overhead
OTHER = "other"  # ops no engine class describes: predicted on the plain roofline
# The engine classes a registration may name.
ENGINE_CLASSES: frozenset[str] = frozenset({*OP_CLASSES, SHAPE, OTHER})

# Element types that ONNX uses for shapes, axes, indices and masks rather than for learned values.
_NON_PARAM_DTYPES = {TensorProto.INT64, TensorProto.BOOL, TensorProto.STRING}

# (domain, op_type) -> (cost function, engine class)
_REGISTRY: dict[tuple[str, str], tuple[CostFn, str]] = {}

# (domain, op_type) -> backward rule
_BACKWARD: dict[tuple[str, str], BackwardFn] = {}

_loaded = False


def _key(op: str) -> tuple[str, str]:
    """'Conv' -> ('', 'Conv'); 'com.microsoft::FusedConv' -> ('com.microsoft', 'FusedConv')."""
    if "::" in op:
        domain, op_type = op.split("::", 1)
    else:
        domain, op_type = "", op
    return op_domain(domain), op_type


def register(*ops: str, engine: str) -> Callable[[CostFn], CostFn]:
    """Register a cost function for one or more op types (``"domain::OpType"`` outside the default domain), with
    the engine class their kernels belong to (one of ENGINE_CLASSES). Ops of one cost function whose kernels
    belong to different classes are registered once per class, by stacking the decorator.

    An engine class outside ENGINE_CLASSES and a second registration of the same op are programming errors and
    raise.
    """
    if engine not in ENGINE_CLASSES:
        raise ValueError(
            f"{', '.join(ops)}: engine class {engine!r} is none of onnxroof.devices.OP_CLASSES, SHAPE or OTHER"
        )

    def decorate(fn: CostFn) -> CostFn:
        for op in ops:
            key = _key(op)
            if key in _REGISTRY:
                raise ValueError(f"cost function for {op!r} registered twice")
            _REGISTRY[key] = (fn, engine)
        return fn

    return decorate


# The weights an op stores packed (several low-bit values per element) and how many values each holds: by op key,
# a function from the node to {input index: logical elements}.
PackedFn = Callable[[NodeView], Mapping[int, int]]
_PACKED: dict[tuple[str, str], PackedFn] = {}


def register_packed(*ops: str) -> Callable[[PackedFn], PackedFn]:
    """Register, for ops named as ``register`` names them, the logical element counts of the packed weights they
    read (MatMulNBits' 4-bit B holds two weights a byte): params count those, not the bytes stored."""

    def decorate(fn: PackedFn) -> PackedFn:
        for op in ops:
            _PACKED[_key(op)] = fn
        return fn

    return decorate


def reads_packed(domain: str, op_type: str) -> bool:
    """Whether the op reads packed weights (``register_packed``)."""
    _load_families()
    return (op_domain(domain), op_type) in _PACKED


def logical_weights(node: NodeView) -> dict[str, int]:
    """The node's packed weights by name, each with the logical elements it holds; empty for other nodes."""
    _load_families()
    fn = _PACKED.get((op_domain(node.domain), node.op_type))
    if fn is None:
        return {}
    return {
        t.name: count
        for i, count in fn(node).items()
        if (t := node.input(i)) is not None and t.is_weight and t.shape is not None
    }


def register_backward(*ops: str) -> Callable[[BackwardFn], BackwardFn]:
    """Register a backward rule for one or more op types, named as ``register`` names them. A second rule for
    the same op is a programming error and raises."""

    def decorate(fn: BackwardFn) -> BackwardFn:
        for op in ops:
            key = _key(op)
            if key in _BACKWARD:
                raise ValueError(f"backward rule for {op!r} registered twice")
            _BACKWARD[key] = fn
        return fn

    return decorate


def _load_families() -> None:
    """Import every module of this package once: each family module registers its ops as it is imported."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")


def lookup(domain: str, op_type: str) -> CostFn | None:
    """The cost function for an op, or None when none is registered."""
    _load_families()
    found = _REGISTRY.get((op_domain(domain), op_type))
    return None if found is None else found[0]


def engine_class(domain: str, op_type: str) -> str | None:
    """The engine class registered with an op's cost function, or None when the op has no cost function."""
    _load_families()
    found = _REGISTRY.get((op_domain(domain), op_type))
    return None if found is None else found[1]


def registered_ops() -> list[str]:
    """Every registered op, as 'OpType' or 'domain::OpType', sorted."""
    _load_families()
    return sorted(f"{d}::{o}" if d else o for d, o in _REGISTRY)


def registered_backward_ops() -> list[str]:
    """Every op with a backward rule, as 'OpType' or 'domain::OpType', sorted."""
    _load_families()
    return sorted(f"{d}::{o}" if d else o for d, o in _BACKWARD)


def backward_cost(node: NodeView, forward: Cost) -> tuple[Cost, bool]:
    """The cost of a node's backward pass, given its forward cost, and whether a backward rule covered it.

    An op without a rule is charged its forward cost again (backward = forward); the caller reports it.
    """
    _load_families()
    fn = _BACKWARD.get((op_domain(node.domain), node.op_type))
    if fn is None:
        return forward, False
    return fn(node, forward), True


# ---------------------------------------------------------------------------------------------------------
# The counting conventions' primitives: what the compulsory-traffic model reads and writes, and what counts as a
# param. The families take them, with the rest of their shared helpers, from ``onnxroof.costs.common``.


def distinct_tensors(tensors: Iterable[Tensor | None]) -> list[Tensor]:
    """The given (not omitted) tensors, each name once (the first of a repeated name): what the
    compulsory-traffic model reads or writes."""
    seen: set[str] = set()
    out = []
    for t in tensors:
        if t is not None and t.name and t.name not in seen:
            seen.add(t.name)
            out.append(t)
    return out


def weight_params(inputs: Iterable[Tensor | None]) -> int:
    """Elements of the distinct weight tensors among ``inputs`` (int64/bool metadata excluded); the first of
    a repeated name counts.

    Built from comprehensions rather than a loop with a step per tensor: a whole model's weights (tens of
    thousands) are counted through it."""
    counted = [
        t for t in inputs if t is not None and t.is_weight and t.shape is not None and t.dtype not in _NON_PARAM_DTYPES
    ]
    shapes = {t.name: t.need_shape() for t in reversed(counted)}  # reversed: the first one of a name wins
    return sum(map(prod, shapes.values()))


def compute_cost(node: NodeView) -> tuple[Cost, bool]:
    """The cost of a node and whether a cost function covered it.

    An op without a cost function is charged the bytes of its known tensors (one kernel, no FLOPs) and reported
    as unsupported by the caller; it is never silently free.
    """
    fn = lookup(node.domain, node.op_type)
    if fn is not None:
        return fn(node), True
    read = sum(t.nbytes for t in distinct_tensors(node.inputs) if t.known)
    written = sum(t.nbytes for t in distinct_tensors(node.outputs) if t.known)
    return Cost(bytes_read=read, bytes_written=written, params=weight_params(node.inputs), kernels=1), False
