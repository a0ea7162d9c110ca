"""Cost functions: shape-only ops, data creation, conversion and data movement.

Five kinds of op live here, each with one formula:

- Shape-only and metadata ops (``ZERO_COST_OPS``): views of a tensor (Reshape, Squeeze, Identity, BitCast, ...) or
  facts about it (Shape, Size, OptionalHasElement). Engines alias the buffer or answer from the shape, so they
  cost 0 FLOPs, 0 bytes and 0 kernels, as the counting conventions say.
- Data creation (Constant, ConstantOfShape, EyeLike, Range, Random*): 0 FLOPs; the output is written once. A
  creator whose output is a weight (a Constant, a ConstantOfShape of a constant shape) is folded at load time and
  costs nothing at run time.
- Conversion and data movement (Cast, Transpose, Concat, Split, Pad, Tile, Expand, ...): 0 FLOPs, one kernel,
  each input read once and each output written once, except that Slice and the Gather family read only the
  elements they keep.
- Movement with a little arithmetic (Where, TopK, NonZero, CumSum, CumProd, Unique, Resize/Upsample, and the
  samplers Bernoulli and Multinomial): the FLOPs per element are stated where the op is registered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import ceil, log2, prod

from onnxroof.costs import (
    OTHER,
    SHAPE,
    Cost,
    NodeView,
    register,
    register_backward,
    register_packed,
    weight_params,
)
from onnxroof.costs.common import WEIGHT_DEQUANTIZE_FLOPS, io_bytes, with_output_shape
from onnxroof.ir import DEFAULT_DOMAINS, InvalidNode, Tensor, UnknownShape, dtype_size, format_shape
from onnxroof.protos import TensorProto

__all__ = [
    "COPY_OPS",
    "CREATOR_OPS",
    "CUBIC_TAP_FLOPS",
    "DATA_MOVEMENT_OPS",
    "FILL_OPS",
    "GENERATOR_OPS",
    "LERP_FLOPS",
    "OPTIONAL_OPS",
    "REORDER_OPS",
    "SHAPE_ONLY_OPS",
    "TRANSPOSE_OPS",
    "ZERO_COST_OPS",
    "bernoulli",
    "cast",
    "cast_like",
    "constant",
    "create",
    "cumprod",
    "cumsum",
    "data_movement",
    "gather",
    "gather_block_quantized",
    "gather_block_quantized_weights",
    "interpolation_mode",
    "multinomial",
    "nonzero",
    "resize",
    "slice_",
    "topk",
    "unique",
    "where",
    "zero_cost",
]

# Ops that only relabel a tensor or report facts about it: 0 FLOPs, 0 bytes, 0 kernels. The shape-only ones are
# the engine class SHAPE; the optional wrappers, which no engine class describes, OTHER.
SHAPE_ONLY_OPS: tuple[str, ...] = (
    # views: the output aliases the input buffer
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
    "Dropout",  # inference: an identity
    "BitCast",  # the same bits relabelled as a type of equal width: an alias, no bytes move
    # metadata: answered from the shape, no data touched
    "Shape",
    "Size",
)
OPTIONAL_OPS: tuple[str, ...] = (
    "Optional",  # a view: the optional wraps its input's buffer
    "OptionalGetElement",
    "OptionalHasElement",  # metadata: answered from the optional's presence
)
ZERO_COST_OPS: tuple[str, ...] = SHAPE_ONLY_OPS + OPTIONAL_OPS

# Ops that copy or rearrange elements without arithmetic: read every input once, write every output once. One
# tuple per engine class: plain copies, transposes, and onnxruntime's layout reorders.
COPY_OPS: tuple[str, ...] = (
    "Concat",
    "Split",
    "Pad",  # every mode (constant, reflect, edge, wrap) reads the input and writes the padded output
    "Tile",
    "Expand",
    "Trilu",
    "ReverseSequence",
    "Compress",
    "OneHot",
    "ScatterND",  # data + indices + updates read, output written
    "ScatterElements",
    "Scatter",
)
TRANSPOSE_OPS: tuple[str, ...] = ("Transpose", "DepthToSpace", "SpaceToDepth")
REORDER_OPS: tuple[str, ...] = (
    "com.microsoft.nchwc::ReorderInput",  # NCHW <-> NCHWc blocked layout transforms
    "com.microsoft.nchwc::ReorderOutput",
)
DATA_MOVEMENT_OPS: tuple[str, ...] = COPY_OPS + TRANSPOSE_OPS + REORDER_OPS

# Ops that create a tensor: which of their inputs carry data they actually read (the *Like ops and EyeLike only
# use their input's shape and dtype). ConstantOfShape and Range fill a tensor as a copy does ("movement"); no
# engine class describes the generators (OTHER).
FILL_OPS: dict[str, bool] = {
    "ConstantOfShape": True,  # reads the shape tensor
    "Range": True,  # reads the start, limit and delta scalars
}
GENERATOR_OPS: dict[str, bool] = {
    "EyeLike": False,
    "RandomNormal": False,
    "RandomUniform": False,
    "RandomNormalLike": False,
    "RandomUniformLike": False,
}
CREATOR_OPS: dict[str, bool] = {**FILL_OPS, **GENERATOR_OPS}

# Linear interpolation: one lerp ``a + t * (b - a)`` = subtract, multiply, add.
LERP_FLOPS = 3
# Cubic interpolation: one multiply-add per tap; 4 taps per resized axis.
CUBIC_TAP_FLOPS = 2
CUBIC_TAPS_PER_AXIS = 4

_INDEX_BYTES = 8  # TopK's indices output is always int64


def _output(node: NodeView, i: int = 0) -> Tensor:
    """Output i, or UnknownShape when the node lacks it."""
    out = node.output(i)
    if out is None:
        raise UnknownShape(f"{node.name}: no output {i}")
    return out


def _reads(node: NodeView, inputs: Sequence[Tensor | None] | None = None) -> float:
    """Bytes read under the compulsory-traffic model, without needing the outputs' shapes."""
    return io_bytes(replace(node, outputs=()), inputs)[0]


