"""Engine-aware prediction: op classes, memory levels, ceilings and the closed-form time of a node."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from onnxroof.costs import Cost, NodeView
from onnxroof.devices import (
    OP_CLASSES,
    CacheLevel,
    Ceiling,
    FrozenMap,
    Peak,
    Sourced,
    WeightReuse,
    WeightWait,
    load_device,
)
from onnxroof.predict import engine, op_classes, roofline
from tests.helpers import (
    CONV,
    ELEMENTWISE,
    FLOAT16,
    INT8,
    INT32,
    INT64,
    UINT8,
    T,
    W,
    calibrated_host,
    conv,
    make_node,
)

NCHWC = "com.microsoft.nchwc"
MS = "com.microsoft"


# ------------------------------------------------------------------------------------------------ op classes

CASES = [
    (conv(64, 64, 56, 3), "conv"),
    (conv(64, 64, 56, 3, domain="", op="Conv"), "conv"),
    (conv(64, 64, 56, 3, domain=MS, op="FusedConv"), "conv"),
    (conv(256, 64, 56, 1), "conv1x1"),
    (conv(512, 512, 7, 3), "conv_small"),  # 49 output positions
    (conv(256, 256, 14, 3), "conv_mid"),  # 196 output positions
    (conv(1024, 256, 14, 1), "conv1x1"),  # a pointwise one is one product, whatever its map
    (conv(160, 960, 7, 1), "conv1x1"),
    (conv(3, 64, 224, 7, out_hw=112), "conv_stem"),  # a stem with a large kernel: its own class ...
    (conv(3, 64, 224, 11, out_hw=55), "conv_stem"),
    (conv(16, 64, 55, 3), "conv"),  # ... 16 input channels are past the stem
    (conv(64, 192, 27, 5), "conv_wide"),  # a 5x5 kernel past the stem (AlexNet's second layer)
    (conv(96, 256, 55, 5, out_hw=27), "conv_wide"),
    (conv(24, 64, 14, 5), "conv_mid"),  # a 14x14 output ranks first: a 5x5 there is a mid-sized conv
    (conv(48, 128, 7, 5), "conv_small"),
    (conv(3, 32, 224, 3, out_hw=112), "conv_narrow"),  # a stem with a 3x3 kernel does not
    (conv(64, 16, 56, 1), "conv_narrow"),  # 16 output channels
    # one output position: a squeeze-and-excitation product on its pooled vector, in either layout, and a 7x7
    # kernel over a 7x7 map without padding (a classifier written as a convolution)
    (conv(1152, 48, 1, 1), "conv_vector"),
    (conv(48, 12, 1, 1, domain="", op="Conv"), "conv_vector"),
    (conv(512, 4096, 7, 7, out_hw=1), "conv_vector"),
    (conv(1152, 48, 2, 1), "conv1x1"),  # four positions: a spatial convolution again
    # over one axis (wav2vec2's feature encoder: 512 -> 512, 3 taps, stride 2, 799 -> 399 frames), whatever its size
    (
        make_node("Conv", [T((1, 512, 799)), W((512, 512, 3))], [T((1, 512, 399))], kernel_shape=[3], strides=[2]),
        "conv_1d",
    ),
    (make_node("Conv", [T((1, 512, 99)), W((512, 512, 2))], [T((1, 512, 49))], kernel_shape=[2]), "conv_1d"),
    # a grouped one over one axis is a plain-layout grouped convolution (wav2vec2's positional one, 16 groups)
    (
        make_node("Conv", [T((1, 768, 49)), W((768, 48, 128))], [T((1, 768, 50))], kernel_shape=[128], group=16),
        "conv_grouped",
    ),
    (conv(144, 144, 56, 3, group=144), "depthwise"),
    (conv(58, 58, 28, 3, group=58, domain=""), "depthwise_plain"),
    (conv(256, 256, 56, 1, group=256), "batchnorm"),  # a BatchNormalization onnxruntime turned into a 1x1 dw conv
    (conv(136, 136, 28, 1, group=4, domain=""), "conv_grouped"),
    (conv(136, 136, 28, 1, group=4, domain=MS, op="FusedConv"), "conv_grouped"),
    (conv(48, 48, 56, 3, group=6, domain=MS, op="FusedConv"), "conv_grouped_narrow"),  # 8 channels per group
    # NCHWc blocks a grouped conv only when each group fills whole blocks; each group then runs as a dense conv,
    # classed by one group's channels: 48 -> 128 with a 5x5 kernel on 27x27 positions is a wide conv ...
    (conv(96, 256, 27, 5, group=2), "conv_wide"),
    (conv(384, 384, 13, 3, group=2), "conv_mid"),  # ... 169 positions a mid-sized one
    (conv(64, 64, 28, 3, group=4), "conv_narrow"),  # ... and 16 output channels per group a narrow one
    # DeepLab's rate-12 ASPP branch on 14x14: every output column's window reaches into the padding
    (
        conv(960, 256, 14, 3, pad=12, dilation=12),
        "conv_border",
    ),
    # LR-ASPP's 5x5 depthwise with dilation 2 on 14x14: 8 of 14 output columns reach into the padding
    (conv(960, 960, 14, 5, group=960, pad=4, dilation=2), "depthwise_border"),
    (conv(960, 960, 7, 5, group=960, pad=2), "depthwise_border"),  # 5x5 on 7x7: 4 of 7 columns
    (conv(960, 960, 14, 5, group=960, pad=2), "depthwise"),  # 5x5 on 14x14: 4 of 14 columns
    (make_node("Gemm", [T((197, 768)), W((3072, 768)), W((3072,))], [T((197, 3072))], transB=1), "gemm"),
    (make_node("FusedGemm", [T((1, 9216)), W((4096, 9216)), W((4096,))], [T((1, 4096))], domain=MS), "gemv"),
    (make_node("Gemm", [T((8, 768)), W((768, 768)), W((768,))], [T((8, 768))], transB=1), "gemm_short"),
    (make_node("MatMul", [T((1, 15, 768)), W((768, 768))], [T((1, 15, 768))]), "gemm_short"),  # 15 rows
    (make_node("MatMul", [T((1, 16, 768)), W((768, 768))], [T((1, 16, 768))]), "gemm"),  # 16 rows
    (make_node("MatMul", [T((1, 197, 768)), W((768, 768))], [T((1, 197, 768))]), "gemm"),
    (make_node("MatMul", [T((1, 12, 197, 64)), T((1, 12, 64, 197))], [T((1, 12, 197, 197))]), "matmul"),
    (make_node("FusedMatMul", [T((1, 12, 197, 64)), T((1, 12, 197, 64))], [T((1, 12, 197, 197))], domain=MS), "matmul"),
    (make_node("MaxPool", [T((1, 64, 112, 112))], [T((1, 64, 56, 56))], domain=NCHWC, kernel_shape=[3, 3]), "pool"),
    (make_node("AveragePool", [T((1, 64, 28, 28))], [T((1, 64, 28, 28))], domain=NCHWC, kernel_shape=[3, 3]), "pool"),
    (make_node("MaxPool", [T((1, 24, 112, 112))], [T((1, 24, 56, 56))], kernel_shape=[3, 3]), "pool_nchw"),
    (make_node("GlobalAveragePool", [T((1, 2048, 7, 7))], [T((1, 2048, 1, 1))], domain=NCHWC), "global_pool"),
    (
        make_node(
            "BatchNormalization", [T((1, 64, 56, 56)), W((64,)), W((64,)), W((64,)), W((64,))], [T((1, 64, 56, 56))]
        ),
        "batchnorm",
    ),
    (make_node("LayerNormalization", [T((1, 197, 768)), W((768,)), W((768,))], [T((1, 197, 768))]), "layernorm"),
    (
        make_node(
            "SkipLayerNormalization",
            [T((1, 197, 768)), T((1, 197, 768)), W((768,)), W((768,))],
            [T((1, 197, 768))],
            domain=MS,
        ),
        "skip_layernorm",
    ),
    (
        make_node("InstanceNormalization", [T((1, 32, 64, 64)), W((32,)), W((32,))], [T((1, 32, 64, 64))]),
        "instancenorm",
    ),
    (make_node("LRN", [T((1, 96, 55, 55))], [T((1, 96, 55, 55))], size=5), "lrn"),
    (make_node("Softmax", [T((1, 1000))], [T((1, 1000))]), "softmax"),
    (make_node("Relu", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))]), "elementwise"),
    (make_node("Add", [T((1, 197, 768)), T((1, 197, 768))], [T((1, 197, 768))]), "elementwise"),
    (make_node("Sum", [T((1, 8, 4, 4)), T((1, 8, 4, 4)), T((1, 8, 4, 4))], [T((1, 8, 4, 4))]), "elementwise"),
    (make_node("Add", [T((1, 197, 768)), W((768,))], [T((1, 197, 768))]), "elementwise"),  # a bias: still streams
    (make_node("Mul", [T((1, 64, 28, 28)), W((64, 1, 1))], [T((1, 64, 28, 28))]), "broadcast"),
    (make_node("Gelu", [T((1, 197, 3072))], [T((1, 197, 3072))], domain=MS), "activation_gelu"),
    (make_node("Gelu", [T((1, 197, 3072))], [T((1, 197, 3072))], approximate="tanh"), "activation_fastgelu"),
    (make_node("FastGelu", [T((1, 197, 3072))], [T((1, 197, 3072))], domain=MS), "activation_fastgelu"),
    (make_node("Sigmoid", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))]), "activation_sigmoid"),
    # onnxruntime's Pow multiplies for a constant scalar exponent of 2 or 3 and calls pow for any other
    (make_node("Pow", [T((1, 128, 512)), W(())], [T((1, 128, 512))], constants={1: 2.0}), "pow_square"),
    (make_node("Pow", [T((1, 128, 3072)), W(())], [T((1, 128, 3072))], constants={1: 3.0}), "pow_cube"),
    (make_node("Pow", [T((1, 128, 512)), W(())], [T((1, 128, 512))], constants={1: 0.5}), "activation_pow"),
    (make_node("Pow", [T((1, 128, 512)), T((1, 128, 512))], [T((1, 128, 512))]), "activation_pow"),  # not constant
    # QuickGelu with alpha 1 is SiLU as onnxruntime fuses it; its default alpha (1.702) a pass more
    (make_node("QuickGelu", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))], domain=MS, alpha=1.0), "activation_silu"),
    (make_node("QuickGelu", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))], domain=MS), "activation_quickgelu"),
    (make_node("QuickGelu", [T((1, 197, 768))], [T((1, 197, 768))], domain=MS, alpha=1.702), "activation_quickgelu"),
    (make_node("Exp", [T((1, 12, 197, 197))], [T((1, 12, 197, 197))]), "activation_exp"),
    (make_node("Tanh", [T((1, 197, 768))], [T((1, 197, 768))]), "activation_tanh"),
    (make_node("Erf", [T((1, 197, 768))], [T((1, 197, 768))]), "activation_erf"),
    (make_node("Log", [T((1, 197, 768))], [T((1, 197, 768))]), "activation"),
    (make_node("SwiGLU", [T((1, 197, 3072)), T((1, 197, 3072))], [T((1, 197, 3072))]), "activation"),
    (
        make_node("LSTM", [T((128, 1, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T((128, 1, 1, 256))]),
        "lstm",
    ),
    (
        make_node("GRU", [T((128, 1, 256)), W((1, 768, 256)), W((1, 768, 256))], [T((128, 1, 1, 256))]),
        "gru",
    ),
    (
        make_node("RNN", [T((128, 1, 256)), W((1, 256, 256)), W((1, 256, 256))], [T((128, 1, 1, 256))]),
        "recurrent",
    ),
    (
        make_node("TensorScatter", [T((1, 8, 64, 64)), T((1, 8, 1, 64)), T((1,), INT64)], [T((1, 8, 64, 64))]),
        "movement",
    ),
    (make_node("BitCast", [T((1, 1024))], [T((1, 1024), INT32)], to=INT32), op_classes.SHAPE),
    (make_node("Concat", [T((1, 64, 28, 28)), T((1, 64, 28, 28))], [T((1, 128, 28, 28))], axis=1), "movement"),
    (make_node("Split", [T((1, 197, 2304))], [T((1, 197, 768))] * 3, axis=-1), "movement"),
    (make_node("Transpose", [T((1, 197, 12, 64))], [T((1, 12, 197, 64))], perm=[0, 2, 1, 3]), "transpose"),
    (make_node("Transpose", [T((1, 197, 12, 64))], [T((1, 12, 64, 197))], perm=[0, 2, 3, 1]), "transpose_inner"),
    (make_node("Transpose", [T((16, 6, 49, 32))], [T((16, 6, 32, 49))], perm=[0, 1, 3, 2]), "transpose_batched"),
    (
        make_node("Transpose", [T((1, 28, 28, 3, 80))], [T((1, 80, 3, 28, 28))], perm=[0, 4, 3, 1, 2]),
        "transpose_generic",
    ),
    (make_node("ReorderInput", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))], domain=NCHWC), "reorder"),
    (make_node("ReorderOutput", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))], domain=NCHWC, channels=64), "reorder"),
    # Planes under 20x20 = 400 positions make an output reorder short-rowed; the input reorder and an NHWC output
    # (channels_last) are not.
    (
        make_node("ReorderOutput", [T((1, 768, 14, 14))], [T((1, 768, 14, 14))], domain=NCHWC, channels=768),
        "reorder_short",
    ),
    (
        make_node("ReorderOutput", [T((1, 64, 19, 19))], [T((1, 64, 19, 19))], domain=NCHWC, channels=64),
        "reorder_short",
    ),
    (make_node("ReorderOutput", [T((1, 64, 20, 20))], [T((1, 64, 20, 20))], domain=NCHWC, channels=64), "reorder"),
    (make_node("ReorderInput", [T((1, 768, 14, 14))], [T((1, 768, 14, 14))], domain=NCHWC), "reorder"),
    (
        make_node(
            "ReorderOutput", [T((1, 768, 14, 14))], [T((1, 14, 14, 768))], domain=NCHWC, channels=768, channels_last=1
        ),
        "reorder",
    ),
    (make_node("Upsample", [T((1, 64, 32, 32))], [T((1, 64, 64, 64))], domain=NCHWC, scales=[2, 2]), "resize"),
    (make_node("Resize", [T((1, 64, 32, 32)), None, W((4,))], [T((1, 64, 64, 64))]), "resize"),
    # an interpolating resize weighs several inputs per output element: NCHWc and plain layout apart
    (
        make_node("Upsample", [T((1, 24, 28, 28))], [T((1, 24, 224, 224))], domain=NCHWC, scales=[8, 8], mode="linear"),
        "resize_linear",
    ),
    (
        make_node("Resize", [T((1, 128, 14, 14)), None, W((4,))], [T((1, 128, 28, 28))], mode="linear"),
        "resize_linear_nchw",
    ),
    (make_node("Resize", [T((1, 3, 32, 32)), None, W((4,))], [T((1, 3, 64, 64))], mode="cubic"), "resize_linear_nchw"),
    (make_node("GridSample", [T((1, 3, 32, 32)), T((1, 16, 16, 2))], [T((1, 3, 16, 16))], mode="linear"), "resize"),
    (make_node("ReduceMean", [T((1, 197, 768))], [T((1, 197, 1))], axes=[2]), "reduce"),
    (make_node("Reshape", [T((1, 197, 768)), W((2,), INT64)], [T((197, 768))]), op_classes.SHAPE),
    (make_node("Flatten", [T((1, 512, 1, 1))], [T((1, 512))]), op_classes.SHAPE),
    (make_node("NonMaxSuppression", [T((1, 100, 4)), T((1, 1, 100))], [T((10, 3), INT64)]), op_classes.OTHER),
    # low precision: the Casts around fp16 nodes, dynamic and static int8 convolutions
    (make_node("Cast", [T((1, 64, 56, 56))], [T((1, 64, 56, 56), FLOAT16)], to=FLOAT16), "cast"),
    (make_node("Cast", [T((1, 64, 56, 56), INT32)], [T((1, 64, 56, 56))], to=1), "cast"),
    (
        make_node("DynamicQuantizeLinear", [T((1, 64, 56, 56))], [T((1, 64, 56, 56), UINT8), T(()), T((), UINT8)]),
        "quantize",
    ),
    (
        make_node(
            "ConvInteger",
            [T((1, 64, 56, 56), UINT8), W((64, 64, 3, 3), UINT8), T((), UINT8), W((), UINT8)],
            [T((1, 64, 56, 56), INT32)],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        "conv_integer",
    ),
    (
        make_node(
            "ConvInteger",
            [T((1, 144, 56, 56), UINT8), W((144, 1, 3, 3), UINT8), T((), UINT8), W((), UINT8)],
            [T((1, 144, 56, 56), INT32)],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            group=144,
        ),
        "conv_integer_grouped",
    ),
    (  # ShuffleNet's grouped 1x1: three groups of 80 channels, each a dense integer product
        make_node(
            "ConvInteger",
            [T((1, 240, 28, 28), UINT8), W((240, 80, 1, 1), UINT8), T((), UINT8), W((), UINT8)],
            [T((1, 240, 28, 28), INT32)],
            kernel_shape=[1, 1],
            group=3,
        ),
        "conv_integer",
    ),
    (
        make_node(
            "QLinearConv",
            [
                T((1, 56, 56, 64), UINT8),
                W(()),
                W((), UINT8),
                W((64, 64, 3, 3), INT8),
                W(()),
                W((), INT8),
                W(()),
                W((), UINT8),
                W((64,), INT32),
            ],
            [T((1, 56, 56, 64), UINT8)],
            domain=MS,
            channels_last=1,
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        "qconv",
    ),
    (
        make_node(
            "QLinearConv",
            [
                T((1, 144, 56, 56), UINT8),
                W(()),
                W((), UINT8),
                W((144, 1, 3, 3), INT8),
                W(()),
                W((), INT8),
                W(()),
                W((), UINT8),
            ],
            [T((1, 144, 56, 56), UINT8)],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            group=144,
        ),
        "qconv_depthwise",
    ),
    (
        make_node(
            "NhwcMaxPool",
            [T((1, 32, 32, 64), UINT8)],
            [T((1, 16, 16, 64), UINT8)],
            domain=MS,
            kernel_shape=[2, 2],
            strides=[2, 2],
        ),
        "pool_nchw",
    ),
]


@pytest.mark.parametrize(
    ("view", "expected"), CASES, ids=[f"{v.domain or 'ai.onnx'}::{v.op_type}->{c}" for v, c in CASES]
)
def test_op_class(view, expected):
    assert op_classes.op_class(view) == expected


def test_every_ceiling_class_has_a_case():
    assert set(OP_CLASSES) <= {expected for _, expected in CASES}


def test_conv_class_without_weight_shape_falls_back_to_attributes():
    view = make_node(
        "Conv", [T((1, 64, 56, 56)), W((64, 64, 1, 1), name="w"), None], [T((1, 64, 56, 56))], kernel_shape=[1, 1]
    )
    assert op_classes.op_class(view) == "conv1x1"
    unknown = make_node("Conv", [T(None), T(None), None], [T(None)], kernel_shape=[3, 3])
    assert op_classes.op_class(unknown) == "conv"


# ------------------------------------------------------------------------------------------------ memory levels


def test_memory_level_picks_the_smallest_level_that_holds_the_working_set():
    dev = calibrated_host()
    assert engine.memory_level(dev, 0) == ("L1d", 100e9)
    assert engine.memory_level(dev, 32 * 1024) == ("L1d", 100e9)  # fits exactly
    assert engine.memory_level(dev, 32 * 1024 + 1) == ("L2", 50e9)
    assert engine.memory_level(dev, 1024 * 1024) == ("L2", 50e9)
    # L3 has no measured bandwidth: skipped, the next level is DRAM
    assert engine.memory_level(dev, 1024 * 1024 + 1) == ("DRAM", 10e9)


def test_private_caches_count_once_per_calibrated_thread():
    dev = calibrated_host(threads=2)
    assert engine.memory_level(dev, 64 * 1024) == ("L1d", 100e9)
    assert engine.memory_level(dev, 64 * 1024 + 1) == ("L2", 50e9)


def test_working_set_and_weight_bytes():
    view = conv(64, 64, 28, 3)
    cost = Cost(flops=1e7, bytes_read=400_000, bytes_written=200_000)
    assert engine.working_set(view, cost) == 600_000
    assert engine.weight_bytes(view, cost) == (64 * 64 * 9 + 64) * 4  # both weights, each once
    assert engine.weight_bytes(view, Cost(bytes_read=1000)) == 1000  # never more than the node reads


# ------------------------------------------------------------------------------------------------ ceilings


def test_ceiling_interpolates_in_log_work_and_clamps():
    assert CONV.compute_efficiency(1e5) == 0.5
    assert CONV.compute_efficiency(1e9) == 0.9
    assert CONV.compute_efficiency(1e7) == pytest.approx(0.7)  # halfway in log10: 0.5 + 0.4 * 0.5
    assert CONV.memory_efficiency(123.0) == 1.0  # no memory table: efficiency 1


def test_ceiling_falls_back_to_a_related_class():
    dev = calibrated_host({"conv": CONV})
    assert op_classes.ceiling_for(dev, "conv1x1") == ("conv", CONV)
    assert op_classes.ceiling_for(dev, "conv_grouped") == ("conv", CONV)  # via conv_small
    assert op_classes.ceiling_for(dev, "lrn") is None


# ------------------------------------------------------------------------------------------------ prediction


def test_compute_bound_conv_closed_form():
    dev = calibrated_host({"conv": CONV})
    view = conv(64, 64, 28, 3)
    cost = Cost(flops=1e7, bytes_read=400_000, bytes_written=200_000, kernels=1)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    # eff_c = 0.7 at 1e7 FLOPs -> compute = 1e7 / (100e9 * 0.7) = 142.857 us
    # working set 600 kB -> L2 (50 GB/s); weights 147,712 B at DRAM 10 GB/s, the other 452,288 B at 50 GB/s:
    # memory = 452288 / 50e9 + 147712 / 10e9 = 9.046 + 14.771 = 23.817 us
    # serial: max(142.857, 23.817) + 1 us overhead = 143.857 us
    weights = (64 * 64 * 9 + 64) * 4
    assert pred.compute_time_s == pytest.approx(1e7 / 70e9)
    assert pred.memory_time_s == pytest.approx((600_000 - weights) / 50e9 + weights / 10e9)
    assert pred.overhead_time_s == 1e-6
    assert pred.predicted_time_s == pytest.approx(1e7 / 70e9 + 1e-6)
    assert pred.bound == "compute"
    assert pred.peak_flops_s == pytest.approx(70e9)  # the conv ceiling, not the device peak
    assert note.op_class == "conv" and note.ceiling == "conv"
    assert note.level == "L2" and note.level_bandwidth == 50e9 and note.weight_bytes == weights
    assert "70% of peak" in note.describe() and "L2" in note.describe()


def test_a_conv_served_from_dram_adds_the_traffic_its_compute_does_not_hide():
    dev = replace(
        calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE}), dram_overlap=Sourced(0.25, "calibrated: test")
    )
    view = conv(64, 64, 112, 3, out_hw=56)
    cost = Cost(flops=1e9, bytes_read=3e6, bytes_written=1e6, kernels=1)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    # eff_c = 0.9 past 1e8 FLOPs -> compute = 1e9 / 90e9 = 11.111 ms. The 4 MB working set is past L2 (1 MiB, the
    # last level with a bandwidth): all of it at DRAM's 10 GB/s -> memory = 400 us, a quarter of it hidden:
    # max(11.111 ms, 400 us) + 1 us overhead + 0.75 * 400 us = 11.412 ms.
    assert note.level == "DRAM" and pred.memory_time_s == pytest.approx(400e-6)
    assert note.exposed_memory_s == pytest.approx(300e-6)
    assert pred.predicted_time_s == pytest.approx(1e9 / 90e9 + 1e-6 + 300e-6)
    assert pred.bound == "compute" and "300 us of memory traffic not hidden by compute" in note.describe()
    # The same conv with its data in L2, a memory-bound kernel in DRAM, or a device without the figure: max() alone.
    in_cache = Cost(flops=1e9, bytes_read=400_000, bytes_written=200_000, kernels=1)
    assert engine.predict_engine(view, in_cache, "fp32", dev)[1].exposed_memory_s == 0.0
    relu = make_node("Relu", [T((1, 64, 112, 112))], [T((1, 64, 112, 112))])
    streaming = Cost(flops=802816, bytes_read=3211264, bytes_written=3211264, kernels=1)
    assert engine.predict_engine(relu, streaming, "fp32", dev)[1].exposed_memory_s == 0.0
    plain, _ = engine.predict_engine(view, cost, "fp32", calibrated_host({"conv": CONV}))
    assert plain.predicted_time_s == pytest.approx(1e9 / 90e9 + 1e-6)
    # A level no faster than DRAM serves the data at DRAM bandwidth: the same traffic is exposed there.
    slow_l3 = CacheLevel("L3", 8 * 1024 * 1024, 10e9, "calibrated: test", "shared")
    same_speed = replace(dev, caches=(*dev.caches[:2], slow_l3))
    _, via_l3 = engine.predict_engine(view, cost, "fp32", same_speed)
    assert via_l3.level == "L3" and via_l3.exposed_memory_s == pytest.approx(300e-6)
    # The figure, read on a convolution, does not apply to a compute-bound product by a weight in DRAM: it waits
    # for its weights in full instead (exposed_weight_time). 128 x 768 by 768 x 3072 (GPT-2's MLP): 604 MFLOP,
    # 768 * 3072 * 4 + 3072 * 4 = 9,449,472 B of weights at 10 GB/s = 944.9 us, not 0.75 of its traffic; and its
    # working set being past the core's 1 MiB L2, the write of its 128 * 3072 * 4 = 1,572,864 B output, read and
    # written at the working set's DRAM (output_write_time): 3,145,728 B at 10 GB/s = 314.6 us.
    gemm = make_node("Gemm", [T((128, 768)), W((768, 3072)), W((3072,))], [T((128, 3072))])
    gemm_cost = Cost(
        flops=2 * 128 * 768 * 3072, bytes_read=4 * (128 * 768 + 768 * 3072 + 3072), bytes_written=4 * 128 * 3072
    )
    _, gemm_note = engine.predict_engine(gemm, gemm_cost, "fp32", dev)
    assert gemm_note.level == "DRAM" and gemm_note.exposed_memory_s == pytest.approx((9_449_472 + 3_145_728) / 10e9)


def test_a_one_row_products_small_weight_is_kept_between_runs_as_a_large_one_is():
    """gemv's ceiling is read on cold weights only: a weight under COLD_WEIGHTS is read at DRAM's rate times the
    model's reuse too."""
    reused = replace(calibrated_host(), weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test"))
    # A 1000-way classifier on 128 features: 4 * (128 * 1000 + 1000) = 516,000 B of weights and bias, 512 + 4,000 B of
    # activations; 256,000 FLOPs take 2.56 us at 100 GFLOP/s, so it is bound by its memory time. The working set
    # (520,512 B) fits the 1 MiB L2 (50 GB/s): activations 4,512 / 50e9 = 0.09 us; weights 516,000 / 10e9 = 51.6 us
    # read cold, 516,000 / (10e9 * 2) = 25.8 us in a model whose traffic gives a reuse of 2.
    gemv = make_node("Gemm", [T((1, 128)), W((1000, 128)), W((1000,))], [T((1, 1000))], transB=1)
    cost = Cost(flops=256_000, bytes_read=512 + 516_000, bytes_written=4_000, kernels=1)
    cold, note = engine.predict_engine(gemv, cost, "fp32", reused)
    assert note.op_class == "gemv" and cold.memory_time_s == pytest.approx(4_512 / 50e9 + 516_000 / 10e9)
    kept, note = engine.predict_engine(gemv, cost, "fp32", reused, traffic=1e6)
    assert note.weight_speedup == 2.0 and kept.memory_time_s == pytest.approx(4_512 / 50e9 + 516_000 / 20e9)


def test_a_compute_bound_product_waits_for_its_cold_weights_on_top_of_its_arithmetic():
    """A Gemm of 50 rows by a 768 x 768 weight (a speech encoder's projection over 50 frames) runs its arithmetic
    plus its weights' read: the two add up instead of overlapping."""
    dev = calibrated_host()
    gemm = make_node("Gemm", [T((50, 768)), W((768, 768)), W((768,))], [T((50, 768))], transB=1)
    weights = 4 * (768 * 768 + 768)  # 2,362,368 B, past COLD_WEIGHTS (1 MiB)
    cost = Cost(flops=2 * 50 * 768 * 768, bytes_read=4 * 50 * 768 + weights, bytes_written=4 * 50 * 768, kernels=1)
    pred, note = engine.predict_engine(gemm, cost, "fp32", dev)
    # compute = 58,982,400 FLOPs / 100 GFLOP/s = 589.8 us; the 2.67 MB working set is past L2 (1 MiB), so every
    # byte goes at DRAM's 10 GB/s: memory = 2,669,568 / 10e9 = 267.0 us, of which the weights 236.2 us. The bias
    # C is written into the 153,600 B output and read back at L2's 50 GB/s: 307,200 / 50e9 = 6.1 us. The working
    # set past the core's cache, the output's write is read and written at DRAM's rate too (output_write_time):
    # 307,200 / 10e9 = 30.7 us. time = max(589.8, 267.0) + 236.2 + 30.7 + 6.1 + 1 us of dispatch = 863.9 us.
    out_write = 2 * 153_600 / 10e9
    assert pred.compute_time_s == pytest.approx(58_982_400 / 100e9)
    assert note.exposed_memory_s == pytest.approx(weights / 10e9 + out_write)
    assert pred.predicted_time_s == pytest.approx(
        58_982_400 / 100e9 + weights / 10e9 + out_write + 2 * 153_600 / 50e9 + 1e-6
    )
    # Weights kept between runs (a reuse of 2x at the model's traffic) arrive in half the time.
    reused = replace(dev, weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test"))
    assert engine.predict_engine(gemm, cost, "fp32", reused, traffic=1e6)[1].exposed_memory_s == pytest.approx(
        weights / 20e9 + out_write
    )
    # A gemm memory ceiling of 50% (read on products with small weights, mostly their dispatch) slows the memory
    # time, 267.0 / 0.5 = 533.9 us, still under the compute; the weights' 236.2 us wait at DRAM's rate, not half.
    slow_memory = Ceiling(compute=(), memory=((1e5, 0.5),), source="calibrated: test gemm memory")
    _, slowed = engine.predict_engine(gemm, cost, "fp32", calibrated_host({"gemm": slow_memory}))
    assert slowed.memory_efficiency == 0.5 and slowed.exposed_memory_s == pytest.approx(weights / 10e9 + out_write)
    # Under COLD_WEIGHTS the ceiling carries the weights' read (calibrated warm): nothing is added.
    small = make_node("Gemm", [T((50, 256)), W((256, 256)), W((256,))], [T((50, 256))], transB=1)
    small_weights = 4 * (256 * 256 + 256)
    small_cost = Cost(
        flops=2 * 50 * 256 * 256, bytes_read=4 * 50 * 256 + small_weights, bytes_written=4 * 50 * 256, kernels=1
    )
    assert engine.predict_engine(small, small_cost, "fp32", dev)[1].exposed_memory_s == 0.0
    # In a model (a traffic given), the rest of an inference has passed through the caches since the layer last
    # ran: its 263,168 B of weights come where the model's traffic leaves them, DRAM's 10 GB/s times the reuse of
    # 2x = 13.2 us on top of its 65.5 us of arithmetic (6,553,600 FLOPs at 100 GFLOP/s; its memory time, 2.0 us of
    # activations in L2 and 26.3 us of weights at DRAM's rate, stays under it).
    in_model = engine.predict_engine(small, small_cost, "fp32", reused, traffic=1e6)[1]
    assert in_model.exposed_memory_s == pytest.approx(small_weights / 20e9)
    assert engine.predict_engine(small, small_cost, "fp32", dev, traffic=1e6)[1].exposed_memory_s == pytest.approx(
        small_weights / 10e9
    )
    # A product of one row (class gemv) is bound by its weight's read, which max() counts already.
    gemv = make_node("Gemm", [T((1, 768)), W((768, 768)), W((768,))], [T((1, 768))], transB=1)
    gemv_cost = Cost(flops=2 * 768 * 768, bytes_read=4 * 768 + weights, bytes_written=4 * 768, kernels=1)
    assert engine.exposed_weight_time(dev, "gemv", weights, 236e-6) == 0.0
    assert engine.predict_engine(gemv, gemv_cost, "fp32", dev)[1].exposed_memory_s == 0.0
    # A GPU streams its weights while it computes: no wait there.
    assert engine.exposed_weight_time(replace(dev, kind="gpu"), "gemm", weights, 236e-6) == 0.0


def test_a_product_whose_working_set_leaves_the_cores_cache_waits_for_its_output_writes():
    """Write-allocate: each line of the output is read before it is written, and the stores stall the kernel."""
    dev = calibrated_host()
    # Swin's first MLP product without C (a MatMul): 3136 x 96 by 96 x 384, 231,211,008 FLOPs at 100 GFLOP/s =
    # 2312 us. Its working set (1,204,224 B of input, 147,456 B of weight, 4,816,896 B of output) is past the 1 MiB
    # L2 and fits only L3, which has no bandwidth here: the output is read and written at DRAM's 10 GB/s,
    # 2 x 4,816,896 / 10e9 = 963.4 us on top.
    matmul = make_node("MatMul", [T((3136, 96)), W((96, 384))], [T((3136, 384))])
    cost = Cost(flops=2 * 3136 * 96 * 384, bytes_read=4 * (3136 * 96 + 96 * 384), bytes_written=4 * 3136 * 384)
    pred, note = engine.predict_engine(matmul, cost, "fp32", dev)
    assert note.exposed_memory_s == pytest.approx(2 * 4_816_896 / 10e9)
    assert pred.predicted_time_s == pytest.approx(2 * 3136 * 96 * 384 / 100e9 + 2 * 4_816_896 / 10e9 + 1e-6)
    # 196 rows: 75,264 + 147,456 + 301,056 = 523,776 B fit the L2, where the ceilings were read: nothing added.
    short = make_node("MatMul", [T((196, 96)), W((96, 384))], [T((196, 384))])
    short_cost = Cost(flops=2 * 196 * 96 * 384, bytes_read=4 * (196 * 96 + 96 * 384), bytes_written=4 * 196 * 384)
    assert engine.predict_engine(short, short_cost, "fp32", dev)[1].exposed_memory_s == 0.0
    # At 2 threads the two cores' L2s hold 2 MiB; the large product still leaves them.
    two = calibrated_host(threads=2)
    assert engine.output_write_time(matmul, two, "gemm", 6_168_576) == pytest.approx(963.4e-6, 1e-4)
    # Another class waits for nothing more.
    assert engine.output_write_time(matmul, dev, "matmul", 6_168_576) == 0.0


def test_a_gemm_writes_its_c_into_the_output_and_reads_it_back():
    """onnxruntime's Gemm broadcasts C into Y before the product and accumulates onto it (beta 1): a pass writing
    and reading the output, twice its bytes at the bandwidth of the level the output fits in."""
    dev = calibrated_host()
    # Swin's first MLP product: 3136 x 96 by 96 x 384, 231 MFLOP at 100 GFLOP/s = 2312 us; its output, 3136 x 384
    # floats = 4,816,896 B, fits only L3, which has no bandwidth here: DRAM's 10 GB/s, 2 x 4,816,896 / 10e9 = 963 us.
    gemm = make_node("Gemm", [T((3136, 96)), W((384, 96)), W((384,))], [T((3136, 384))], transB=1)
    weights = 4 * (384 * 96 + 384)
    cost = Cost(flops=2 * 3136 * 96 * 384, bytes_read=4 * 3136 * 96 + weights, bytes_written=4 * 3136 * 384)
    pred, note = engine.predict_engine(gemm, cost, "fp32", dev)
    assert note.bias_pass_s == pytest.approx(2 * 4_816_896 / 10e9)
    # the product's own write of that output adds as much again (see the next test)
    assert pred.predicted_time_s == pytest.approx(2 * 3136 * 96 * 384 / 100e9 + 2 * 2 * 4_816_896 / 10e9 + 1e-6)
    # 196 rows: the 301,056 B output fits L2 (50 GB/s): 2 x 301,056 / 50e9 = 12.0 us.
    short = make_node("Gemm", [T((196, 96)), W((384, 96)), W((384,))], [T((196, 384))], transB=1)
    short_cost = Cost(flops=2 * 196 * 96 * 384, bytes_read=4 * 196 * 96 + weights, bytes_written=4 * 196 * 384)
    assert engine.predict_engine(short, short_cost, "fp32", dev)[1].bias_pass_s == pytest.approx(2 * 301_056 / 50e9)
    # No C, beta 0, or a MatMul: no pass.
    bare = make_node("Gemm", [T((3136, 96)), W((384, 96))], [T((3136, 384))], transB=1)
    assert engine.predict_engine(bare, cost, "fp32", dev)[1].bias_pass_s == 0.0
    unscaled = make_node("Gemm", [T((3136, 96)), W((384, 96)), W((384,))], [T((3136, 384))], transB=1, beta=0.0)
    assert engine.predict_engine(unscaled, cost, "fp32", dev)[1].bias_pass_s == 0.0
    matmul = make_node("MatMul", [T((3136, 96)), W((96, 384))], [T((3136, 384))])
    assert engine.predict_engine(matmul, cost, "fp32", dev)[1].bias_pass_s == 0.0
    # On 2 threads one thread writes C and both read it back through the shared L3 (20 GB/s here): one thread's
    # share, 10 GB/s, for any output, 2 x 301,056 / 10e9 = 60.2 us for the 196-row one; without an L3 bandwidth, its
    # own level's share (L2: 25 GB/s), 24.1 us.
    l3 = CacheLevel("L3", 8 * 1024 * 1024, 20e9, "calibrated: test", "shared")
    two = replace(calibrated_host(threads=2), caches=(*dev.caches[:2], l3))
    assert engine.predict_engine(short, short_cost, "fp32", two)[1].bias_pass_s == pytest.approx(2 * 301_056 / 10e9)
    two_without_l3 = calibrated_host(threads=2)
    assert engine.predict_engine(short, short_cost, "fp32", two_without_l3)[1].bias_pass_s == pytest.approx(
        2 * 301_056 / 25e9
    )
    # A short product's output is a few rows: no pass; nor on a GPU, where onnxruntime's CPU Gemm does not run.
    assert engine.bias_pass_time(gemm, dev, "gemm_short") == 0.0
    assert engine.bias_pass_time(gemm, replace(dev, kind="gpu"), "gemm") == 0.0


def test_a_recurrent_op_takes_the_network_factor_on_its_first_step_only():
    # 128 steps under a factor of 1.5: 1 + 0.5 / 128 on the whole op; any other class takes 1.5 as is.
    lstm = make_node("LSTM", [T((128, 1, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T((128, 1, 1, 256))])
    assert engine.step_network_factor(1.5, lstm, "lstm") == pytest.approx(1 + 0.5 / 128)
    assert engine.step_network_factor(1.5, conv(64, 64, 56, 3), "conv") == 1.5
    dev = replace(calibrated_host({"lstm": CONV}), network_factor=Sourced(1.5, "calibrated: test"))
    flops = 128 * 2 * 4 * 256 * (256 + 256)  # per step: four gates' products by the input and the hidden state
    cost = Cost(flops=flops, bytes_read=4e6, bytes_written=1e5, kernels=1)
    pred, note = engine.predict_engine(lstm, cost, "fp32", dev)
    alone, _ = engine.predict_engine(lstm, cost, "fp32", replace(dev, network_factor=None))
    assert pred.compute_time_s == pytest.approx(alone.compute_time_s * (1 + 0.5 / 128))
    assert note.network_factor == pytest.approx(1 + 0.5 / 128)


def test_a_recurrent_ops_input_projection_runs_at_its_products_ceiling():
    # An LSTM over 128 steps, input and hidden 256: the projection X W^T is one 128-row product of
    # 2 * 128 * 1024 * 256 = 67,108,864 FLOPs at the gemm ceiling (80% of the 100 GFLOP/s peak): 838.9 us. The
    # steps' 128 recurrent products, 2 * 1024 * 256 = 524,288 FLOPs each, run at the lstm ceiling (25%): 2,684.4 us.
    gemm = Ceiling(compute=((1e6, 0.8),), memory=(), source="calibrated: test gemm")
    lstm_ceiling = Ceiling(compute=((1e6, 0.25),), memory=(), source="calibrated: test lstm")
    dev = calibrated_host({"gemm": gemm, "lstm": lstm_ceiling})
    lstm = make_node("LSTM", [T((128, 1, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T((128, 1, 1, 256))])
    projection, steps = 2 * 128 * 1024 * 256, 128 * 2 * 1024 * 256
    cost = Cost(flops=projection + steps, bytes_read=4 * 2 * 1024 * 256, bytes_written=4 * 128 * 256, kernels=1)
    pred, note = engine.predict_engine(lstm, cost, "fp32", dev)
    assert note.projection_s == pytest.approx(projection / 80e9)
    assert pred.compute_time_s == pytest.approx(projection / 80e9 + steps / 25e9)
    assert "input projection 839 us as one product" in note.describe()
    # Without a gemm ceiling the projection runs at the peak.
    alone, _ = engine.predict_engine(lstm, cost, "fp32", calibrated_host({"lstm": lstm_ceiling}))
    assert alone.compute_time_s == pytest.approx(projection / 100e9 + steps / 25e9)


def test_a_recurrent_op_reads_its_weights_once_in_a_model_and_not_outside_one():
    # The LSTM above: W and R, 2 x 4 x 1024 x 256 = 2,097,152 B. Its ceiling is read on warm weights, so outside a
    # model nothing is added; in a model whose traffic gives a reuse of 2 they come once at 2 x 10 GB/s: 104.9 us
    # on top of the arithmetic (the projection at the 100 GFLOP/s peak, 671.1 us, and the steps at 25%, 2,684.4
    # us), whatever the number of steps that then run on them.
    lstm_ceiling = Ceiling(compute=((1e6, 0.25),), memory=(), source="calibrated: test lstm")
    dev = replace(calibrated_host({"lstm": lstm_ceiling}), weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test"))
    lstm = make_node("LSTM", [T((128, 1, 256)), W((1, 1024, 256)), W((1, 1024, 256))], [T((128, 1, 1, 256))])
    weights = 2 * 4 * 1024 * 256
    projection, steps = 2 * 128 * 1024 * 256, 128 * 2 * 1024 * 256
    cost = Cost(flops=projection + steps, bytes_read=weights + 4 * 128 * 256, bytes_written=4 * 128 * 256, kernels=1)
    alone, alone_note = engine.predict_engine(lstm, cost, "fp32", dev)
    assert alone_note.exposed_memory_s == 0.0
    assert alone.predicted_time_s == pytest.approx(projection / 100e9 + steps / 25e9 + 1e-6)
    in_model, note = engine.predict_engine(lstm, cost, "fp32", dev, traffic=1e6)
    assert note.exposed_memory_s == pytest.approx(weights / 20e9)
    assert in_model.predicted_time_s == pytest.approx(alone.predicted_time_s + weights / 20e9)


def test_an_input_written_long_before_is_read_from_the_level_its_distance_fits_in():
    # An Add of two 256 KiB inputs into a 256 KiB output: 786,432 B, in the hand-made host's L2 (1 MiB, 50 GB/s):
    # memory 786,432 / 50e9 = 15.73 us. One input was written 4 MB of traffic ago, past L2: it comes from DRAM
    # (10 GB/s), 262,144 / 10e9 = 26.21 us in place of 262,144 / 50e9 = 5.24 us, 20.97 us more.
    dev = calibrated_host()
    shape = (1, 64, 32, 32)  # 65,536 elements, 262,144 B
    add = make_node("Add", [T(shape), T(shape)], [T(shape)])
    cost = Cost(flops=65536, bytes_read=2 * 262144, bytes_written=262144, kernels=1)
    near, _ = engine.predict_engine(add, cost, "fp32", dev, reads=((262144, 0.0), (262144, 100e3)))
    far, note = engine.predict_engine(add, cost, "fp32", dev, reads=((262144, 0.0), (262144, 4e6)))
    assert near.memory_time_s == pytest.approx(786432 / 50e9)
    assert note.distant_s == pytest.approx(262144 / 10e9 - 262144 / 50e9)
    assert far.memory_time_s == pytest.approx(786432 / 50e9 + note.distant_s)
    assert "21 us more reading inputs written long before" in note.describe()
    # A shape-only node reads no data, however far back its input was written.
    shape_of = make_node("Shape", [T(shape)], [T((4,), INT64)])
    _, shape_note = engine.predict_engine(shape_of, Cost(bytes_written=32), "fp32", dev, reads=((262144, 4e6),))
    assert shape_note.distant_s == 0.0


def test_the_network_factor_scales_a_kernels_work_but_not_its_dispatch():
    """A factor f multiplies compute, memory and the traffic not hidden; the per-node overhead is paid as is."""
    dev = replace(
        calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE}),
        dram_overlap=Sourced(0.25, "calibrated: test"),
        network_factor=Sourced(1.5, "calibrated: test"),
    )
    view = conv(64, 64, 112, 3, out_hw=56)
    cost = Cost(flops=1e9, bytes_read=3e6, bytes_written=1e6, kernels=1)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    # As in the DRAM conv above, times 1.5: compute 1.5 * 1e9 / 90e9 = 16.667 ms, memory 1.5 * 400 us = 600 us,
    # a quarter of it hidden: 16.667 ms + 1 us + 0.75 * 600 us.
    assert pred.compute_time_s == pytest.approx(1.5e9 / 90e9) and pred.memory_time_s == pytest.approx(600e-6)
    assert pred.predicted_time_s == pytest.approx(1.5e9 / 90e9 + 1e-6 + 450e-6)
    assert pred.peak_flops_s == pytest.approx(90e9 / 1.5)  # the roof the kernel runs under in a network
    assert note.network_factor == 1.5 and "x1.5 in a network" in note.describe()
    # A shape-only node is dispatch alone: no factor.
    reshape = make_node("Reshape", [T((1, 64, 8, 8)), T((2,), INT64)], [T((64, 64))])
    flat, _ = engine.predict_engine(reshape, Cost(flops=0, bytes_read=0, bytes_written=0, kernels=1), "fp32", dev)
    assert flat.predicted_time_s == pytest.approx(1e-6)


def test_a_small_models_weights_are_read_at_the_calibrated_reuse_speedup():
    """Weights are charged at DRAM bandwidth times the device's weight-reuse speedup at the bytes the model moves a
    run; the activations keep their level's bandwidth, and a node predicted without that traffic reads its weights
    cold."""
    reuse = WeightReuse(((4e6, 2.5), (32e6, 1.0)), "calibrated: test")
    dev = replace(calibrated_host(), weight_reuse=reuse)
    # A 1 x 1024 by 1024 x 1024 MatMul: 2,097,152 FLOPs; reads 4 KiB of activation and 4 MiB of weight, writes
    # 4 KiB. Its 4.2 MB working set is past L2: the activations go at DRAM's 10 GB/s too (no ceiling: eff 1).
    gemv = make_node("MatMul", [T((1, 1024)), W((1024, 1024))], [T((1, 1024))])
    weights = 1024 * 1024 * 4
    cost = Cost(flops=2 * 1024 * 1024, bytes_read=4 * 1024 + weights, bytes_written=4 * 1024, kernels=1)
    activations = 2 * 4 * 1024
    # At a 16 MB traffic the speedup is interpolated in log(traffic): ln(16/4) / ln(32/4) = 2/3 of the way
    # from 2.5 to 1.0, i.e. 1.5; the weights go at 1.5 x 10 GB/s.
    pred, note = engine.predict_engine(gemv, cost, "fp32", dev, traffic=16e6)
    assert note.weight_speedup == pytest.approx(1.5)
    assert pred.memory_time_s == pytest.approx(activations / 10e9 + weights / 15e9)
    assert "at 1.5x DRAM's rate" in note.describe()
    # Below the first point the first speedup holds; beyond the last, the last (1: from DRAM).
    assert engine.predict_engine(gemv, cost, "fp32", dev, traffic=1e6)[1].weight_speedup == 2.5
    cold, cold_note = engine.predict_engine(gemv, cost, "fp32", dev, traffic=1e9)
    assert cold.memory_time_s == pytest.approx((activations + weights) / 10e9) and "from DRAM" in cold_note.describe()
    # No traffic, or no calibration of the reuse: cold weights.
    assert engine.predict_engine(gemv, cost, "fp32", dev)[1].weight_speedup == 1.0
    assert engine.predict_engine(gemv, cost, "fp32", calibrated_host(), traffic=1e6)[1].weight_speedup == 1.0
    # A node whose weights are under COLD_WEIGHTS (1 MiB) reads them as its ceiling was calibrated, warm: no speedup
    # (but a one-row product, whose ceiling is read cold: see the test above).
    small = make_node("MatMul", [T((32, 256)), W((256, 256))], [T((32, 256))])
    small_cost = Cost(
        flops=2 * 32 * 256 * 256, bytes_read=4 * 32 * 256 + 4 * 256 * 256, bytes_written=4 * 32 * 256, kernels=1
    )
    assert engine.predict_engine(small, small_cost, "fp32", dev, traffic=1e6)[1].weight_speedup == 1.0
    # A speedup is never below 1, whatever a table says.
    slower = replace(dev, weight_reuse=WeightReuse(((4e6, 0.8),), "calibrated: test"))
    assert engine.weight_speedup(slower, 4e6) == 1.0


def test_memory_bound_elementwise_closed_form():
    dev = calibrated_host({"elementwise": ELEMENTWISE})
    view = make_node("Relu", [T((1, 64, 16, 16))], [T((1, 64, 16, 16))])
    cost = Cost(flops=16384, bytes_read=65536, bytes_written=65536, kernels=1)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    # 131,072 B -> L2 (over L1's 32 KiB) at 50 GB/s; eff_m = 0.5 + 0.5 * log(131072/1e4) / log(1e6/1e4) = 0.7794
    eff = 0.5 + 0.5 * math.log(131072 / 1e4) / math.log(1e6 / 1e4)
    assert note.memory_efficiency == pytest.approx(eff)
    assert pred.memory_time_s == pytest.approx(131072 / (50e9 * eff))  # 3.364 us
    assert pred.compute_time_s == pytest.approx(16384 / 100e9)  # no compute ceiling for the class: full peak
    assert pred.predicted_time_s == pytest.approx(131072 / (50e9 * eff) + 1e-6)
    assert pred.bound == "memory"


def test_fallback_ceiling_is_named_in_the_note():
    dev = calibrated_host({"conv": CONV})
    pred, note = engine.predict_engine(
        conv(256, 64, 56, 1), Cost(flops=1e8, bytes_read=1e6, bytes_written=1e5), "fp32", dev
    )
    assert note.op_class == "conv1x1" and note.ceiling == "conv"
    assert pred.compute_time_s == pytest.approx(1e8 / 90e9)
    assert "via conv" in note.describe()


def test_a_stem_falls_back_to_the_conv_ceiling_on_a_profile_without_its_own():
    # A profile calibrated before stems had a class of their own predicts them as it did, under the conv ceiling:
    # 3->64 7x7 to 112x112, 1e8 FLOPs at 90% of a 100 GFLOP/s peak.
    dev = calibrated_host({"conv": CONV})
    stem = conv(3, 64, 224, 7, out_hw=112)
    pred, note = engine.predict_engine(stem, Cost(flops=1e8, bytes_read=1e6, bytes_written=1e5), "fp32", dev)
    assert note.op_class == "conv_stem" and note.ceiling == "conv"
    assert pred.compute_time_s == pytest.approx(1e8 / 90e9)


def test_shape_only_nodes_pay_the_per_node_overhead_only():
    dev = calibrated_host({"conv": CONV})
    view = make_node("Reshape", [T((1, 197, 768)), W((2,), INT64)], [T((197, 768))])
    pred, note = engine.predict_engine(view, Cost(), "fp32", dev)
    assert pred.predicted_time_s == 1e-6
    assert pred.bound == "overhead"
    assert note.op_class == op_classes.SHAPE and note.describe().startswith("shape-only")


def test_class_without_ceiling_uses_the_plain_roofline():
    dev = calibrated_host()
    view = make_node("LRN", [T((1, 96, 55, 55))], [T((1, 96, 55, 55))], size=5)
    cost = Cost(flops=1e6, bytes_read=1e6, bytes_written=1e6, kernels=1)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    # 2 MB does not fit the 1 MiB L2 and L3 has no bandwidth: DRAM, 2e6 / 10e9 = 200 us
    assert note.ceiling is None and note.level == "DRAM"
    assert pred.predicted_time_s == pytest.approx(2e6 / 10e9 + 1e-6)
    assert "no ceiling" in note.describe()


def test_a_datasheet_device_predicts_the_plain_serial_roofline():
    dev = load_device("colab-xeon-1core")
    view = conv(64, 64, 28, 3)
    cost = Cost(flops=2e8, bytes_read=3e6, bytes_written=2e5, kernels=1)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    plain = roofline.predict(cost, dev, "fp32")
    assert note.level == "DRAM" and note.ceiling is None
    assert pred.compute_time_s == pytest.approx(plain.compute_time_s)
    assert pred.memory_time_s == pytest.approx(plain.memory_time_s)
    assert pred.predicted_time_s == pytest.approx(plain.predicted_time_s)


def test_model_time_adds_the_run_overhead_once():
    dev = calibrated_host()
    assert engine.model_time([1e-3, 2e-3], dev) == pytest.approx(3e-3 + 5e-6)
    assert engine.model_time([], load_device("colab-xeon-1core")) == 0.0


def _clip_conv(hw: int) -> NodeView:
    """A 64 -> 64 3x3 NCHWc convolution on hw x hw fused with Clip (ReLU6), which onnxruntime applies in a second
    pass over the output."""
    return make_node(
        "Conv",
        [T((1, 64, hw, hw)), W((64, 64, 3, 3)), W((64,))],
        [T((1, 64, hw, hw))],
        domain=NCHWC,
        kernel_shape=[3, 3],
        activation="Clip",
        activation_params=[0.0, 6.0],
    )


def test_an_activation_other_than_relu_is_a_second_pass_over_the_output():
    dev = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})
    cost = Cost(flops=1e7, bytes_read=400_000, bytes_written=200_000, kernels=1)
    relu = make_node(
        "Conv",
        [T((1, 64, 28, 28)), W((64, 64, 3, 3)), W((64,))],
        [T((1, 64, 28, 28))],
        domain=NCHWC,
        kernel_shape=[3, 3],
        activation="Relu",
    )
    clip = _clip_conv(28)
    assert engine.epilogue_activation(relu) is None and engine.epilogue_activation(clip) == "Clip"
    base, _ = engine.predict_engine(relu, cost, "fp32", dev)
    pred, note = engine.predict_engine(clip, cost, "fp32", dev)
    # the output (200,704 B) is read and written again: 401,408 B moved, in L2 (50 GB/s) at the elementwise
    # ceiling's 0.5 + 0.5 * log(401408/1e4) / log(100) = 0.9009 -> 8.91 us on top of the Relu conv's time
    eff = 0.5 + 0.5 * math.log(401408 / 1e4) / math.log(100)
    assert pred.epilogue_time_s == pytest.approx(401408 / (50e9 * eff))
    assert pred.predicted_time_s == pytest.approx(base.predicted_time_s + 401408 / (50e9 * eff))
    assert base.epilogue_time_s == 0.0
    assert note.epilogue == "Clip" and "second pass" in note.describe()
    plain = make_node("Relu", [T((1, 64, 28, 28))], [T((1, 64, 28, 28))])
    assert engine.epilogue_activation(plain) is None
    assert engine.epilogue_time(relu, dev) == 0.0


def test_a_calibrated_epilogue_ceiling_replaces_the_elementwise_one_for_the_second_pass():
    epilogue = Ceiling(compute=(), memory=((1e5, 0.2), (1e7, 0.8)), source="calibrated: test epilogue")
    dev = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE, "epilogue": epilogue})
    clip = _clip_conv(28)
    # 401,408 B moved in L2 (50 GB/s) at the epilogue ceiling's 0.2 + 0.6 * log(401408/1e5) / log(100) = 0.3808
    eff = 0.2 + 0.6 * math.log(401408 / 1e5) / math.log(100)
    assert engine.epilogue_bytes(clip) == 401408
    assert engine.epilogue_time(clip, dev) == pytest.approx(401408 / (50e9 * eff))
    pred, _ = engine.predict_engine(clip, Cost(flops=1e7, bytes_read=400_000, bytes_written=200_000), "fp32", dev)
    assert pred.epilogue_time_s == pytest.approx(401408 / (50e9 * eff))
    # without an elementwise ceiling either, the pass streams at the level's full bandwidth
    assert engine.epilogue_time(clip, calibrated_host({"conv": CONV})) == pytest.approx(401408 / 50e9)


def test_the_second_pass_runs_in_the_level_its_outputs_fit_in_though_it_moves_them_twice():
    dev = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})
    clip = _clip_conv(56)
    # The output is 64 * 56 * 56 * 4 = 802,816 B: it fits the 1 MiB L2 (50 GB/s), the 1,605,632 B the pass reads and
    # writes do not. Rewritten in place, it stays in L2: 1,605,632 B at 50 GB/s and the elementwise ceiling's 1.0
    # (held beyond its 1e6 B point) = 32.1 us, where DRAM's 10 GB/s would give 160.6 us.
    assert engine.epilogue_bytes(clip) == 1_605_632
    assert engine.epilogue_time(clip, dev) == pytest.approx(1_605_632 / 50e9)


