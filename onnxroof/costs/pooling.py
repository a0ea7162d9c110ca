"""Cost functions: pooling ops (windowed, global, unpooling, onnxruntime's NCHWc/NHWC/quantized variants).

A windowed pool does ``prod(kernel_shape)`` adds or comparisons per output element (the accumulator starts at 0
or -inf and takes every window element once), plus the per-output extras stated per op. Windows that hang over
the padding are counted at full size, an upper bound. The output shape comes from shape inference when it is
known; otherwise (contrib ops, which onnx's inference does not cover) ``common.pool_output_spatial`` computes it
from the input shape and the attributes, with ONNX's formula. Bytes follow the compulsory-traffic model; a
MaxPool's optional Indices output (int64) is written too. Each op is one kernel.

Windowed pools register the engine class "pool" (``onnxroof.predict.op_classes`` tells onnxruntime's NCHWc kernels
from the plain-layout ones), global pools "global_pool".

Backward: a max pool scatters each dY element to the position of its window's maximum (one add per output
element into a zero-filled dX, since windows may overlap), reading dY and the argmax (an int64 per output
element) and writing dX. An average pool spreads each dY element over its window, divided by the window count:
the forward's adds and divides again, 1 x forward FLOPs, reading dY and writing dX.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from onnxroof.costs import Cost, NodeView, register, register_backward
from onnxroof.costs.common import (
    BILINEAR_FLOPS,
    DEQUANTIZE_FLOPS,
    QUANTIZE_FLOPS,
    kernel_cost,
    pool_output_spatial,
    resolved_shape,
)
from onnxroof.ir import UnknownShape
from onnxroof.protos import TensorProto

# (FLOPs per window element, FLOPs per output element) of the windowed pools.
WINDOW_POOL_FLOPS: dict[str, tuple[float, float]] = {
    "MaxPool": (1, 0),  # one comparison per window element
    "AveragePool": (1, 1),  # one add per window element, one divide by the window count
    "LpPool": (2, 1),  # |x|^p and an add per window element, the p-th root per output
    # Dequantizing and requantizing are affine, so they apply once to the window sum: divide (1) + dequantize (2)
    # + requantize (2) = 5 per output.
    "QLinearAveragePool": (1, 1 + DEQUANTIZE_FLOPS + QUANTIZE_FLOPS),
}

# (FLOPs per input element, FLOPs per output element) of the global pools.
GLOBAL_POOL_FLOPS: dict[str, tuple[float, float]] = {
    "GlobalMaxPool": (1, 0),  # one comparison per input element
    "GlobalAveragePool": (1, 1),  # one add per input element, one divide per output
    "GlobalLpPool": (2, 1),  # |x|^p and an add per input element, the p-th root per output
    "QLinearGlobalAveragePool": (1, 1 + DEQUANTIZE_FLOPS + QUANTIZE_FLOPS),  # as QLinearAveragePool: 5 per output
}


def _ints(value: Sequence[int] | None, default: Sequence[int]) -> list[int]:
    return [int(v) for v in value] if value is not None else list(default)


def _channels_last(node: NodeView) -> bool:
    """NHWC pools: onnxruntime's NhwcMaxPool and its internal NHWC domain always; the quantized ones when
    channels_last=1."""
    return node.op_type == "NhwcMaxPool" or node.domain == "com.ms.internal.nhwc" or bool(node.attr("channels_last", 0))


def _split(shape: Sequence[int], channels_last: bool) -> tuple[int, int, tuple[int, ...]]:
    """(batch, channels, spatial dims) of an NCHW or NHWC shape."""
    if channels_last:
        return shape[0], shape[-1], tuple(shape[1:-1])
    return shape[0], shape[1], tuple(shape[2:])


def _join(batch: int, channels: int, spatial: Sequence[int], channels_last: bool) -> tuple[int, ...]:
    return (batch, *spatial, channels) if channels_last else (batch, channels, *spatial)


def _x_shape(node: NodeView) -> tuple[int, ...]:
    x = node.input(0)
    if x is None:
        raise UnknownShape(f"{node.name}: no input")
    return x.need_shape()


def _window_output_shape(node: NodeView) -> tuple[int, ...]:
    """Output 0's shape: from shape inference, else computed from X and the pooling attributes."""
    y = node.output(0)
    if y is not None and y.known:
        return y.shape  # type: ignore[return-value]
    channels_last = _channels_last(node)
    batch, channels, spatial = _split(_x_shape(node), channels_last)
    out_spatial = pool_output_spatial(
        spatial,
        _ints(node.attr("kernel_shape"), []),
        strides=node.attr("strides"),
        pads=node.attr("pads"),
        dilations=node.attr("dilations"),
        ceil_mode=int(node.attr("ceil_mode", 0)),
        auto_pad=node.text("auto_pad", "NOTSET"),
    )
    return _join(batch, channels, out_spatial, channels_last)


