"""Standard-op stand-ins for the onnxruntime contrib ops that no shape inference knows.

A model that onnxruntime optimized and saved (``SessionOptions.optimized_model_filepath``) holds ops of its own:
``com.microsoft::FusedConv``, the NCHWc ops of ``com.microsoft.nchwc`` (Conv, the pools, Upsample, ReorderInput,
ReorderOutput), ``FusedGemm``, ``FusedMatMul``, the QLinear ops, ``NhwcMaxPool``, the fused Gelu family and
``SkipLayerNormalization``. onnx's shape inference knows none of them, and onnxruntime's symbolic inference
stops at the first one it does not know, so every tensor after such an op would have no shape and no cost.

:func:`shape_proxy` returns a copy of the model in which each such op is replaced by standard ops (one or a
short sequence) whose outputs have the real op's shapes and element types; the original output names are kept
and every helper tensor gets a fresh name. The proxy is only ever shape-inferred, never run for its values, so
a stand-in may compute anything as long as the shapes and dtypes are right (a transposed operand may be a
reshape of the original, a fused activation is dropped). :func:`infer_with_proxies` infers the proxy and copies
the shapes of the original tensors back onto a copy of the original model, so costs are still computed for the
real ops.

The rules live in one table, ``PROXIES``: (domain, op_type) -> builder. A builder gets the node and a
:class:`ProxyContext` (opset, known dtypes and ranks, fresh names, emitted nodes) and returns True when it
emitted a stand-in, False to leave the node alone (an op it cannot express at the model's opset, or one the
model's opset makes standard). Ops with no rule are left alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, helper, numpy_helper

__all__ = ["MS", "NCHWC", "PROXIES", "ProxyBuilder", "ProxyContext", "infer_with_proxies", "needs_proxy", "shape_proxy"]

MS = "com.microsoft"
NCHWC = "com.microsoft.nchwc"

_INT64_MAX = 2**63 - 1
_ACTIVATION_ATTRS = (
    "activation",
    "activation_params",
    "activation_alpha",
    "activation_beta",
    "activation_gamma",
    "activation_axis",
)
_MAX_PASSES = 8  # onnx-only inference passes; each one lets more rank-dependent stand-ins use a plain Transpose

# Axis reorderings written as pieces of the axis list, so that they hold for any rank:
# [(0, 1), (-1, None), (1, -1)] is "axis 0, then the last axis, then axes 1 .. -2" (channels last -> first).
Pieces = Sequence[tuple[int, int | None]]
_TO_CHANNELS_FIRST: Pieces = ((0, 1), (-1, None), (1, -1))
_TO_CHANNELS_LAST: Pieces = ((0, 1), (2, None), (1, 2))


# -------------------------------------------------------------------------------------------------------------
# What a builder sees


class ProxyContext:
    """The state one builder works with: the model's default opset, the element types and ranks known so far
    (graph inputs, initializers, Constant outputs, value_info), the dims of constant tensors, the nodes that read
    each tensor, fresh names, and the stand-in nodes it emits."""

    def __init__(
        self,
        opset: int,
        known: dict[str, tuple[int, int | None]],
        constant_dims: dict[str, tuple[int, ...]],
        consumers: dict[str, list[NodeProto]],
        taken: set[str],
        counter: Iterator[int],
    ):
        self.opset = opset
        self._known = known
        self._constant_dims = constant_dims
        self._consumers = consumers
        self._taken = taken
        self._counter = counter
        self.nodes: list[NodeProto] = []

    def dtype(self, name: str) -> int | None:
        """The element type of a tensor when known (None for unknown or an omitted input '')."""
        entry = self._known.get(name) if name else None
        return entry[0] if entry and entry[0] != TensorProto.UNDEFINED else None

    def rank(self, name: str) -> int | None:
        """The rank of a tensor when known."""
        entry = self._known.get(name) if name else None
        return entry[1] if entry else None

    def constant_dims(self, name: str) -> tuple[int, ...] | None:
        """The dims of an initializer or Constant output (weights are static in every optimized model)."""
        return self._constant_dims.get(name)

    def consumers(self, name: str) -> list[NodeProto]:
        """The (original) nodes of the graph being rewritten that read ``name``."""
        return self._consumers.get(name, [])

    def fresh(self, hint: str) -> str:
        """A tensor name used nowhere in the model."""
        while True:
            name = f"{hint}__proxy{next(self._counter)}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    def emit(
        self,
        op_type: str,
        inputs: Sequence[str],
        output: str | None = None,
        attributes: Iterable[AttributeProto] = (),
        **attrs: object,
    ) -> str:
        """Append a default-domain node with one output (a fresh name unless given); returns the output name."""
        out = output or self.fresh(op_type.lower())
        node = helper.make_node(op_type, list(inputs), [out], name=self.fresh(f"{op_type}_node"), **attrs)
        node.attribute.extend(attributes)
        self.nodes.append(node)
        return out

    def const(self, values: Sequence[float] | Sequence[int] | np.ndarray, dtype: type = np.int64) -> str:
        """A Constant node holding ``values`` (Constant rather than an initializer: valid at every IR version and
        scoped to the (sub)graph being rewritten)."""
        out = self.fresh("const")
        array = np.asarray(values, dtype=dtype)
        tensor = numpy_helper.from_array(array, out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=self.fresh("Constant_node"), value=tensor))
        self._known[out] = (helper.np_dtype_to_tensor_dtype(array.dtype), array.ndim)
        return out


ProxyBuilder = Callable[[NodeProto, ProxyContext], bool]


# -------------------------------------------------------------------------------------------------------------
# Small pieces shared by the builders


def _attr(node: NodeProto, name: str, default: object = None) -> object:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _attrs(node: NodeProto, keep: Iterable[str] | None = None, drop: Iterable[str] = ()) -> list[AttributeProto]:
    """Copies of a node's attributes: those named in ``keep`` (all when None), minus those in ``drop``."""
    keep_set = None if keep is None else set(keep)
    drop_set = set(drop)
    out = []
    for a in node.attribute:
        if a.name in drop_set or (keep_set is not None and a.name not in keep_set):
            continue
        copy = AttributeProto()
        copy.CopyFrom(a)
        out.append(copy)
    return out


