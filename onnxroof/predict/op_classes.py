"""The op classes: which kind of kernel an engine runs a node with, each with a ceiling of its own on a calibrated
device. The classes themselves (base, fallback, roof, unit of work) are declared once, in
``onnxroof.devices.classes.TABLE``; this module classifies nodes into them.

A node's class is the base class its op registers with its cost function (``onnxroof.costs.engine_class``),
refined by the node's shapes, layout or operands through ordered rules (:data:`REFINEMENTS`, each rule a
predicate, a class and a reason); :func:`classify` gives the class and the reason, :func:`op_class` the class
alone. A device without a ceiling for a class uses the one its fallback names (:data:`CLASS_FALLBACK`). At which
work a class's ceiling is read is ``onnxroof.predict.class_work``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from math import prod
from typing import Any, NamedTuple

from onnxroof.costs import OTHER, SHAPE, NodeView, engine_class
from onnxroof.costs.movement import interpolation_mode
from onnxroof.costs.nbits import INT8_ACCURACY_LEVEL, NBITS_PRODUCTS
from onnxroof.devices import Ceiling, Device
from onnxroof.devices.classes import TABLE
from onnxroof.predict.class_rules import Classification, Refinement, Rule, always, known_shape
from onnxroof.predict.conv_classes import (
    BORDER_CONV_SHARE,
    CONV,
    CONV_INTEGER,
    NARROW_GROUP_CHANNELS,
    QCONV,
)
from onnxroof.predict.conv_windows import NCHWC_DOMAIN, border_share, taps_inside

__all__ = [
    "ACTIVATION_CLASS_OF",
    "ATTENTION",
    "BORDER_CONV_SHARE",
    "CLASS_FALLBACK",
    "NARROW_GROUP_CHANNELS",
    "NCHWC_DOMAIN",
    "OTHER",
    "POW_BY_MULTIPLYING",
    "REFINEMENTS",
    "SHAPE",
    "SHORT_PRODUCT_ROWS",
    "Classification",
    "Refinement",
    "Rule",
    "border_share",
    "ceiling_for",
    "classify",
    "known_shape",
    "op_class",
    "product_rows",
    "rows_class",
    "taps_inside",
    "transposed_matrices",
]

# A device without a ceiling for a class uses the ceiling of the class it falls back to (the first one it has).
CLASS_FALLBACK: Mapping[str, str] = {c.name: c.fallback for c in TABLE if c.fallback is not None}

# ------------------------------------------------------------------------------------------------ products

# Under this many rows a product by a prepacked weight uses each weight element in few multiply-adds, and its
# rate falls from near the peak towards the rate the weight streams at.
SHORT_PRODUCT_ROWS = 16


@dataclass(frozen=True, slots=True)
class ProductFacts:
    by_weight: bool  # the second operand is a weight, which the engine prepacks
    rows: int | None  # rows of the left operand, all leading axes together
    nbits_level: int | None = None  # a MatMulNBits' accuracy_level (None for any other product)

    @property
    def nbits_int8(self) -> bool:
        """Whether it is a MatMulNBits that multiplies in int8."""
        return self.nbits_level == INT8_ACCURACY_LEVEL


def product_rows(view: NodeView) -> int | None:
    """The rows of a matrix product's left operand, all leading axes together (M of an M x K by K x N product):
    those of its output but the last axis. None when the output's shape is unknown."""
    out = known_shape(view.output(0))
    return prod(out[:-1]) if out else None


def _product_facts(view: NodeView) -> ProductFacts:
    if view.op_type in NBITS_PRODUCTS:  # its weights are packed inputs, wherever the fused forms place them
        return ProductFacts(True, product_rows(view), int(view.attr("accuracy_level", 0) or 0))
    b = view.input(3) if view.op_type == "QLinearMatMul" else view.input(1)
    return ProductFacts(b is not None and b.is_weight, product_rows(view))


def _nbits(int8: bool, one_row: bool) -> Callable[[ProductFacts], bool]:
    """Whether a product is a MatMulNBits of that arithmetic (int8 or fp32) and of one row or more."""
    return lambda f: f.nbits_level is not None and f.nbits_int8 == int8 and (f.rows == 1) == one_row


