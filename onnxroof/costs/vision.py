"""Cost functions: vision and detection ops of the standard domain.

GridSample, AffineGrid, RoiAlign, MaxRoiPool, DeformConv, Col2Im, CenterCropPad and NonMaxSuppression. Each is
one kernel, counted from the arithmetic of the op's definition and of onnx's reference implementation
(``onnx/reference/ops/op_*.py``; MaxRoiPool has none there, so it follows the Caffe/onnxruntime ROI pooling the
op was specified from). The per-element constants are module-level names, each with its derivation.

Two choices run through the family:

- Work that depends only on a sampling position (a grid point's coordinate and interpolation weights, a ROI's
  bin geometry, a deformable-conv sampling point) is counted once per position and shared by all channels, as
  RoiAlign's reference precomputes it ("the key point of optimization"); the per-channel gather and weighted
  sum are counted per output element (or per sample).
- Index arithmetic (integer offsets, bounds tests that pick which pixels are read) is addressing, not arithmetic,
  and is not counted, as for Gather or Pad elsewhere in the package.

Bytes follow the compulsory-traffic model: each distinct input read once, each output written once. Where an op
can touch only part of an input (a GridSample or RoiAlign that samples fewer pixels than the image holds,
CenterCropPad's crop, Col2Im's blocks that fall in the padding), only that part is read. Where the work depends
on data (RoiAlign's adaptive sampling grid, MaxRoiPool's bin sizes, NonMaxSuppression's survivors) a stated
worst case is counted and the Cost's note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, log2, prod
from typing import Any

from onnxroof.costs import OTHER, Cost, NodeView, register, weight_params
from onnxroof.costs.common import BILINEAR_FLOPS, input_bytes, output_bytes
from onnxroof.ir import Tensor, UnknownShape
from onnxroof.protos import TensorProto

__all__ = [
    "CUBIC_1D_FLOPS",
    "DEFORM_AXIS_FLOPS",
    "GRID_DENORMALIZE_FLOPS",
    "GRID_PADDING_FLOPS",
    "GRID_WEIGHT_FLOPS",
    "IOU_FLOPS",
    "LINEAR_1D_FLOPS",
    "MAX_ROI_POOL_BIN_FLOPS",
    "MAX_ROI_POOL_SETUP_FLOPS",
    "ROI_ALIGN_POINT_FLOPS",
    "ROI_ALIGN_SETUP_FLOPS",
    "ROI_SAMPLE_FLOPS",
    "affine_grid",
    "center_crop_pad",
    "col2im",
    "deform_conv",
    "grid_sample",
    "max_roi_pool",
    "nms_pairs",
    "non_max_suppression",
    "roi_align",
]

# ---------------------------------------------------------------------------------------------------------
# Constants.

# GridSample, per grid point and spatial axis (shared by the C channels of its batch item):
# denormalizing the grid value n to a pixel coordinate, ((n + 1) * size - 1) / 2 or (n + 1) / 2 * (size - 1),
# is an affine map a * n + b with a, b folded from the size and align_corners: 1 mul + 1 add.
GRID_DENORMALIZE_FLOPS = 2
# Padding of an out-of-range coordinate, applied per axis: zeros reads 0 for taps outside the input (a bounds
# test: addressing, 0 FLOPs); border clamps to [0, size - 1] (min + max = 2); reflection folds the coordinate back
# into [lo, hi]: distance past the border (1 sub), the whole number of spans it covers (1 div, 1 floor), the
# remainder (1 mul, 1 sub) and lo + r or hi - r (1) = 6.
GRID_PADDING_FLOPS: dict[str, int] = {"zeros": 0, "border": 2, "reflection": 6}
# Interpolation weights per axis: nearest rounds (1); linear takes x0 = floor(x), t = x - x0 and 1 - t (3; the
# reference's abs of a non-negative t is free); cubic takes floor and t (2) and Keys' four coefficients with
# A = -0.75 as the reference writes them: ((A(t+1) - 5A)(t+1) + 8A)(t+1) - 4A = 7 (t+1, then 6),
# ((A+2)t - (A+3))t t + 1 = 5, the same at 1 - t = 6, the first form at 2 - t = 7: 25, so 27.
GRID_WEIGHT_FLOPS: dict[str, int] = {"nearest": 1, "linear": 3, "cubic": 2 + 7 + 5 + 6 + 7}
# One 1-D interpolation, the reference's ``coeffs @ v``: linear over 2 taps = 2 mul + 1 add; cubic over 4 taps =
# 4 mul + 3 add. N-linear (N-cubic) interpolation nests them: 2^r - 1 linear ones ((4^r - 1) / 3 cubic ones) per
# output element for r spatial axes.
LINEAR_1D_FLOPS = 3
CUBIC_1D_FLOPS = 7

# RoiAlign, per ROI: scale the 4 coordinates (4 mul), shift them by the pixel offset (4 sub; the reference
# subtracts 0 under output_half_pixel), the 2 extents (2 sub), the 2 bin sizes (2 div) and the 2 steps between
# samples in a bin (2 div) = 14. output_half_pixel clamps the extents to >= 1 (+2 max); sampling_ratio = 0 takes
# the adaptive grid size ceil(extent / output size) per axis (+2 ceil).
ROI_ALIGN_SETUP_FLOPS = 14
# RoiAlign, per sampling point (shared by the C channels): per axis the coordinate start + i * step (1 mul,
# 1 add), the clamp at 0 (1 max), low = floor (1), l = y - low (1) and h = 1 - l (1) = 6, for 2 axes 12; and the
# 4 corner weights hy*hx, hy*lx, ly*hx, ly*lx (4 mul): 16.
ROI_ALIGN_POINT_FLOPS = 16
# RoiAlign, per sample and channel: the 4 weighted corners combined (BILINEAR_FLOPS = 4 mul + 3 add, or 3 max in
# mode 'max') and folded into the bin's accumulator (1 add or max) = 8; 'avg' then divides each output by the
# sample count (+1 per output element).
ROI_SAMPLE_FLOPS = BILINEAR_FLOPS + 1

# MaxRoiPool, per ROI: scale the 4 coordinates (4 mul), round them (4), and the 2 bin sizes (2 div) = 10; the
# integer extents max(end - start + 1, 1) are index arithmetic.
MAX_ROI_POOL_SETUP_FLOPS = 10
# MaxRoiPool, per bin of a ROI (shared by the channels): per axis start = floor(p * bin) and end =
# ceil((p + 1) * bin) (2 mul, 1 floor, 1 ceil) = 4, for 2 axes 8; clamping them to the image is index arithmetic.
MAX_ROI_POOL_BIN_FLOPS = 8

# DeformConv, per sampling point (one per batch item, offset group, kernel tap and output position; shared by the
# input channels of its offset group), per spatial axis: the tap's position plus its learned offset (1 add; the
# integer base out * stride - pad + k * dilation is addressing), low = floor (1), l = y - low (1) and h = 1 - l
# (1) = 4. The 2^r corner weights are products of r factors: 2^r * (r - 1) mul (4 in 2-D).
DEFORM_AXIS_FLOPS = 4

# NonMaxSuppression, one IoU test as the reference's suppress_by_iou evaluates it when no early exit is taken.
# Corner boxes [y1, x1, y2, x2]: per axis order each box's two coordinates (2 compares), the overlap's max and
# min (2) and its emptiness test (1) = 5, for 2 axes 10; the intersection area (2 sub, 1 mul) and its test (1),
# the two areas (2 * (2 sub + 1 mul)), the union (1 add, 1 sub), its three validity tests (3), the division (1)
# and the threshold test (1): 10 + 4 + 6 + 2 + 3 + 1 + 1 = 27. Center boxes [xc, yc, w, h]: the four half sizes
# (4 div) and per axis the four corners (4 add/sub) and the overlap's max, min and test (3), 4 + 2 * 7 = 18,
# then the same 17 from the intersection area on: 35.
IOU_FLOPS: dict[int, int] = {0: 27, 1: 35}

_INT64_BYTES = 8


# ---------------------------------------------------------------------------------------------------------
# Helpers.


def _ints(value: Any, n: int, default: int) -> tuple[int, ...]:
    """An int-list attribute, or ``(default,) * n`` when it is absent or empty."""
    if value is None or len(value) == 0:
        return (default,) * n
    return tuple(int(v) for v in value)


def _const_ints(node: NodeView, i: int) -> tuple[int, ...] | None:
    """The value of input i as ints when it is a small constant, else None."""
    value = node.constant(i)
    return None if value is None else tuple(int(v) for v in value.reshape(-1))


def _out_shape(node: NodeView, fallback: Sequence[int] | None) -> tuple[int, ...]:
    """Output 0's shape when shape inference resolved it, else ``fallback``; UnknownShape when neither."""
    out = node.output(0)
    if out is not None and out.known:
        return out.shape  # type: ignore[return-value]
    if fallback is None:
        raise UnknownShape(out.name if out is not None and out.name else f"{node.name}: output 0")
    return tuple(int(d) for d in fallback)


