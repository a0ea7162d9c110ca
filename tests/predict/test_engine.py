"""Engine-aware prediction: op classes, memory levels, ceilings and the closed-form time of a node under the
roofline's own terms (arithmetic, activations, weights, dispatch); each correction term has its class in
test_engine_terms.py, the combine rule and the profiles are in test_engine_combine.py."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from onnxroof.costs import Cost
from onnxroof.devices import (
    OP_CLASSES,
    Ceiling,
    Sourced,
    load_device,
)
from onnxroof.predict import engine, levels, op_classes, roofline
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
    cost_of,
    gqa,
    make_node,
    nbits,
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
        "conv_mid",
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
    # 4-bit weights: one row and 128, at accuracy_level 0 (fp32 products) and 4 (int8)
    (nbits(1, 896, 4864, 0), "gemv_nbits"),
    (nbits(128, 896, 896, 0), "gemm_nbits"),
    (nbits(1, 896, 4864, 4), "gemv_nbits_int8"),
    (nbits(128, 896, 896, 4), "gemm_nbits_int8"),
    # GroupQueryAttention: a decode step, a prefill
    (gqa(14, 2, 1024), "attention_decode"),
    (gqa(14, 2, 0, 128), "attention"),
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
    (make_node("Pow", [T((1, 128, 512)), W(())], [T((1, 128, 512))], constants={1: 2.0}), "pow_multiplied"),
    (make_node("Pow", [T((1, 128, 3072)), W(())], [T((1, 128, 3072))], constants={1: 3.0}), "pow_multiplied"),
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
    (make_node("Transpose", [T((1, 197, 12, 64))], [T((1, 12, 197, 64))], perm=[0, 2, 1, 3]), "movement"),
    (make_node("Transpose", [T((1, 197, 12, 64))], [T((1, 12, 64, 197))], perm=[0, 2, 3, 1]), "transpose_inner"),
    (make_node("Transpose", [T((16, 6, 49, 32))], [T((16, 6, 32, 49))], perm=[0, 1, 3, 2]), "transpose_batched"),
    (
        make_node("Transpose", [T((1, 28, 28, 3, 80))], [T((1, 80, 3, 28, 28))], perm=[0, 4, 3, 1, 2]),
        "transpose_generic",
    ),
    (make_node("ReorderInput", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))], domain=NCHWC), "reorder"),
    (make_node("ReorderOutput", [T((1, 64, 56, 56))], [T((1, 64, 56, 56))], domain=NCHWC, channels=64), "reorder"),
    # Every reorder is one class, onto short planes too (tools/ablation.py: a class of its own bought nothing).
    (
        make_node("ReorderOutput", [T((1, 768, 14, 14))], [T((1, 768, 14, 14))], domain=NCHWC, channels=768),
        "reorder",
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
    (make_node("Cast", [T((1, 64, 56, 56))], [T((1, 64, 56, 56), FLOAT16)], to=FLOAT16), "elementwise"),
    (make_node("Cast", [T((1, 64, 56, 56), INT32)], [T((1, 64, 56, 56))], to=1), "elementwise"),
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
    assert levels.memory_level(dev, 0) == ("L1d", 100e9)
    assert levels.memory_level(dev, 32 * 1024) == ("L1d", 100e9)  # fits exactly
    assert levels.memory_level(dev, 32 * 1024 + 1) == ("L2", 50e9)
    assert levels.memory_level(dev, 1024 * 1024) == ("L2", 50e9)
    # L3 has no measured bandwidth: skipped, the next level is DRAM
    assert levels.memory_level(dev, 1024 * 1024 + 1) == ("DRAM", 10e9)


def test_private_caches_count_once_per_calibrated_thread():
    dev = calibrated_host(threads=2)
    assert levels.memory_level(dev, 64 * 1024) == ("L1d", 100e9)
    assert levels.memory_level(dev, 64 * 1024 + 1) == ("L2", 50e9)


def test_working_set_and_weight_bytes():
    view = conv(64, 64, 28, 3)
    cost = Cost(flops=1e7, bytes_read=400_000, bytes_written=200_000)
    assert levels.working_set(view, cost) == 600_000
    assert levels.weight_bytes(view, cost) == (64 * 64 * 9 + 64) * 4  # both weights, each once
    assert levels.weight_bytes(view, Cost(bytes_read=1000)) == 1000  # never more than the node reads


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


# attention_decode read by one head's work: 10% of the peak at 1e5 FLOPs a head, 20% at 1e6; half the level's
# bandwidth at any bytes
DECODE = Ceiling(compute=((1e5, 0.1), (1e6, 0.2)), memory=((1e3, 0.5), (1e9, 0.5)), source="calibrated: test")


def test_a_gqa_decode_step_is_its_heads_products_at_the_attention_decode_ceiling():
    dev = calibrated_host({"attention_decode": DECODE})
    view = gqa(14, 2, 1024)
    cost = cost_of(view)
    # 14 heads over 1025 rows of 64: 2 * 2*14*1025*64 = 3,673,600 FLOPs of products + 6 * 14 * 1025 = 86,100 of
    # scale and softmax; reads Q, K, V (3584 + 512 + 512 B), both pasts (2 * 1024*2*64*4 = 1,048,576 B) and the
    # two int32 lengths, writes the output (3584 B) and both presents (2 * 1025*2*64*4 = 1,049,600 B)
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (3_759_700, 1_053_192, 1_053_184)
    pred, note = engine.predict_engine(view, cost, "fp32", dev)
    assert note.op_class == "attention_decode" and note.ceiling == "attention_decode"
    # one head: 3,759,700 / 14 = 268,550 FLOPs, eff 0.1 + 0.1 * log10(2.6855) = 0.142903: 263.09 us of compute;
    # the 2,106,376 B working set is past L2, at DRAM's 10 GB/s and half of it: 421.28 us of memory
    eff = 0.1 + 0.1 * math.log10(3_759_700 / 14 / 1e5)
    compute, memory = 3_759_700 / (100e9 * eff), 2_106_376 / (10e9 * 0.5)
    assert pred.compute_time_s == pytest.approx(compute) and pred.memory_time_s == pytest.approx(memory)
    # serial: max(263.09, 421.28) + 1 us of dispatch = 422.28 us
    assert pred.predicted_time_s == pytest.approx(memory + 1e-6)
    # with the cache read at the level's full rate (no memory table) the heads' products bound it: 264.09 us
    full = calibrated_host({"attention_decode": replace(DECODE, memory=())})
    assert engine.predict_engine(view, cost, "fp32", full)[0].predicted_time_s == pytest.approx(compute + 1e-6)


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


@pytest.mark.parametrize(
    ("shape", "perm", "cls"),
    [
        ((1, 3, 80, 28, 28), [0, 2, 1, 3, 4], "movement"),  # channel shuffle: axis 1 moved after axis 2
        ((1, 64, 56, 56), [0, 2, 3, 1], "transpose_inner"),  # NCHW -> NHWC: the channel axis moved to the end
        ((1, 56, 56, 64), [0, 3, 1, 2], "transpose_inner"),  # NHWC -> NCHW: the innermost axis moved to the front
        ((1, 12, 197, 64), [0, 2, 1, 3], "movement"),  # attention heads: two neighbours swapped, rows kept whole
        ((1, 197, 12, 64), [0, 2, 3, 1], "transpose_inner"),  # a key transposed for its product: d moved forward
        ((64, 3, 49, 32), [0, 1, 3, 2], "transpose_batched"),  # Swin's keys: 64 x 3 matrices transposed one by one
        ((1, 12, 128, 64), [0, 1, 3, 2], "transpose_batched"),  # per-head keys: 12 matrices
        ((1, 8, 7, 8, 7, 96), [0, 1, 3, 2, 4, 5], "movement"),  # Swin's window partition: rows of 7x96 kept
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
    assert note.op_class == "conv_mid" and note.ceiling == "conv_mid"
    assert pred.compute_time_s == pytest.approx(flops * (18 / 42) ** 2 / (100e9 * 0.6))
    # Without a ceiling (as the calibration reads one) the kernel still computes only those taps: a ceiling read
    # there as the roofline time over the measured time gives back the measured time when it is applied.
    bare, _ = engine.predict_engine(view, cost, "fp32", calibrated_host())
    assert bare.compute_time_s == pytest.approx(flops * (18 / 42) ** 2 / 100e9)
