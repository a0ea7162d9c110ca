"""The analysis pass: graph + device -> per-node cost -> per-node roofline prediction -> totals, by op type,
unsupported, and the nodes the totals could not count in full. ``onnxroof.analyze`` (in ``onnxroof.api``) loads a
model and calls :func:`analyze_graph`; what it returns is defined in ``predict/results.py``.
"""

from __future__ import annotations

import functools
import gc
import itertools
import operator
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from onnxroof.costs import SHAPE, Cost, NodeView, compute_cost, logical_weights, node_view, reads_packed, weight_params
from onnxroof.costs.nbits import INT8_ACCURACY_LEVEL, NBITS_PRODUCTS
from onnxroof.devices import Device
from onnxroof.ir import Graph, InvalidNode, Node, Tensor, UnknownShape
from onnxroof.predict import roofline
from onnxroof.predict.control import node_engine
from onnxroof.predict.fusion import FUSED_OP, kernel_members, runs_product
from onnxroof.predict.levels import memory_level
from onnxroof.predict.memory import bytes_moved, read_distances
from onnxroof.predict.pipeline import streamed
from onnxroof.predict.precision import PRECISION_DTYPE, check_precision
from onnxroof.predict.profiles import EngineProfile, HostCost, engine_profile
from onnxroof.predict.results import (
    ROOFLINE_INCLUDES,
    Analysis,
    NodeResult,
    OpTypeTotals,
    Totals,
    Uncounted,
    Unsupported,
)
from onnxroof.predict.subnormal import SubnormalWork, subnormal_work
from onnxroof.predict.terms import InModel
from onnxroof.protos import TensorProto

__all__ = [
    "RUN_NOTE",
    "Analysis",
    "NodeResult",
    "OpTypeTotals",
    "Totals",
    "Uncounted",
    "Unsupported",
    "UnsupportedOpWarning",
    "analyze_graph",
    "collection_paused",
    "node_precision",
]

_FLOAT_PRECISION: dict[int, str] = {
    TensorProto.FLOAT: "fp32",
    TensorProto.FLOAT16: "fp16",
    TensorProto.BFLOAT16: "bf16",
    TensorProto.DOUBLE: "fp64",
}
for _name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"):
    if hasattr(TensorProto, _name):
        _FLOAT_PRECISION[getattr(TensorProto, _name)] = "fp8"
_INT8: frozenset[int] = frozenset({TensorProto.INT8, TensorProto.UINT8})


class UnsupportedOpWarning(UserWarning):
    """An op has no cost function: it is charged its tensor bytes only."""


def node_precision(
    op_type: str,
    inputs: Sequence[Tensor | None],
    outputs: Sequence[Tensor | None],
    attrs: Mapping[str, Any] | None = None,
    cpu: bool = True,
) -> str:
    """The precision a node computes at, from its dtypes: int8 when it consumes 8-bit integers (quantized ops),
    else the first floating-point input's (or output's) type; fp32 for integer-only ops. A weight-only quantized
    product (NBITS_PRODUCTS, whose uint8 inputs are packed weights) computes at its activations' type unless its
    ``accuracy_level`` asks for int8 ("input int8, accumulator int32", onnxruntime's matmul_nbits.cc; levels 1-3
    fall back to A's type there, fp16 to fp32 on a CPU), which onnxruntime's CPU kernel alone honours (``cpu``;
    its CUDA kernel dequantizes to A's type whatever the level)."""
    if op_type in NBITS_PRODUCTS:
        if cpu and int((attrs or {}).get("accuracy_level") or 0) == INT8_ACCURACY_LEVEL:
            return "int8"
        inputs = inputs[:1]
    elif op_type != "DequantizeLinear" and any(t is not None and t.dtype in _INT8 for t in inputs):
        return "int8"
    for t in list(inputs) + list(outputs):
        if t is not None and t.dtype in _FLOAT_PRECISION:
            return _FLOAT_PRECISION[t.dtype]
    return "fp32"


def _retype(graph: Graph, dtype: int, others: Mapping[str, int] | None = None) -> Graph:
    """The graph with every floating-point tensor stored as ``dtype`` (a what-if precision), those named in
    ``others`` as the dtype given there."""
    others = others or {}
    tensors = {
        name: Tensor(t.name, others.get(name, dtype), t.shape, t.is_weight) if t.dtype in _FLOAT_PRECISION else t
        for name, t in graph.tensors.items()
    }
    nodes = tuple(
        Node(
            n.name,
            n.op_type,
            n.domain,
            n.inputs,
            n.outputs,
            n.attrs,
            n.folded,
            {k: _retype(g, dtype, others) for k, g in n.subgraphs.items()},
        )
        if n.subgraphs
        else n
        for n in graph.nodes
    )
    return replace(graph, nodes=nodes, tensors=tensors)