def _inputs(node: NodeProto, indices: Iterable[int]) -> list[str]:
    """The inputs at those indices, with trailing omitted ones ('' or absent) dropped."""
    names = [node.input[i] if i < len(node.input) else "" for i in indices]
    while names and not names[-1]:
        names.pop()
    return names


def _input(node: NodeProto, index: int) -> str:
    return node.input[index] if index < len(node.input) else ""


def _output(node: NodeProto, index: int) -> str:
    return node.output[index] if index < len(node.output) else ""


def _resolve(pieces: Pieces, rank: int) -> list[int]:
    return [axis for start, end in pieces for axis in range(*slice(start, end).indices(rank))]


def _permute(
    ctx: ProxyContext, x: str, pieces: Pieces, output: str | None = None, rank: int | None = None
) -> str | None:
    """``x`` with its axes reordered as ``pieces`` say. With a known rank this is a Transpose; otherwise a
    Reshape of ``x`` to the reordered shape (same element count, so the same shape as the transpose; the values
    differ, which a proxy never uses), built from Shape/Slice/Concat that both inferences propagate. None when
    the rank is unknown and the opset has no Slice with tensor inputs."""
    rank = rank if rank is not None else ctx.rank(x)
    if rank is not None:
        perm = _resolve(pieces, rank)
        if perm == list(range(rank)):
            return ctx.emit("Identity", [x], output) if output else x
        return ctx.emit("Transpose", [x], output, perm=perm)
    if ctx.opset < 10:
        return None
    shape = ctx.emit("Shape", [x])
    parts = [
        ctx.emit("Slice", [shape, ctx.const([start]), ctx.const([_INT64_MAX if end is None else end]), ctx.const([0])])
        for start, end in pieces
    ]
    return ctx.emit("Reshape", [x, ctx.emit("Concat", parts, axis=0)], output)


def _slice(ctx: ProxyContext, x: str, start: int, end: int, axis: int, output: str | None = None) -> str | None:
    """``x[start:end]`` along ``axis``, at the model's opset (attributes before opset 10, inputs after)."""
    if ctx.opset >= 10:
        return ctx.emit("Slice", [x, ctx.const([start]), ctx.const([end]), ctx.const([axis])], output)
    if axis < 0:
        rank = ctx.rank(x)
        if rank is None:
            return None
        axis += rank
    return ctx.emit("Slice", [x], output, starts=[start], ends=[end], axes=[axis])


def _reduce_mean(ctx: ProxyContext, x: str, axes: Sequence[int], output: str | None = None) -> str:
    """ReduceMean keeping the reduced axes, at the model's opset (axes an attribute before 18, an input after)."""
    if ctx.opset >= 18:
        return ctx.emit("ReduceMean", [x, ctx.const(list(axes))], output, keepdims=1)
    return ctx.emit("ReduceMean", [x], output, axes=list(axes), keepdims=1)