def _one_kernel(
    node: NodeView,
    flops: float,
    read: float,
    out_shape: Sequence[int],
    *,
    macs: float = 0.0,
    note: str = "",
    dtype: int | None = None,
) -> Cost:
    """One kernel doing ``flops`` (``macs`` of them matrix-product MACs) that reads ``read`` bytes and writes
    output 0 (``out_shape`` standing in when its shape is unknown, at ``dtype`` when its type is undefined)."""
    dtypes = {0: dtype} if dtype is not None else None
    return Cost(
        flops=flops,
        macs=macs,
        bytes_read=read,
        bytes_written=output_bytes(node, {0: out_shape}, dtypes),
        params=weight_params(node.inputs),
        kernels=1,
        note=note,
    )


def _others(node: NodeView, skip: int) -> list[Tensor | None]:
    """Every input except input ``skip`` (those read whole when ``skip`` is read only in part)."""
    return [t for i, t in enumerate(node.inputs) if i != skip]


def _partial_read(node: NodeView, index: int, elements: int) -> float:
    """Bytes read: ``elements`` of input ``index`` at its dtype, and every other distinct input whole (an input
    that is also passed elsewhere is counted whole once)."""
    t = node.need_input(index)
    others = _others(node, index)
    if any(o is not None and o.name == t.name for o in others):
        return input_bytes(others)
    return elements * t.itemsize + input_bytes(others)


