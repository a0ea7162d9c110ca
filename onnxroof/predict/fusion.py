"""The kernels an engine runs: which nodes of a graph it fuses into one kernel, as a graph of those kernels.

An engine that fuses (TensorRT; onnxruntime's optimizer for the ops it rewrites) runs a convolution with the
batch normalization, activation and residual add after it as one kernel, a chain of elementwise ops as one, and
attention's two products with the softmax between them as one: the intermediates stay in registers or shared
memory and never reach memory. :func:`fuse` groups a graph's nodes by an engine's :class:`FusionRules` and returns
the graph with each group of several nodes as one ``onnxroof::FusedKernel`` node (``costs/fused.py`` costs it:
its nodes' arithmetic, its own inputs' and outputs' bytes, one kernel), holding its nodes as its body and naming
the node it is built around, whose op class it takes.

Grouping walks the nodes in order. A node joins the group that wrote its data input when its rules let that
group take it, that input is read by no other node or only by nodes that may join too (an intermediate read by
another kernel must be written anyway), it writes no more elements than it reads of that input, and its other
inputs do not depend on the group (the fused kernel could not start otherwise). Where Q/DQ pairs fold into the
kernels beside them (TensorRT), a kernel ends with its QuantizeLinear and writes int8, and every kernel that reads
a dequantized tensor or weight runs the DequantizeLinear itself and reads the int8 tensor.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from onnxroof.costs import FUSED_ANCHOR, FUSED_BODY, SHAPE, engine_class
from onnxroof.devices.engines import release_key
from onnxroof.ir import Graph, Node, op_domain

__all__ = ["FUSED_OP", "FusionRules", "fuse", "kernel_members", "runs_product"]

FUSED_OP = ("onnxroof", "FusedKernel")

# The base classes (as the cost functions register them) of each part a fusion rule names.
ANCHOR_CLASSES = frozenset({"conv", "gemm", "matmul", "qconv", "conv_integer"})
POINTWISE_CLASSES = frozenset({"elementwise", "activation", "batchnorm", "quantize", "epilogue"})
NORMALIZATION_CLASSES = frozenset({"softmax", "layernorm", "skip_layernorm", "instancenorm"})
LAYOUT_OPS = frozenset({"Transpose", "Split"})
QUANTIZE_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


@dataclass(frozen=True)
class FusionRules:
    """What an engine fuses: ``epilogue``, whether a product (convolution, Gemm, MatMul) takes the pointwise ops
    after it (batch normalization, bias, activation, a residual add); ``pointwise``, whether pointwise ops fuse
    with each other; ``normalization``, whether a softmax or normalization takes the pointwise ops after it;
    ``attention``, whether MatMul -> pointwise -> Softmax -> MatMul is one kernel; ``quantize``, whether Q/DQ nodes
    fold into the product they feed; ``transposes``, whether a transpose or a split (and the reshapes beside them)
    is written by the kernel before it, in the layout the next one reads; ``attention_since``, the first release
    that fuses attention where earlier ones did not (None: every release that fuses it). ``source``: where the
    engine says so."""

    name: str
    epilogue: bool
    pointwise: bool
    normalization: bool
    attention: bool
    quantize: bool
    transposes: bool
    source: str
    doc: str = field(default="", compare=False)
    attention_since: str | None = None

    def at(self, release: str | None) -> FusionRules:
        """The rules of ``release`` (None: the current release): attention unfused before ``attention_since``."""
        if release is None or self.attention_since is None:
            return self
        fused = self.attention and release_key(release) >= release_key(self.attention_since)
        return replace(self, attention=fused)


def fuse(graph: Graph, rules: FusionRules) -> Graph:
    """``graph`` with each group of nodes ``rules`` fuse replaced by one FusedKernel node (see the module)."""
    runtime = [n for n in graph.nodes if not n.folded]
    groups = _Groups(graph, runtime, rules)
    for node in runtime:
        groups.place(node)
    kernels = [_kernel(graph, groups.members[g], groups) for g in groups.in_order()]
    return replace(graph, nodes=(*(n for n in graph.nodes if n.folded), *kernels))


def kernel_members(node: Node) -> tuple[str, ...]:
    """The names of the graph nodes a node of a fused graph runs: its body's for a fused kernel, else its own."""
    body = node.subgraphs.get(FUSED_BODY) if node.subgraphs else None
    if body is None or (node.domain, node.op_type) != FUSED_OP:
        return (node.name,)
    return tuple(n.name for n in body.nodes)


