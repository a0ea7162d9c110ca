"""Vision and detection ops (GridSample, AffineGrid, RoiAlign, MaxRoiPool, DeformConv, Col2Im, CenterCropPad,
NonMaxSuppression) against closed forms worked by hand from the op definitions and onnx's reference code.

Per-element constants used below (derived in onnxroof/costs/vision.py):
- GridSample per grid point and axis: denormalize 2 + padding (zeros 0, border 2, reflection 6) + weights
  (nearest 1, linear 3, cubic 27); per output element 3 * (2^r - 1) linear, 7 * (4^r - 1) / 3 cubic.
- RoiAlign: 14 per ROI (+2 output_half_pixel, +2 adaptive), 16 per sampling point, 8 per sample and channel,
  +1 per output in mode avg.
- MaxRoiPool: 10 per ROI, 8 per bin, 1 comparison per bin element.
- DeformConv per sampling point 4r + 2^r (r - 1), per sampled value 2^r + 2^r - 1 (+1 with mask).
- NonMaxSuppression IoU: 27 (corners), 35 (centers).
"""

from __future__ import annotations

from functools import cache

import pytest

from onnxroof.costs.vision import nms_pairs
from onnxroof.ir import UnknownShape
from tests.helpers import INT64, T, W, cost_of, make_node


