"""Convolution costs, each checked against a closed form derived from the op's definition.

Conventions used throughout: MACs = N * C_out * prod(out_spatial) * (C_in/group) * prod(kernel); FLOPs = 2 * MACs
plus the stated per-output-element constants; float is 4 bytes, int8/uint8 1, int32 4.
"""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from onnxroof.costs import Cost, NodeView
from onnxroof.costs.common import ACTIVATION_FLOPS
from onnxroof.costs.conv import conv_output_spatial, conv_transpose_output_spatial
from onnxroof.ir import Tensor, UnknownShape
from tests.helpers import FLOAT, INT8, INT32, UINT8, T, W, cost_of, make_node

MS = "com.microsoft"
UNDEFINED = TensorProto.UNDEFINED  # the element type a contrib op's output has when shape inference skipped it


def conv_node(x: list[int], w: list[int], y: list[int] | None, b: list[int] | None = None, **attrs) -> NodeView:
    """A standard Conv with a runtime input X and weights W (and B); ``y=None`` leaves the output shape unknown."""
    inputs = [T(x), W(w)] + ([W(b)] if b is not None else [])
    return make_node("Conv", inputs, [T(y) if y is not None else T(None, UNDEFINED)], **attrs)


# ---------------------------------------------------------------------------------------------------------
# Conv


def test_conv_basic_no_bias():
    # X [1,64,56,56], W [64,64,3,3], pads 1 -> Y [1,64,56,56]
    c = cost_of(conv_node([1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 56, 56], pads=[1, 1, 1, 1]))
    assert c.macs == 1 * 64 * 56 * 56 * 64 * 3 * 3  # = 115605504
    assert c.flops == 2 * 1 * 64 * 56 * 56 * 64 * 3 * 3  # = 231211008
    assert c.bytes_read == 4 * (64 * 56 * 56 + 64 * 64 * 3 * 3)  # X + W = 4 * (200704 + 36864) = 950272
    assert c.bytes_written == 4 * 64 * 56 * 56  # = 802816
    assert c.params == 64 * 64 * 3 * 3  # = 36864
    assert c.kernels == 1


def test_conv_basic_with_bias():
    c = cost_of(conv_node([1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 56, 56], b=[64], pads=[1, 1, 1, 1]))
    assert c.macs == 115605504  # unchanged by the bias
    # 2*MACs + one add per output element: 231211008 + 64*56*56 = 231211008 + 200704 = 231411712
    assert c.flops == 2 * 115605504 + 64 * 56 * 56
    assert c.bytes_read == 950272 + 4 * 64  # + bias = 950528
    assert c.bytes_written == 802816
    assert c.params == 36864 + 64  # = 36928


