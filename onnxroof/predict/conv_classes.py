"""The classes of the convolutions (base class ``conv``, ``conv_integer``, ``qconv``): which of onnxruntime's
convolution kernels runs a node, and at which regime of its rate, from the weight's shape (or the attributes
where it is unknown), the output's size and the layout.

The rules are tried in order, and the order carries meaning: a depthwise convolution is one before it is one of
few positions, a plain-layout grouped one before one over one axis, a border one before a small one, a narrow
one before a pointwise one, and a stem only once the small and mid-sized outputs are taken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from onnxroof.costs import NodeView
from onnxroof.predict.class_rules import Refinement, Rule, always, known_shape
from onnxroof.predict.conv_windows import NCHWC_DOMAIN, border_share

__all__ = [
    "BORDER_CONV_SHARE",
    "CONV",
    "CONV_INTEGER",
    "MID_CONV_POSITIONS",
    "NARROW_GROUP_CHANNELS",
    "QCONV",
    "SMALL_CONV_IN_CHANNELS",
    "SMALL_CONV_OUT_CHANNELS",
    "SMALL_CONV_POSITIONS",
    "SMALL_STEM_KERNEL_AREA",
    "WIDE_CONV_KERNEL_AREA",
    "ConvFacts",
    "conv_facts",
]

# Under this many output positions a KxK convolution's rows are short and its borders a large share of them.
SMALL_CONV_POSITIONS = 100
# Under this many the short rows the kernel walks still cost it efficiency against a large output's.
MID_CONV_POSITIONS = 400
# Under this many input channels a dense convolution is a stem: the NCHWc kernel reads a plain NCHW input.
SMALL_CONV_IN_CHANNELS = 16
# Under this many output channels a dense convolution fills few of the kernel's output blocks.
SMALL_CONV_OUT_CHANNELS = 32
# A stem with a kernel of fewer taps does little work per input pixel, like a narrow convolution.
SMALL_STEM_KERNEL_AREA = 25
# Past the stem, a kernel of this many taps (5x5) or more runs at a rate per FLOP of its own.
WIDE_CONV_KERNEL_AREA = 25
# With at least this share of output columns whose windows reach the padding, the NCHWc kernel takes most
# positions one at a time, with a bounds check per tap.
BORDER_CONV_SHARE = 0.5
# Under this many output channels per group, a plain-layout group's product is too short for the row blocks.
NARROW_GROUP_CHANNELS = 16

# Convolutions whose activations are channels-last (``[N, spatial..., C]``), weights staying ``[M, C/group, k...]``.
_NHWC_CONV = frozenset({"NhwcConv", "NhwcFusedConv"})


@dataclass(frozen=True, slots=True)
class ConvFacts:
    """What the convolution rules look at. ``dense_in`` and ``dense_out`` are the channels of the dense kernel
    that runs the node: the whole input's and output's, or one group's for a grouped convolution in the NCHWc
    layout, which onnxruntime runs as a dense convolution per group."""

    op_type: str
    nchwc: bool
    nhwc: bool
    group: int
    kernel: tuple[int, ...]
    per_group_in: int | None  # input channels per group
    per_group_out: int | None  # output channels per group
    dense_in: int | None
    dense_out: int | None
    positions: int | None  # output positions per image
    border: float  # the share of output columns whose windows reach the padding (NCHWc only)

    @property
    def depthwise(self) -> bool:
        return self.group > 1 and self.per_group_in == 1

    @property
    def pointwise(self) -> bool:
        return bool(self.kernel) and all(k == 1 for k in self.kernel)

    @property
    def area(self) -> int | None:
        """The kernel's taps, None where the kernel is unknown."""
        return prod(self.kernel) if self.kernel else None

    @property
    def stem(self) -> bool:
        return self.dense_in is not None and self.dense_in < SMALL_CONV_IN_CHANNELS and bool(self.kernel)

    @property
    def kernel_text(self) -> str:
        return "x".join(map(str, self.kernel)) if self.kernel else "unknown"

    @property
    def positions_text(self) -> str:
        return "unknown" if self.positions is None else str(self.positions)


def conv_facts(view: NodeView) -> ConvFacts:
    """A convolution's facts, from its weight's shape (the attributes where it is unknown) and its output."""
    x, y, w = known_shape(view.input(0)), known_shape(view.output(0)), known_shape(view.input(1))
    nhwc = view.op_type in _NHWC_CONV
    group = int(view.attr("group", 1) or 1)
    nchwc = view.domain == NCHWC_DOMAIN
    if w is not None and len(w) >= 3:
        kernel = tuple(w[2:]) if not nhwc else tuple(w[1:-1])
        per_group_in: int | None = w[1] if not nhwc else w[-1]
    else:
        kernel = tuple(view.attr("kernel_shape") or ())
        per_group_in = None
    c_in = (x[1] if not nhwc else x[-1]) if x is not None and len(x) >= 3 else None
    if per_group_in is None and c_in is not None:
        per_group_in = c_in // group
    c_out = (y[1] if not nhwc else y[-1]) if y is not None and len(y) >= 3 else None
    per_group_out = c_out // group if c_out is not None else None
    positions = (prod(y[2:]) if not nhwc else prod(y[1:-1])) if y is not None and len(y) >= 3 else None
    dense_in, dense_out = (per_group_in, per_group_out) if group > 1 else (c_in, c_out)
    border = border_share(view) if nchwc else 0.0
    return ConvFacts(
        view.op_type, nchwc, nhwc, group, kernel, per_group_in, per_group_out, dense_in, dense_out, positions, border
    )


def _narrow_stem(f: ConvFacts) -> bool:
    return f.stem and f.area is not None and f.area < SMALL_STEM_KERNEL_AREA


