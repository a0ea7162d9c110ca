"""What the cost families share: per-element constants, byte counts, one-kernel costs, output geometry and the
terms of scaled dot-product attention.

A family module (conv, matmul, elementwise, ...) imports from ``onnxroof.costs`` (Cost, NodeView, the registry and
the counting conventions' primitives) and from this module, never from another family: a constant or helper that
two families use lives here, so that each family reads on its own and no family's import order matters. What one
family alone uses stays in that family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from math import ceil, floor, prod
from typing import NamedTuple

from onnxroof.costs import Cost, NodeView, distinct_tensors, weight_params
from onnxroof.ir import DEFAULT_DOMAINS, InvalidNode, Tensor, UnknownShape, dtype_size, format_shape

__all__ = [
    "ACTIVATION_FLOPS",
    "ATTENTION_BIAS_FLOPS",
    "BILINEAR_FLOPS",
    "DEQUANTIZE_FLOPS",
    "GATE_ACTIVATION_FLOPS",
    "MASK_FLOPS",
    "QUANTIZE_FLOPS",
    "REQUANTIZE_FLOPS",
    "RMS_NORM_FLOPS",
    "ROTARY_FLOPS",
    "SCALE_FLOPS",
    "SDPA_KERNELS",
    "SIGMOID_FLOPS",
    "SILU_FLOPS",
    "SOFTCAP_FLOPS",
    "SOFTMAX_FLOPS",
    "UNKNOWN_TRIPS_NOTE",
    "WEIGHT_DEQUANTIZE_FLOPS",
    "AttentionDims",
    "GroupedHeads",
    "activation_flops",
    "broadcast_shape",
    "cache_rows_bytes",
    "check_window",
    "grouped_heads",
    "input_bytes",
    "io_bytes",
    "kernel_cost",
    "mac_kernel_cost",
    "op_key",
    "output_bytes",
    "pointwise",
    "pool_output_spatial",
    "product_backward",
    "resolved_shape",
    "rotated_elements",
    "score_flops",
    "with_output_shape",
]

# ---------------------------------------------------------------------------------------------------------
# Per-element constants of more than one family.

SIGMOID_FLOPS = 4  # 1 / (1 + exp(-x)): neg, exp, add 1, div
SILU_FLOPS = SIGMOID_FLOPS + 1  # x * sigmoid(x): sigmoid (4) + mul x = 5
SOFTMAX_FLOPS = 5  # per element of the row: max over the row, subtract max, exp, add into sum, divide by sum
RMS_NORM_FLOPS = 4  # per element: square, add into the sum of squares, mul by 1/rms, mul by scale
QUANTIZE_FLOPS = 2  # x / scale + zero_point (the division is a multiply by 1/scale); rounding and saturation free
DEQUANTIZE_FLOPS = 2  # (q - zero_point) * scale
# FLOPs per element to quantize to int8/uint8: to requantize an int32 accumulator (QLinearConv, QLinearMatMul,
# QGemm with an output scale), or to quantize a float (DynamicQuantizeMatMul's input). Multiply by the scale (for
# an accumulator, the combined x_scale * w_scale / y_scale, folded per channel ahead of time) and add the zero
# point; rounding and saturation are free, as for QuantizeLinear.
REQUANTIZE_FLOPS: float = 2
BILINEAR_FLOPS = 7  # w00*a + w01*b + w10*c + w11*d with the weights precomputed per position: 4 mul + 3 add

# The note of a repeated subgraph (Loop, SequenceMap) whose number of runs is unknown at analysis time.
UNKNOWN_TRIPS_NOTE = "trip count unknown: one iteration counted"

# FLOPs per element of the activations that onnxruntime fuses into Conv and Gemm (the ``activation`` attribute of
# FusedConv, FusedGemm and NCHWc Conv) and that recurrent ops name in their ``activations`` attribute. One FLOP per
# arithmetic step, one per transcendental, as the counting conventions say; the values agree with the standalone ops
# in the elementwise family, so fusing an activation changes the kernel count and the bytes but not the FLOPs.
ACTIVATION_FLOPS: dict[str, float] = {
    "Identity": 0,  # nothing to compute
    "Relu": 1,  # max(x, 0)
    "Tanh": 1,  # one transcendental
    "Sigmoid": 4,  # 1 / (1 + exp(-x)): neg, exp, add, div
    "LeakyRelu": 2,  # compare x < 0, mul alpha (the select is free)
    "Clip": 2,  # max(x, min), min(., max)
    "HardSigmoid": 4,  # max(0, min(1, alpha * x + beta)): mul, add, min, max
    "Gelu": 5,  # 0.5 * x * (1 + erf(x / sqrt(2))): div, erf, add, mul, mul
    "ThresholdedRelu": 1,  # compare x > alpha (the select is free)
    "Elu": 4,  # compare, exp, sub 1, mul alpha
    "Selu": 5,  # compare, exp, mul alpha, sub alpha, mul gamma
    "Softplus": 3,  # log(exp(x) + 1): exp, add, log
    "Softsign": 3,  # x / (1 + |x|): abs, add, div
    "ScaledTanh": 3,  # alpha * tanh(beta * x): mul, tanh, mul
    "ParametricSoftplus": 5,  # alpha * log(exp(beta * x) + 1): mul, exp, add, log, mul
    "Affine": 2,  # alpha * x + beta: mul, add
}


# The activations onnxruntime's LLM ops name in lower case (MoE's ``activation_type``, MatMulNBitsMlp's
# ``activation``), per element: silu x * sigmoid(x), swiglu the same times the linear half (one more multiply),
# gelu and relu as ACTIVATION_FLOPS states them.
GATE_ACTIVATION_FLOPS: dict[str, float] = {
    "relu": float(ACTIVATION_FLOPS["Relu"]),
    "gelu": float(ACTIVATION_FLOPS["Gelu"]),
    "silu": float(SILU_FLOPS),
    "swiglu": float(SILU_FLOPS + 1),
}


def activation_flops(name: str) -> tuple[float, str]:
    """FLOPs per element of a fused activation named by an ``activation`` attribute, and a note.

    No activation (an empty name) costs 0. An activation missing from :data:`ACTIVATION_FLOPS` is charged one FLOP
    per element, never zero, and the returned note says so.
    """
    if not name:
        return 0.0, ""
    if name in ACTIVATION_FLOPS:
        return float(ACTIVATION_FLOPS[name]), ""
    return 1.0, f"activation {name!r} has no stated cost; counted as 1 FLOP per element"


def subgraph_coster(node: NodeView) -> Callable[[str], Cost]:
    """The node's subgraph coster; without one the subgraphs it runs cannot be costed, which is an error, not 0."""
    if node.cost_subgraph is None:
        raise UnknownShape(f"{node.name}: {node.op_type} needs its subgraphs costed, and no subgraph coster was given")
    return node.cost_subgraph