# A class per regime keeps a product of one row from setting the ceiling of a long one of the same FLOPs. A
# MatMulNBits has kernels of its own, by its arithmetic and its rows: at accuracy_level 4 (INT8_ACCURACY_LEVEL)
# onnxruntime quantizes its rows to int8 and multiplies integers, at any other level it multiplies in fp32 by the
# weight's blocks dequantized (its CPU kernels run levels 2 and 3, fp16 and bf16, in fp32); one row dequantizes
# each block as it multiplies it, more rows a block of the weight for a product of many rows.
PRODUCT: Refinement[ProductFacts] = Refinement(
    _product_facts,
    (
        Rule(
            "gemv_nbits_int8",
            _nbits(True, True),
            "MatMulNBits of one row, accuracy_level {f.nbits_level}: int8 products",
        ),
        Rule(
            "gemm_nbits_int8",
            _nbits(True, False),
            "MatMulNBits of {f.rows} rows, accuracy_level {f.nbits_level}: int8 products",
        ),
        Rule(
            "gemv_nbits", _nbits(False, True), "MatMulNBits of one row, accuracy_level {f.nbits_level}: fp32 products"
        ),
        Rule(
            "gemm_nbits",
            _nbits(False, False),
            "MatMulNBits of {f.rows} rows, accuracy_level {f.nbits_level}: fp32 products",
        ),
        Rule("matmul", lambda f: not f.by_weight, "a product of two activations"),
        Rule("gemm", lambda f: f.rows is None, "a product by a weight, its rows unknown"),
        Rule(
            "gemm",
            lambda f: f.rows is not None and f.rows >= SHORT_PRODUCT_ROWS,
            f"a product by a weight, {{f.rows}} rows ({SHORT_PRODUCT_ROWS} or more)",
        ),
        Rule("gemv", lambda f: f.rows == 1, "a product by a weight, one row"),
        Rule("gemm_short", always, f"a product by a weight, {{f.rows}} rows (2 to {SHORT_PRODUCT_ROWS - 1})"),
    ),
)


def rows_class(rows: int | None) -> str:
    """The class of a product by a weight of ``rows`` rows: gemv for one, gemm_short for 2 to
    SHORT_PRODUCT_ROWS - 1, gemm for more or when unknown."""
    return PRODUCT.rule_for(ProductFacts(True, rows)).cls


# ------------------------------------------------------------------------------------------------ fused attention

GQA = "com.microsoft::GroupQueryAttention"


class AttentionFacts(NamedTuple):
    op: str  # domain::op_type outside the default domain
    new_tokens: int | None  # the query's sequence length: 1 in a decode step


def _attention_facts(view: NodeView) -> AttentionFacts:
    op = f"{view.domain}::{view.op_type}" if view.domain not in ("", "ai.onnx") else view.op_type
    query = known_shape(view.input(0))
    return AttentionFacts(op, query[1] if query is not None and len(query) == 3 else None)


# onnxruntime's CPU GroupQueryAttention runs, per batch entry and query head, the scores of its new tokens over the
# whole cache, their softmax and the context: on one new token each is a row by the cache (a step reads the cache
# at a few FLOPs per byte), on many, products of many rows. A class per regime keeps a decode step's rate from
# setting a prefill's at the same FLOPs per head. The other fused attention ops keep the matmul ceiling.
ATTENTION: Refinement[AttentionFacts] = Refinement(
    _attention_facts,
    (
        Rule("attention_decode", lambda f: f.op == GQA and f.new_tokens == 1, "GroupQueryAttention on one new token"),
        Rule("attention", lambda f: f.op == GQA, "GroupQueryAttention on {f.new_tokens} new tokens"),
        Rule("matmul", always, "{f.op}: its products of two activations"),
    ),
)

# ------------------------------------------------------------------------------------------------ activations

