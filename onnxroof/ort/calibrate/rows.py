"""The rows of the benchmark suite: each function turns a table of shapes into benchmarks of one kind (profiled
convolutions, products, pools, chains of activations, ...), each labelled as calibration reports show it and
naming the op classes whose nodes it keeps."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from onnx import TensorProto

from onnxroof.ort.calibrate import chains, graphs
from onnxroof.ort.calibrate.bench import Bench
from onnxroof.ort.calibrate.classes import (
    ATTENTION_CLASSES,
    CONV_CLASSES,
    INT8_CONV_CLASSES,
    NBITS_CLASSES,
    PRODUCT_CLASSES,
    RECURRENT_CLASSES,
    REORDER_CLASSES,
    RESIZE_CLASSES,
    TRANSPOSE_CLASSES,
)
from onnxroof.ort.calibrate.graphs import Built
from onnxroof.predict.op_classes import SHORT_PRODUCT_ROWS

__all__ = [
    "activations",
    "attention",
    "batchnorms",
    "chain",
    "concats",
    "conv1ds",
    "convs",
    "depthwise",
    "dims",
    "elementwise",
    "epilogues",
    "gemms",
    "global_pools",
    "group_query_attention",
    "grouped",
    "int8_convs",
    "matmul_nbits",
    "norm_chains",
    "pools",
    "pows",
    "profile",
    "recurrent",
    "reduces",
    "reorders",
    "resizes",
    "transposes",
    "weight_waits",
]


def profile(
    label: str, graph: Callable[..., Built], args: tuple[Any, ...], harvest: Iterable[str], cold: bool | None = None
) -> Bench:
    """A profiled row, tailed."""
    return Bench("profile", label, graph, args, frozenset(harvest), cold)


def chain(label: str, graph: Callable[..., Built], *args: Any) -> Bench:
    """A chain row: ``graph(rand, n, *args)``."""
    return Bench("chain", label, graph, args, tail=False)


def dims(shape: Sequence[int]) -> str:
    """A shape as labels write it: 1x64x56x56."""
    return "x".join(map(str, shape))


def convs(*rows: tuple[int, int, int, int, int]) -> list[Bench]:
    """Dense convolutions (cin, cout, hw, k, stride), NCHWc after optimization."""
    return [
        profile(f"Conv {cin}->{cout} {k}x{k}/{s} @{hw}x{hw}", graphs.conv, (cin, cout, hw, k, s), CONV_CLASSES)
        for cin, cout, hw, k, s in rows
    ]


def conv1ds(*rows: tuple[int, int, int, int, int]) -> list[Bench]:
    """Convolutions over one spatial axis (cin, cout, length, k, stride), plain layout."""
    return [
        profile(f"Conv1d {cin}->{cout} k{k}/{s} @{n}", graphs.conv1d, (cin, cout, n, k, s), CONV_CLASSES)
        for cin, cout, n, k, s in rows
    ]


def vector_convs(*rows: tuple[int, int]) -> list[Bench]:
    """Chains of 1x1 convolutions on a 1x1 map (channels, squeezed), NCHWc after optimization: a
    squeeze-and-excitation block's two products on its pooled vector (conv_vector), timed by the wall clock
    (most run shorter than the profiler resolves), each with a weight of its own as in a network."""
    return [chain(f"Conv {c}->{s}->{c} 1x1 @1x1", chains.vector_conv_chain, c, s) for c, s in rows]


def depthwise(*rows: tuple[int, int, int]) -> list[Bench]:
    """Depthwise 3x3 convolutions (channels, hw, stride)."""
    return [
        profile(f"depthwise Conv {c} 3x3/{s} @{hw}x{hw}", graphs.conv, (c, c, hw, 3, s, c), CONV_CLASSES)
        for c, hw, s in rows
    ]


def border_depthwise(*rows: tuple[int, int, int, int]) -> list[Bench]:
    """Depthwise convolutions (channels, hw, k, dilation) at stride 1, padded to keep their size, whose windows reach
    into the padding from most output columns (depthwise_border): a segmentation backbone's dilated 5x5 layers."""
    return [
        profile(
            f"depthwise Conv {c} {k}x{k} dilation {d} @{hw}x{hw}",
            graphs.conv,
            (c, c, hw, k, 1, c, 1, "Relu", d),
            CONV_CLASSES,
        )
        for c, hw, k, d in rows
    ]