def test_grouped_conv():
    # group 4: 32 in channels -> 8 per group; W [64, 32/4, 3, 3]; Y [1,64,28,28]
    c = cost_of(conv_node([1, 32, 28, 28], [64, 8, 3, 3], [1, 64, 28, 28], pads=[1, 1, 1, 1], group=4))
    assert c.macs == 1 * 64 * 28 * 28 * (32 // 4) * 3 * 3  # = 3612672
    assert c.flops == 2 * 3612672
    assert c.params == 64 * 8 * 3 * 3  # = 4608


def test_depthwise_conv_stride2():
    # depthwise: group = C = 32, W [32, 1, 3, 3], stride 2 -> Y [1,32,56,56]
    c = cost_of(
        conv_node([1, 32, 112, 112], [32, 1, 3, 3], [1, 32, 56, 56], pads=[1, 1, 1, 1], strides=[2, 2], group=32)
    )
    assert c.macs == 1 * 32 * 56 * 56 * 1 * 3 * 3  # = 903168
    assert c.flops == 2 * 903168  # = 1806336
    assert c.bytes_read == 4 * (32 * 112 * 112 + 32 * 9)  # = 4 * (401408 + 288) = 1606784
    assert c.bytes_written == 4 * 32 * 56 * 56  # = 401408


def test_dilation_computed_output():
    # dilation 2 widens a 3x3 kernel to 2*(3-1)+1 = 5: no padding -> out = (32 - 5)//1 + 1 = 28
    c = cost_of(conv_node([1, 16, 32, 32], [16, 16, 3, 3], None, dilations=[2, 2]))
    assert c.macs == 16 * 28 * 28 * 16 * 3 * 3  # = 1806336
    assert c.bytes_written == 4 * 16 * 28 * 28  # = 50176, written to the computed float output


def test_strides_pads_resnet_stem():
    # 7x7/2, pads 3 on 224x224: out = (224 + 3 + 3 - 7)//2 + 1 = 112 (ResNet-50's first conv, ~118M MACs)
    c = cost_of(conv_node([1, 3, 224, 224], [64, 3, 7, 7], None, pads=[3, 3, 3, 3], strides=[2, 2]))
    assert c.macs == 64 * 112 * 112 * 3 * 7 * 7  # = 118013952
    assert c.bytes_written == 4 * 64 * 112 * 112  # = 3211264


@pytest.mark.parametrize(
    "attrs, out",
    [
        # X 15x15, kernel 4x4, stride 2
        ({"auto_pad": "SAME_UPPER"}, 8),  # ceil(15/2) = 8
        ({"auto_pad": "SAME_LOWER"}, 8),  # ceil(15/2) = 8
        ({"auto_pad": "VALID"}, 6),  # (15 - 4)//2 + 1 = 6
        ({"auto_pad": "NOTSET", "pads": [1, 1, 2, 2]}, 8),  # (15 + 1 + 2 - 4)//2 + 1 = 8
        ({"pads": [0, 0, 1, 1]}, 7),  # (15 + 0 + 1 - 4)//2 + 1 = 7
        ({}, 6),  # no auto_pad and no pads: (15 - 4)//2 + 1 = 6
    ],
)
def test_auto_pad_modes_unknown_output(attrs, out):
    c = cost_of(conv_node([1, 8, 15, 15], [4, 8, 4, 4], None, strides=[2, 2], **attrs))
    assert c.macs == 4 * out * out * 8 * 4 * 4  # C_out * out^2 * C_in * k^2
    assert c.bytes_written == 4 * 4 * out * out


def test_auto_pad_attribute_as_bytes():
    # onnx stores string attributes as bytes; either form is accepted
    c = cost_of(conv_node([1, 8, 15, 15], [4, 8, 4, 4], None, strides=[2, 2], auto_pad=b"SAME_UPPER"))
    assert c.macs == 4 * 8 * 8 * 8 * 4 * 4  # ceil(15/2) = 8


def test_conv_1d():
    # X [2,16,100], W [32,16,5], pads 2 -> out = (100 + 4 - 5)//1 + 1 = 100
    c = cost_of(conv_node([2, 16, 100], [32, 16, 5], None, b=[32], pads=[2, 2]))
    assert c.macs == 2 * 32 * 100 * 16 * 5  # = 512000
    assert c.flops == 2 * 512000 + 2 * 32 * 100  # + bias adds = 1030400
    assert c.bytes_written == 4 * 2 * 32 * 100  # = 25600


def test_conv_3d():
    # X [1,4,8,16,16], W [8,4,3,3,3], pads 1, strides [1,2,2]:
    # D: (8 + 2 - 3)//1 + 1 = 8; H, W: (16 + 2 - 3)//2 + 1 = 8
    c = cost_of(conv_node([1, 4, 8, 16, 16], [8, 4, 3, 3, 3], None, b=[8], pads=[1] * 6, strides=[1, 2, 2]))
    assert c.macs == 8 * 8 * 8 * 8 * 4 * 27  # = 442368
    assert c.flops == 2 * 442368 + 8 * 8 * 8 * 8  # + bias = 884736 + 4096 = 888832
    assert c.bytes_written == 4 * 8 * 8 * 8 * 8  # = 16384


def test_kernel_shape_attribute_matches_weight():
    c = cost_of(conv_node([1, 8, 10, 10], [8, 8, 3, 3], None, kernel_shape=[3, 3]))
    assert c.macs == 8 * 8 * 8 * 8 * 9  # out = 10 - 3 + 1 = 8: 36864


def test_unknown_input_shape_raises():
    with pytest.raises(UnknownShape):
        cost_of(make_node("Conv", [T(None), W([8, 8, 3, 3])], [T(None)]))
    with pytest.raises(UnknownShape):
        cost_of(make_node("Conv", [T([1, 8, 10, 10]), T(None)], [T(None)]))


@pytest.mark.parametrize(
    "x, k, attrs",
    [
        ([1, 3, 15, 17], [3, 3], {"strides": [2, 3], "pads": [1, 0, 2, 1]}),
        ([1, 3, 15, 17], [4, 2], {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ([1, 3, 15, 17], [4, 2], {"strides": [3, 2], "auto_pad": "SAME_LOWER", "dilations": [2, 1]}),
        ([1, 3, 15, 17], [3, 5], {"strides": [2, 3], "auto_pad": "VALID", "dilations": [2, 2]}),
        ([1, 3, 9, 10, 11], [3, 2, 3], {"strides": [1, 2, 3], "pads": [1, 0, 1, 1, 0, 2]}),
    ],
)
def test_output_spatial_agrees_with_onnx_shape_inference(x, k, attrs):
    """Cross-check the Conv output-size formula against onnx's own shape inference (an independent reference)."""
    w = [4, x[1], *k]
    node = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", FLOAT, x), helper.make_tensor_value_info("w", FLOAT, w)],
        [helper.make_tensor_value_info("y", FLOAT, None)],
    )
    inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph), strict_mode=True)
    dims = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    ours = conv_output_spatial(
        x[2:],
        k,
        strides=attrs.get("strides"),
        dilations=attrs.get("dilations"),
        pads=attrs.get("pads"),
        auto_pad=attrs.get("auto_pad", "NOTSET"),
    )
    assert tuple(dims[2:]) == ours