# ---------------------------------------------------------------------------------------------------------
# Sampling ops.

_GRID_MODES = {"bilinear": "linear", "linear": "linear", "bicubic": "cubic", "cubic": "cubic", "nearest": "nearest"}


@register("GridSample", engine="resize")
def grid_sample(node: NodeView) -> Cost:
    """GridSample of X ``[N, C, D_1..D_r]`` at grid ``[N, P_1..P_r, r]`` (P = prod(P_i) points per batch item):

    ``N * P * r * (GRID_DENORMALIZE_FLOPS + GRID_PADDING_FLOPS[padding_mode] + GRID_WEIGHT_FLOPS[mode])``
    for each point's coordinate, padding and weights (shared by the C channels), plus per output element
    (N * C * P of them) 0 (nearest), ``3 * (2^r - 1)`` (linear: 9 bilinear) or ``7 * (4^r - 1) / 3`` (cubic: 35
    bicubic) for the nested 1-D interpolations of the reference. ``align_corners`` changes only the folded
    constants. Opset 16's 'bilinear'/'bicubic' are 'linear'/'cubic'.

    Bytes: the grid is read whole; of each of X's N * C planes at most ``min(prod(D), P * taps)`` elements
    (taps = 1, 2^r or 4^r per output element), the output written once.
    """
    x, grid = node.need_input(0), node.need_input(1)
    x_shape, grid_shape = x.need_shape(), grid.need_shape()
    n, c, in_spatial = x_shape[0], x_shape[1], x_shape[2:]
    r = len(in_spatial)
    points_per_item = prod(grid_shape[1:-1])
    mode = _GRID_MODES.get(node.text("mode", "linear").lower(), "linear")
    padding = node.text("padding_mode", "zeros").lower()
    per_axis = GRID_DENORMALIZE_FLOPS + GRID_PADDING_FLOPS.get(padding, 0) + GRID_WEIGHT_FLOPS[mode]
    if mode == "nearest":
        per_output, taps = 0, 1
    elif mode == "linear":
        per_output, taps = LINEAR_1D_FLOPS * (2**r - 1), 2**r
    else:
        per_output, taps = CUBIC_1D_FLOPS * (4**r - 1) // 3, 4**r
    out_shape = _out_shape(node, (n, c, *grid_shape[1:-1]))
    outputs = n * c * points_per_item
    flops = n * points_per_item * r * per_axis + outputs * per_output
    read = _partial_read(node, 0, n * c * min(prod(in_spatial), points_per_item * taps))
    return _one_kernel(node, flops, read, out_shape)


