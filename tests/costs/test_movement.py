"""Shape-only, data-creation and data-movement op costs against closed forms from the ONNX operator definitions."""

from __future__ import annotations

import pytest

from onnxroof.costs import Cost
from onnxroof.costs.movement import ZERO_COST_OPS
from tests.helpers import BOOL, FLOAT16, INT64, T, W, cost_of, make_node


@pytest.mark.parametrize("op", ZERO_COST_OPS)
def test_shape_only_ops_cost_nothing(op):
    cost = cost_of(make_node(op, [T([2, 3, 4]), T([2], INT64)], [T([6, 4])]))
    assert cost == Cost()


def test_shape_only_op_of_a_weight_costs_nothing():
    assert cost_of(make_node("Reshape", [W([64, 64]), W([1], INT64)], [W([4096])])) == Cost()


def test_constant_is_a_weight_and_free_at_runtime():
    assert cost_of(make_node("Constant", [], [W([10, 10])])) == Cost()


def test_constant_of_shape_of_a_constant_shape_is_folded():
    assert cost_of(make_node("ConstantOfShape", [W([2], INT64)], [W([4, 5])])) == Cost()


def test_constant_of_shape_at_runtime_writes_its_output():
    cost = cost_of(make_node("ConstantOfShape", [T([2], INT64)], [T([4, 5])]))
    # reads the int64 shape [2]: 2*8 = 16 bytes; writes 4*5 float32 = 80 bytes
    assert (cost.flops, cost.bytes_read, cost.bytes_written, cost.kernels) == (0, 16, 80, 1)


def test_eyelike_uses_only_its_input_shape():
    cost = cost_of(make_node("EyeLike", [T([3, 3])], [T([3, 3])]))
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (0, 0, 3 * 3 * 4)


def test_random_normal_writes_its_output():
    cost = cost_of(make_node("RandomNormal", [], [T([2, 5])], shape=[2, 5]))
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (0, 0, 2 * 5 * 4)


def test_range_length_from_constant_inputs_when_output_shape_unknown():
    node = make_node(
        "Range", [T([], INT64), T([], INT64), T([], INT64)], [T(None, INT64)], constants={0: 0, 1: 10, 2: 3}
    )
    cost = cost_of(node)
    # ceil((10 - 0) / 3) = 4 int64 elements written; three int64 scalars read
    assert cost.bytes_written == 4 * 8
    assert cost.bytes_read == 3 * 8


def test_cast_reads_one_dtype_and_writes_another():
    cost = cost_of(make_node("Cast", [T([2, 3, 4])], [T([2, 3, 4], FLOAT16)], to=FLOAT16))
    # a conversion: 24 float32 read (96 B), 24 float16 written (48 B), no arithmetic counted
    assert (cost.flops, cost.bytes_read, cost.bytes_written, cost.kernels) == (0, 24 * 4, 24 * 2, 1)


def test_cast_of_an_activation_to_half_moves_its_bytes_at_both_dtypes():
    cost = cost_of(make_node("Cast", [T([1, 64, 56, 56])], [T([1, 64, 56, 56], FLOAT16)], to=FLOAT16))
    # 1*64*56*56 = 200704 elements: 200704 * 4 B read + 200704 * 2 B written = 1204224 B
    assert (cost.flops, cost.bytes) == (0, 1204224)


def test_castlike_reads_only_the_data_input():
    cost = cost_of(make_node("CastLike", [T([10]), T([1], FLOAT16)], [T([10], FLOAT16)]))
    assert (cost.bytes_read, cost.bytes_written) == (10 * 4, 10 * 2)


def test_transpose_reads_and_writes_every_element():
    cost = cost_of(make_node("Transpose", [T([2, 3, 4])], [T([4, 3, 2])], perm=[2, 1, 0]))
    assert (cost.flops, cost.bytes_read, cost.bytes_written, cost.kernels) == (0, 96, 96, 1)