def _cast(ctx: ProxyContext, x: str, output: str, dtype: int | None, like: str = "") -> str:
    """``x`` as ``dtype`` (a Cast); as the type of ``like`` where ``dtype`` is unknown (CastLike, opset 15);
    else unchanged."""
    if dtype is not None:
        return ctx.emit("Cast", [x], output, to=dtype)
    if like and ctx.opset >= 15:
        return ctx.emit("CastLike", [x, like], output)
    return ctx.emit("Identity", [x], output)


# -------------------------------------------------------------------------------------------------------------
# Builders: convolution, pooling and NCHWc layout


def _conv(node: NodeProto, ctx: ProxyContext) -> bool:
    """FusedConv (X, W, B, Z) and NCHWc Conv (X, W, B, Sum) -> Conv (X, W, B). The activation and the added
    tensor change values, not the shape. NCHWc weights are [C_out padded to the block, C_in / group, kH, kW], so
    Conv gives the padded channel count the NCHWc tensor really has."""
    ctx.emit("Conv", _inputs(node, range(3)), node.output[0], _attrs(node, drop=_ACTIVATION_ATTRS))
    return True


def _pool(node: NodeProto, ctx: ProxyContext) -> bool:
    """NCHWc MaxPool/AveragePool/GlobalMaxPool/GlobalAveragePool -> the standard pool, same attributes. Attributes
    the standard op gains only at a later opset are dropped where they hold their default value."""
    drop = []
    dilations = _attr(node, "dilations")
    default_dilations = dilations is not None and all(d == 1 for d in dilations)
    if default_dilations and (ctx.opset < 10 or (node.op_type == "AveragePool" and ctx.opset < 19)):
        drop.append("dilations")  # MaxPool takes dilations from opset 10, AveragePool from 19
    if ctx.opset < 10 and _attr(node, "ceil_mode", 0) == 0:
        drop.append("ceil_mode")  # both pools take ceil_mode from opset 10
    ctx.emit(node.op_type, [node.input[0]], node.output[0], _attrs(node, drop=drop))
    return True


def _nchwc_upsample(node: NodeProto, ctx: ProxyContext) -> bool:
    """NCHWc Upsample (integer ``scales`` attribute, one per axis) -> nearest Resize with those scales as a
    constant: each output dim is the input dim times its scale."""
    scales = [float(s) for s in _attr(node, "scales", [])]
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


def _padded_channels(name: str, ctx: ProxyContext) -> int | None:
    """The channel count of an NCHWc tensor read by an NCHWc Conv: its weight is [C_out, C_in / group, kH, kW]
    with C_in already rounded up to the block size, so C_in = dims[1] * group."""
    for consumer in ctx.consumers(name):
        if (_domain(consumer), consumer.op_type) == (NCHWC, "Conv") and consumer.input[0] == name:
            dims = ctx.constant_dims(_input(consumer, 1))
            if dims is not None and len(dims) >= 2:
                return dims[1] * int(_attr(consumer, "group", 1))
    return None


def _reorder_input(node: NodeProto, ctx: ProxyContext) -> bool:
    """ReorderInput (NCHW, or NHWC with ``channels_last``, -> NCHWc) -> [N, C_pad, spatial...]: channels moved
    first, then padded to C_pad = C rounded up to the NCHWc block size.

    The block size (8 or 16, set by the CPU that optimized the model) is written nowhere, but an NCHWc Conv that
    reads the tensor holds C_pad in its weight (see _padded_channels). The padding is Concat(X, X) on the channel
    axis sliced to C_pad: exact without knowing C, since C_pad < C + block <= 2 C (a tensor with fewer channels
    than the block skips ReorderInput). Read only by NCHWc pools, C is a multiple of the block (they require it)
    and the tensor keeps its channel count."""
    x, y = node.input[0], node.output[0]
    last = bool(_attr(node, "channels_last", 0))
    padded = _padded_channels(y, ctx)
    if padded is None:
        if not last:
            ctx.emit("Identity", [x], y)
            return True
        return _permute(ctx, x, _TO_CHANNELS_FIRST, y) is not None
    if last:
        x = _permute(ctx, x, _TO_CHANNELS_FIRST)
        if x is None:
            return False
    doubled = ctx.emit("Concat", [x, x], axis=1)
    return _slice(ctx, doubled, 0, padded, 1, y) is not None


