"""Memory: the bytes a graph holds while it runs, over an execution order, and an order that holds fewer.

The estimate is the weights plus the peak of live bytes over the order's steps. Step ``i`` runs the ``i``-th
runtime (not folded) node. A stored tensor (a "buffer") is live from the step that produces it to the step of its
last consumer, both included:

- an activation, produced by a runtime node, is live from its producer's step to its last consumer's step;
- a graph input is live from step 0 to its last consumer's step;
- a graph output is live from its producer's step (step 0 for an input passed through) to the last step;
- a tensor nothing consumes and the graph does not return is live at its producer's step only.

So at its own step a node's inputs and outputs are both live. Shape-only views (``VIEW_OPS``: Reshape, Squeeze,
Unsqueeze, Flatten, Identity, inference Dropout's first output, BitCast) write no buffer: their output is the
input's buffer relabelled, so the buffer is counted once and lives until the last consumer of any of its names.
A view of a weight is the weight's storage and holds no activation bytes.

Weights are the weight tensors (initializers, Constant outputs and what the loader folds from them) that a
runtime node reads, each counted once however many nodes read it; the folded nodes themselves do not run.

The estimate leaves out what depends on the engine rather than the graph: the allocator's rounding and alignment
of each buffer, a convolution's or matmul's workspace, the arena's growth policy (an arena that grows in chunks
holds more than its peak), onnxruntime's own buffers (prepacked weight copies, thread pools) and the session's
fixed overhead; the bodies of If/Loop/Scan subgraphs (only the outer tensors they read keep those alive); and an
engine's in-place reuse of an elementwise op's input as its output. Tensors of unknown shape count 0 bytes and
are listed in ``unknown``: the estimate is then a lower bound.

``footprint_bytes`` is paper [004]'s memory footprint for comparison: weights + inputs + every tensor a runtime
node produces, each its own buffer (no reuse, no views).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onnxroof.errors import UserError
from onnxroof.ir import Graph, Node, Tensor
from onnxroof.predict.precision import PRECISION_DTYPE, check_precision
from onnxroof.protos import TensorProto

__all__ = [
    "VIEW_OPS",
    "LiveTensor",
    "MemoryEstimate",
    "best_order",
    "bytes_moved",
    "estimate_memory",
    "node_reads",
    "read_distances",
    "tensor_bytes",
]

# Ops whose first output relabels their first input's buffer (an engine runs them as views, no copy).
VIEW_OPS: frozenset[str] = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout", "BitCast"})

# Element types a what-if precision restores (the floating-point ones, as the analysis retypes them).
_FLOAT_DTYPES: frozenset[int] = frozenset(
    {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
    | {
        getattr(TensorProto, n)
        for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
        if hasattr(TensorProto, n)
    }
)


@dataclass(frozen=True)
class LiveTensor:
    """A buffer live at the peak: its (first) name, bytes, and kind ("input", "output" or "activation")."""

    name: str
    bytes: int
    kind: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.bytes, "kind": self.kind}


@dataclass(frozen=True)
class MemoryEstimate:
    """A graph's memory over one execution order.

    ``peak_activation_bytes`` is the largest sum, over the order's steps, of the bytes of the buffers live at a
    step, graph inputs and outputs included while they are live; ``total_bytes`` = weights + that peak.
    ``live_bytes`` is that sum at every step (the curve the peak is the top of). ``peak_allocated_bytes`` is
    the largest sum of the same kind without the graph inputs: the buffers an engine allocates itself (the caller
    allocates the inputs).
    """

    order: str  # "stored" (the graph's own order) or "given"
    precision: str | None  # the what-if precision floating-point tensors are stored at; None: their own types
    steps: int
    weights_bytes: int
    inputs_bytes: int
    outputs_bytes: int
    peak_activation_bytes: int
    peak_step: int | None  # None for a graph without runtime nodes
    peak_node: str | None
    live_at_peak: tuple[LiveTensor, ...]  # largest first
    footprint_bytes: int
    live_bytes: tuple[int, ...]
    unknown: tuple[str, ...]  # tensors of unknown shape, counted as 0 bytes
    peak_allocated_bytes: int = 0  # the peak of live bytes less the graph inputs

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.peak_activation_bytes

    @property
    def lower_bound(self) -> bool:
        """Whether some tensor's shape is unknown, so that the true figures are at least these."""
        return bool(self.unknown)

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "precision": self.precision,
            "steps": self.steps,
            "weights_bytes": self.weights_bytes,
            "inputs_bytes": self.inputs_bytes,
            "outputs_bytes": self.outputs_bytes,
            "peak_activation_bytes": self.peak_activation_bytes,
            "total_bytes": self.total_bytes,
            "peak_step": self.peak_step,
            "peak_node": self.peak_node,
            "live_at_peak": [t.to_dict() for t in self.live_at_peak],
            "footprint_bytes": self.footprint_bytes,
            "live_bytes": list(self.live_bytes),
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "unknown": list(self.unknown),
            "lower_bound": self.lower_bound,
        }


