"""The calibration's micro-benchmark graphs: tiny ONNX models built with ``onnx.helper`` and their input feeds.

Each builder returns (model, feeds). Builders of a benchmark in the suite take a ``Rand`` first: their random
weights and inputs come from one generator in the order the suite builds them, so the same suite builds the same
graphs every time. The chain benchmarks' builders are in ``chains``, on ``build_model`` and ``Rand`` from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxroof.ort import sessions

__all__ = [
    "FLOAT",
    "NBITS_BLOCK",
    "Built",
    "Rand",
    "batchnorm_nchwc",
    "build_model",
    "concat",
    "conv",
    "conv1d",
    "conv_integer",
    "fp16_matmul",
    "gemm",
    "gemv_chain",
    "global_pool",
    "group_query_attention",
    "int8_matmul",
    "matmul_act",
    "matmul_nbits",
    "matmul_weight",
    "pool",
    "qdq_conv",
    "reduce",
    "reorder_chain",
    "resize",
    "slice_head",
    "split",
    "streaming_gemv",
    "tailed",
    "transpose",
]

FLOAT = TensorProto.FLOAT
_OPSET = 17

# A benchmark's graph and the feeds it runs on.
Built = tuple[onnx.ModelProto, dict[str, np.ndarray]]


class Rand:
    """Deterministic small random tensors (no denormals, no overflow), as sessions.random_array makes them."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def f(self, *shape: int) -> np.ndarray:
        """Small normal floats of ``shape``."""
        return sessions.random_array(tuple(shape), FLOAT, self.rng)

    def positive(self, *shape: int) -> np.ndarray:
        """Floats of ``shape`` no smaller than 0.5 (scales and variances)."""
        return (np.abs(self.f(*shape)) + 0.5).astype(np.float32)


def _vi(name: str, shape: Sequence[int] | None, dtype: int = FLOAT) -> onnx.ValueInfoProto:
    """A typed graph input/output (shape None: unstated)."""
    return helper.make_tensor_value_info(name, dtype, list(shape) if shape is not None else None)


def build_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[Sequence[int], int]],
    outputs: Sequence[str],
    inits: Mapping[str, np.ndarray] | None = None,
    output_type: int = FLOAT,
) -> onnx.ModelProto:
    """A model of ``nodes`` (opset 17 plus com.microsoft) with typed inputs and outputs of unstated shape (float
    unless ``output_type`` says otherwise)."""
    graph = helper.make_graph(
        list(nodes),
        "calibration",
        [_vi(n, s, t) for n, (s, t) in inputs.items()],
        [_vi(o, None, output_type) for o in outputs],
        [onnx.numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return model


def _single(
    op: str,
    inputs: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray] | None = None,
    *,
    order: Sequence[str],
    domain: str = "",
    outputs: int = 1,
    **attrs: Any,
) -> Built:
    """One node reading ``order`` (graph inputs fed with ``inputs``, initializers from ``weights``)."""
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, list(order), outs, name=op, domain=domain, **attrs)
    model = build_model([node], {k: (v.shape, FLOAT) for k, v in inputs.items()}, outs, weights or {})
    return model, dict(inputs)


def tailed(built: Built) -> Built:
    """The model with a Neg after each graph output, so that the measured node writes an intermediate tensor (an
    arena buffer that stays in cache between runs, as inside a model) rather than a fresh graph output."""
    model, feeds = built
    outputs = {o.name for o in model.graph.output}
    for node in list(model.graph.node):
        for i, out in enumerate(node.output):
            if out in outputs:
                node.output[i] = f"{out}__body"
                model.graph.node.append(helper.make_node("Neg", [f"{out}__body"], [out], name=f"{out}__tail"))
    return model, feeds


# ---------------------------------------------------------------------------------------------------- single ops