def epilogues(*rows: tuple[int, int, int, int, int]) -> list[Bench]:
    """Convolutions (cin, cout, hw, k, group) timed with Relu and with Clip."""
    return [
        Bench(
            "epilogue",
            f"{'depthwise ' if g > 1 else ''}Conv {cin}->{cout} {k}x{k} @{hw}x{hw}",
            graphs.conv,
            (cin, cout, hw, k, 1, g),
        )
        for cin, cout, hw, k, g in rows
    ]


def weight_waits(*rows: tuple[int, int, int, int]) -> list[Bench]:
    """Dense convolutions (cin, cout, hw, k), NCHWc after optimization, profiled with their weights cold and warm."""
    return [
        Bench("wait", f"Conv {cin}->{cout} {k}x{k} @{hw}x{hw}, weights cold and warm", graphs.conv, (cin, cout, hw, k))
        for cin, cout, hw, k in rows
    ]


def grouped(*rows: tuple[int, int, int, int]) -> list[Bench]:
    """Grouped convolutions (channels, hw, k, groups)."""
    return [
        profile(f"grouped Conv {c} g{g} {k}x{k} @{hw}x{hw}", graphs.conv, (c, c, hw, k, 1, g), CONV_CLASSES)
        for c, hw, k, g in rows
    ]


def gemms(*rows: tuple[int, int, int]) -> list[Bench]:
    """Gemm (m, k, n) by a transposed weight; its class follows its rows (gemm, gemm_short, gemv). A short
    product's weight is read cold whatever its size: its time is that weight's streaming, and in a model the
    weight comes from memory after the layers before it took the caches."""
    return [
        profile(
            f"Gemm {m}x{k}x{n}", graphs.gemm, (m, k, n), PRODUCT_CLASSES, cold=True if m < SHORT_PRODUCT_ROWS else None
        )
        for m, k, n in rows
    ]


def attention(*rows: tuple[int, int, int, int]) -> list[Bench]:
    """MatMul of two activations (heads, m, k, n)."""
    return [profile(f"MatMul {h}x{m}x{k}x{n}", graphs.matmul_act, (h, m, k, n), {"matmul"}) for h, m, k, n in rows]


def group_query_attention(*rows: tuple[int, int, int, int, int]) -> list[Bench]:
    """GroupQueryAttention (heads, kv_heads, head size, past rows, new tokens), fp32 with rotary embedding, its
    caches graph inputs and outputs as in a decoder step (untailed). Its inputs are activations, handed over hot,
    and its rotary tables a few rows: never read cold."""
    return [
        Bench(
            "profile",
            f"GroupQueryAttention {n}/{kv}x{h}, {new} new over {past} past",
            graphs.group_query_attention,
            (n, kv, h, past, new),
            ATTENTION_CLASSES,
            cold=False,
            tail=False,
        )
        for n, kv, h, past, new in rows
    ]


def matmul_nbits(*rows: tuple[int, int, int, int]) -> list[Bench]:
    """MatMulNBits (rows, k, n, accuracy_level) by a 4-bit weight; one row reads its weight cold, as a decode step
    reads each layer's after the layers before it took the caches (the suite's one-row products are past
    COLD_WEIGHTS, as the read_cold classes have them)."""
    return [
        profile(
            f"MatMulNBits {m}x{k}x{n} accuracy_level {level}",
            graphs.matmul_nbits,
            (m, k, n, level),
            NBITS_CLASSES,
            cold=True if m == 1 else None,
        )
        for m, k, n, level in rows
    ]


def pools(*rows: tuple[str, int, int, int, int, int, bool]) -> list[Bench]:
    """Pooling windows (op, channels, hw, k, stride, pad, NCHWc)."""
    return [
        profile(
            f"{op} {c} {k}x{k}/{s} @{hw}x{hw}{'' if nchwc else ' (NCHW)'}",
            graphs.pool,
            (op, c, hw, k, s, p, nchwc),
            {"pool", "pool_nchw"},
        )
        for op, c, hw, k, s, p, nchwc in rows
    ]