def _known_writes(node: NodeView) -> tuple[float, list[str]]:
    """Bytes of the outputs whose shapes are known, and the names of those whose shapes are not."""
    outputs = [t for t in node.outputs if t is not None]
    return sum(t.nbytes for t in outputs if t.known), [t.name for t in outputs if not t.known]


def _movement(node: NodeView, read: float, written: float, flops: float = 0.0) -> Cost:
    """One kernel moving ``read`` + ``written`` bytes with ``flops`` of arithmetic; params of the weights read."""
    return Cost(flops=flops, bytes_read=read, bytes_written=written, params=weight_params(node.inputs), kernels=1)


@register(*SHAPE_ONLY_OPS, engine=SHAPE)
@register(*OPTIONAL_OPS, engine=OTHER)
def zero_cost(node: NodeView) -> Cost:
    """Shape-only and metadata ops: the engine aliases the buffer or answers from the shape; nothing runs. A
    Reshape whose target cannot hold its input's elements is invalid all the same."""
    if node.op_type == "Reshape" and node.domain in DEFAULT_DOMAINS:
        _check_reshape(node)
    return Cost()


def _check_reshape(node: NodeView) -> None:
    """InvalidNode where a Reshape's input shape and constant target are known and disagree on the element count:
    0 copies the input's dim (unless ``allowzero``), one -1 takes what is left."""
    x, target = node.input(0), node.constant(1)
    if x is None or not x.known or target is None:
        return
    shape = x.need_shape()
    wanted = [int(d) for d in target.reshape(-1)]
    copy_zero = not int(node.attr("allowzero", 0))
    dims = [shape[i] if d == 0 and copy_zero and i < len(shape) else d for i, d in enumerate(wanted)]
    given = [d for d in dims if d != -1]
    numel, known = prod(shape), prod(given)
    what = f"target shape {wanted} for an input of shape {format_shape(shape)} ({numel} elements)"
    if len(dims) - len(given) > 1 or min(given, default=0) < 0:
        raise InvalidNode(f"{what}: a dim below -1, or more than one -1")
    if (len(given) == len(dims) and known != numel) or (len(given) < len(dims) and known and numel % known):
        raise InvalidNode(f"{what}: the element counts differ")


@register("Constant", engine=OTHER)
def constant(node: NodeView) -> Cost:
    """Constant: a weight, materialised at load time; nothing runs at inference."""
    return Cost()


def _range_length(node: NodeView) -> int | None:
    """Range's output length from constant start, limit and delta: ``max(ceil((limit - start) / delta), 0)``."""
    start, limit, delta = (node.constant(i) for i in range(3))
    if start is None or limit is None or delta is None or float(delta) == 0:
        return None
    return max(ceil((float(limit) - float(start)) / float(delta)), 0)


