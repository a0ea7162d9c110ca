"""The benchmark suite as data: every benchmark a calibration times (kind, label, graph builder and its
arguments, the op classes whose nodes it keeps, whether its weights are read cold), and how much and how long
each is timed, in a full and a quick form.

The op-class benchmarks use shapes typical of CNNs and transformers at batch 1. The quick suite is a reduced set
of small shapes timed in two passes, for tests and smoke checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from onnx import TensorProto

from onnxroof.ort.calibrate import graphs
from onnxroof.ort.calibrate.bench import Bench, MiB, Suite
from onnxroof.ort.calibrate.classes import CONV_CLASSES, INT8_CONV_CLASSES, REORDER_CLASSES, TRANSPOSE_CLASSES
from onnxroof.ort.calibrate.graphs import Built

__all__ = ["FULL", "QUICK", "SUITE", "Bench", "Suite"]

# The benchmark suite's version, recorded in every profile: a cached profile from an older suite lacks what this
# one measures, and --device host calibrates again. What each version added:
#   2: the epilogue ceiling of a fused Clip.
#   3: a grouped convolution in NCHWc layout is a sample of a dense class, no longer of conv_grouped.
#   4: the reference kernel is a small convolutional block (its time, reference_time_s), no longer a MatMul (its
#      rate), and the block gives the network_factor.
#   5: stems with 5x5 and wider kernels (conv_stem) are a class of their own, no longer conv samples.
#   6: the fp32 peak is read on whole kernels only, never on the epilogue pass of a fused Clip.
#   7: the low-precision kernels: Cast fp32 <-> fp16 (cast), the dynamic int8 convolution (DynamicQuantizeLinear,
#      ConvInteger dense and depthwise, the Cast of its accumulator), and the static QDQ convolution onnxruntime fuses
#      into a channels-last QLinearConv (dense and depthwise); 8-bit convolutions are timed against the int8 peak.
#   8: Transposes that move more than one axis (transpose_generic), timed on the int8 channel shuffles of a
#      channels-last int8 graph.
SUITE = 8

# ---------------------------------------------------------------------------------------------------- rows


def _profile(
    label: str, graph: Callable[..., Built], args: tuple[Any, ...], harvest: Iterable[str], cold: bool | None = None
) -> Bench:
    """A profiled row, tailed."""
    return Bench("profile", label, graph, args, frozenset(harvest), cold)


def _chain(label: str, graph: Callable[..., Built], *args: Any) -> Bench:
    """A chain row: ``graph(rand, n, *args)``."""
    return Bench("chain", label, graph, args, tail=False)


def _dims(shape: Sequence[int]) -> str:
    """A shape as labels write it: 1x64x56x56."""
    return "x".join(map(str, shape))


def _convs(*rows: tuple[int, int, int, int, int]) -> list[Bench]:
    """Dense convolutions (cin, cout, hw, k, stride), NCHWc after optimization."""
    return [
        _profile(f"Conv {cin}->{cout} {k}x{k}/{s} @{hw}x{hw}", graphs.conv, (cin, cout, hw, k, s), CONV_CLASSES)
        for cin, cout, hw, k, s in rows
    ]


def _depthwise(*rows: tuple[int, int, int]) -> list[Bench]:
    """Depthwise 3x3 convolutions (channels, hw, stride)."""
    return [
        _profile(f"depthwise Conv {c} 3x3/{s} @{hw}x{hw}", graphs.conv, (c, c, hw, 3, s, c), CONV_CLASSES)
        for c, hw, s in rows
    ]


def _epilogues(*rows: tuple[int, int, int, int, int]) -> list[Bench]:
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


def _grouped(*rows: tuple[int, int, int, int]) -> list[Bench]:
    """Grouped convolutions (channels, hw, k, groups)."""
    return [
        _profile(f"grouped Conv {c} g{g} {k}x{k} @{hw}x{hw}", graphs.conv, (c, c, hw, k, 1, g), CONV_CLASSES)
        for c, hw, k, g in rows
    ]


def _gemms(*rows: tuple[int, int, int]) -> list[Bench]:
    """Gemm (m, k, n) by a transposed weight."""
    return [_profile(f"Gemm {m}x{k}x{n}", graphs.gemm, (m, k, n), {"gemm"}) for m, k, n in rows]


def _attention(*rows: tuple[int, int, int, int]) -> list[Bench]:
    """MatMul of two activations (heads, m, k, n)."""
    return [_profile(f"MatMul {h}x{m}x{k}x{n}", graphs.matmul_act, (h, m, k, n), {"matmul"}) for h, m, k, n in rows]


def _pools(*rows: tuple[str, int, int, int, int, int, bool]) -> list[Bench]:
    """Pooling windows (op, channels, hw, k, stride, pad, NCHWc)."""
    return [
        _profile(
            f"{op} {c} {k}x{k}/{s} @{hw}x{hw}{'' if nchwc else ' (NCHW)'}",
            graphs.pool,
            (op, c, hw, k, s, p, nchwc),
            {"pool", "pool_nchw"},
        )
        for op, c, hw, k, s, p, nchwc in rows
    ]


def _global_pools(*rows: tuple[str, int, int, bool]) -> list[Bench]:
    """Global poolings (op, channels, hw, NCHWc)."""
    return [
        _profile(f"{op} {c} @{hw}x{hw}", graphs.global_pool, (op, c, hw, nchwc), {"global_pool"})
        for op, c, hw, nchwc in rows
    ]


def _batchnorms(*rows: tuple[int, int]) -> list[Bench]:
    """BatchNormalization after a conv (channels, hw): onnxruntime runs it as a depthwise 1x1 NCHWc conv."""
    return [
        _profile(f"BatchNormalization {c} @{hw}x{hw} (NCHWc)", graphs.batchnorm_nchwc, (c, hw), {"batchnorm"})
        for c, hw in rows
    ]


def _norm_chains(
    batchnorm: Sequence[tuple[int, int]],
    layernorm: Sequence[tuple[int, int]],
    instancenorm: Sequence[tuple[int, int]],
    lrn: Sequence[tuple[int, int]],
    softmax: Sequence[tuple[int, ...]],
) -> list[Bench]:
    """Chains of the normalizations: plain BatchNormalization, LayerNormalization (tokens, dim), and
    InstanceNormalization, LRN (channels, hw), Softmax (shape)."""
    return (
        [_chain(f"BatchNormalization {c} @{hw}x{hw}", graphs.batchnorm_chain, c, hw) for c, hw in batchnorm]
        + [_chain(f"LayerNormalization {t}x{d}", graphs.layernorm_chain, t, d) for t, d in layernorm]
        + [_chain(f"InstanceNormalization {c} @{hw}x{hw}", graphs.instancenorm_chain, c, hw) for c, hw in instancenorm]
        + [_chain(f"LRN {c} @{hw}x{hw}", graphs.lrn_chain, c, hw) for c, hw in lrn]
        + [_chain(f"Softmax {_dims(s)}", graphs.softmax_chain, s) for s in softmax]
    )


def _elementwise(*shapes: tuple[int, ...], per_channel: bool) -> list[Bench]:
    """Chains of Relu and Add per shape, and with ``per_channel`` a per-channel Mul and Add on the 4-d ones."""
    out = []
    for s in shapes:
        out += [
            _chain(f"Relu {_dims(s)}", graphs.activation_chain, "Relu", s),
            _chain(f"Add {_dims(s)}", graphs.add_chain, s),
        ]
        if len(s) == 4 and per_channel:
            out += [
                _chain(f"Mul per-channel {_dims(s)}", graphs.per_channel_chain, "Mul", s),
                _chain(f"Add per-channel {_dims(s)}", graphs.per_channel_chain, "Add", s),
            ]
    return out


def _activations(*rows: tuple[str, tuple[int, ...]]) -> list[Bench]:
    """Chains of transcendental activations (op, shape); Gelu is com.microsoft's."""
    return [
        _chain(f"{op} {_dims(s)}", graphs.activation_chain, op, s, "com.microsoft" if op == "Gelu" else "")
        for op, s in rows
    ]


