"""The engine's op classes agree with the cost registry, the device schema and the calibration: every class a node
can get is one a device may hold a ceiling for, every such class is given to some node, and every one is either
calibrated or falls back to a class that is."""

from __future__ import annotations

import pytest

from onnxroof.costs import OTHER, SHAPE, Cost, NodeView, engine_class, registered_ops
from onnxroof.devices import CEILING_NAMES, OP_CLASSES, PART_CEILINGS
from onnxroof.ort.calibrate import COMPUTE_CLASSES, MEMORY_CLASSES
from onnxroof.predict import class_work, op_classes
from tests.helpers import INT64, T, W, make_node


def split(op: str) -> tuple[str, str]:
    """'Conv' -> ('', 'Conv'); 'com.microsoft::Gelu' -> ('com.microsoft', 'Gelu')."""
    domain, _, op_type = op.rpartition("::")
    return domain, op_type


REGISTERED: dict[str, str] = {op: engine_class(*split(op)) or "" for op in registered_ops()}
REFINED: set[str] = {cls for refinement in op_classes.REFINEMENTS.values() for cls in refinement.classes}


def test_every_class_a_registration_or_a_refinement_gives_is_a_device_class():
    assert set(REGISTERED.values()) | REFINED <= {*OP_CLASSES, SHAPE, OTHER}


def test_every_device_class_is_given_to_some_node():
    """A class no registration and no refinement gives would hold a ceiling nothing uses."""
    assert set(OP_CLASSES) - set(REGISTERED.values()) - REFINED == set()


def test_every_refinement_refines_a_class_that_ops_register():
    assert set(op_classes.REFINEMENTS) <= set(REGISTERED.values())


def test_the_calibration_and_the_engine_agree_on_the_classes():
    calibrated = COMPUTE_CLASSES | MEMORY_CLASSES
    assert calibrated == {*OP_CLASSES, *PART_CEILINGS}
    assert not COMPUTE_CLASSES & MEMORY_CLASSES


@pytest.mark.parametrize("cls", CEILING_NAMES)
def test_every_class_is_calibrated_or_falls_back_to_a_calibrated_class(cls: str):
    seen = [cls]
    while seen[-1] not in COMPUTE_CLASSES | MEMORY_CLASSES:
        following = op_classes.CLASS_FALLBACK.get(seen[-1])
        assert following is not None, f"{' -> '.join(seen)}: neither calibrated nor a stated fallback"
        assert following not in seen, f"{' -> '.join([*seen, following])}: a cycle"
        seen.append(following)


def test_every_fallback_leads_from_a_device_class_to_a_device_class():
    assert set(op_classes.CLASS_FALLBACK) | set(op_classes.CLASS_FALLBACK.values()) <= set(CEILING_NAMES)


# ------------------------------------------------------------------------------------------------ refinements


