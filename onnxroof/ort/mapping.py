"""Mapping the nodes of the original graph to the nodes of the graph onnxruntime runs.

How onnxruntime's graph optimizer names what it builds, and so how the mapping works:

* Nodes that survive keep their name, fused ones usually too: Conv+BatchNormalization stays a Conv with the
  Conv's name, Conv+activation becomes a FusedConv with the Conv's name. Gemm+activation becomes a FusedGemm
  named "fused <Gemm name>"; MatMul+Add a Gemm named "<MatMul name>/MatMulAddFusion". Names made unique by
  onnxruntime end in "_token_<n>".
* A fused node writes the output tensor of the last node it absorbed (the Relu's output for Conv+Relu).
* An NCHWc node is named "<output tensor it replaces>_nchwc" ("_bn_nchwc" for a BatchNormalization turned into
  a depthwise Conv) and writes "reorder_token_<n>" tensors; the
  original tensor reappears only where a ReorderOutput converts back. ReorderInput/ReorderOutput belong to no
  original node: they are reported as engine-only, with their time.
* An unnamed node is profiled as "<op_type>_<index>"; onnxroof's analysis names it the same way, so unnamed
  original nodes are given those names before the session is created, and onnxruntime keeps them.
* An NCHWc Conv that later absorbs an Add (a fourth input) and an activation keeps the name it got first.
* Common subexpression elimination keeps one of several identical nodes (same op, attributes and inputs, with
  weights compared by content): a model whose weights are all alike (onnx's bundled light models) loses whole
  branches to it.

An original node maps to the engine node that has its name (or a name derived from it), else to the one that
writes one of its output tensors (looking through reorders, or through the NCHWc name), else, when its outputs
vanished inside a fusion, to the engine node its consumers map to, provided that node reads the original node's
inputs. Every other original node is reported with the reason: folded (weights only, or weights and static
shapes), merged with an identical node, or removed by the optimizer (Identity, Dropout, no-op nodes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import NodeProto, numpy_helper

from onnxroof.ir import op_domain
from onnxroof.load import NON_DETERMINISTIC

# Kernels onnxruntime adds that compute nothing of the model: layout reorders of the NCHWc transformer, copies
# between host and device.
ENGINE_ONLY_OPS: frozenset[tuple[str, str]] = frozenset(
    {
        ("com.microsoft.nchwc", "ReorderInput"),
        ("com.microsoft.nchwc", "ReorderOutput"),
        ("", "MemcpyFromHost"),
        ("", "MemcpyToHost"),
    }
)
# Ops onnxruntime eliminates outright (IdentityElimination, Dropout elimination at inference).
_ELIMINATED_OPS = frozenset({"Identity", "Dropout"})

REMOVED = "removed by the optimizer"
MERGED = "merged with an identical node (common subexpression elimination)"
UNUSED = "removed by the optimizer: its outputs are unused"
FOLDED_WEIGHTS = "folded: computed from weights only, once at load"
FOLDED_STATIC = "folded by onnxruntime: computed from weights and static shapes at load"
NOT_FOUND = "not found in the optimized graph"


def name_candidates(engine_name: str) -> Iterator[str]:
    """Names an engine node name may have been made from: itself without onnxruntime's "_token_<n>" suffix,
    without a "fused " prefix (activation fusions), without a "/<...>Fusion" suffix (MatMulAddFusion)."""
    base = re.sub(r"_token_\d+$", "", engine_name)
    yield base
    if base.startswith("fused "):
        yield base[len("fused ") :]
    fusion = re.match(r"(.+)/[A-Za-z]*Fusion$", base)
    if fusion:
        yield fusion.group(1)


def tensor_candidate(engine_name: str) -> str | None:
    """The tensor an NCHWc node replaces: its name less "_nchwc" or "_bn_nchwc" (a BatchNormalization turned
    into a depthwise Conv) and less "_token_<n>"; None for other names."""
    base = re.sub(r"_token_\d+$", "", engine_name)
    for suffix in ("_bn_nchwc", "_nchwc"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return None


class _EngineIndex:
    """Lookups over the engine graph: nodes by name and by names derived from original ones, tensor writers,
    and the original tensors each engine node reads."""

    def __init__(self, engine: Sequence[NodeProto], originals: Sequence[Any]) -> None:
        """Index ``engine`` (saved engine graph nodes) against ``originals`` (analysis nodes)."""
        self.engine = engine
        self.original_tensors = {t for n in originals for t in (*n.inputs, *n.outputs) if t}
        self.original_outputs = {n.name: tuple(o for o in n.outputs if o) for n in originals}
        consumers: dict[str, list[Any]] = {}
        producer_op: dict[str, str] = {}
        for node in originals:
            for t in node.inputs:
                if t:
                    consumers.setdefault(t, []).append(node)
            for t in node.outputs:
                if t:
                    producer_op[t] = node.op_type
        self.layout = {j for j, e in enumerate(engine) if (op_domain(e.domain), e.op_type) in ENGINE_ONLY_OPS}
        self.by_name: dict[str, int] = {}
        self.derived_name: dict[str, int] = {}
        self.derived_tensor: dict[str, int] = {}
        self.final_tensor: dict[int, str] = {}
        self.producer: dict[str, int] = {}
        for j, node in enumerate(engine):
            for out in node.output:
                if out:
                    self.producer.setdefault(out, j)
            if j in self.layout or not node.name:
                continue
            self.by_name.setdefault(node.name, j)
            for candidate in name_candidates(node.name):
                self.derived_name.setdefault(candidate, j)
            tensor = tensor_candidate(node.name)
            if tensor is not None:
                final = _nchwc_final_tensor(node, tensor, consumers, producer_op)
                self.final_tensor[j] = final
                self.derived_tensor.setdefault(tensor, j)
                self.derived_tensor.setdefault(final, j)

    def writer(self, tensor: str, op_type: str) -> int | None:
        """The engine node computing ``tensor``, looking through layout reorders to the node they convert, except
        for a Transpose to channels-last, which a ReorderOutput computes itself."""
        j = self.producer.get(tensor)
        if op_type == "Transpose":
            return j
        seen: set[int] = set()
        while j is not None and j in self.layout and j not in seen and self.engine[j].input:
            seen.add(j)
            j = self.producer.get(self.engine[j].input[0])
        return None if j is None or j in self.layout else j

    def represents(self, tensor: str) -> str | None:
        """The original tensor an engine tensor holds (in whatever layout), or None when that cannot be told."""
        seen: set[str] = set()
        while tensor not in self.original_tensors and tensor not in seen:
            seen.add(tensor)
            j = self.producer.get(tensor)
            if j is None:
                return None
            node = self.engine[j]
            if j in self.layout and node.input:
                tensor = node.input[0]
                continue
            if j in self.final_tensor:
                return self.final_tensor[j]
            outputs = self.original_outputs.get(node.name, ())
            return outputs[0] if len(outputs) == 1 and len(node.output) == 1 else None
        return tensor if tensor in self.original_tensors else None

    def reads(self, j: int) -> set[str] | None:
        """The original tensors engine node ``j`` reads, or None when one of its inputs cannot be traced."""
        found: set[str] = set()
        for tensor in self.engine[j].input:
            if not tensor or tensor not in self.producer:  # graph inputs and weights keep their names
                found.add(tensor)
                continue
            original = self.represents(tensor)
            if original is None:
                return None
            found.add(original)
        return found


def map_nodes(
    originals: Sequence[Any],
    engine: Sequence[NodeProto],
    engine_initializers: set[str],
    original_initializers: Mapping[str, onnx.TensorProto],
) -> tuple[dict[int, int], dict[int, str]]:
    """Original node index -> engine node index for every original node some engine node computes, and
    original node index -> reason for every other one.

    ``originals`` are the analysis's nodes (``name``, ``op_type``, ``domain``, ``inputs``, ``outputs``,
    ``attrs``, ``folded``), in graph order; ``engine`` the saved engine graph's nodes with onnxruntime's names.
    Three steps: direct evidence (names, written tensors); nodes whose outputs vanished follow their consumers
    into a fusion, unless an identical node survives (onnxruntime's common subexpression elimination merged
    them); last, a node placed inside a fusion that way stays only if the fused node reads that node's inputs
    (or an identical copy of them, or they come from the same fusion).
    """
    graph = _OriginalGraph.of(originals, original_initializers)
    index = _EngineIndex(engine, originals)
    assigned, exact, reasons = _place(graph, index, engine_initializers)
    _drop_unfed(graph, index, assigned, exact, reasons)
    return assigned, reasons


@dataclass(frozen=True)
class _OriginalGraph:
    """The original graph as the mapping needs it: who produces and consumes each tensor, which nodes onnxruntime
    can fold, and which nodes and tensors are identical copies of each other."""

    nodes: Sequence[Any]
    producers: Mapping[str, int]
    consumers: Mapping[str, Sequence[int]]
    static: set[int]
    constant: set[str]
    numbers: ValueNumbers
    twins: Mapping[int, Sequence[int]]
    copies: Mapping[int, Sequence[str]]

    @classmethod
    def of(cls, nodes: Sequence[Any], initializers: Mapping[str, onnx.TensorProto]) -> _OriginalGraph:
        """Build the lookups for ``nodes`` (analysis nodes in graph order) and the graph's ``initializers``."""
        producers: dict[str, int] = {}
        consumers: dict[str, list[int]] = {}
        for i, node in enumerate(nodes):
            for name in node.inputs:
                if name:
                    consumers.setdefault(name, []).append(i)
            for name in node.outputs:
                if name:
                    producers.setdefault(name, i)
        static = _static_nodes(nodes, set(initializers))
        computed = {t for i, n in enumerate(nodes) if n.folded or i in static for t in n.outputs if t}
        constant = set(initializers) | computed
        numbers = value_numbers(nodes, initializers)
        twins: dict[int, list[int]] = {}
        for i, number in enumerate(numbers.nodes):
            twins.setdefault(number, []).append(i)
        copies: dict[int, list[str]] = {}
        for tensor, number in numbers.tensors.items():
            copies.setdefault(number, []).append(tensor)
        return cls(nodes, producers, consumers, static, constant, numbers, twins, copies)

    def twins_of(self, i: int) -> list[int]:
        """Other nodes identical to node ``i``."""
        return [k for k in self.twins[self.numbers.nodes[i]] if k != i]

    def copies_of(self, tensor: str) -> Sequence[str]:
        """Tensors holding the same values as ``tensor`` (itself included)."""
        return self.copies.get(self.numbers.tensors.get(tensor, -1), [tensor])


