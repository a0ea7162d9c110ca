"""Standard-op stand-ins for the onnxruntime contrib ops that no shape inference knows: one builder per op, in
one table, ``STANDINS``: (domain, op_type) -> builder.

A model that onnxruntime optimized and saved (``SessionOptions.optimized_model_filepath``) holds ops of its own:
``com.microsoft::FusedConv``, the NCHWc ops of ``com.microsoft.nchwc`` (Conv, the pools, Upsample, ReorderInput,
ReorderOutput), ``FusedGemm``, ``FusedMatMul``, the QLinear ops, ``NhwcMaxPool``, the fused Gelu family and
``SkipLayerNormalization``. onnx's shape inference knows none of them, and onnxruntime's symbolic inference
stops at the first one it does not know, so every tensor after such an op would have no shape and no cost.

Each builder replaces such a node by standard ops (one or a short sequence) whose outputs have the real op's
shapes and element types, keeping the output names (standin_context.py says what a builder sees); it returns
False to leave the node alone (an op it cannot express at the model's opset, or one the model's opset makes
standard). Ops with no rule are left alone. standins.py rewrites models with these rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onnxroof.load.standin_context import (
    MS,
    NCHWC,
    TO_CHANNELS_FIRST,
    TO_CHANNELS_LAST,
    Pieces,
    StandinBuilder,
    StandinContext,
    attr,
    copied_attrs,
    domain_of,
    input_at,
    inputs_at,
    output_at,
)
from onnxroof.protos import NodeProto, TensorProto

_ACTIVATION_ATTRS = (
    "activation",
    "activation_params",
    "activation_alpha",
    "activation_beta",
    "activation_gamma",
    "activation_axis",
)


# -------------------------------------------------------------------------------------------------------------
# Builders: convolution, pooling and NCHWc layout


def _conv(node: NodeProto, ctx: StandinContext) -> bool:
    """FusedConv (X, W, B, Z) and NCHWc Conv (X, W, B, Sum) -> Conv (X, W, B). The activation and the added
    tensor change values, not the shape. NCHWc weights are [C_out padded to the block, C_in / group, kH, kW], so
    Conv gives the padded channel count the NCHWc tensor really has."""
    ctx.emit("Conv", inputs_at(node, range(3)), node.output[0], copied_attrs(node, drop=_ACTIVATION_ATTRS))
    return True


def _pool(node: NodeProto, ctx: StandinContext) -> bool:
    """NCHWc MaxPool/AveragePool/GlobalMaxPool/GlobalAveragePool -> the standard pool, same attributes. Attributes
    the standard op gains only at a later opset are dropped where they hold their default value."""
    drop = []
    dilations = attr(node, "dilations")
    default_dilations = dilations is not None and all(d == 1 for d in dilations)
    if default_dilations and (ctx.opset < 10 or (node.op_type == "AveragePool" and ctx.opset < 19)):
        drop.append("dilations")  # MaxPool takes dilations from opset 10, AveragePool from 19
    if ctx.opset < 10 and attr(node, "ceil_mode", 0) == 0:
        drop.append("ceil_mode")  # both pools take ceil_mode from opset 10
    ctx.emit(node.op_type, [node.input[0]], node.output[0], copied_attrs(node, drop=drop))
    return True


def _nchwc_upsample(node: NodeProto, ctx: StandinContext) -> bool:
    """NCHWc Upsample (integer ``scales`` attribute, one per axis) -> nearest Resize with those scales as a
    constant: each output dim is the input dim times its scale."""
    scales = [float(s) for s in attr(node, "scales", [])]
    if not scales:
        return False
    x, y = node.input[0], node.output[0]
    if ctx.opset >= 11:
        ctx.emit("Resize", [x, ctx.const([], np.float32), ctx.const(scales, np.float32)], y, mode="nearest")
    elif ctx.opset == 10:
        ctx.emit("Resize", [x, ctx.const(scales, np.float32)], y, mode="nearest")
    elif ctx.opset == 9:
        ctx.emit("Upsample", [x, ctx.const(scales, np.float32)], y, mode="nearest")
    else:
        ctx.emit("Upsample", [x], y, mode="nearest", scales=scales)
    return True


def _padded_channels(name: str, ctx: StandinContext) -> int | None:
    """The channel count of an NCHWc tensor read by an NCHWc Conv: its weight is [C_out, C_in / group, kH, kW]
    with C_in already rounded up to the block size, so C_in = dims[1] * group."""
    for consumer in ctx.consumers(name):
        if (domain_of(consumer), consumer.op_type) == (NCHWC, "Conv") and consumer.input[0] == name:
            dims = ctx.constant_dims(input_at(consumer, 1))
            if dims is not None and len(dims) >= 2:
                return dims[1] * int(attr(consumer, "group", 1))
    return None


def _reorder_input(node: NodeProto, ctx: StandinContext) -> bool:
    """ReorderInput (NCHW, or NHWC with ``channels_last``, -> NCHWc) -> [N, C_pad, spatial...]: channels moved
    first, then padded to C_pad = C rounded up to the NCHWc block size.

    The block size (8 or 16, set by the CPU that optimized the model) is written nowhere, but an NCHWc Conv that
    reads the tensor holds C_pad in its weight (see _padded_channels). The padding is Concat(X, X) on the channel
    axis sliced to C_pad: exact without knowing C, since C_pad < C + block <= 2 C (a tensor with fewer channels
    than the block skips ReorderInput). Read only by NCHWc pools, C is a multiple of the block (they require it)
    and the tensor keeps its channel count."""
    x, y = node.input[0], node.output[0]
    last = bool(attr(node, "channels_last", 0))
    padded = _padded_channels(y, ctx)
    if padded is None:
        if not last:
            ctx.emit("Identity", [x], y)
            return True
        return ctx.permute(x, TO_CHANNELS_FIRST, y) is not None
    if last:
        x = ctx.permute(x, TO_CHANNELS_FIRST)
        if x is None:
            return False
    doubled = ctx.emit("Concat", [x, x], axis=1)
    return ctx.slice(doubled, 0, padded, 1, y) is not None


def _reorder_output(node: NodeProto, ctx: StandinContext) -> bool:
    """ReorderOutput (NCHWc -> NCHW, or NHWC with ``channels_last``) -> Slice of the first ``channels`` channels
    (dropping the block padding), then a move of the channels last where asked."""
    channels = attr(node, "channels", 0)
    if channels <= 0:
        return False
    last = bool(attr(node, "channels_last", 0))
    sliced = ctx.slice(node.input[0], 0, channels, 1, None if last else node.output[0])
    if sliced is None:
        return False
    return not last or ctx.permute(sliced, TO_CHANNELS_LAST, node.output[0], ctx.rank(node.input[0])) is not None


def _nhwc_max_pool(node: NodeProto, ctx: StandinContext) -> bool:
    """NhwcMaxPool (channels-last int8/uint8) -> Transpose to NCHW, MaxPool, Transpose back."""
    rank = 2 + len(attr(node, "kernel_shape", []))
    nchw = ctx.permute(node.input[0], TO_CHANNELS_FIRST, rank=rank)
    if nchw is None:
        return False
    pooled = ctx.emit("MaxPool", [nchw], attributes=copied_attrs(node))
    return ctx.permute(pooled, TO_CHANNELS_LAST, node.output[0], rank) is not None


# -------------------------------------------------------------------------------------------------------------
# Builders: matrix products


def _gemm(node: NodeProto, ctx: StandinContext) -> bool:
    """FusedGemm (A, B, C) -> Gemm with the same transA/transB/alpha/beta; the activation is dropped. Before
    opset 11 Gemm requires C: a zero of A's type stands in for an absent one."""
    inputs = inputs_at(node, range(3))
    if len(inputs) < 3 and ctx.opset < 11:
        from onnx import helper

        zero_type = helper.tensor_dtype_to_np_dtype(ctx.dtype(inputs[0]) or TensorProto.FLOAT)
        inputs = [inputs[0], inputs[1], ctx.const([0], zero_type)]
    ctx.emit("Gemm", inputs, node.output[0], copied_attrs(node, keep=("alpha", "beta", "transA", "transB")))
    return True