# ---------------------------------------------------------------------------------------------------------
# Bytes and the cost of one kernel.


def io_bytes(node: NodeView, inputs: Sequence[Tensor | None] | None = None) -> tuple[float, float]:
    """(bytes read, bytes written) under the compulsory-traffic model: each distinct input read once, each
    output written once. ``inputs`` restricts which inputs are read (default: all)."""
    read = sum(t.nbytes for t in distinct_tensors(node.inputs if inputs is None else inputs))
    written = sum(t.nbytes for t in distinct_tensors(node.outputs))
    return read, written


def input_bytes(inputs: Sequence[Tensor | None]) -> float:
    """Bytes read: every distinct input once at its own (un-broadcast) size, as ``io_bytes`` counts them."""
    return sum((t.nbytes for t in distinct_tensors(inputs)), 0.0)


def output_bytes(
    node: NodeView,
    shapes: Mapping[int, Sequence[int]] | None = None,
    dtypes: Mapping[int, int] | None = None,
) -> float:
    """Bytes written: every distinct output once at its dtype's size. An output whose shape inference left its
    shape unknown takes ``shapes[i]``; one with an undefined dtype takes ``dtypes[i]`` (default: input 0's)."""
    shapes = shapes or {}
    dtypes = dtypes or {}
    x = node.input(0)
    seen: set[str] = set()
    total = 0.0
    for i, t in enumerate(node.outputs):
        if t is None or not t.name or t.name in seen:
            continue
        seen.add(t.name)
        shape = t.shape if t.known else shapes.get(i)
        if shape is None:
            raise UnknownShape(t.name)
        size = t.itemsize or dtype_size(dtypes.get(i, x.dtype if x is not None else 0))
        total += prod(shape) * size
    return total


