"""The op classes: which kind of kernel an engine runs a node with, each with a ceiling of its own on a calibrated
device (``onnxroof.devices.OP_CLASSES``).

A node's class is the base class its op registers with its cost function (``onnxroof.costs.engine_class``),
refined by the node's shapes, layout or operands (:data:`REFINEMENTS`); a device without a ceiling for a class
uses the one its fallback names (:data:`CLASS_FALLBACK`). :func:`ceiling_work` says at which work a class's ceiling
is read: a kernel's FLOPs and bytes, or those of one of the units it repeats one after the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from math import prod

from onnxroof.costs import OTHER, SHAPE, NodeView, engine_class
from onnxroof.devices import Ceiling, Device
from onnxroof.ir import Tensor

__all__ = [
    "CLASS_FALLBACK",
    "NCHWC_DOMAIN",
    "OTHER",
    "REFINEMENTS",
    "SHAPE",
    "Refinement",
    "ceiling_for",
    "op_class",
]

NCHWC_DOMAIN = "com.microsoft.nchwc"  # onnxruntime's blocked-layout CPU kernels

# A device without a ceiling for a class uses the ceiling of the class it falls back to (first one it has).
CLASS_FALLBACK: Mapping[str, str] = {
    "conv1x1": "conv",
    "conv_wide": "conv",
    "conv_stem": "conv",
    "conv_mid": "conv",
    "conv_small": "conv",
    "conv_grouped": "conv_small",
    "conv_integer": "conv",
    "conv_integer_grouped": "conv_integer",
    "qconv": "conv",
    "qconv_depthwise": "depthwise",
    "matmul": "gemm",
    "global_pool": "pool",
    "pool_nchw": "pool",
    "broadcast": "elementwise",
    "instancenorm": "layernorm",
    "batchnorm": "elementwise",
    "transpose": "movement",
    "reorder": "movement",
    "reorder_short": "reorder",
    "resize": "movement",
    "epilogue": "elementwise",
    "cast": "elementwise",
    "transpose_generic": "transpose",
    "quantize": "elementwise",
}

# Dense convolutions this small run well below the large-conv efficiency: few output positions per image
# (the 7x7 stages of ResNets), very few output channels, or a stem (a handful of input channels) with a small
# kernel: its NCHWc kernel reads a plain NCHW input and does little work per input pixel. Stems with large
# kernels (7x7, 11x11) come close to the large-conv efficiency on one thread but split less well over threads
# than 3x3 convolutions of the same FLOPs: a class of their own, so that they do not set the large-conv ceiling
# at their size. Mid-sized outputs (the 14x14 stages) lose efficiency to the short rows the kernel walks, which
# ranks them below equal-FLOP convs on larger outputs.
# Past the stem, a 5x5 or wider kernel (AlexNet's and ZFNet's second layers, Inception's 5x5 branches) runs at
# a rate per FLOP of its own, different from a 3x3 one's on the same output: a class of its own, so that neither
# skews the other's ceiling.
SMALL_CONV_POSITIONS = 100
MID_CONV_POSITIONS = 400
SMALL_CONV_IN_CHANNELS = 16
SMALL_CONV_OUT_CHANNELS = 32
SMALL_STEM_KERNEL_AREA = 25
WIDE_CONV_KERNEL_AREA = 25

# Convolutions whose activations are channels-last (``[N, spatial..., C]``), weights staying ``[M, C/group, k...]``.
_NHWC_CONV = frozenset({"NhwcConv", "NhwcFusedConv"})


def _known(t: Tensor | None) -> tuple[int, ...] | None:
    return t.shape if t is not None and t.shape is not None else None


def _conv_class(view: NodeView) -> str:
    """depthwise / batchnorm (a depthwise 1x1 conv is a per-channel scale and shift) / conv_grouped / conv_small /
    conv_mid / conv_stem / conv_wide / conv1x1 / conv, from the weight's shape (or the attributes when it is
    unknown); a grouped convolution in onnxruntime's NCHWc layout takes the dense class of one group."""
    x, y = _known(view.input(0)), _known(view.output(0))
    w = _known(view.input(1))
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
        return "batchnorm" if pointwise else "depthwise"
    if group > 1 and view.domain != NCHWC_DOMAIN:
        return "conv_grouped"
    c_out = (y[1] if not nhwc else y[-1]) if y is not None and len(y) >= 3 else None
    if group > 1:
        # onnxruntime blocks a grouped convolution into NCHWc only when each group's channels fill whole blocks,
        # and then runs every group as a dense convolution of its own channels: such a convolution runs at the
        # rate of the dense classes, not at that of the plain-layout grouped kernel (conv_grouped).
        c_in, c_out = per_group_in, (c_out // group if c_out is not None else None)
    positions = (prod(y[2:]) if not nhwc else prod(y[1:-1])) if y is not None and len(y) >= 3 else None
    stem = c_in is not None and c_in < SMALL_CONV_IN_CHANNELS and bool(kernel)
    if (
        (positions is not None and positions < SMALL_CONV_POSITIONS)
        or (stem and prod(kernel) < SMALL_STEM_KERNEL_AREA)
        or (c_out is not None and c_out < SMALL_CONV_OUT_CHANNELS)
    ):
        return "conv_small"
    if positions is not None and positions < MID_CONV_POSITIONS:
        return "conv_mid"
    if stem:
        return "conv_stem"
    if kernel and prod(kernel) >= WIDE_CONV_KERNEL_AREA:  # past the stem: stems returned above
        return "conv_wide"
    return "conv1x1" if pointwise else "conv"


def _grouping(view: NodeView, w_index: int) -> tuple[int, int | None]:
    """(group, input channels per group) of a convolution whose weight is input ``w_index``: the weight's second
    dimension, else the input's channels over the groups (None when neither is known)."""
    group = int(view.attr("group", 1) or 1)
    w = _known(view.input(w_index))
    if w is not None and len(w) >= 3:
        return group, w[1]
    x = _known(view.input(0))
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


def _product_class(view: NodeView) -> str:
    """gemm when the second operand is a weight (prepacked by the engine), matmul for two activations."""
    b = view.input(3) if view.op_type == "QLinearMatMul" else view.input(1)
    return "gemm" if b is not None and b.is_weight else "matmul"


def _pool_class(view: NodeView) -> str:
    """pool for a window in onnxruntime's NCHWc layout (after a convolution), pool_nchw for the plain-layout kernel,
    which runs slower per byte."""
    return "pool" if view.domain == NCHWC_DOMAIN else "pool_nchw"


def _elementwise_class(view: NodeView) -> str:
    """broadcast when an operand is broadcast along the innermost axis (e.g. a (C,1,1) scale on an NCHW tensor):
    onnxruntime then loops per channel instead of streaming one contiguous range, which costs more per byte;
    elementwise otherwise."""
    out = _known(view.output(0))
    if len(view.inputs) < 2 or out is None or not out or out[-1] == 1:
        return "elementwise"
    for t in view.inputs:
        shape = _known(t)
        if shape is not None and shape and shape[-1] == 1 and prod(shape) < prod(out):
            return "broadcast"
    return "elementwise"


def _reorder_class(view: NodeView) -> str:
    """reorder_short for an NCHWc -> NCHW reorder onto planes of fewer than MID_CONV_POSITIONS positions (a 14x14
    or 7x7 stage): onnxruntime then writes each channel's short plane on its own, at a lower bandwidth than along
    long rows. The opposite reorder (NCHW -> NCHWc) and a channels-last output stay reorder."""
    out = _known(view.output(0))
    if view.op_type != "ReorderOutput" or out is None or len(out) < 3 or int(view.attr("channels_last", 0) or 0):
        return "reorder"
    return "reorder_short" if prod(out[2:]) < MID_CONV_POSITIONS else "reorder"


def _transpose_class(view: NodeView) -> str:
    """transpose_generic for a Transpose that moves more than one axis (dims of size 1 aside), which onnxruntime
    runs element by element; transpose for one that moves a single axis (a head split, a channel shuffle in NCHW, a
    layout change), for which it has block-copy kernels, and for DepthToSpace and SpaceToDepth."""
    shape = _known(view.input(0))
    perm = view.attr("perm")
    if view.op_type != "Transpose" or shape is None:
        return "transpose"
    axes = list(perm) if perm is not None else list(reversed(range(len(shape))))
    moved = [int(a) for a in axes if shape[int(a)] != 1]
    return "transpose" if _moves_one_axis(moved) else "transpose_generic"


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
                "conv_grouped",
                "depthwise",
                "batchnorm",  # a depthwise 1x1 convolution: the per-channel scale and shift of a folded BatchNorm
            }
        ),
    ),
    "conv_integer": Refinement(_integer_conv_class, frozenset({"conv_integer", "conv_integer_grouped"})),
    "qconv": Refinement(_qconv_class, frozenset({"qconv", "qconv_depthwise"})),
    "gemm": Refinement(_product_class, frozenset({"gemm", "matmul"})),
    "pool": Refinement(_pool_class, frozenset({"pool", "pool_nchw"})),
    "elementwise": Refinement(_elementwise_class, frozenset({"elementwise", "broadcast"})),
    "reorder": Refinement(_reorder_class, frozenset({"reorder", "reorder_short"})),
    "transpose": Refinement(_transpose_class, frozenset({"transpose", "transpose_generic"})),
}


def op_class(view: NodeView) -> str:
    """The ceiling class of a node (one of OP_CLASSES), or SHAPE for shape-only ops and OTHER for the rest.

    The base class is the one the op registered with its cost function (``onnxroof.costs.engine_class``; OTHER for
    an op without one); :data:`REFINEMENTS` splits convolutions by their weight's shape and the output's size,
    integer convolutions (ConvInteger, QLinearConv) into grouped or depthwise ones and the rest,
    matrix products by their second operand, pooling windows by layout (NCHWc or plain), elementwise ops by
    whether they broadcast along the innermost axis, and NCHWc output reorders by the size of the planes they
    write.
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