def _outside_products(graph: Graph, precision: str, profile: EngineProfile | None) -> dict[str, int]:
    """Under an int8 what-if on an engine with no int8 kernel but for products (``profile.int8_others``): the
    tensors a runtime node that is no product reads or writes, in the engine's precision for them; a fused
    kernel is a product where its anchor is."""
    if precision != "int8" or profile is None or profile.int8_others is None:
        return {}
    dtype = PRECISION_DTYPE[profile.int8_others]
    outside: dict[str, int] = {}
    for node in graph.nodes:
        if node.folded or runs_product(node):
            continue
        outside.update((name, dtype) for name in (*node.inputs, *node.outputs) if name)
    return outside


class _Coster:
    """Costs the nodes of a graph and its subgraphs, collecting what could not be costed exactly: counted by op
    and reason (``unsupported``) and named (``uncounted``, a node inside a subgraph by its path)."""

    def __init__(self) -> None:
        self.unsupported: Counter[tuple[str, str, str]] = Counter()
        self.uncounted: list[Uncounted] = []
        self.prefix = ""  # the path of the subgraph being costed, "" at the top level

    def view(
        self, node: Node, graph: Graph, inputs: tuple[Tensor | None, ...], outputs: tuple[Tensor | None, ...]
    ) -> NodeView:
        subgraph_cost: Callable[[str], Cost] | None = None
        if node.subgraphs:
            subgraph_cost = lambda attr: self.graph_cost(node.subgraphs[attr], node.name)  # noqa: E731
        return node_view(node, graph, inputs, outputs, subgraph_cost)

    def cost(self, view: NodeView) -> tuple[Cost, str | None]:
        """The node's cost and, when it could not be costed exactly, why (counted in ``unsupported``). A node
        whose shapes contradict each other makes the graph invalid: a UserError naming the node."""
        try:
            cost, supported = compute_cost(view)
        except InvalidNode as exc:
            raise exc.user_error(view.name, view.op_type) from exc
        except UnknownShape as exc:
            read = sum(t.nbytes for t in view.inputs if t is not None and t.known)
            written = sum(t.nbytes for t in view.outputs if t is not None and t.known)
            note = f"shape of {exc} unknown: charged known tensor bytes only"
            cost = Cost(bytes_read=read, bytes_written=written, params=weight_params(view.inputs), kernels=1, note=note)
            return cost, self.count(view.name, view.domain, view.op_type, _SHAPE_UNKNOWN)
        return cost, None if supported else self.count(view.name, view.domain, view.op_type, _NO_COST_FUNCTION)

    def count(self, name: str, domain: str, op_type: str, reason: str) -> str:
        self.unsupported[(domain, op_type, reason)] += 1
        self.uncounted.append(Uncounted(self.prefix + name, op_type, domain, reason))
        return reason

    def graph_cost(self, graph: Graph, outer: str) -> Cost:
        """The summed cost of a subgraph of the node named ``outer``."""
        total = Cost()
        enclosing, self.prefix = self.prefix, f"{self.prefix}{outer}/"
        try:
            for node in graph.nodes:
                if not node.folded:
                    view = self.view(
                        node, graph, tuple(map(graph.tensor, node.inputs)), tuple(map(graph.tensor, node.outputs))
                    )
                    total = total + self.cost(view)[0]
        finally:
            self.prefix = enclosing
        return total


_SHAPE_UNKNOWN = "shape unknown"
RUN_NOTE = "shape from an onnxruntime run"  # the note of a node with an output the graph's shapes_from_run names
_NO_COST_FUNCTION = "no cost function"


