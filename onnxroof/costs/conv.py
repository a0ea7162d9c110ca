"""Cost functions: convolutions.

Conv, ConvTranspose, their integer and quantized forms (ConvInteger, QLinearConv) and onnxruntime's fused and
layout-specific variants (``com.microsoft::FusedConv``, ``com.microsoft.nchwc::Conv``, the NHWC convs).

Every convolution here is counted from the weight tensor ``W`` of shape ``[C_out, C_in/group, k_1, ..., k_n]``:
each output element is a dot product of ``(C_in/group) * prod(kernel)`` terms, so

    MACs = elements(Y) * (C_in/group) * prod(kernel) = elements(Y) * prod(W.shape[1:])

which is the conventions' ``N * C_out * prod(out_spatial) * (C_in/group) * prod(kernel)`` in any layout (NCHW,
NHWC, or onnxruntime's NCHWc blocking, whose channel counts are padded to the block size in both ``Y`` and ``W``:
the padded channels are computed by the kernel, so they are counted). FLOPs = 2 * MACs plus the per-output
constants stated where each op is registered. When shape inference left ``Y`` unknown (contrib ops), its shape is
computed from ``X``, ``W`` and the attributes with the ONNX Conv formula; only an unknown ``X`` or ``W`` raises
:class:`~onnxroof.costs.UnknownShape`.

Every convolution registers the engine class "conv"; ``onnxroof.predict.op_classes`` tells its kinds (1x1, depthwise,
grouped, a stem, small and mid-sized outputs) apart by the node's shapes.

Backward (Conv, ConvTranspose): the input gradient is a convolution of dY with the weights and the weight
gradient a convolution of X with dY, each as many MACs as the forward, so 2 x the forward's MACs and FLOPs, plus
one add per output element for a bias gradient (``common.product_backward``).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from onnxroof.costs import Cost, NodeView, register, register_backward
from onnxroof.costs.common import (
    REQUANTIZE_FLOPS,
    activation_flops,
    check_window,
    mac_kernel_cost,
    pool_output_spatial,
    product_backward,
    with_output_shape,
)
from onnxroof.ir import InvalidNode, Tensor, UnknownShape, format_shape

__all__ = ["conv_output_spatial", "conv_transpose_output_spatial"]


# ---------------------------------------------------------------------------------------------------------
# Output geometry.


def _ints(value: Sequence[int] | None, n: int, default: int) -> tuple[int, ...]:
    return tuple(int(v) for v in value) if value is not None and len(value) > 0 else (default,) * n


def conv_output_spatial(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
) -> tuple[int, ...]:
    """Output spatial dims of an ONNX Conv: a pooling window's geometry without ceil_mode.

    NOTSET: ``floor((in + pad_begin + pad_end - (dilation*(k-1) + 1)) / stride) + 1``; VALID: the same with no
    padding; SAME_UPPER/SAME_LOWER: ``ceil(in / stride)`` (the padding is chosen to make it so).
    """
    return pool_output_spatial(in_spatial, kernel, strides=strides, dilations=dilations, pads=pads, auto_pad=auto_pad)


def conv_transpose_output_spatial(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
) -> tuple[int, ...]:
    """Output spatial dims of an ONNX ConvTranspose.

    An ``output_shape`` attribute wins (its spatial part when it also lists N and C); SAME_UPPER/SAME_LOWER give
    ``in * stride``; otherwise ``stride*(in-1) + output_padding + dilation*(k-1) + 1 - pad_begin - pad_end`` (VALID
    has no padding).
    """
    n = len(in_spatial)
    if output_shape is not None and len(output_shape) > 0:
        return tuple(int(d) for d in output_shape[-n:])
    strides_ = _ints(strides, n, 1)
    dilations_ = _ints(dilations, n, 1)
    pads_ = (0,) * (2 * n) if auto_pad == "VALID" else _ints(pads, 2 * n, 0)
    out_pad = _ints(output_padding, n, 0)
    check_window(in_spatial, kernel, strides_, dilations_, pads_)
    if len(out_pad) < n:
        raise InvalidNode(f"output_padding {list(out_pad)} for an input of spatial shape {format_shape(in_spatial)}")
    out = []
    for i, size in enumerate(in_spatial):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(size * strides_[i])
            continue
        window = dilations_[i] * (kernel[i] - 1) + 1
        out.append(strides_[i] * (size - 1) + out_pad[i] + window - pads_[i] - pads_[i + n])
    return tuple(out)


def _kernel_shape(node: NodeView, w_shape: Sequence[int]) -> tuple[int, ...]:
    """Spatial kernel dims: the ``kernel_shape`` attribute when present, else the weight's trailing dims."""
    kernel = node.attr("kernel_shape")
    return tuple(int(k) for k in kernel) if kernel is not None and len(kernel) > 0 else tuple(w_shape[2:])