def _matmul_operand(trans: bool, trans_batch: bool) -> Pieces | None:
    """How FusedMatMul reorders an operand before the product (onnxruntime's FusedMatMulShapeInference):
    ``transBatch`` moves axis 0 to just before the last axis, ``trans`` then swaps the last two axes."""
    if trans_batch:
        return ((1, -1), (-1, None), (0, 1)) if trans else ((1, -1), (0, 1), (-1, None))
    return ((0, -2), (-1, None), (-2, -1)) if trans else None


def _fused_matmul(node: NodeProto, ctx: StandinContext) -> bool:
    """FusedMatMul / TransposeMatMul / FusedMatMulActivation (A, B) -> MatMul of the reordered operands
    (a Transpose when the operand's rank is known, an equal-count Reshape otherwise). A vector operand is never
    transposed, as in onnxruntime. ``alpha`` and the activation change values only."""
    operands = []
    for index, (trans, batch) in enumerate((("transA", "transBatchA"), ("transB", "transBatchB"))):
        x = node.input[index]
        pieces = _matmul_operand(bool(attr(node, trans, 0)), bool(attr(node, batch, 0)))
        if pieces is not None and ctx.rank(x) != 1:
            x = ctx.permute(x, pieces)
            if x is None:
                return False
        operands.append(x)
    ctx.emit("MatMul", operands, node.output[0])
    return True