def _signature(node: Node, kind: Callable[[str], int], constants: Mapping[str, Any]) -> tuple | None:
    """Everything a node's cost and prediction depend on, as a hashable key; None when it cannot be memoized.

    A cost is a pure function of op, dtypes, shapes, weight flags, attributes and small constant values, so
    nodes with equal signatures (the repeated blocks of a network) are costed once. ``kind`` gives a tensor's
    (dtype, shape, weight flag) by name as a small int (see _KindIds). Subgraph ops are not memoized, and
    neither are nodes that name one tensor twice (costs count a distinct tensor once).
    """
    if node.subgraphs:
        return None
    inputs = node.inputs
    names = inputs + node.outputs
    if len(set(names)) != len(names):  # a repeated name, or only several omitted inputs ('') that are harmless
        distinct = set(names)
        distinct.discard("")
        if len(distinct) != len(names) - names.count(""):
            return None
    attrs = node.attrs
    return (
        node.op_type,
        node.domain,
        len(inputs),
        tuple(map(kind, names)),
        tuple([(k, _hashable(v)) for k, v in attrs.items()]) if attrs else (),
        ()
        if constants.keys().isdisjoint(inputs)
        else tuple([(i, _hashable(constants[n])) for i, n in enumerate(inputs) if n in constants]),
    )


class _KindIds(dict):
    """A small int per distinct (dtype, shape, weight flag), by tensor name: what a node's memo key holds for
    each of its tensors. Ints hash and compare in a step where the tuples they stand for take several, and the
    table is built in one pass over the graph's tensors. Names it lacks (an omitted input, an untyped tensor)
    resolve as Graph.tensor resolves them."""

    def __init__(self, graph: Graph) -> None:
        self._ids: dict[tuple | None, int] = {}
        self._fresh = itertools.count()  # ids are unique, not dense: an id already given is never reused
        kinds = map(_KIND, graph.tensors.values())  # a tensor less its name
        super().__init__(zip(graph.tensors.keys(), map(self._ids.setdefault, kinds, self._fresh)))
        self.pop("", None)  # '' is an omitted input, whatever a graph may type under that name
        self._tensor = graph.tensor

    def __missing__(self, name: str) -> int:
        tensor = self._tensor(name)
        kind = self[name] = self._ids.setdefault(tensor and _KIND(tensor), next(self._fresh))
        return kind


_KIND = operator.itemgetter(slice(1, None))


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


@contextmanager
def collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a graph is built and costed.

    Loading allocates a few objects per tensor and node and frees none of them until the end. The collector runs
    whenever allocations outnumber deallocations by its threshold, so a graph of tens of thousands of nodes sets
    off pass after pass over objects that are all still alive. Whatever cycles the pass leaves behind are
    collected once it resumes.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def analyze_graph(
    graph: Graph,
    device: Device,
    *,
    precision: str | None = None,
    engine: bool = False,
    progress: Callable[[int, int], None] | None = None,
    profile: EngineProfile | None = None,
) -> Analysis:
    """Cost every node of a loaded graph and place it on a device's roofline.

    ``precision`` (fp64 ... int8) asks "what if every float tensor were stored and computed at P" instead of
    following the tensors' own dtypes. With ``engine`` the graph is the one the device's engine runs (onnxruntime's
    optimized graph on a calibrated host): each node is predicted under its op class's calibrated ceiling and the
    memory level its data fits in, its weights read as fast as the bytes the graph moves (``bytes_moved``) let them
    come back from the caches between runs, plus the engine's run overhead once; without it each node gets the
    plain roofline of the device. ``progress(done, total)`` is called while nodes are costed. A ``profile``
    predicts on that engine profile in place of the one the device names (``onnxroof.predict.profiles``), e.g. one
    with a term left out; it implies ``engine``.
    """
    check_precision(precision)
    chosen = profile or (engine_profile(device) if engine else None)
    with collection_paused():
        return _analyze_graph(graph, device, precision, chosen, progress)


def _analyze_graph(
    graph: Graph,
    dev: Device,
    precision: str | None,
    profile: EngineProfile | None,
    progress: Callable[[int, int], None] | None,
) -> Analysis:
    """The analysis of ``graph``: each node on the engine ``profile`` (None: the device's plain roofline)."""
    if precision is not None:
        graph = _retype(graph, PRECISION_DTYPE[precision], _outside_products(graph, precision, profile))
    walk = _Walk(graph, dev, precision, profile)
    runtime = [n for n in graph.nodes if not n.folded]
    results: list[NodeResult] = []
    for index, node in enumerate(runtime):
        results.append(walk.node(node))
        if progress is not None and (index % 256 == 0 or index == len(runtime) - 1):
            progress(index + 1, len(runtime))
    return _analysis(walk, runtime, results)