@register("AffineGrid", engine="resize")
def affine_grid(node: NodeView) -> Cost:
    """AffineGrid: theta ``[N, r, r+1]`` times the homogeneous base grid ``[r+1, P]`` (P = prod of the r sizes in
    ``size``), a batched matrix product as the reference computes it: ``N * P * r * (r + 1)`` MACs, 2 FLOPs each,
    plus ``2 * sum(sizes)`` FLOPs to build the base grid's per-axis coordinates (start + i * step: 1 mul, 1 add).
    Output ``[N, D.., H, W, r]``, from shape inference or the constant ``size``. Bytes: theta and size read,
    the grid written."""
    theta = node.need_input(0)
    theta_shape = theta.need_shape()
    n, r = theta_shape[0], theta_shape[1]
    size = _const_ints(node, 1)
    out = node.output(0)
    if out is not None and out.known:
        spatial = tuple(out.need_shape()[1:-1])
    elif size is not None:
        spatial = size[2:]
    else:
        raise UnknownShape(f"{node.name}: size is not a constant and the grid's shape is unknown")
    out_shape = _out_shape(node, (n, *spatial, r))
    macs = n * prod(spatial) * r * (r + 1)
    flops = 2 * macs + 2 * sum(spatial)
    return _one_kernel(node, flops, input_bytes(node.inputs), out_shape, macs=macs)