# -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What the liveness of any order needs, computed once per graph: the runtime nodes, the buffers and their
    bytes, which buffers each node creates and uses, and the weights read."""

    nodes: tuple[Node, ...]  # runtime nodes in stored order
    buffer_of: Mapping[str, str]  # tensor name -> its buffer (the name of the tensor that owns the storage)
    size: Mapping[str, int]  # buffer -> bytes
    kind: Mapping[str, str]  # buffer -> "input", "output" or "activation"
    creates: tuple[tuple[str, ...], ...]  # per node: the buffers it writes
    uses: tuple[tuple[str, ...], ...]  # per node: the buffers it reads (distinct, weights left out)
    returned: frozenset[str]  # buffers the graph returns
    weights_bytes: int
    inputs_bytes: int
    outputs_bytes: int
    footprint_bytes: int
    unknown: tuple[str, ...]


def tensor_bytes(t: Tensor, precision: str | None) -> int | None:
    """A tensor's bytes at the what-if precision (rounded up to whole bytes), or None when its shape is unknown."""
    if t.shape is None:
        return None
    dtype = PRECISION_DTYPE[precision] if precision is not None and t.dtype in _FLOAT_DTYPES else t.dtype
    return math.ceil(Tensor(t.name, dtype, t.shape).nbytes)


def _outer_reads(graph: Graph) -> Iterator[str]:
    """The names a subgraph reads from its enclosing scopes (read by its nodes, produced nowhere inside it)."""
    inner = set(graph.inputs)
    for node in graph.nodes:
        inner.update(node.outputs)
    for node in graph.nodes:
        for name in node_reads(node):
            if name not in inner:
                yield name


def node_reads(node: Node) -> Iterator[str]:
    """Every name a node reads: its inputs, and the outer names its subgraphs read."""
    yield from (name for name in node.inputs if name)
    for sub in node.subgraphs.values():
        yield from _outer_reads(sub)


class _Sizer:
    """Tensor sizes at the what-if precision, remembering the names whose size is unknown (in the order asked)."""

    def __init__(self, graph: Graph, precision: str | None) -> None:
        self.graph, self.precision = graph, precision
        self.unknown: dict[str, None] = {}

    def size_of(self, name: str) -> int:
        t = self.graph.tensor(name)
        n = None if t is None else tensor_bytes(t, self.precision)
        if n is None:
            self.unknown[name] = None
            return 0
        return n

    def is_weight(self, name: str) -> bool:
        t = self.graph.tensors.get(name)
        return t is not None and t.is_weight


@dataclass
class _Buffers:
    """Every runtime input and every output a runtime node writes, a view's output joined to its input's buffer."""

    buffer_of: dict[str, str]
    members: dict[str, list[str]]
    creates: list[tuple[str, ...]]  # per node: the buffers it creates
    produced: list[str]  # every tensor a runtime node writes, for the footprint
    weight_views: set[str]  # views of weights: the weight's storage, counted with the weight


def _buffers(graph: Graph, runtime: Sequence[Node], sizer: _Sizer) -> _Buffers:
    b = _Buffers({name: name for name in graph.inputs}, {name: [name] for name in graph.inputs}, [], [], set())
    for node in runtime:
        made = []
        for index, out in enumerate(node.outputs):
            if not out:
                continue
            b.produced.append(out)
            source = node.inputs[0] if node.inputs else ""
            if index == 0 and node.op_type in VIEW_OPS and source:
                if sizer.is_weight(source) or source in b.weight_views:
                    b.weight_views.add(out)
                    continue
                root = b.buffer_of.setdefault(source, source)
                b.buffer_of[out] = root
                b.members.setdefault(root, [root]).append(out)
            else:
                b.buffer_of[out] = out
                b.members[out] = [out]
                made.append(out)
        b.creates.append(tuple(made))
    return b


def _buffer_sizes(members: Mapping[str, list[str]], sizer: _Sizer) -> dict[str, int]:
    """A buffer's bytes: the largest known size among its names (a view keeps its input's element count)."""
    size: dict[str, int] = {}
    for root, names in members.items():
        tensors = (t for t in map(sizer.graph.tensor, names) if t is not None)
        known = [s for s in (tensor_bytes(t, sizer.precision) for t in tensors) if s is not None]
        if known:
            size[root] = max(known)
        else:
            size[root] = 0
            sizer.unknown[root] = None
    return size