class _Walk:
    """The pass over a graph's runtime nodes, in order. Nodes with equal signatures share one cost and prediction:
    each such group is costed once (``groups``, with its size in ``counts``), and totals are summed over the
    groups rather than over every node of a large graph. On an engine, a node's place in the model (the bytes an
    inference moves, its work on subnormal floats, how far back its inputs were written, the working set of the
    node before it) is part of its signature and of its prediction."""

    def __init__(self, graph: Graph, dev: Device, precision: str | None, profile: EngineProfile | None) -> None:
        self.graph, self.dev, self.precision, self.profile = graph, dev, precision, profile
        engine_mode = profile is not None
        # The bytes one inference moves, which decide whether its weights stay in the caches between runs.
        self.traffic = bytes_moved(graph) if engine_mode and dev.weight_reuse is not None else None
        # Masked attention's Softmax and product on subnormal floats: a node with such work is costed on its own.
        self.slow_path = subnormal_work(graph) if engine_mode else {}
        # How far back each node's inputs were written: an input from long before comes from a farther level.
        self.distances = read_distances(graph) if engine_mode else {}
        self.coster = _Coster()
        self.groups: list[NodeResult] = []
        self.counts: list[int] = []
        self.shared: list[tuple] = []  # what a group's other nodes share: all but name, op_type and domain
        self.memo: dict[tuple, int] = {}
        self.roofs: dict[str, roofline.Roof] = {}
        self.subgraph_weights: list[Tensor] = []
        self.kind = _KindIds(graph).__getitem__
        self.from_run = frozenset(graph.shapes_from_run)
        self.after = 0.0  # the working set of the last node that moved data, which pushed the next one's lines out

    def node(self, node: Node) -> NodeResult:
        """The next runtime node's result: its group's, or a new group's."""
        ran = bool(self.from_run) and _computes_any(node, self.from_run)
        subnormal = self.slow_path.get(node.name)
        reads = self.distances.get(node.name, ())
        key = self._key(node, ran, subnormal, reads)
        group = self.memo.get(key) if key is not None else None
        if group is None:
            result = self._first(node, key, ran, InModel(self.traffic, subnormal, reads, self.after))
        else:
            self.counts[group] += 1
            if not self.groups[group].supported:  # never for want of a shape: those nodes are not memoized
                self.coster.count(node.name, node.domain, node.op_type, _NO_COST_FUNCTION)
            result = _new_result((node.name, node.op_type, node.domain) + self.shared[group])
        if result.engine is not None and result.engine.op_class != SHAPE and result.engine.working_set > 0:
            self.after = result.engine.working_set
        if node.subgraphs:
            self.subgraph_weights.extend(_subgraph_weights(node))
        return result

    def _key(
        self, node: Node, ran: bool, subnormal: SubnormalWork | None, reads: Sequence[tuple[float, float]]
    ) -> tuple | None:
        """The node's signature, with what sets its prediction apart from an equal node's; None: its own group."""
        key = _signature(node, self.kind, self.graph.constants)
        if key is None:
            return None
        if ran:
            key = (key, RUN_NOTE)  # its note sets it apart from an equal node whose shapes inference found
        if subnormal is not None:
            key = (key, subnormal)
        if reads:  # equal nodes share a prediction where their inputs come from the same levels
            key = (key, tuple((b, memory_level(self.dev, d + b)[0]) for b, d in reads))
        if self.profile is not None:  # ... and follow nodes of the same working set
            key = (key, self.after)
        return key

    def _first(self, node: Node, key: tuple | None, ran: bool, around: InModel) -> NodeResult:
        """A node costed and predicted, the first of its group."""
        graph, dev = self.graph, self.dev
        ins = tuple(map(graph.tensor, node.inputs))
        outs = tuple(map(graph.tensor, node.outputs))
        view = self.coster.view(node, graph, ins, outs)
        cost, reason = self.coster.cost(view)
        if ran:
            cost = replace(cost, note="; ".join(n for n in (cost.note, RUN_NOTE) if n))
        prec = self.precision or node_precision(node.op_type, ins, outs, node.attrs, cpu=dev.kind == "cpu")
        if self.profile is not None:  # an If's branch is predicted node by node: its own analysis
            inner = functools.partial(
                _analyze_graph, dev=dev, precision=self.precision, profile=self.profile, progress=None
            )
            prediction, note = node_engine(node, view, cost, prec, dev, around, inner, self.profile)
        else:
            roof = self.roofs.get(prec) or self.roofs.setdefault(prec, roofline.roof_of(dev, prec))
            prediction, note = roofline.predict_on(cost, roof), None
        shape = next((t.shape for t in outs if t is not None), None)
        result = NodeResult(node.name, node.op_type, node.domain, prec, cost, prediction, reason is None, note, shape)
        if key is not None and reason != _SHAPE_UNKNOWN:  # unknown-shape notes name the node's tensors
            self.memo[key] = len(self.groups)
        self.groups.append(result)
        self.shared.append(result[3:])
        self.counts.append(1)
        return result