@register(*FILL_OPS, engine="movement")
@register(*GENERATOR_OPS, engine=OTHER)
def create(node: NodeView) -> Cost:
    """Data creation: 0 FLOPs (random number generation is not counted as arithmetic), the output written once,
    the shape/start/limit/delta inputs read where the op reads them. An output that is a weight (computed only
    from weights) is folded at load time and costs nothing."""
    out = _output(node)
    if out.is_weight:
        return Cost()
    if not out.known and node.op_type == "Range" and (length := _range_length(node)) is not None:
        out = Tensor(out.name, out.dtype, (length,), out.is_weight)
    read = _reads(node) if CREATOR_OPS[node.op_type] else 0.0
    return Cost(bytes_read=read, bytes_written=out.nbytes, kernels=1)


@register("Bernoulli", engine=OTHER)
def bernoulli(node: NodeView) -> Cost:
    """Bernoulli: one comparison per element of a uniform draw with the probability p (1 FLOP; drawing the random
    number is not counted as arithmetic, as for the Random* creators). The probabilities are read once and the
    0/1 output written at its ``dtype`` (default: the input's)."""
    return _per_element(node, 1)


# Multinomial's per-class work on each batch row (onnxruntime's kernel): a max over the logits (compare), then
# exp(logit - max) (subtract, exp) accumulated into an unnormalised CDF (add).
MULTINOMIAL_CLASS_FLOPS = 4


@register("Multinomial", engine=OTHER)
def multinomial(node: NodeView) -> Cost:
    """Multinomial over input ``[batch, C]`` (unnormalised log-probabilities), ``sample_size`` draws per row:
    per row, ``MULTINOMIAL_CLASS_FLOPS`` = 4 per class to build the CDF (max, subtract, exp, add); per draw, 1
    multiply (uniform draw times the CDF total) and a binary search of the C-entry CDF, ``C.bit_length()``
    comparisons (upper_bound's worst case, floor(log2 C) + 1). FLOPs = ``batch * (4 C + sample_size * (1 +
    C.bit_length()))``. Reads the input; writes ``[batch, sample_size]`` indices (int32 unless ``dtype``)."""
    x = node.need_input(0)
    shape = x.need_shape()
    if len(shape) != 2:
        raise UnknownShape(f"{node.name}: Multinomial input {x.name} has rank {len(shape)}, expected 2")
    batch, classes = shape
    samples = int(node.attr("sample_size", 1))
    flops = batch * (MULTINOMIAL_CLASS_FLOPS * classes + samples * (1 + classes.bit_length()))
    out = _output(node)
    out_shape = out.need_shape() if out.known else (batch, samples)
    dtype = out.dtype or int(node.attr("dtype", TensorProto.INT32))
    written = prod(out_shape) * dtype_size(dtype)
    return _movement(node, _reads(node), written, flops=flops)


@register("Cast", engine="elementwise")
def cast(node: NodeView) -> Cost:
    """Cast: a dtype conversion. 0 FLOPs; it reads the input at its dtype and writes the output at the new one."""
    read, written = io_bytes(node)
    return _movement(node, read, written)


@register("CastLike", engine="elementwise")
def cast_like(node: NodeView) -> Cost:
    """CastLike: Cast to the dtype of input 1, of which only the dtype is used, so only input 0 is read."""
    read, written = io_bytes(node, [node.input(0)])
    return _movement(node, read, written)


@register(*COPY_OPS, engine="movement")
@register(*TRANSPOSE_OPS, engine="movement")
@register(*REORDER_OPS, engine="reorder")
def data_movement(node: NodeView) -> Cost:
    """Pure data movement: 0 FLOPs, one kernel, each distinct input read once and each output written once."""
    if node.op_type == "Concat":
        node = _checked_concat(node)
    elif node.op_type == "Transpose" and node.domain in DEFAULT_DOMAINS:
        _check_transpose(node)
    elif node.op_type == "Split" and node.domain in DEFAULT_DOMAINS:
        _check_split(node)
    read, written = io_bytes(node)
    return _movement(node, read, written)