def _matmul_then_cast(node: NodeProto, ctx: StandinContext) -> bool:
    """MatMulIntegerToFloat (A, B, a_scale, ...) and DynamicQuantizeMatMul (A, B, b_scale, ...) -> MatMul (A, B)
    cast to the type of the scale (input 2), which is the output's type."""
    product = ctx.emit("MatMul", [node.input[0], node.input[1]])
    ctx.cast(product, node.output[0], ctx.dtype(node.input[2]), node.input[2])
    return True


def _matmul_n(node: NodeProto, ctx: StandinContext) -> bool:
    """MatMulNBits / MatMulBnb4 (A [..., K], packed B, attribute N) -> A[..., 0:1] expanded to [..., N]. The
    packed weight has no usable shape; a [K, N] stand-in weight would cost memory, this costs none."""
    n = attr(node, "N")
    if not n or ctx.opset < 8:
        return False
    first = ctx.slice(node.input[0], 0, 1, -1)
    if first is None:
        return False
    ctx.emit("Expand", [first, ctx.const([n])], node.output[0])
    return True


# -------------------------------------------------------------------------------------------------------------
# Builders: quantized (QLinear) ops; outputs keep the quantized type of their zero point


def _qlinear_binary(node: NodeProto, ctx: StandinContext) -> bool:
    """QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp) -> Add / Mul (A, B): one type T
    for A, B and C, so the output type is A's."""
    ctx.emit(node.op_type[len("QLinear") :], [node.input[0], node.input[3]], node.output[0])
    return True


def _qlinear_unary(node: NodeProto, ctx: StandinContext) -> bool:
    """QLinearSigmoid / QLinearLeakyRelu / QLinearSoftmax (X, scales, zero points) -> Identity (X): same shape and
    quantized type."""
    ctx.emit("Identity", [node.input[0]], node.output[0])
    return True


def _qlinear_pool(node: NodeProto, ctx: StandinContext) -> bool:
    """QLinearAveragePool / QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp) -> AveragePool /
    GlobalAveragePool on X, between Transposes when ``channels_last``. Output type is X's."""
    op = node.op_type[len("QLinear") :]
    attributes = copied_attrs(node, drop=("channels_last",))
    x, y = node.input[0], node.output[0]
    if not attr(node, "channels_last", 0):
        ctx.emit(op, [x], y, attributes)
        return True
    kernel = attr(node, "kernel_shape")
    rank = 2 + len(kernel) if kernel else ctx.rank(x)
    nchw = ctx.permute(x, TO_CHANNELS_FIRST, rank=rank)
    if nchw is None:
        return False
    pooled = ctx.emit(op, [nchw], attributes=attributes)
    return ctx.permute(pooled, TO_CHANNELS_LAST, y, rank) is not None


def _qlinear_conv(node: NodeProto, ctx: StandinContext) -> bool:
    """com.microsoft QLinearConv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B) -> Conv (x, w, B), between
    Transposes when ``channels_last`` (x and y NHWC, w stays OIHW), cast to the type of y_zp."""
    x, w = node.input[0], node.input[3]
    bias = input_at(node, 8)
    attributes = copied_attrs(node, drop=("channels_last",))
    last = bool(attr(node, "channels_last", 0))
    kernel = attr(node, "kernel_shape")
    rank = ctx.rank(w) or (2 + len(kernel) if kernel else None)
    if last:
        x = ctx.permute(x, TO_CHANNELS_FIRST, rank=rank)
        if x is None:
            return False
    conv = ctx.emit("Conv", [x, w] + ([bias] if bias else []), attributes=attributes)
    if last:
        nhwc = ctx.permute(conv, TO_CHANNELS_LAST, rank=rank)
        if nhwc is None:
            return False
        conv = nhwc
    ctx.cast(conv, node.output[0], ctx.dtype(node.input[7]), node.input[7])
    return True