# The activations with a class of their own, by op (domain::op_type outside the default domain).
ACTIVATION_CLASS_OF: Mapping[str, str] = {
    "Exp": "activation_exp",
    "Elu": "activation_exp",
    "Selu": "activation_exp",
    "Celu": "activation_exp",
    "Sigmoid": "activation_sigmoid",
    "Swish": "activation_sigmoid",
    "com.microsoft::QuickGelu": "activation_silu",
    "com.microsoft::QLinearSigmoid": "activation_sigmoid",
    "Tanh": "activation_tanh",
    "Erf": "activation_erf",
    "Gelu": "activation_gelu",
    "com.microsoft::Gelu": "activation_gelu",
    "com.microsoft::BiasGelu": "activation_gelu",
    "com.microsoft::BiasSplitGelu": "activation_gelu",
    "com.microsoft::FastGelu": "activation_fastgelu",
}

# The scalar exponents onnxruntime's Pow computes by multiplying, and their classes.
POW_BY_MULTIPLYING: Mapping[float, str] = {2.0: "pow_multiplied", 3.0: "pow_multiplied"}

# QuickGelu's alpha where the node does not set it (com.microsoft's definition). onnxruntime fuses SiLU into a
# QuickGelu with alpha 1, which runs as Sigmoid and a product in one pass; another alpha first scales the input in
# a pass of its own.
QUICKGELU_ALPHA = 1.702


@dataclass(frozen=True, slots=True)
class ActivationFacts:
    op: str  # domain::op_type outside the default domain
    tanh_approximation: bool  # a Gelu with approximate="tanh"
    alpha: float | None  # a QuickGelu's
    exponent: float | None  # a Pow's constant scalar exponent


def _activation_facts(view: NodeView) -> ActivationFacts:
    op = f"{view.domain}::{view.op_type}" if view.domain not in ("", "ai.onnx") else view.op_type
    alpha = view.attr("alpha") if op == "com.microsoft::QuickGelu" else None
    exponent = view.constant(1) if op == "Pow" else None
    return ActivationFacts(
        op,
        op == "Gelu" and view.attr("approximate") in (b"tanh", "tanh"),
        float(QUICKGELU_ALPHA if alpha is None else alpha) if op == "com.microsoft::QuickGelu" else None,
        float(exponent.reshape(-1)[0]) if exponent is not None and exponent.size == 1 else None,
    )


def _op_is(op: str) -> Callable[[ActivationFacts], bool]:
    return lambda f: f.op == op


def _pow_by(exponent: float) -> Callable[[ActivationFacts], bool]:
    return lambda f: f.op == "Pow" and f.exponent == exponent


# Per element the activations cost from one to several transcendental steps, unlike what their counted FLOPs say,
# so each kind gets a ceiling calibrated on itself. A Pow by 2 or 3 is computed by multiplying (x * x, x * x * x),
# by any other exponent with a call of the C library's pow per element, many times slower.
ACTIVATION: Refinement[ActivationFacts] = Refinement(
    _activation_facts,
    (
        Rule("activation_fastgelu", lambda f: f.tanh_approximation, "Gelu with approximate='tanh'"),
        Rule("activation_quickgelu", lambda f: f.alpha not in (None, 1.0), "QuickGelu with alpha {f.alpha:g}, not 1"),
        *(
            Rule(cls, _pow_by(e), f"Pow by a constant {e:g}, computed by multiplying")
            for e, cls in POW_BY_MULTIPLYING.items()
        ),
        Rule("activation_pow", _op_is("Pow"), "Pow by another exponent: the C library's pow per element"),
        *(Rule(cls, _op_is(op), f"{op} has a class of its own") for op, cls in ACTIVATION_CLASS_OF.items()),
        Rule("activation", always, "{f.op}: no class of its own"),
    ),
)

# ------------------------------------------------------------------------------------------------ the rest


def _op_type(view: NodeView) -> str:
    return view.op_type


RECURRENT: Refinement[str] = Refinement(
    _op_type,
    (
        Rule("lstm", lambda op: op in ("LSTM", "DynamicQuantizeLSTM"), "{f}: an LSTM's steps"),
        Rule("gru", lambda op: op == "GRU", "GRU: a GRU's steps"),
        Rule("recurrent", always, "{f}: no class of its own"),
    ),
)


def _nchwc(view: NodeView) -> bool:
    return view.domain == NCHWC_DOMAIN