def reorder_chain(rand: Rand, c: int, hw: int, segments: int = 4) -> Built:
    """1x1 Conv -> Neg, repeated: onnxruntime reorders every conv's input to NCHWc and its output back for the Neg,
    on intermediate tensors, as between the NCHWc and plain parts of a model."""
    nodes, prev = [], "x"
    for i in range(segments):
        out = "y" if i == segments - 1 else f"n{i}"
        nodes.append(helper.make_node("Conv", [prev, "w"], [f"c{i}"], name=f"conv{i}", kernel_shape=[1, 1]))
        nodes.append(helper.make_node("Neg", [f"c{i}"], [out], name=f"neg{i}"))
        prev = out
    model = build_model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], {"w": rand.f(c, c, 1, 1)})
    return model, {"x": rand.f(1, c, hw, hw)}


def conv(
    rand: Rand,
    cin: int,
    cout: int,
    hw: int,
    k: int,
    stride: int = 1,
    group: int = 1,
    batch: int = 1,
    activation: str = "Relu",
    dilation: int = 1,
) -> Built:
    """Conv, followed by an activation that onnxruntime fuses into it: Relu (as in most CNNs) or Clip to [0, 6]
    (MobileNet's ReLU6); padded to keep the output's size at stride 1, dilated by ``dilation``."""
    pad = dilation * (k // 2)
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w", "b"],
            ["c"],
            name="conv",
            group=group,
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad] * 4,
            dilations=[dilation, dilation],
        )
    ]
    weights = {"w": rand.f(cout, cin // group, k, k), "b": rand.f(cout)}
    if activation == "Clip":
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="clip"))
        weights.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
    else:
        nodes.append(helper.make_node(activation, ["c"], ["y"], name="act"))
    return build_model(nodes, {"x": ((batch, cin, hw, hw), FLOAT)}, ["y"], weights), {"x": rand.f(batch, cin, hw, hw)}


def conv1d(rand: Rand, cin: int, cout: int, length: int, k: int, stride: int) -> Built:
    """Conv over one spatial axis without padding, as a speech encoder's feature layers run over audio frames."""
    return _single(
        "Conv",
        {"x": rand.f(1, cin, length)},
        {"w": rand.f(cout, cin, k), "b": rand.f(cout)},
        order=["x", "w", "b"],
        kernel_shape=[k],
        strides=[stride],
    )


def gemm(rand: Rand, m: int, k: int, n: int) -> Built:
    """Gemm by a weight with transB, as PyTorch exports Linear layers."""
    return _single(
        "Gemm", {"a": rand.f(m, k)}, {"w": rand.f(n, k), "bias": rand.f(n)}, order=["a", "w", "bias"], transB=1
    )


def matmul_weight(rand: Rand, batch: int, m: int, k: int, n: int) -> Built:
    """MatMul of an activation by a weight (onnxruntime prepacks it, like Gemm's)."""
    return _single("MatMul", {"a": rand.f(batch, m, k)}, {"w": rand.f(k, n)}, order=["a", "w"])


def matmul_act(rand: Rand, heads: int, m: int, k: int, n: int) -> Built:
    """Batched MatMul of two activations, as attention computes scores and context per head."""
    return _single("MatMul", {"a": rand.f(1, heads, m, k), "b": rand.f(1, heads, k, n)}, order=["a", "b"])