def test_an_output_larger_than_the_cores_cache_is_rewritten_there_a_block_at_a_time():
    clip = _clip_conv(224)
    # The output is 64 * 224 * 224 * 4 = 12,845,056 B, larger than the 1 MiB L2 (50 GB/s), the largest private
    # cache: the activation runs on each block of it while the block is in L2, so the 25,690,112 B the pass moves
    # stream at L2's 50 GB/s (the elementwise ceiling's 1.0 beyond its 1e6 B point) = 513.8 us, not DRAM's 10 GB/s
    # (2569 us).
    one = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE})
    assert engine.core_cache_bytes(one) == 1024 * 1024
    assert engine.epilogue_time(clip, one) == pytest.approx(25_690_112 / 50e9)
    # At 2 threads each core rewrites its share in its own L2: 2 MiB of private cache, the same level.
    two = calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE}, threads=2)
    assert engine.core_cache_bytes(two) == 2 * 1024 * 1024
    assert engine.epilogue_time(clip, two) == pytest.approx(25_690_112 / 50e9)
    # An output of 64 * 8 * 8 * 4 = 16,384 B fits the 32 KiB L1 (100 GB/s): 32,768 B moved at the elementwise
    # ceiling's 0.5 + 0.5 * log(32768/1e4) / log(100) = 0.6288 -> 0.521 us.
    eff = 0.5 + 0.5 * math.log(32768 / 1e4) / math.log(100)
    assert engine.epilogue_time(_clip_conv(8), one) == pytest.approx(32768 / (100e9 * eff))