def _checked_concat(node: NodeView) -> NodeView:
    """A Concat whose inputs' shapes are known, checked (one rank, equal sizes off the axis, the axis in range)
    and with its output's shape where inference left it unknown; the node as it is when an input's is unknown."""
    inputs = [t for t in node.inputs if t is not None and t.name]
    if not inputs or not all(t.known for t in inputs):
        return node
    shapes = [t.need_shape() for t in inputs]
    first = shapes[0]
    axis = _axis(node, first)
    for shape in shapes[1:]:
        if len(shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(first, shape)) if i != axis):
            raise InvalidNode(
                f"inputs of shapes {format_shape(first)} and {format_shape(shape)} "
                f"differ off the concatenation axis {axis}"
            )
    joined = (*first[:axis], sum(shape[axis] for shape in shapes), *first[axis + 1 :])
    return with_output_shape(node, joined, inputs[0].dtype)


def _axis(node: NodeView, shape: tuple[int, ...]) -> int:
    """The node's ``axis`` attribute (default 0) as an index into ``shape``; InvalidNode when out of its range."""
    axis = int(node.attr("axis", 0))
    if not -len(shape) <= axis < len(shape):
        raise InvalidNode(f"axis {axis} outside the rank {len(shape)} of its input of shape {format_shape(shape)}")
    return axis % len(shape)


def _check_transpose(node: NodeView) -> None:
    """InvalidNode where a Transpose's ``perm`` is not an order of its known input's axes."""
    x, perm = node.input(0), node.attr("perm")
    if x is None or not x.known or perm is None:
        return
    shape = x.need_shape()
    if not isinstance(perm, list) or sorted(perm) != list(range(len(shape))):
        raise InvalidNode(f"perm {perm} for an input of shape {format_shape(shape)}: not an order of its axes")


def _check_split(node: NodeView) -> None:
    """InvalidNode where a Split's axis is outside its known input's rank, or its sizes (the ``split`` input or
    attribute) do not add up to that axis' dim."""
    x = node.input(0)
    if x is None or not x.known:
        return
    shape = x.need_shape()
    axis = _axis(node, shape)
    constant = node.constant(1)
    sizes = [int(s) for s in constant.reshape(-1)] if constant is not None else node.attr("split")
    if sizes is None or (isinstance(sizes, list) and not sizes):
        return
    if not isinstance(sizes, list) or min(sizes) < 0 or sum(sizes) != shape[axis]:
        raise InvalidNode(
            f"split sizes {sizes} on axis {axis} of an input of shape {format_shape(shape)}: "
            f"they do not add up to its {shape[axis]}"
        )


@register("Slice", engine="movement")
def slice_(node: NodeView) -> Cost:
    """Slice reads only the elements it keeps (output numel at the input's dtype) plus its small starts, ends,
    axes and steps inputs, and writes the output."""
    x, out = node.need_input(0), _output(node)
    small_read, written = io_bytes(node, node.inputs[1:])
    return _movement(node, small_read + out.numel * x.itemsize, written)


@register("Gather", "GatherElements", "GatherND", engine="movement")
def gather(node: NodeView) -> Cost:
    """Gather family: reads the indices and only the gathered elements (output numel at the data's dtype), never
    the whole data tensor, and writes the output. Params still count a weight data tensor (an embedding table) in
    full: the model has to hold all of it."""
    data, out = node.need_input(0), _output(node)
    if data.known and node.op_type != "GatherND":
        _axis(node, data.need_shape())
    index_read, written = io_bytes(node, [node.input(1)])
    return _movement(node, index_read + out.numel * data.itemsize, written)


def interpolation_mode(node: NodeView) -> str:
    """Resize/Upsample interpolation mode, lower-case (default nearest)."""
    return node.text("mode", "nearest").lower()


@register("Resize", "Upsample", engine="resize")
def resize(node: NodeView) -> Cost:
    """Resize/Upsample, per output element, with k = the number of axes whose size changes:

    - nearest: 0 FLOPs (a copy);
    - linear (bilinear, trilinear): ``2^k - 1`` lerps at 3 FLOPs each (subtract, multiply, add), 9 for bilinear;
    - cubic: ``4^k`` taps at 2 FLOPs each (multiply, add), 32 for bicubic.

    Coordinate transforms are per-axis work that engines precompute and are not counted; nor is the widened
    filter of ``antialias`` downscaling. Bytes: the input (and roi/scales/sizes) read once, the output written.
    """
    x, out = node.need_input(0), _output(node)
    in_shape, out_shape = x.need_shape(), out.need_shape()
    if len(in_shape) != len(out_shape):
        raise UnknownShape(f"{node.name}: input rank {len(in_shape)} != output rank {len(out_shape)}")
    k = sum(a != b for a, b in zip(in_shape, out_shape))
    mode = interpolation_mode(node)
    if "cubic" in mode:
        per_element = CUBIC_TAPS_PER_AXIS**k * CUBIC_TAP_FLOPS
    elif "linear" in mode:
        per_element = (2**k - 1) * LERP_FLOPS
    else:
        per_element = 0
    read, written = io_bytes(node)
    return _movement(node, read, written, flops=per_element * out.numel)


