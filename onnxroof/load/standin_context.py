"""What a stand-in builder works with (standin_rules.py): the StandinContext it emits standard nodes into, and
small readers of the node it replaces.

A builder gets the node and a StandinContext (opset, known dtypes and ranks, fresh names, emitted nodes) and
returns True when it emitted a stand-in, False to leave the node alone. The stand-ins are only ever
shape-inferred, never run for their values, so a stand-in may compute anything as long as the shapes and dtypes
are right (a transposed operand may be a reshape of the original, a fused activation is dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from onnxroof.ir import op_domain
from onnxroof.protos import AttributeProto, NodeProto, TensorProto

MS = "com.microsoft"
NCHWC = "com.microsoft.nchwc"

_INT64_MAX = 2**63 - 1

# Axis reorderings written as pieces of the axis list, so that they hold for any rank:
# [(0, 1), (-1, None), (1, -1)] is "axis 0, then the last axis, then axes 1 .. -2" (channels last -> first).
Pieces = Sequence[tuple[int, int | None]]
TO_CHANNELS_FIRST: Pieces = ((0, 1), (-1, None), (1, -1))
TO_CHANNELS_LAST: Pieces = ((0, 1), (2, None), (1, 2))


class StandinContext:
    """The state one builder works with: the model's default opset, the element types and ranks known so far
    (graph inputs, initializers, Constant outputs, value_info), the dims of constant tensors, the nodes that read
    each tensor, fresh names, and the stand-in nodes it emits."""

    def __init__(
        self,
        opset: int,
        known: dict[str, tuple[int, int | None]],
        constant_dims: dict[str, tuple[int, ...]],
        consumers: dict[str, list[NodeProto]],
        taken: set[str],
        counter: Iterator[int],
    ):
        self.opset = opset
        self._known = known
        self._constant_dims = constant_dims
        self._consumers = consumers
        self._taken = taken
        self._counter = counter
        self.nodes: list[NodeProto] = []

    def dtype(self, name: str) -> int | None:
        """The element type of a tensor when known (None for unknown or an omitted input '')."""
        entry = self._known.get(name) if name else None
        return entry[0] if entry and entry[0] != TensorProto.UNDEFINED else None

    def rank(self, name: str) -> int | None:
        """The rank of a tensor when known."""
        entry = self._known.get(name) if name else None
        return entry[1] if entry else None

    def constant_dims(self, name: str) -> tuple[int, ...] | None:
        """The dims of a weight or Constant output (weights are static in every optimized model)."""
        return self._constant_dims.get(name)

    def consumers(self, name: str) -> list[NodeProto]:
        """The (original) nodes of the graph being rewritten that read ``name``."""
        return self._consumers.get(name, [])

    def fresh(self, hint: str) -> str:
        """A tensor name used nowhere in the model."""
        while True:
            name = f"{hint}__standin{next(self._counter)}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    def emit(
        self,
        op_type: str,
        inputs: Sequence[str],
        output: str | None = None,
        attributes: Iterable[AttributeProto] = (),
        **attrs: Any,
    ) -> str:
        """Append a default-domain node with one output (a fresh name unless given); returns the output name."""
        from onnx import helper  # a stand-in is being built: the model has ops no inference knows

        out = output or self.fresh(op_type.lower())
        node = helper.make_node(op_type, list(inputs), [out], name=self.fresh(f"{op_type}_node"), **attrs)
        node.attribute.extend(attributes)
        self.nodes.append(node)
        return out

    def const(self, values: Sequence[float] | Sequence[int] | np.ndarray, dtype: npt.DTypeLike = np.int64) -> str:
        """A Constant node holding ``values`` (Constant rather than an initializer: valid at every IR version and
        scoped to the (sub)graph being rewritten)."""
        from onnx import helper, numpy_helper

        out = self.fresh("const")
        array: np.ndarray = np.asarray(values, dtype=dtype)
        tensor = numpy_helper.from_array(array, out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=self.fresh("Constant_node"), value=tensor))
        self._known[out] = (helper.np_dtype_to_tensor_dtype(array.dtype), array.ndim)
        return out

    def permute(self, x: str, pieces: Pieces, output: str | None = None, rank: int | None = None) -> str | None:
        """``x`` with its axes reordered as ``pieces`` say. With a known rank this is a Transpose; otherwise a
        Reshape of ``x`` to the reordered shape (same element count, so the same shape as the transpose; the
        values differ, which a stand-in never uses), built from Shape/Slice/Concat that both inferences propagate.
        None when the rank is unknown and the opset has no Slice with tensor inputs."""
        rank = rank if rank is not None else self.rank(x)
        if rank is not None:
            perm = [axis for start, end in pieces for axis in range(*slice(start, end).indices(rank))]
            if perm == list(range(rank)):
                return self.emit("Identity", [x], output) if output else x
            return self.emit("Transpose", [x], output, perm=perm)
        if self.opset < 10:
            return None
        shape = self.emit("Shape", [x])
        parts = [
            self.emit(
                "Slice", [shape, self.const([start]), self.const([_INT64_MAX if end is None else end]), self.const([0])]
            )
            for start, end in pieces
        ]
        return self.emit("Reshape", [x, self.emit("Concat", parts, axis=0)], output)

    def slice(self, x: str, start: int, end: int, axis: int, output: str | None = None) -> str | None:
        """``x[start:end]`` along ``axis``, at the model's opset (attributes before opset 10, inputs after)."""
        if self.opset >= 10:
            return self.emit("Slice", [x, self.const([start]), self.const([end]), self.const([axis])], output)
        if axis < 0:
            rank = self.rank(x)
            if rank is None:
                return None
            axis += rank
        return self.emit("Slice", [x], output, starts=[start], ends=[end], axes=[axis])

    def reduce_mean(self, x: str, axes: Sequence[int], output: str | None = None) -> str:
        """ReduceMean keeping the reduced axes, at the model's opset (axes an attribute before 18, an input
        after)."""
        if self.opset >= 18:
            return self.emit("ReduceMean", [x, self.const(list(axes))], output, keepdims=1)
        return self.emit("ReduceMean", [x], output, axes=list(axes), keepdims=1)

    def cast(self, x: str, output: str, dtype: int | None, like: str = "") -> str:
        """``x`` as ``dtype`` (a Cast); as the type of ``like`` where ``dtype`` is unknown (CastLike, opset 15);
        else unchanged."""
        if dtype is not None:
            return self.emit("Cast", [x], output, to=dtype)
        if like and self.opset >= 15:
            return self.emit("CastLike", [x, like], output)
        return self.emit("Identity", [x], output)


