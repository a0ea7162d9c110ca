"""The batch pass: dim 0 of every graph input becomes ``n``, and the constants that hard-code the old batch follow.

Which constants carry the batch is found by tracing it: the pass infers shapes on a working copy whose inputs
have a probe batch, a prime that divides no size of the model, so a dim carries the batch exactly where the probe
divides it. Nodes are decided in dependency order, each on shapes that the repairs upstream of it already fixed:

- Reshape with a constant target: where its input carries the batch in dim 0 and the target's dim 0 is the old
  batch, the target's dim 0 becomes ``n``. A literal ``n`` rather than 0 (copy) or -1 (infer): it keeps every
  shape static and checkable, means the same whatever the target's other entries are (a -1 elsewhere stays the
  one inferred dim), and does not depend on ``allowzero``. A target that merges the batch with the dims next to
  it (``[batch*seq, hidden]`` as a constant, as the dynamo exporter writes a Linear on 3-D input) is matched
  against the input's shape at the old batch as runs of consecutive dims with equal products: the target entry
  of the batch's run takes that run's product at ``n``. Where the runs do not name one entry (a batch of 1 and
  the run split over several entries), the target is refused, naming the node and the target.
- Resize with constant ``sizes``: dim 0 of ``sizes`` becomes ``n`` where its input carries the batch.
- Expand and ConstantOfShape with a constant shape whose output is concatenated (off axis 0) with a tensor that
  carries the batch: the shape's dim 0 becomes ``n`` (a class token expanded to the batch, as in ViT).

Then onnx's strict shape inference checks the result and gives the graph outputs and value_info their shapes.
"""

from __future__ import annotations

import numpy as np
from onnx import ModelProto, NodeProto

from onnxroof.load.inputs import runtime_inputs
from onnxroof.passes import Note, Refused, RewriteResult, unchanged
from onnxroof.passes.shape_repair import (
    Edits,
    Shape,
    Shapes,
    constant_value,
    copy_model,
    decide_in_order,
    declare_inferred,
    infer,
    rescaled,
    shape_of,
    shape_text,
)
from onnxroof.passes.weights import has_values

__all__ = ["batch"]

_PROBES = (10007, 10009, 10037, 10039, 10061, 10067)  # primes larger than any batch a model hard-codes


def batch(model: ModelProto, n: int) -> RewriteResult:
    """``model`` with batch ``n``: dim 0 of every graph input (static or symbolic) set to ``n``, and the
    Reshape/Resize/Expand/ConstantOfShape constants that hard-code the old batch repaired (see the module).

    Refused: ``n`` < 1, an input without a batch dim (rank 0 or no shape), inputs that disagree on the batch, a
    constant that folds the batch into another dim, a result onnx's shape inference rejects.
    """
    if n < 1:
        raise Refused(f"batch {n}: the batch must be at least 1")
    inputs = runtime_inputs(model.graph)
    if not inputs:
        raise Refused("the model has no graph input to give a batch")
    olds: dict[str, int | str | None] = {}
    for vi in inputs:
        shape = shape_of(vi)
        if not shape:
            what = "has no declared shape" if shape is None else "is a scalar (rank 0)"
            raise Refused(f"input {vi.name} {what}: it has no batch dim")
        olds[vi.name] = shape[0]
    if len(set(olds.values())) > 1:
        listed = ", ".join(f"{name} ({'?' if b is None else b})" for name, b in olds.items())
        raise Refused(f"the inputs disagree on the batch (dim 0): {listed}")
    old = next(iter(olds.values()))
    if old == n:
        return unchanged(model)

    probe = _probe(model)
    work, out = copy_model(model), copy_model(model)
    notes = []
    for graph, value in ((work.graph, probe), (out.graph, n)):
        for vi in graph.input:
            if vi.name in olds:
                dim = vi.type.tensor_type.shape.dim[0]
                dim.Clear()
                dim.dim_value = value
    for vi in inputs:
        notes.append(Note(vi.name, f"input shape {shape_text(shape_of(vi))}: batch {old or '?'} -> {n}"))
    del work.graph.value_info[:]
    for vi in work.graph.output:
        vi.type.tensor_type.ClearField("shape")

    edits = Edits()
    repairs = _Repairs(work, edits, old, probe, n)
    decide_in_order(work, _wanted, repairs.decide, lambda node: _concat_partners(work, node))
    for key, (_, tag) in list(edits.constants.items()):
        edits.constants[key] = (repairs.finals[key], tag)  # the working copy holds the probe batch there
    edits.apply(out)
    notes += repairs.notes
    notes += declare_inferred(out, f"at batch {n}")
    return RewriteResult(out, True, tuple(notes), graph_only=not has_values(model))