def _reorder_output(node: NodeProto, ctx: ProxyContext) -> bool:
    """ReorderOutput (NCHWc -> NCHW, or NHWC with ``channels_last``) -> Slice of the first ``channels`` channels
    (dropping the block padding), then a move of the channels last where asked."""
    channels = _attr(node, "channels", 0)
    if channels <= 0:
        return False
    last = bool(_attr(node, "channels_last", 0))
    sliced = _slice(ctx, node.input[0], 0, channels, 1, None if last else node.output[0])
    if sliced is None:
        return False
    return not last or _permute(ctx, sliced, _TO_CHANNELS_LAST, node.output[0], ctx.rank(node.input[0])) is not None


def _nhwc_max_pool(node: NodeProto, ctx: ProxyContext) -> bool:
    """NhwcMaxPool (channels-last int8/uint8) -> Transpose to NCHW, MaxPool, Transpose back."""
    rank = 2 + len(_attr(node, "kernel_shape", []))
    nchw = _permute(ctx, node.input[0], _TO_CHANNELS_FIRST, rank=rank)
    if nchw is None:
        return False
    pooled = ctx.emit("MaxPool", [nchw], attributes=_attrs(node))
    return _permute(ctx, pooled, _TO_CHANNELS_LAST, node.output[0], rank) is not None


# -------------------------------------------------------------------------------------------------------------
# Builders: matrix products


def _gemm(node: NodeProto, ctx: ProxyContext) -> bool:
    """FusedGemm (A, B, C) -> Gemm with the same transA/transB/alpha/beta; the activation is dropped. Before
    opset 11 Gemm requires C: a zero of A's type stands in for an absent one."""
    inputs = _inputs(node, range(3))
    if len(inputs) < 3 and ctx.opset < 11:
        zero_type = helper.tensor_dtype_to_np_dtype(ctx.dtype(inputs[0]) or TensorProto.FLOAT)
        inputs = [inputs[0], inputs[1], ctx.const([0], zero_type)]
    ctx.emit("Gemm", inputs, node.output[0], _attrs(node, keep=("alpha", "beta", "transA", "transB")))
    return True


def _matmul_operand(trans: bool, trans_batch: bool) -> Pieces | None:
    """How FusedMatMul reorders an operand before the product (onnxruntime's FusedMatMulShapeInference):
    ``transBatch`` moves axis 0 to just before the last axis, ``trans`` then swaps the last two axes."""
    if trans_batch:
        return ((1, -1), (-1, None), (0, 1)) if trans else ((1, -1), (0, 1), (-1, None))
    return ((0, -2), (-1, None), (-2, -1)) if trans else None


def _fused_matmul(node: NodeProto, ctx: ProxyContext) -> bool:
    """FusedMatMul / TransposeMatMul / FusedMatMulActivation (A, B) -> MatMul of the reordered operands
    (a Transpose when the operand's rank is known, an equal-count Reshape otherwise). A vector operand is never
    transposed, as in onnxruntime. ``alpha`` and the activation change values only."""
    operands = []
    for index, (trans, batch) in enumerate((("transA", "transBatchA"), ("transB", "transBatchB"))):
        x = node.input[index]
        pieces = _matmul_operand(bool(_attr(node, trans, 0)), bool(_attr(node, batch, 0)))
        if pieces is not None and ctx.rank(x) != 1:
            x = _permute(ctx, x, pieces)
            if x is None:
                return False
        operands.append(x)
    ctx.emit("MatMul", operands, node.output[0])
    return True


def _matmul_then_cast(node: NodeProto, ctx: ProxyContext) -> bool:
    """MatMulIntegerToFloat (A, B, a_scale, ...) and DynamicQuantizeMatMul (A, B, b_scale, ...) -> MatMul (A, B)
    cast to the type of the scale (input 2), which is the output's type."""
    product = ctx.emit("MatMul", [node.input[0], node.input[1]])
    _cast(ctx, product, node.output[0], ctx.dtype(node.input[2]), node.input[2])
    return True


def _matmul_n(node: NodeProto, ctx: ProxyContext) -> bool:
    """MatMulNBits / MatMulBnb4 (A [..., K], packed B, attribute N) -> A[..., 0:1] expanded to [..., N]. The
    packed weight has no usable shape; a [K, N] stand-in weight would cost memory, this costs none."""
    n = _attr(node, "N")
    if not n or ctx.opset < 8:
        return False
    first = _slice(ctx, node.input[0], 0, 1, -1)
    if first is None:
        return False
    ctx.emit("Expand", [first, ctx.const([n])], node.output[0])
    return True


