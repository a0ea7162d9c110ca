"""At which work a node's class ceiling is read: a kernel's FLOPs and bytes, or those of one of the units it
repeats one after the other (the products of a batched matmul, the groups of a plain-layout grouped convolution,
the time steps of a recurrent op, the rows of a softmax or a layer normalization, the matrices of a batched
transpose), and the FLOPs the ceiling applies to (a recurrent op's input projection apart, which runs at its
product's ceiling). The prediction and the calibration read the ceilings through the same functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import prod

from onnxroof.costs import Cost, NodeView
from onnxroof.devices.classes import CLASSES
from onnxroof.predict.op_classes import known_shape, rows_class, taps_inside, transposed_matrices

__all__ = ["InputProjection", "ceiling_work", "input_projection", "repeats", "stepped_flops"]


def repeats(view: NodeView, cls: str) -> int:
    """How many units of work a node's kernel runs one after the other, each like the others, where its class's
    ceiling is read by the size of one unit (the class's ``work`` in ``onnxroof.devices.classes.TABLE``): the
    products of a batched matmul (one per batch element and head), the groups of a plain-layout grouped or
    depthwise convolution, the time steps of a recurrent op in each of its directions, the rows of a softmax or a
    layer normalization, the matrices of a batched transpose. 1 for every other class, and where the shapes do
    not say."""
    entry = CLASSES.get(cls)
    return _UNITS[entry.work](view) if entry is not None else 1


def _groups(view: NodeView) -> int:
    """The groups of a grouped convolution, each an im2col and a product of its own in plain layout."""
    return max(int(view.attr("group", 1) or 1), 1)


def _steps(view: NodeView) -> int:
    """A recurrent op's time steps in all its directions, which onnxruntime runs one after the other."""
    return _time_steps(view) * _directions(view)


def _products(view: NodeView) -> int:
    """The independent matrix products of a matmul: its output's leading axes (all but the last two) for a
    MatMul, batch x heads for a fused attention op."""
    if view.op_type in ("MatMul", "FusedMatMul"):
        out = known_shape(view.output(0))
        return max(prod(out[:-2]), 1) if out and len(out) > 2 else 1
    x = known_shape(view.input(0))
    heads = view.attr("num_heads")
    return max(x[0] * int(heads), 1) if x and heads else 1


def _softmax_rows(view: NodeView) -> int:
    """The rows a softmax normalizes one after the other: its input's elements over the length of its ``axis``
    (the last by default). onnxruntime finds each row's maximum, sums its exponentials and scales it in passes of
    its own, so a row costs a fixed part beside its elements and short rows run slower per element than long
    ones."""
    x = known_shape(view.input(0))
    axis = _axis(view, len(x)) if x else None
    if x is None or axis is None or x[axis] <= 0:
        return 1
    return max(prod(x) // x[axis], 1)


def _normalized_rows(view: NodeView) -> int:
    """The rows a layer normalization normalizes one after the other: its output's axes before ``axis`` (the last
    by default; an EmbedLayerNormalization's output is [batch, sequence, hidden], one row per token).
    onnxruntime's kernel makes a pass over each row for its mean and variance and another to scale it, so a row
    costs a fixed part beside its elements, and short rows run slower per element than long ones."""
    out = known_shape(view.output(0))
    axis = _axis(view, len(out)) if out else None
    if out is None or axis is None:
        return 1
    return max(prod(out[:axis]), 1)


def _axis(view: NodeView, rank: int) -> int | None:
    """A node's ``axis`` attribute (the last axis by default) as an index into a shape of ``rank`` axes; None
    where it lies outside."""
    axis = int(view.attr("axis", -1))
    axis = axis + rank if axis < 0 else axis
    return axis if 0 <= axis < rank else None


def _directions(view: NodeView) -> int:
    """A recurrent op's directions, which onnxruntime runs one after the other: 2 when bidirectional, else 1."""
    return 2 if view.text("direction", "forward") == "bidirectional" else 1


def _time_steps(view: NodeView) -> int:
    """The sequence length of a recurrent op: X's first axis (its second with ``layout`` = 1)."""
    x = known_shape(view.input(0))
    if not x or len(x) < 2:
        return 1
    return max(x[1] if int(view.attr("layout", 0) or 0) == 1 else x[0], 1)


@dataclass(frozen=True, slots=True)
class InputProjection:
    """A recurrent op's input projection ``X W^T``: onnxruntime's LSTM, GRU and RNN compute it for every time step
    at once, one matrix product of ``rows`` (time steps x batch) rows per direction, before the steps; only the
    recurrent product ``H_{t-1} R^T`` and the gates run step by step. The product runs at the ceiling of its
    ``product_class`` (gemm, gemm_short or gemv by its rows), read at the FLOPs of one direction's product."""

    flops: float  # all directions together
    directions: int
    rows: int
    product_class: str


def input_projection(view: NodeView, cls: str) -> InputProjection | None:
    """The input projection of a recurrent op (class ``cls``): ``2 * rows * directions * G*H*I`` FLOPs, the
    product of W's three axes (``[directions, G*H, I]``, or ``[directions, I, G*H]`` for DynamicQuantizeLSTM) by
    X's time steps and batch. None for any other class, and where X's or W's shape is unknown."""
    entry = CLASSES.get(cls)
    if entry is None or entry.work != "step":
        return None
    x, w = known_shape(view.input(0)), known_shape(view.input(1))
    if x is None or w is None or len(x) != 3 or len(w) != 3:
        return None
    rows = x[0] * x[1]
    return InputProjection(2.0 * rows * prod(w), _directions(view), rows, rows_class(rows))


def ceiling_work(view: NodeView, cost: Cost, cls: str) -> tuple[float, float]:
    """(FLOPs, bytes) a class's ceiling is read at for this node: the FLOPs its kernel computes (those of the taps
    inside the input for an NCHWc convolution, :func:`taps_inside`; less the input projection of a recurrent op,
    which runs at its product's ceiling: :func:`input_projection`) and its bytes, each divided among the units
    its kernel repeats (:func:`repeats`). The calibration keys its points the same way."""
    n = repeats(view, cls)
    return stepped_flops(view, cost, cls) / n, cost.bytes / n


def stepped_flops(view: NodeView, cost: Cost, cls: str) -> float:
    """The FLOPs a node's class ceiling applies to: its kernel's (see :func:`ceiling_work`), all its units."""
    projection = input_projection(view, cls)
    return max(cost.flops * taps_inside(view) - (projection.flops if projection else 0.0), 0.0)


# How to count each unit of work of the table's (onnxroof.devices.classes.WORK_UNITS).
_UNITS: Mapping[str, Callable[[NodeView], int]] = {
    "node": lambda _: 1,
    "product": _products,
    "group": _groups,
    "row": _softmax_rows,
    "trailing_row": _normalized_rows,
    "matrix": transposed_matrices,
    "step": _steps,
}