@register("RoiAlign", engine="pool")
def roi_align(node: NodeView) -> Cost:
    """RoiAlign of X ``[N, C, H, W]`` over R ROIs into ``[R, C, oh, ow]`` with S samples per bin:

    ``R * setup + R * oh * ow * S * ROI_ALIGN_POINT_FLOPS + R * C * oh * ow * (S * ROI_SAMPLE_FLOPS + avg)``
    with setup = ROI_ALIGN_SETUP_FLOPS (+2 under output_half_pixel, +2 for the adaptive grid) and avg = 1 in
    mode 'avg' (the divide by S), 0 in 'max'. ``sampling_ratio`` s > 0 gives S = s * s. s = 0 sizes the grid
    from each ROI (data): it is counted for ROIs spanning the whole feature map, S = ceil(H / oh) * ceil(W / ow),
    the most a ROI inside the map can take, and the note says so.

    Bytes: rois and batch_indices read whole; of X at most ``C * min(N * H * W, R * oh * ow * S * 4)`` elements
    (4 corners per sample); the output written once.
    """
    x, rois = node.need_input(0), node.need_input(1)
    n, c, h, w = x.need_shape()
    r = rois.need_shape()[0]
    oh, ow = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
    ratio = int(node.attr("sampling_ratio", 0))
    setup = ROI_ALIGN_SETUP_FLOPS
    if node.text("coordinate_transformation_mode", "half_pixel").lower() != "half_pixel":
        setup += 2
    note = ""
    if ratio > 0:
        samples = ratio * ratio
    else:
        grid_h, grid_w = ceil(h / oh), ceil(w / ow)
        samples = grid_h * grid_w
        setup += 2
        note = (
            f"RoiAlign sampling_ratio=0: adaptive grid counted for ROIs spanning the whole {h}x{w} feature map, "
            f"{grid_h}x{grid_w} samples per bin"
        )
    per_output = samples * ROI_SAMPLE_FLOPS + (1 if node.text("mode", "avg").lower() == "avg" else 0)
    bins = r * oh * ow
    flops = r * setup + bins * samples * ROI_ALIGN_POINT_FLOPS + c * bins * per_output
    read = _partial_read(node, 0, c * min(n * h * w, bins * samples * 4))
    return _one_kernel(node, flops, read, _out_shape(node, (r, c, oh, ow)), note=note)


@register("MaxRoiPool", engine="pool")
def max_roi_pool(node: NodeView) -> Cost:
    """MaxRoiPool of X ``[N, C, H, W]`` over R ROIs into ``[R, C, ph, pw]``:

    ``R * MAX_ROI_POOL_SETUP_FLOPS + R * ph * pw * MAX_ROI_POOL_BIN_FLOPS + R * C * ph * pw * window``, one
    comparison per element of each bin. A bin's size follows its ROI's (data), so it is counted for ROIs
    spanning the whole feature map: window = ceil(H / ph) * ceil(W / pw), and the note says so.

    Bytes: rois read whole; of X at most ``C * min(N * H * W, R * ph * pw * window)`` elements; the output
    written once.
    """
    x, rois = node.need_input(0), node.need_input(1)
    n, c, h, w = x.need_shape()
    r = rois.need_shape()[0]
    pooled = node.attr("pooled_shape")
    if pooled is None or len(pooled) != 2:
        raise UnknownShape(f"{node.name}: no pooled_shape")
    ph, pw = int(pooled[0]), int(pooled[1])
    window_h, window_w = ceil(h / ph), ceil(w / pw)
    window = window_h * window_w
    bins = r * ph * pw
    flops = r * MAX_ROI_POOL_SETUP_FLOPS + bins * MAX_ROI_POOL_BIN_FLOPS + c * bins * window
    read = _partial_read(node, 0, c * min(n * h * w, bins * window))
    note = (
        f"MaxRoiPool: bins counted for ROIs spanning the whole {h}x{w} feature map, "
        f"{window_h}x{window_w} comparisons per output"
    )
    return _one_kernel(node, flops, read, _out_shape(node, (r, c, ph, pw)), note=note)