def swin_mask(size: int, window: int, value: float) -> np.ndarray:
    """Swin's shifted-window attention mask over a ``size`` x ``size`` map, as torchvision builds it: ``value`` on
    each window's token pairs from different regions of the shifted map, 0 elsewhere; (windows, 1, n, n)."""
    regions = np.zeros((size, size), np.int64)
    cuts = (slice(0, -window), slice(-window, -(window // 2)), slice(-(window // 2), None))
    for i, (rows, cols) in enumerate((r, c) for r in cuts for c in cuts):
        regions[rows, cols] = i
    per_window = size // window
    ids = regions.reshape(per_window, window, per_window, window).transpose(0, 2, 1, 3).reshape(-1, window * window)
    mask = np.where(ids[:, None, :] != ids[:, :, None], value, 0.0).astype(np.float32)
    return mask[:, None]


def masked_attention(rand: Rand, size: int, window: int, heads: int, d: int, value: float) -> Built:
    """Attention's Softmax and second product in Swin's shifted windows over a ``size`` x ``size`` map, the
    :func:`swin_mask` at ``value`` added first: nodes ``mask``, ``softmax`` and ``context`` (``d``-wide values)."""
    mask = swin_mask(size, window, value)
    windows, n = mask.shape[0], window * window
    nodes = [
        helper.make_node("Add", ["scores", "mask"], ["masked"], name="mask"),
        helper.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"], name="context"),
    ]
    inputs = {"scores": ((windows, heads, n, n), FLOAT), "v": ((windows, heads, n, d), FLOAT)}
    model = build_model(nodes, inputs, ["y"], {"mask": mask})
    return model, {"scores": rand.f(windows, heads, n, n), "v": rand.f(windows, heads, n, d)}


def recurrent(rand: Rand, op: str, steps: int, input_size: int, hidden: int) -> Built:
    """One LSTM, GRU or RNN layer over ``steps`` time steps at batch 1 with bias, as PyTorch exports them (GRU with
    ``linear_before_reset``): X ``[steps, 1, input_size]``."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    weights = {
        "w": rand.f(1, gates * hidden, input_size) * 0.1,
        "r": rand.f(1, gates * hidden, hidden) * 0.1,
        "b": rand.f(1, 2 * gates * hidden) * 0.1,
    }
    attrs: dict[str, Any] = {"linear_before_reset": 1} if op == "GRU" else {}
    x = {"x": rand.f(steps, 1, input_size)}
    return _single(op, x, weights, order=["x", "w", "r", "b"], hidden_size=hidden, **attrs)


def _after_conv(
    rand: Rand, c: int, hw: int, node: onnx.NodeProto, weights: Mapping[str, np.ndarray], *, depthwise: bool = False
) -> Built:
    """A 1x1 Conv (c -> c channels on hw x hw), or with ``depthwise`` a depthwise 3x3 one, into ``node``, which
    reads "c" and writes "y": onnxruntime runs the node in NCHWc layout when it can, as it does after a model's
    convolutions."""
    if depthwise:
        front = helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1] * 4, group=c)
        inits = {"w": rand.f(c, 1, 3, 3), **weights}
    else:
        front = helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1])
        inits = {"w": rand.f(c, c, 1, 1), **weights}
    nodes = [front, node]
    return build_model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], inits), {"x": rand.f(1, c, hw, hw)}


def pool(rand: Rand, op: str, c: int, hw: int, k: int, stride: int, pad: int, after_conv: bool = False) -> Built:
    """A pooling window op; ``after_conv`` puts a 1x1 conv in front so that onnxruntime runs the NCHWc pool."""
    attrs: dict[str, Any] = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    if not after_conv:
        return _single(op, {"x": rand.f(1, c, hw, hw)}, order=["x"], **attrs)
    return _after_conv(rand, c, hw, helper.make_node(op, ["c"], ["y"], name="pool", **attrs), {})


def global_pool(rand: Rand, op: str, c: int, hw: int, after_conv: bool) -> Built:
    """A global pooling; ``after_conv`` puts a depthwise 3x3 conv in front so that onnxruntime runs it in NCHWc.

    The pool reads its input where the node before left it, hot, as a model's pools follow an activation or a
    residual Add. A dense 1x1 conv in front would stream its weights through the caches first (16 MB at 2048
    channels) and push the pool's input out of them; the depthwise conv's weights are a few kilobytes."""
    if not after_conv:
        return _single(op, {"x": rand.f(1, c, hw, hw)}, order=["x"])
    return _after_conv(rand, c, hw, helper.make_node(op, ["c"], ["y"], name="gpool"), {}, depthwise=True)


def batchnorm_nchwc(rand: Rand, c: int, hw: int) -> Built:
    """Conv+Relu then BatchNormalization: onnxruntime turns the BN into a depthwise 1x1 NCHWc conv (DenseNet)."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("BatchNormalization", ["r", "s", "b", "m", "v"], ["y"], name="bn"),
    ]
    weights = {"w": rand.f(c, c, 1, 1), "s": rand.positive(c), "b": rand.f(c), "m": rand.f(c), "v": rand.positive(c)}
    return build_model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], weights), {"x": rand.f(1, c, hw, hw)}


def concat(rand: Rand, parts: int, c: int, hw: int) -> Built:
    """Concat of ``parts`` NCHW tensors along channels (Inception, DenseNet, U-Net skips)."""
    inputs = {f"x{i}": rand.f(1, c, hw, hw) for i in range(parts)}
    return _single("Concat", inputs, order=list(inputs), axis=1)