# onnxruntime's plain-layout pooling kernel runs slower per byte than its NCHWc one (after a convolution).
POOL: Refinement[bool] = Refinement(
    _nchwc,
    (Rule("pool", lambda nchwc: nchwc, "in onnxruntime's NCHWc layout"), Rule("pool_nchw", always, "in plain layout")),
)


def _broadcast_inner(view: NodeView) -> bool:
    """Whether an operand is broadcast along the innermost axis of the output (a (C,1,1) scale on an NCHW tensor)."""
    out = known_shape(view.output(0))
    if len(view.inputs) < 2 or out is None or not out or out[-1] == 1:
        return False
    return any(
        shape is not None and bool(shape) and shape[-1] == 1 and prod(shape) < prod(out)
        for shape in map(known_shape, view.inputs)
    )


# With an operand broadcast along the innermost axis onnxruntime loops per channel instead of streaming one
# contiguous range, which costs more per byte.
ELEMENTWISE: Refinement[bool] = Refinement(
    _broadcast_inner,
    (
        Rule("broadcast", lambda broadcast: broadcast, "an operand broadcast along the innermost axis"),
        Rule("elementwise", always, "no operand broadcast along the innermost axis"),
    ),
)


class ResizeFacts(NamedTuple):
    op_type: str
    mode: str  # a Resize's or Upsample's interpolation mode; "" for any other op
    nchwc: bool

    @property
    def interpolates(self) -> bool:
        return "linear" in self.mode or "cubic" in self.mode


def _resize_facts(view: NodeView) -> ResizeFacts:
    mode = interpolation_mode(view) if view.op_type in ("Resize", "Upsample") else ""
    return ResizeFacts(view.op_type, mode, view.domain == NCHWC_DOMAIN)


# Per output element an interpolation weighs several inputs, several times a copy's time, and the plain-layout
# kernel walks one channel at a time where the NCHWc one interpolates a block of channels at once.
RESIZE: Refinement[ResizeFacts] = Refinement(
    _resize_facts,
    (
        Rule("resize", lambda f: not f.mode, "{f.op_type}: the resize class"),
        Rule("resize", lambda f: not f.interpolates, "mode {f.mode}: a copy per output element"),
        Rule("resize_linear", lambda f: f.nchwc, "an interpolating ({f.mode}) resize in NCHWc layout"),
        Rule("resize_linear_nchw", always, "an interpolating ({f.mode}) resize in plain layout"),
    ),
)


@dataclass(frozen=True, slots=True)
class TransposeFacts:
    op: str
    permutes: bool  # a Transpose of a known shape (not DepthToSpace or SpaceToDepth, not another copy)
    one_axis: bool  # the permutation takes at most one axis out and puts it elsewhere
    inner_stays: bool  # the innermost axis (of size above 1) stays innermost
    matrices: int  # matrices copied one after the other (transposed_matrices)


def _transpose_facts(view: NodeView) -> TransposeFacts:
    shape = known_shape(view.input(0))
    if view.op_type != "Transpose" or shape is None:
        return TransposeFacts(view.op_type, False, True, True, 1)
    perm = view.attr("perm")
    axes = list(perm) if perm is not None else list(reversed(range(len(shape))))
    moved = [int(a) for a in axes if shape[int(a)] != 1]
    inner = not moved or moved[-1] == max(moved)
    return TransposeFacts(view.op_type, True, _moves_one_axis(moved), inner, transposed_matrices(view))


# onnxruntime runs a Transpose that moves more than one axis element by element; for one that moves a single axis
# it has block-copy kernels, which copy whole rows where the innermost axis stays innermost (a copy like any other:
# the movement class) and go one element at a time along the rows where it moves, one matrix after the other where
# it moves in each matrix of a batch.
TRANSPOSE: Refinement[TransposeFacts] = Refinement(
    _transpose_facts,
    (
        Rule("movement", lambda f: not f.permutes, "{f.op}: a copy"),
        Rule("transpose_generic", lambda f: not f.one_axis, "moves more than one axis: element by element"),
        Rule("movement", lambda f: f.inner_stays, "keeps the innermost axis innermost: whole rows copied"),
        Rule(
            "transpose_batched", lambda f: f.matrices > 1, "moves the innermost axis in each of {f.matrices} matrices"
        ),
        Rule("transpose_inner", always, "moves the innermost axis, in one matrix"),
    ),
)


