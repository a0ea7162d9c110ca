"""Cost functions: normalization ops (BatchNorm, InstanceNorm, LayerNorm, GroupNorm, RMSNorm, LRN, Softmax and
their onnxruntime contrib variants).

FLOPs are counted per element of the normalized tensor. The per-row (per-channel, per-group) scalar work (dividing
a sum by its count, adding epsilon, the square root or log of a row statistic, running-stat updates) is O(rows),
not O(elements), and is not counted. Bytes follow the compulsory-traffic model (each distinct input read once,
each output written once, including the optional Mean/InvStdDev outputs); params are the elements of the weight
inputs (scale, bias, running mean and variance); each op is one kernel.

Backward rules (FLOPs per element of X, derived where the constants are defined): BatchNormalization 9,
LayerNormalization 13, Softmax 4. Each is one kernel that reads the forward's inputs and dY and writes dX and,
for the norms, the gradients of the scale and bias.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from onnxroof.costs import OTHER, Cost, NodeView, register, register_backward
from onnxroof.costs.common import (
    DEQUANTIZE_FLOPS,
    QUANTIZE_FLOPS,
    RMS_NORM_FLOPS,
    SILU_FLOPS,
    SOFTMAX_FLOPS,
    kernel_cost,
    op_key,
    pointwise,
)
from onnxroof.ir import Tensor, UnknownShape
from onnxroof.protos import TensorProto

# Per-element steps shared by the constants below.
LAYER_NORM_CORE_FLOPS = 6  # add into mean, subtract mean, square, add into variance, mul by 1/std, mul by scale

# FLOPs per element for ops whose output has input 0's shape and whose constant does not depend on attributes,
# one table per engine class.
SOFTMAX_LIKE_FLOPS: dict[str, float] = {
    "Softmax": SOFTMAX_FLOPS,  # max, subtract, exp, sum, divide
    # 1 if the element is the first maximum along the axis, else 0: the max (one comparison per element); writing
    # the one-hot output is free
    "Hardmax": 1,
    # max, subtract, exp, sum, then (log of the row sum, per row, not counted) subtract it: 5
    "LogSoftmax": SOFTMAX_FLOPS,
    # Dequantize (2) + Softmax (5) + requantize (2) = 9: the arithmetic the op defines (onnxruntime's CPU kernel
    # uses an exp lookup table).
    "com.microsoft::QLinearSoftmax": DEQUANTIZE_FLOPS + SOFTMAX_FLOPS + QUANTIZE_FLOPS,
}
INSTANCE_NORM_FLOPS: dict[str, float] = {
    "InstanceNormalization": LAYER_NORM_CORE_FLOPS + 1,  # per (n, c) over the spatial axes: 6 + bias add = 7
    "GroupNormalization": LAYER_NORM_CORE_FLOPS + 1,  # per (n, group): 6 + bias add = 7
    # (X - E[X]) / sqrt(E[X^2] - E[X]^2): square, add into sum of x, add into sum of x^2, subtract mean, divide
    "MeanVarianceNormalization": 5,
}
OTHER_NORM_FLOPS: dict[str, float] = {
    # x / ||x||_p along an axis, p in {1, 2}: |x| or x^2, add into the norm, divide (the root is per row)
    "LpNormalization": 3,
    "com.microsoft::BiasSoftmax": 1 + SOFTMAX_FLOPS,  # Softmax(data + bias): bias add + 5 = 6
}
NORM_FLOPS: dict[str, float] = {**SOFTMAX_LIKE_FLOPS, **INSTANCE_NORM_FLOPS, **OTHER_NORM_FLOPS}


def _x_shape(node: NodeView) -> tuple[int, ...]:
    x = node.input(0)
    if x is None:
        raise UnknownShape(f"{node.name}: no input")
    return x.need_shape()


def _stats_shape(x_shape: Sequence[int], axis: int) -> tuple[int, ...]:
    """Shape of the per-row statistics (Mean, InvStdDev) of a norm over axes [axis, rank): the leading dims,
    then 1 for each normalized axis."""
    rank = len(x_shape)
    axis = axis + rank if axis < 0 else axis
    return (*x_shape[:axis], *([1] * (rank - axis)))


def _given(node: NodeView, i: int) -> bool:
    t = node.input(i)
    return t is not None and bool(t.name)


@register(*SOFTMAX_LIKE_FLOPS, engine="softmax")
@register(*INSTANCE_NORM_FLOPS, engine="instancenorm")
@register(*OTHER_NORM_FLOPS, engine=OTHER)
def fixed_norm(node: NodeView) -> Cost:
    """A normalization with a fixed number of FLOPs per element, ``NORM_FLOPS[op]`` (derivations in the table)."""
    return pointwise(node, NORM_FLOPS[op_key(node)], _x_shape(node))


@register("BatchNormalization", engine="batchnorm")
def batch_normalization(node: NodeView) -> Cost:
    """BatchNormalization. Inference: 2 FLOPs per element, because engines fold scale, bias, mean and variance
    into one per-channel multiply and add. Training (training_mode=1, or an older opset asked for the batch
    statistics as extra outputs): the batch mean and variance are computed, 7 per element like LayerNorm (add
    into mean, subtract, square, add into variance, mul by 1/std, mul by scale, add bias); the running-stat
    updates are per channel and not counted. Params: scale, B, mean and var (4 * C) when they are weights."""
    x_shape = _x_shape(node)
    present_outputs = [t for t in node.outputs[1:] if t is not None and t.name]
    training = bool(node.attr("training_mode", 0)) or bool(present_outputs)
    flops = LAYER_NORM_CORE_FLOPS + 1 if training else 2
    channels = (x_shape[1],) if len(x_shape) > 1 else (1,)
    stats = dict.fromkeys(range(1, len(node.outputs)), channels)
    return pointwise(node, flops, x_shape, fallback=stats)


def _layer_norm_like(node: NodeView, flops: float, axis: int) -> Cost:
    """A norm over axes [axis, rank) with optional per-row statistics outputs (float32)."""
    x_shape = _x_shape(node)
    stats = _stats_shape(x_shape, axis)
    return pointwise(
        node,
        flops,
        x_shape,
        fallback=dict.fromkeys(range(1, len(node.outputs)), stats),
        dtypes=dict.fromkeys(range(1, len(node.outputs)), TensorProto.FLOAT),
    )


@register("LayerNormalization", "com.microsoft::LayerNormalization", engine="layernorm")
def layer_normalization(node: NodeView) -> Cost:
    """LayerNormalization over axes [axis, rank): 7 FLOPs per element (add into mean, subtract, square, add into
    variance, mul by 1/std, mul by scale, add bias), 6 when the optional bias B is absent. Params: Scale and B."""
    return _layer_norm_like(node, LAYER_NORM_CORE_FLOPS + int(_given(node, 2)), int(node.attr("axis", -1)))


@register(
    "RMSNormalization",
    "SimplifiedLayerNormalization",
    "com.microsoft::SimplifiedLayerNormalization",
    engine="layernorm",
)
def rms_normalization(node: NodeView) -> Cost:
    """RMS normalization (ONNX RMSNormalization, opset 23; onnxruntime's SimplifiedLayerNormalization):
    x / sqrt(mean(x^2) + eps) * scale, 4 FLOPs per element (square, add into sum, mul by 1/rms, mul by scale).
    Params: scale."""
    return _layer_norm_like(node, RMS_NORM_FLOPS, int(node.attr("axis", -1)))


@register("com.microsoft::SkipLayerNormalization", engine="skip_layernorm")
def skip_layer_normalization(node: NodeView) -> Cost:
    """onnxruntime SkipLayerNormalization (inputs input, skip, gamma, beta?, bias?): input + skip (+ bias), then
    LayerNorm over the last axis: 1 add (2 with bias) + 6 + 1 for beta, so 9 FLOPs per element with both. The
    optional outputs (mean, inv_std_var, input_skip_bias_sum) are written when present."""
    return _skip_norm(node, 1 + int(_given(node, 4)) + LAYER_NORM_CORE_FLOPS + int(_given(node, 3)))


@register("com.microsoft::SkipSimplifiedLayerNormalization", engine="skip_layernorm")
def skip_simplified_layer_normalization(node: NodeView) -> Cost:
    """onnxruntime SkipSimplifiedLayerNormalization (inputs input, skip, gamma, bias?): input + skip (+ bias),
    then RMS norm over the last axis: 1 add (2 with bias) + 4 = 5 or 6 FLOPs per element."""
    return _skip_norm(node, 1 + int(_given(node, 3)) + RMS_NORM_FLOPS)


def _skip_norm(node: NodeView, flops_per_element: float) -> Cost:
    """A skip-add fused with a normalization over the last axis; its optional outputs are the per-row float
    statistics (mean, inverse std) and the input + skip (+ bias) sum."""
    x_shape = _x_shape(node)
    stats = _stats_shape(x_shape, -1)
    return pointwise(
        node,
        flops_per_element,
        x_shape,
        fallback={1: stats, 2: stats, 3: x_shape},
        dtypes={1: TensorProto.FLOAT, 2: TensorProto.FLOAT},
    )


@register("com.microsoft::GroupNorm", engine="instancenorm")
def contrib_group_norm(node: NodeView) -> Cost:
    """onnxruntime GroupNorm (NHWC by default; inputs X, gamma, beta): GroupNorm's 7 FLOPs per element, plus a
    fused SiLU (sigmoid 4 + mul 1 = 5) when activation=1."""
    flops = LAYER_NORM_CORE_FLOPS + 1 + (SILU_FLOPS if node.attr("activation", 0) else 0)
    return pointwise(node, flops, _x_shape(node))


@register("com.microsoft::SkipGroupNorm", engine="instancenorm")
def contrib_skip_group_norm(node: NodeView) -> Cost:
    """onnxruntime SkipGroupNorm (inputs X, gamma, beta, skip, bias?): X + skip (+ bias) then GroupNorm (7) and
    the optional fused SiLU (5); the optional output S (the sum) is written when present."""
    x_shape = _x_shape(node)
    flops = 1 + int(_given(node, 4)) + LAYER_NORM_CORE_FLOPS + 1 + (SILU_FLOPS if node.attr("activation", 0) else 0)
    return pointwise(node, flops, x_shape, fallback={1: x_shape})


def lrn_flops_per_element(size: int) -> int:
    """LRN, y = x / (bias + alpha / size * sum over the size-channel window of x^2) ^ beta, per element:
    size multiplies (the squares) + size - 1 adds (the window sum) + 1 mul (alpha / size, folded to one
    constant) + 1 add (bias) + 1 pow + 1 divide = 2 * size + 3. Windows clipped at the channel edges are
    counted at full size (an upper bound)."""
    return size + (size - 1) + 1 + 1 + 1 + 1


@register("LRN", engine="lrn")
def lrn(node: NodeView) -> Cost:
    """Local response normalization across channels: ``lrn_flops_per_element(size)`` = 2 * size + 3 FLOPs per
    element."""
    size = int(node.attr("size", 1))
    return pointwise(node, lrn_flops_per_element(size), _x_shape(node))


def _gathered_bytes(table: Tensor | None, rows: int) -> float:
    """Bytes of ``rows`` rows of an embedding table, capped at the whole table."""
    if table is None or not table.name:
        return 0.0
    shape = table.need_shape()
    return min(rows, shape[0]) * prod(shape[1:]) * table.itemsize


@register("com.microsoft::EmbedLayerNormalization", engine="layernorm")
def embed_layer_normalization(node: NodeView) -> Cost:
    """onnxruntime EmbedLayerNormalization: gather word, position (and segment) embeddings, add them, then
    LayerNorm with gamma and beta. FLOPs per output element: 1 add (2 with segments) + 7; plus 1 add per mask
    element to build mask_index. Bytes read: the id and mask tensors, gamma and beta, and only the gathered
    embedding rows (B*S word and segment rows, S position rows, each capped at the table size); params count the
    whole tables."""
    ids_shape = _x_shape(node)
    batch_seq = prod(ids_shape)
    seq = ids_shape[-1]
    word, position, segment = node.input(2), node.input(3), node.input(4)
    hidden = word.need_shape()[-1] if word is not None else 0
    out_shape = (*ids_shape, hidden)
    y = node.output(0)
    out_numel = prod(y.shape if y is not None and y.known else out_shape)  # type: ignore[arg-type]
    has_segment = _given(node, 4)
    mask = node.input(7)
    mask_numel = mask.numel if mask is not None and mask.name else 0
    flops = (1 + int(has_segment) + LAYER_NORM_CORE_FLOPS + 1) * out_numel + mask_numel

    position_rows = batch_seq if _given(node, 8) else seq
    tables = {t.name for t in (word, position, segment) if t is not None}
    small_inputs = [t for t in node.inputs if t is not None and t.name not in tables]
    base = kernel_cost(
        node,
        flops,
        {0: out_shape, 1: ids_shape[:1], 2: out_shape},
        dtypes={0: word.dtype if word is not None else TensorProto.FLOAT, 1: TensorProto.INT32},
        inputs=small_inputs,
    )
    table_bytes = (
        _gathered_bytes(word, batch_seq)
        + _gathered_bytes(position, position_rows)
        + _gathered_bytes(segment, batch_seq)
    )
    params = base.params + sum(t.numel for t in (word, position, segment) if t is not None and t.name and t.is_weight)
    return Cost(
        flops=flops,
        bytes_read=base.bytes_read + table_bytes,
        bytes_written=base.bytes_written,
        params=params,
        kernels=1,
    )


# ---------------------------------------------------------------------------------------------------------
# Backward rules.

# BatchNorm with batch statistics, per element: recompute X_hat = (X - mean) * inv_std (sub, mul), dY * X_hat
# (mul) and its sum into dScale (add), the sum of dY into dBias (add), then dX = k * (dY - dBias/M - X_hat *
# dScale/M) with the per-channel quotients precomputed: mul, sub, sub, mul by k = scale * inv_std. 2+1+1+1+4 = 9.
BATCH_NORM_BACKWARD_FLOPS = 9
# LayerNorm, per element: X_hat (sub, mul), dY * X_hat and its sum into dScale (mul, add), dY into dBias (add),
# G = dY * scale (mul), G into its row sum (add), G * X_hat (mul) into its row sum (add), then dX = inv_std *
# (G - mean(G) - X_hat * mean(G * X_hat)): mul, sub, sub, mul. 2+2+1+1+1+2+4 = 13.
LAYER_NORM_BACKWARD_FLOPS = 13
# Softmax from the saved output Y: dX = Y * (dY - sum(dY * Y)): mul, add into the row sum, sub, mul = 4.
SOFTMAX_BACKWARD_FLOPS = 4


def _norm_backward(node: NodeView, forward: Cost, per_element: float) -> Cost:
    """One kernel: reads the forward's inputs and dY (output 0's size), writes dX and a gradient per floating
    point weight input (scale and bias; a running mean or variance is a buffer and gets none)."""
    x, y = node.need_input(0, "X"), node.output(0)
    dy = y.nbytes if y is not None and y.known else x.nbytes
    learned = [node.input(i) for i in (1, 2)] if node.op_type != "Softmax" else []
    grads = sum(t.nbytes for t in learned if t is not None and t.name and t.known)
    return Cost(
        flops=per_element * x.numel,
        bytes_read=forward.bytes_read + dy,
        bytes_written=x.nbytes + grads,
        kernels=1,
    )


@register_backward("BatchNormalization")
def batch_norm_backward(node: NodeView, forward: Cost) -> Cost:
    """BATCH_NORM_BACKWARD_FLOPS per element of X, plus dScale and dB."""
    return _norm_backward(node, forward, BATCH_NORM_BACKWARD_FLOPS)


@register_backward("LayerNormalization")
def layer_norm_backward(node: NodeView, forward: Cost) -> Cost:
    """LAYER_NORM_BACKWARD_FLOPS per element of X, plus dScale and dB."""
    return _norm_backward(node, forward, LAYER_NORM_BACKWARD_FLOPS)


@register_backward("Softmax")
def softmax_backward(node: NodeView, forward: Cost) -> Cost:
    """SOFTMAX_BACKWARD_FLOPS per element, from the saved output."""
    return _norm_backward(node, forward, SOFTMAX_BACKWARD_FLOPS)