def _place(
    graph: _OriginalGraph, index: _EngineIndex, engine_initializers: set[str]
) -> tuple[dict[int, int], set[int], dict[int, str]]:
    """First placement, consumers before producers: (node -> engine node, the nodes placed on direct
    evidence, node -> reason for the rest)."""
    assigned: dict[int, int] = {}
    exact: set[int] = set()
    reasons: dict[int, str] = {}
    for i in reversed(range(len(graph.nodes))):  # consumers come later in a topologically sorted graph
        node = graph.nodes[i]
        found = _direct(node, index)
        if isinstance(found, int):
            assigned[i] = found
            exact.add(i)
        elif found is not None:
            reasons[i] = found
        elif node.folded:
            reasons[i] = FOLDED_WEIGHTS
        elif i in graph.static or any(o in engine_initializers for o in node.outputs if o):
            reasons[i] = FOLDED_STATIC
        elif any(isinstance(_direct(graph.nodes[k], index), int) for k in graph.twins_of(i)):
            reasons[i] = MERGED
        else:
            outcome = _through_consumers(i, graph, index.engine, assigned, exact, reasons)
            if isinstance(outcome, int):
                assigned[i] = outcome
            else:
                reasons[i] = MERGED if outcome == REMOVED and graph.twins_of(i) else outcome
    return assigned, exact, reasons