def transposed_matrices(view: NodeView) -> int:
    """The matrices a Transpose copies one after the other: the product of its input's axes before the first one
    its permutation moves (perm (0, 2, 3, 1) on a [64, 49, 3, 32] tensor copies 64 matrices of 49 x 96; a
    channels-last change of one image, one). 1 where the shape or the permutation is unknown."""
    x = known_shape(view.input(0))
    perm = view.attr("perm")
    if not x or perm is None or len(perm) != len(x):
        return 1
    first = next((i for i, axis in enumerate(perm) if int(axis) != i), len(x))
    return max(prod(x[:first]), 1)


def _moves_one_axis(order: list[int]) -> bool:
    """Whether the permutation ``order`` is the identity with at most one axis taken out and put elsewhere."""
    for i in range(len(order)):
        rest = order[:i] + order[i + 1 :]
        if all(a < b for a, b in pairwise(rest)):
            return True
    return len(order) < 2


# ------------------------------------------------------------------------------------------------ classification

# The base classes whose nodes an engine runs with kernels of different efficiency, and how to tell them apart.
REFINEMENTS: Mapping[str, Refinement[Any]] = {
    "conv": CONV,
    "conv_integer": CONV_INTEGER,
    "qconv": QCONV,
    "gemm": PRODUCT,
    "matmul": ATTENTION,
    "recurrent": RECURRENT,
    "activation": ACTIVATION,
    "pool": POOL,
    "elementwise": ELEMENTWISE,
    "movement": TRANSPOSE,
    "resize": RESIZE,
}


def classify(view: NodeView) -> Classification:
    """A node's ceiling class (one of OP_CLASSES, or SHAPE for shape-only ops and OTHER for the rest) and why.

    The base class is the one the op registered with its cost function (``onnxroof.costs.engine_class``; OTHER for
    an op without one); :data:`REFINEMENTS` splits convolutions by their weight's shape, layout and the output's
    size, integer convolutions into depthwise ones and the rest, matrix products by their second operand and rows
    (MatMulNBits by its accuracy level and rows), GroupQueryAttention by its new tokens, activations by their
    function (Pow by its exponent), pooling windows by layout, elementwise ops by whether they broadcast along the
    innermost axis, transposes by the axes they move, NCHWc output reorders by the size of the planes they write,
    and resizes by whether they interpolate and in which layout. A fused kernel takes the class of the node it is
    built around."""
    if view.anchor is not None:
        inner = classify(view.anchor)
        return Classification(inner.cls, f"fused kernel around {view.anchor.op_type}: {inner.reason}")
    base = engine_class(view.domain, view.op_type)
    if base is None:
        return Classification(OTHER, f"no cost function for {view.op_type}: the plain roofline")
    refinement = REFINEMENTS.get(base)
    if refinement is not None:
        return refinement.classify(view)
    if base == SHAPE:
        return Classification(SHAPE, f"{view.op_type} changes the shape only: no kernel")
    if base == OTHER:
        return Classification(OTHER, f"no engine class describes {view.op_type}: the plain roofline")
    return Classification(base, f"the class {view.op_type} registers")


def op_class(view: NodeView) -> str:
    """A node's ceiling class alone (:func:`classify` without formatting its reason)."""
    if view.anchor is not None:
        return op_class(view.anchor)
    base = engine_class(view.domain, view.op_type) or OTHER
    refinement = REFINEMENTS.get(base)
    return base if refinement is None else refinement.op_class(view)


def ceiling_for(device: Device, cls: str) -> tuple[str, Ceiling] | None:
    """The ceiling a node of class ``cls`` gets on ``device``: its own, else its fallback's; None when neither."""
    seen = set()
    while cls and cls not in seen:
        seen.add(cls)
        if cls in device.ceilings:
            return cls, device.ceilings[cls]
        cls = CLASS_FALLBACK.get(cls, "")
    return None
