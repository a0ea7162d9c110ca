"""The input-size pass: the last two dims of every image-like graph input (rank 4, NCHW) become ``height`` x
``width``, and what hard-codes the old spatial size follows.

The pass compares the shapes onnx's inference gives the original model with those of a working copy at the new
size, deciding nodes in dependency order, each on shapes the repairs upstream of it already fixed:

- AveragePool/MaxPool whose kernel covered its whole input (no padding, a 1x1 output: a global pool in effect,
  as the final 7x7 AveragePool of ResNet-50) becomes GlobalAveragePool/GlobalMaxPool. The global op states the
  intent, computes the same values (no padding is involved), and holds at any later size, where a kernel set to
  the new size would hard-code it again.
- Reshape with a constant target: the target is matched against the input's old shape as runs of consecutive
  dims merged into one (``[1, 768, 14, 14] -> [1, 768, 196]``); each entry becomes the product of its run at the
  new size. A target that splits or reorders dims, or whose runs are ambiguous, is refused naming the node.
- Resize with constant ``sizes``: each changed dim is scaled by new/old; a non-integer result is refused.
- A patch-embedding Conv (kernel = stride, no padding) whose new input is not a multiple of its stride would drop
  pixels: refused naming the node.
- Gemm/MatMul whose weight's K no longer matches the features it gets (a classifier head after Flatten at a new
  size, without a global pool): refused naming the node and both sizes.

Then onnx's strict shape inference checks the result (a fixed-length position embedding fails here, named by
its node) and gives the graph outputs and value_info their shapes.

The same repairs take any input dims but the batch to new sizes (:func:`resize_inputs`): a sequence length, a
rank-3 input's width, as ``--input`` asks for them on a model exported at static shapes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from onnx import ModelProto, NodeProto, helper

from onnxroof.load.inputs import runtime_inputs
from onnxroof.passes import Note, Refused, RewriteResult, unchanged
from onnxroof.passes.shape_repair import (
    Dim,
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
    strict_check,
)
from onnxroof.passes.weights import has_values

__all__ = ["input_size", "resize_inputs"]

_POOLS = {"AveragePool": "GlobalAveragePool", "MaxPool": "GlobalMaxPool"}
_TARGET = {"Reshape": 1, "Resize": 3}


def input_size(model: ModelProto, height: int, width: int) -> RewriteResult:
    """``model`` with every rank-4 graph input at ``height`` x ``width`` and the pools, Reshape targets and
    Resize sizes that hard-code the old size repaired (see the module).

    Refused: a size below 1, no rank-4 input, a node the model cannot keep at the new size (named).
    """
    if height < 1 or width < 1:
        raise Refused(f"input size {height}x{width}: both sides must be at least 1")
    images = [vi for vi in runtime_inputs(model.graph) if len(shape_of(vi) or ()) == 4]
    if not images:
        raise Refused("the model has no rank-4 (NCHW) graph input to resize")
    if all((shape_of(vi) or ())[2:] == (height, width) for vi in images):
        return unchanged(model)
    shapes = {vi.name: [*(shape_of(vi) or ())[:2], height, width] for vi in images}
    return resize_inputs(model, shapes, f"{height}x{width}", f"at input size {height}x{width}")


def resize_inputs(model: ModelProto, shapes: Mapping[str, Sequence[Dim]], tag: str, what: str) -> RewriteResult:
    """``model`` with the graph inputs named in ``shapes`` at those shapes (of their declared ranks; a dim that is
    not a number stays as declared) and what hard-codes their old sizes repaired, as :func:`input_size` repairs
    it. ``tag`` names the new constants, ``what`` says in a refusal at which change.
    Refused where a node cannot keep the new sizes (named)."""
    old_shapes = infer(model)
    work, out = copy_model(model), copy_model(model)
    declared = {vi.name: shape_of(vi) or () for vi in runtime_inputs(model.graph)}
    for graph in (work.graph, out.graph):
        for vi in graph.input:
            if vi.name in shapes:
                for dim, size in zip(vi.type.tensor_type.shape.dim, shapes[vi.name]):
                    if isinstance(size, int) and not (dim.HasField("dim_value") and dim.dim_value == size):
                        dim.Clear()
                        dim.dim_value = size
    notes = [
        Note(name, f"input shape {shape_text(declared[name])} -> {shape_text(shape)}") for name, shape in shapes.items()
    ]
    del work.graph.value_info[:]
    for vi in work.graph.output:
        vi.type.tensor_type.ClearField("shape")

    repairs = _Repairs(work, old_shapes, tag)
    decide_in_order(work, _wanted, repairs.decide)
    repairs.edits.apply(out)
    notes += repairs.notes
    _check_heads(out, old_shapes)
    notes += declare_inferred(out, what)
    return RewriteResult(out, True, tuple(notes), graph_only=not has_values(model))


def _wanted(node: NodeProto) -> bool:
    if node.op_type in _POOLS or node.op_type == "Conv":
        return True
    index = _TARGET.get(node.op_type)
    return index is not None and len(node.input) > index and bool(node.input[index])


def _ints(attrs: Sequence[object], name: str) -> list[int] | None:
    for attr in attrs:
        if getattr(attr, "name", None) == name:
            return list(getattr(attr, "ints"))  # noqa: B009
    return None


def _static(shape: Shape | None) -> list[int] | None:
    """The shape as ints, or None where it or a dim is unknown or symbolic."""
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return [int(d) for d in shape if d is not None]


class _Repairs:
    """The decision for each node that may hard-code the spatial size, made on the working copy's shapes."""

    def __init__(self, work: ModelProto, old_shapes: Shapes, tag: str) -> None:
        self.work, self.old_shapes, self.tag = work, old_shapes, tag
        self.edits = Edits()
        self.notes: list[Note] = []

    def decide(self, pos: int, shapes: Shapes) -> None:
        node = self.work.graph.node[pos]
        name = node.name or node.output[0]
        old, new = _static(self.old_shapes.get(node.input[0])), _static(shapes.get(node.input[0]))
        if old == new:
            return
        if node.op_type == "Conv":
            self.conv(node, name, new)
        elif node.op_type in _POOLS:
            self.pool(pos, node, name, old, new)
        else:
            value = constant_value(self.work, node.input[_TARGET[node.op_type]])
            if value is None or value.ndim != 1:
                return  # computed at run time: it follows the shapes
            if old is None or new is None:
                strict_check(self.work, "at the new input size")  # names the node that lost the shape
                raise Refused(
                    f"{node.op_type} {name}: its constant {node.input[_TARGET[node.op_type]]} may hard-code the "
                    f"input size, but the shape of its input {node.input[0]} is not known, so the pass cannot tell"
                )
            if node.op_type == "Reshape":
                self.reshape(pos, node, name, [int(v) for v in value], old, new, value.dtype)
            else:
                self.resize(pos, node, name, [int(v) for v in value], old, new, value.dtype)

    def conv(self, node: NodeProto, name: str, new: list[int] | None) -> None:
        kernel, strides = _ints(node.attribute, "kernel_shape"), _ints(node.attribute, "strides")
        pads = _ints(node.attribute, "pads") or []
        if new is None or not kernel or kernel != strides or any(pads) or kernel == [1] * len(kernel):
            return
        if any(size % k for size, k in zip(new[2:], kernel)):
            raise Refused(
                f"Conv {name}: a patch embedding (kernel = stride = {kernel}) needs an input that is a multiple "
                f"of its stride; at the new size it gets {shape_text(new[2:])}"
            )

    def pool(self, pos: int, node: NodeProto, name: str, old: list[int] | None, new: list[int] | None) -> None:
        kernel = _ints(node.attribute, "kernel_shape")
        pads, dilations = _ints(node.attribute, "pads") or [], _ints(node.attribute, "dilations") or []
        whole = old is not None and kernel == old[2:] and not any(pads) and all(d == 1 for d in dilations)
        if not whole or len(node.output) > 1 or new is None:
            return
        op = node.op_type
        glob = helper.make_node(_POOLS[op], [node.input[0]], [node.output[0]], name=node.name)
        self.edits.replace_node(self.work, pos, glob)
        self.notes.append(
            Note(
                name,
                f"{op} kernel {kernel} covered its whole input; it becomes {glob.op_type}, which pools "
                f"the whole {shape_text(new[2:])} input at the new size",
            )
        )

    def reshape(
        self, pos: int, node: NodeProto, name: str, target: list[int], old: list[int], new: list[int], dtype: object
    ) -> None:
        allowzero = any(a.name == "allowzero" and a.i for a in node.attribute)
        explicit = [old[i] if t == 0 and not allowzero and i < len(old) else t for i, t in enumerate(target)]
        if -1 in explicit:
            known = math.prod(t for t in explicit if t != -1)
            explicit[explicit.index(-1)] = math.prod(old) // known if known else 0
        sizes = rescaled(old, new, explicit)
        if sizes is None:
            raise Refused(
                f"Reshape {name}: its constant target {target} splits a dim that changes with the input size "
                f"(input {node.input[0]} is {shape_text(old)}, {shape_text(new)} at the new size); the pass "
                "cannot tell which entries encode the spatial size"
            )
        if sizes == explicit:
            return
        final = [
            t if (t == -1 or (t == 0 and not allowzero and i < len(new) and sizes[i] == new[i])) else sizes[i]
            for i, t in enumerate(target)
        ]
        self.edits.set_constant(self.work, pos, 1, np.array(final, dtype=dtype), self.tag)  # type: ignore[call-overload]
        self.notes.append(Note(name, f"Reshape target {target} -> {final} (input {shape_text(new)})"))

    def resize(
        self, pos: int, node: NodeProto, name: str, sizes: list[int], old: list[int], new: list[int], dtype: object
    ) -> None:
        scaled = []
        for axis, (size, before, after) in enumerate(zip(sizes, old, new)):
            if size * after % before:
                raise Refused(
                    f"Resize {name}: sizes {sizes} scaled by {after}/{before} on axis {axis} is not an integer"
                )
            scaled.append(size * after // before)
        if scaled != sizes:
            self.edits.set_constant(self.work, pos, 3, np.array(scaled, dtype=dtype), self.tag)  # type: ignore[call-overload]
            self.notes.append(Note(name, f"Resize sizes {sizes} -> {scaled} (input {shape_text(new)})"))


def _check_heads(model: ModelProto, old_shapes: Shapes) -> None:
    """Refuse a Gemm/MatMul whose weight's K no longer matches the features its input has at the new size."""
    probe = copy_model(model)
    del probe.graph.value_info[:]
    for vi in probe.graph.output:
        vi.type.tensor_type.ClearField("shape")
    shapes = infer(probe)
    for node in model.graph.node:
        if node.op_type not in ("Gemm", "MatMul") or len(node.input) < 2:
            continue
        a, b = _static(shapes.get(node.input[0])), _static(shapes.get(node.input[1]))
        before = _static(old_shapes.get(node.input[0]))
        if not a or not b or len(b) < 2 or a == before:
            continue
        trans_a = any(x.name == "transA" and x.i for x in node.attribute) and node.op_type == "Gemm"
        trans_b = any(x.name == "transB" and x.i for x in node.attribute) and node.op_type == "Gemm"
        k_in = a[0] if trans_a else a[-1]
        k_weight = b[-1] if trans_b else b[-2]
        if k_in != k_weight:
            raise Refused(
                f"{node.op_type} {node.name or node.output[0]}: its weight {node.input[1]} takes {k_weight} "
                f"features but the new size gives {k_in} (input {node.input[0]} {shape_text(a)}); a classifier "
                "head with fixed features cannot take another size unless the features are pooled"
            )
