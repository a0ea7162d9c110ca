"""Pooling cost functions: windowed and global pools, output-shape arithmetic, unpooling, contrib layouts."""

from __future__ import annotations

import pytest

from onnxroof.costs.common import pool_output_spatial
from onnxroof.ir import UnknownShape
from tests.helpers import INT64, UINT8, T, W, cost_of, make_node

NCHWC = "com.microsoft.nchwc"
MS = "com.microsoft"

# ResNet stem pool: [1,64,112,112] -> k3 s2 p1 -> [1,64,56,56]
STEM = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
N_IN = 1 * 64 * 112 * 112  # 802816
N_OUT = 1 * 64 * 56 * 56  # 200704


# ---------------------------------------------------------------------------------------------------------
# Output shape arithmetic.


def test_output_spatial_explicit_pads() -> None:
    # (112 + 1 + 1 - 3) / 2 + 1 = 56.5 -> floor 56
    assert pool_output_spatial([112, 112], [3, 3], strides=[2, 2], pads=[1, 1, 1, 1]) == (56, 56)
    # no pads, stride 1: 7 - 3 + 1 = 5
    assert pool_output_spatial([7], [3]) == (5,)


def test_output_spatial_ceil_mode() -> None:
    # 6, k3 s2 p1: (6 + 2 - 3) / 2 + 1 = 3.5 -> ceil 4; the last window starts at 3*2 = 6 < 6 + 1: kept
    assert pool_output_spatial([6], [3], strides=[2], pads=[1, 1], ceil_mode=1) == (4,)
    assert pool_output_spatial([6], [3], strides=[2], pads=[1, 1], ceil_mode=0) == (3,)
    # 5, k2 s2 p1: (5 + 2 - 2) / 2 + 1 = 3.5 -> ceil 4; the last window would start at 3*2 = 6 >= 5 + 1: dropped
    assert pool_output_spatial([5], [2], strides=[2], pads=[1, 1], ceil_mode=1) == (3,)
    # 5, k2 s2 no pads: (5 - 2) / 2 + 1 = 2.5 -> ceil 3 (start 4 < 5: kept)
    assert pool_output_spatial([5], [2], strides=[2], ceil_mode=1) == (3,)


def test_output_spatial_auto_pad_and_dilations() -> None:
    # SAME_UPPER / SAME_LOWER: ceil(7 / 2) = 4
    assert pool_output_spatial([7], [3], strides=[2], auto_pad="SAME_UPPER") == (4,)
    assert pool_output_spatial([7], [3], strides=[2], auto_pad="SAME_LOWER") == (4,)
    # VALID: ceil((7 - 3 + 1) / 2) = ceil(2.5) = 3
    assert pool_output_spatial([7], [3], strides=[2], auto_pad="VALID") == (3,)
    # VALID, dilation 2: extent (3 - 1) * 2 + 1 = 5; ceil((7 - 5 + 1) / 2) = 2
    assert pool_output_spatial([7], [3], strides=[2], dilations=[2], auto_pad="VALID") == (2,)
    # explicit, dilation 2: (10 - 5) / 1 + 1 = 6
    assert pool_output_spatial([10], [3], dilations=[2]) == (6,)


# ---------------------------------------------------------------------------------------------------------
# Windowed pools.


@pytest.mark.parametrize("known", [True, False])
def test_maxpool_resnet_stem(known: bool) -> None:
    # 9 comparisons per output element * 200704 = 1806336; read 802816 * 4 = 3211264; written 200704 * 4 = 802816
    out = T([1, 64, 56, 56]) if known else T(None)
    c = cost_of(make_node("MaxPool", [T([1, 64, 112, 112])], [out], **STEM))
    assert c.flops == 9 * N_OUT == 1806336
    assert c.bytes_read == 3211264
    assert c.bytes_written == 802816
    assert c.params == 0
    assert c.kernels == 1
    assert c.macs == 0


def test_maxpool_indices_output() -> None:
    # Indices (int64, same shape as Y, unknown here) written too: 802816 + 200704 * 8 = 2408448
    c = cost_of(make_node("MaxPool", [T([1, 64, 112, 112])], [T([1, 64, 56, 56]), T(None, INT64)], **STEM))
    assert c.bytes_written == 2408448


def test_maxpool_ceil_mode_drops_last_window() -> None:
    # [1,1,5,5], k2 s2 p1, ceil_mode: 3x3 output (see test_output_spatial_ceil_mode); 4 comparisons each = 36
    kw = dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    c = cost_of(make_node("MaxPool", [T([1, 1, 5, 5])], [T(None)], **kw))
    assert c.flops == 3 * 3 * 4
    assert c.bytes_written == 9 * 4