StandinBuilder = Callable[[NodeProto, StandinContext], bool]


# -------------------------------------------------------------------------------------------------------------
# Reading the node a builder replaces


def domain_of(node: NodeProto) -> str:
    """A node's domain, with the default domain's two spellings ('' and 'ai.onnx') as ''."""
    return op_domain(node.domain)


def attr(node: NodeProto, name: str, default: Any = None) -> Any:
    """The value of a node's attribute (of any type: the builder knows what its op holds there), or ``default``
    where it has none of that name."""
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def copied_attrs(node: NodeProto, keep: Iterable[str] | None = None, drop: Iterable[str] = ()) -> list[AttributeProto]:
    """Copies of a node's attributes: those named in ``keep`` (all when None), minus those in ``drop``."""
    keep_set = None if keep is None else set(keep)
    drop_set = set(drop)
    out = []
    for a in node.attribute:
        if a.name in drop_set or (keep_set is not None and a.name not in keep_set):
            continue
        copy = AttributeProto()
        copy.CopyFrom(a)
        out.append(copy)
    return out


def inputs_at(node: NodeProto, indices: Iterable[int]) -> list[str]:
    """The inputs at those indices, with trailing omitted ones ('' or absent) dropped."""
    names = [node.input[i] if i < len(node.input) else "" for i in indices]
    while names and not names[-1]:
        names.pop()
    return names


def input_at(node: NodeProto, index: int) -> str:
    """The input at ``index``; '' where it is omitted."""
    return node.input[index] if index < len(node.input) else ""


def output_at(node: NodeProto, index: int) -> str:
    """The output at ``index``; '' where it is omitted."""
    return node.output[index] if index < len(node.output) else ""