def _reads(
    runtime: Sequence[Node], b: _Buffers, size: dict[str, int], kind: dict[str, str], sizer: _Sizer
) -> tuple[list[tuple[str, ...]], dict[str, None]]:
    """Per node, the buffers it reads (distinct, weights apart), and the weights read; a name nothing defines
    becomes a buffer of unknown size, there from the start."""
    uses: list[tuple[str, ...]] = []
    weights: dict[str, None] = {}
    for node in runtime:
        read: dict[str, None] = {}
        for name in node_reads(node):
            if name in b.buffer_of:
                read[b.buffer_of[name]] = None
            elif sizer.is_weight(name):
                weights[name] = None
            elif name in b.weight_views:
                continue
            else:
                b.buffer_of[name] = name
                size[name] = sizer.size_of(name)
                kind[name] = "activation"
                read[name] = None
        uses.append(tuple(read))
    return uses, weights


def _plan(graph: Graph, precision: str | None, held: frozenset[str] = frozenset()) -> _Plan:
    runtime = tuple(n for n in graph.nodes if not n.folded)
    sizer = _Sizer(graph, precision)
    b = _buffers(graph, runtime, sizer)
    size = _buffer_sizes(b.members, sizer)
    size.update((root, 0) for root in size.keys() & held)
    returned = frozenset(b.buffer_of[o] for o in graph.outputs if o in b.buffer_of)
    inputs = set(graph.inputs)
    kind = {root: "input" if root in inputs else "output" if root in returned else "activation" for root in b.members}
    uses, weights = _reads(runtime, b, size, kind, sizer)
    weights_bytes = sum(sizer.size_of(w) for w in weights)
    inputs_bytes = sum(size[name] for name in graph.inputs)
    return _Plan(
        nodes=runtime,
        buffer_of=b.buffer_of,
        size=size,
        kind=kind,
        creates=tuple(b.creates),
        uses=tuple(uses),
        returned=returned,
        weights_bytes=weights_bytes,
        inputs_bytes=inputs_bytes,
        outputs_bytes=sum(sizer.size_of(o) for o in dict.fromkeys(graph.outputs) if o not in held),
        footprint_bytes=weights_bytes + inputs_bytes + sum(sizer.size_of(name) for name in b.produced),
        unknown=tuple(sizer.unknown),
    )


def _producers(plan: _Plan) -> dict[str, int]:
    """Tensor name -> the index (in ``plan.nodes``) of the runtime node that writes it."""
    return {out: i for i, node in enumerate(plan.nodes) for out in node.outputs if out}


def _dependencies(plan: _Plan) -> Iterator[tuple[int, int]]:
    """(producer, consumer) for every tensor a runtime node reads from another (views included)."""
    producers = _producers(plan)
    for i, node in enumerate(plan.nodes):
        for name in node_reads(node):
            j = producers.get(name)
            if j is not None and j != i:
                yield j, i


def _liveness(plan: _Plan, order: Sequence[int]) -> tuple[list[int], dict[str, tuple[int, int]]]:
    """The live bytes at every step of ``order`` (indices into ``plan.nodes``) and each buffer's (first, last)
    live step, by the definition in the module docstring."""
    last = len(order) - 1
    created = {b for made in plan.creates for b in made}
    # Inputs (and names nothing defines) are there from the start; the rest from their writer's step.
    span: dict[str, tuple[int, int]] = {b: (0, 0) for b in plan.size if b not in created}
    for step, i in enumerate(order):
        for b in plan.creates[i]:
            span[b] = (step, step)
        for b in plan.uses[i]:
            first, end = span[b]
            span[b] = (first, max(end, step))
    for b in plan.returned:
        span[b] = (span[b][0], max(last, span[b][1]))
    diff = [0] * (len(order) + 1)
    for b, (first, end) in span.items():
        diff[first] += plan.size[b]
        diff[end + 1] -= plan.size[b]
    curve, level = [], 0
    for step in range(len(order)):
        level += diff[step]
        curve.append(level)
    return curve, span