def split(rand: Rand, shape: Sequence[int], parts: int, axis: int) -> Built:
    """Split of ``shape`` along ``axis`` into ``parts`` equal tensors (ShuffleNet v2's channel split, a
    transformer's fused QKV projection)."""
    return _single("Split", {"x": rand.f(*shape)}, order=["x"], outputs=parts, axis=axis)


def slice_head(rand: Rand, shape: Sequence[int], axis: int, end: int) -> Built:
    """Slice: the first ``end`` entries of ``axis``."""
    node = helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"], name="slice")
    inits = {"st": np.array([0], np.int64), "en": np.array([end], np.int64), "ax": np.array([axis], np.int64)}
    return build_model([node], {"x": (tuple(shape), FLOAT)}, ["y"], inits), {"x": rand.f(*shape)}


def transpose(rand: Rand, shape: Sequence[int], perm: Sequence[int], elem_type: int = FLOAT) -> Built:
    """Transpose by ``perm`` (attention head splits and merges, channel shuffles, layout changes) of ``elem_type``
    data: int8 for the 8-bit transposes onnxruntime leaves in a channels-last int8 graph."""
    if elem_type == FLOAT:
        return _single("Transpose", {"x": rand.f(*shape)}, order=["x"], perm=list(perm))
    node = helper.make_node("Transpose", ["x"], ["y0"], name="Transpose", perm=list(perm))
    model = build_model([node], {"x": (tuple(shape), elem_type)}, ["y0"])
    model.graph.output[0].type.tensor_type.elem_type = elem_type
    return model, {"x": sessions.random_array(tuple(shape), elem_type, rand.rng)}


def resize(rand: Rand, c: int, hw: int, after_conv: bool, mode: str = "nearest") -> Built:
    """2x upsampling as PyTorch exports it: nearest (``mode`` "nearest") or bilinear without aligned corners
    ("linear"); after a conv onnxruntime runs it as an NCHWc Upsample."""
    scales = np.array([1, 1, 2, 2], dtype=np.float32)
    attrs = (
        dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        if mode == "nearest"
        else dict(mode=mode, coordinate_transformation_mode="half_pixel")
    )
    if not after_conv:
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", **attrs)
        model = build_model([node], {"x": ((1, c, hw, hw), FLOAT)}, ["y"], {"scales": scales})
        return model, {"x": rand.f(1, c, hw, hw)}
    node = helper.make_node("Resize", ["c", "", "scales"], ["y"], name="resize", **attrs)
    return _after_conv(rand, c, hw, node, {"scales": scales})


def reduce(rand: Rand, op: str, shape: Sequence[int], axes: Sequence[int]) -> Built:
    """A reduction over ``axes`` (ReduceSum takes them as an input since opset 13, the others as an attribute)."""
    node = (
        helper.make_node(op, ["x", "axes"], ["y"], name=op, keepdims=1)
        if op == "ReduceSum"
        else helper.make_node(op, ["x"], ["y"], name=op, keepdims=1, axes=list(axes))
    )
    inits = {"axes": np.array(axes, dtype=np.int64)} if op == "ReduceSum" else {}
    return build_model([node], {"x": (tuple(shape), FLOAT)}, ["y"], inits), {"x": rand.f(*shape)}


# ---------------------------------------------------------------------------------------------------- peaks, DRAM


def gemv_chain(nbytes: int, nodes: int = 4) -> Built:
    """``nodes`` MatMuls (1 x N) @ (N x N) in a row, each by a weight of its own, the weights about ``nbytes`` in
    all (no fewer): a model that reads that many bytes of weights an inference and little else."""
    n = max(math.ceil((nbytes / (4 * nodes)) ** 0.5), 16)
    rng = np.random.default_rng(4)
    weights = {f"w{i}": (rng.standard_normal((n, n)) / n**0.5).astype(np.float32) for i in range(nodes)}
    names = ["x", *(f"y{i}" for i in range(nodes))]
    model = build_model(
        [helper.make_node("MatMul", [names[i], f"w{i}"], [names[i + 1]], name=f"gemv{i}") for i in range(nodes)],
        {"x": ((1, n), FLOAT)},
        [names[-1]],
        weights,
    )
    return model, {"x": rng.standard_normal((1, n)).astype(np.float32)}