def _per_element(node: NodeView, flops_per_element: int) -> Cost:
    """``flops_per_element`` FLOPs per output element, each input read once, the output written once."""
    read, written = io_bytes(node)
    return _movement(node, read, written, flops=flops_per_element * _output(node).numel)


@register("Where", engine="elementwise")
def where(node: NodeView) -> Cost:
    """Where: one select per output element (1 FLOP); condition, X and Y read once, the output written."""
    return _per_element(node, 1)


@register("CumSum", engine=OTHER)
def cumsum(node: NodeView) -> Cost:
    """CumSum: one add per element (a running sum along the axis, ``exclusive`` and ``reverse`` alike)."""
    return _per_element(node, 1)


@register("CumProd", engine=OTHER)
def cumprod(node: NodeView) -> Cost:
    """CumProd: one multiply per element (a running product along the axis, ``exclusive`` and ``reverse`` alike);
    x and the axis scalar read once, the output written."""
    return _per_element(node, 1)


def _topk_k(node: NodeView, rank: int, axis: int) -> int:
    """K from the constant input 1, else from the values output's shape along ``axis``."""
    k = node.constant(1)
    if k is not None and k.size == 1:
        return int(k.reshape(-1)[0])
    for out in node.outputs:
        if out is not None and out.known and out.rank == rank:
            return out.need_shape()[axis]
    raise UnknownShape(f"{node.name}: K is neither a constant nor visible in the output shape")


@register("TopK", engine=OTHER)
def topk(node: NodeView) -> Cost:
    """TopK: per row of length n along ``axis``, ``n * ceil(log2 k)`` comparisons (a heap of the k best, each
    element costing one sift through log2 k levels); at k = 1 a linear scan, one comparison per element.

    K comes from the constant input 1, else from the output shape. Bytes: X and K read; the values (X's dtype)
    and the int64 indices, ``rows * k`` elements each, written.
    """
    x = node.need_input(0)
    shape = x.need_shape()
    if not shape:
        raise UnknownShape(f"{node.name}: TopK input {x.name} is a scalar")
    axis = int(node.attr("axis", -1)) % len(shape)
    n = shape[axis]
    k = min(_topk_k(node, len(shape), axis), n)
    rows = prod(shape) // n if n else 0
    comparisons = 0 if k <= 0 else rows * n * max(1, ceil(log2(k)))
    read = _reads(node)
    written = rows * k * (x.itemsize + _INDEX_BYTES)
    return _movement(node, read, written, flops=comparisons)


@register("NonZero", engine="movement")
def nonzero(node: NodeView) -> Cost:
    """NonZero: one comparison with zero per input element; the input read once. Its output size depends on the
    data, so its writes are counted only when shape inference resolved them, and a note says when not."""
    x = node.need_input(0)
    read = _reads(node)
    written, unknown = _known_writes(node)
    cost = _movement(node, read, written, flops=x.numel)
    return cost.with_note(f"data-dependent output {', '.join(unknown)}: writes not counted") if unknown else cost


@register("Unique", engine="movement")
def unique(node: NodeView) -> Cost:
    """Unique: a sort of the n items (elements, or slices along ``axis``) with ``n * ceil(log2 n)`` comparisons
    plus n to mark duplicates, each comparison touching one element (or one slice of ``numel / n`` elements):
    ``numel * (ceil(log2 n) + 1)`` FLOPs. The input is read once; outputs are written where their sizes are known
    (they depend on the data) and a note says when they are not."""
    x = node.need_input(0)
    shape = x.need_shape()
    axis = node.attr("axis")
    n = shape[int(axis) % len(shape)] if axis is not None and shape else prod(shape)
    flops = prod(shape) * ((ceil(log2(n)) if n > 1 else 0) + 1) if n else 0
    read = _reads(node)
    written, unknown = _known_writes(node)
    cost = _movement(node, read, written, flops=flops)
    return cost.with_note(f"data-dependent output {', '.join(unknown)}: writes not counted") if unknown else cost


# ---------------------------------------------------------------------------------------------------------
# Backward rules.


