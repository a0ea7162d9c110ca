"""What the shape-rewrite passes (:mod:`.batch`, :mod:`.input_size`) share: shapes from onnx's inference, the
constant inputs that hard-code shapes, replacing such a constant without touching the nodes that share it, and
the final strict check that writes the declared shapes of outputs and value_info.

Every function works on a model the pass owns (a copy made by :func:`copy_model`), never on the caller's proto.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from onnxroof.passes import ABSENT_VALUE, Note, Refused, lean

__all__ = [
    "Dim",
    "Edits",
    "Shape",
    "Shapes",
    "absent_refusal",
    "candidates_in_order",
    "constant_value",
    "constants_only",
    "copy_model",
    "decide_in_order",
    "declare_inferred",
    "fixed_by_constant",
    "infer",
    "rescaled",
    "runs",
    "shape_of",
    "shape_text",
    "strict_check",
]

Dim = int | str | None  # a static size, a symbolic name, or unknown
Shape = tuple[Dim, ...]
Shapes = dict[str, Shape]

_NODE_NAME = re.compile(r"op_type:(\w+), node name: ([^)]*)\)")
_ABSENT_TENSOR = re.compile(r"for tensor: (\S+)")


def copy_model(model: ModelProto) -> ModelProto:
    """A deep copy of ``model`` that a pass may edit."""
    copy = ModelProto()
    copy.CopyFrom(model)
    return copy


def shape_of(vi: onnx.ValueInfoProto) -> Shape | None:
    """The declared shape of a value, or None where it has no tensor shape."""
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return None
    dims = vi.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in dims)


def infer(model: ModelProto) -> Shapes:
    """Every value's shape as onnx's shape inference (non-strict, with data propagation) sees it; values it
    cannot shape are absent. Initializers count with their dims."""
    inferred = onnx.shape_inference.infer_shapes(lean(model), strict_mode=False, data_prop=True)
    shapes: Shapes = {init.name: tuple(init.dims) for init in inferred.graph.initializer}
    for vi in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        shape = shape_of(vi)
        if shape is not None:
            shapes[vi.name] = shape
    return shapes


def constant_value(model: ModelProto, name: str) -> np.ndarray | None:
    """The value of ``name`` where it is an initializer with data or the output of a Constant node."""
    for init in model.graph.initializer:
        if init.name == name:
            return None if init.data_location == TensorProto.EXTERNAL else numpy_helper.to_array(init)
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t)
                if attr.name == "value_ints":
                    return np.array(attr.ints, np.int64)
    return None


@dataclass
class Edits:
    """The changes a shape pass decides, by node position (the node list's order is kept until :meth:`apply`):
    new values for constant inputs, and whole replacement nodes."""

    constants: dict[tuple[int, int], tuple[np.ndarray, str]] = field(default_factory=dict)
    nodes: dict[int, NodeProto] = field(default_factory=dict)

    def set_constant(self, model: ModelProto, pos: int, index: int, value: np.ndarray, tag: str) -> None:
        """Record that input ``index`` of node ``pos`` becomes ``value``, and point the node of ``model`` (the
        pass's working copy) at an initializer holding it, so that later inference sees the change."""
        self.constants[(pos, index)] = (np.asarray(value), tag)
        name = f"{model.graph.node[pos].input[index]}.{tag}.work"
        model.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        model.graph.node[pos].input[index] = name

    def replace_node(self, model: ModelProto, pos: int, node: NodeProto) -> None:
        """Record that node ``pos`` becomes ``node``, and replace it in the working copy ``model``."""
        self.nodes[pos] = node
        model.graph.node[pos].CopyFrom(node)

    def apply(self, model: ModelProto) -> None:
        """Make the recorded changes on ``model`` (a copy of the pass's input with the same node order).

        Other nodes may share an old constant (a builder reuses one shape constant for every layer), so each
        changed input gets a new constant named ``<old>.<tag>``: a Constant node where the old one was a Constant
        node, an initializer otherwise (also a graph input where the IR version requires that of initializers).
        Identical new values share one constant; old constants that nothing uses any more are removed.
        """
        graph = model.graph
        nodes = list(graph.node)
        constant_nodes = {n.output[0] for n in nodes if n.op_type == "Constant"}
        added: dict[str, NodeProto] = {}
        olds: set[str] = set()
        for (pos, index), (value, tag) in self.constants.items():
            old = nodes[pos].input[index]
            name = f"{old}.{tag}"
            olds.add(old)
            nodes[pos].input[index] = name
            if name in added or any(i.name == name for i in graph.initializer):
                continue
            if old in constant_nodes:
                added[name] = helper.make_node(
                    "Constant", [], [name], name=name, value=numpy_helper.from_array(value, name)
                )
            else:
                graph.initializer.append(numpy_helper.from_array(value, name))
                if model.ir_version < 4:
                    dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
                    graph.input.append(helper.make_tensor_value_info(name, dtype, list(value.shape)))
        for pos, node in self.nodes.items():
            nodes[pos] = node
        used = {v for n in nodes for v in n.input} | {o.name for o in graph.output}
        unused = olds - used
        kept = [n for n in nodes if not (n.op_type == "Constant" and n.output[0] in unused)]
        del graph.node[:]
        graph.node.extend([*added.values(), *kept])
        for field_ in (graph.initializer, graph.input):
            stale = [i for i, item in enumerate(field_) if item.name in unused]
            for i in reversed(stale):
                del field_[i]


def candidates_in_order(
    model: ModelProto, wanted: Callable[[NodeProto], bool], extra_deps: Callable[[NodeProto], Iterable[str]]
) -> list[tuple[int, set[int]]]:
    """The positions of the nodes ``wanted`` selects, each with the indices (into this list) of the selected
    nodes upstream of it.

    Upstream means upstream of the node's inputs and of the values ``extra_deps`` names for it. A pass decides a
    node only after every selected node upstream of it, so that the shapes it reads are already repaired.
    """
    nodes = list(model.graph.node)
    producer = {out: pos for pos, node in enumerate(nodes) for out in node.output}
    selected = [pos for pos, node in enumerate(nodes) if wanted(node)]
    index = {pos: i for i, pos in enumerate(selected)}
    memo: dict[str, frozenset[int]] = {}

    def above(value: str) -> frozenset[int]:
        """The selected nodes at or upstream of the producer of ``value`` (iterative: graphs are deep)."""
        stack = [value]
        while stack:
            top = stack[-1]
            if top in memo:
                stack.pop()
                continue
            pos = producer.get(top)
            if pos is None:
                memo[top] = frozenset()
                stack.pop()
                continue
            node = nodes[pos]
            missing = [v for v in node.input if v and v not in memo]
            if missing:
                stack.extend(missing)
                continue
            found: set[int] = set()
            for v in node.input:
                if v:
                    found |= memo[v]
            if pos in index:
                found.add(index[pos])
            memo[top] = frozenset(found)
            stack.pop()
        return memo[value]

    result = []
    for i, pos in enumerate(selected):
        deps: set[int] = set()
        for value in (*nodes[pos].input, *extra_deps(nodes[pos])):
            if value:
                deps |= above(value)
        deps.discard(i)
        result.append((pos, deps))
    return result


def decide_in_order(
    model: ModelProto,
    wanted: Callable[[NodeProto], bool],
    decide: Callable[[int, Shapes], None],
    extra_deps: Callable[[NodeProto], Iterable[str]] = lambda node: (),
) -> None:
    """Call ``decide(position, shapes)`` once for each node ``wanted`` selects, a node only after the selected
    nodes upstream of it (see :func:`candidates_in_order`), with the shapes inferred on ``model`` as the earlier
    decisions left it (``decide`` makes its changes on ``model``). Where selected nodes wait on each other, the
    rest are decided on the shapes at hand."""
    pending = candidates_in_order(model, wanted, extra_deps)
    done: set[int] = set()
    while len(done) < len(pending):
        shapes = infer(model)
        ready = [i for i, (_, deps) in enumerate(pending) if i not in done and deps <= done]
        if not ready:
            ready = [i for i in range(len(pending)) if i not in done]
        for i in ready:
            decide(pending[i][0], shapes)
            done.add(i)


def runs(src: list[int], dst: list[int]) -> list[tuple[range, range]] | None:
    """``src`` and ``dst`` cut into runs of consecutive dims with equal products, each as short as it can be
    (trailing 1s of ``src`` join the last run); None where the products do not match."""
    if 0 in src or 0 in dst:
        return None
    groups: list[tuple[range, range]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        si, sj, ps, pd = i, j, 1, 1
        if i < len(src):
            ps, i = src[i], i + 1
        if j < len(dst):
            pd, j = dst[j], j + 1
        while ps != pd:
            if ps < pd and i < len(src):
                ps, i = ps * src[i], i + 1
            elif pd < ps and j < len(dst):
                pd, j = pd * dst[j], j + 1
            else:
                return None
        if sj == j and groups:  # trailing 1s of src with no dst dim left: they merge into the run before
            groups[-1] = (range(groups[-1][0].start, i), groups[-1][1])
        else:
            groups.append((range(si, i), range(sj, j)))
    return groups


def rescaled(old: list[int], new: list[int], target: list[int]) -> list[int] | None:
    """``target`` (explicit, for input ``old``) for input ``new``: a run of target dims that merges input dims
    takes their new product; None where a changed input dim is split over several target dims."""
    groups = runs(old, target)
    if groups is None:
        return None
    result = list(target)
    for src, dst in groups:
        if [old[i] for i in src] == [new[i] for i in src]:
            continue
        free = [j for j in dst if target[j] != 1] or list(dst)[:1]
        if len(free) != 1:
            return None
        result[free[0]] = math.prod(new[i] for i in src)
    return result


def strict_check(model: ModelProto, what: str) -> ModelProto:
    """``model`` with the shapes onnx's strict inference (data propagation on) gives it, its declared output shapes
    and value_info left out; a Refused naming the node where inference fails, ``what`` saying at which change."""
    probe = lean(model)
    del probe.graph.value_info[:]
    for out in probe.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    try:
        return onnx.shape_inference.infer_shapes(probe, check_type=True, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as exc:
        raise absent_refusal(str(exc)) or Refused(_refusal(what, str(exc), model)) from exc


def absent_refusal(message: str) -> Refused | None:
    """Where onnx's inference error ``message`` says it needs the values of an absent tensor (a shape constant
    of a graph-only model, kept in its missing data file): a Refused naming the node and the tensor."""
    if ABSENT_VALUE not in message:
        return None
    node, tensor = _NODE_NAME.search(message), _ABSENT_TENSOR.search(message)
    where = f"{node.group(1)} {node.group(2) or '(unnamed)'}: " if node else ""
    name = tensor.group(1) if tensor else "a constant"
    return Refused(
        f"{where}its input {name!r} is absent (graph-only model: the weights' data file is missing), and the shapes "
        "after it depend on its values",
        "put the model's data file beside it, or re-export it with its small constants inline",
    )


def declare_inferred(model: ModelProto, what: str) -> list[Note]:
    """Check ``model`` with onnx's strict shape inference (data propagation on) and write what it infers into the
    declared shapes of the graph outputs and value_info; a Refused names the node where inference fails.

    Declared output shapes are cleared before inference (the old ones are what the pass changed); a value_info
    entry that inference shapes differently is updated, one it cannot shape is dropped, so that no declared shape
    contradicts inference. Returns a note per output whose declared shape changed and one for value_info.
    """
    graph = model.graph
    inferred = strict_check(model, what)
    found = {vi.name: vi for vi in (*inferred.graph.value_info, *inferred.graph.output)}
    notes: list[Note] = []
    for out in graph.output:
        new = found.get(out.name)
        if new is not None and shape_of(new) is not None and shape_of(new) != shape_of(out):
            notes.append(Note(out.name, f"output shape {shape_text(shape_of(out))} -> {shape_text(shape_of(new))}"))
            out.type.CopyFrom(new.type)
    kept, updated, dropped = [], 0, 0
    for vi in graph.value_info:
        new = found.get(vi.name)
        if new is None or shape_of(new) is None:
            dropped += 1
            continue
        if shape_of(new) != shape_of(vi):
            updated += 1
            vi = new
        kept.append(vi)
    if updated or dropped:
        del graph.value_info[:]
        graph.value_info.extend(kept)
        notes.append(Note("value_info", f"{updated} entries updated to the inferred shapes, {dropped} dropped"))
    return notes


def _refusal(what: str, message: str, model: ModelProto) -> str:
    """A refusal naming the node onnx's inference error names, and the constant that fixes a size there where
    one does (:func:`fixed_by_constant`)."""
    match = _NODE_NAME.search(message)
    if match is None:
        return f"{what}; onnx shape inference: {message.strip()}"
    fixed = fixed_by_constant(model, match.group(2))
    if fixed is not None:
        return f"{match.group(1)} {match.group(2) or '(unnamed)'}: {fixed}"
    rest = message[match.end() :]
    following = _NODE_NAME.search(rest)
    reason = (rest[: following.start()] if following else rest).strip(" :\n(")
    return f"{match.group(1)} {match.group(2) or '(unnamed)'}: {what}; onnx shape inference: {reason}"


def fixed_by_constant(model: ModelProto, node_name: str) -> str | None:
    """Why node ``node_name`` of ``model`` cannot take its inputs' new shapes where a constant fixes a size there
    (an input computed from constants alone, or a constant Expand shape, whose dim is neither 1 nor the other
    operand's), as the end of a refusal; None where no constant does."""
    node = next((n for n in model.graph.node if (n.name or n.output[0]) == node_name), None)
    if node is None:
        return None
    constant = constants_only(model)
    shapes = infer(model)
    given = [(name, shapes[name]) for name in node.input if name and name not in constant and name in shapes]
    candidates = [(name, shapes.get(name), "input") for name in node.input if name in constant]
    if node.op_type == "Expand" and len(node.input) > 1 and (value := constant_value(model, node.input[1])) is not None:
        candidates = [(node.input[1], tuple(int(v) for v in value), "constant shape")]
    for name, fixed, kind in candidates:
        for other_name, other in given:
            dim = _conflict(fixed, other)
            if dim is not None and fixed is not None:
                given_dim = other[len(other) - len(fixed) + dim]
                return (
                    f"its {kind} {name!r} {shape_text(fixed)} comes from constants alone and fixes dim {dim} at "
                    f"{fixed[dim]}, the size the model was exported at, where the new shapes give {given_dim} "
                    f"({other_name!r} is {shape_text(other)})"
                )
    return None


def constants_only(model: ModelProto) -> set[str]:
    """The values of ``model``'s graph computed from constants alone (initializers that are not graph inputs,
    Constant nodes, and nodes that read nothing else)."""
    inputs = {vi.name for vi in model.graph.input}
    found = {init.name for init in model.graph.initializer if init.name not in inputs} | {""}
    for node in model.graph.node:  # topological order, as onnx requires
        has_graph = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        if not has_graph and all(name in found for name in node.input):
            found.update(node.output)
    found.discard("")
    return found


def _conflict(fixed: Shape | None, other: Shape) -> int | None:
    """The dim of ``fixed`` (right-aligned against ``other``, as broadcasting aligns them) where both are static,
    neither is 1 and they differ; None where there is none."""
    if fixed is None:
        return None
    for offset in range(1, min(len(fixed), len(other)) + 1):
        a, b = fixed[-offset], other[-offset]
        if isinstance(a, int) and isinstance(b, int) and a != b and 1 not in (a, b):
            return len(fixed) - offset
    return None


def shape_text(shape: Sequence[Dim] | None) -> str:
    """A shape as ``[1, 3, 224, 224]`` with ``?`` for unknown dims."""
    return "?" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