# -------------------------------------------------------------------------------------------------------------
# Builders: quantized (QLinear) ops; outputs keep the quantized type of their zero point


def _qlinear_binary(node: NodeProto, ctx: ProxyContext) -> bool:
    """QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp) -> Add / Mul (A, B): one type T
    for A, B and C, so the output type is A's."""
    ctx.emit(node.op_type[len("QLinear") :], [node.input[0], node.input[3]], node.output[0])
    return True


def _qlinear_unary(node: NodeProto, ctx: ProxyContext) -> bool:
    """QLinearSigmoid / QLinearLeakyRelu / QLinearSoftmax (X, scales, zero points) -> Identity (X): same shape and
    quantized type."""
    ctx.emit("Identity", [node.input[0]], node.output[0])
    return True


def _qlinear_pool(node: NodeProto, ctx: ProxyContext) -> bool:
    """QLinearAveragePool / QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp) -> AveragePool /
    GlobalAveragePool on X, between Transposes when ``channels_last``. Output type is X's."""
    op = node.op_type[len("QLinear") :]
    attributes = _attrs(node, drop=("channels_last",))
    x, y = node.input[0], node.output[0]
    if not _attr(node, "channels_last", 0):
        ctx.emit(op, [x], y, attributes)
        return True
    kernel = _attr(node, "kernel_shape")
    rank = 2 + len(kernel) if kernel else ctx.rank(x)
    nchw = _permute(ctx, x, _TO_CHANNELS_FIRST, rank=rank)
    if nchw is None:
        return False
    pooled = ctx.emit(op, [nchw], attributes=attributes)
    return _permute(ctx, pooled, _TO_CHANNELS_LAST, y, rank) is not None


def _qlinear_conv(node: NodeProto, ctx: ProxyContext) -> bool:
    """com.microsoft QLinearConv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B) -> Conv (x, w, B), between
    Transposes when ``channels_last`` (x and y NHWC, w stays OIHW), cast to the type of y_zp."""
    x, w = node.input[0], node.input[3]
    bias = _input(node, 8)
    attributes = _attrs(node, drop=("channels_last",))
    last = bool(_attr(node, "channels_last", 0))
    kernel = _attr(node, "kernel_shape")
    rank = ctx.rank(w) or (2 + len(kernel) if kernel else None)
    if last:
        x = _permute(ctx, x, _TO_CHANNELS_FIRST, rank=rank)
        if x is None:
            return False
    conv = ctx.emit("Conv", [x, w] + ([bias] if bias else []), attributes=attributes)
    if last:
        conv = _permute(ctx, conv, _TO_CHANNELS_LAST, rank=rank)
        if conv is None:
            return False
    _cast(ctx, conv, node.output[0], ctx.dtype(node.input[7]), node.input[7])
    return True


def _qlinear_concat(node: NodeProto, ctx: ProxyContext) -> bool:
    """QLinearConcat (Y_scale, Y_zp, then (X, X_scale, X_zp) per input) -> Concat of the X's, cast to Y_zp's type
    (an input may be float)."""
    joined = ctx.emit("Concat", list(node.input[2::3]), attributes=_attrs(node, keep=("axis",)))
    _cast(ctx, joined, node.output[0], ctx.dtype(node.input[1]), node.input[1])
    return True


def _qlinear_where(node: NodeProto, ctx: ProxyContext) -> bool:
    """QLinearWhere (condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp) -> Where (condition, X, Y)."""
    ctx.emit("Where", [node.input[0], node.input[1], node.input[4]], node.output[0])
    return True


def _qgemm(node: NodeProto, ctx: ProxyContext) -> bool:
    """QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp) -> Gemm (A, B, C) with transA/transB/alpha.
    The output is float without y_scale, else of y_zp's type."""
    inputs = [node.input[0], node.input[3]] + ([node.input[6]] if _input(node, 6) else [])
    if len(inputs) < 3 and ctx.opset < 11:
        inputs.append(ctx.const([0], np.int32))
    product = ctx.emit("Gemm", inputs, attributes=_attrs(node, keep=("alpha", "transA", "transB")))
    if not _input(node, 7):
        _cast(ctx, product, node.output[0], TensorProto.FLOAT)
    else:
        y_zp = _input(node, 8)
        like = y_zp or node.input[0]
        _cast(ctx, product, node.output[0], ctx.dtype(like), like)
    return True


