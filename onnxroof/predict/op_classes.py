"""The op classes: which kind of kernel an engine runs a node with, each with a ceiling of its own on a calibrated
device (``onnxroof.devices.OP_CLASSES``).

A node's class is the base class its op registers with its cost function (``onnxroof.costs.engine_class``),
refined by the node's shapes, layout or operands (:data:`REFINEMENTS`); a device without a ceiling for a class
uses the one its fallback names (:data:`CLASS_FALLBACK`). At which work a class's ceiling is read is
``onnxroof.predict.class_work``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from math import prod

from onnxroof.costs import OTHER, SHAPE, NodeView, engine_class
from onnxroof.costs.movement import interpolation_mode
from onnxroof.devices import Ceiling, Device
from onnxroof.ir import Tensor

__all__ = [
    "ACTIVATION_CLASS_OF",
    "BORDER_CONV_SHARE",
    "CLASS_FALLBACK",
    "NARROW_GROUP_CHANNELS",
    "NCHWC_DOMAIN",
    "OTHER",
    "REFINEMENTS",
    "SHAPE",
    "SHORT_PRODUCT_ROWS",
    "Refinement",
    "border_share",
    "ceiling_for",
    "known_shape",
    "op_class",
    "product_rows",
    "rows_class",
    "taps_inside",
    "transposed_matrices",
]

NCHWC_DOMAIN = "com.microsoft.nchwc"  # onnxruntime's blocked-layout CPU kernels

# A device without a ceiling for a class uses the ceiling of the class it falls back to (first one it has).
CLASS_FALLBACK: Mapping[str, str] = {
    "conv1x1": "conv",
    "conv_wide": "conv",
    "conv_stem": "conv",
    "conv_mid": "conv",
    "conv_small": "conv",
    "conv_narrow": "conv_small",
    "conv_vector": "conv_small",
    "conv_border": "conv_mid",
    "conv_1d": "conv",
    "conv_grouped": "conv_small",
    "conv_grouped_narrow": "conv_grouped",
    "depthwise_plain": "depthwise",
    "depthwise_border": "depthwise",
    "conv_integer": "conv",
    "conv_integer_grouped": "conv_integer",
    "qconv": "conv",
    "qconv_depthwise": "depthwise",
    "matmul": "gemm",
    "gemm_short": "gemm",
    "gemv": "gemm_short",
    "activation_exp": "activation",
    "activation_sigmoid": "activation",
    "activation_silu": "activation_sigmoid",
    "activation_quickgelu": "activation_sigmoid",
    "activation_tanh": "activation",
    "activation_erf": "activation",
    "activation_gelu": "activation_erf",
    "activation_fastgelu": "activation_tanh",
    "activation_pow": "activation",
    "pow_cube": "activation_pow",
    "pow_square": "pow_cube",
    "lstm": "recurrent",
    "gru": "recurrent",
    "global_pool": "pool",
    "pool_nchw": "pool",
    "broadcast": "elementwise",
    "instancenorm": "layernorm",
    "skip_layernorm": "layernorm",
    "batchnorm": "elementwise",
    "transpose": "movement",
    "reorder": "movement",
    "reorder_short": "reorder",
    "resize": "movement",
    "resize_linear": "resize",
    "resize_linear_nchw": "resize_linear",
    "epilogue": "elementwise",
    "cast": "elementwise",
    "transpose_generic": "transpose",
    "transpose_inner": "transpose",
    "transpose_batched": "transpose_inner",
    "quantize": "elementwise",
}

# Dense convolutions with very few output channels, or a stem (a handful of input channels) with a small kernel,
# run well below the large-conv efficiency (conv_narrow): the stem's NCHWc kernel reads a plain NCHW input and does
# little work per input pixel. A pointwise convolution on more than one position is one product of its positions by
# its weight, at one rate on a 7x7 map as on a 56x56 one (conv1x1). A KxK one on few output positions per image
# (the 7x7 stages) runs at a rate of its own (conv_small), its rows short and its borders a large share of them.
# The largest weights of a network are the late stages': they come from memory (the weights' wait,
# engine.exposed_weight_time), which no ceiling carries. Stems with large
# kernels (7x7, 11x11) come close to the large-conv efficiency on one thread but split less well over threads
# than 3x3 convolutions of the same FLOPs: a class of their own, so that they do not set the large-conv ceiling
# at their size. Mid-sized outputs (the 14x14 stages) lose efficiency to the short rows the kernel walks, which
# ranks them below equal-FLOP convs on larger outputs.
# Past the stem, a 5x5 or wider kernel (AlexNet's and ZFNet's second layers, Inception's 5x5 branches) runs at
# a rate per FLOP of its own, different from a 3x3 one's on the same output: a class of its own, so that neither
# skews the other's ceiling.
# A dense convolution with a single output position (a squeeze-and-excitation block's two 1x1 convolutions on the
# pooled vector) is a matrix-vector product through the convolution kernel: its time is a pass over its weight, a
# rate per FLOP far below any spatial convolution's (conv_vector).
SMALL_CONV_POSITIONS = 100
MID_CONV_POSITIONS = 400
SMALL_CONV_IN_CHANNELS = 16
SMALL_CONV_OUT_CHANNELS = 32
SMALL_STEM_KERNEL_AREA = 25
WIDE_CONV_KERNEL_AREA = 25

# onnxruntime's NCHWc convolution walks an output row in blocks of positions whose windows lie inside the input,
# and takes every position whose window reaches into the left or right padding on its own, one at a time, with a
# bounds check per tap. A dense convolution with at least this share of its output columns of that kind (a dilated
# ASPP branch on a small map, a 3x3 window on a 2x2 map) runs at a rate of its own: conv_border; a depthwise one
# (the dilated 5x5 depthwise layers of a segmentation backbone at 1/16 of its input) depthwise_border.
BORDER_CONV_SHARE = 0.5

# A plain-layout grouped convolution with fewer output channels per group than this is a narrow one: each group's
# product has too few rows for the kernel's row blocks, so it runs at a rate of its own (RegNet's groups of 8,
# ResNeXt's of 4 and 8; docs/accuracy.md has the rates measured).
NARROW_GROUP_CHANNELS = 16

# A matrix product by a weight with fewer rows than this is a short one (gemm_short, gemv for one row).
SHORT_PRODUCT_ROWS = 16

# The scalar exponents onnxruntime's Pow computes by multiplying, and their classes.
POW_BY_MULTIPLYING: Mapping[float, str] = {2.0: "pow_square", 3.0: "pow_cube"}

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

# Convolutions whose activations are channels-last (``[N, spatial..., C]``), weights staying ``[M, C/group, k...]``.
_NHWC_CONV = frozenset({"NhwcConv", "NhwcFusedConv"})


def known_shape(t: Tensor | None) -> tuple[int, ...] | None:
    """A tensor's shape, None when the tensor is absent or its shape unknown."""
    return t.shape if t is not None and t.shape is not None else None