def assert_cost(cost, flops, read, written, *, macs=0, params=0, kernels=1):
    assert (cost.flops, cost.macs, cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (
        flops,
        macs,
        read,
        written,
        params,
        kernels,
    )


# ---------------------------------------------------------------------------------------------------------
# GridSample. X [2, 3, 8, 8] (64 per plane, 6 planes), grid [2, 4, 5, 2]: 20 points per batch item, 40 points,
# r = 2, Y [2, 3, 4, 5] = 120 outputs. Grid read: 80 floats = 320 B; Y written: 480 B.


def grid_sample(out_known=True, x_shape=(2, 3, 8, 8), grid_shape=(2, 4, 5, 2), **attrs):
    out_shape = (*x_shape[:2], *grid_shape[1:-1])
    return cost_of(make_node("GridSample", [T(x_shape), T(grid_shape)], [T(out_shape if out_known else None)], **attrs))


@pytest.mark.parametrize("out_known", [True, False])
def test_grid_sample_bilinear_zeros(out_known):
    cost = grid_sample(out_known)
    # points: 40 * 2 axes * (2 + 0 + 3) = 400; outputs: 120 * 3 * (2^2 - 1) = 1080
    # X read: per plane min(64, 20 points * 4 taps = 80) = 64, 6 planes = 384 floats = 1536 B; + grid 320 B
    assert_cost(cost, 400 + 1080, 1536 + 320, 480)


def test_grid_sample_align_corners_changes_nothing():
    assert grid_sample(align_corners=1).flops == grid_sample(align_corners=0).flops == 1480


@pytest.mark.parametrize("padding, per_axis", [("zeros", 5), ("border", 7), ("reflection", 11)])
def test_grid_sample_padding_modes(padding, per_axis):
    # linear weights 3 + denormalize 2 + padding 0 / 2 (clamp) / 6 (reflect) per point and axis
    assert grid_sample(padding_mode=padding).flops == 40 * 2 * per_axis + 1080


def test_grid_sample_nearest():
    cost = grid_sample(mode="nearest")
    # points: 40 * 2 * (2 + 0 + 1 round) = 240; outputs copy a pixel: 0
    # X read: per plane min(64, 20 * 1 tap) = 20, 6 planes = 120 floats = 480 B; + grid 320 B
    assert_cost(cost, 240, 480 + 320, 480)


@pytest.mark.parametrize("mode", ["cubic", "bicubic"])
def test_grid_sample_bicubic(mode):
    cost = grid_sample(mode=mode)
    # points: 40 * 2 * (2 + 0 + 27) = 2320; outputs: 120 * 7 * (4 + 1) nested 1-D cubics = 4200
    # X read: per plane min(64, 20 * 16 taps) = 64 -> 1536 B; + grid 320 B
    assert_cost(cost, 2320 + 4200, 1536 + 320, 480)


def test_grid_sample_opset16_bilinear_name():
    assert grid_sample(mode="bilinear").flops == grid_sample(mode="linear").flops == 1480


def test_grid_sample_volumetric():
    # X [1, 2, 4, 4, 4] (64 per plane), grid [1, 2, 3, 4, 3]: 24 points, r = 3, Y [1, 2, 2, 3, 4] = 48 outputs
    linear = grid_sample(x_shape=(1, 2, 4, 4, 4), grid_shape=(1, 2, 3, 4, 3))
    # points: 24 * 3 * 5 = 360; outputs: 48 * 3 * (2^3 - 1) = 1008
    # X read: per plane min(64, 24 * 8) = 64, 2 planes = 128 floats = 512 B; grid 72 floats = 288 B; Y 192 B
    assert_cost(linear, 360 + 1008, 512 + 288, 192)
    cubic = grid_sample(x_shape=(1, 2, 4, 4, 4), grid_shape=(1, 2, 3, 4, 3), mode="cubic")
    # points: 24 * 3 * 29 = 2088; outputs: 48 * 7 * (16 + 4 + 1) = 48 * 147 = 7056
    assert cubic.flops == 2088 + 7056


def test_grid_sample_reads_only_the_sampled_pixels_of_a_large_input():
    # X [1, 1, 100, 100], grid [1, 3, 3, 2]: 9 points * 4 taps = 36 of 10000 pixels read = 144 B; grid 72 B
    cost = grid_sample(x_shape=(1, 1, 100, 100), grid_shape=(1, 3, 3, 2))
    # points: 9 * 2 * 5 = 90; outputs: 9 * 9 = 81
    assert_cost(cost, 171, 144 + 72, 36)


def test_grid_sample_needs_the_input_shape():
    node = make_node("GridSample", [T(None), T([1, 4, 5, 2])], [T([1, 3, 4, 5])])
    with pytest.raises(UnknownShape):
        cost_of(node)


# ---------------------------------------------------------------------------------------------------------
# AffineGrid.


@pytest.mark.parametrize("out_known", [True, False])
def test_affine_grid_2d(out_known):
    # theta [3, 2, 3], size = (3, 1, 4, 7) -> grid [3, 4, 7, 2], P = 28
    node = make_node(
        "AffineGrid",
        [T([3, 2, 3]), T([4], INT64)],
        [T([3, 4, 7, 2] if out_known else None)],
        constants={1: [3, 1, 4, 7]},
    )
    # MACs = N * P * r * (r + 1) = 3 * 28 * 2 * 3 = 504; base grid 2 * (4 + 7) = 22
    # read theta 18 floats = 72 B + size 4 int64 = 32 B; written 3 * 28 * 2 floats = 672 B
    assert_cost(cost_of(node), 2 * 504 + 22, 72 + 32, 672, macs=504)


def test_affine_grid_3d_from_the_output_shape():
    # theta [1, 3, 4], size not a constant but the grid [1, 2, 3, 4, 3] known: P = 24
    node = make_node("AffineGrid", [T([1, 3, 4]), T([5], INT64)], [T([1, 2, 3, 4, 3])])
    # MACs = 1 * 24 * 3 * 4 = 288; base grid 2 * (2 + 3 + 4) = 18
    # read 12 floats = 48 B + 5 int64 = 40 B; written 72 floats = 288 B
    assert_cost(cost_of(node), 2 * 288 + 18, 48 + 40, 288, macs=288)


def test_affine_grid_needs_size_or_output():
    node = make_node("AffineGrid", [T([1, 2, 3]), T([4], INT64)], [T(None)])
    with pytest.raises(UnknownShape):
        cost_of(node)


# ---------------------------------------------------------------------------------------------------------
# RoiAlign. X [1, 4, 16, 16], 3 ROIs, 2 x 3 bins: 18 bins, 72 outputs. rois 12 floats = 48 B, batch_indices
# 3 int64 = 24 B, Y 72 floats = 288 B.


def roi_align(x_shape=(1, 4, 16, 16), **attrs):
    attrs = {"output_height": 2, "output_width": 3, **attrs}
    out = T([3, x_shape[1], attrs["output_height"], attrs["output_width"]])
    return cost_of(make_node("RoiAlign", [T(x_shape), T([3, 4]), T([3], INT64)], [out], **attrs))


def test_roi_align_fixed_sampling_avg():
    cost = roi_align(sampling_ratio=2)
    # S = 4 samples per bin; setup 3 * 14 = 42; points 18 * 4 * 16 = 1152; per output 4 * 8 + 1 = 33, * 72 = 2376
    # X read: per channel min(256, 18 bins * 4 samples * 4 corners = 288) = 256, 4 channels = 4096 B
    assert_cost(cost, 42 + 1152 + 2376, 4096 + 48 + 24, 288)
    assert cost.note == ""


def test_roi_align_output_half_pixel_clamps_the_extents():
    # two max per ROI: 3 * 2 = 6 more
    cost = roi_align(sampling_ratio=2, coordinate_transformation_mode="output_half_pixel")
    assert cost.flops == 3570 + 6


def test_roi_align_max_mode_has_no_divide():
    # per output 4 * 8 = 32, * 72 = 2304
    assert roi_align(sampling_ratio=2, mode="max").flops == 42 + 1152 + 2304


def test_roi_align_reads_only_the_sampled_pixels():
    # X [1, 4, 64, 64]: per channel min(4096, 288) = 288, 4 channels = 1152 floats = 4608 B; FLOPs as at 16x16
    cost = roi_align(x_shape=(1, 4, 64, 64), sampling_ratio=2)
    assert_cost(cost, 3570, 4608 + 48 + 24, 288)


def test_roi_align_adaptive_sampling_counts_a_whole_map_roi():
    cost = roi_align(sampling_ratio=0)
    # grid ceil(16 / 2) x ceil(16 / 3) = 8 x 6 = 48 samples; setup 3 * (14 + 2) = 48
    # points 18 * 48 * 16 = 13824; per output 48 * 8 + 1 = 385, * 72 = 27720
    # X read: per channel min(256, 18 * 48 * 4) = 256 -> 4096 B
    assert_cost(cost, 48 + 13824 + 27720, 4096 + 48 + 24, 288)
    assert "8x6" in cost.note and "sampling_ratio=0" in cost.note


# ---------------------------------------------------------------------------------------------------------
# MaxRoiPool.


def test_max_roi_pool():
    # X [2, 3, 10, 12], 4 ROIs, pooled 2 x 5: window ceil(10/2) x ceil(12/5) = 5 x 3 = 15, bins 4 * 10 = 40
    node = make_node("MaxRoiPool", [T([2, 3, 10, 12]), T([4, 5])], [T([4, 3, 2, 5])], pooled_shape=[2, 5])
    cost = cost_of(node)
    # 4 * 10 + 40 * 8 + 3 * 40 * 15 = 40 + 320 + 1800
    # X read: per channel min(2 * 120 = 240, 40 * 15 = 600) = 240, 3 channels = 720 floats = 2880 B; rois 80 B
    # written 120 floats = 480 B
    assert_cost(cost, 2160, 2880 + 80, 480)
    assert "5x3" in cost.note


def test_max_roi_pool_one_roi_on_a_large_batch_reads_its_bins_only():
    # X [8, 3, 10, 12], 1 ROI: bins 10, per channel min(960, 10 * 15 = 150) = 150, 3 channels = 1800 B; rois 20 B
    node = make_node("MaxRoiPool", [T([8, 3, 10, 12]), T([1, 5])], [T(None)], pooled_shape=[2, 5])
    # 10 + 10 * 8 + 3 * 10 * 15 = 540; Y [1, 3, 2, 5] = 30 floats = 120 B
    assert_cost(cost_of(node), 540, 1800 + 20, 120)


def test_max_roi_pool_needs_pooled_shape():
    node = make_node("MaxRoiPool", [T([1, 3, 10, 12]), T([1, 5])], [T([1, 3, 2, 5])])
    with pytest.raises(UnknownShape):
        cost_of(node)


# ---------------------------------------------------------------------------------------------------------
# DeformConv. X [2, 4, 8, 8], W [6, 4, 3, 3], offset [2, 18, 6, 6] -> Y [2, 6, 6, 6] = 432 outputs; K = 9,
# P = 36, r = 2.


@pytest.mark.parametrize("out_known", [True, False])
def test_deform_conv_plain(out_known):
    node = make_node(
        "DeformConv",
        [T([2, 4, 8, 8]), W([6, 4, 3, 3]), T([2, 18, 6, 6])],
        [T([2, 6, 6, 6] if out_known else None)],
        kernel_shape=[3, 3],
    )
    # MACs = 432 * 4 * 9 = 15552
    # points N * G * K * P = 2 * 1 * 9 * 36 = 648, * (4 * 2 + 4) = 7776
    # samples N * C * K * P = 2 * 4 * 9 * 36 = 2592, * (4 + 3) = 18144
    # read X 512 floats + W 216 + offset 1296 = 2024 floats = 8096 B; written 432 floats = 1728 B
    assert_cost(cost_of(node), 2 * 15552 + 7776 + 18144, 8096, 1728, macs=15552, params=216)


def test_deform_conv_bias_and_mask():
    node = make_node(
        "DeformConv", [T([2, 4, 8, 8]), W([6, 4, 3, 3]), T([2, 18, 6, 6]), W([6]), T([2, 9, 6, 6])], [T([2, 6, 6, 6])]
    )
    # + one bias add per output (432) + one mask multiply per sample (2592)
    # read + B 24 B + mask 648 floats = 2592 B
    assert_cost(cost_of(node), 57024 + 432 + 2592, 8096 + 24 + 2592, 1728, macs=15552, params=222)


def test_deform_conv_groups_and_offset_groups():
    # group 2: W [6, 2, 3, 3]; offset_group 2: offset [2, 36, 6, 6]
    node = make_node(
        "DeformConv", [T([2, 4, 8, 8]), W([6, 2, 3, 3]), T([2, 36, 6, 6])], [T([2, 6, 6, 6])], group=2, offset_group=2
    )
    # MACs = 432 * 2 * 9 = 7776; points 2 * 2 * 9 * 36 = 1296, * 12 = 15552; samples 2592 * 7 = 18144
    # read X 2048 B + W 432 B + offset 2592 floats = 10368 B
    assert_cost(cost_of(node), 2 * 7776 + 15552 + 18144, 2048 + 432 + 10368, 1728, macs=7776, params=108)


def test_deform_conv_1d_and_3d():
    # 1-D: X [1, 2, 10], W [3, 2, 3], offset [1, 3, 8] -> Y [1, 3, 8]; K = 3, P = 8, r = 1
    one = make_node("DeformConv", [T([1, 2, 10]), W([3, 2, 3]), T([1, 3, 8])], [T([1, 3, 8])])
    # MACs 24 * 6 = 144; points 3 * 8 = 24, * (4 + 0) = 96; samples 2 * 3 * 8 = 48, * (2 + 1) = 144
    assert cost_of(one).flops == 2 * 144 + 96 + 144
    # 3-D: X [1, 1, 4, 4, 4], W [1, 1, 2, 2, 2], offset [1, 24, 3, 3, 3] -> Y [1, 1, 3, 3, 3]; K = 8, P = 27
    three = make_node("DeformConv", [T([1, 1, 4, 4, 4]), W([1, 1, 2, 2, 2]), T([1, 24, 3, 3, 3])], [T([1, 1, 3, 3, 3])])
    # MACs 27 * 8 = 216; points 8 * 27 = 216, * (3 * 4 + 8 * 2) = 6048; samples 216 * (8 + 7) = 3240
    assert cost_of(three).flops == 2 * 216 + 6048 + 3240


# ---------------------------------------------------------------------------------------------------------
# Col2Im. image_shape and block_shape are 2 int64 each: 32 B read with them.


def col2im(in_shape, image, block, out_shape, **attrs):
    node = make_node(
        "Col2Im",
        [T(in_shape), T([len(image)], INT64), T([len(block)], INT64)],
        [T(out_shape)],
        constants={1: image, 2: block},
        **attrs,
    )
    return cost_of(node)


@pytest.mark.parametrize("out_known", [True, False])
def test_col2im_without_padding_adds_every_element(out_known):
    # image 5 x 6, block 2 x 2: L = 4 * 5 = 20; input [2, 3 * 4, 20] = 480 elements, all land in the image
    cost = col2im([2, 12, 20], [5, 6], [2, 2], [2, 3, 5, 6] if out_known else None)
    # read 480 floats = 1920 B + 32 B; written 2 * 3 * 30 floats = 720 B
    assert_cost(cost, 480, 1920 + 32, 720)


def test_col2im_padding_drops_the_blocks_outside():
    # image 4 x 4, block 3 x 3, pads 1: L = 4 per axis; per axis tap 0 lands at l - 1 (l = 1..3 inside: 3),
    # tap 1 at l (4), tap 2 at l + 1 (l = 0..2: 3) = 10; per plane 10 * 10 = 100 of 144; C = 2 -> 200
    cost = col2im([1, 18, 16], [4, 4], [3, 3], [1, 2, 4, 4], pads=[1, 1, 1, 1])
    assert_cost(cost, 200, 200 * 4 + 32, 128)


def test_col2im_strides_with_padding():
    # axis 0: size 5, block 2, stride 2, pads 1 + 1: L = (5 + 2 - 2) // 2 + 1 = 3; tap 0 at 2l - 1 = -1, 1, 3 (2
    # inside), tap 1 at 2l = 0, 2, 4 (3) -> 5. axis 1: size 4, block 3, stride 1: L = 2, all 6 inside.
    # input [1, 6, 6] = 36 elements, 5 * 6 = 30 inside
    cost = col2im([1, 6, 6], [5, 4], [2, 3], [1, 1, 5, 4], strides=[2, 1], pads=[1, 0, 1, 0])
    assert_cost(cost, 30, 30 * 4 + 32, 80)


def test_col2im_dilations_with_padding():
    # image 4 x 4, block 2 x 2, dilation 2, pads 1: L = (4 + 2 - 3) + 1 = 4; tap 0 at l - 1 (3 inside), tap 1 at
    # l + 1 (3 inside) = 6 per axis, 36 of 64 per plane
    cost = col2im([1, 4, 16], [4, 4], [2, 2], [1, 1, 4, 4], dilations=[2, 2], pads=[1, 1, 1, 1])
    assert_cost(cost, 36, 36 * 4 + 32, 64)


def test_col2im_runtime_block_shape():
    # no padding: every element lands inside, so the runtime block_shape does not matter (input [1, 5, 5] = 25)
    node = make_node("Col2Im", [T([1, 5, 5]), T([2], INT64), T([2], INT64)], [T([1, 1, 5, 5])])
    assert_cost(cost_of(node), 25, 100 + 32, 100)
    padded = make_node("Col2Im", [T([1, 5, 15]), T([2], INT64), T([2], INT64)], [T([1, 1, 5, 5])], pads=[0, 1, 0, 1])
    with pytest.raises(UnknownShape):
        cost_of(padded)


# ---------------------------------------------------------------------------------------------------------
# CenterCropPad.


def test_center_crop_pad_reads_the_kept_window():
    # [20, 8, 3] -> [10, 10, 3]: axis 0 cropped to 10, axis 1 padded to 10; kept 10 * 8 * 3 = 240 floats = 960 B
    # + shape 3 int64 = 24 B; written 300 floats = 1200 B
    node = make_node("CenterCropPad", [T([20, 8, 3]), T([3], INT64)], [T([10, 10, 3])])
    assert_cost(cost_of(node), 0, 960 + 24, 1200)


@pytest.mark.parametrize("axes", [[1, 2], [-2, -1]])
def test_center_crop_pad_from_constant_shape_and_axes(axes):
    # [3, 20, 8], axes (1, 2) -> (10, 12): [3, 10, 12]; kept 3 * 10 * 8 = 240 floats = 960 B + 16 B; written
    # 360 floats = 1440 B
    node = make_node("CenterCropPad", [T([3, 20, 8]), T([2], INT64)], [T(None)], constants={1: [10, 12]}, axes=axes)
    assert_cost(cost_of(node), 0, 960 + 16, 1440)


def test_center_crop_pad_needs_shape_or_output():
    node = make_node("CenterCropPad", [T([3, 20, 8]), T([3], INT64)], [T(None)])
    with pytest.raises(UnknownShape):
        cost_of(node)


# ---------------------------------------------------------------------------------------------------------
# NonMaxSuppression. boxes [2, 50, 4] (1600 B), scores [2, 3, 50] (1200 B), M int64 [1] (8 B), iou and score
# thresholds float [1] (4 B each): 6 (batch, class) pairs of S = 50 boxes; sort 50 * ceil(log2 50) = 300.


@cache
def most_iou_tests(remaining: int, kept: int, limit: int) -> int:
    """Brute force over every keep/suppress outcome: the most IoU tests greedy NMS can make."""
    if remaining == 0 or kept >= limit:
        return 0
    keep = kept + most_iou_tests(remaining - 1, kept + 1, limit)  # tested against all kept, then kept
    suppress = kept + most_iou_tests(remaining - 1, kept, limit) if kept else 0  # suppressed at the last test
    return max(keep, suppress)


def test_nms_pairs_closed_form():
    # S = 4: M = 2 -> kept 1 (0 tests), 3 suppressed against it (3); M = 3 -> 0 + 1, then 2 * 2 = 5; M >= 4 -> 6
    assert [nms_pairs(4, m) for m in (0, 1, 2, 3, 4, 9, None)] == [0, 0, 3, 5, 6, 6, 6]
    for s in range(1, 9):
        for m in range(s + 2):
            assert nms_pairs(s, m) == most_iou_tests(s, 0, m)


def nms(*, m=None, score_threshold=True, out=None, **attrs):
    inputs = [T([2, 50, 4]), T([2, 3, 50]), T([1], INT64), T([1]), T([1]) if score_threshold else None]
    constants = {} if m is None else {2: [m]}
    return cost_of(make_node("NonMaxSuppression", inputs, [T(out, INT64)], constants=constants, **attrs))


def test_nms_runtime_limit_counts_every_pair():
    cost = nms()
    # per (batch, class): 50 threshold + 300 sort + 50 * 49 / 2 = 1225 IoU tests * 27; * 6
    # written at the bound 2 * 3 * 50 = 300 rows * 3 * 8 B
    assert_cost(cost, 6 * (50 + 300 + 1225 * 27), 1600 + 1200 + 8 + 4 + 4, 300 * 24)
    assert "unbounded" in cost.note and "300 rows" in cost.note


def test_nms_constant_limit_bounds_the_tests_and_the_output():
    cost = nms(m=10)
    # 9 kept (0 + ... + 8 = 36 tests), 41 more each tested against 9 (369): 405; rows 6 * 10 = 60
    assert_cost(cost, 6 * (50 + 300 + 405 * 27), 2816, 60 * 24)
    assert "M=10" in cost.note
    # a limit of at least S is every pair again, rows 6 * 50
    assert nms(m=100).flops == nms().flops
    assert nms(m=100).bytes_written == 300 * 24


def test_nms_center_point_boxes():
    assert nms(m=10, center_point_box=1).flops == 6 * (50 + 300 + 405 * 35)


def test_nms_without_score_threshold():
    # no threshold comparisons, 4 B less read
    assert_cost(nms(m=10, score_threshold=False), 6 * (300 + 405 * 27), 2812, 1440)


def test_nms_omitted_limit_selects_nothing():
    node = make_node("NonMaxSuppression", [T([2, 50, 4]), T([2, 3, 50])], [T(None, INT64)])
    # max_output_boxes_per_class defaults to 0: no IoU tests, no rows; the candidates are still sorted
    assert_cost(cost_of(node), 6 * 300, 2800, 0)


def test_nms_known_output_shape_is_written_as_is():
    cost = nms(m=10, out=[7, 3])
    assert cost.bytes_written == 7 * 3 * 8
    assert "rows" not in cost.note