def _reorders(*rows: tuple[int, int]) -> list[Bench]:
    """NCHW <-> NCHWc reorders (channels, hw) between 1x1 convs and Negs, their activations hot."""
    return [
        _profile(f"Reorder NCHW <-> NCHWc {c} @{hw}x{hw}", graphs.reorder_chain, (c, hw), REORDER_CLASSES, cold=False)
        for c, hw in rows
    ]


def _concats(*rows: tuple[int, int, int]) -> list[Bench]:
    """Concat (parts, channels, hw) along channels."""
    return [_profile(f"Concat {p}x{c} @{hw}x{hw}", graphs.concat, (p, c, hw), {"movement"}) for p, c, hw in rows]


def _transposes(*rows: tuple[tuple[int, ...], tuple[int, ...]], elem_type: int = TensorProto.FLOAT) -> list[Bench]:
    """Transposes (shape, perm) of ``elem_type``; int8 ones that move more than one axis are the channel shuffles
    onnxruntime leaves in a channels-last int8 graph, run by its element-by-element kernel (transpose_generic)."""
    kind = "" if elem_type == TensorProto.FLOAT else f"{TensorProto.DataType.Name(elem_type).lower()} "
    return [
        _profile(f"Transpose {kind}{_dims(s)} perm {p}", graphs.transpose, (s, p, elem_type), TRANSPOSE_CLASSES)
        for s, p in rows
    ]


