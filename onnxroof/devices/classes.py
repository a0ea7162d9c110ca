"""The op classes, each declared once: the kinds of kernel an engine runs nodes with, each with a ceiling of its
own on a calibrated device.

A row of :data:`TABLE` names a class and says

- ``base``: the class an op registers with its cost function (``onnxroof.costs.register(..., engine=BASE)``)
  whose nodes ``onnxroof.predict.op_classes`` may refine into this one, by their shapes, layout or operands (a
  class that nothing refines is its own base; ``matmul``, refined from ``gemm``, is also the class the fused
  attention ops register, and keeps those its own refinement leaves);
- ``fallback``: the class whose ceiling a device without one for this class uses (None: the plain roofline);
- ``roof``: the roof its ceiling corrects: ``compute`` classes are timed against FLOPs over the peak, ``memory``
  classes against bytes over the level's bandwidth (the calibration reads the other term at efficiency 1);
- ``work``: the unit of work its ceiling is read at (:data:`WORK_UNITS`; ``onnxroof.predict.class_work``);
- ``traits``: terms of the engine prediction that hold for its nodes (:data:`TRAITS`);
- ``part``: a ceiling for a part of a node rather than for a class of nodes;
- ``doc``: what its nodes are, in one line.

Every list of classes the code uses (the device schema's ``OP_CLASSES``, the fallbacks, the refinements' class
sets, the calibration's compute and memory classes, the engine's class sets) is derived from this table. The
module sits with the device schema, at the lowest stage that the schema, the costs, the prediction and the
calibration all import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "COMPUTE",
    "MEMORY",
    "ROOFS",
    "TABLE",
    "TRAITS",
    "WORK_UNITS",
    "OpClass",
    "classes",
    "refined_from",
    "with_trait",
]

COMPUTE = "compute"
MEMORY = "memory"
ROOFS: tuple[str, ...] = (COMPUTE, MEMORY)

# The units of work a class's ceiling is read at: a kernel that repeats one unit after the other is read at the
# size of one unit, so that a kernel of many small units does not read the ceiling of one large one.
WORK_UNITS: Mapping[str, str] = {
    "node": "the whole node",
    "product": "one matrix product of a batch of them (per batch element and head)",
    "group": "one group of a grouped convolution, each an im2col and a product of its own",
    "row": "one row along its axis, normalized in passes of its own",
    "trailing_row": "one row of the axes from its axis to the last, normalized in passes of its own",
    "matrix": "one matrix of a batched transpose, each copied with a fixed cost",
    "step": "one time step of one direction, its input projection apart",
}

# Terms of the engine prediction that hold for a class's nodes, beyond what its roof and base say.
TRAITS: Mapping[str, str] = {
    "weight_wait": "a dense NCHWc convolution: its time grows by the device's share of its weights' read from memory",
    "streaming": "streams its input once into an output of the same order of size, no arithmetic to hide it behind",
    "read_cold": "its ceiling is read on cold weights whatever their size: its time is its weight's read",
}


@dataclass(frozen=True, slots=True)
class OpClass:
    """One op class (see the module's docstring for each field)."""

    name: str
    base: str
    fallback: str | None
    roof: str
    work: str
    doc: str
    traits: frozenset[str] = frozenset()
    part: bool = False


def _c(name: str, base: str, fallback: str | None, roof: str, doc: str, work: str = "node", *traits: str) -> OpClass:
    """A row of the table, in the order its columns read."""
    return OpClass(name, base, fallback, roof, work, doc, frozenset(traits))


_WAIT = "weight_wait"
_STREAM = "streaming"
_C, _M = COMPUTE, MEMORY

# In the order a device file lists its ceilings. Each row: name, base, fallback, roof, doc, then the unit of work
# and the traits where they are not "node" and none.
TABLE: tuple[OpClass, ...] = (
    _c("conv", "conv", None, _C, "dense KxK convolution on a large output (20x20 positions or more)", "node", _WAIT),
    _c("conv1x1", "conv", "conv", _C, "dense pointwise convolution on more than one output position", "node", _WAIT),
    _c("conv_wide", "conv", "conv", _C, "dense, a 5x5 or wider kernel on a large output, past the stem", "node", _WAIT),
    _c("conv_stem", "conv", "conv", _C, "a stem: 5x5 or wider over a few input channels, large output", "node", _WAIT),
    _c("conv_mid", "conv", "conv", _C, "dense KxK convolution on a mid-sized output (10x10 to 19x19)", "node", _WAIT),
    _c("conv_small", "conv", "conv", _C, "dense KxK convolution on a small output (up to 9x9)", "node", _WAIT),
    _c("conv_narrow", "conv", "conv_small", _C, "dense, under 32 output channels, or a stem under 5x5", "node", _WAIT),
    _c("conv_vector", "conv", "conv_small", _C, "dense, a single output position: a matrix-vector product"),
    _c("conv_1d", "conv", "conv", _C, "dense convolution over one spatial axis: plain layout, im2col and a product"),
    _c("conv_grouped", "conv", "conv_small", _C, "grouped convolution in plain layout (not depthwise)", "group"),
    _c("conv_grouped_narrow", "conv", "conv_grouped", _C, "the same with under 16 output channels per group", "group"),
    _c("depthwise", "conv", None, _C, "one input channel per group, in onnxruntime's NCHWc layout"),
    _c("depthwise_plain", "conv", "depthwise", _C, "depthwise outside NCHWc: a one-row product per channel", "group"),
    _c("depthwise_border", "conv", "depthwise", _C, "NCHWc depthwise, most output columns' windows in the padding"),
    _c("conv_integer", "conv_integer", "conv", _C, "ConvInteger: im2col and an integer product per group"),
    _c("conv_integer_grouped", "conv_integer", "conv_integer", _C, "a depthwise ConvInteger: one product per channel"),
    _c("qconv", "qconv", "conv", _C, "QLinearConv (static int8 quantization), channels-last after optimization"),
    _c("qconv_depthwise", "qconv", "depthwise", _C, "a depthwise QLinearConv: one input channel per group"),
    _c("gemm", "gemm", None, _C, "matrix product with a weight operand and 16 or more rows"),
    _c("gemm_short", "gemm", "gemm", _C, "matrix product with a weight operand and 2 to 15 rows"),
    _c("gemv", "gemm", "gemm_short", _C, "matrix-vector product with a weight operand (one row)", "node", "read_cold"),
    _c("matmul", "gemm", "gemm", _C, "matrix products of two activations (attention scores, context)", "product"),
    _c("gemm_nbits", "gemm", "gemm", _C, "MatMulNBits, 2 or more rows, accuracy_level under 4: fp32 products"),
    _c(
        "gemv_nbits",
        "gemm",
        "gemv",
        _C,
        "MatMulNBits of one row, accuracy_level under 4: each block dequantized to fp32 as the row reads it",
        "node",
        "read_cold",
    ),
    _c("gemm_nbits_int8", "gemm", "gemm", _C, "MatMulNBits, 2 or more rows, accuracy_level 4: int8 products"),
    _c(
        "gemv_nbits_int8",
        "gemm",
        "gemv",
        _C,
        "MatMulNBits of one row, accuracy_level 4: the row quantized to int8, integer products",
        "node",
        "read_cold",
    ),
    _c("attention", "matmul", "matmul", _C, "GroupQueryAttention over several new tokens (a prefill)", "product"),
    _c("attention_decode", "matmul", "matmul", _C, "GroupQueryAttention over one new token (a decode step)", "product"),
    _c("pool", "pool", None, _M, "MaxPool / AveragePool / LpPool windows in onnxruntime's NCHWc layout"),
    _c("pool_nchw", "pool", "pool", _M, "the same windows in plain NCHW layout, a slower kernel per byte"),
    _c("global_pool", "global_pool", "pool", _M, "GlobalAveragePool / GlobalMaxPool"),
    _c("batchnorm", "conv", "elementwise", _M, "BatchNormalization, and a depthwise 1x1 convolution (the same)"),
    _c("layernorm", "layernorm", None, _C, "LayerNormalization and its simplified (RMS) variant", "trailing_row"),
    _c("skip_layernorm", "skip_layernorm", "layernorm", _C, "a residual add fused with a layer normalization"),
    _c("instancenorm", "instancenorm", "layernorm", _C, "InstanceNormalization, GroupNormalization"),
    _c("lrn", "lrn", None, _C, "LRN"),
    _c("softmax", "softmax", None, _C, "Softmax, LogSoftmax", "row"),
    _c("elementwise", "elementwise", None, _M, "cheap elementwise arithmetic and activations", "node", _STREAM),
    _c("broadcast", "elementwise", "elementwise", _M, "an operand broadcast along the innermost axis", "node", _STREAM),
    _c("activation", "activation", None, _C, "transcendental activations without a class of their own"),
    _c("activation_exp", "activation", "activation", _C, "Exp and the activations built on it (Elu, Selu, Celu)"),
    _c("activation_sigmoid", "activation", "activation", _C, "Sigmoid, and Swish (x * sigmoid(alpha * x))"),
    _c("activation_silu", "activation", "activation_sigmoid", _C, "QuickGelu with alpha 1: SiLU as onnxruntime fuses"),
    _c("activation_quickgelu", "activation", "activation_sigmoid", _C, "x * sigmoid(alpha * x) with another alpha"),
    _c("activation_tanh", "activation", "activation", _C, "Tanh"),
    _c("activation_erf", "activation", "activation", _C, "Erf"),
    _c("activation_gelu", "activation", "activation_erf", _C, "exact Gelu through erf (Gelu, BiasGelu, BiasSplitGelu)"),
    _c("activation_fastgelu", "activation", "activation_tanh", _C, "Gelu's tanh approximation"),
    _c("activation_pow", "activation", "activation", _C, "Pow by any exponent but a scalar 2 or 3: pow per element"),
    _c(
        "pow_multiplied",
        "activation",
        "activation_pow",
        _C,
        "Pow by a scalar exponent of 2 or 3, computed by multiplying",
    ),
    _c("movement", "movement", None, _M, "copies: Concat, Split, Slice, Pad, Gather, Expand, Tile", "node", _STREAM),
    _c("transpose_inner", "movement", "movement", _M, "a Transpose that moves the innermost axis", "node", _STREAM),
    _c("transpose_batched", "movement", "transpose_inner", _M, "one that moves it in each matrix", "matrix", _STREAM),
    _c("transpose_generic", "movement", "movement", _M, "a Transpose that moves more than one axis", "node", _STREAM),
    _c("reorder", "reorder", "movement", _M, "onnxruntime's NCHW <-> NCHWc layout conversions", "node", _STREAM),
    _c("resize", "resize", "movement", _M, "nearest-neighbour Resize and Upsample, GridSample, AffineGrid"),
    # an interpolating resize is a compute class: its time per output element holds at every size, as its FLOPs
    # per element do
    _c("resize_linear", "resize", "resize", _C, "an interpolating (linear, cubic) resize in NCHWc layout"),
    _c("resize_linear_nchw", "resize", "resize_linear", _C, "an interpolating resize in plain layout"),
    _c("reduce", "reduce", None, _M, "ReduceSum/Mean/Max/..., ArgMax/ArgMin"),
    _c("quantize", "quantize", "elementwise", _M, "DynamicQuantizeLinear: a min/max pass, then the conversion"),
    _c("lstm", "recurrent", "recurrent", _C, "LSTM (and the dynamically quantized one)", "step"),
    _c("gru", "recurrent", "recurrent", _C, "GRU", "step"),
    _c("recurrent", "recurrent", None, _C, "RNN, and the recurrent ops without a class of their own", "step"),
    OpClass(
        "epilogue",
        "epilogue",
        "elementwise",
        MEMORY,
        "node",
        "the second pass over a convolution's or Gemm's output that a fused activation other than Relu costs",
        part=True,
    ),
)

# The table by class name.
CLASSES: Mapping[str, OpClass] = {c.name: c for c in TABLE}


def classes(*, roof: str | None = None, part: bool | None = False) -> frozenset[str]:
    """The names of the classes under ``roof`` (any roof with None), of nodes (``part`` False), of parts of
    nodes (True) or both (None)."""
    return frozenset(c.name for c in TABLE if (roof is None or c.roof == roof) and (part is None or c.part == part))


def refined_from(*bases: str) -> frozenset[str]:
    """The classes the nodes of these base classes may be refined into (each base among them)."""
    return frozenset(c.name for c in TABLE if c.base in bases)


def with_trait(trait: str) -> frozenset[str]:
    """The classes with this trait (one of :data:`TRAITS`)."""
    if trait not in TRAITS:
        raise ValueError(f"{trait!r} is none of the traits {sorted(TRAITS)}")
    return frozenset(c.name for c in TABLE if trait in c.traits)