def _qlinear_concat(node: NodeProto, ctx: StandinContext) -> bool:
    """QLinearConcat (Y_scale, Y_zp, then (X, X_scale, X_zp) per input) -> Concat of the X's, cast to Y_zp's type
    (an input may be float)."""
    joined = ctx.emit("Concat", list(node.input[2::3]), attributes=copied_attrs(node, keep=("axis",)))
    ctx.cast(joined, node.output[0], ctx.dtype(node.input[1]), node.input[1])
    return True


def _qlinear_where(node: NodeProto, ctx: StandinContext) -> bool:
    """QLinearWhere (condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp) -> Where (condition, X, Y)."""
    ctx.emit("Where", [node.input[0], node.input[1], node.input[4]], node.output[0])
    return True


def _qgemm(node: NodeProto, ctx: StandinContext) -> bool:
    """QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp) -> Gemm (A, B, C) with transA/transB/alpha.
    The output is float without y_scale, else of y_zp's type."""
    inputs = [node.input[0], node.input[3]] + ([node.input[6]] if input_at(node, 6) else [])
    if len(inputs) < 3 and ctx.opset < 11:
        inputs.append(ctx.const([0], np.int32))
    product = ctx.emit("Gemm", inputs, attributes=copied_attrs(node, keep=("alpha", "transA", "transB")))
    if not input_at(node, 7):
        ctx.cast(product, node.output[0], TensorProto.FLOAT)
    else:
        y_zp = input_at(node, 8)
        like = y_zp or node.input[0]
        ctx.cast(product, node.output[0], ctx.dtype(like), like)
    return True


def _quantize(node: NodeProto, ctx: StandinContext) -> bool:
    """com.microsoft QuantizeLinear (x, y_scale, y_zp) -> Cast to y_zp's type (uint8 without one)."""
    y_zp = input_at(node, 2)
    ctx.cast(node.input[0], node.output[0], ctx.dtype(y_zp) if y_zp else TensorProto.UINT8, y_zp)
    return True


def _dequantize(node: NodeProto, ctx: StandinContext) -> bool:
    """com.microsoft DequantizeLinear (x, x_scale, x_zp) -> Cast to x_scale's type."""
    ctx.cast(node.input[0], node.output[0], ctx.dtype(node.input[1]), node.input[1])
    return True


# -------------------------------------------------------------------------------------------------------------
# Builders: transformer fusions


def _same_as_input(node: NodeProto, ctx: StandinContext) -> bool:
    """Gelu / FastGelu / QuickGelu (X, optional bias) -> Identity (X): elementwise, output shaped like X."""
    ctx.emit("Identity", [node.input[0]], node.output[0])
    return True


def _bias_add(node: NodeProto, ctx: StandinContext) -> bool:
    """BiasGelu (A, B) and BiasAdd (X, bias, skip) -> Add of the first two inputs: the bias broadcasts over the
    input, so the sum has the output's shape."""
    ctx.emit("Add", [node.input[0], node.input[1]], node.output[0])
    return True


def _norm_statistics(node: NodeProto, ctx: StandinContext, x: str, axis: int, outputs: Sequence[int]) -> None:
    """The float mean / inverse-std-dev outputs of a normalization: x's shape with axes ``axis``.. reduced to 1.
    Left unset (unknown) where ``axis`` counts from the front and x's rank is unknown."""
    wanted = [output_at(node, i) for i in outputs if output_at(node, i)]
    if not wanted:
        return
    rank = ctx.rank(x)
    if axis >= 0 and rank is None:
        return
    axes = list(range(axis, rank)) if axis >= 0 and rank is not None else list(range(axis, 0))
    reduced = ctx.reduce_mean(x, axes)
    for name in wanted:
        ctx.emit("Cast", [reduced], name, to=TensorProto.FLOAT)