def _resolve(plan: _Plan, graph: Graph, order: Sequence[str]) -> list[int]:
    """A caller's order of node names as indices into ``plan.nodes``: every runtime node once, each after the
    nodes it reads from. Names of folded nodes are skipped (they do not run)."""
    index: dict[str, int] = {}
    for i, node in enumerate(plan.nodes):
        if node.name in index:
            raise UserError(f"node name {node.name!r} is not unique", "give every node a distinct name")
        index[node.name] = i
    folded = {n.name for n in graph.nodes if n.folded}
    resolved: list[int] = []
    for name in order:
        if name in index:
            resolved.append(index[name])
        elif name not in folded:
            raise UserError(f"the order names {name!r}, which is no node of {graph.name!r}")
    if len(resolved) != len(set(resolved)):
        raise UserError("the order names a node more than once")
    missing = [plan.nodes[i].name for i in sorted(set(range(len(plan.nodes))) - set(resolved))]
    if missing:
        raise UserError(f"the order leaves out {len(missing)} node(s): {', '.join(missing[:5])}")
    position = {i: step for step, i in enumerate(resolved)}
    for producer, consumer in _dependencies(plan):
        if position[producer] > position[consumer]:
            raise UserError(
                f"the order runs {plan.nodes[consumer].name!r} before {plan.nodes[producer].name!r}, "
                "whose output it reads",
                "give a topological order",
            )
    return resolved


def _estimate(plan: _Plan, order: Sequence[int], label: str, precision: str | None) -> MemoryEstimate:
    curve, span = _liveness(plan, order)
    if curve:
        peak = max(curve)
        peak_at = curve.index(peak)
        step: int | None = peak_at
        live = [b for b, (first, end) in span.items() if first <= peak_at <= end]
    else:  # no runtime node: the inputs are all there is
        peak, step, live = sum(plan.size.values()), None, list(span)
    return MemoryEstimate(
        order=label,
        precision=precision,
        steps=len(order),
        weights_bytes=plan.weights_bytes,
        inputs_bytes=plan.inputs_bytes,
        outputs_bytes=plan.outputs_bytes,
        peak_activation_bytes=peak,
        peak_step=step,
        peak_node=None if step is None else plan.nodes[order[step]].name,
        live_at_peak=tuple(
            sorted(
                (LiveTensor(b, plan.size[b], plan.kind[b]) for b in live),
                key=lambda t: (-t.bytes, t.name),
            )
        ),
        footprint_bytes=plan.footprint_bytes,
        live_bytes=tuple(curve),
        unknown=plan.unknown,
        peak_allocated_bytes=_allocated_peak(plan, span, len(order)),
    )


def _allocated_peak(plan: _Plan, span: Mapping[str, tuple[int, int]], steps: int) -> int:
    """The largest sum over ``steps`` steps of the live bytes of the buffers that are not graph inputs."""
    diff = [0] * (steps + 1)
    for b, (first, end) in span.items():
        if plan.kind[b] != "input":
            diff[first] += plan.size[b]
            diff[end + 1] -= plan.size[b]
    peak = level = 0
    for step in range(steps):
        level += diff[step]
        peak = max(peak, level)
    return peak


def estimate_memory(
    graph: Graph,
    *,
    precision: str | None = None,
    order: Sequence[str] | None = None,
    held: Collection[str] = (),
) -> MemoryEstimate:
    """The memory ``graph`` holds running in ``order`` (node names; the graph's stored order when None).
    The graph inputs and outputs named in ``held`` count no bytes: the caller holds them across runs (a decoder's
    KV cache), where the estimate would count a step's past and present as two buffers.

    ``precision`` stores every floating-point tensor at a what-if precision (one of
    ``onnxroof.devices.PRECISIONS``), as the analysis does. Any graph will do, an engine's optimized graph
    included: its stored order is then that engine's. A UserError for an unknown precision, or an order that is
    not a topological order of the graph's runtime nodes.
    """
    check_precision(precision)
    plan = _plan(graph, precision, frozenset(held))
    if order is None:
        return _estimate(plan, range(len(plan.nodes)), "stored", precision)
    return _estimate(plan, _resolve(plan, graph, order), "given", precision)


def bytes_moved(graph: Graph) -> float:
    """The bytes one inference moves: every runtime node's inputs and outputs, weights included, counted each time a
    node reads or writes them (tensors of unknown shape count 0), as the compulsory-traffic model counts a node's
    bytes. It is what streams through the caches between two reads of one weight by back-to-back runs, and so
    decides how much of its weights a model finds still cached (``onnxroof.devices.WeightReuse``)."""
    total = 0.0
    for node in graph.nodes:
        if node.folded:
            continue
        for name in itertools.chain(node.inputs, node.outputs):
            tensor = graph.tensor(name) if name else None
            if tensor is not None and tensor.known:
                total += tensor.nbytes
    return total