def _resizes(*rows: tuple[int, int, bool]) -> list[Bench]:
    """Nearest 2x upsampling (channels, hw, after a conv)."""
    return [_profile(f"Resize x2 {c} @{hw}x{hw}", graphs.resize, (c, hw, nchwc), {"resize"}) for c, hw, nchwc in rows]


def _reduces(*rows: tuple[str, tuple[int, ...], tuple[int, ...]]) -> list[Bench]:
    """Reductions (op, shape, axes)."""
    return [_profile(f"{op} {_dims(s)} axes {a}", graphs.reduce, (op, s, a), {"reduce"}) for op, s, a in rows]


def _casts(*shapes: tuple[int, ...]) -> list[Bench]:
    """Cast fp32 -> fp16 -> fp32 (shape): two cast samples each."""
    return [_profile(f"Cast fp32 <-> fp16 {_dims(s)}", graphs.cast_pair, (s,), {"cast"}) for s in shapes]


# The nodes an 8-bit convolution benchmark keeps: the convolution, and for the dynamic form the quantization of
# its input and the Cast of its int32 accumulator to float.
_INT8_HARVEST = INT8_CONV_CLASSES | {"quantize", "cast"}


def _int8_convs(graph: Callable[..., Built], what: str, *rows: tuple[int, int, int, int, int]) -> list[Bench]:
    """8-bit convolutions (cin, cout, hw, k, group) built by ``graph`` (graphs.conv_integer or graphs.qdq_conv);
    a weight of 256 kB or more is read cold, as in a model."""
    return [
        _profile(
            f"{what} {cin}->{cout}{f' g{g}' if g > 1 else ''} {k}x{k} @{hw}x{hw}",
            graph,
            (cin, cout, hw, k, 1, g),
            _INT8_HARVEST,
            cold=cin // g * cout * k * k >= 256 * 1024,
        )
        for cin, cout, hw, k, g in rows
    ]


# ---------------------------------------------------------------------------------------------------- the suites

