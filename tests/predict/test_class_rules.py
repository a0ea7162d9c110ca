"""Every classification rule, on a node of its own: the class it gives and the reason a user reads, and the cases
where the rules' order decides the class."""

from __future__ import annotations

from typing import Any

import pytest

from onnxroof.costs import OTHER, SHAPE, NodeView, engine_class
from onnxroof.predict import op_classes
from onnxroof.predict.class_rules import Classification, Refinement, Rule, always
from tests.helpers import T, W, gqa, make_node, nbits

NCHWC = "com.microsoft.nchwc"
MS = "com.microsoft"


def conv(cin: int, cout: int, hw: int, k: int, out: int, *, group: int = 1, domain: str = NCHWC, **attrs: Any):
    """A Conv of ``cin`` -> ``cout`` channels, a k x k kernel, an hw x hw input and an out x out output."""
    return make_node(
        "Conv",
        [T((1, cin, hw, hw)), W((cout, cin // group, k, k)), W((cout,))],
        [T((1, cout, out, out))],
        domain=domain,
        group=group,
        kernel_shape=[k, k],
        **attrs,
    )


def product(rows: int | None, weight: bool = True) -> NodeView:
    b = W((768, 768)) if weight else T((768, 768))
    return make_node(
        "MatMul", [T(None if rows is None else (rows, 768)), b], [T(None if rows is None else (rows, 768))]
    )


def activation(op: str, *, domain: str = "", **attrs: Any) -> NodeView:
    return make_node(op, [T((1, 64, 28, 28))], [T((1, 64, 28, 28))], domain=domain, **attrs)


def pow_by(exponent: float) -> NodeView:
    return make_node("Pow", [T((1, 128, 512)), W(())], [T((1, 128, 512))], constants={1: exponent})


def transpose(shape: tuple[int, ...], perm: list[int]) -> NodeView:
    return make_node("Transpose", [T(shape)], [T(None)], perm=perm)


def resize(op: str, mode: str, domain: str = "") -> NodeView:
    return make_node(op, [T((1, 8, 7, 7))], [T((1, 8, 14, 14))], domain=domain, mode=mode)


# (view, class, reason): one case or more per rule, in the rules' order.
CASES: list[tuple[str, NodeView, str, str]] = [
    # ---- convolutions
    (
        "conv transpose, grouped",
        make_node("ConvTranspose", [T((1, 8, 7, 7)), W((8, 4, 3, 3))], [T((1, 8, 14, 14))], group=2),
        "conv_grouped",
        "a ConvTranspose of 2 groups",
    ),
    (
        "conv transpose",
        make_node("ConvTranspose", [T((1, 8, 7, 7)), W((8, 4, 3, 3))], [T((1, 4, 14, 14))]),
        "conv",
        "a ConvTranspose without groups",
    ),
    ("depthwise 1x1", conv(64, 64, 28, 1, 28, group=64), "batchnorm", "a depthwise 1x1: a per-channel scale and shift"),
    # before depthwise_plain: a plain-layout depthwise 1x1 is still a scale and shift
    (
        "depthwise 1x1, plain",
        conv(64, 64, 28, 1, 28, group=64, domain=""),
        "batchnorm",
        "a depthwise 1x1: a per-channel scale and shift",
    ),
    (
        "depthwise, plain",
        conv(60, 60, 28, 3, 28, group=60, domain="", pads=[1] * 4),
        "depthwise_plain",
        "one input channel per group, 60 groups, plain layout",
    ),
    # a 3x3 window, pad 1, on a 2x2 map: both output columns reach the padding
    (
        "depthwise, border",
        conv(64, 64, 2, 3, 2, group=64, pads=[1] * 4),
        "depthwise_border",
        "depthwise, 100% of output columns' windows reach the padding (50% or more)",
    ),
    # 3x3, pad 1 on 56x56: 2 of 56 columns reach the padding
    (
        "depthwise",
        conv(64, 64, 56, 3, 56, group=64, pads=[1] * 4),
        "depthwise",
        "one input channel per group, 64 groups, NCHWc layout",
    ),
    (
        "grouped, narrow",
        conv(48, 48, 56, 3, 56, group=6, domain=""),
        "conv_grouped_narrow",
        "6 groups of 8 output channels (under 16), plain layout",
    ),
    (
        "grouped",
        conv(128, 128, 28, 3, 28, group=4, domain=""),
        "conv_grouped",
        "4 groups, not under 16 output channels each, plain layout",
    ),
    (
        "one spatial axis",
        make_node("Conv", [T((1, 80, 3000)), W((384, 80, 3))], [T((1, 384, 3000))], kernel_shape=[3]),
        "conv_1d",
        "dense over one spatial axis: plain layout, im2col and a product",
    ),
    # before conv_small: 4 positions, but both columns of each row reach the padding
    (
        "border",
        conv(64, 64, 2, 3, 2, pads=[1] * 4),
        "conv_mid",
        "100% of output columns' windows reach the padding (50% or more): the mid-size class, whatever its size",
    ),
    # before conv_narrow and conv1x1: a pointwise one with 24 outputs on one position
    ("one position", conv(1152, 24, 1, 1, 1), "conv_vector", "one output position: a matrix-vector product"),
    (
        "stem, small kernel",
        conv(3, 32, 224, 3, 112, strides=[2, 2], pads=[1] * 4),
        "conv_narrow",
        "a stem: 3 input channels (under 16) and a 3x3 kernel (under 25 taps)",
    ),
    # before conv1x1: a pointwise one with 16 output channels
    ("few outputs", conv(64, 16, 56, 1, 56), "conv_narrow", "16 output channels, under 32"),
    # an NCHWc grouped convolution is a dense one per group: 8 groups of 16 output channels
    (
        "grouped in NCHWc",
        conv(128, 128, 28, 3, 28, group=8, pads=[1] * 4),
        "conv_narrow",
        "16 output channels, under 32",
    ),
    ("pointwise", conv(256, 64, 56, 1, 56), "conv1x1", "pointwise on 3136 output positions"),
    # before conv_small: a pointwise one on 49 positions
    ("pointwise, small", conv(320, 1280, 7, 1, 7), "conv1x1", "pointwise on 49 output positions"),
    ("small output", conv(512, 512, 7, 3, 7, pads=[1] * 4), "conv_small", "49 output positions, under 100"),
    ("mid output", conv(256, 256, 14, 3, 14, pads=[1] * 4), "conv_mid", "196 output positions, between 100 and 400"),
    # before conv_stem: a 7x7 stem kernel on a 7x7 output is a small one
    ("stem, small output", conv(3, 64, 13, 7, 7), "conv_small", "49 output positions, under 100"),
    (
        "stem",
        conv(3, 64, 224, 7, 112, strides=[2, 2], pads=[3] * 4),
        "conv_stem",
        "a stem: 3 input channels (under 16), a 7x7 kernel on 12544 output positions",
    ),
    (
        "wide kernel",
        conv(64, 192, 27, 5, 27, pads=[2] * 4),
        "conv_wide",
        "a 5x5 kernel on 729 output positions, 25 taps or more, past the stem",
    ),
    (
        "large output",
        conv(64, 64, 56, 3, 56, pads=[1] * 4),
        "conv",
        "a 3x3 kernel on 3136 output positions (400 or more, or unknown)",
    ),
    (
        "unknown shapes",
        make_node("Conv", [T(None), T(None)], [T(None)], kernel_shape=[3, 3]),
        "conv",
        "a 3x3 kernel on unknown output positions (400 or more, or unknown)",
    ),
    # ---- integer convolutions
    (
        "depthwise ConvInteger",
        make_node("ConvInteger", [T((1, 32, 28, 28)), W((32, 1, 3, 3))], [T((1, 32, 26, 26))], group=32),
        "conv_integer_grouped",
        "a depthwise ConvInteger: one product per channel",
    ),
    (
        "grouped ConvInteger",
        make_node("ConvInteger", [T((1, 32, 28, 28)), W((32, 8, 3, 3))], [T((1, 32, 26, 26))], group=4),
        "conv_integer",
        "not depthwise: a dense integer product per group",
    ),
    (
        "depthwise QLinearConv",
        make_node("QLinearConv", [T((1, 32, 28, 28)), W(()), W(()), W((32, 1, 3, 3))], [T(None)], group=32),
        "qconv_depthwise",
        "a depthwise QLinearConv: one input channel per group",
    ),
    (
        "QLinearConv",
        make_node("QLinearConv", [T((1, 32, 28, 28)), W(()), W(()), W((64, 32, 3, 3))], [T(None)]),
        "qconv",
        "not depthwise",
    ),
    # ---- products
    ("two activations", product(197, weight=False), "matmul", "a product of two activations"),
    ("rows unknown", product(None), "gemm", "a product by a weight, its rows unknown"),
    ("long product", product(197), "gemm", "a product by a weight, 197 rows (16 or more)"),
    ("16 rows", product(16), "gemm", "a product by a weight, 16 rows (16 or more)"),
    ("one row", product(1), "gemv", "a product by a weight, one row"),
    ("short product", product(15), "gemm_short", "a product by a weight, 15 rows (2 to 15)"),
    (
        "4-bit int8, one row",
        nbits(1, 768, 768, 4),
        "gemv_nbits_int8",
        "MatMulNBits of one row, accuracy_level 4: int8 products",
    ),
    (
        "4-bit int8, rows",
        nbits(128, 768, 768, 4),
        "gemm_nbits_int8",
        "MatMulNBits of 128 rows, accuracy_level 4: int8 products",
    ),
    (
        "4-bit fp32, one row",
        nbits(1, 768, 768, 0),
        "gemv_nbits",
        "MatMulNBits of one row, accuracy_level 0: fp32 products",
    ),
    ("4-bit fp32, rows", nbits(4, 768, 768, 1), "gemm_nbits", "MatMulNBits of 4 rows, accuracy_level 1: fp32 products"),
    # ---- fused attention
    ("GQA decode step", gqa(14, 2, 128), "attention_decode", "GroupQueryAttention on one new token"),
    ("GQA prefill", gqa(14, 2, 0, 128), "attention", "GroupQueryAttention on 128 new tokens"),
    (
        "MultiHeadAttention",
        make_node("MultiHeadAttention", [T((1, 128, 768)), T((1, 128, 768)), T((1, 128, 768))], [T(None)], domain=MS),
        "matmul",
        "com.microsoft::MultiHeadAttention: its products of two activations",
    ),
    # ---- recurrent ops
    ("LSTM", make_node("LSTM", [T((8, 1, 64))], [T(None)]), "lstm", "LSTM: an LSTM's steps"),
    (
        "quantized LSTM",
        make_node("DynamicQuantizeLSTM", [T((8, 1, 64))], [T(None)], domain=MS),
        "lstm",
        "DynamicQuantizeLSTM: an LSTM's steps",
    ),
    ("GRU", make_node("GRU", [T((8, 1, 64))], [T(None)]), "gru", "GRU: a GRU's steps"),
    ("RNN", make_node("RNN", [T((8, 1, 64))], [T(None)]), "recurrent", "RNN: no class of its own"),
    # ---- activations
    # before activation_gelu: the tanh approximation
    ("Gelu tanh", activation("Gelu", approximate="tanh"), "activation_fastgelu", "Gelu with approximate='tanh'"),
    (
        "QuickGelu default alpha",
        activation("QuickGelu", domain=MS),
        "activation_quickgelu",
        "QuickGelu with alpha 1.702, not 1",
    ),
    # after activation_quickgelu: alpha 1 is SiLU, by the op's own class
    (
        "QuickGelu alpha 1",
        activation("QuickGelu", domain=MS, alpha=1.0),
        "activation_silu",
        "com.microsoft::QuickGelu has a class of its own",
    ),
    ("Pow 2", pow_by(2.0), "pow_multiplied", "Pow by a constant 2, computed by multiplying"),
    ("Pow 3", pow_by(3.0), "pow_multiplied", "Pow by a constant 3, computed by multiplying"),
    ("Pow 0.5", pow_by(0.5), "activation_pow", "Pow by another exponent: the C library's pow per element"),
    (
        "Pow by a tensor",
        make_node("Pow", [T((1, 128)), T((1, 128))], [T((1, 128))]),
        "activation_pow",
        "Pow by another exponent: the C library's pow per element",
    ),
    *(
        (op, activation(op.rpartition("::")[2], domain=op.rpartition("::")[0]), cls, f"{op} has a class of its own")
        for op, cls in [
            ("Exp", "activation_exp"),
            ("Elu", "activation_exp"),
            ("Selu", "activation_exp"),
            ("Celu", "activation_exp"),
            ("Sigmoid", "activation_sigmoid"),
            ("Swish", "activation_sigmoid"),
            ("com.microsoft::QLinearSigmoid", "activation_sigmoid"),
            ("Tanh", "activation_tanh"),
            ("Erf", "activation_erf"),
            ("Gelu", "activation_gelu"),
            ("com.microsoft::Gelu", "activation_gelu"),
            ("com.microsoft::BiasGelu", "activation_gelu"),
            ("com.microsoft::BiasSplitGelu", "activation_gelu"),
            ("com.microsoft::FastGelu", "activation_fastgelu"),
        ]
    ),
    ("Log", activation("Log"), "activation", "Log: no class of its own"),
    # ---- pooling, elementwise, reorders
    ("NCHWc pool", activation("MaxPool", domain=NCHWC), "pool", "in onnxruntime's NCHWc layout"),
    ("plain pool", activation("MaxPool"), "pool_nchw", "in plain layout"),
    (
        "per-channel scale",
        make_node("Mul", [T((1, 64, 28, 28)), W((64, 1, 1))], [T((1, 64, 28, 28))]),
        "broadcast",
        "an operand broadcast along the innermost axis",
    ),
    (
        "a row broadcast",
        make_node("Add", [T((1, 64, 28, 28)), W((28,))], [T((1, 64, 28, 28))]),
        "elementwise",
        "no operand broadcast along the innermost axis",
    ),
    (
        "reorder onto short planes: one class for every reorder",
        make_node("ReorderOutput", [T((1, 64, 7, 7))], [T((1, 64, 7, 7))], domain=NCHWC),
        "reorder",
        "the class ReorderOutput registers",
    ),
    # ---- transposes
    (
        "DepthToSpace",
        make_node("DepthToSpace", [T((1, 16, 7, 7))], [T((1, 4, 14, 14))], blocksize=2),
        "movement",
        "DepthToSpace: a copy",
    ),
    (
        "two axes moved",
        transpose((1, 4, 8, 7, 7), [0, 4, 3, 1, 2]),
        "transpose_generic",
        "moves more than one axis: element by element",
    ),
    (
        "channel shuffle",
        transpose((1, 4, 8, 7, 7), [0, 2, 1, 3, 4]),
        "movement",
        "keeps the innermost axis innermost: whole rows copied",
    ),
    (
        "batched key transpose",
        transpose((4, 49, 32), [0, 2, 1]),
        "transpose_batched",
        "moves the innermost axis in each of 4 matrices",
    ),
    ("key transpose", transpose((1, 49, 32), [0, 2, 1]), "transpose_inner", "moves the innermost axis, in one matrix"),
    # ---- resizes
    (
        "GridSample",
        make_node("GridSample", [T((1, 8, 7, 7)), T((1, 7, 7, 2))], [T((1, 8, 7, 7))]),
        "resize",
        "GridSample: the resize class",
    ),
    ("nearest", resize("Resize", "nearest"), "resize", "mode nearest: a copy per output element"),
    (
        "NCHWc linear",
        resize("Upsample", "linear", NCHWC),
        "resize_linear",
        "an interpolating (linear) resize in NCHWc layout",
    ),
    ("plain cubic", resize("Resize", "cubic"), "resize_linear_nchw", "an interpolating (cubic) resize in plain layout"),
]


@pytest.mark.parametrize(("view", "cls", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_rule_gives_its_class_and_reason(view: NodeView, cls: str, reason: str) -> None:
    assert op_classes.classify(view) == Classification(cls, reason)
    assert op_classes.op_class(view) == cls


@pytest.mark.parametrize("base", sorted(op_classes.REFINEMENTS))
def test_every_rule_has_a_case(base: str) -> None:
    refinement = op_classes.REFINEMENTS[base]
    hit = {
        refinement.rules.index(refinement.rule_for(refinement.facts(view)))
        for _, view, _, _ in CASES
        if engine_class(view.domain, view.op_type) == base
    }
    missed = [rule.cls for i, rule in enumerate(refinement.rules) if i not in hit]
    assert missed == []


def test_a_class_no_refinement_splits_is_the_registered_one() -> None:
    assert op_classes.classify(activation("Softmax")) == Classification("softmax", "the class Softmax registers")
    assert op_classes.classify(make_node("Reshape", [T((1, 64)), T((2,))], [T((8, 8))])) == Classification(
        SHAPE, "Reshape changes the shape only: no kernel"
    )
    assert op_classes.classify(make_node("QAttention", [T((1, 8))], [T(None)], domain=MS)) == Classification(
        OTHER, "no cost function for QAttention: the plain roofline"
    )


def test_a_classification_reads_as_its_class_and_reason() -> None:
    assert str(op_classes.classify(conv(256, 256, 14, 3, 14, pads=[1] * 4))) == (
        "conv_mid: 196 output positions, between 100 and 400"
    )


def test_a_refinement_ends_with_a_rule_that_always_holds() -> None:
    with pytest.raises(ValueError, match="last rule"):
        Refinement(lambda view: view, (Rule("conv", lambda f: False, "never"),))
    assert Refinement(lambda view: view, (Rule("conv", always, "always"),)).classes == {"conv"}


def test_rows_class_follows_the_product_rules() -> None:
    assert [op_classes.rows_class(rows) for rows in (None, 1, 2, 15, 16)] == [
        "gemm",
        "gemv",
        "gemm_short",
        "gemm_short",
        "gemm",
    ]