def _quantize(node: NodeProto, ctx: ProxyContext) -> bool:
    """com.microsoft QuantizeLinear (x, y_scale, y_zp) -> Cast to y_zp's type (uint8 without one)."""
    y_zp = _input(node, 2)
    _cast(ctx, node.input[0], node.output[0], ctx.dtype(y_zp) if y_zp else TensorProto.UINT8, y_zp)
    return True


def _dequantize(node: NodeProto, ctx: ProxyContext) -> bool:
    """com.microsoft DequantizeLinear (x, x_scale, x_zp) -> Cast to x_scale's type."""
    _cast(ctx, node.input[0], node.output[0], ctx.dtype(node.input[1]), node.input[1])
    return True


# -------------------------------------------------------------------------------------------------------------
# Builders: transformer fusions


def _same_as_input(node: NodeProto, ctx: ProxyContext) -> bool:
    """Gelu / FastGelu / QuickGelu (X, optional bias) -> Identity (X): elementwise, output shaped like X."""
    ctx.emit("Identity", [node.input[0]], node.output[0])
    return True


def _bias_add(node: NodeProto, ctx: ProxyContext) -> bool:
    """BiasGelu (A, B) and BiasAdd (X, bias, skip) -> Add of the first two inputs: the bias broadcasts over the
    input, so the sum has the output's shape."""
    ctx.emit("Add", [node.input[0], node.input[1]], node.output[0])
    return True


def _norm_statistics(node: NodeProto, ctx: ProxyContext, x: str, axis: int, outputs: Sequence[int]) -> None:
    """The float mean / inverse-std-dev outputs of a normalization: x's shape with axes ``axis``.. reduced to 1.
    Left unset (unknown) where ``axis`` counts from the front and x's rank is unknown."""
    wanted = [_output(node, i) for i in outputs if _output(node, i)]
    if not wanted:
        return
    rank = ctx.rank(x)
    if axis >= 0 and rank is None:
        return
    axes = list(range(axis, rank)) if axis >= 0 else list(range(axis, 0))
    reduced = _reduce_mean(ctx, x, axes)
    for name in wanted:
        ctx.emit("Cast", [reduced], name, to=TensorProto.FLOAT)


def _skip_layer_norm(node: NodeProto, ctx: ProxyContext) -> bool:
    """SkipLayerNormalization / SkipSimplifiedLayerNormalization (input, skip, gamma, ...) -> outputs 0 and 3
    (normalized, input+skip+bias) shaped like the input (Identity: onnxruntime gives them the input's shape even
    where skip broadcasts); outputs 1 and 2 (mean, inv_std_var) float with the last axis reduced to 1."""
    x = node.input[0]
    ctx.emit("Identity", [x], node.output[0])
    if _output(node, 3):
        ctx.emit("Identity", [x], node.output[3])
    _norm_statistics(node, ctx, x, -1, (1, 2))
    return True


def _layer_norm(node: NodeProto, ctx: ProxyContext) -> bool:
    """LayerNormalization before opset 17 (onnxruntime's own, in the default domain) and SimplifiedLayerNormalization
    (X, scale, ...) -> Identity (X) for Y, and the float statistics with axes ``axis``.. reduced to 1 (mean and
    inv_std_var for LayerNormalization, inv_std_var for the simplified one). From opset 17 LayerNormalization is
    standard and left alone."""
    if node.op_type == "LayerNormalization" and ctx.opset >= 17:
        return False
    x = node.input[0]
    ctx.emit("Identity", [x], node.output[0])
    stats = (1, 2) if node.op_type == "LayerNormalization" else (1,)
    _norm_statistics(node, ctx, x, int(_attr(node, "axis", -1)), stats)
    return True


# -------------------------------------------------------------------------------------------------------------
# The table