def _drop_unfed(
    graph: _OriginalGraph, index: _EngineIndex, assigned: dict[int, int], exact: set[int], reasons: dict[int, str]
) -> None:
    """Take out of their fusion, in place, the nodes placed there through their consumers whose inputs the
    fused node never sees: their work is merged into an identical node elsewhere, or dropped."""
    dropped: set[int] = set()

    def source(t: str) -> str:
        """``t``, or what removed pass-through nodes (an Identity, a Dropout) handed on to become ``t``."""
        seen: set[str] = set()
        while t not in seen and t in graph.producers:
            producer = graph.producers[t]
            if reasons.get(producer) != REMOVED or producer in dropped:
                break
            seen.add(t)
            data = [x for x in graph.nodes[producer].inputs if x and x not in graph.constant]
            if not data:
                break
            t = data[0]
        return t

    def fed(i: int) -> bool:
        """Whether every non-constant input of node ``i`` reaches its engine node (as itself or a copy)."""
        j = assigned[i]
        reads = index.reads(j)
        if reads is None:  # an input the engine graph does not let us trace: give the placement the benefit
            return True
        inputs = [source(t) for t in graph.nodes[i].inputs if t and t not in graph.constant]
        return all(
            any(c in reads or assigned.get(graph.producers.get(c, -1)) == j for c in graph.copies_of(t)) for t in inputs
        )

    changed = True
    while changed:
        changed = False
        for i in sorted(set(assigned) - exact):
            if not fed(i):
                del assigned[i]
                dropped.add(i)
                reasons[i] = MERGED if graph.twins_of(i) else REMOVED
                changed = True