# ---------------------------------------------------------------------------------------------------------
# ConvTranspose


def test_conv_transpose_stride_group_bias():
    # X [1,16,8,8], W [C_in=16, C_out/group=8, 4, 4], group 2 -> C_out = 16; stride 2, pads 1:
    # out = 2*(8-1) + (4-1) + 1 - 1 - 1 = 16
    node = make_node(
        "ConvTranspose",
        [T([1, 16, 8, 8]), W([16, 8, 4, 4]), W([16])],
        [T(None)],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        group=2,
    )
    c = cost_of(node)
    # every input pixel scatters into a 4x4 window of its group's 8 output channels: N*C_in*H*W*(C_out/g)*k*k
    assert c.macs == 1 * 16 * 8 * 8 * 8 * 4 * 4  # = 131072
    assert c.flops == 2 * 131072 + 16 * 16 * 16  # + one bias add per output element = 262144 + 4096 = 266240
    assert c.bytes_read == 4 * (16 * 8 * 8 + 16 * 8 * 4 * 4 + 16)  # = 4 * (1024 + 2048 + 16) = 12352
    assert c.bytes_written == 4 * 16 * 16 * 16  # = 16384
    assert c.params == 16 * 8 * 4 * 4 + 16  # = 2064


@pytest.mark.parametrize(
    "attrs, out",
    [
        ({"strides": [2, 2], "output_padding": [1, 1]}, 2 * (8 - 1) + 1 + 3 + 1),  # = 19
        ({"strides": [2, 2], "output_shape": [20, 20]}, 20),  # given
        ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, 8 * 2),  # in * stride = 16
        ({"strides": [3, 3], "dilations": [2, 2]}, 3 * (8 - 1) + 2 * 3 + 1),  # dilated window 2*(4-1)+1 = 7: 28
    ],
)
def test_conv_transpose_output_size(attrs, out):
    node = make_node("ConvTranspose", [T([1, 16, 8, 8]), W([16, 4, 4, 4])], [T(None)], **attrs)
    c = cost_of(node)
    assert c.macs == 16 * 8 * 8 * 4 * 4 * 4  # independent of the output size: 65536
    assert c.bytes_written == 4 * 4 * out * out  # C_out = 4