def streaming_gemv(nbytes: int) -> Built:
    """A MatMul (1 x K) @ (K x N) whose (K x N) operand, ``nbytes`` large, is a graph input streamed from DRAM."""
    k = 4096
    n = max(nbytes // (4 * k), 16)
    a = np.random.default_rng(3).standard_normal((1, k), dtype=np.float32)
    b = np.full((k, n), 0.01, dtype=np.float32)
    model = build_model(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="gemv")],
        {"a": ((1, k), FLOAT), "b": ((k, n), FLOAT)},
        ["y"],
    )
    return model, {"a": a, "b": b}


def _matmul_model(n: int, a_type: int, w: np.ndarray, y_type: int, op: str, name: str) -> onnx.ModelProto:
    """One ``op`` node of an (n x n) input of ``a_type`` by the weight ``w`` (opset 17 only)."""
    node = helper.make_node(op, ["a", "w"], ["y"], name=name)
    graph = helper.make_graph(
        [node],
        "calibration",
        [_vi("a", (n, n), a_type)],
        [_vi("y", None, y_type)],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    return model


def int8_matmul(n: int) -> Built:
    """MatMulInteger of uint8 (n x n) by an int8 (n x n) weight."""
    rng = np.random.default_rng(4)
    w = rng.integers(-127, 127, size=(n, n), dtype=np.int8)
    model = _matmul_model(n, TensorProto.UINT8, w, TensorProto.INT32, "MatMulInteger", "mmi")
    return model, {"a": rng.integers(0, 255, size=(n, n), dtype=np.uint8)}


def fp16_matmul(n: int) -> Built:
    """MatMul of fp16 (n x n) by an fp16 (n x n) weight."""
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((n, n)) * 0.05).astype(np.float16)
    model = _matmul_model(n, TensorProto.FLOAT16, w, TensorProto.FLOAT16, "MatMul", "mm16")
    return model, {"a": (rng.standard_normal((n, n)) * 0.05).astype(np.float16)}


# ---------------------------------------------------------------------------------------------------- low precision


def _pad_attrs(k: int, stride: int, group: int) -> dict[str, Any]:
    pad = k // 2
    return {"group": group, "kernel_shape": [k, k], "strides": [stride, stride], "pads": [pad] * 4}


def conv_integer(rand: Rand, cin: int, cout: int, hw: int, k: int, stride: int = 1, group: int = 1) -> Built:
    """A convolution as onnxruntime's dynamic quantization writes it: DynamicQuantizeLinear of the input, ConvInteger
    by a uint8 weight, Cast of the int32 accumulator to float, and Mul by the product of the two scales."""
    w = np.clip(rand.f(cout, cin // group, k, k) * 40 + 128, 0, 255).astype(np.uint8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="quantize"),
        helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"], name="conv", **_pad_attrs(k, stride, group)),
        helper.make_node("Cast", ["acc"], ["accf"], name="to_float", to=FLOAT),
        helper.make_node("Mul", ["xs", "ws"], ["s"], name="scale"),
        helper.make_node("Mul", ["accf", "s"], ["y"], name="rescale"),
    ]
    weights = {"w": w, "wz": np.array(128, np.uint8), "ws": np.array(0.02, np.float32)}
    return build_model(nodes, {"x": ((1, cin, hw, hw), FLOAT)}, ["y"], weights), {"x": rand.f(1, cin, hw, hw)}


def qdq_conv(rand: Rand, cin: int, cout: int, hw: int, k: int, stride: int = 1, group: int = 1) -> Built:
    """A convolution as onnxruntime's static quantization writes it in QDQ format (uint8 activations, int8 weight,
    int32 bias, Relu), which onnxruntime fuses into one QLinearConv in channels-last layout."""
    x_scale, w_scale = 0.05, 0.01
    w = np.clip(rand.f(cout, cin // group, k, k) * 40, -127, 127).astype(np.int8)
    weights = {
        "w": w,
        "b": (rand.f(cout) * 100).astype(np.int32),
        "xs": np.array(x_scale, np.float32),
        "xz": np.array(128, np.uint8),
        "ws": np.array(w_scale, np.float32),
        "wz": np.array(0, np.int8),
        "bs": np.array(x_scale * w_scale, np.float32),
        "bz": np.array(0, np.int32),
        "ys": np.array(0.05, np.float32),
        "yz": np.array(0, np.uint8),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_in"),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_in"),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="dq_w"),
        helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], name="dq_b"),
        helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="conv", **_pad_attrs(k, stride, group)),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"], name="q_out"),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"], name="dq_out"),
    ]
    return build_model(nodes, {"x": ((1, cin, hw, hw), FLOAT)}, ["y"], weights), {"x": rand.f(1, cin, hw, hw)}