@register(
    "MaxPool",
    "AveragePool",
    "LpPool",
    "com.microsoft.nchwc::MaxPool",
    "com.microsoft.nchwc::AveragePool",
    "com.microsoft::QLinearAveragePool",
    "com.ms.internal.nhwc::MaxPool",
    "com.ms.internal.nhwc::AveragePool",
    "com.ms.internal.nhwc::QLinearAveragePool",
    "com.microsoft::NhwcMaxPool",
    engine="pool",
)
def window_pool(node: NodeView) -> Cost:
    """A windowed pool: per output element, ``WINDOW_POOL_FLOPS[op]`` = (per window element, per output) FLOPs,
    i.e. ``out_numel * (a * prod(kernel_shape) + b)``. The NCHWc and NHWC variants cost what the plain op does
    (the layout changes nothing but which axes are spatial; a fused activation is not counted)."""
    kernel = _ints(node.attr("kernel_shape"), [])
    if not kernel:
        raise UnknownShape(f"{node.name}: no kernel_shape")
    op = "MaxPool" if node.op_type == "NhwcMaxPool" else node.op_type
    per_window, per_output = WINDOW_POOL_FLOPS[op]
    out_shape = _window_output_shape(node)
    flops = prod(out_shape) * (per_window * prod(kernel) + per_output)
    return kernel_cost(node, flops, {0: out_shape, 1: out_shape}, dtypes={1: TensorProto.INT64})


@register(
    "GlobalMaxPool",
    "GlobalAveragePool",
    "GlobalLpPool",
    "com.microsoft.nchwc::GlobalMaxPool",
    "com.microsoft.nchwc::GlobalAveragePool",
    "com.microsoft::QLinearGlobalAveragePool",
    "com.ms.internal.nhwc::GlobalMaxPool",
    "com.ms.internal.nhwc::GlobalAveragePool",
    engine="global_pool",
)
def global_pool(node: NodeView) -> Cost:
    """A global pool over all spatial axes: ``GLOBAL_POOL_FLOPS[op]`` = (per input element, per output element)
    FLOPs, i.e. ``a * in_numel + b * N * C``."""
    per_input, per_output = GLOBAL_POOL_FLOPS[node.op_type]
    channels_last = _channels_last(node)
    x_shape = _x_shape(node)
    batch, channels, spatial = _split(x_shape, channels_last)
    out_shape = resolved_shape(
        node.output(0), _join(batch, channels, [1] * len(spatial), channels_last), f"{node.name}: output 0"
    )
    flops = per_input * prod(x_shape) + per_output * prod(out_shape)
    return kernel_cost(node, flops, {0: out_shape})


@register("MaxUnpool", engine="pool")
def max_unpool(node: NodeView) -> Cost:
    """MaxUnpool: scatters X to the positions in I inside a zero-filled output. Pure data movement: 0 FLOPs;
    reads X and I (output_shape is host-side metadata), writes the whole output."""
    x_shape = _x_shape(node)
    requested = node.constant(2)
    if requested is not None:
        fallback: tuple[int, ...] = tuple(int(v) for v in requested)
    else:
        kernel = _ints(node.attr("kernel_shape"), [])
        rank = len(kernel)
        strides = _ints(node.attr("strides"), [1] * rank)
        pads = _ints(node.attr("pads"), [0] * (2 * rank))
        spatial = [(x_shape[2 + i] - 1) * strides[i] - pads[i] - pads[rank + i] + kernel[i] for i in range(rank)]
        fallback = (x_shape[0], x_shape[1], *spatial)
    out_shape = resolved_shape(node.output(0), fallback, f"{node.name}: output 0")
    return kernel_cost(node, 0, {0: out_shape}, inputs=[node.input(0), node.input(1)])


@register("com.microsoft.nchwc::Upsample", engine="resize")
def nchwc_upsample(node: NodeView) -> Cost:
    """onnxruntime's NCHWc Upsample by integer ``scales``. mode='nearest' copies: 0 FLOPs, bytes only.
    mode='linear' (bilinear over H and W) interpolates each output element from 4 inputs: 4 mul + 3 add = 7
    FLOPs per output element, the weights being precomputed per output position."""
    x_shape = _x_shape(node)
    scales = _ints(node.attr("scales"), [])
    if len(scales) == len(x_shape) - 2:
        scales = [1, 1, *scales]
    fallback = None if len(scales) != len(x_shape) else tuple(d * s for d, s in zip(x_shape, scales))
    out_shape = resolved_shape(node.output(0), fallback, f"{node.name}: output 0")
    mode = node.text("mode", "nearest")
    per_output = 0 if mode == "nearest" else BILINEAR_FLOPS
    return kernel_cost(node, per_output * prod(out_shape), {0: out_shape})


def _pool_backward(node: NodeView, forward: Cost, flops: float, index_bytes: float) -> Cost:
    """One kernel: reads dY (what the forward wrote as output 0) and ``index_bytes`` of argmax, writes dX."""
    x = node.need_input(0, "X")
    out_shape = resolved_shape(node.output(0), None, f"{node.name}: output 0")
    dy = prod(out_shape) * x.itemsize
    return Cost(flops=flops, bytes_read=dy + index_bytes, bytes_written=x.nbytes, kernels=1)


@register_backward("MaxPool", "GlobalMaxPool")
def max_pool_backward(node: NodeView, forward: Cost) -> Cost:
    """A scatter of dY: one add per output element, reading dY and the int64 argmax."""
    numel = prod(resolved_shape(node.output(0), None, f"{node.name}: output 0"))
    return _pool_backward(node, forward, numel, numel * 8)


@register_backward("AveragePool", "GlobalAveragePool")
def average_pool_backward(node: NodeView, forward: Cost) -> Cost:
    """dY divided by the window count and added into each window position: the forward's FLOPs."""
    return _pool_backward(node, forward, forward.flops, 0.0)