def runs_product(node: Node) -> bool:
    """Whether a node of a fused graph runs a product (a convolution, Gemm or MatMul): itself, or the anchor of
    its fused kernel."""
    body = node.subgraphs.get(FUSED_BODY) if node.subgraphs and (node.domain, node.op_type) == FUSED_OP else None
    if body is not None:
        anchor = node.attrs.get(FUSED_ANCHOR)
        node = next((n for n in body.nodes if n.name == anchor), node)
    return _base(node) in ANCHOR_CLASSES


def _base(node: Node) -> str:
    return engine_class(node.domain, node.op_type) or ""


def _standard(node: Node) -> bool:
    """Whether the node's op is of ONNX's own domain (where TensorRT's fusions name their ops)."""
    return op_domain(node.domain) == ""


class _Groups:
    """The groups so far: each group's nodes, the group that wrote each tensor, what each group reads."""

    def __init__(self, graph: Graph, runtime: Sequence[Node], rules: FusionRules) -> None:
        self.rules = rules
        self.tensors = graph.tensors
        self.weights = {name for name, t in graph.tensors.items() if t.is_weight} | set(graph.constants)
        self.readers: dict[str, int] = {}
        self.readers_of: dict[str, list[Node]] = {}
        for node in runtime:
            for name in set(node.inputs):
                self.readers[name] = self.readers.get(name, 0) + 1
                self.readers_of.setdefault(name, []).append(node)
        for name in graph.outputs:  # a graph output is read outside: always written
            self.readers[name] = self.readers.get(name, 0) + 1
        self.members: list[list[Node]] = []
        self.kind: list[str] = []  # "anchor", "pointwise", "normalization" or "single"
        self.writer: dict[str, int] = {}
        self.reads: list[set[int]] = []  # the groups each group reads from
        self.preset = _attention_groups(runtime, self.readers, self.readers_of) if rules.attention else {}
        self.dequantizers: dict[str, Node] = {}  # a dequantized tensor's name -> the DequantizeLinear its readers run
        # The weights' dequantizations, folded to constants at load: an engine that folds Q/DQ into its products
        # reads the quantized weight instead.
        self.weight_dequantizers = {
            n.outputs[0]: n for n in graph.nodes if n.folded and n.op_type == "DequantizeLinear" and _standard(n)
        }

    def place(self, node: Node) -> None:
        """Add ``node`` to the group it fuses into, or to a new one; where Q/DQ fold into their neighbours, a
        DequantizeLinear runs in each kernel that reads its output (which reads the quantized tensor instead), and
        is no kernel of its own unless a graph output is its output."""
        if self._absorbs(node):
            self.dequantizers[node.outputs[0]] = node
            return
        target = self._target(node)
        taken = [self.dequantizers[n] for n in dict.fromkeys(node.inputs) if n in self.dequantizers]
        if target is None:
            target = self._open(node)
            self.members[target][:0] = taken
        else:
            self.members[target] += [*taken, node]
        for name in node.outputs:
            self.writer[name] = target
        sources = {self._source(n) for n in node.inputs}
        self.reads[target] |= {self.writer[n] for n in sources if n in self.writer} - {target}

    def _absorbs(self, node: Node) -> bool:
        if not self.rules.quantize or node.op_type != "DequantizeLinear" or not _standard(node):
            return False
        out = node.outputs[0]
        return bool(self.readers_of.get(out)) and self.readers.get(out, 0) == len(self.readers_of[out])

    def _source(self, name: str) -> str:
        """The tensor a kernel reads for ``name``: a dequantized tensor's quantized input, else ``name``."""
        dequantizer = self.dequantizers.get(name)
        return name if dequantizer is None else dequantizer.inputs[0]

    def in_order(self) -> list[int]:
        """The non-empty groups in an order that runs each after the groups it reads (a group can read one opened
        after it: a residual add joins its convolution's kernel and reads a branch computed later), otherwise in
        the order they were opened."""
        pending = {g: set(self.reads[g]) for g, members in enumerate(self.members) if members}
        readers: dict[int, list[int]] = {}
        for g, reads in pending.items():
            for r in reads:
                readers.setdefault(r, []).append(g)
        ready = [g for g, reads in pending.items() if not reads]
        heapq.heapify(ready)
        order = []
        while ready:
            g = heapq.heappop(ready)
            order.append(g)
            for reader in readers.get(g, ()):
                pending[reader].discard(g)
                if not pending[reader]:
                    heapq.heappush(ready, reader)
        return order

    def _open(self, node: Node) -> int:
        base = _base(node)
        kind = "single"
        if base in ANCHOR_CLASSES:
            kind = "anchor"
        elif base in POINTWISE_CLASSES:
            kind = "pointwise"
        elif base in NORMALIZATION_CLASSES:
            kind = "normalization"
        self.members.append([node])
        self.kind.append(kind)
        self.reads.append(set())
        index = len(self.members) - 1
        if kind == "anchor" and self.rules.quantize:
            self._take_quantizers(node, index)
        return index

    def _target(self, node: Node) -> int | None:
        """The group ``node`` joins, or None for a group of its own."""
        preset = self.preset.get(node.name)
        if preset is not None:
            first = self.writer.get(preset)
            if first is not None:
                return first
            return None
        if not self._joins(node):
            return None
        data = [name for name in node.inputs if name and name not in self.weights]
        for name in data:
            group = self.writer.get(self._source(name))
            if group is None or not self._private(name) or not self._takes(self.kind[group]):
                continue
            if self._broadcasts(node, name):
                continue
            others = {self.writer[self._source(n)] for n in data if self._source(n) in self.writer} - {group}
            if not any(self._depends_on(other, group) for other in others):
                return group
        return None

    def _broadcasts(self, node: Node, name: str) -> bool:
        """Whether ``node`` writes more elements than it reads of ``name``: it spreads the kernel's output over a
        larger tensor it reads from elsewhere (a squeeze-excitation's scale times the feature map), which is no
        pass over that kernel's output; unknown shapes count as broadcasting."""
        read, written = self.tensors.get(name), self.tensors.get(node.outputs[0])
        if read is None or written is None or not read.known or not written.known:
            return True
        return written.numel > read.numel

    def _private(self, name: str) -> bool:
        """Whether a kernel can keep the tensor to itself: no node but the one reading it reads it, or every node
        that reads it may join a kernel (an erf GELU's x, read by its division and its product, as TensorRT keeps
        the whole GELU in its product's epilogue); never a graph output."""
        readers = self.readers_of.get(name, [])
        if self.readers.get(name, 0) != len(readers):  # a graph output, counted as read outside
            return False
        return len(readers) == 1 or all(self._joins(reader) for reader in readers)

    def _joins(self, node: Node) -> bool:
        """Whether ``node`` may join the kernel that wrote its input, by its kind."""
        base = _base(node)
        layout = base == SHAPE or (node.op_type in LAYOUT_OPS and _standard(node))
        return base in POINTWISE_CLASSES or (self.rules.transposes and layout)

    def _takes(self, kind: str) -> bool:
        rules = self.rules
        return {
            "anchor": rules.epilogue,
            "pointwise": rules.pointwise,
            "normalization": rules.normalization,
        }.get(kind, False)

    def _depends_on(self, group: int, ancestor: int) -> bool:
        """Whether ``group`` reads, directly or through other groups, what ``ancestor`` writes."""
        stack, seen = [group], set()
        while stack:
            g = stack.pop()
            if g == ancestor:
                return True
            if g in seen or g < ancestor:  # a group opened before ``ancestor`` cannot read it
                continue
            seen.add(g)
            stack.extend(self.reads[g])
        return False

    def _take_quantizers(self, anchor: Node, index: int) -> None:
        """Move the Q/DQ nodes read only by ``anchor``, each a group of its own, into its kernel, and its weights'
        dequantizations, so that it reads the quantized weights."""
        for name in anchor.inputs:
            folded = self.weight_dequantizers.get(name)
            if folded is not None:
                self.members[index].insert(0, replace(folded, folded=False))
                continue
            group = self.writer.get(name)
            if group is None or self.readers.get(name, 0) != 1 or len(self.members[group]) != 1:
                continue
            quantizer = self.members[group][0]
            if quantizer.op_type not in QUANTIZE_OPS or not _standard(quantizer):
                continue
            self.members[index].insert(0, quantizer)
            self.members[group] = []
            self.reads[index] |= self.reads[group]
            for out in quantizer.outputs:
                self.writer[out] = index