def test_conv_transpose_output_spatial_agrees_with_onnx_shape_inference():
    attrs = {"strides": [2, 3], "pads": [1, 0, 2, 1], "output_padding": [1, 2], "dilations": [1, 2]}
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", FLOAT, [1, 3, 7, 9]),
            helper.make_tensor_value_info("w", FLOAT, [3, 2, 3, 4]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, None)],
    )
    inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph), strict_mode=True)
    dims = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    assert tuple(dims[2:]) == conv_transpose_output_spatial([7, 9], [3, 4], **attrs)


# ---------------------------------------------------------------------------------------------------------
# Integer and quantized convs (1 byte per int8/uint8 element)


def test_conv_integer_bytes():
    node = make_node(
        "ConvInteger",
        [T([1, 16, 10, 10], UINT8), W([32, 16, 3, 3], INT8), W([], UINT8), W([], INT8)],
        [T([1, 32, 8, 8], INT32)],
    )
    c = cost_of(node)
    assert c.macs == 32 * 8 * 8 * 16 * 3 * 3  # = 294912
    assert c.flops == 2 * 294912  # = 589824: zero points folded into the integer accumulation
    assert c.bytes_read == 16 * 10 * 10 + 32 * 16 * 3 * 3 + 1 + 1  # 1 byte each: 1600 + 4608 + 2 = 6210
    assert c.bytes_written == 4 * 32 * 8 * 8  # int32 output = 8192
    assert c.params == 4608 + 1 + 1  # = 4610


def qlinear_conv_inputs(x_shape: list[int]) -> list[Tensor]:
    return [
        T(x_shape, UINT8),  # x
        W([], FLOAT),  # x_scale
        W([], UINT8),  # x_zero_point
        W([32, 16, 3, 3], INT8),  # w
        W([32], FLOAT),  # w_scale, per output channel
        W([32], INT8),  # w_zero_point
        W([], FLOAT),  # y_scale
        W([], UINT8),  # y_zero_point
        W([32], INT32),  # B
    ]


def test_qlinear_conv_bytes_and_requant():
    c = cost_of(make_node("QLinearConv", qlinear_conv_inputs([1, 16, 10, 10]), [T([1, 32, 8, 8], UINT8)]))
    assert c.macs == 294912  # 32*8*8*16*3*3
    # 2*MACs + (requantize 2: scale multiply and zero-point add, rounding and saturation free; int32 bias add 1)
    # per output element: 589824 + 3*2048 = 595968
    assert c.flops == 2 * 294912 + (2 + 1) * 32 * 8 * 8
    # x 1600 + x_scale 4 + x_zp 1 + w 4608 + w_scale 128 + w_zp 32 + y_scale 4 + y_zp 1 + B 128 = 6506
    assert c.bytes_read == 1600 + 4 + 1 + 4608 + 4 * 32 + 32 + 4 + 1 + 4 * 32
    assert c.bytes_written == 32 * 8 * 8  # uint8 = 2048
    assert c.params == 1 + 1 + 4608 + 32 + 32 + 1 + 1 + 32  # every weight element = 4708


def test_qlinear_conv_without_bias():
    inputs = qlinear_conv_inputs([1, 16, 10, 10])[:8]
    c = cost_of(make_node("QLinearConv", inputs, [T([1, 32, 8, 8], UINT8)]))
    assert c.flops == 2 * 294912 + 2 * 2048  # requantize only = 593920


def test_ms_qlinear_conv_channels_last_computed_output():
    # NHWC x [1,10,10,16] -> y [1,8,8,32] uint8, computed; its type comes from x
    node = make_node(
        "QLinearConv", qlinear_conv_inputs([1, 10, 10, 16]), [T(None, UNDEFINED)], domain=MS, channels_last=1
    )
    c = cost_of(node)
    assert c.macs == 294912
    assert c.flops == 2 * 294912 + 3 * 2048
    assert c.bytes_written == 8 * 8 * 32  # = 2048


# ---------------------------------------------------------------------------------------------------------
# onnxruntime fused and layout-specific convs