@dataclass(frozen=True)
class ValueNumbers:
    """Equal numbers for nodes (and tensors) that compute the same values from the same inputs."""

    nodes: list[int]
    tensors: dict[str, int]


def value_numbers(originals: Sequence[Any], initializers: Mapping[str, onnx.TensorProto]) -> ValueNumbers:
    """Value numbering of the original graph: two nodes share a number when they have the same op, attributes
    and inputs, where weights count as the same input when their contents are equal. These are the nodes
    onnxruntime's common subexpression elimination merges into one."""
    table: dict[Any, int] = {}
    tensors: dict[str, int] = {}
    nodes: list[int] = []

    def number(key: Any) -> int:
        """The number of a key, a new one for a key not seen before."""
        return table.setdefault(key, len(table))

    def tensor_number(name: str) -> int:
        """The number of a tensor that no node of the graph computes: a weight (by content) or an input."""
        if name not in tensors:
            init = initializers.get(name)
            tensors[name] = number(("weight", _digest(init)) if init is not None else ("input", name))
        return tensors[name]

    for i, node in enumerate(originals):
        if getattr(node, "subgraphs", None) or node.op_type in NON_DETERMINISTIC:
            key: Any = ("unique", i)
        else:
            attrs = tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items()))
            key = (
                node.op_type,
                op_domain(node.domain),
                attrs,
                tuple(tensor_number(t) if t else -1 for t in node.inputs),
            )
        node_number = number(key)
        nodes.append(node_number)
        for k, out in enumerate(node.outputs):
            if out:
                tensors[out] = number(("output", node_number, k))
    return ValueNumbers(nodes, tensors)


_DIGEST_FULL_BYTES = 1 << 22
"""Weights up to 4 MiB are hashed whole; larger ones by their ends and an even sample of 1 MiB in between, which
tells real weights apart (and keeps models of many GB quick) while equal weights still hash equal."""


def _digest(tensor: onnx.TensorProto) -> tuple[Any, ...]:
    """A key equal for weights of equal type, shape and contents."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return ("external", tensor.name)  # contents not at hand: never equal to another weight
    data = tensor.raw_data if tensor.HasField("raw_data") else numpy_helper.to_array(tensor).tobytes()
    hasher = hashlib.blake2b(digest_size=16)
    if len(data) <= _DIGEST_FULL_BYTES:
        hasher.update(data)
    else:
        view = np.frombuffer(data, dtype=np.uint8)
        hasher.update(view[: 1 << 20].tobytes())
        hasher.update(view[-(1 << 20) :].tobytes())
        hasher.update(view[:: len(data) >> 20].tobytes())
    return (tensor.data_type, tuple(tensor.dims), len(data), hasher.digest())


def _attr_key(value: Any) -> Any:
    """A hashable stand-in for an attribute value as the analysis graph holds it."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    return value