@register("DeformConv", engine=OTHER)
def deform_conv(node: NodeView) -> Cost:
    """DeformConv (X, W, offset, B, mask) with r spatial axes, K = prod(kernel) taps, P output positions and
    G = offset_group:

    - the Conv count: ``elements(Y) * (C/group) * K`` MACs = ``elements(Y) * prod(W.shape[1:])``, 2 FLOPs each,
      plus one add per output element for B;
    - the offset sampling, as a deformable im2col: each of the ``N * G * K * P`` sampling points costs
      ``r * DEFORM_AXIS_FLOPS + 2^r * (r - 1)`` (12 in 2-D) for its coordinate and corner weights; each of the
      ``N * C * K * P`` sampled values (every input channel at every point of its offset group) costs the
      weighted sum of its 2^r corners, ``2^r`` mul + ``2^r - 1`` add (7 in 2-D, BILINEAR_FLOPS);
    - the optional mask: one multiply per sampled value.

    Bytes: every input read once, Y written once. Params: W and B when they are weights.
    """
    x, w, offset = node.need_input(0), node.need_input(1), node.need_input(2)
    x_shape, w_shape = x.need_shape(), w.need_shape()
    kernel = _ints(node.attr("kernel_shape"), 0, 0) or tuple(w_shape[2:])
    r = len(kernel)
    taps = prod(kernel)
    groups = int(node.attr("offset_group", 1))
    out = node.output(0)
    fallback = None if out is not None and out.known else (x_shape[0], w_shape[0], *offset.need_shape()[2:])
    y_shape = _out_shape(node, fallback)
    n, positions = y_shape[0], prod(y_shape[2:])
    macs = prod(y_shape) * prod(w_shape[1:])
    points = n * groups * taps * positions
    samples = n * x_shape[1] * taps * positions
    per_sample = 2**r + (2**r - 1) + (1 if node.input(4) is not None else 0)
    bias = prod(y_shape) if node.input(3) is not None else 0
    flops = 2 * macs + bias + points * (r * DEFORM_AXIS_FLOPS + 2**r * (r - 1)) + samples * per_sample
    return _one_kernel(node, flops, input_bytes(node.inputs), y_shape, macs=macs)


# ---------------------------------------------------------------------------------------------------------
# Rearranging ops.