@pytest.mark.parametrize("activation", sorted(ACTIVATION_FLOPS))
def test_fusing_an_activation_adds_what_the_standalone_op_computes(activation):
    # The fused activation runs on Y [1,8,16,16] (2048 elements) inside the kernel; the same activation as its own
    # node on Y costs the FLOPs the op's definition gives it. Fusing changes kernels and bytes, not FLOPs.
    def fused(act: str) -> Cost:
        inputs = [T([1, 8, 16, 16]), W([8, 8, 3, 3])]
        return cost_of(
            make_node("FusedConv", inputs, [T([1, 8, 16, 16])], domain=MS, pads=[1, 1, 1, 1], activation=act)
        )

    bounds = [W([]), W([])] if activation == "Clip" else []  # Clip's fused form clips to both bounds
    standalone = cost_of(make_node(activation, [T([1, 8, 16, 16]), *bounds], [T([1, 8, 16, 16])]))
    assert fused(activation).flops - fused("").flops == standalone.flops
    assert standalone.flops > 0 or activation == "Identity"


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid"])
def test_fused_conv_activation(activation):
    # X [1,8,16,16], W [8,8,3,3], pads 1 -> Y [1,8,16,16] (computed: contrib output unknown)
    per_element = {"Relu": 1, "Sigmoid": 4, "Tanh": 1, "LeakyRelu": 2, "Clip": 2, "HardSigmoid": 4}[activation]
    node = make_node(
        "FusedConv",
        [T([1, 8, 16, 16]), W([8, 8, 3, 3]), W([8])],
        [T(None, UNDEFINED)],
        domain=MS,
        pads=[1, 1, 1, 1],
        activation=activation,
    )
    c = cost_of(node)
    assert c.macs == 8 * 16 * 16 * 8 * 9  # = 147456
    # 2*MACs + (bias 1 + activation) per output element (8*16*16 = 2048)
    assert c.flops == 2 * 147456 + (1 + per_element) * 2048
    assert c.bytes_read == 4 * (2048 + 576 + 8)  # = 10528
    assert c.bytes_written == 4 * 2048  # float, from X's type = 8192


def test_fused_conv_with_sum_input():
    node = make_node(
        "FusedConv",
        [T([1, 8, 16, 16]), W([8, 8, 3, 3]), W([8]), T([1, 8, 16, 16])],
        [T([1, 8, 16, 16])],
        domain=MS,
        pads=[1, 1, 1, 1],
        activation="Relu",
    )
    c = cost_of(node)
    # 2*MACs + (bias 1 + Z add 1 + Relu 1) per output element: 294912 + 3*2048 = 301056
    assert c.flops == 2 * 147456 + 3 * 2048
    assert c.bytes_read == 4 * (2048 + 576 + 8 + 2048)  # Z is read too = 18720


def test_fused_conv_unknown_activation_is_not_free():
    node = make_node(
        "FusedConv", [T([1, 8, 16, 16]), W([8, 8, 3, 3])], [T(None)], domain=MS, pads=[1, 1, 1, 1], activation="Foo"
    )
    c = cost_of(node)
    assert c.flops == 2 * 147456 + 1 * 2048  # charged 1 FLOP per element
    assert "Foo" in c.note


def test_nchwc_conv_padded_channels_activation_sum():
    # 24 output channels padded to 32 (block 16): W [32, 16, 3, 3], B [32]; X [1,16,28,28] blocked; pads 1.
    # The NCHWc output's shape is unknown to onnx: Y [1, 32, 28, 28] is computed from X and W.
    node = make_node(
        "Conv",
        [T([1, 16, 28, 28]), W([32, 16, 3, 3]), W([32]), T([1, 32, 28, 28])],
        [T(None, UNDEFINED)],
        domain="com.microsoft.nchwc",
        pads=[1, 1, 1, 1],
        activation="Relu",
    )
    c = cost_of(node)
    assert c.macs == 1 * 32 * 28 * 28 * 16 * 3 * 3  # padded channels are computed: 3612672
    # 2*MACs + (bias 1 + Sum 1 + Relu 1) per output element: 7225344 + 3*25088 = 7300608
    assert c.flops == 2 * 3612672 + 3 * 32 * 28 * 28
    assert c.bytes_read == 4 * (16 * 784 + 32 * 16 * 9 + 32 + 32 * 784)  # = 4 * 42272 = 169088
    assert c.bytes_written == 4 * 32 * 28 * 28  # = 100352