def _conv_class(view: NodeView) -> str:
    """depthwise / batchnorm (a depthwise 1x1 conv is a per-channel scale and shift) / conv_grouped (or
    conv_grouped_narrow, under NARROW_GROUP_CHANNELS output channels per group) / depthwise_plain (a depthwise
    convolution outside the NCHWc layout) / depthwise_border and conv_border (an NCHWc depthwise or dense one with
    most output columns at the padding, see BORDER_CONV_SHARE) / conv_1d (a dense one over one spatial axis) /
    conv_vector (one output position) / conv_narrow / conv_small / conv_mid / conv_stem / conv_wide / conv1x1 / conv,
    from the
    weight's shape (or the attributes when it is unknown); a grouped convolution in onnxruntime's NCHWc layout takes
    the dense class of one group."""
    x, y = known_shape(view.input(0)), known_shape(view.output(0))
    w = known_shape(view.input(1))
    nhwc = view.op_type in _NHWC_CONV
    group = int(view.attr("group", 1) or 1)
    if w is not None and len(w) >= 3:
        kernel = tuple(w[2:]) if not nhwc else tuple(w[1:-1])
        per_group_in = w[1] if not nhwc else w[-1]
    else:
        kernel = tuple(view.attr("kernel_shape") or ())
        per_group_in = None
    c_in = (x[1] if not nhwc else x[-1]) if x is not None and len(x) >= 3 else None
    if per_group_in is None and c_in is not None:
        per_group_in = c_in // group
    pointwise = bool(kernel) and all(k == 1 for k in kernel)
    if view.op_type == "ConvTranspose":
        return "conv_grouped" if group > 1 else "conv"
    if group > 1 and per_group_in == 1:
        if pointwise:
            return "batchnorm"
        # outside the NCHWc layout (channel counts it does not block) each channel is an im2col and a one-row product
        if view.domain != NCHWC_DOMAIN:
            return "depthwise_plain"
        return "depthwise_border" if border_share(view) >= BORDER_CONV_SHARE else "depthwise"
    c_out = (y[1] if not nhwc else y[-1]) if y is not None and len(y) >= 3 else None
    if group > 1 and view.domain != NCHWC_DOMAIN:
        # one im2col and product per group, one after the other: with few output channels per group the product
        # is too short for the kernel's row blocks
        narrow = c_out is not None and c_out // group < NARROW_GROUP_CHANNELS
        return "conv_grouped_narrow" if narrow else "conv_grouped"
    if len(kernel) == 1 and group == 1 and not nhwc and view.domain != NCHWC_DOMAIN:
        # onnxruntime's NCHWc layout blocks two spatial axes only: over one, the kernel expands the input (im2col)
        # and multiplies, at a rate of its own
        return "conv_1d"
    if group > 1:
        # onnxruntime blocks a grouped convolution into NCHWc only when each group's channels fill whole blocks,
        # and then runs every group as a dense convolution of its own channels: such a convolution runs at the
        # rate of the dense classes, not at that of the plain-layout grouped kernel (conv_grouped).
        c_in, c_out = per_group_in, (c_out // group if c_out is not None else None)
    if view.domain == NCHWC_DOMAIN and border_share(view) >= BORDER_CONV_SHARE:
        return "conv_border"
    positions = (prod(y[2:]) if not nhwc else prod(y[1:-1])) if y is not None and len(y) >= 3 else None
    if positions == 1:
        return "conv_vector"
    stem = c_in is not None and c_in < SMALL_CONV_IN_CHANNELS and bool(kernel)
    if (stem and prod(kernel) < SMALL_STEM_KERNEL_AREA) or (c_out is not None and c_out < SMALL_CONV_OUT_CHANNELS):
        return "conv_narrow"
    if pointwise:
        return "conv1x1"
    if positions is not None and positions < SMALL_CONV_POSITIONS:
        return "conv_small"
    if positions is not None and positions < MID_CONV_POSITIONS:
        return "conv_mid"
    if stem:
        return "conv_stem"
    if kernel and prod(kernel) >= WIDE_CONV_KERNEL_AREA:  # past the stem: stems returned above
        return "conv_wide"
    return "conv"


def _grouping(view: NodeView, w_index: int) -> tuple[int, int | None]:
    """(group, input channels per group) of a convolution whose weight is input ``w_index``: the weight's second
    dimension, else the input's channels over the groups (None when neither is known)."""
    group = int(view.attr("group", 1) or 1)
    w = known_shape(view.input(w_index))
    if w is not None and len(w) >= 3:
        return group, w[1]
    x = known_shape(view.input(0))
    return group, (x[1] // group if x is not None and len(x) >= 3 else None)


def _integer_conv_class(view: NodeView) -> str:
    """conv_integer_grouped for a depthwise ConvInteger (one input channel per group), conv_integer otherwise:
    onnxruntime's ConvInteger runs an im2col and an integer matrix product per group, so a depthwise one pays that
    fixed cost once per channel for a product of one row, while the groups of a grouped convolution with several
    channels each (ShuffleNet's) are dense products like an ungrouped one's."""
    group, per_group_in = _grouping(view, 1)
    return "conv_integer_grouped" if group > 1 and per_group_in == 1 else "conv_integer"


def _qconv_class(view: NodeView) -> str:
    """qconv_depthwise for a QLinearConv with one input channel per group (onnxruntime's depthwise int8 kernel),
    qconv otherwise."""
    group, per_group_in = _grouping(view, 3)
    return "qconv_depthwise" if group > 1 and per_group_in == 1 else "qconv"


def product_rows(view: NodeView) -> int | None:
    """The rows of a matrix product's left operand, all leading axes together (M of an M x K by K x N product):
    those of its output but the last axis. None when the output's shape is unknown."""
    out = known_shape(view.output(0))
    return prod(out[:-1]) if out else None


def _product_class(view: NodeView) -> str:
    """For a product by a weight (prepacked by the engine): gemv for one row, gemm_short for 2 to
    SHORT_PRODUCT_ROWS - 1 rows, gemm for more (or rows unknown); matmul for a product of two activations.

    With few rows each element of the prepacked weight is used by few multiply-adds, and the kernel's rate falls
    from near the peak towards the rate the weight streams at: a class per regime keeps a classifier at batch 1
    from setting the ceiling of a 197-row projection of the same FLOPs."""
    b = view.input(3) if view.op_type == "QLinearMatMul" else view.input(1)
    if b is None or not b.is_weight:
        return "matmul"
    return rows_class(product_rows(view))


def rows_class(rows: int | None) -> str:
    """gemv for one row, gemm_short for 2 to SHORT_PRODUCT_ROWS - 1, gemm for more or when unknown."""
    if rows is None or rows >= SHORT_PRODUCT_ROWS:
        return "gemm"
    return "gemv" if rows == 1 else "gemm_short"


def _recurrent_class(view: NodeView) -> str:
    """lstm or gru by the op, recurrent for the plain RNN: per step their gates and products differ."""
    if view.op_type in ("LSTM", "DynamicQuantizeLSTM"):
        return "lstm"
    return "gru" if view.op_type == "GRU" else "recurrent"


# QuickGelu's alpha where the node does not set it (com.microsoft's definition). onnxruntime fuses SiLU into a
# QuickGelu with alpha 1, which runs as Sigmoid and a product in one pass (activation_silu: a class apart from
# Sigmoid's, whose kernel takes longer per element though it counts fewer FLOPs); another alpha first scales the
# input in a pass of its own, so it has a class of its own too.
QUICKGELU_ALPHA = 1.702


def _activation_class(view: NodeView) -> str:
    """The activation's own class where it has one (ACTIVATION_CLASS_OF), activation otherwise: per element they
    cost from one to several transcendental steps, unlike what their counted FLOPs say (Sigmoid counts four, Erf
    one, and Erf takes longer), so each kind gets a ceiling calibrated on itself."""
    key = f"{view.domain}::{view.op_type}" if view.domain not in ("", "ai.onnx") else view.op_type
    if key == "Gelu" and view.attr("approximate") in (b"tanh", "tanh"):
        return "activation_fastgelu"
    alpha = view.attr("alpha")
    if key == "com.microsoft::QuickGelu" and float(QUICKGELU_ALPHA if alpha is None else alpha) != 1.0:
        return "activation_quickgelu"
    if key == "Pow":
        return _pow_class(view)
    return ACTIVATION_CLASS_OF.get(key, "activation")


def _pow_class(view: NodeView) -> str:
    """pow_square or pow_cube for a Pow by a constant scalar exponent of 2 or 3, which onnxruntime's kernel
    computes by multiplying (x * x, x * x * x); activation_pow for any other exponent, a call of the C library's
    pow per element, many times slower."""
    exponent = view.constant(1)
    if exponent is None or exponent.size != 1:
        return "activation_pow"
    return POW_BY_MULTIPLYING.get(float(exponent.reshape(-1)[0]), "activation_pow")


def _pool_class(view: NodeView) -> str:
    """pool for a window in onnxruntime's NCHWc layout (after a convolution), pool_nchw for the plain-layout kernel,
    which runs slower per byte."""
    return "pool" if view.domain == NCHWC_DOMAIN else "pool_nchw"


def _elementwise_class(view: NodeView) -> str:
    """broadcast when an operand is broadcast along the innermost axis (e.g. a (C,1,1) scale on an NCHW tensor):
    onnxruntime then loops per channel instead of streaming one contiguous range, which costs more per byte;
    elementwise otherwise."""
    out = known_shape(view.output(0))
    if len(view.inputs) < 2 or out is None or not out or out[-1] == 1:
        return "elementwise"
    for t in view.inputs:
        shape = known_shape(t)
        if shape is not None and shape and shape[-1] == 1 and prod(shape) < prod(out):
            return "broadcast"
    return "elementwise"


def _reorder_class(view: NodeView) -> str:
    """reorder_short for an NCHWc -> NCHW reorder onto planes of fewer than MID_CONV_POSITIONS positions (a 14x14
    or 7x7 stage): onnxruntime then writes each channel's short plane on its own, at a lower bandwidth than along
    long rows. The opposite reorder (NCHW -> NCHWc) and a channels-last output stay reorder."""
    out = known_shape(view.output(0))
    if view.op_type != "ReorderOutput" or out is None or len(out) < 3 or int(view.attr("channels_last", 0) or 0):
        return "reorder"
    return "reorder_short" if prod(out[2:]) < MID_CONV_POSITIONS else "reorder"


def _resize_class(view: NodeView) -> str:
    """resize for nearest-neighbour Resize and Upsample (a copy per output element), resize_linear for an
    interpolating one (linear or cubic) in onnxruntime's NCHWc layout, resize_linear_nchw for an interpolating one
    in plain layout: per output element an interpolation weighs several inputs, several times a copy's time, and
    the plain-layout kernel walks one channel at a time where the NCHWc one interpolates a block of channels at
    once. Other ops of the base class (GridSample, AffineGrid) stay resize."""
    if view.op_type not in ("Resize", "Upsample"):
        return "resize"
    mode = interpolation_mode(view)
    if "linear" not in mode and "cubic" not in mode:
        return "resize"
    return "resize_linear" if view.domain == NCHWC_DOMAIN else "resize_linear_nchw"


def _transpose_class(view: NodeView) -> str:
    """transpose_generic for a Transpose that moves more than one axis (dims of size 1 aside), which onnxruntime
    runs element by element; for one that moves a single axis, for which it has block-copy kernels, transpose where
    the innermost axis stays innermost (a head split, a channel shuffle in NCHW: whole rows copied) and
    transpose_inner where it moves (a key transposed for its product, a change to or from channels-last: one
    element at a time along the rows, slower per byte), transpose_batched where it moves in each matrix of a batch
    (:func:`transposed_matrices`: onnxruntime transposes one matrix after the other, each with a fixed cost);
    transpose for DepthToSpace and SpaceToDepth."""
    shape = known_shape(view.input(0))
    perm = view.attr("perm")
    if view.op_type != "Transpose" or shape is None:
        return "transpose"
    axes = list(perm) if perm is not None else list(reversed(range(len(shape))))
    moved = [int(a) for a in axes if shape[int(a)] != 1]
    if not _moves_one_axis(moved):
        return "transpose_generic"
    if not moved or moved[-1] == max(moved):
        return "transpose"
    return "transpose_batched" if transposed_matrices(view) > 1 else "transpose_inner"


def transposed_matrices(view: NodeView) -> int:
    """The matrices a Transpose copies one after the other: the product of its input's axes before the first one
    its permutation moves (Swin's key transpose, perm (0, 2, 3, 1) on 64 windows x 49 tokens x 3 heads x 32, copies
    64 matrices of 49 x 96; a channels-last change, one). 1 where the shape or the permutation is unknown."""
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


@dataclass(frozen=True)
class Refinement:
    """How the nodes of one base class (the class an op registers with its cost function) split by their shapes,
    layout or operands: ``refine`` returns one of ``classes``."""

    refine: Callable[[NodeView], str]
    classes: frozenset[str]


# The base classes whose nodes an engine runs with kernels of different efficiency, and how to tell them apart.
REFINEMENTS: Mapping[str, Refinement] = {
    "conv": Refinement(
        _conv_class,
        frozenset(
            {
                "conv",
                "conv1x1",
                "conv_wide",
                "conv_stem",
                "conv_mid",
                "conv_small",
                "conv_narrow",
                "conv_vector",
                "conv_border",
                "conv_1d",
                "conv_grouped",
                "conv_grouped_narrow",
                "depthwise",
                "depthwise_plain",
                "depthwise_border",
                "batchnorm",  # a depthwise 1x1 convolution: the per-channel scale and shift of a folded BatchNorm
            }
        ),
    ),
    "conv_integer": Refinement(_integer_conv_class, frozenset({"conv_integer", "conv_integer_grouped"})),
    "qconv": Refinement(_qconv_class, frozenset({"qconv", "qconv_depthwise"})),
    "gemm": Refinement(_product_class, frozenset({"gemm", "gemm_short", "gemv", "matmul"})),
    "recurrent": Refinement(_recurrent_class, frozenset({"lstm", "gru", "recurrent"})),
    "activation": Refinement(
        _activation_class,
        frozenset(
            {
                "activation",
                "activation_exp",
                "activation_sigmoid",
                "activation_silu",
                "activation_quickgelu",
                "activation_tanh",
                "activation_erf",
                "activation_gelu",
                "activation_fastgelu",
                "activation_pow",
                "pow_square",
                "pow_cube",
            }
        ),
    ),
    "pool": Refinement(_pool_class, frozenset({"pool", "pool_nchw"})),
    "elementwise": Refinement(_elementwise_class, frozenset({"elementwise", "broadcast"})),
    "reorder": Refinement(_reorder_class, frozenset({"reorder", "reorder_short"})),
    "transpose": Refinement(
        _transpose_class, frozenset({"transpose", "transpose_inner", "transpose_batched", "transpose_generic"})
    ),
    "resize": Refinement(_resize_class, frozenset({"resize", "resize_linear", "resize_linear_nchw"})),
}


def op_class(view: NodeView) -> str:
    """The ceiling class of a node (one of OP_CLASSES), or SHAPE for shape-only ops and OTHER for the rest.

    The base class is the one the op registered with its cost function (``onnxroof.costs.engine_class``; OTHER for
    an op without one); :data:`REFINEMENTS` splits convolutions by their weight's shape and the output's size,
    integer convolutions (ConvInteger, QLinearConv) into grouped or depthwise ones and the rest, matrix products
    by their second operand and rows, activations by their function (Pow by its exponent), pooling windows by
    layout (NCHWc or plain), elementwise ops by whether they broadcast along the innermost axis, transposes by the
    axes they move, NCHWc output reorders by the size of the planes they write, and resizes by whether they
    interpolate and in which layout.
    """
    base = engine_class(view.domain, view.op_type) or OTHER
    refinement = REFINEMENTS.get(base)
    return base if refinement is None else refinement.refine(view)


def ceiling_for(device: Device, cls: str) -> tuple[str, Ceiling] | None:
    """The ceiling a node of class ``cls`` gets on ``device``: its own, else its fallback's; None when neither."""
    seen = set()
    while cls and cls not in seen:
        seen.add(cls)
        if cls in device.ceilings:
            return cls, device.ceilings[cls]
        cls = CLASS_FALLBACK.get(cls, "")
    return None


def taps_inside(view: NodeView) -> float:
    """The share of a convolution's multiply-adds whose input tap lies inside the input rather than in its
    padding, for onnxruntime's NCHWc convolution, which computes only those (1 for any other node, and where the
    shapes or attributes do not say).

    Per spatial axis (input size I, output size O, kernel K, stride S, dilation D, leading pad P), output
    position o reads taps ``o*S - P + j*D`` for j < K; the share is the product over the axes of the taps
    inside ``[0, I)`` over ``O*K``. It matters for a dilated convolution on a small map (DeepLab's rate-12 ASPP
    branch on a 14x14 map reads little but its centre tap) and, less, for any padded window on a small output."""
    axes = _windows(view)
    return prod(_inside_share(*axis) for axis in axes) if axes else 1.0


def border_share(view: NodeView) -> float:
    """The share of an NCHWc convolution's output columns (positions along its last axis) whose window reaches into
    the padding (0 for any other node, and where the shapes or attributes do not say): the positions onnxruntime's
    NCHWc kernel computes one at a time (see BORDER_CONV_SHARE)."""
    axes = _windows(view)
    return _border_share(*axes[-1]) if axes else 0.0


def _windows(view: NodeView) -> list[tuple[int, int, int, int, int, int]] | None:
    """Per spatial axis of an NCHWc convolution, (input size, output size, kernel, stride, dilation, leading pad);
    None for any other node, and where the shapes or attributes do not give the output's size."""
    if view.domain != NCHWC_DOMAIN or view.op_type != "Conv":
        return None
    x, y, w = known_shape(view.input(0)), known_shape(view.output(0)), known_shape(view.input(1))
    if x is None or y is None or w is None or len(x) != len(y) or len(w) != len(x) or len(x) < 3:
        return None
    n = len(x) - 2
    kernel = tuple(int(k) for k in (view.attr("kernel_shape") or w[2:]))
    strides = tuple(int(v) for v in (view.attr("strides") or (1,) * n))
    dilations = tuple(int(v) for v in (view.attr("dilations") or (1,) * n))
    pads = tuple(int(v) for v in (view.attr("pads") or (0,) * (2 * n)))
    auto_pad = view.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if len(kernel) != n or len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        return None
    axes = []
    for axis in range(n):
        size, out, k, s, d = x[axis + 2], y[axis + 2], kernel[axis], strides[axis], dilations[axis]
        lead, total = pads[axis], pads[axis] + pads[axis + n]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max((out - 1) * s + d * (k - 1) + 1 - size, 0)
            lead = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            lead = total = 0
        if s <= 0 or (size + total - d * (k - 1) - 1) // s + 1 != out:
            return None  # the attributes do not give this output: no window to follow
        axes.append((size, out, k, s, d, lead))
    return axes


@lru_cache(maxsize=1024)
def _border_share(size: int, out: int, k: int, stride: int, dilation: int, lead: int) -> float:
    """Along one axis: the share of output positions with a tap outside ``[0, size)``."""
    if out <= 0 or k <= 0:
        return 0.0
    border = sum(1 for o in range(out) if any(not 0 <= o * stride - lead + j * dilation < size for j in range(k)))
    return border / out


@lru_cache(maxsize=1024)
def _inside_share(size: int, out: int, k: int, stride: int, dilation: int, lead: int) -> float:
    """Along one axis: the share of (output position, tap) pairs whose input index lies in ``[0, size)``."""
    if out <= 0 or k <= 0:
        return 1.0
    inside = sum(1 for o in range(out) for j in range(k) if 0 <= o * stride - lead + j * dilation < size)
    return inside / (out * k)