def test_concat_reads_all_inputs():
    cost = cost_of(make_node("Concat", [T([2, 3]), T([2, 5])], [T([2, 8])], axis=1))
    assert (cost.bytes_read, cost.bytes_written) == ((6 + 10) * 4, 16 * 4)


def test_split_writes_every_output():
    cost = cost_of(make_node("Split", [T([4, 6]), T([2], INT64)], [T([4, 3]), T([4, 3])], axis=1))
    # input 24*4 + split sizes 2*8; two outputs of 12*4
    assert (cost.bytes_read, cost.bytes_written) == (24 * 4 + 2 * 8, 2 * 12 * 4)


def test_slice_reads_only_the_elements_it_keeps():
    inputs = [T([10, 20]), T([1], INT64), T([1], INT64), T([1], INT64)]
    cost = cost_of(make_node("Slice", inputs, [T([10, 5])]))
    # 10*5 float32 kept (not the 200 of the input) + starts, ends, axes at 8 bytes each
    assert cost.bytes_read == 10 * 5 * 4 + 3 * 8 == 224
    assert cost.bytes_written == 10 * 5 * 4


def test_gather_from_an_embedding_table():
    cost = cost_of(make_node("Gather", [W([1000, 64]), T([8], INT64)], [T([8, 64])], axis=0))
    assert cost.params == 1000 * 64 == 64000  # the whole table is a parameter
    assert cost.bytes_read == 8 * 8 + 8 * 64 * 4 == 2112  # int64 indices + the 8 rows gathered
    assert cost.bytes_written == 8 * 64 * 4
    assert (cost.flops, cost.kernels) == (0, 1)


def test_gather_elements_and_nd_read_output_sized_data():
    elements = cost_of(make_node("GatherElements", [T([4, 5]), T([4, 2], INT64)], [T([4, 2])], axis=1))
    assert elements.bytes_read == 8 * 8 + 8 * 4
    # GatherND: indices [2, 2] pick two rows of 4 from a [2, 3, 4] tensor
    nd = cost_of(make_node("GatherND", [T([2, 3, 4]), T([2, 2], INT64)], [T([2, 4])]))
    assert nd.bytes_read == 4 * 8 + 2 * 4 * 4
    assert nd.bytes_written == 2 * 4 * 4


def test_pad_reads_input_writes_padded_output():
    cost = cost_of(make_node("Pad", [T([1, 3, 4, 4]), T([8], INT64)], [T([1, 3, 6, 6])], mode="reflect"))
    assert (cost.bytes_read, cost.bytes_written) == (48 * 4 + 8 * 8, 108 * 4)


def test_scatter_nd_reads_data_indices_and_updates():
    cost = cost_of(make_node("ScatterND", [T([8]), T([4, 1], INT64), T([4])], [T([8])]))
    assert (cost.bytes_read, cost.bytes_written) == (8 * 4 + 4 * 8 + 4 * 4, 8 * 4)


def test_expand_writes_the_broadcast_output():
    cost = cost_of(make_node("Expand", [T([3, 1]), T([2], INT64)], [T([3, 4])]))
    assert (cost.bytes_read, cost.bytes_written) == (3 * 4 + 2 * 8, 12 * 4)


def test_nchwc_reorder_is_bytes_only():
    node = make_node("ReorderInput", [T([1, 16, 8, 8])], [T([1, 16, 8, 8])], domain="com.microsoft.nchwc")
    cost = cost_of(node)
    assert (cost.flops, cost.bytes_read, cost.bytes_written, cost.kernels) == (0, 4096, 4096, 1)


def resize(mode: str, in_shape, out_shape, op: str = "Resize"):
    inputs = [T(in_shape), None, T([len(in_shape)])] if op == "Resize" else [T(in_shape), T([len(in_shape)])]
    return cost_of(make_node(op, inputs, [T(out_shape)], mode=mode))