def views_of(domain: str, op_type: str) -> list[NodeView]:
    """The same op on views that reach every branch of the refinements: convolutions of each kind (weight at
    input 1 and, as QLinearConv has it, at input 3; NCHW and NHWC), products of a weight (many rows, a few, one;
    MatMulNBits' arithmetic by its accuracy level) and of two activations, attention on one new token and many,
    broadcasting and streaming operands, short and long planes, resizes by mode, powers by a constant, unknown
    shapes."""
    views = []
    for cin, cout, hw, k, group, out_hw in [
        (64, 64, 56, 3, 1, 56),  # conv
        (256, 64, 56, 1, 1, 56),  # conv1x1
        (512, 512, 7, 3, 1, 7),  # conv_small
        (1152, 48, 1, 1, 1, 1),  # conv_vector
        (256, 256, 14, 3, 1, 14),  # conv_mid
        (3, 64, 224, 7, 1, 112),  # conv_stem
        (64, 192, 27, 5, 1, 27),  # conv_wide
        (144, 144, 56, 3, 144, 56),  # depthwise
        (256, 256, 56, 1, 256, 56),  # batchnorm
        (136, 136, 28, 1, 4, 28),  # conv_grouped (plain layout) or a dense class (NCHWc)
        (48, 48, 56, 3, 6, 56),  # conv_grouped_narrow (plain layout) or a dense class (NCHWc)
    ]:
        for weight_at in (1, 3):
            inputs = [T((1, cin, hw, hw)), *[W((1,))] * (weight_at - 1), W((cout, cin // group, k, k)), W((cout,))]
            out = [T((1, cout, out_hw, out_hw))]
            views.append(make_node(op_type, inputs, out, domain=domain, group=group, kernel_shape=[k, k]))
            nhwc = [T((1, hw, hw, cin)), *[W((1,))] * (weight_at - 1), W((cout, k, k, cin // group)), W((cout,))]
            out = [T((1, out_hw, out_hw, cout))]
            views.append(make_node(op_type, nhwc, out, domain=domain, group=group, kernel_shape=[k, k]))
    views += [
        make_node(op_type, [T(None), T(None), None], [T(None)], domain=domain, kernel_shape=[3, 3]),
        # a conv_border in the NCHWc layout: a 3x3 window, pad 1, on a 2x2 map
        make_node(
            op_type, [T((1, 64, 2, 2)), W((64, 64, 3, 3)), W((64,))], [T((1, 64, 2, 2))], domain=domain, pads=[1] * 4
        ),
        # and a depthwise_border: the same window over one channel per group
        make_node(
            op_type,
            [T((1, 64, 2, 2)), W((64, 1, 3, 3)), W((64,))],
            [T((1, 64, 2, 2))],
            domain=domain,
            group=64,
            pads=[1] * 4,
        ),
        make_node(op_type, [T((1, 197, 768)), W((768, 768))], [T((1, 197, 768))], domain=domain),
        make_node(op_type, [T((1, 8, 768)), W((768, 768))], [T((1, 8, 768))], domain=domain),
        make_node(op_type, [T((1, 768)), W((768, 768))], [T((1, 768))], domain=domain),
        # a MatMulNBits' int8 arithmetic, on many rows and on one
        make_node(op_type, [T((1, 8, 768)), W((768, 768))], [T((1, 8, 768))], domain=domain, accuracy_level=4),
        make_node(op_type, [T((1, 768)), W((768, 768))], [T((1, 768))], domain=domain, accuracy_level=4),
        # one new token: an attention's decode step
        make_node(op_type, [T((1, 1, 64))], [T((1, 1, 64))], domain=domain),
        make_node(op_type, [T((1, 12, 197, 64)), T((1, 12, 64, 197))], [T((1, 12, 197, 197))], domain=domain),
        make_node(op_type, [T((1, 64, 28, 28)), W((64, 1, 1))], [T((1, 64, 28, 28))], domain=domain),
        make_node(op_type, [T((1, 64, 28, 28)), T((1, 64, 28, 28))], [T((1, 64, 28, 28))], domain=domain),
        make_node(op_type, [T((1, 2), INT64)], [T((1, 2), INT64)], domain=domain),
    ]
    # an alpha of 1 (QuickGelu's SiLU)
    views.append(make_node(op_type, [T((1, 64, 28, 28))], [T((1, 64, 28, 28))], domain=domain, alpha=1.0))
    for exponent in (2.0, 3.0):  # a Pow onnxruntime computes by multiplying
        views.append(make_node(op_type, [T((1, 128, 512)), W(())], [T(None)], domain=domain, constants={1: exponent}))
    for perm in ([0, 2, 1, 3, 4], [0, 4, 3, 1, 2]):  # a channel shuffle in NCHW and in channels-last layout
        views.append(make_node(op_type, [T((1, 4, 8, 7, 7))], [T(None)], domain=domain, perm=perm))
    for batch in (1, 4):  # the innermost axis moved in one matrix, and in each of a batch of them
        views.append(make_node(op_type, [T((batch, 49, 32))], [T(None)], domain=domain, perm=[0, 2, 1]))
    for mode in ("nearest", "linear", "cubic"):  # a resize that copies or interpolates
        views.append(make_node(op_type, [T((1, 8, 7, 7))], [T((1, 8, 14, 14))], domain=domain, mode=mode))
    for hw in (7, 20):
        for channels_last in (0, 1):
            out = T((1, hw, hw, 64)) if channels_last else T((1, 64, hw, hw))
            views.append(make_node(op_type, [T((1, 64, hw, hw))], [out], domain=domain, channels_last=channels_last))
    return views


@pytest.mark.parametrize("base", sorted(op_classes.REFINEMENTS))
def test_every_refinement_gives_exactly_the_classes_it_lists(base: str):
    ops = [op for op, cls in REGISTERED.items() if cls == base]
    given = {op_classes.op_class(view) for op in ops for view in views_of(*split(op))}
    assert given == op_classes.REFINEMENTS[base].classes


def test_a_class_without_a_refinement_is_the_registered_one():
    # Softmax registers "softmax", which no refinement splits: every view of it is "softmax".
    assert {op_classes.op_class(view) for view in views_of("", "Softmax")} == {"softmax"}
    assert {op_classes.op_class(view) for view in views_of("", "Reshape")} == {SHAPE}


@pytest.mark.parametrize(
    "op_type",
    ["QAttention", "MatMulBnb4", "TransposeMatMul", "QLinearConvTranspose", "SkipGelu", "AddRelu", "IdentityOp"],
)
def test_an_op_without_a_cost_function_is_other_whatever_its_name(op_type: str):
    """An op the costs do not cover has no FLOPs and is charged bytes only, so no class's ceiling describes it."""
    assert {op_classes.op_class(view) for view in views_of("com.microsoft", op_type)} == {OTHER}


# ------------------------------------------------------------------------------------------------ ceiling work

NCHWC = "com.microsoft.nchwc"


def _padded_conv(hw: int, out_hw: int, k: int, *, pad: int, dilation: int = 1, stride: int = 1, domain: str = NCHWC):
    return make_node(
        "Conv",
        [T((1, 64, hw, hw)), W((64, 64, k, k)), W((64,))],
        [T((1, 64, out_hw, out_hw))],
        domain=domain,
        kernel_shape=[k, k],
        pads=[pad] * 4,
        dilations=[dilation] * 2,
        strides=[stride] * 2,
    )


def test_taps_inside_a_padded_window_closed_form():
    # 3x3, pad 1, stride 1 on 7x7: along an axis the first and last output positions lose one tap each, so
    # 7*3 - 2 = 19 of 21 taps read the input; over both axes (19/21)^2.
    assert op_classes.taps_inside(_padded_conv(7, 7, 3, pad=1)) == pytest.approx((19 / 21) ** 2)
    # Dilation 12, pad 12 on 14x14 (DeepLab's ASPP branch at 1/16 of 224): output o reads o-12, o and o+12; o-12
    # lies inside for o >= 12 (2 positions), o+12 for o <= 1 (2 positions), o always: (14 + 2 + 2) / 42 per axis.
    assert op_classes.taps_inside(_padded_conv(14, 14, 3, pad=12, dilation=12)) == pytest.approx((18 / 42) ** 2)
    # Stride 2, pad 1 on 8x8 (output 4): positions o*2-1+j; only o=0, j=0 reads -1: 11 of 12 taps per axis.
    assert op_classes.taps_inside(_padded_conv(8, 4, 3, pad=1, stride=2)) == pytest.approx((11 / 12) ** 2)
    # No padding: every tap inside.
    assert op_classes.taps_inside(_padded_conv(9, 7, 3, pad=0)) == 1.0


def test_taps_inside_holds_only_for_a_consistent_nchwc_convolution():
    # The plain-layout convolution (im2col) computes the padding's zeros too.
    assert op_classes.taps_inside(_padded_conv(7, 7, 3, pad=1, domain="")) == 1.0
    # Attributes that do not give the output's size: nothing to follow.
    assert op_classes.taps_inside(_padded_conv(7, 9, 3, pad=1)) == 1.0


def test_border_share_closed_form():
    # 3x3, pad 1 on 7x7: output columns 0 and 6 read the padding, 2 of 7.
    assert op_classes.border_share(_padded_conv(7, 7, 3, pad=1)) == pytest.approx(2 / 7)
    # Dilation 4, pad 4 on 14x14: column o reads o-4, o and o+4; o-4 < 0 for o < 4, o+4 > 13 for o > 9: 8 of 14.
    assert op_classes.border_share(_padded_conv(14, 14, 3, pad=4, dilation=4)) == pytest.approx(8 / 14)
    # Dilation 12, pad 12 on 14x14: o-12 < 0 for o < 12 and o+12 > 13 for o > 1, so every column.
    assert op_classes.border_share(_padded_conv(14, 14, 3, pad=12, dilation=12)) == 1.0
    # Stride 2, pad 1 on 8x8 (output 4): only column 0 reads -1.
    assert op_classes.border_share(_padded_conv(8, 4, 3, pad=1, stride=2)) == pytest.approx(1 / 4)
    # No padding, the plain layout, or attributes that do not give the output: none.
    assert op_classes.border_share(_padded_conv(9, 7, 3, pad=0)) == 0.0
    assert op_classes.border_share(_padded_conv(7, 7, 3, pad=1, domain="")) == 0.0
    assert op_classes.border_share(_padded_conv(7, 9, 3, pad=1)) == 0.0


def test_a_dense_nchwc_convolution_with_most_columns_at_the_padding_is_a_mid_size_one_whatever_its_size():
    # BORDER_CONV_SHARE is half the columns: dilation 4 on 14x14 (8 of 14) is one, 3x3 pad 1 on 7x7 (2 of 7) is
    # not, and a 3x3 window on a 2x2 map (both columns) is.
    assert op_classes.op_class(_padded_conv(14, 14, 3, pad=4, dilation=4)) == "conv_mid"
    assert op_classes.op_class(_padded_conv(7, 7, 3, pad=1)) == "conv_small"
    assert op_classes.op_class(_padded_conv(2, 2, 3, pad=1)) == "conv_mid"  # 4 positions: conv_small but for it
    # The plain layout's im2col computes the padding's zeros like any other tap: no border class there.
    assert op_classes.op_class(_padded_conv(14, 14, 3, pad=4, dilation=4, domain="")) == "conv_mid"


def test_ceiling_work_is_that_of_one_product_or_one_time_step():
    # 12 heads of a 197x64 by 64x197 product: 12 products, each a twelfth of the FLOPs and bytes.
    scores = make_node("MatMul", [T((1, 12, 197, 64)), T((1, 12, 64, 197))], [T((1, 12, 197, 197))])
    cost = Cost(flops=12 * 2 * 197 * 64 * 197, bytes_read=2 * 12 * 197 * 64 * 4, bytes_written=12 * 197 * 197 * 4)
    assert class_work.repeats(scores, "matmul") == 12
    assert class_work.ceiling_work(scores, cost, "matmul") == (2 * 197 * 64 * 197, cost.bytes / 12)
    # An LSTM over 128 steps ([seq, batch, input]; [batch, seq, input] with layout 1).
    lstm = make_node("LSTM", [T((128, 1, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T((128, 1, 1, 256))])
    assert class_work.repeats(lstm, "lstm") == 128
    batch_first = make_node("LSTM", [T((1, 40, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T(None)], layout=1)
    assert class_work.repeats(batch_first, "lstm") == 40
    # A plain-layout grouped convolution runs one product per group; in NCHWc every group is one dense kernel.
    grouped = make_node("FusedConv", [T((1, 48, 56, 56)), W((48, 8, 3, 3))], [T((1, 48, 56, 56))], group=6)
    assert class_work.repeats(grouped, "conv_grouped_narrow") == 6
    # A product by a weight is one kernel whatever its rows; a padded NCHWc convolution's work is its inside taps.
    proj = make_node("MatMul", [T((1, 197, 768)), W((768, 768))], [T((1, 197, 768))])
    assert class_work.repeats(proj, "gemm") == 1
    conv_cost = Cost(flops=1e6, bytes_read=1e5, bytes_written=1e5)
    assert class_work.ceiling_work(_padded_conv(7, 7, 3, pad=1), conv_cost, "conv_small") == pytest.approx(
        (1e6 * (19 / 21) ** 2, 2e5)
    )


def test_a_softmaxs_ceiling_is_read_at_one_row():
    # Swin's window attention: 64 windows x 3 heads x 49 queries, each a row of 49 scores over the last axis;
    # Softmax's 5 FLOPs per element (costs.normalization) give 5 x 49 per row.
    windows = make_node("Softmax", [T((64, 3, 49, 49))], [T((64, 3, 49, 49))], axis=-1)
    elements = 64 * 3 * 49 * 49
    cost = Cost(flops=5 * elements, bytes_read=4 * elements, bytes_written=4 * elements)
    assert class_work.repeats(windows, "softmax") == 64 * 3 * 49
    assert class_work.ceiling_work(windows, cost, "softmax") == (5 * 49, 8 * 49)
    # The axis need not be the last: over axis 1 of (2, 3, 4) each of the 2 x 4 rows has 3 elements.
    assert class_work.repeats(make_node("Softmax", [T((2, 3, 4))], [T((2, 3, 4))], axis=1), "softmax") == 8
    # Without the attribute the last axis (opset 13's default); without a shape one unit.
    assert class_work.repeats(make_node("LogSoftmax", [T((5, 7))], [T((5, 7))]), "softmax") == 5
    assert class_work.repeats(make_node("Softmax", [T(None)], [T(None)]), "softmax") == 1


def test_a_layer_normalizations_ceiling_is_read_at_one_row():
    # ConvNeXt's first stage: LayerNormalization over the 96 channels of a channels-last 1x56x56x96 map, 3136 rows
    # of 96; 7 FLOPs per element with its bias (costs.normalization) give 7 x 96 per row.
    norm = make_node("LayerNormalization", [T((1, 56, 56, 96)), W((96,)), W((96,))], [T((1, 56, 56, 96))], axis=-1)
    elements = 56 * 56 * 96
    cost = Cost(flops=7 * elements, bytes_read=4 * elements, bytes_written=4 * elements)
    assert class_work.repeats(norm, "layernorm") == 56 * 56
    assert class_work.ceiling_work(norm, cost, "layernorm") == (7 * 96, 8 * 96)
    # From axis 2 of (2, 3, 4, 5) each of the 2 x 3 rows holds 4 x 5 elements; without the attribute the last axis.
    assert (
        class_work.repeats(make_node("LayerNormalization", [T((2, 3, 4, 5))], [T((2, 3, 4, 5))], axis=2), "layernorm")
        == 6
    )
    assert (
        class_work.repeats(
            make_node("SimplifiedLayerNormalization", [T((1, 128, 512))], [T((1, 128, 512))]), "layernorm"
        )
        == 128
    )
    # EmbedLayerNormalization reads token ids and writes one normalized row per token.
    embed = make_node("EmbedLayerNormalization", [T((2, 128), INT64)], [T((2, 128, 768))], domain="com.microsoft")
    assert class_work.repeats(embed, "layernorm") == 256
    assert class_work.repeats(make_node("LayerNormalization", [T(None)], [T(None)]), "layernorm") == 1


def test_a_batched_transposes_ceiling_is_read_at_one_of_its_matrices():
    # Swin's key transpose: perm (0, 2, 3, 1) on 64 windows x 49 tokens x 3 heads x 32 keeps the first axis, so it
    # copies 64 matrices of 49 x 96, each 49 * 96 * 4 bytes read and as many written.
    keys = make_node("Transpose", [T((64, 49, 3, 32))], [T((64, 3, 32, 49))], perm=[0, 2, 3, 1])
    elements = 64 * 49 * 3 * 32
    cost = Cost(flops=0, bytes_read=4 * elements, bytes_written=4 * elements)
    assert op_classes.op_class(keys) == "transpose_batched"
    assert class_work.repeats(keys, "transpose_batched") == 64
    assert class_work.ceiling_work(keys, cost, "transpose_batched") == (0, 8 * 49 * 96)
    # A channels-last change moves the axis after the batch's single image: one matrix (the whole tensor).
    to_nhwc = make_node("Transpose", [T((1, 96, 56, 56))], [T((1, 56, 56, 96))], perm=[0, 2, 3, 1])
    assert op_classes.transposed_matrices(to_nhwc) == 1
    # Without a perm or a shape: one unit.
    assert op_classes.transposed_matrices(make_node("Transpose", [T((2, 3))], [T((3, 2))])) == 1
    assert op_classes.transposed_matrices(make_node("Transpose", [T(None)], [T(None)], perm=[1, 0])) == 1


def test_a_recurrent_ops_input_projection_is_one_product_and_its_steps_the_rest():
    # A bidirectional LSTM, 32 steps at batch 1, input 1024, hidden 256 (a text recognizer's first layer): W is
    # [2, 4*256, 1024]. Its input projection, X W^T for all steps at once, is one 32-row product per direction:
    # 2 * 32 * 2 * 1024 * 1024 = 134,217,728 FLOPs. Its steps are the rest, 32 per direction.
    lstm = make_node(
        "LSTM",
        [T((32, 1, 1024)), W((2, 1024, 1024)), W((2, 1024, 256))],
        [T((32, 2, 1, 256))],
        hidden_size=256,
        direction="bidirectional",
    )
    projection = class_work.input_projection(lstm, "lstm")
    assert projection == class_work.InputProjection(2 * 32 * 2 * 1024 * 1024, 2, 32, "gemm")
    assert class_work.repeats(lstm, "lstm") == 64
    # Per step and direction: the recurrent product (2 * 1024 * 256 FLOPs) and 26 * 256 of gate work.
    step = 2 * 1024 * 256 + 26 * 256
    cost = Cost(flops=2 * 32 * 2 * 1024 * 1024 + 64 * step, bytes_read=1e7, bytes_written=1e5)
    assert class_work.ceiling_work(lstm, cost, "lstm") == pytest.approx((step, 1e7 / 64 + 1e5 / 64))
    # DynamicQuantizeLSTM stores W as [directions, input, 4H]: the same product. A GRU over 8 steps has 8 rows
    # (gemm_short), over 1 step one (gemv); a node of another class has none.
    quantized = make_node(
        "DynamicQuantizeLSTM", [T((8, 1, 64)), W((1, 64, 512)), W((1, 128, 512))], [T(None)], domain="com.microsoft"
    )
    assert class_work.input_projection(quantized, "lstm") == class_work.InputProjection(
        2 * 8 * 64 * 512, 1, 8, "gemm_short"
    )
    gru = make_node("GRU", [T((1, 1, 64)), W((1, 384, 64)), W((1, 384, 128))], [T(None)], hidden_size=128)
    assert class_work.input_projection(gru, "gru") == class_work.InputProjection(2 * 384 * 64, 1, 1, "gemv")
    assert class_work.input_projection(gru, "gemm") is None
    unknown = make_node("LSTM", [T(None), W((1, 1024, 256)), W((1, 1024, 256))], [T(None)])
    assert class_work.input_projection(unknown, "lstm") is None


def test_a_product_by_a_weight_is_classed_by_its_rows():
    def product(rows: int):
        return make_node("MatMul", [T((rows, 768)), W((768, 768))], [T((rows, 768))])

    assert op_classes.product_rows(product(197)) == 197
    assert [op_classes.op_class(product(m)) for m in (1, 2, 15, 16, 197)] == [
        "gemv",
        "gemm_short",
        "gemm_short",
        "gemm",
        "gemm",
    ]
