"""Cost functions raise InvalidNode, naming the shapes or the attribute, where a node's shapes contradict each
other or an attribute is out of its range: the graph is wrong, which the analysis reports as bad input."""

from __future__ import annotations

import pytest

from onnxroof.costs.common import broadcast_shape, pool_output_spatial
from onnxroof.costs.matmul import einsum_cost, gemm_dims, matmul_dims
from onnxroof.ir import InvalidNode
from tests.helpers import FLOAT, INT64, T, W, cost_of, make_node


@pytest.mark.parametrize(
    "shapes,expected",
    [
        (((2, 3), (3,)), (2, 3)),
        (((4, 1, 5), (3, 1)), (4, 3, 5)),
        (((), (2, 2)), (2, 2)),
        (((0, 3), (1, 3)), (0, 3)),  # an empty dim broadcasts against 1, as numpy does
        (((2, 1), (1, 3), (5, 1, 1)), (5, 2, 3)),
    ],
)
def test_broadcast_follows_numpy_rules(shapes: tuple, expected: tuple) -> None:
    assert broadcast_shape(*shapes) == expected


def test_shapes_that_cannot_broadcast_are_named() -> None:
    with pytest.raises(InvalidNode, match=r"\[1, 4, 28, 28\] and \[1, 4, 28, 29\] cannot broadcast"):
        broadcast_shape((1, 4, 28, 28), (1, 4, 28, 29))


def test_of_three_operands_the_two_that_clash_are_named() -> None:
    """[2, 1] and [1, 3] broadcast to [2, 3]; [4, 1] clashes with the first of them, not with the second."""
    with pytest.raises(InvalidNode, match=r"\[2, 1\] and \[4, 1\] cannot broadcast"):
        broadcast_shape((2, 1), (1, 3), (4, 1))


def test_matrix_product_inner_dims_must_agree() -> None:
    assert matmul_dims((2, 8), (8, 16)).macs == 2 * 8 * 16
    with pytest.raises(InvalidNode, match=r"\[2, 8\] and \[7, 16\]: inner dims 8 and 7 differ"):
        matmul_dims((2, 8), (7, 16))
    with pytest.raises(InvalidNode, match="a scalar operand"):
        matmul_dims((), (3, 4))


def test_gemm_operands_must_be_matrices_with_one_inner_dim() -> None:
    assert gemm_dims((5, 3), (4, 3), False, True).macs == 5 * 4 * 3
    with pytest.raises(InvalidNode, match="inner dims 3 and 4 differ"):
        gemm_dims((5, 3), (4, 3), False, False)
    with pytest.raises(InvalidNode, match="not matrices"):
        gemm_dims((5,), (5, 3), False, False)


def test_a_concat_writes_the_joined_shape_where_inference_left_it_unknown() -> None:
    """[1, 4, 2, 2] and [1, 2, 2, 2] on axis 1 make [1, 6, 2, 2]: 24 floats written, 16 + 8 read."""
    node = make_node("Concat", [T((1, 4, 2, 2)), T((1, 2, 2, 2))], [T(None)], axis=1)
    cost = cost_of(node)
    assert cost.bytes_written == 1 * 6 * 2 * 2 * 4
    assert cost.bytes_read == (16 + 8) * 4


@pytest.mark.parametrize(
    "shapes,axis,message",
    [
        (((1, 4, 28, 28), (1, 2, 28, 29)), 1, r"\[1, 4, 28, 28\] and \[1, 2, 28, 29\] differ off the concatenation"),
        (((2, 3), (2, 3, 1)), 0, r"\[2, 3\] and \[2, 3, 1\] differ"),
        (((2, 3), (2, 3)), 2, "axis 2 outside the rank 2"),
    ],
)
def test_a_concat_of_mismatched_inputs_is_invalid(shapes: tuple, axis: int, message: str) -> None:
    node = make_node("Concat", [T(s) for s in shapes], [T(None)], axis=axis)
    with pytest.raises(InvalidNode, match=message):
        cost_of(node)


def test_a_concat_with_an_unknown_input_is_unknown_not_invalid() -> None:
    from onnxroof.ir import UnknownShape

    node = make_node("Concat", [T((1, 4)), T(None)], [T(None)], axis=1)
    with pytest.raises(UnknownShape):
        cost_of(node)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"kernel": (3, 3), "strides": (0, 1)}, r"strides \[0, 1\]: each must be 1 or more"),
        ({"kernel": (3, 0)}, r"kernel \[3, 0\]: each must be 1 or more"),
        ({"kernel": (3,)}, r"kernel \[3\] for an input of spatial shape \[8, 8\]: 2 values expected"),
        ({"kernel": (3, 3), "pads": (1, 1)}, r"pads \[1, 1\] .* 4 values expected"),
        ({"kernel": (11, 3)}, r"larger than its input's spatial shape \[8, 8\]"),
    ],
)
def test_a_window_that_cannot_slide_is_invalid(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidNode, match=message):
        pool_output_spatial((8, 8), **kwargs)


def test_a_window_as_large_as_the_padded_input_gives_one_output() -> None:
    """(8 + 1 + 1 - 10) / 1 + 1 = 1 along the first axis."""
    assert pool_output_spatial((8, 8), (10, 3), pads=(1, 0, 1, 0)) == (1, 6)