# ---------------------------------------------------------------------------------------------------- decoder kernels

NBITS_BLOCK = 32  # MatMulNBits' block along K in the decoder benchmarks: onnxruntime GenAI's default


def group_query_attention(rand: Rand, heads: int, kv_heads: int, head: int, past: int, new: int) -> Built:
    """One com.microsoft GroupQueryAttention as onnxruntime GenAI's CPU models run it: fp32, ``heads`` query heads
    of ``head`` sharing ``kv_heads`` key/value heads, ``new`` tokens over a cache of ``past`` rows (a decode step:
    1 new token; a prefill: ``past`` 0), rotary embedding inside the kernel, the past and present caches separate
    tensors (the present ``past + new`` rows long, as its graph outputs), ``seqlens_k`` and
    ``total_sequence_length`` agreeing with the cache (``ort.decoder_feeds``)."""
    total = past + new
    feeds = {
        "query": rand.f(1, new, heads * head),
        "key": rand.f(1, new, kv_heads * head),
        "value": rand.f(1, new, kv_heads * head),
        "past_key": rand.f(1, kv_heads, past, head),
        "past_value": rand.f(1, kv_heads, past, head),
        "seqlens_k": np.array([total - 1], np.int32),
        "total_sequence_length": np.array(total, np.int32),
    }
    angles = np.arange(total, dtype=np.float32)[:, None] * rand.positive(1, head // 2)
    rotary = {"cos_cache": np.cos(angles).astype(np.float32), "sin_cache": np.sin(angles).astype(np.float32)}
    node = helper.make_node(
        "GroupQueryAttention",
        [*feeds, "cos_cache", "sin_cache"],
        ["y", "present_key", "present_value"],
        name="attention",
        domain="com.microsoft",
        num_heads=heads,
        kv_num_heads=kv_heads,
        do_rotary=1,
        local_window_size=-1,
        scale=1.0 / math.sqrt(head),
    )
    typed = {k: (v.shape, FLOAT if v.dtype == np.float32 else TensorProto.INT32) for k, v in feeds.items()}
    return build_model([node], typed, ["y", "present_key", "present_value"], rotary), feeds


def matmul_nbits(rand: Rand, m: int, k: int, n: int, accuracy_level: int) -> Built:
    """One com.microsoft MatMulNBits as onnxruntime GenAI's int4 models write it: ``m`` rows of fp32 A (``[1, m,
    k]``) by a ``k x n`` weight packed in 4 bits, blocks of :data:`NBITS_BLOCK` along K, fp32 scales, no zero points
    (symmetric), at ``accuracy_level`` (0: fp32 products on the dequantized weight; 4: A quantized to int8)."""
    blocks = math.ceil(k / NBITS_BLOCK)
    weights: dict[str, np.ndarray] = {
        "b": rand.rng.integers(0, 256, size=(n, blocks, NBITS_BLOCK // 2), dtype=np.uint8),
        "scales": (rand.positive(n * blocks) * 0.02).astype(np.float32),
    }
    return _single(
        "MatMulNBits",
        {"a": rand.f(1, m, k)},
        weights,
        order=["a", "b", "scales"],
        domain="com.microsoft",
        K=k,
        N=n,
        bits=4,
        block_size=NBITS_BLOCK,
        accuracy_level=accuracy_level,
    )