@pytest.mark.parametrize(
    ("shape", "perm", "cls"),
    [
        ((1, 3, 80, 28, 28), [0, 2, 1, 3, 4], "transpose"),  # channel shuffle: axis 1 moved after axis 2
        ((1, 64, 56, 56), [0, 2, 3, 1], "transpose_inner"),  # NCHW -> NHWC: the channel axis moved to the end
        ((1, 56, 56, 64), [0, 3, 1, 2], "transpose_inner"),  # NHWC -> NCHW: the innermost axis moved to the front
        ((1, 12, 197, 64), [0, 2, 1, 3], "transpose"),  # attention heads: two neighbours swapped, rows kept whole
        ((1, 197, 12, 64), [0, 2, 3, 1], "transpose_inner"),  # a key transposed for its product: d moved forward
        ((64, 3, 49, 32), [0, 1, 3, 2], "transpose_batched"),  # Swin's keys: 64 x 3 matrices transposed one by one
        ((1, 12, 128, 64), [0, 1, 3, 2], "transpose_batched"),  # per-head keys: 12 matrices
        ((1, 8, 7, 8, 7, 96), [0, 1, 3, 2, 4, 5], "transpose"),  # Swin's window partition: rows of 7x96 kept
        ((1, 28, 28, 3, 80), [0, 4, 3, 1, 2], "transpose_generic"),  # the shuffle in channels-last: three axes move
        ((1, 28, 28, 240), [0, 3, 2, 1], "transpose_generic"),  # H and W swapped and C moved
        ((1, 1, 28, 240), [0, 3, 2, 1], "transpose_inner"),  # the same with H of size 1: only C moves, from last
        ((8, 16, 32), None, "transpose_generic"),  # no perm: the axes reversed, two of them moved
        ((8, 16), None, "transpose_inner"),  # a 2-D transpose moves one axis, the innermost
    ],
)
def test_a_transpose_is_classed_by_the_axes_it_moves(shape, perm, cls):
    attrs = {} if perm is None else {"perm": perm}
    view = make_node("Transpose", [T(shape)], [T(None)], **attrs)
    assert op_classes.op_class(view) == cls