def test_nchwc_conv_nchw_input_and_depthwise():
    # first layer: NCHW input with 3 channels, output padded to 16 channels; 7x7/2 pads 3 -> 112
    first = make_node(
        "Conv",
        [T([1, 3, 224, 224]), W([16, 3, 7, 7])],
        [T(None, UNDEFINED)],
        domain="com.microsoft.nchwc",
        pads=[3, 3, 3, 3],
        strides=[2, 2],
    )
    assert cost_of(first).macs == 16 * 112 * 112 * 3 * 7 * 7  # = 29503488
    # depthwise (onnxruntime blocks it only when C is a multiple of the block): W [32, 1, 3, 3], group 32, pads 1
    dw = make_node(
        "Conv",
        [T([1, 32, 56, 56]), W([32, 1, 3, 3])],
        [T(None, UNDEFINED)],
        domain="com.microsoft.nchwc",
        pads=[1, 1, 1, 1],
        group=32,
    )
    assert cost_of(dw).macs == 32 * 56 * 56 * 1 * 3 * 3  # = 903168


def test_nhwc_conv_computed_output():
    # NHWC X [1,56,56,64], W [128,64,1,1] -> Y [1,56,56,128]
    c = cost_of(make_node("NhwcConv", [T([1, 56, 56, 64]), W([128, 64, 1, 1])], [T(None, UNDEFINED)], domain=MS))
    assert c.macs == 56 * 56 * 128 * 64  # = 25690112
    assert c.bytes_written == 4 * 56 * 56 * 128  # = 1605632


def test_nhwc_fused_conv_with_sum_and_activation():
    node = make_node(
        "NhwcFusedConv",
        [T([1, 16, 16, 8]), W([8, 8, 3, 3]), W([8]), T([1, 16, 16, 8])],
        [T(None, UNDEFINED)],
        domain=MS,
        pads=[1, 1, 1, 1],
        activation="Sigmoid",
    )
    c = cost_of(node)
    assert c.macs == 147456  # 8*16*16*8*9
    assert c.flops == 2 * 147456 + (1 + 1 + 4) * 2048  # bias, Z, Sigmoid = 307200


# ---------------------------------------------------------------------------------------------------------
# Paper 000, Table 2: arithmetic intensity of convolution types, reproduced through our Conv cost.
#
# The table writes intensity in MACs per element moved (input + output + weights, no bias):
#   standard   B*M*N*DK^2*DF^2 / (B*DF^2*(M+N) + DK^2*M*N)
#   pointwise  B*M*N*DF^2      / (B*DF^2*(M+N) + M*N)
#   depthwise  B*M*DK^2*DF^2   / (2*B*M*DF^2   + DK^2*M)
#   separable  pointwise + depthwise (the sum of the two ratios, as the table writes it)
# with M input channels, N output channels, a DF x DF map kept by same padding, stride 1 and a DK x DK kernel.
# Our unit is FLOPs per byte. At fp32 (4 bytes per element) and 2 FLOPs per MAC:
#   our_AI = table_AI * 2 / 4


def to_flops_per_byte(macs_per_element: float) -> float:
    flops_per_mac, bytes_per_element = 2, 4
    return macs_per_element * flops_per_mac / bytes_per_element


def table_standard(B: int, M: int, N: int, DK: int, DF: int) -> float:
    return B * M * N * DK**2 * DF**2 / (B * DF**2 * (M + N) + DK**2 * M * N)


def table_pointwise(B: int, M: int, N: int, DF: int) -> float:
    return B * M * N * DF**2 / (B * DF**2 * (M + N) + M * N)


def table_depthwise(B: int, M: int, DK: int, DF: int) -> float:
    return B * M * DK**2 * DF**2 / (2 * B * M * DF**2 + DK**2 * M)