PROXIES: dict[tuple[str, str], ProxyBuilder] = {
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


# -------------------------------------------------------------------------------------------------------------
# Rewriting a model


def _domain(node: NodeProto) -> str:
    return "" if node.domain == "ai.onnx" else node.domain


def _default_opset(model: ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _type_entry(type_proto: onnx.TypeProto) -> tuple[int, int | None] | None:
    if not type_proto.HasField("tensor_type"):
        return None
    tt = type_proto.tensor_type
    return tt.elem_type, (len(tt.shape.dim) if tt.HasField("shape") else None)


def _known_types(graph: GraphProto, outer: dict[str, tuple[int, int | None]]) -> dict[str, tuple[int, int | None]]:
    """Element type and rank of every tensor of ``graph`` whose type is written down, over those of outer scopes."""
    known = dict(outer)
    for vi in itertools.chain(graph.input, graph.value_info, graph.output):
        entry = _type_entry(vi.type)
        if entry is not None and (entry[1] is not None or vi.name not in known):
            known[vi.name] = entry
    for init in graph.initializer:
        known[init.name] = (init.data_type, len(init.dims))
    for node in graph.node:
        if node.op_type == "Constant" and _domain(node) == "" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    known[node.output[0]] = (a.t.data_type, len(a.t.dims))
                elif a.name in ("value_float", "value_int"):
                    known[node.output[0]] = (TensorProto.FLOAT if a.name == "value_float" else TensorProto.INT64, 0)
                elif a.name in ("value_floats", "value_ints"):
                    known[node.output[0]] = (TensorProto.FLOAT if a.name == "value_floats" else TensorProto.INT64, 1)
    return known


def _constant_dims(graph: GraphProto, outer: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Dims of the initializers and Constant outputs of ``graph``, over those of outer scopes."""
    dims = dict(outer)
    dims.update((init.name, tuple(init.dims)) for init in graph.initializer)
    for node in graph.node:
        if node.op_type == "Constant" and _domain(node) == "" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                dims[node.output[0]] = tuple(value.dims)
    return dims


def _all_names(graph: GraphProto, into: set[str]) -> set[str]:
    """Every tensor and node name of a graph and its subgraphs."""
    into.update(vi.name for vi in itertools.chain(graph.input, graph.value_info, graph.output))
    into.update(t.name for t in graph.initializer)
    for node in graph.node:
        into.update(node.input)
        into.update(node.output)
        into.add(node.name)
        for sub in _subgraphs(node):
            _all_names(sub, into)
    return into


def _subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.g
        elif a.type == AttributeProto.GRAPHS:
            yield from a.graphs


PROXY_OP_TYPES = frozenset(op_type for _, op_type in PROXIES)  # for a quick "any candidates?" test


def _applies(node: NodeProto, opset: int) -> bool:
    key = (_domain(node), node.op_type)
    if key not in PROXIES:
        return False
    return not (key == ("", "LayerNormalization") and opset >= 17)


def needs_proxy(model: ModelProto) -> bool:
    """Whether any node of the model (subgraphs included) is an op :data:`PROXIES` has a stand-in for."""
    opset = _default_opset(model)

    def walk(graph: GraphProto) -> bool:
        # The op-type test first: it rejects almost every node of a large graph with one field read.
        return any(
            (n.op_type in PROXY_OP_TYPES and _applies(n, opset))
            or (n.attribute and any(walk(sub) for sub in _subgraphs(n)))
            for n in graph.node
        )

    return walk(model.graph)


def _rewrite(
    graph: GraphProto,
    outer: dict[str, tuple[int, int | None]],
    outer_dims: dict[str, tuple[int, ...]],
    opset: int,
    taken: set[str],
    counter: Iterator[int],
) -> GraphProto:
    """A copy of ``graph`` (subgraphs included) with every op that has a stand-in replaced by it."""
    known = _known_types(graph, outer)
    constant_dims = _constant_dims(graph, outer_dims)
    consumers: dict[str, list[NodeProto]] = {}
    for node in graph.node:
        for name in set(node.input):
            consumers.setdefault(name, []).append(node)
    out = GraphProto()
    out.CopyFrom(graph)
    del out.node[:]
    for node in graph.node:
        builder = PROXIES.get((_domain(node), node.op_type))
        if builder is not None:
            ctx = ProxyContext(opset, known, constant_dims, consumers, taken, counter)
            try:
                done = builder(node, ctx)
            except (IndexError, ValueError, TypeError):  # a malformed node (missing input or attribute): keep it
                done = False
            if done:
                out.node.extend(ctx.nodes)
                continue
        copy = NodeProto()
        copy.CopyFrom(node)
        for a in copy.attribute:
            if a.type == AttributeProto.GRAPH:
                a.g.CopyFrom(_rewrite(a.g, known, constant_dims, opset, taken, counter))
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    g.CopyFrom(_rewrite(g, known, constant_dims, opset, taken, counter))
        out.node.append(copy)
    return out


def shape_proxy(model: ModelProto) -> ModelProto:
    """A copy of ``model`` in which every op that :data:`PROXIES` covers is replaced by standard ops with the same
    output names, shapes and element types (for shape inference only: the values differ). The caller's model is
    never modified. Known input ranks (from the model's value_info) let layout stand-ins use plain Transposes."""
    opset = _default_opset(model)
    graph = _rewrite(model.graph, {}, {}, opset, _all_names(model.graph, set()), itertools.count())
    proxy = ModelProto()
    proxy.CopyFrom(model)
    proxy.graph.CopyFrom(graph)
    return proxy


# -------------------------------------------------------------------------------------------------------------
# Inferring through the proxy


def _quality(type_proto: onnx.TypeProto) -> int:
    """0: no shape, 1: a shape with some dims unknown or symbolic, 2: every dim a number."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return 0
    dims = type_proto.tensor_type.shape.dim
    return 2 if all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims) else 1


def _copy_shapes(source: GraphProto, target: GraphProto) -> None:
    """Give the tensors of ``target`` (node outputs and graph outputs) the types ``source`` knows better, and do
    the same for the subgraphs of nodes that both graphs share (stand-ins never replace nodes with subgraphs)."""
    found = {vi.name: vi for vi in itertools.chain(source.value_info, source.output) if vi.type.HasField("tensor_type")}
    for out in target.output:
        better = found.get(out.name)
        if better is not None and _quality(better.type) > _quality(out.type):
            out.type.CopyFrom(better.type)
    declared = {vi.name for vi in itertools.chain(target.input, target.output)} | {t.name for t in target.initializer}
    existing = {vi.name: vi for vi in target.value_info}
    for name in (o for node in target.node for o in node.output):
        better = found.get(name)
        if not name or better is None or name in declared:
            continue
        current = existing.get(name)
        if current is None:
            added = target.value_info.add()
            added.CopyFrom(better)
            existing[name] = added
        elif _quality(better.type) > _quality(current.type):
            current.type.CopyFrom(better.type)
    by_output = {node.output[0]: node for node in source.node if node.output and node.output[0]}
    for node in target.node:
        twin = by_output.get(node.output[0]) if node.output else None
        if twin is None or twin.op_type != node.op_type:
            continue
        twin_subgraphs = {a.name: a for a in twin.attribute}
        for a in node.attribute:
            other = twin_subgraphs.get(a.name)
            if other is None:
                continue
            if a.type == AttributeProto.GRAPH:
                _copy_shapes(other.g, a.g)
            elif a.type == AttributeProto.GRAPHS:
                for mine, theirs in zip(a.graphs, other.graphs):
                    _copy_shapes(theirs, mine)


def unknown_output_count(graph: GraphProto) -> int:
    """How many node outputs of ``graph`` (not its subgraphs) lack a fully static shape."""
    known = {vi.name for vi in itertools.chain(graph.input, graph.value_info, graph.output) if _quality(vi.type) == 2}
    known.update(t.name for t in graph.initializer)
    return sum(1 for node in graph.node for o in node.output if o and o not in known)


def infer_with_proxies(
    model: ModelProto, infer: Callable[[ModelProto], tuple[ModelProto, list[str]]]
) -> tuple[ModelProto, list[str]]:
    """Shapes for ``model`` by inferring its proxy: a copy of ``model`` (nodes unchanged) whose tensors carry the
    shapes inferred on :func:`shape_proxy`'s stand-ins, and the warnings of ``infer``.

    ``infer`` is the caller's full inference (onnx's, then onnxruntime's symbolic for what is left). Before it,
    onnx-only passes repeat while they make progress: each pass knows more ranks, so stand-ins that had to
    reorder axes with a Reshape (which onnx propagates only from opset 14) become plain Transposes. Without a
    covered op this is just ``infer(model)``."""
    if not needs_proxy(model):
        return infer(model)
    result = ModelProto()
    result.CopyFrom(model)
    unknown = unknown_output_count(result.graph)
    for _ in range(_MAX_PASSES):
        proxy = shape_proxy(result)
        try:
            inferred = onnx.shape_inference.infer_shapes(proxy, check_type=False, strict_mode=False, data_prop=True)
        except Exception:  # the final `infer` reports failures
            break
        _copy_shapes(inferred.graph, result.graph)
        now = unknown_output_count(result.graph)
        if now == 0 or now >= unknown:
            unknown = now
            break
        unknown = now
    warnings: list[str] = []
    if unknown:
        inferred, warnings = infer(shape_proxy(result))
        _copy_shapes(inferred.graph, result.graph)
    return result, warnings