def global_pools(*rows: tuple[str, int, int, bool]) -> list[Bench]:
    """Global poolings (op, channels, hw, NCHWc)."""
    return [
        profile(f"{op} {c} @{hw}x{hw}", graphs.global_pool, (op, c, hw, nchwc), {"global_pool"})
        for op, c, hw, nchwc in rows
    ]


def batchnorms(*rows: tuple[int, int]) -> list[Bench]:
    """BatchNormalization after a conv (channels, hw): onnxruntime runs it as a depthwise 1x1 NCHWc conv."""
    return [
        profile(f"BatchNormalization {c} @{hw}x{hw} (NCHWc)", graphs.batchnorm_nchwc, (c, hw), {"batchnorm"})
        for c, hw in rows
    ]


def norm_chains(
    batchnorm: Sequence[tuple[int, int]],
    layernorm: Sequence[tuple[int, int]],
    skip_layernorm: Sequence[tuple[int, int]],
    instancenorm: Sequence[tuple[int, int]],
    lrn: Sequence[tuple[int, int]],
    softmax: Sequence[tuple[int, ...]],
) -> list[Bench]:
    """Chains of the normalizations: plain BatchNormalization, LayerNormalization and SkipLayerNormalization (tokens,
    dim), and InstanceNormalization, LRN (channels, hw), Softmax (shape)."""
    return (
        [chain(f"BatchNormalization {c} @{hw}x{hw}", chains.batchnorm_chain, c, hw) for c, hw in batchnorm]
        + [chain(f"LayerNormalization {t}x{d}", chains.layernorm_chain, t, d) for t, d in layernorm]
        + [chain(f"SkipLayerNormalization {t}x{d}", chains.skip_layernorm_chain, t, d) for t, d in skip_layernorm]
        + [chain(f"InstanceNormalization {c} @{hw}x{hw}", chains.instancenorm_chain, c, hw) for c, hw in instancenorm]
        + [chain(f"LRN {c} @{hw}x{hw}", chains.lrn_chain, c, hw) for c, hw in lrn]
        + [chain(f"Softmax {dims(s)}", chains.softmax_chain, s) for s in softmax]
    )


def elementwise(*shapes: tuple[int, ...], per_channel: bool) -> list[Bench]:
    """Chains of Relu and Add per shape, and with ``per_channel`` a per-channel Mul and Add on the 4-d ones."""
    out = []
    for s in shapes:
        out += [
            chain(f"Relu {dims(s)}", chains.activation_chain, "Relu", s),
            chain(f"Add {dims(s)}", chains.add_chain, s),
        ]
        if len(s) == 4 and per_channel:
            out += [
                chain(f"Mul per-channel {dims(s)}", chains.per_channel_chain, "Mul", s),
                chain(f"Add per-channel {dims(s)}", chains.per_channel_chain, "Add", s),
            ]
    return out


# The activations of these names are onnxruntime's (com.microsoft), the rest ONNX's.
_CONTRIB_ACTIVATIONS = frozenset({"Gelu", "FastGelu", "QuickGelu"})


def activations(*rows: tuple[str, tuple[int, ...]]) -> list[Bench]:
    """Chains of transcendental activations (op, shape)."""
    return [
        chain(
            f"{op} {dims(s)}",
            chains.activation_chain,
            op,
            s,
            "com.microsoft" if op in _CONTRIB_ACTIVATIONS else "",
        )
        for op, s in rows
    ]


def pows(*rows: tuple[float, tuple[int, ...]]) -> list[Bench]:
    """Chains of Pow by a constant scalar exponent (exponent, shape): 2 and 3 are computed by multiplying, others by
    the C library's pow."""
    return [chain(f"Pow {exponent:g} {dims(s)}", chains.pow_chain, s, exponent) for exponent, s in rows]