def kernel_cost(
    node: NodeView,
    flops: float,
    shapes: Mapping[int, Sequence[int]] | None = None,
    *,
    dtypes: Mapping[int, int] | None = None,
    inputs: Sequence[Tensor | None] | None = None,
) -> Cost:
    """One kernel doing ``flops`` FLOPs that reads each distinct input once (``inputs``: only those; default
    all) and writes each output once, with ``shapes``/``dtypes`` standing in for unknown outputs as in
    ``output_bytes``. Params are the elements of the weight inputs it reads."""
    return Cost(
        flops=flops,
        bytes_read=input_bytes(node.inputs if inputs is None else inputs),
        bytes_written=output_bytes(node, shapes, dtypes),
        params=weight_params(node.inputs if inputs is None else inputs),
        kernels=1,
    )


def resolved_shape(tensor: Tensor | None, fallback: Sequence[int] | None, what: str) -> tuple[int, ...]:
    """The tensor's shape when known, else ``fallback``; UnknownShape when neither is available."""
    if tensor is not None and tensor.known:
        return tensor.shape  # type: ignore[return-value]
    if fallback is not None:
        return tuple(fallback)
    raise UnknownShape(tensor.name if tensor is not None else what)


def pointwise(
    node: NodeView,
    flops_per_element: float,
    out_shape: Sequence[int] | None = None,
    *,
    fallback: Mapping[int, Sequence[int]] | None = None,
    dtypes: Mapping[int, int] | None = None,
) -> Cost:
    """An op doing ``flops_per_element`` FLOPs per element of output 0, reading and writing each tensor once.

    ``out_shape`` stands in for output 0's shape when shape inference left it unknown (contrib ops);
    ``fallback`` and ``dtypes`` give the stand-in shapes and element types of further outputs.
    """
    shape = resolved_shape(node.output(0), out_shape, f"{node.name}: output 0")
    return kernel_cost(node, flops_per_element * prod(shape), {0: shape, **(fallback or {})}, dtypes=dtypes)


def with_output_shape(node: NodeView, shape: Sequence[int], fallback_dtype: int) -> NodeView:
    """The node with output 0 given ``shape`` (and ``fallback_dtype`` when its type is undefined) if shape
    inference left it unknown; the node itself otherwise. Lets ``io_bytes`` price an output that was computed."""
    out = node.output(0)
    if out is not None and out.known and out.dtype:
        return node
    name = out.name if out is not None and out.name else f"{node.name}:0"
    dtype = out.dtype if out is not None and out.dtype else fallback_dtype
    known_shape = out.shape if out is not None and out.known else tuple(int(d) for d in shape)
    resolved = Tensor(name, dtype, known_shape, False)
    return replace(node, outputs=(resolved, *node.outputs[1:]))


def mac_kernel_cost(node: NodeView, flops: float, macs: float, note: str = "") -> Cost:
    """One kernel of a convolution or matrix product doing ``flops`` FLOPs and ``macs`` multiply-accumulates, that
    reads each distinct input once and writes each output once (the compulsory-traffic model), with params from
    the weight inputs. The node's outputs must have known shapes (see :func:`with_output_shape`)."""
    read, written = io_bytes(node)
    return Cost(
        flops=flops,
        macs=macs,
        bytes_read=read,
        bytes_written=written,
        params=weight_params(node.inputs),
        kernels=1,
        note=note,
    )