def test_a_dilated_convolution_is_charged_the_taps_inside_its_input():
    # DeepLab's ASPP branch at 1/16 of a 224 input: 960 -> 256 channels, 3x3, dilation 12, pad 12, 14x14. Of the
    # 9 taps of an output position, 18/42 per axis read the input (see taps_inside's test): onnxruntime's NCHWc
    # kernel computes those only. A flat ceiling (0.6 of the 100 GFLOP/s peak) isolates the share.
    flat = Ceiling(compute=((1e6, 0.6), (1e10, 0.6)), memory=(), source="calibrated: test flat conv")
    dev = calibrated_host({"conv_mid": flat})
    view = conv(960, 256, 14, 3, pad=12, dilation=12)
    flops = 2 * 256 * 960 * 9 * 14 * 14  # every tap, as counted
    cost = Cost(flops=flops, bytes_read=1e6, bytes_written=2e5, kernels=1)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    assert note.op_class == "conv_border" and note.ceiling == "conv_mid"  # a device without its class's ceiling
    assert pred.compute_time_s == pytest.approx(flops * (18 / 42) ** 2 / (100e9 * 0.6))
    # Without a ceiling (as the calibration reads one) the kernel still computes only those taps: a ceiling read
    # there as the roofline time over the measured time gives back the measured time when it is applied.
    bare, _ = engine.predict_engine(view, cost, "fp32", calibrated_host())
    assert bare.compute_time_s == pytest.approx(flops * (18 / 42) ** 2 / 100e9)