# (cin, cout, hw, k, group) of the full suite's int8 convolutions: dense and depthwise ones of ResNet's and
# MobileNet's stages; the dynamic ones include deep layers on 2x2 outputs, bound by their weights.
_Row = tuple[int, int, int, int, int]
_DYNAMIC_INT8_ROWS: tuple[_Row, ...] = ((64, 64, 28, 3, 1), (128, 128, 14, 3, 1), (32, 192, 28, 1, 1))
_DYNAMIC_INT8_ROWS += ((256, 256, 2, 3, 1), (512, 512, 2, 3, 1), (320, 1280, 2, 1, 1), (144, 144, 56, 3, 144))
_DYNAMIC_INT8_ROWS += ((192, 192, 28, 3, 192), (576, 576, 14, 3, 576), (960, 960, 7, 3, 960))
_STATIC_INT8_ROWS: tuple[_Row, ...] = ((64, 64, 28, 3, 1), (128, 128, 14, 3, 1), (256, 256, 7, 3, 1))
_STATIC_INT8_ROWS += ((512, 512, 4, 3, 1), (32, 192, 28, 1, 1), (96, 24, 56, 1, 1), (144, 144, 56, 3, 144))
_STATIC_INT8_ROWS += ((192, 192, 28, 3, 192), (576, 576, 14, 3, 576), (960, 960, 7, 3, 960))