def _probe(model: ModelProto) -> int:
    """A prime that divides no static size the model's inference shows."""
    sizes = {d for shape in infer(model).values() for d in shape if isinstance(d, int) and d > 0}
    for prime in _PROBES:
        if not any(size % prime == 0 for size in sizes):
            return prime
    raise Refused("the model's sizes leave no probe to trace the batch with")  # sizes of 10^4 squared and up


_TARGET = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0, "Resize": 3}


def _wanted(node: NodeProto) -> bool:
    index = _TARGET.get(node.op_type)
    return index is not None and len(node.input) > index and bool(node.input[index])


def _concat_partners(model: ModelProto, node: NodeProto) -> list[str]:
    """For an Expand or ConstantOfShape: the other inputs of the Concat nodes that take its output."""
    if node.op_type not in ("Expand", "ConstantOfShape"):
        return []
    return [
        value
        for consumer in model.graph.node
        if consumer.op_type == "Concat" and node.output[0] in consumer.input
        for value in consumer.input
        if value != node.output[0]
    ]


class _Repairs:
    """The decision for each node that may hard-code the batch, made on the working copy's shapes."""

    def __init__(self, work: ModelProto, edits: Edits, old: int | str | None, probe: int, n: int) -> None:
        self.work, self.edits, self.old, self.probe, self.n = work, edits, old, probe, n
        self.notes: list[Note] = []
        self.finals: dict[tuple[int, int], np.ndarray] = {}  # each edited constant's value at batch n

    def carries(self, dim: object) -> bool:
        """Whether a dim scales with the batch."""
        return isinstance(dim, int) and dim > 0 and dim % self.probe == 0

    def decide(self, pos: int, shapes: Shapes) -> None:
        node = self.work.graph.node[pos]
        index = _TARGET[node.op_type]
        value = constant_value(self.work, node.input[index])
        if value is None or value.ndim != 1 or value.size == 0:
            return  # computed at run time: it follows the batch
        target = [int(v) for v in value]
        data = shapes.get(node.input[0]) if node.op_type != "ConstantOfShape" else None
        if node.op_type == "Reshape":
            self.reshape(pos, node, target, data)
        elif node.op_type == "Resize":
            if data is not None and self.carries(data[0]) and target[0] == self.old:
                self.set(pos, node, index, target, "sizes")
        elif target[0] == self.old and self.takes_batch(node, data, shapes):
            self.set(pos, node, index, target, "shape")

    def reshape(self, pos: int, node: NodeProto, target: list[int], data: Shape | None) -> None:
        name = node.name or node.output[0]
        if data is None or not all(isinstance(d, int) for d in data):
            if target[0] == self.old:
                raise Refused(
                    f"Reshape {name}: target {target} may hard-code batch {self.old} in dim 0, but the shape of "
                    f"its input {node.input[0]} is unknown, so the pass cannot tell"
                )
            return
        dims = [int(d) for d in data if d is not None]
        if not any(self.carries(d) for d in dims):
            return
        allowzero = any(a.name == "allowzero" and a.i for a in node.attribute)
        copied = [i for i, t in enumerate(target) if t == 0 and not allowzero and i < len(dims)]
        if target[0] == self.old and self.carries(dims[0]):
            rest = [dims[i] if i in copied else t for i, t in enumerate(target)][1:]
            if -1 in rest or int(np.prod(rest)) * self.probe == int(np.prod(dims)):
                self.set(pos, node, 1, target, "target")
                return
        if -1 in target or any(self.carries(dims[i]) for i in copied):
            return  # a -1 or a copied dim takes the batch
        if self.fold(pos, node, target, dims, copied):
            return
        raise Refused(
            f"Reshape {name}: its constant target {target} folds the batch into another dim (input "
            f"{node.input[0]} is {shape_text(self._old_dims(dims))} at batch {self.old}); the pass cannot tell "
            "which entry to scale by the new batch"
        )

    def fold(self, pos: int, node: NodeProto, target: list[int], dims: list[int], copied: list[int]) -> bool:
        """Repair a target that merges the batch with the dims next to it (``[batch*seq, hidden]``, as the
        dynamo exporter writes a Linear on 3-D input): matched against the input at the old batch as runs of
        consecutive dims with equal products, the one target entry of the batch's run takes that run's product at
        the new batch. False where the old batch is not a number or the runs do not say which entry it is."""
        if not isinstance(self.old, int):
            return False
        old = self.old

        def at(batch: int) -> list[int]:
            return [d // self.probe * batch if self.carries(d) else d for d in dims]

        explicit = [at(old)[i] if i in copied else t for i, t in enumerate(target)]
        probed, final = rescaled(at(old), dims, explicit), rescaled(at(old), at(self.n), explicit)
        if probed is None or final is None:
            return False
        for i in copied:  # a copied dim does not carry the batch here: it stays a copy
            probed[i] = final[i] = 0
        name = node.name or node.output[0]
        self.record(pos, 1, probed, final, Note(name, f"Reshape target {target} -> {final} (the batch merged)"))
        return True

    def _old_dims(self, dims: list[int]) -> list[int | str]:
        """The dims with the probe batch shown as the old batch's symbol."""
        return [d if not self.carries(d) else f"{d // self.probe}*batch" if d != self.probe else "batch" for d in dims]

    def takes_batch(self, node: NodeProto, data: Shape | None, shapes: Shapes) -> bool:
        """Whether dim 0 of an Expand or ConstantOfShape shape must be the batch: its output is concatenated with
        a tensor that carries the batch, or (Expand) its input carries the batch where the old batch was not 1
        (so that the old shape does not broadcast against it)."""
        if self.concatenated_with_batch(node, shapes):
            return True
        return node.op_type == "Expand" and bool(data) and self.carries((data or (None,))[0]) and self.old != 1

    def concatenated_with_batch(self, node: NodeProto, shapes: Shapes) -> bool:
        """Whether a Concat off axis 0 takes the node's output with a tensor that carries the batch in dim 0."""
        for consumer in self.work.graph.node:
            if consumer.op_type != "Concat" or node.output[0] not in consumer.input:
                continue
            axis = next((a.i for a in consumer.attribute if a.name == "axis"), 0)
            for value in consumer.input:
                shape = shapes.get(value)
                if value != node.output[0] and shape and axis % len(shape) != 0 and self.carries(shape[0]):
                    return True
        return False

    def set(self, pos: int, node: NodeProto, index: int, target: list[int], what: str) -> None:
        """Dim 0 of the node's constant input ``index`` becomes the batch (the probe here, ``n`` in the result)."""
        final = [self.n, *target[1:]]
        name = node.name or node.output[0]
        note = Note(name, f"{node.op_type} {what} {target} -> {final} (dim 0 is the batch)")
        self.record(pos, index, [self.probe, *target[1:]], final, note)

    def record(self, pos: int, index: int, probed: list[int], final: list[int], note: Note) -> None:
        """The node's constant input ``index`` becomes ``probed`` in the working copy and ``final`` in the
        result."""
        old_value = constant_value(self.work, self.work.graph.node[pos].input[index])
        assert old_value is not None
        self.edits.set_constant(self.work, pos, index, np.array(probed, dtype=old_value.dtype), f"batch{self.n}")
        self.finals[(pos, index)] = np.array(final, dtype=old_value.dtype)
        self.notes.append(note)