def test_a_streaming_kernel_writes_into_lines_the_node_before_pushed_out_of_its_level():
    # The hand-made host: L2 1 MiB at 50 GB/s, no L3 bandwidth, DRAM 10 GB/s. An Add of two 1x64x32x32 fp32
    # tensors (256 KiB each) into a third: working set 786,432 B, in L2. After a node whose working set is 1 MiB,
    # the two no longer fit L2 together: the output's 262,144 bytes are read from DRAM before they are written
    # and written back there, 2 x 262,144 / 10e9 = 52.43 us. After a 100 kB node both fit L2: nothing.
    dev = calibrated_host({"elementwise": ELEMENTWISE})
    assert engine.write_allocate_time(dev, "elementwise", 786432, 2**20, 262144) == pytest.approx(2 * 262144 / 10e9)
    assert engine.write_allocate_time(dev, "elementwise", 786432, 100_000, 262144) == 0.0
    assert engine.write_allocate_time(dev, "elementwise", 786432, 0.0, 262144) == 0.0  # nothing ran before
    # a convolution computes while its output streams out: not a streaming class
    assert engine.write_allocate_time(dev, "conv", 786432, 2**20, 262144) == 0.0
    t = T((1, 64, 32, 32))
    add = make_node("Add", [t, t], [t])
    cost = Cost(flops=65536, bytes_read=524288, bytes_written=262144, kernels=1)
    alone, _ = engine.predict_engine(add, cost, "fp32", dev)
    after, note = engine.predict_engine(add, cost, "fp32", dev, after=2**20)
    assert note.write_allocate_s == pytest.approx(2 * 262144 / 10e9)
    assert after.predicted_time_s - alone.predicted_time_s == pytest.approx(note.write_allocate_s)
    assert "us writing over lines the node before pushed out of L2" in note.describe()