def test_maxpool_ceil_mode_extra_window() -> None:
    # [1,1,6,6], k3 s2 p1, ceil_mode: 4x4 = 16 outputs * 9 = 144 (floor mode would give 3x3 = 81)
    kw = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    ceil_c = cost_of(make_node("MaxPool", [T([1, 1, 6, 6])], [T(None)], ceil_mode=1, **kw))
    floor_c = cost_of(make_node("MaxPool", [T([1, 1, 6, 6])], [T(None)], **kw))
    assert ceil_c.flops == 144
    assert floor_c.flops == 81


def test_maxpool_auto_pad_same() -> None:
    # [1,2,7,7] k3 s2 SAME_UPPER -> [1,2,4,4] = 32 outputs * 9 = 288
    kw = dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    c = cost_of(make_node("MaxPool", [T([1, 2, 7, 7])], [T(None)], **kw))
    assert c.flops == 288


def test_average_pool() -> None:
    # [1,8,6,6] k2 s2 -> [1,8,3,3] = 72 outputs; 4 adds + 1 divide = 5 each -> 360
    c = cost_of(make_node("AveragePool", [T([1, 8, 6, 6])], [T([1, 8, 3, 3])], kernel_shape=[2, 2], strides=[2, 2]))
    assert c.flops == 360
    assert c.bytes_read == 288 * 4
    assert c.bytes_written == 72 * 4


def test_average_pool_count_include_pad_same_cost() -> None:
    # padding handling changes the divisor, not the count: [1,1,4,4] k3 s1 p1 -> 4x4 = 16 * (9 + 1) = 160
    kw = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    for include in (0, 1):
        c = cost_of(make_node("AveragePool", [T([1, 1, 4, 4])], [T(None)], count_include_pad=include, **kw))
        assert c.flops == 160


def test_average_pool_3d() -> None:
    # [1,4,8,8,8] k2 s2 -> [1,4,4,4,4] = 256 outputs; 8 adds + 1 divide = 9 each -> 2304
    c = cost_of(make_node("AveragePool", [T([1, 4, 8, 8, 8])], [T(None)], kernel_shape=[2, 2, 2], strides=[2, 2, 2]))
    assert c.flops == 2304


def test_lp_pool() -> None:
    # [1,4,8,8] k2 s2 p=2 -> [1,4,4,4] = 64 outputs; per window element |x|^p + add (2 * 4 = 8) + root (1) = 9
    # -> 576
    c = cost_of(make_node("LpPool", [T([1, 4, 8, 8])], [T([1, 4, 4, 4])], kernel_shape=[2, 2], strides=[2, 2], p=2))
    assert c.flops == 576


def test_missing_kernel_shape_raises() -> None:
    with pytest.raises(UnknownShape):
        cost_of(make_node("MaxPool", [T([1, 1, 4, 4])], [T(None)]))


# ---------------------------------------------------------------------------------------------------------
# Global pools.


@pytest.mark.parametrize(
    "op, expected",
    [
        # [1,2048,7,7] = 100352 inputs, [1,2048,1,1] = 2048 outputs
        ("GlobalMaxPool", 100352),  # 1 comparison per input
        ("GlobalAveragePool", 100352 + 2048),  # 1 add per input + 1 divide per output = 102400
        ("GlobalLpPool", 2 * 100352 + 2048),  # |x|^p + add per input + root per output = 202752
    ],
)
@pytest.mark.parametrize("known", [True, False])
def test_global_pools(op: str, expected: int, known: bool) -> None:
    out = T([1, 2048, 1, 1]) if known else T(None)
    c = cost_of(make_node(op, [T([1, 2048, 7, 7])], [out]))
    assert c.flops == expected
    assert c.bytes_read == 100352 * 4
    assert c.bytes_written == 2048 * 4
    assert c.kernels == 1


# ---------------------------------------------------------------------------------------------------------
# onnxruntime layouts and quantized pools.


def test_nchwc_maxpool_unknown_output() -> None:
    # NCHWc MaxPool, shape inference silent: computed [1,64,56,56]; same 9 * 200704 = 1806336 as the plain op
    c = cost_of(make_node("MaxPool", [T([1, 64, 112, 112])], [T(None)], domain=NCHWC, **STEM))
    assert c.flops == 1806336
    assert c.bytes_written == 802816