def op_key(node: NodeView) -> str:
    """'Relu' for the default domain, 'com.microsoft::Gelu' otherwise: the key of a family's per-op table."""
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}::{node.op_type}"


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Numpy-style broadcast of static shapes; InvalidNode naming two of them that do not broadcast."""
    given = [tuple(s) for s in shapes]
    result: tuple[int, ...] = ()
    for i, shape in enumerate(given):
        merged = _broadcast_pair(result, shape)
        if merged is None:
            # A dim of the broadcast so far that clashes came from an earlier operand: name that one.
            other = next((s for s in given[:i] if _broadcast_pair(s, shape) is None), result)
            raise InvalidNode(f"operands of shapes {format_shape(other)} and {format_shape(shape)} cannot broadcast")
        result = merged
    return result


def _broadcast_pair(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast of two shapes, aligned from the right (each pair of dims equal or one of them 1); None when
    they do not broadcast."""
    if a == b or not b:
        return a
    if not a:
        return b
    rank = max(len(a), len(b))
    out = []
    for x, y in zip((1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------
# Output geometry of a sliding window (pooling, convolution).


def pool_output_spatial(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    ceil_mode: int = 0,
    auto_pad: str = "NOTSET",
) -> tuple[int, ...]:
    """Output spatial dims of a pooling window, as the ONNX spec computes them.

    With explicit pads (auto_pad NOTSET): ``(in + pad_begin + pad_end - ((k - 1) * d + 1)) / s + 1``, floored, or
    ceiled with ceil_mode, in which case a last window that would start past the input and its leading pad is
    dropped. SAME_UPPER/SAME_LOWER: ``ceil(in / s)``. VALID: ``ceil((in - ((k - 1) * d + 1) + 1) / s)``.
    """
    rank = len(in_spatial)
    strides = list(strides) if strides else [1] * rank
    dilations = list(dilations) if dilations else [1] * rank
    pads = list(pads) if pads else [0] * (2 * rank)
    check_window(in_spatial, kernel, strides, dilations, pads)
    out = []
    for i in range(rank):
        extent = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(ceil(in_spatial[i] / strides[i]))
        elif auto_pad == "VALID":
            out.append(ceil((in_spatial[i] - extent + 1) / strides[i]))
        else:
            span = (in_spatial[i] + pads[i] + pads[rank + i] - extent) / strides[i] + 1
            if ceil_mode:
                n = ceil(span)
                if (n - 1) * strides[i] >= in_spatial[i] + pads[i]:
                    n -= 1
            else:
                n = floor(span)
            out.append(n)
    if min(out, default=0) < 0:
        raise InvalidNode(
            f"a window of kernel {list(kernel)} (dilations {dilations}, pads {pads}) larger than its input's "
            f"spatial shape {format_shape(in_spatial)}"
        )
    return tuple(out)


def check_window(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int],
) -> None:
    """InvalidNode unless a sliding window's kernel, strides and dilations give one value of 1 or more per
    spatial axis of the input, and its pads two per axis."""
    rank = len(in_spatial)
    for label, values, needed in (
        ("kernel", kernel, rank),
        ("strides", strides, rank),
        ("dilations", dilations, rank),
        ("pads", pads, 2 * rank),
    ):
        if len(values) < needed:
            raise InvalidNode(
                f"{label} {list(values)} for an input of spatial shape {format_shape(in_spatial)}: "
                f"{needed} values expected"
            )
        if label != "pads" and min(values[:needed], default=1) < 1:
            raise InvalidNode(f"{label} {list(values)}: each must be 1 or more")


# ---------------------------------------------------------------------------------------------------------
# Scaled dot-product attention, counted one way in both domains (onnxroof.costs.attention, the standard ops, and
# onnxroof.costs.contrib, onnxruntime's). Per score element, besides the softmax's SOFTMAX_FLOPS:

SCALE_FLOPS = 1  # multiply by the scale (1/sqrt(head_size) by default)
MASK_FLOPS = 1  # add (or select) one mask
ATTENTION_BIAS_FLOPS = 1  # add the bias
SOFTCAP_FLOPS = 3  # softcap * tanh(x / softcap): divide, tanh, multiply
ROTARY_FLOPS = 3  # per rotated element: x1*cos - x2*sin (or x2*cos + x1*sin): 2 multiplies, 1 add
# FLOPs per element to dequantize a block-quantized weight (MatMulNBits, GatherBlockQuantized):
# ``(q - zero_point) * scale``, one subtract and one multiply (as DequantizeLinear).
WEIGHT_DEQUANTIZE_FLOPS: float = 2

SDPA_KERNELS = 3  # Q K^T GEMM, softmax, context GEMM (inputs already projected)


class GroupedHeads(NamedTuple):
    """The heads of a grouped-query attention op: N query heads, Nkv key/value heads, the head size H."""

    heads: int
    kv_heads: int
    head_size: int


def grouped_heads(node: NodeView, query: Tensor) -> GroupedHeads:
    """``num_heads``, ``kv_num_heads`` and H of a grouped-query attention op (GroupQueryAttention,
    PagedAttention, SparseAttention) from its query's last axis: N*H columns, or (N + 2 Nkv)*H where Q, K and V
    come packed in it (no key input)."""
    heads, kv_heads = int(node.attr("num_heads", 0)), int(node.attr("kv_num_heads", 0))
    for name, value in (("num_heads", heads), ("kv_num_heads", kv_heads)):
        if value <= 0:
            raise UnknownShape(f"{node.name}: {node.op_type} has no {name} attribute")
    width = query.need_shape()[-1]
    packed = node.input(1) is None
    return GroupedHeads(heads, kv_heads, width // (heads + 2 * kv_heads) if packed else width // heads)


@dataclass(frozen=True, slots=True)
class AttentionDims:
    """The sizes scaled dot-product attention costs depend on."""

    batch: int
    seq: int  # query length S
    kv_new: int  # new key/value length this call
    total: int  # total key length L = past + kv_new
    heads: int  # N (query heads)
    head_size: int  # H, query and key
    head_size_v: int  # Hv

    @property
    def scores(self) -> int:
        """Elements of the score matrix ``Q K^T``: B * N * S * L."""
        return self.batch * self.heads * self.seq * self.total

    @property
    def macs(self) -> int:
        """``Q K^T`` plus ``softmax(.) V``: B*N*S*L*(H + Hv)."""
        return self.scores * (self.head_size + self.head_size_v)


def score_flops(dims: AttentionDims, *, masks: int = 0, biases: int = 0, softcap: bool = False) -> int:
    """FLOPs on the score matrix: scale and softmax on every element, plus ``masks`` masks and ``biases``
    attention biases added to it, and a softcap where one is applied."""
    per_score = SCALE_FLOPS + SOFTMAX_FLOPS + MASK_FLOPS * masks + ATTENTION_BIAS_FLOPS * biases
    per_score += SOFTCAP_FLOPS if softcap else 0
    return dims.scores * per_score


def rotated_elements(node: NodeView, x: Tensor) -> tuple[int, int]:
    """(elements rotated, query positions B*S) of a rotary embedding's input ``[B, S, N*H]`` (then ``num_heads``
    gives H when a partial ``rotary_embedding_dim`` is set) or ``[B, N, S, H]``. Elements beyond
    ``rotary_embedding_dim`` of each head pass through unrotated."""
    shape = x.need_shape()
    rotary_dim = int(node.attr("rotary_embedding_dim", 0))
    if len(shape) == 4:
        head_size, positions = shape[3], shape[0] * shape[2]
    elif len(shape) == 3:
        heads = int(node.attr("num_heads", 0))
        if rotary_dim and heads <= 0:
            raise UnknownShape(f"{node.name}: RotaryEmbedding with rotary_embedding_dim needs num_heads")
        head_size, positions = (shape[2] // heads if heads else shape[2]), shape[0] * shape[1]
    else:
        raise UnknownShape(f"{node.name}: RotaryEmbedding input {x.name} of shape {shape}: expected rank 3 or 4")
    return x.numel * min(rotary_dim or head_size, head_size) // head_size, positions


def cache_rows_bytes(cache: Tensor, positions: int) -> float:
    """Bytes read of a ``[max_position, width]`` cos/sin cache indexed by position ids: one row per query position,
    at most the cache's length."""
    rows, width = cache.need_shape()
    return min(rows, positions) * width * cache.itemsize


# ---------------------------------------------------------------------------------------------------------
# Backward passes shared by more than one family.


def product_backward(forward: Cost, a: Tensor, b: Tensor, bias: Tensor | None) -> Cost:
    """The backward of a product ``Y = A (x) B`` (+ bias): Conv, ConvTranspose, Gemm, MatMul.

    The gradient of each operand is a product of the same size as the forward: ``dA = dY (x) B^T`` and
    ``dB = A^T (x) dY`` each take the forward's MACs, so MACs = 2 x forward MACs and their FLOPs 2 x the
    forward's ``2 * MACs``. The forward's per-output-element extras (a bias add, Gemm's alpha and beta) come back
    once: the bias gradient is a sum of dY over the axes the bias was broadcast along, one add per output
    element, and alpha and beta each scale a gradient once. Kernels: the dA kernel reads dY and B and writes dA,
    the dB kernel reads A and dY and writes dB, a bias-gradient kernel reads dY and writes dBias. dY has Y's
    size, which is what the forward wrote.
    """
    dy = forward.bytes_written
    extras = forward.flops - 2 * forward.macs
    read = (dy + b.nbytes) + (a.nbytes + dy) + (dy if bias is not None else 0.0)
    written = a.nbytes + b.nbytes + (bias.nbytes if bias is not None else 0.0)
    return Cost(
        flops=2 * (2 * forward.macs) + extras,
        macs=2 * forward.macs,
        bytes_read=read,
        bytes_written=written,
        kernels=2 + int(bias is not None),
    )
