"""The engine's op classes agree with the cost registry, the device schema and the calibration: every class a node
can get is one a device may hold a ceiling for, every such class is given to some node, and every one is either
calibrated or falls back to a class that is."""

from __future__ import annotations

import pytest

from onnxroof.costs import OTHER, SHAPE, NodeView, engine_class, registered_ops
from onnxroof.devices import CEILING_NAMES, OP_CLASSES, PART_CEILINGS
from onnxroof.ort.calibrate import COMPUTE_CLASSES, MEMORY_CLASSES
from onnxroof.predict import op_classes
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
    input 1 and, as QLinearConv has it, at input 3; NCHW and NHWC), products of a weight and of two activations,
    broadcasting and streaming operands, short and long planes, unknown shapes."""
    views = []
    for cin, cout, hw, k, group, out_hw in [
        (64, 64, 56, 3, 1, 56),  # conv
        (256, 64, 56, 1, 1, 56),  # conv1x1
        (512, 512, 7, 3, 1, 7),  # conv_small
        (256, 256, 14, 3, 1, 14),  # conv_mid
        (3, 64, 224, 7, 1, 112),  # conv_stem
        (64, 192, 27, 5, 1, 27),  # conv_wide
        (144, 144, 56, 3, 144, 56),  # depthwise
        (256, 256, 56, 1, 256, 56),  # batchnorm
        (136, 136, 28, 1, 4, 28),  # conv_grouped (plain layout) or a dense class (NCHWc)
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
        make_node(op_type, [T((1, 197, 768)), W((768, 768))], [T((1, 197, 768))], domain=domain),
        make_node(op_type, [T((1, 12, 197, 64)), T((1, 12, 64, 197))], [T((1, 12, 197, 197))], domain=domain),
        make_node(op_type, [T((1, 64, 28, 28)), W((64, 1, 1))], [T((1, 64, 28, 28))], domain=domain),
        make_node(op_type, [T((1, 64, 28, 28)), T((1, 64, 28, 28))], [T((1, 64, 28, 28))], domain=domain),
        make_node(op_type, [T((1, 2), INT64)], [T((1, 2), INT64)], domain=domain),
    ]
    for perm in ([0, 2, 1, 3, 4], [0, 4, 3, 1, 2]):  # a channel shuffle in NCHW and in channels-last layout
        views.append(make_node(op_type, [T((1, 4, 8, 7, 7))], [T(None)], domain=domain, perm=perm))
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