def _analysis(walk: _Walk, runtime: Sequence[Node], results: list[NodeResult]) -> Analysis:
    """The walk's results totalled, by op type, with the ops it could not cost and their warnings."""
    graph, dev, precision, groups, coster = walk.graph, walk.dev, walk.precision, walk.groups, walk.coster
    weighted = list(zip(groups, walk.counts))
    main_precision = precision or _dominant_precision(weighted)
    run_overhead = dev.run_overhead.value if walk.profile is not None and dev.run_overhead is not None else 0.0
    params = weight_params(itertools.chain(_read_weights(runtime, graph.tensors), walk.subgraph_weights))
    params += _unpacked_elements(runtime, graph)
    totals = replace(_totals(weighted, params, dev, main_precision, run_overhead), uncounted=len(coster.uncounted))
    if walk.profile is not None and walk.profile.host is not None:
        totals = _issued(totals, results, walk.profile.host)
    unsupported = tuple(
        Unsupported(op, domain, count, reason) for (domain, op, reason), count in sorted(coster.unsupported.items())
    )
    messages = list(graph.warnings)
    for u in unsupported:
        qualified = f"{u.domain}::{u.op_type}" if u.domain else u.op_type
        message = f"{u.count} {qualified} node(s): {u.reason}; charged their tensor bytes only"
        messages.append(message)
        warnings.warn(message, UnsupportedOpWarning, stacklevel=4)  # the caller of analyze_graph()
    # A group's nodes share its precision and prediction: the groups stand for every node.
    for p in sorted({r.precision for r in groups} - {r.prediction.precision for r in groups}):
        used = next(r.prediction.precision for r in groups if r.precision == p)
        messages.append(f"{dev.key} lists no {p} peak: {p} nodes use its {used} peak")
    return Analysis(
        model=graph.name,
        device=dev,
        precision=precision or "as-typed",
        totals=totals,
        nodes=tuple(results),
        by_op_type=_by_op_type(weighted),
        unsupported=unsupported,
        folded_nodes=len(graph.nodes) - len(runtime),
        warnings=tuple(messages),
        graph=_graph_name(walk.profile),
        uncounted=tuple(coster.uncounted),
        includes=walk.profile.includes if walk.profile is not None else ROOFLINE_INCLUDES,
        fused={n.name: kernel_members(n) for n in runtime if (n.domain, n.op_type) == FUSED_OP},
    )


def _graph_name(profile: EngineProfile | None) -> str:
    """The graph an analysis predicted on: the profile's (with its engine's fusions where it fuses), else the
    graph as exported."""
    if profile is None:
        return "as-exported"
    return profile.graph if profile.fusion is None else f"{profile.graph}, {profile.fusion.name} kernels"


def _computes_any(node: Node, names: frozenset[str]) -> bool:
    """Whether a node computes one of ``names``: as an output, or inside its subgraphs at any depth."""
    if not names.isdisjoint(node.outputs):
        return True
    return any(_computes_any(inner, names) for subgraph in node.subgraphs.values() for inner in subgraph.nodes)


_new_result = functools.partial(tuple.__new__, NodeResult)  # NodeResult from a tuple, without the generated __new__


def _unpacked_elements(runtime: Sequence[Node], graph: Graph) -> int:
    """What the packed weights the runtime nodes read hold beyond their stored elements (two 4-bit weights a
    byte): params count weights, not bytes. Each packed tensor once."""
    logical: dict[str, int] = {}
    for node in runtime:
        if reads_packed(node.domain, node.op_type):
            logical.update(logical_weights(node_view(node, graph)))
    return sum(count - graph.tensors[name].numel for name, count in logical.items())


def _read_weights(runtime: Sequence[Node], tensors: Mapping[str, Tensor]) -> list[Tensor]:
    """The weights that runtime nodes read, each once. The graph's tensors are walked in their stored order and
    each weight's name is probed in the set of names read, rather than every name read being looked up among
    the tensors: one sequential pass instead of scattered lookups, on graphs of tens of thousands of tensors."""
    read = set(itertools.chain.from_iterable([n.inputs for n in runtime]))
    return [t for name, t in tensors.items() if t.is_weight and name in read]