def _nchwc_final_tensor(
    node: NodeProto, tensor: str, consumers: Mapping[str, Sequence[Any]], producer_op: Mapping[str, str]
) -> str:
    """The original tensor an NCHWc node finally writes. It is named after the tensor it replaced when it was
    created; an Add/Sum fused later (a fourth input) and then an activation (the "activation" attribute, when
    the named tensor is not already that activation's output) move its output down the original graph."""
    if node.op_type != "Conv" or op_domain(node.domain) != "com.microsoft.nchwc":
        return tensor

    def next_of(t: str, ops: Iterable[str]) -> str:
        """The output of the one consumer of ``t`` of one of those op types, else ``t`` itself."""
        users = [c for c in consumers.get(t, ()) if c.op_type in ops and c.outputs and c.outputs[0]]
        return users[0].outputs[0] if len(users) == 1 else t

    if len(node.input) > 3 and node.input[3]:
        tensor = next_of(tensor, ("Add", "Sum"))
    activation = next((a.s.decode() for a in node.attribute if a.name == "activation"), None)
    if activation and producer_op.get(tensor) != activation:
        tensor = next_of(tensor, (activation,))
    return tensor


def _direct(node: Any, index: _EngineIndex) -> int | str | None:
    """The engine node that evidently computes ``node`` (by name, derived name or written tensor), REMOVED for
    an eliminated Identity/Dropout, or None when there is no direct evidence."""
    if node.op_type in _ELIMINATED_OPS and op_domain(node.domain) == "" and node.name not in index.by_name:
        return REMOVED
    for table in (index.by_name, index.derived_name):
        if node.name in table:
            return table[node.name]
    for out in node.outputs:
        j = index.writer(out, node.op_type) if out else None
        if j is not None:
            return j
    for out in node.outputs:
        if out in index.derived_tensor:
            return index.derived_tensor[out]
    return None


def _through_consumers(
    i: int,
    graph: _OriginalGraph,
    engine: Sequence[NodeProto],
    assigned: Mapping[int, int],
    exact: set[int],
    reasons: Mapping[int, str],
) -> int | str:
    """Where a node whose outputs vanished went: into the engine node a consumer was fused into (an
    intermediate of a fusion), nowhere when a consumer runs unchanged without it (removed), or folded."""
    users = sorted({c for out in graph.nodes[i].outputs if out for c in graph.consumers.get(out, ()) if c != i})
    if not users:
        return UNUSED
    removed = folded = False
    for c in users:
        if c in assigned:
            j = assigned[c]
            if c in exact and _same_op(graph.nodes[c], engine[j]):
                removed = True  # the consumer runs as it was, reading what this node passed through
            else:
                return j
        elif reasons.get(c) in (FOLDED_WEIGHTS, FOLDED_STATIC):
            folded = True
        elif c in reasons:
            removed = True
    if removed:
        return REMOVED
    return FOLDED_STATIC if folded else NOT_FOUND


def _static_nodes(originals: Sequence[Any], initializers: set[str]) -> set[int]:
    """Nodes onnxruntime can compute at load: from weights, Constants and Shape/Size (input shapes are fixed in
    a runnable model, so shapes are static unless data-dependent, and then the node survives and maps by name)."""
    constant = set(initializers)
    static: set[int] = set()
    for i, node in enumerate(originals):
        if getattr(node, "subgraphs", None) or node.op_type in NON_DETERMINISTIC:
            continue
        real = [t for t in node.inputs if t]
        if node.op_type in ("Constant", "Shape", "Size") or (real and all(t in constant for t in real)):
            static.add(i)
            constant.update(o for o in node.outputs if o)
    return static


def _same_op(original: Any, engine_node: NodeProto) -> bool:
    """Whether the engine node runs the original node's op unchanged (same op type and domain)."""
    return original.op_type == engine_node.op_type and op_domain(original.domain) == op_domain(engine_node.domain)