def quick_gelus(*rows: tuple[float, tuple[int, ...]]) -> list[Bench]:
    """Chains of com.microsoft's QuickGelu (alpha, shape): alpha 1 is SiLU as onnxruntime fuses it."""
    return [
        chain(f"QuickGelu alpha={alpha:g} {dims(s)}", chains.activation_chain, "QuickGelu", s, "com.microsoft", alpha)
        for alpha, s in rows
    ]


def recurrent(*rows: tuple[str, int, int, int]) -> list[Bench]:
    """One-layer LSTM, GRU or RNN (op, time steps, input size, hidden size) at batch 1, as PyTorch exports them, on
    warm weights whatever their size (a model's read of them is added by ``engine.exposed_weight_time``)."""
    return [
        profile(f"{op} {steps} steps {i}->{h}", graphs.recurrent, (op, steps, i, h), RECURRENT_CLASSES, cold=False)
        for op, steps, i, h in rows
    ]


def reorders(*rows: tuple[int, int]) -> list[Bench]:
    """NCHW <-> NCHWc reorders (channels, hw) between 1x1 convs and Negs, their activations hot."""
    return [
        profile(f"Reorder NCHW <-> NCHWc {c} @{hw}x{hw}", graphs.reorder_chain, (c, hw), REORDER_CLASSES, cold=False)
        for c, hw in rows
    ]


def concats(*rows: tuple[int, int, int]) -> list[Bench]:
    """Concat (parts, channels, hw) along channels."""
    return [profile(f"Concat {p}x{c} @{hw}x{hw}", graphs.concat, (p, c, hw), {"movement"}) for p, c, hw in rows]


def transposes(*rows: tuple[tuple[int, ...], tuple[int, ...]], elem_type: int = TensorProto.FLOAT) -> list[Bench]:
    """Transposes (shape, perm) of ``elem_type``; int8 ones that move more than one axis are the channel shuffles
    onnxruntime leaves in a channels-last int8 graph, run by its element-by-element kernel (transpose_generic)."""
    kind = "" if elem_type == TensorProto.FLOAT else f"{TensorProto.DataType.Name(elem_type).lower()} "
    return [
        profile(f"Transpose {kind}{dims(s)} perm {p}", graphs.transpose, (s, p, elem_type), TRANSPOSE_CLASSES)
        for s, p in rows
    ]


def resizes(*rows: tuple[int, int, bool], mode: str = "nearest") -> list[Bench]:
    """2x upsampling (channels, hw, after a conv) by ``mode``: nearest ones sample resize, interpolating ones
    resize_linear after a conv (NCHWc) and resize_linear_nchw without."""
    return [
        profile(
            f"Resize {mode} x2 {c} @{hw}x{hw} ({'NCHWc' if nchwc else 'NCHW'})",
            graphs.resize,
            (c, hw, nchwc, mode),
            RESIZE_CLASSES,
        )
        for c, hw, nchwc in rows
    ]


def reduces(*rows: tuple[str, tuple[int, ...], tuple[int, ...]]) -> list[Bench]:
    """Reductions (op, shape, axes)."""
    return [profile(f"{op} {dims(s)} axes {a}", graphs.reduce, (op, s, a), {"reduce"}) for op, s, a in rows]


# The nodes an 8-bit convolution benchmark keeps: the convolution, and for the dynamic form the quantization of
# its input (the Cast of its int32 accumulator to float is an elementwise node, which elementwise chains measure).
_INT8_HARVEST = INT8_CONV_CLASSES | {"quantize"}


def int8_convs(graph: Callable[..., Built], what: str, *rows: tuple[int, int, int, int, int]) -> list[Bench]:
    """8-bit convolutions (cin, cout, hw, k, group) built by ``graph`` (graphs.conv_integer or graphs.qdq_conv);
    a weight of 256 kB or more is read cold, as in a model."""
    return [
        profile(
            f"{what} {cin}->{cout}{f' g{g}' if g > 1 else ''} {k}x{k} @{hw}x{hw}",
            graph,
            (cin, cout, hw, k, 1, g),
            _INT8_HARVEST,
            cold=cin // g * cout * k * k >= 256 * 1024,
        )
        for cin, cout, hw, k, g in rows
    ]