def _attention_groups(
    runtime: Sequence[Node], readers: Mapping[str, int], readers_of: Mapping[str, Sequence[Node]]
) -> dict[str, str]:
    """For each node of an attention block (MatMul, pointwise ops, Softmax, MatMul, each the only reader of the
    one before), the first MatMul's output name, by which the block's group is found once it is open. ``readers``
    counts each tensor's readers (a graph output's outside reader too), ``readers_of`` lists the nodes."""
    writer = {name: n for n in runtime for name in n.outputs}
    preset: dict[str, str] = {}
    for softmax in runtime:
        if softmax.op_type != "Softmax" or not _standard(softmax):
            continue
        chain = _back_to_product(softmax, writer, readers)
        after = readers_of.get(softmax.outputs[0], [])
        if chain is None or len(after) != 1 or after[0].op_type != "MatMul" or after[0].inputs[0] != softmax.outputs[0]:
            continue
        first = chain[0].outputs[0]
        for member in (*chain[1:], softmax, after[0]):
            preset[member.name] = first
    return preset


def _back_to_product(softmax: Node, writer: Mapping[str, Node], readers: Mapping[str, int]) -> list[Node] | None:
    """The MatMul and pointwise nodes from which the softmax's input comes, each read only by the next; None when
    the chain reaches anything else first."""
    chain: list[Node] = []
    name = softmax.inputs[0]
    while True:
        node = writer.get(name)
        if node is None or readers.get(name, 0) != 1:
            return None
        chain.insert(0, node)
        if node.op_type == "MatMul" and _standard(node):
            return chain
        if _base(node) not in POINTWISE_CLASSES or len(chain) > 4:
            return None
        name = node.inputs[0]