def _taps_inside(size: int, pad_begin: int, pad_end: int, block: int, dilation: int, stride: int) -> int:
    """Along one axis of Col2Im: how many of the L block positions x ``block`` taps land inside the image rather
    than in its padding, L = (size + pads - (dilation * (block - 1) + 1)) // stride + 1."""
    length = (size + pad_begin + pad_end - (dilation * (block - 1) + 1)) // stride + 1
    inside = 0
    for k in range(block):
        # position l lands at l * stride - pad_begin + k * dilation, inside when in [0, size)
        low = max(0, -((k * dilation - pad_begin) // stride))  # ceil((pad_begin - k * dilation) / stride)
        high = min(length - 1, (size - 1 + pad_begin - k * dilation) // stride)
        inside += max(0, high - low + 1)
    return inside


@register("Col2Im", engine="movement")
def col2im(node: NodeView) -> Cost:
    """Col2Im of input ``[N, C * prod(block), L]`` into ``[N, C, *image_shape]``: every column element that lands
    inside the image (not in its padding) is added once into the zero-initialised image, so FLOPs = those
    elements = ``N * C * prod_i(inside_i)``, inside_i counting per axis the (block position, tap) pairs that fall
    in ``[0, image_i)``; without padding, every input element. Bytes: those elements of the input and the two
    small shape inputs read, the image written. image_shape and block_shape must be constants (or the output
    shape known and no padding)."""
    data = node.need_input(0)
    n, channels_x_block, _ = data.need_shape()
    image = _const_ints(node, 1)
    block = _const_ints(node, 2)
    out = node.output(0)
    if image is None and out is not None and out.known:
        image = tuple(out.need_shape()[2:])
    if image is None:
        raise UnknownShape(f"{node.name}: image_shape is not a constant and the output shape is unknown")
    rank = len(image)
    pads = _ints(node.attr("pads"), 2 * rank, 0)
    if block is None:
        if any(pads):
            raise UnknownShape(f"{node.name}: block_shape is not a constant")
        inside = data.numel
        channels = out.need_shape()[1] if out is not None and out.known else None
    else:
        strides = _ints(node.attr("strides"), rank, 1)
        dilations = _ints(node.attr("dilations"), rank, 1)
        channels = channels_x_block // prod(block)
        inside = (
            n
            * channels
            * prod(
                _taps_inside(image[i], pads[i], pads[rank + i], block[i], dilations[i], strides[i]) for i in range(rank)
            )
        )
    out_shape = _out_shape(node, None if channels is None else (n, channels, *image))
    read = _partial_read(node, 0, inside)
    return _one_kernel(node, inside, read, out_shape)


@register("CenterCropPad", engine="movement")
def center_crop_pad(node: NodeView) -> Cost:
    """CenterCropPad: a copy, 0 FLOPs. Reads the kept window of the input, ``prod_i min(in_i, out_i)`` elements
    (a cropped axis is read only inside the crop), and the small shape input; writes the whole output, the
    zero padding included. The output shape comes from shape inference or the constant ``shape`` and ``axes``."""
    x = node.need_input(0)
    x_shape = x.need_shape()
    fallback = None
    target = _const_ints(node, 1)
    if target is not None:
        rank = len(x_shape)
        axes = node.attr("axes")
        axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
        fallback = list(x_shape)
        for axis, size in zip(axes, target):
            fallback[axis] = size
    out_shape = _out_shape(node, fallback)
    kept = prod(min(a, b) for a, b in zip(x_shape, out_shape))
    return _one_kernel(node, 0, _partial_read(node, 0, kept), out_shape)


# ---------------------------------------------------------------------------------------------------------
# Detection.


def nms_pairs(boxes: int, max_per_class: int | None) -> int:
    """The most IoU tests greedy NMS makes for one batch item and class of ``boxes`` candidates when it keeps at
    most ``max_per_class`` (None: no bound). Each candidate, best first, is tested against the boxes kept so
    far; the loop ends once ``max_per_class`` are kept. The worst case keeps every candidate until one short of
    the bound and suppresses the rest only at their last test: ``0 + 1 + ... + (M - 2) + (S - M + 1) * (M - 1)``,
    which for M >= S is every pair, ``S * (S - 1) / 2``."""
    s = boxes
    if max_per_class is None or max_per_class >= s:
        return s * (s - 1) // 2
    m = max_per_class
    if m <= 0:
        return 0
    return (m - 1) * (m - 2) // 2 + (s - m + 1) * (m - 1)


@register("NonMaxSuppression", engine=OTHER)
def non_max_suppression(node: NodeView) -> Cost:
    """NonMaxSuppression of boxes ``[B, S, 4]`` under scores ``[B, Cl, S]``, per batch item and class, worst case
    (every candidate passes the score threshold and no test exits early):

    ``S`` comparisons with score_threshold (when given) + ``S * ceil(log2 S)`` to sort the candidates +
    ``nms_pairs(S, M) * IOU_FLOPS[center_point_box]`` for the IoU tests, where M = max_output_boxes_per_class
    when it is a constant (omitted: 0, no output) and unbounded otherwise, so every box of the class against
    every other.

    Bytes: every input read once; the int64 ``[selected, 3]`` output has a data-dependent length, written at its
    inferred shape when known, else at the bound ``B * Cl * min(M, S)`` rows (``S`` when M is not a constant).
    """
    boxes, scores = node.need_input(0), node.need_input(1)
    b, s, _ = boxes.need_shape()
    classes = scores.need_shape()[1]
    if node.input(2) is None:
        m: int | None = 0
    else:
        value = _const_ints(node, 2)
        m = None if value is None or len(value) != 1 else max(value[0], 0)
    pairs = nms_pairs(s, m)
    center = int(node.attr("center_point_box", 0))
    threshold = s if node.input(4) is not None else 0
    sort = s * ceil(log2(s)) if s > 1 else 0
    flops = b * classes * (threshold + sort + pairs * IOU_FLOPS.get(center, IOU_FLOPS[0]))
    rows = b * classes * (s if m is None else min(m, s))
    bound = "unbounded" if m is None else f"M={m}"
    note = f"NonMaxSuppression: worst case counted, {pairs} IoU tests per batch item and class ({bound}, S={s})"
    out = node.output(0)
    if out is None or not out.known:
        note += f"; output written at the bound of {rows} rows"
    return _one_kernel(node, flops, input_bytes(node.inputs), (rows, 3), note=note, dtype=TensorProto.INT64)