def _conv_output_shape(node: NodeView, x: Tensor, w: Tensor, channels_last: bool) -> tuple[int, ...]:
    """Y's shape: the inferred one when known, else computed from X, W and the Conv attributes."""
    out = node.output(0)
    if out is not None and out.known:
        return out.need_shape()
    x_shape, w_shape = x.need_shape(), w.need_shape()
    in_spatial = x_shape[1:-1] if channels_last else x_shape[2:]
    spatial = conv_output_spatial(
        in_spatial,
        _kernel_shape(node, w_shape),
        strides=node.attr("strides"),
        dilations=node.attr("dilations"),
        pads=node.attr("pads"),
        auto_pad=node.text("auto_pad", "NOTSET"),
    )
    c_out = w_shape[0]
    return (x_shape[0], *spatial, c_out) if channels_last else (x_shape[0], c_out, *spatial)


def _present(node: NodeView, index: int | None) -> bool:
    return index is not None and node.input(index) is not None


def _conv(
    node: NodeView,
    *,
    w_index: int = 1,
    bias_index: int | None = None,
    sum_index: int | None = None,
    per_output: float = 0.0,
    activation: str = "",
    channels_last: bool = False,
) -> Cost:
    """The shared Conv count: ``elements(Y) * prod(W.shape[1:])`` MACs, 2 FLOPs each, plus per output element one
    add for a bias (input ``bias_index``), one add for a fused sum input (``sum_index``), ``per_output`` FLOPs
    (requantization) and the fused activation's constant."""
    x, w = node.input(0), node.input(w_index)
    if x is None or w is None:
        raise UnknownShape(f"{node.name}: missing X or W")
    y_shape = _conv_output_shape(node, x, w, channels_last)
    outputs = prod(y_shape)
    macs = outputs * prod(w.need_shape()[1:])
    act_flops, note = activation_flops(activation)
    extra = per_output + act_flops + int(_present(node, bias_index)) + int(_present(node, sum_index))
    resolved = with_output_shape(node, y_shape, x.dtype)
    return mac_kernel_cost(resolved, 2 * macs + extra * outputs, macs, note)


# ---------------------------------------------------------------------------------------------------------
# Standard-domain ops.


@register("Conv", engine="conv")
def conv(node: NodeView) -> Cost:
    """ONNX Conv (1D/2D/3D, any group, dilation, stride, padding): ``2 * elements(Y) * (C_in/group) *
    prod(kernel)`` FLOPs, plus one add per output element for the bias B."""
    check_conv_operands(node, node.input(0), node.input(1))
    return _conv(node, bias_index=2)


def check_conv_operands(node: NodeView, x: Tensor | None, w: Tensor | None) -> None:
    """InvalidNode unless X ``[N, C, spatial...]`` and W ``[C_out, C/group, k...]`` (where both shapes are
    known) have one rank, at least 3, and W's input channels times ``group`` make X's channels."""
    if x is None or w is None or not x.known or not w.known:
        return
    x_shape, w_shape = x.need_shape(), w.need_shape()
    group = int(node.attr("group", 1))
    if len(x_shape) != len(w_shape) or len(x_shape) < 3:
        raise InvalidNode(
            f"input of shape {format_shape(x_shape)} and weight of shape {format_shape(w_shape)}: "
            "ranks differ or are below 3"
        )
    operands = f"input of shape {format_shape(x_shape)} and weight of shape {format_shape(w_shape)} with group {group}"
    if group < 1 or w_shape[0] % group:
        raise InvalidNode(f"{operands}: the group does not divide the weight's {w_shape[0]} output channels")
    if x_shape[1] != w_shape[1] * group:
        raise InvalidNode(
            f"{operands}: the weight's {w_shape[1]} input channels per group do not make the input's {x_shape[1]}"
        )


@register("ConvTranspose", engine="conv")
def conv_transpose(node: NodeView) -> Cost:
    """ONNX ConvTranspose: every input pixel scatters into a kernel window of each of its group's output
    channels, so MACs = ``N * C_in * prod(in_spatial) * (C_out/group) * prod(kernel)`` = ``elements(X) *
    prod(W.shape[1:])`` (W is ``[C_in, C_out/group, k...]``), independent of padding and output_padding.
    FLOPs = 2 * MACs, plus one add per output element for the bias B."""
    x, w = node.input(0), node.input(1)
    if x is None or w is None:
        raise UnknownShape(f"{node.name}: missing X or W")
    x_shape, w_shape = x.need_shape(), w.need_shape()
    macs = x.numel * prod(w_shape[1:])
    out = node.output(0)
    if out is not None and out.known:
        y_shape = out.need_shape()
    else:
        spatial = conv_transpose_output_spatial(
            x_shape[2:],
            _kernel_shape(node, w_shape),
            strides=node.attr("strides"),
            dilations=node.attr("dilations"),
            pads=node.attr("pads"),
            output_padding=node.attr("output_padding"),
            output_shape=node.attr("output_shape"),
            auto_pad=node.text("auto_pad", "NOTSET"),
        )
        y_shape = (x_shape[0], w_shape[1] * int(node.attr("group", 1)), *spatial)
    bias_adds = prod(y_shape) if _present(node, 2) else 0
    return mac_kernel_cost(with_output_shape(node, y_shape, x.dtype), 2 * macs + bias_adds, macs)