_FULL_BENCHES: tuple[Bench, ...] = (
    # convolutions: ResNet, VGG, U-Net, AlexNet, Inception, MobileNet stems
    *_convs(
        (64, 64, 56, 3, 1),
        (128, 128, 28, 3, 1),
        (256, 256, 14, 3, 1),
        (96, 128, 28, 3, 1),
        (64, 96, 14, 3, 1),
        (512, 512, 14, 3, 1),
        (128, 128, 56, 3, 2),
        (32, 64, 27, 5, 1),
        (16, 64, 55, 3, 1),
        (64, 256, 56, 1, 1),
        (256, 64, 56, 1, 1),
        (128, 512, 28, 1, 1),
        (512, 128, 28, 1, 1),
        (1024, 256, 14, 1, 1),
        (256, 1024, 14, 1, 1),
        (192, 32, 28, 1, 1),
        (256, 512, 28, 1, 2),
        (96, 32, 56, 1, 1),
        (512, 512, 7, 3, 1),
        (160, 224, 7, 3, 1),
        (256, 512, 8, 3, 1),
        (1024, 256, 7, 1, 1),
        (2048, 512, 7, 1, 1),
        (3, 64, 224, 7, 2),
        (3, 32, 224, 3, 2),
        (32, 16, 112, 1, 1),
        (16, 96, 112, 1, 1),
        (64, 16, 56, 1, 1),
        (128, 128, 112, 3, 1),
        (256, 256, 56, 3, 1),
        (192, 64, 64, 3, 1),
        (384, 128, 32, 3, 1),
        (32, 32, 128, 3, 1),
        (256, 512, 13, 3, 1),
        (64, 192, 27, 5, 1),
        (96, 256, 55, 5, 2),
        (3, 64, 224, 3, 1),
        (3, 64, 224, 11, 4),
        (3, 96, 224, 7, 2),
        (32, 4, 128, 1, 1),
        (16, 32, 28, 5, 1),
        (32, 96, 28, 5, 1),
    ),
    # depthwise: the strided ones; the stride-1 ones are the Relu twins of the epilogue pairs below
    *_depthwise((96, 112, 2), (144, 56, 2), (576, 14, 2)),
    # MobileNet's ReLU6 (Clip) is applied in a pass over the output after the kernel: its depthwise convolutions
    # and 1x1 expansions, outputs from 188 kB to 4.8 MB (the depthwise Relu twins are depthwise samples too)
    *_epilogues(
        (144, 144, 56, 3, 144),
        (32, 32, 112, 3, 32),
        (192, 192, 28, 3, 192),
        (384, 384, 14, 3, 384),
        (960, 960, 7, 3, 960),
        (16, 96, 112, 1, 1),
        (24, 144, 56, 1, 1),
        (32, 192, 28, 1, 1),
        (64, 384, 14, 1, 1),
        (160, 960, 7, 1, 1),
    ),
    # grouped: ShuffleNet's 1x1 and ResNeXt's 3x3 in plain layout; AlexNet's two-group 3x3, whose groups fill
    # whole NCHWc blocks, is a conv_mid sample
    *_grouped((136, 28, 1, 4), (272, 14, 1, 4), (544, 7, 1, 4), (384, 13, 3, 2), (128, 56, 3, 32)),
    # matrix products: transformer projections and MLPs, attention, and matrix-vector classifiers at batch 1
    *_gemms(
        (197, 768, 768),
        (197, 768, 3072),
        (197, 3072, 768),
        (197, 768, 2304),
        (50, 512, 512),
        (128, 1024, 1024),
        (16, 256, 256),
        (1, 9216, 4096),
        (1, 4096, 4096),
        (1, 2048, 1000),
        (1, 1024, 1000),
        (1, 512, 1000),
    ),
    _profile("MatMul 1x197x768 by weight 768x768", graphs.matmul_weight, (1, 197, 768, 768), {"gemm"}),
    *_attention((12, 197, 64, 197), (12, 197, 197, 64), (8, 128, 64, 128), (4, 64, 32, 64)),
    # pooling, in NCHWc after a convolution and in plain layout
    *_pools(
        ("MaxPool", 64, 112, 3, 2, 1, True),
        ("MaxPool", 96, 109, 3, 2, 0, True),
        ("MaxPool", 192, 56, 3, 2, 1, True),
        ("MaxPool", 256, 27, 3, 2, 0, True),
        ("MaxPool", 480, 28, 3, 2, 1, True),
        ("AveragePool", 192, 28, 3, 1, 1, True),
        ("AveragePool", 576, 14, 3, 1, 1, True),
        ("AveragePool", 128, 56, 2, 2, 0, True),
        ("MaxPool", 256, 13, 3, 2, 0, True),
        ("MaxPool", 512, 14, 2, 2, 0, True),
        ("MaxPool", 128, 32, 2, 2, 0, True),
        ("MaxPool", 24, 112, 3, 2, 1, False),
        ("AveragePool", 60, 28, 3, 2, 1, False),
        ("AveragePool", 64, 56, 3, 1, 1, False),
        ("MaxPool", 64, 112, 3, 2, 1, False),
    ),
    *_global_pools(
        ("GlobalAveragePool", 2048, 7, True),
        ("GlobalAveragePool", 1024, 7, True),
        ("GlobalAveragePool", 512, 7, True),
        ("GlobalAveragePool", 1000, 13, False),
        ("GlobalAveragePool", 64, 56, True),
        ("GlobalMaxPool", 1280, 7, True),
    ),
    # normalization
    *_batchnorms((64, 56), (128, 28), (256, 14), (512, 7), (256, 56), (640, 14)),
    *_norm_chains(
        batchnorm=[(64, 56), (96, 28)],
        layernorm=[(197, 768), (50, 512), (128, 1024), (16, 256)],
        instancenorm=[(64, 56), (32, 128), (256, 14)],
        lrn=[(96, 55), (64, 56), (192, 27), (256, 13)],
        softmax=[(1, 1000), (1, 12, 197, 197), (1, 8, 128, 128), (1, 4, 64, 64)],
    ),
    # elementwise and activations, over sizes spanning the cache levels
    *_elementwise(
        (1, 64, 16, 16),
        (1, 64, 56, 56),
        (1, 256, 56, 56),
        (1, 197, 768),
        (1, 128, 28, 28),
        (1, 32, 112, 112),
        per_channel=True,
    ),
    _chain("Clip 1x144x56x56", graphs.clip_chain, (1, 144, 56, 56)),
    *_activations(
        ("Sigmoid", (1, 64, 56, 56)),
        ("Tanh", (1, 197, 768)),
        ("Gelu", (1, 197, 3072)),
        ("Gelu", (1, 50, 512)),
        ("Sigmoid", (1, 256, 14, 14)),
        ("Erf", (1, 197, 768)),
    ),
    # data movement
    *_reorders((64, 28), (64, 56), (32, 112), (96, 28), (256, 14), (512, 7), (768, 14), (1024, 7)),
    *_concats((2, 64, 28), (4, 64, 56), (2, 256, 14), (3, 128, 28), (2, 32, 128), (4, 128, 7)),
    _profile("Split 3x768 of 197x2304", graphs.split, ((1, 197, 2304), 3, -1), {"movement"}),
    _profile("Split 2x116 @28x28", graphs.split, ((1, 232, 28, 28), 2, 1), {"movement"}),
    _profile("Slice half of 1x256x56x56", graphs.slice_head, ((1, 256, 56, 56), 1, 128), {"movement"}),
    *_transposes(
        ((1, 197, 12, 64), (0, 2, 1, 3)),
        ((1, 197, 12, 64), (0, 2, 3, 1)),
        ((1, 12, 197, 64), (0, 2, 1, 3)),
        ((1, 4, 34, 28, 28), (0, 2, 1, 3, 4)),
        ((1, 64, 56, 56), (0, 2, 3, 1)),
        ((1, 768, 196), (0, 2, 1)),
        ((1, 2, 116, 14, 14), (0, 2, 1, 3, 4)),
        ((1, 8, 128, 64), (0, 2, 1, 3)),
    ),
    *_transposes(
        ((1, 28, 28, 3, 80), (0, 4, 3, 1, 2)),
        ((1, 14, 14, 2, 116), (0, 4, 3, 1, 2)),
        ((1, 56, 56, 4, 16), (0, 4, 3, 1, 2)),
        ((1, 7, 7, 3, 320), (0, 4, 3, 1, 2)),
        elem_type=TensorProto.INT8,
    ),
    *_resizes((64, 32, True), (128, 16, True), (32, 64, True), (256, 8, True)),
    *_reduces(
        ("ReduceMean", (1, 197, 768), (2,)),
        ("ReduceSum", (1, 256, 56, 56), (2, 3)),
        ("ReduceMax", (1, 1000), (1,)),
        ("ReduceMean", (1, 512, 14, 14), (2, 3)),
    ),
    # low precision: the Casts around fp16 nodes without fp16 kernels, and int8 convolutions, dynamic (ResNet's and
    # MobileNet's, the deep ones on small outputs bound by their weights) and static (QDQ fused into QLinearConv)
    *_casts((1, 64, 56, 56), (1, 256, 56, 56), (1, 128, 28, 28), (1, 197, 768)),
    *_int8_convs(graphs.conv_integer, "ConvInteger", *_DYNAMIC_INT8_ROWS),
    *_int8_convs(graphs.qdq_conv, "QDQ Conv", *_STATIC_INT8_ROWS),
)