def read_distances(graph: Graph) -> dict[str, tuple[tuple[float, float], ...]]:
    """Per runtime node, ``(bytes, distance)`` of each activation it reads that an earlier runtime node wrote:
    ``distance`` is the bytes moved (read and written, weights included, as :func:`bytes_moved` counts them) by the
    runtime nodes run in between, in the graph's order. It bounds how much else went through the caches since the
    activation was written (its reuse distance): a residual branch's input written before a transformer layer's
    projections comes back from a farther level than the output of the node just before. A view
    (``VIEW_OPS``) moves nothing and its output is its input's buffer, written where that was. Graph inputs,
    weights and tensors of unknown shape are left out; nodes with none of the rest are absent."""
    written_at: dict[str, int] = {}  # buffer name -> the step that wrote it
    buffer: dict[str, str] = {}  # a view's output -> the buffer it relabels
    moved_before: list[float] = []  # per step, the bytes moved by the steps before it
    total = 0.0
    out: dict[str, tuple[tuple[float, float], ...]] = {}
    for step, node in enumerate(n for n in graph.nodes if not n.folded):
        moved_before.append(total)
        if node.op_type in VIEW_OPS and node.inputs and node.inputs[0] and node.outputs:
            buffer[node.outputs[0]] = buffer.get(node.inputs[0], node.inputs[0])
            continue
        reads = []
        for name in filter(None, node.inputs):
            source = buffer.get(name, name)
            tensor = graph.tensor(name)
            if source in written_at and tensor is not None and tensor.known and not tensor.is_weight:
                reads.append((tensor.nbytes, total - moved_before[written_at[source] + 1]))
        if reads:
            out[node.name] = tuple(reads)
        for name in filter(None, node.outputs):
            written_at[name] = step
        for name in filter(None, itertools.chain(node.inputs, node.outputs)):
            tensor = graph.tensor(name)
            if tensor is not None and tensor.known:
                total += tensor.nbytes
    return out


def _greedy(plan: _Plan) -> list[int]:
    """A topological order that at each step runs, among the nodes whose inputs are ready, the one whose step
    leaves the fewest live bytes behind: bytes it writes minus bytes it frees (the buffers it is the last
    reader of, and its own outputs nothing reads), ties to the one that writes less, then to the stored order.

    Freeing first keeps a branch that shrinks its data from waiting behind one that grows it, which is where a
    stored order (a depth-first export, say) holds two large tensors at once.
    """
    import networkx as nx  # loaded only when an order is searched

    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(plan.nodes)))
    dag.add_edges_from(_dependencies(plan))
    readers: dict[str, int] = dict.fromkeys(plan.size, 0)
    for used in plan.uses:
        for b in used:
            readers[b] += 1
    pending = {v: int(d) for v, d in dag.in_degree()}
    ready = {v for v, d in pending.items() if d == 0}

    def step_cost(v: int) -> tuple[int, int, int]:
        writes = sum(plan.size[b] for b in plan.creates[v])
        frees = sum(plan.size[b] for b in plan.uses[v] if readers[b] == 1 and b not in plan.returned)
        frees += sum(plan.size[b] for b in plan.creates[v] if readers[b] == 0 and b not in plan.returned)
        return writes - frees, writes, v

    order: list[int] = []
    while ready:
        v = min(ready, key=step_cost)
        ready.remove(v)
        order.append(v)
        for b in plan.uses[v]:
            readers[b] -= 1
        for w in dag.successors(v):
            pending[w] -= 1
            if pending[w] == 0:
                ready.add(w)
    return order


def best_order(graph: Graph, *, precision: str | None = None) -> list[str]:
    """The node names of the order with the lower activation peak of two: the stored one (kept on a tie) and a
    greedy memory-aware one, which at each step runs the ready node that leaves the fewest live bytes behind
    (bytes written minus bytes freed; ties to fewer bytes written, then to the stored order). Folded nodes are
    left out.

    A UserError for an unknown precision, or for a graph whose runtime nodes share a name (an order of names
    would be ambiguous).
    """
    check_precision(precision)
    plan = _plan(graph, precision)
    names = [n.name for n in plan.nodes]
    if len(set(names)) != len(names):
        raise UserError(f"the node names of {graph.name!r} are not unique", "give every node a distinct name")
    greedy = _greedy(plan)
    stored = list(range(len(plan.nodes)))
    better = max(_liveness(plan, greedy)[0], default=0) < max(_liveness(plan, stored)[0], default=0)
    return [names[i] for i in (greedy if better else stored)]