def test_a_compute_bound_convolution_waits_for_the_calibrated_share_of_its_weights_read():
    """conv_weight_wait: the share of its weights' read a dense convolution's time grows by when they come from
    memory, outside a model for cold weights only (as the calibration reads them), in a model from where the
    model's traffic leaves them."""
    wait = WeightWait(((1e5, 0.5), (1e7, 0.5)), "calibrated: test")
    dev = replace(calibrated_host(), conv_weight_wait=wait)
    # MobileNetV2's last-stage 1x1 on a 7x7 map, 1024 -> 256: 2 * 1024 * 256 * 49 = 25,690,112 FLOPs take 256.9 us
    # at 100 GFLOP/s; 4 * (1024 * 256 + 256) = 1,049,600 B of weights and bias (past COLD_WEIGHTS), 200,704 B in and
    # 50,176 B out: 1,300,480 B past the 1 MiB L2, all at DRAM's 10 GB/s: 130.0 us, under the arithmetic.
    big = conv(1024, 256, 7, 1)
    weights = 4 * (1024 * 256 + 256)
    big_cost = Cost(flops=2 * 1024 * 256 * 49, bytes_read=200_704 + weights, bytes_written=50_176, kernels=1)
    pred, note = engine.predict_engine(big, big_cost, "fp32", dev)
    assert note.op_class == "conv1x1" and pred.compute_time_s > pred.memory_time_s
    # read cold: half of 1,049,600 B at 10 GB/s = 52.5 us on top of the arithmetic
    assert note.exposed_memory_s == pytest.approx(0.5 * weights / 10e9)
    assert pred.predicted_time_s == pytest.approx(25_690_112 / 100e9 + 0.5 * weights / 10e9 + 1e-6)
    # in a model whose traffic gives a reuse of 2, half of them at 20 GB/s: 26.2 us
    reused = replace(dev, weight_reuse=WeightReuse(((1e6, 2.0),), "calibrated: test"))
    assert engine.predict_engine(big, big_cost, "fp32", reused, traffic=1e6)[1].exposed_memory_s == pytest.approx(
        0.5 * weights / 20e9
    )
    # without the calibrated share, none (the ceiling then carries the weights' read as its samples had it)
    assert engine.predict_engine(big, big_cost, "fp32", calibrated_host())[1].exposed_memory_s == 0.0
    # A 128 -> 128 3x3 on 28x28: 4 * (128 * 128 * 9 + 128) = 590,336 B of weights, under COLD_WEIGHTS: read warm by
    # the calibration, so nothing outside a model; in one, half of them at 20 GB/s = 14.8 us.
    small = conv(128, 128, 28, 3, pad=1)
    small_weights = 4 * (128 * 128 * 9 + 128)
    acts = 4 * 128 * 28 * 28
    small_cost = Cost(flops=2 * 128 * 128 * 9 * 784, bytes_read=acts + small_weights, bytes_written=acts, kernels=1)
    assert engine.predict_engine(small, small_cost, "fp32", dev)[1].exposed_memory_s == 0.0
    in_model = engine.predict_engine(small, small_cost, "fp32", reused, traffic=1e6)[1]
    assert in_model.exposed_memory_s == pytest.approx(0.5 * small_weights / 20e9)
    # A depthwise convolution is no dense one: no wait, whatever its weights.
    assert engine.exposed_weight_time(dev, "depthwise", weights, 1e-4) == 0.0