def test_nchwc_average_pool() -> None:
    # [1,8,6,6] k2 s2 -> 72 outputs * (4 + 1) = 360
    kw = dict(kernel_shape=[2, 2], strides=[2, 2])
    c = cost_of(make_node("AveragePool", [T([1, 8, 6, 6])], [T(None)], domain=NCHWC, **kw))
    assert c.flops == 360


@pytest.mark.parametrize("op, expected", [("GlobalMaxPool", 100352), ("GlobalAveragePool", 102400)])
def test_nchwc_global_pools(op: str, expected: int) -> None:
    c = cost_of(make_node(op, [T([1, 2048, 7, 7])], [T(None)], domain=NCHWC))
    assert c.flops == expected
    assert c.bytes_written == 2048 * 4


def test_nhwc_maxpool() -> None:
    # uint8 NHWC [1,112,112,64], k3 s2 p1 -> [1,56,56,64]: 9 * 200704 = 1806336
    # read 802816 bytes (1 byte each), written 200704
    c = cost_of(make_node("NhwcMaxPool", [T([1, 112, 112, 64], UINT8)], [T(None, UINT8)], domain=MS, **STEM))
    assert c.flops == 1806336
    assert c.bytes_read == 802816
    assert c.bytes_written == 200704


def test_qlinear_average_pool() -> None:
    # uint8 [1,32,16,16] k2 s2 -> [1,32,8,8] = 2048 outputs; 4 adds + divide + dequant 2 + requant 2 = 9 each
    # -> 18432. Read 8192 + 2 float scales + 2 uint8 zero points = 8202; written 2048; params 4
    ins = [T([1, 32, 16, 16], UINT8), W([]), W([], UINT8), W([]), W([], UINT8)]
    c = cost_of(make_node("QLinearAveragePool", ins, [T(None, UINT8)], domain=MS, kernel_shape=[2, 2], strides=[2, 2]))
    assert c.flops == 18432
    assert c.bytes_read == 8202
    assert c.bytes_written == 2048
    assert c.params == 4


def test_qlinear_global_average_pool_channels_last() -> None:
    # uint8 NHWC [1,7,7,256] = 12544 inputs -> [1,1,1,256]; 12544 adds + 256 * (divide 1 + dequant 2 + requant 2)
    # = 12544 + 1280 = 13824
    ins = [T([1, 7, 7, 256], UINT8), W([]), W([], UINT8), W([]), W([], UINT8)]
    c = cost_of(make_node("QLinearGlobalAveragePool", ins, [T(None, UINT8)], domain=MS, channels_last=1))
    assert c.flops == 13824
    assert c.bytes_written == 256


@pytest.mark.parametrize("mode, per_output", [("nearest", 0), ("linear", 7)])
def test_nchwc_upsample(mode: str, per_output: int) -> None:
    # [1,16,8,8] x scales [1,1,2,2] -> [1,16,16,16] = 4096. nearest copies: 0 FLOPs; linear: 4 mul + 3 add = 7
    # per output -> 28672. Read 1024 * 4, written 4096 * 4
    c = cost_of(make_node("Upsample", [T([1, 16, 8, 8])], [T(None)], domain=NCHWC, scales=[1, 1, 2, 2], mode=mode))
    assert c.flops == per_output * 4096
    assert c.bytes_read == 4096
    assert c.bytes_written == 16384
    assert c.kernels == 1


def test_max_unpool() -> None:
    # X [1,8,4,4] float + I int64, k2 s2 -> [1,8,8,8]: (4 - 1) * 2 + 2 = 8. No arithmetic: 0 FLOPs.
    # read 128 * 4 + 128 * 8 = 1536; written 512 * 4 = 2048
    ins = [T([1, 8, 4, 4]), T([1, 8, 4, 4], INT64)]
    c = cost_of(make_node("MaxUnpool", ins, [T(None)], kernel_shape=[2, 2], strides=[2, 2]))
    assert c.flops == 0
    assert c.bytes_read == 1536
    assert c.bytes_written == 2048
    assert c.params == 0


def test_max_unpool_output_shape_input() -> None:
    # output_shape [1,8,9,9] given as a constant: written 648 * 4 = 2592; the shape tensor is not read as data
    ins = [T([1, 8, 4, 4]), T([1, 8, 4, 4], INT64), W([4], INT64)]
    c = cost_of(
        make_node("MaxUnpool", ins, [T(None)], constants={2: [1, 8, 9, 9]}, kernel_shape=[2, 2], strides=[2, 2])
    )
    assert c.bytes_written == 2592
    assert c.bytes_read == 1536