def same_conv(B: int, c_in: int, c_out: int, DK: int, DF: int, group: int = 1) -> Cost:
    """Our cost of a stride-1, same-padded, bias-free DK x DK conv on a B x c_in x DF x DF map."""
    pad = (DK - 1) // 2  # same padding for odd DK at stride 1
    return cost_of(
        make_node(
            "Conv",
            [T([B, c_in, DF, DF]), W([c_out, c_in // group, DK, DK])],
            [T([B, c_out, DF, DF])],
            pads=[pad] * 4,
            group=group,
        )
    )


TABLE2_SETTINGS = [
    # (B, M, N, DK, DF)
    (1, 32, 32, 3, 128),  # the paper's Figure 7 setting: 128x128x32 in and out, batch 1
    (4, 64, 128, 5, 56),
    (1, 3, 16, 7, 224),
]


@pytest.mark.parametrize("B, M, N, DK, DF", TABLE2_SETTINGS)
def test_table2_standard(B, M, N, DK, DF):
    ours = same_conv(B, M, N, DK, DF)
    assert ours.arithmetic_intensity == pytest.approx(to_flops_per_byte(table_standard(B, M, N, DK, DF)), rel=1e-12)


@pytest.mark.parametrize("B, M, N, DK, DF", TABLE2_SETTINGS)
def test_table2_pointwise(B, M, N, DK, DF):
    ours = same_conv(B, M, N, 1, DF)
    assert ours.arithmetic_intensity == pytest.approx(to_flops_per_byte(table_pointwise(B, M, N, DF)), rel=1e-12)


@pytest.mark.parametrize("B, M, N, DK, DF", TABLE2_SETTINGS)
def test_table2_depthwise(B, M, N, DK, DF):
    ours = same_conv(B, M, M, DK, DF, group=M)
    assert ours.arithmetic_intensity == pytest.approx(to_flops_per_byte(table_depthwise(B, M, DK, DF)), rel=1e-12)


@pytest.mark.parametrize("B, M, N, DK, DF", TABLE2_SETTINGS)
def test_table2_separable(B, M, N, DK, DF):
    dw = same_conv(B, M, M, DK, DF, group=M)
    pw = same_conv(B, M, N, 1, DF)
    # Each half matches its own row ...
    assert dw.arithmetic_intensity == pytest.approx(to_flops_per_byte(table_depthwise(B, M, DK, DF)), rel=1e-12)
    assert pw.arithmetic_intensity == pytest.approx(to_flops_per_byte(table_pointwise(B, M, N, DF)), rel=1e-12)
    # ... and the table's separable row is the sum of the two intensities,
    table_separable = table_pointwise(B, M, N, DF) + table_depthwise(B, M, DK, DF)
    assert dw.arithmetic_intensity + pw.arithmetic_intensity == pytest.approx(
        to_flops_per_byte(table_separable), rel=1e-12
    )
    # which is not the intensity of the combined layer. That one is total FLOPs over total bytes (the two kernels'
    # traffic added, including the intermediate map written by one and read by the other), and it is smaller than
    # the sum of the ratios.
    both = dw + pw
    assert both.arithmetic_intensity == pytest.approx(
        (dw.flops + pw.flops) / (dw.bytes_read + dw.bytes_written + pw.bytes_read + pw.bytes_written), rel=1e-12
    )
    assert both.arithmetic_intensity < to_flops_per_byte(table_separable)


def test_table2_figure7_values():
    # B=1, M=N=32, DK=3, DF=128 worked out by hand:
    # standard: 32*32*9*16384 / (16384*64 + 9*1024) = 150994944 / 1057792 = 142.745... MACs/element
    # -> 142.745... * 2 / 4 = 71.372... FLOPs/byte
    ours = same_conv(1, 32, 32, 3, 128)
    assert ours.arithmetic_intensity == pytest.approx(150994944 / 1057792 / 2, rel=1e-12)
    # depthwise: 32*9*16384 / (2*32*16384 + 9*32) = 4718592 / 1048864 = 4.4987... MACs/element
    dw = same_conv(1, 32, 32, 3, 128, group=32)
    assert dw.arithmetic_intensity == pytest.approx(4718592 / 1048864 / 2, rel=1e-12)