def test_a_products_stalls_count_while_its_arithmetic_with_them_outlasts_its_memory_time():
    """max(compute + stalls, memory): the prediction moves continuously as the ceilings move a product from its
    arithmetic's side to its memory's, where the stalls once came and went at once."""
    # 49 x 768 by 768 x 3072 (wav2vec2's MLP at 49 frames), a MatMul: 2 * 49 * 768 * 3072 = 231,211,008 FLOPs.
    # Weights 768 * 3072 * 4 = 9,437,184 B, read at DRAM's 10 GB/s: 943.7 us, the stall of a product by cold
    # weights (exposed_weight_time). Input 150,528 B and output 602,112 B; the working set (10,189,824 B) is past
    # the 1 MiB L2, so the output is read and written at DRAM's rate too (output_write_time): 2 * 602,112 / 10e9 =
    # 120.4 us. Stalls: 1064.1 us. Memory time: 10,189,824 B at 10 GB/s = 1019.0 us.
    flops, weights, acts = 2 * 49 * 768 * 3072, 768 * 3072 * 4, (49 * 768 + 49 * 3072) * 4
    view = make_node("MatMul", [T((49, 768)), W((768, 3072))], [T((49, 3072))])
    cost = Cost(flops=flops, bytes_read=weights + 49 * 768 * 4, bytes_written=49 * 3072 * 4, kernels=1)
    stalls, memory = weights / 10e9 + 2 * 602_112 / 10e9, (weights + acts) / 10e9

    def predicted(peak: float) -> tuple[float, float]:
        dev = replace(calibrated_host(), peak_flops=FrozenMap({"fp32": Peak(peak, True, "calibrated: test")}))
        pred, note = engine.predict_engine(view, cost, "fp32", dev)
        return pred.predicted_time_s, note.exposed_memory_s

    # At 100 GFLOP/s the arithmetic takes 2312.1 us, past the memory time: arithmetic + stalls + 1 us of dispatch.
    assert predicted(100e9) == pytest.approx((flops / 100e9 + stalls + 1e-6, stalls))
    # Arithmetic a hair under and over the memory time (1019 us): the prediction hardly moves (arithmetic + stalls
    # both times), where the stalls once vanished below it.
    below, above = predicted(flops / (memory * 0.99)), predicted(flops / (memory * 1.01))
    assert below == (pytest.approx(memory * 0.99 + stalls + 1e-6), pytest.approx(stalls))
    assert above == (pytest.approx(memory * 1.01 + stalls + 1e-6), pytest.approx(stalls))
    # Arithmetic so fast that even with the stalls it ends before the memory: the memory time alone.
    assert predicted(flops / (memory - stalls - 10e-6)) == (pytest.approx(memory + 1e-6), 0.0)