_QUICK_BENCHES: tuple[Bench, ...] = (
    *_convs((32, 32, 28, 3, 1), (64, 64, 28, 1, 1), (64, 64, 14, 3, 1), (64, 64, 7, 3, 1)),
    *_depthwise((64, 28, 1)),
    *_epilogues((32, 192, 28, 1, 1)),  # large enough that the Clip's pass stands out of the profiler's 1 us
    *_grouped((136, 28, 1, 4)),
    *_gemms((64, 128, 128), (1, 1024, 1000)),
    *_attention((4, 64, 32, 64)),
    *_pools(("MaxPool", 64, 56, 3, 2, 1, True), ("AveragePool", 64, 28, 3, 1, 1, False)),
    *_global_pools(("GlobalAveragePool", 512, 14, True)),
    *_batchnorms((64, 56)),
    *_norm_chains(
        batchnorm=[(16, 14)], layernorm=[(16, 64)], instancenorm=[(8, 14)], lrn=[(16, 14)], softmax=[(1, 2, 32, 32)]
    ),
    *_elementwise((1, 16, 14, 14), (1, 64, 28, 28), per_channel=False),
    *_activations(("Sigmoid", (1, 16, 14, 14))),
    *_reorders((32, 28)),
    *_concats((2, 64, 56)),  # tens of microseconds, well above the profiler's resolution
    *_transposes(((1, 64, 56, 56), (0, 2, 3, 1))),  # 1.6 MB moved: well above MIN_PROFILED_S on a fast core too
    *_transposes(((1, 14, 14, 2, 116), (0, 4, 3, 1, 2)), elem_type=TensorProto.INT8),
    *_resizes((32, 28, True)),
    *_reduces(("ReduceMean", (1, 256, 28, 28), (2, 3))),
    *_casts((1, 64, 56, 56)),
    *_int8_convs(graphs.conv_integer, "ConvInteger", (32, 32, 28, 3, 1), (64, 64, 14, 3, 64)),
    *_int8_convs(graphs.qdq_conv, "QDQ Conv", (32, 32, 28, 3, 1), (64, 64, 28, 3, 64)),
)