def test_resize_nearest_is_a_copy():
    cost = resize("nearest", [1, 3, 4, 4], [1, 3, 8, 8])
    assert cost.flops == 0
    assert cost.bytes_read == 1 * 3 * 4 * 4 * 4 + 4 * 4  # X + scales
    assert cost.bytes_written == 1 * 3 * 8 * 8 * 4


def test_resize_linear_two_axes_is_three_lerps_per_output():
    # bilinear: 2^2 - 1 = 3 lerps of 3 FLOPs (sub, mul, add) per output element; 192 outputs
    assert resize("linear", [1, 3, 4, 4], [1, 3, 8, 8]).flops == 1 * 3 * 8 * 8 * (2**2 - 1) * 3 == 1728


def test_resize_linear_three_axes():
    # trilinear: 2^3 - 1 = 7 lerps per output element
    assert resize("linear", [1, 1, 2, 2, 2], [1, 1, 4, 4, 4]).flops == 64 * 7 * 3


def test_resize_cubic_taps():
    # bicubic: 4^2 = 16 taps at 2 FLOPs each per output element
    assert resize("cubic", [1, 3, 4, 4], [1, 3, 8, 8]).flops == 192 * 16 * 2 == 6144


def test_upsample_bilinear_mode():
    assert resize("bilinear", [1, 3, 4, 4], [1, 3, 8, 8], op="Upsample").flops == 192 * 9


def test_where_is_one_select_per_element():
    cost = cost_of(make_node("Where", [T([2, 3], BOOL), T([2, 3]), T([1])], [T([2, 3])]))
    assert cost.flops == 6
    assert (cost.bytes_read, cost.bytes_written) == (6 * 1 + 6 * 4 + 1 * 4, 6 * 4)


def test_topk_comparisons_with_constant_k():
    node = make_node("TopK", [T([4, 100]), T([1], INT64)], [T([4, 5]), T([4, 5], INT64)], constants={1: [5]})
    cost = cost_of(node)
    # 4 rows of n = 100; heap of k = 5: ceil(log2 5) = 3 comparisons per element
    assert cost.flops == 4 * 100 * 3 == 1200
    assert cost.bytes_read == 4 * 100 * 4 + 8
    # 4*5 float32 values + 4*5 int64 indices
    assert cost.bytes_written == 4 * 5 * (4 + 8) == 240


def test_topk_k_from_output_shape_and_along_an_axis():
    node = make_node("TopK", [T([100, 4]), T([1], INT64)], [T([16, 4]), T([16, 4], INT64)], axis=0)
    # 4 columns of n = 100, k = 16 from the output shape: ceil(log2 16) = 4
    assert cost_of(node).flops == 4 * 100 * 4


def test_topk_k1_is_a_linear_scan():
    node = make_node("TopK", [T([4, 100]), T([1], INT64)], [T([4, 1]), T([4, 1], INT64)], constants={1: 1})
    assert cost_of(node).flops == 4 * 100


def test_nonzero_counts_what_is_known():
    cost = cost_of(make_node("NonZero", [T([3, 4])], [T(None, INT64)]))
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (12, 48, 0)
    assert "data-dependent" in cost.note
    known = cost_of(make_node("NonZero", [T([3, 4])], [T([2, 5], INT64)]))
    assert (known.bytes_written, known.note) == (2 * 5 * 8, "")


def test_cumsum_is_one_add_per_element():
    cost = cost_of(make_node("CumSum", [T([2, 50]), T([], INT64)], [T([2, 50])]))
    assert cost.flops == 100
    assert (cost.bytes_read, cost.bytes_written) == (400 + 8, 400)


def test_unique_sort_comparisons():
    cost = cost_of(make_node("Unique", [T([16])], [T(None), T(None, INT64)]))
    # sort of 16: ceil(log2 16) = 4 comparisons per element + 1 to mark duplicates
    assert cost.flops == 16 * (4 + 1)
    assert cost.bytes_read == 16 * 4
    assert "data-dependent" in cost.note