def _kernel(graph: Graph, members: Sequence[Node], groups: _Groups) -> Node:
    """One group as a node: the node itself when alone, else a FusedKernel over its members."""
    if len(members) == 1:
        return members[0]
    inside = {name for n in members for name in n.outputs}
    inputs = _distinct(name for n in members for name in n.inputs if name and name not in inside)
    outputs = _distinct(name for n in members for name in n.outputs if _read_outside(name, members, groups))
    anchor = next((n for n in members if _base(n) in ANCHOR_CLASSES), members[0])
    body = replace(graph, name=f"{anchor.name}/kernel", nodes=tuple(members), inputs=inputs, outputs=outputs)
    return Node(
        f"{anchor.name}+{len(members) - 1}",
        FUSED_OP[1],
        FUSED_OP[0],
        inputs,
        outputs,
        {FUSED_ANCHOR: anchor.name},
        False,
        {FUSED_BODY: body},
    )


def _read_outside(name: str, members: Sequence[Node], groups: _Groups) -> bool:
    """Whether a tensor a group writes is read by a node outside it, or is a graph output; never a dequantized
    tensor, which each of its readers' kernels computes for itself."""
    if name in groups.dequantizers or name in groups.weight_dequantizers:
        return False
    inside = sum(name in n.inputs for n in members)
    return groups.readers.get(name, 0) > inside


def _distinct(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))