_PLACE = "{f.kernel_text} kernel on {f.positions_text} output positions"

CONV: Refinement[ConvFacts] = Refinement(
    conv_facts,
    (
        Rule(
            "conv_grouped",
            lambda f: f.op_type == "ConvTranspose" and f.group > 1,
            "a ConvTranspose of {f.group} groups",
        ),
        Rule("conv", lambda f: f.op_type == "ConvTranspose", "a ConvTranspose without groups"),
        Rule("batchnorm", lambda f: f.depthwise and f.pointwise, "a depthwise 1x1: a per-channel scale and shift"),
        Rule(
            "depthwise_plain",
            lambda f: f.depthwise and not f.nchwc,
            "one input channel per group, {f.group} groups, plain layout",
        ),
        Rule(
            "depthwise_border",
            lambda f: f.depthwise and f.border >= BORDER_CONV_SHARE,
            f"depthwise, {{f.border:.0%}} of output columns' windows reach the padding "
            f"({BORDER_CONV_SHARE:.0%} or more)",
        ),
        Rule("depthwise", lambda f: f.depthwise, "one input channel per group, {f.group} groups, NCHWc layout"),
        Rule(
            "conv_grouped_narrow",
            lambda f: (
                f.group > 1 and not f.nchwc and f.per_group_out is not None and f.per_group_out < NARROW_GROUP_CHANNELS
            ),
            f"{{f.group}} groups of {{f.per_group_out}} output channels (under {NARROW_GROUP_CHANNELS}), plain layout",
        ),
        Rule(
            "conv_grouped",
            lambda f: f.group > 1 and not f.nchwc,
            f"{{f.group}} groups, not under {NARROW_GROUP_CHANNELS} output channels each, plain layout",
        ),
        Rule(
            "conv_1d",
            lambda f: len(f.kernel) == 1 and f.group == 1 and not f.nhwc and not f.nchwc,
            "dense over one spatial axis: plain layout, im2col and a product",
        ),
        Rule(
            "conv_mid",
            lambda f: f.nchwc and f.border >= BORDER_CONV_SHARE,
            f"{{f.border:.0%}} of output columns' windows reach the padding ({BORDER_CONV_SHARE:.0%} or more): "
            "the mid-size class, whatever its size",
        ),
        Rule("conv_vector", lambda f: f.positions == 1, "one output position: a matrix-vector product"),
        Rule(
            "conv_narrow",
            _narrow_stem,
            f"a stem: {{f.dense_in}} input channels (under {SMALL_CONV_IN_CHANNELS}) and a {{f.kernel_text}} kernel "
            f"(under {SMALL_STEM_KERNEL_AREA} taps)",
        ),
        Rule(
            "conv_narrow",
            lambda f: f.dense_out is not None and f.dense_out < SMALL_CONV_OUT_CHANNELS,
            f"{{f.dense_out}} output channels, under {SMALL_CONV_OUT_CHANNELS}",
        ),
        Rule("conv1x1", lambda f: f.pointwise, "pointwise on {f.positions_text} output positions"),
        Rule(
            "conv_small",
            lambda f: f.positions is not None and f.positions < SMALL_CONV_POSITIONS,
            f"{{f.positions}} output positions, under {SMALL_CONV_POSITIONS}",
        ),
        Rule(
            "conv_mid",
            lambda f: f.positions is not None and f.positions < MID_CONV_POSITIONS,
            f"{{f.positions}} output positions, between {SMALL_CONV_POSITIONS} and {MID_CONV_POSITIONS}",
        ),
        Rule(
            "conv_stem",
            lambda f: f.stem,
            f"a stem: {{f.dense_in}} input channels (under {SMALL_CONV_IN_CHANNELS}), a {_PLACE}",
        ),
        Rule(
            "conv_wide",
            lambda f: f.area is not None and f.area >= WIDE_CONV_KERNEL_AREA,
            f"a {_PLACE}, {WIDE_CONV_KERNEL_AREA} taps or more, past the stem",
        ),
        Rule("conv", always, f"a {_PLACE} ({MID_CONV_POSITIONS} or more, or unknown)"),
    ),
)


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """The grouping of an integer convolution."""

    group: int
    per_group_in: int | None

    @property
    def depthwise(self) -> bool:
        return self.group > 1 and self.per_group_in == 1


def _grouping(w_index: int) -> Callable[[NodeView], GroupFacts]:
    """The facts of a convolution whose weight is input ``w_index``: the weight's second dimension, else the
    input's channels over the groups (None when neither is known)."""

    def facts(view: NodeView) -> GroupFacts:
        group = int(view.attr("group", 1) or 1)
        w = known_shape(view.input(w_index))
        if w is not None and len(w) >= 3:
            return GroupFacts(group, w[1])
        x = known_shape(view.input(0))
        return GroupFacts(group, x[1] // group if x is not None and len(x) >= 3 else None)

    return facts


# onnxruntime's ConvInteger runs an im2col and an integer matrix product per group, so a depthwise one pays that
# fixed cost once per channel for a product of one row, while the groups of a grouped convolution with several
# channels each are dense products like an ungrouped one's.
CONV_INTEGER: Refinement[GroupFacts] = Refinement(
    _grouping(1),
    (
        Rule("conv_integer_grouped", lambda f: f.depthwise, "a depthwise ConvInteger: one product per channel"),
        Rule("conv_integer", always, "not depthwise: a dense integer product per group"),
    ),
)

# A QLinearConv with one input channel per group runs onnxruntime's depthwise int8 kernel.
QCONV: Refinement[GroupFacts] = Refinement(
    _grouping(3),
    (
        Rule("qconv_depthwise", lambda f: f.depthwise, "a depthwise QLinearConv: one input channel per group"),
        Rule("qconv", always, "not depthwise"),
    ),
)