def _subgraph_weights(node: Node) -> Iterator[Tensor]:
    """The weights that the runtime nodes of a node's subgraphs read, their own or an enclosing graph's, at
    every depth (a weight used only inside an If branch or a Loop body is a parameter all the same); not what a
    runtime node of the subgraph computes (a fused kernel's dequantized weight is its quantized weight's)."""
    for subgraph in node.subgraphs.values():
        made = {name for inner in subgraph.nodes if not inner.folded for name in inner.outputs}
        for inner in subgraph.nodes:
            if inner.folded:
                continue
            for name in inner.inputs:
                t = subgraph.tensors.get(name)
                if t is not None and t.is_weight and name not in made:
                    yield t
            yield from _subgraph_weights(inner)


Weighted = Sequence[tuple[NodeResult, int]]  # the first node of each group of equal nodes, and the group's size


def _dominant_precision(groups: Weighted) -> str:
    """The precision that computes the most FLOPs (the first one seen among equals); fp32 for an empty graph."""
    flops: dict[str, float] = {}
    for r, count in groups:
        flops[r.precision] = flops.get(r.precision, 0.0) + r.cost.flops * count
    return max(flops, key=flops.__getitem__) if flops else "fp32"


def _totals(groups: Weighted, params: int, device: Device, precision: str, run_overhead_s: float = 0.0) -> Totals:
    """Summed costs and times; ``run_overhead_s`` (an engine's fixed cost per run) is added once, as overhead."""
    flops = macs = bytes_read = bytes_written = 0.0
    kernels = 0
    by_bound = dict.fromkeys(roofline.BOUNDS, 0.0)
    for r, count in groups:
        c = r.cost
        flops += c.flops * count
        macs += c.macs * count
        bytes_read += c.bytes_read * count
        bytes_written += c.bytes_written * count
        kernels += c.kernels * count
        if r.prediction.bound in by_bound:
            by_bound[r.prediction.bound] += r.prediction.predicted_time_s * count
    prediction = roofline.total([r.prediction for r, _ in groups], device, precision, [count for _, count in groups])
    if run_overhead_s:
        by_bound["overhead"] += run_overhead_s
        prediction = replace(
            prediction,
            overhead_time_s=prediction.overhead_time_s + run_overhead_s,
            predicted_time_s=prediction.predicted_time_s + run_overhead_s,
        )
    return Totals(flops, macs, bytes_read, bytes_written, params, kernels, prediction, by_bound)


def _issued(totals: Totals, results: Sequence[NodeResult], host: HostCost) -> Totals:
    """``totals`` with the host's issuing of the kernels (``pipeline.streamed``): the part of the run the GPU waits
    for the host counts as overhead."""
    steps = [(_host_seconds(r, host), r.prediction.predicted_time_s) for r in results]
    device_s = sum(gpu_s for _, gpu_s in steps)
    waited = max(streamed(steps) - device_s, 0.0)
    if waited == 0.0:
        return totals
    p = totals.prediction
    prediction = replace(p, overhead_time_s=p.overhead_time_s + waited, predicted_time_s=p.predicted_time_s + waited)
    by_bound = {**totals.time_by_bound, "overhead": totals.time_by_bound.get("overhead", 0.0) + waited}
    return replace(totals, prediction=prediction, time_by_bound=by_bound)


def _host_seconds(result: NodeResult, host: HostCost) -> float:
    """What the host spends issuing one node: every node, or each that launches a kernel, as ``host.per`` says."""
    return host.seconds if host.per == "node" or result.cost.kernels > 0 else 0.0


def _by_op_type(groups: Weighted) -> tuple[OpTypeTotals, ...]:
    by_key: dict[str, list[tuple[NodeResult, int]]] = {}
    for r, count in groups:
        key = f"{r.domain}::{r.op_type}" if r.domain else r.op_type
        by_key.setdefault(key, []).append((r, count))
    rows = [
        OpTypeTotals(
            op_type=key,
            count=sum(n for _, n in rs),
            flops=sum(r.cost.flops * n for r, n in rs),
            macs=sum(r.cost.macs * n for r, n in rs),
            bytes_read=sum(r.cost.bytes_read * n for r, n in rs),
            bytes_written=sum(r.cost.bytes_written * n for r, n in rs),
            params=sum(r.cost.params * n for r, n in rs),
            predicted_time_s=sum(r.prediction.predicted_time_s * n for r, n in rs),
        )
        for key, rs in by_key.items()
    ]
    return tuple(sorted(rows, key=lambda o: -o.predicted_time_s))