@register("ConvInteger", engine="conv_integer")
def conv_integer(node: NodeView) -> Cost:
    """ONNX ConvInteger (x, w, x_zero_point, w_zero_point -> int32): the Conv MAC count on 8-bit operands. The
    zero points are folded into the integer accumulation and not counted separately; there is no bias."""
    return _conv(node)


@register("QLinearConv", engine="qconv")
def qlinear_conv(node: NodeView) -> Cost:
    """ONNX QLinearConv (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B): the Conv
    MAC count on 8-bit operands, plus :data:`REQUANTIZE_FLOPS` per output element to requantize the int32
    accumulator and one add per output element for the int32 bias B."""
    return _conv(node, w_index=3, bias_index=8, per_output=REQUANTIZE_FLOPS)


# ---------------------------------------------------------------------------------------------------------
# onnxruntime contrib ops.


@register("com.microsoft::FusedConv", engine="conv")
def fused_conv(node: NodeView) -> Cost:
    """onnxruntime FusedConv (X, W, B, Z): Conv, plus one add per output element for the bias B and for the
    optional sum input Z, plus the ``activation`` attribute's per-element FLOPs (:data:`ACTIVATION_FLOPS`)."""
    return _conv(node, bias_index=2, sum_index=3, activation=node.text("activation"))


@register("com.microsoft.nchwc::Conv", engine="conv")
def nchwc_conv(node: NodeView) -> Cost:
    """onnxruntime's NCHWc-blocked Conv (X, W, B, Sum) as its CPU graph optimizer writes it: tensors are 4D NCHW
    with channel counts padded to the block size, and W is ``[C_out padded, C_in/group, kH, kW]``. Counted like
    FusedConv from W and Y (computed from X when its shape is unknown), so padded channels count: the kernel
    computes them."""
    return _conv(node, bias_index=2, sum_index=3, activation=node.text("activation"))


@register("com.microsoft::NhwcConv", engine="conv")
def nhwc_conv(node: NodeView) -> Cost:
    """onnxruntime NhwcConv (X, W, B): Conv on channels-last X and Y (``[N, spatial..., C]``); W keeps the
    ``[M, C/group, k...]`` layout. Same count as Conv."""
    return _conv(node, bias_index=2, channels_last=True)


@register("com.microsoft::NhwcFusedConv", engine="conv")
def nhwc_fused_conv(node: NodeView) -> Cost:
    """onnxruntime NhwcFusedConv (X, W, B, Z): FusedConv on channels-last X, Z and Y. Same count as FusedConv."""
    return _conv(node, bias_index=2, sum_index=3, activation=node.text("activation"), channels_last=True)


@register("com.ms.internal.nhwc::Conv", engine="conv")
def internal_nhwc_conv(node: NodeView) -> Cost:
    """The channels-last Conv that onnxruntime's layout transformer writes for NHWC execution providers (X, W,
    B; optional ``activation``): X and Y are ``[N, spatial..., C]``, W stays ``[M, C/group, k...]``. Counted like
    FusedConv without a sum input."""
    return _conv(node, bias_index=2, activation=node.text("activation"), channels_last=True)


@register("com.ms.internal.nhwc::QLinearConv", engine="qconv")
def internal_nhwc_qlinear_conv(node: NodeView) -> Cost:
    """The channels-last QLinearConv of onnxruntime's layout transformer. Same count as QLinearConv."""
    return _conv(node, w_index=3, bias_index=8, per_output=REQUANTIZE_FLOPS, channels_last=True)


@register("com.microsoft::QLinearConv", engine="qconv")
def ms_qlinear_conv(node: NodeView) -> Cost:
    """onnxruntime's QLinearConv (same inputs as ONNX QLinearConv, plus ``channels_last``, which marks X and Y as
    NHWC). Same count as QLinearConv."""
    channels_last = bool(node.attr("channels_last", 0))
    return _conv(node, w_index=3, bias_index=8, per_output=REQUANTIZE_FLOPS, channels_last=channels_last)


@register_backward("Conv", "ConvTranspose")
def conv_backward(node: NodeView, forward: Cost) -> Cost:
    """dX and dW at the forward's MACs each, plus dB (a sum of dY over N and the spatial axes) with a bias."""
    return product_backward(forward, node.need_input(0, "X"), node.need_input(1, "W"), node.input(2))