def _skip_layer_norm(node: NodeProto, ctx: StandinContext) -> bool:
    """SkipLayerNormalization / SkipSimplifiedLayerNormalization (input, skip, gamma, ...) -> outputs 0 and 3
    (normalized, input+skip+bias) shaped like the input (Identity: onnxruntime gives them the input's shape even
    where skip broadcasts); outputs 1 and 2 (mean, inv_std_var) float with the last axis reduced to 1."""
    x = node.input[0]
    ctx.emit("Identity", [x], node.output[0])
    if output_at(node, 3):
        ctx.emit("Identity", [x], node.output[3])
    _norm_statistics(node, ctx, x, -1, (1, 2))
    return True


def _layer_norm(node: NodeProto, ctx: StandinContext) -> bool:
    """LayerNormalization before opset 17 (onnxruntime's own, in the default domain) and SimplifiedLayerNormalization
    (X, scale, ...) -> Identity (X) for Y, and the float statistics with axes ``axis``.. reduced to 1 (mean and
    inv_std_var for LayerNormalization, inv_std_var for the simplified one). From opset 17 LayerNormalization is
    standard and left alone."""
    if node.op_type == "LayerNormalization" and ctx.opset >= 17:
        return False
    x = node.input[0]
    ctx.emit("Identity", [x], node.output[0])
    stats = (1, 2) if node.op_type == "LayerNormalization" else (1,)
    _norm_statistics(node, ctx, x, int(attr(node, "axis", -1)), stats)
    return True


# -------------------------------------------------------------------------------------------------------------
# The table

STANDINS: dict[tuple[str, str], StandinBuilder] = {
    # NCHWc layout (ORT_ENABLE_ALL on a CPU with NCHWc kernels)
    (NCHWC, "Conv"): _conv,
    (NCHWC, "MaxPool"): _pool,
    (NCHWC, "AveragePool"): _pool,
    (NCHWC, "GlobalMaxPool"): _pool,
    (NCHWC, "GlobalAveragePool"): _pool,
    (NCHWC, "Upsample"): _nchwc_upsample,
    (NCHWC, "ReorderInput"): _reorder_input,
    (NCHWC, "ReorderOutput"): _reorder_output,
    # Fused float ops (ORT_ENABLE_EXTENDED and above)
    (MS, "FusedConv"): _conv,
    (MS, "FusedGemm"): _gemm,
    (MS, "FusedMatMul"): _fused_matmul,
    (MS, "FusedMatMulActivation"): _fused_matmul,
    (MS, "TransposeMatMul"): _fused_matmul,
    (MS, "NhwcMaxPool"): _nhwc_max_pool,
    # Quantized ops
    (MS, "QLinearAdd"): _qlinear_binary,
    (MS, "QLinearMul"): _qlinear_binary,
    (MS, "QLinearSigmoid"): _qlinear_unary,
    (MS, "QLinearLeakyRelu"): _qlinear_unary,
    (MS, "QLinearSoftmax"): _qlinear_unary,
    (MS, "QLinearAveragePool"): _qlinear_pool,
    (MS, "QLinearGlobalAveragePool"): _qlinear_pool,
    (MS, "QLinearConv"): _qlinear_conv,
    (MS, "QLinearConcat"): _qlinear_concat,
    (MS, "QLinearWhere"): _qlinear_where,
    (MS, "QGemm"): _qgemm,
    (MS, "MatMulIntegerToFloat"): _matmul_then_cast,
    (MS, "DynamicQuantizeMatMul"): _matmul_then_cast,
    (MS, "MatMulNBits"): _matmul_n,
    (MS, "MatMulBnb4"): _matmul_n,
    (MS, "QuantizeLinear"): _quantize,
    (MS, "DequantizeLinear"): _dequantize,
    # Transformer fusions
    (MS, "Gelu"): _same_as_input,
    (MS, "FastGelu"): _same_as_input,
    (MS, "QuickGelu"): _same_as_input,
    (MS, "BiasGelu"): _bias_add,
    (MS, "BiasAdd"): _bias_add,
    (MS, "SkipLayerNormalization"): _skip_layer_norm,
    (MS, "SkipSimplifiedLayerNormalization"): _skip_layer_norm,
    ("", "LayerNormalization"): _layer_norm,
    ("", "SimplifiedLayerNormalization"): _layer_norm,
}