def _float_inputs_bytes(node: NodeView) -> float:
    """Bytes of the distinct floating-point inputs: the gradients a movement's backward writes."""
    floats = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
    seen = {t.name: t for t in node.inputs if t is not None and t.name and t.dtype in floats and t.known}
    return sum(t.nbytes for t in seen.values())


@register_backward(*SHAPE_ONLY_OPS)
def view_backward(node: NodeView, forward: Cost) -> Cost:
    """A view's gradient is dY viewed back: nothing runs."""
    return Cost()


@register_backward(*COPY_OPS, *TRANSPOSE_OPS, "Slice")
def movement_backward(node: NodeView, forward: Cost) -> Cost:
    """The inverse movement: 0 FLOPs, one kernel that reads dY (what the forward wrote) and writes the gradient of
    each floating-point input (a Slice's dX is the whole input, zero outside the slice). Expand and Tile sum dY
    over the copies they made: ``numel(Y) - numel(X)`` adds."""
    flops = 0.0
    if node.op_type in ("Expand", "Tile"):
        x, y = node.need_input(0), _output(node)
        flops = y.numel - x.numel
    return Cost(flops=flops, bytes_read=forward.bytes_written, bytes_written=_float_inputs_bytes(node), kernels=1)


@register_backward("Gather")
def gather_backward(node: NodeView, forward: Cost) -> Cost:
    """A scatter-add of dY into a zero-filled dData (an embedding table's gradient): one add per element of Y,
    reading dY and the indices, writing dData."""
    data, out = node.need_input(0), _output(node)
    indices = node.input(1)
    index_bytes = indices.nbytes if indices is not None and indices.known else 0.0
    return Cost(flops=out.numel, bytes_read=forward.bytes_written + index_bytes, bytes_written=data.nbytes, kernels=1)


# ---------------------------------------------------------------------------------------------------------
# GatherBlockQuantized: a gather from a block-quantized table (a 4-bit embedding).


def _values_per_element(node: NodeView, data: Tensor) -> int:
    """How many quantized values one stored element of ``data`` holds: uint8 packs 8 / bits of them."""
    return 8 // int(node.attr("bits", 4)) if data.dtype == TensorProto.UINT8 else 1


@register_packed("com.microsoft::GatherBlockQuantized")
def gather_block_quantized_weights(node: NodeView) -> dict[int, int]:
    """data (input 0) holds its elements packed: ``8 / bits`` a byte where it is uint8."""
    data = node.input(0)
    if data is None or data.shape is None:
        return {}
    return {0: data.numel * _values_per_element(node, data)}


@register("com.microsoft::GatherBlockQuantized", engine="movement")
def gather_block_quantized(node: NodeView) -> Cost:
    """GatherBlockQuantized: ``indices`` gather rows along ``gather_axis`` (0) of ``data``, quantized in blocks of
    ``block_size`` along ``quantize_axis`` (the last) with ``scales`` (and ``zero_points``), and dequantize them:
    the output is ``indices.shape + data.shape[1:]`` (the last dim unpacked) at the scales' type.

    - FLOPs: :data:`WEIGHT_DEQUANTIZE_FLOPS` per output element (``(q - zero_point) * scale``);
    - bytes: the indices, and of data, scales and zero points the gathered rows (at most all of them), read; the
      output written. Along other axes the whole tables are counted read, and noted;
    - params: data's logical elements, the scales and zero points. Kernels: 1.
    """
    data, indices, scales = node.need_input(0, "data"), node.need_input(1, "indices"), node.need_input(2, "scales")
    shape = data.need_shape()
    rows = min(indices.numel, shape[0])
    logical = data.numel * _values_per_element(node, data)
    outputs = indices.numel * logical // shape[0]
    tables = [t for t in (data, scales, node.input(3)) if t is not None]
    notes = ""
    if int(node.attr("gather_axis", 0)) == 0 and int(node.attr("quantize_axis", len(shape) - 1)) in (
        -1,
        len(shape) - 1,
    ):
        table_read = sum(t.nbytes * rows / t.need_shape()[0] for t in tables)
    else:
        table_read, notes = sum(t.nbytes for t in tables), "gather or quantize axis not 0 and last: tables read whole"
    return Cost(
        flops=WEIGHT_DEQUANTIZE_FLOPS * outputs,
        bytes_read=indices.nbytes + table_read,
        bytes_written=outputs * scales.itemsize,
        params=logical + weight_params(tables[1:]),
        kernels=1,
        note=notes,
    )