def test_conv_channels_must_match_the_weight() -> None:
    x, out = T((1, 6, 8, 8)), T((1, 4, 8, 8))
    grouped = make_node("Conv", [x, W((4, 3, 1, 1))], [out], group=2)
    assert cost_of(grouped).macs == 4 * 8 * 8 * 3
    with pytest.raises(InvalidNode, match=r"\[1, 6, 8, 8\] and weight of shape \[4, 4, 1, 1\] with group 1"):
        cost_of(make_node("Conv", [x, W((4, 4, 1, 1))], [out]))
    with pytest.raises(InvalidNode, match="the group does not divide the weight's 4 output channels"):
        cost_of(make_node("Conv", [x, W((4, 2, 1, 1))], [out], group=3))


def test_a_numeric_attribute_of_another_kind_is_invalid() -> None:
    node = make_node("Concat", [T((1, 4)), T((1, 2))], [T((1, 6), FLOAT)], axis=[1])
    with pytest.raises(InvalidNode, match=r"attribute axis is \[1\], not a number"):
        cost_of(node)


@pytest.mark.parametrize(
    "target,allowzero,message",
    [
        ([5, -1], 0, r"target shape \[5, -1\] for an input of shape \[2, 3, 4\] \(24 elements\): the element counts"),
        ([2, 13], 0, "the element counts differ"),
        ([-1, -1], 0, "more than one -1"),
        ([2, -3, 4], 0, "a dim below -1"),
        ([0, 12], 1, "the element counts differ"),  # with allowzero, 0 is a size of 0, not a copy of 2
    ],
)
def test_a_reshape_to_a_target_that_cannot_hold_its_input_is_invalid(
    target: list[int], allowzero: int, message: str
) -> None:
    node = make_node(
        "Reshape", [T((2, 3, 4)), T((len(target),), INT64)], [T(None)], constants={1: target}, allowzero=allowzero
    )
    with pytest.raises(InvalidNode, match=message):
        cost_of(node)


@pytest.mark.parametrize("target", [[2, -1], [0, 3, 4], [24], [4, 3, 2]])
def test_a_reshape_that_keeps_the_element_count_is_valid(target: list[int]) -> None:
    node = make_node("Reshape", [T((2, 3, 4)), T((len(target),), INT64)], [T(None)], constants={1: target})
    assert cost_of(node).kernels == 0


def test_a_transpose_perm_must_order_the_input_axes() -> None:
    assert cost_of(make_node("Transpose", [T((2, 3))], [T((3, 2))], perm=[1, 0])).bytes_written == 6 * 4
    with pytest.raises(InvalidNode, match=r"perm \[1, 1\] for an input of shape \[2, 3\]"):
        cost_of(make_node("Transpose", [T((2, 3))], [T((3, 2))], perm=[1, 1]))
    with pytest.raises(InvalidNode, match=r"perm \[2, 0\]"):
        cost_of(make_node("Transpose", [T((2, 3))], [T((3, 2))], perm=[2, 0]))


def test_split_sizes_must_add_up_to_the_axis() -> None:
    outputs = [T((2, 1)), T((2, 2))]
    assert cost_of(make_node("Split", [T((2, 3)), T((2,), INT64)], outputs, constants={1: [1, 2]}, axis=1)).kernels == 1
    with pytest.raises(InvalidNode, match=r"split sizes \[1, 1\] on axis 1 of an input of shape \[2, 3\]"):
        cost_of(make_node("Split", [T((2, 3)), T((2,), INT64)], outputs, constants={1: [1, 1]}, axis=1))
    with pytest.raises(InvalidNode, match="axis 2 outside the rank 2"):
        cost_of(make_node("Split", [T((2, 3))], outputs, axis=2))


def test_a_gather_axis_must_be_within_the_data_rank() -> None:
    with pytest.raises(InvalidNode, match=r"axis -3 outside the rank 2 of its input of shape \[12, 2\]"):
        cost_of(make_node("Gather", [T((12, 2)), T((2,), INT64)], [T((2, 2))], axis=-3))


@pytest.mark.parametrize(
    "equation,shapes,message",
    [
        ("ij,jk->ik", [(2, 3), (4, 5)], "label 'j' is 3 in one operand and 4 in another"),
        ("ij->k", [(2, 3)], "output label 'k' names no operand's dim"),
        ("ij,jk", [(2, 3)], "names 2 operands, the node has 1"),
        ("ijk->i", [(2, 3)], r"term 'ijk' does not match shape \[2, 3\]"),
    ],
)
def test_an_einsum_that_contradicts_its_operands_is_invalid(equation: str, shapes: list, message: str) -> None:
    with pytest.raises(InvalidNode, match=message):
        einsum_cost(equation, shapes)


def test_an_einsum_label_of_size_1_broadcasts() -> None:
    """'ij,jk->ik' with j of 3 and 1: j is 3, so 2*3*5 points, one MAC each."""
    assert einsum_cost("ij,jk->ik", [(2, 3), (1, 5)]) == (2 * 30, 30, (2, 5))