def _peaks(n: int, conv: bool) -> tuple[Bench, ...]:
    """The fp32 peak benchmarks: an n^3 Gemm, and with ``conv`` a large 3x3 convolution (untailed)."""
    gemm = Bench("profile", f"Gemm {n}x{n}x{n}", graphs.gemm, (n, n, n), frozenset({"gemm"}), tail=False)
    if not conv:
        return (gemm,)
    return gemm, Bench(
        "profile", "Conv 128->128 3x3 @56x56", graphs.conv, (128, 128, 56, 3), frozenset({"conv"}), tail=False
    )


# A ResNet downsampling convolution (3x3, stride 2) at batch 32: its data (61 MiB) is larger than any cache, which
# the class benchmarks' is not. Its conv kernel gives dram_overlap; its NCHWc reorders join the reorder classes
# at DRAM sizes. A strided convolution reads four times the input per FLOP that a stride-1 one does and hides
# less of its DRAM traffic behind its computation: the figure errs toward traffic exposed.
_BATCHED_CONV = Bench(
    "profile",
    "Conv 128->128 3x3/2 @56x56, batch 32",
    graphs.conv,
    (128, 128, 56, 3, 2, 1, 32),
    REORDER_CLASSES,
    tail=False,
)

_MEASURED = frozenset(CONV_CLASSES) | {
    "gemm",
    "matmul",
    "pool",
    "pool_nchw",
    "global_pool",
    "batchnorm",
    "layernorm",
    "instancenorm",
    "lrn",
    "softmax",
    "elementwise",
    "broadcast",
    "activation",
    "movement",
    "transpose",
    "transpose_generic",
    "reorder",
    "reorder_short",
    "resize",
    "reduce",
    "epilogue",
    "cast",
    "quantize",
    *INT8_CONV_CLASSES,
}

FULL = Suite(
    benches=_FULL_BENCHES,
    peaks=_peaks(1024, conv=True),
    batched_conv=_BATCHED_CONV,
    measures=_MEASURED,
    passes=16,
    reps=3,
    chain_target_s=0.004,
    overhead_lengths=(8, 208),
    flush_bytes=64 * MiB,
    matrix_size=1024,
    level_cap=None,
    probe_factors=(2, 4),
    dram_bounds=(256 * MiB, 1024 * MiB),
    dram_memory_share=0.25,
)

QUICK = Suite(
    benches=_QUICK_BENCHES,
    peaks=_peaks(256, conv=False),
    batched_conv=None,
    # no wide or stem convolution, per-channel chain or DRAM-sized reorder is in it; onnxruntime runs its plain
    # layout pool in NCHWc, and its reorders and the quantization of its int8 convolutions' small inputs run shorter
    # than the profiler resolves
    measures=_MEASURED - {"conv_wide", "conv_stem", "pool_nchw", "broadcast", "reorder", "reorder_short", "quantize"},
    passes=2,
    reps=2,
    chain_target_s=0.0015,
    overhead_lengths=(8, 48),
    flush_bytes=8 * MiB,
    matrix_size=256,
    level_cap=4 * MiB,
    probe_factors=(),
    dram_bounds=(16 * MiB, 64 * MiB),
    dram_memory_share=None,
)
