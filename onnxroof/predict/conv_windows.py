"""The windows of onnxruntime's NCHWc convolution: which taps of each output position lie inside the input and
which reach into the padding.

The NCHWc kernel computes only the taps inside its input, and walks an output row in blocks of positions whose
windows lie inside it, taking every position whose window reaches into the left or right padding on its own, one
at a time. :func:`taps_inside` gives the share of the multiply-adds it computes, :func:`border_share` the share of
output columns it takes one at a time.
"""

from __future__ import annotations

from functools import lru_cache
from math import prod

from onnxroof.costs import NodeView

__all__ = ["NCHWC_DOMAIN", "border_share", "taps_inside"]

NCHWC_DOMAIN = "com.microsoft.nchwc"  # onnxruntime's blocked-layout CPU kernels


def taps_inside(view: NodeView) -> float:
    """The share of a convolution's multiply-adds whose input tap lies inside the input rather than in its
    padding, for onnxruntime's NCHWc convolution, which computes only those (1 for any other node, and where the
    shapes or attributes do not say).

    Per spatial axis (input size I, output size O, kernel K, stride S, dilation D, leading pad P), output
    position o reads taps ``o*S - P + j*D`` for j < K; the share is the product over the axes of the taps
    inside ``[0, I)`` over ``O*K``. It matters most for a dilated convolution on a small map, which reads little
    but its centre tap, and, less, for any padded window on a small output."""
    axes = _windows(view)
    return prod(_inside_share(*axis) for axis in axes) if axes else 1.0


def border_share(view: NodeView) -> float:
    """The share of an NCHWc convolution's output columns (positions along its last axis) whose window reaches into
    the padding (0 for any other node, and where the shapes or attributes do not say): the positions onnxruntime's
    NCHWc kernel computes one at a time."""
    axes = _windows(view)
    return _border_share(*axes[-1]) if axes else 0.0


def _shape(view: NodeView, index: int, output: bool = False) -> tuple[int, ...] | None:
    t = view.output(index) if output else view.input(index)
    return t.shape if t is not None and t.shape is not None else None


def _windows(view: NodeView) -> list[tuple[int, int, int, int, int, int]] | None:
    """Per spatial axis of an NCHWc convolution, (input size, output size, kernel, stride, dilation, leading pad);
    None for any other node, and where the shapes or attributes do not give the output's size."""
    if view.domain != NCHWC_DOMAIN or view.op_type != "Conv":
        return None
    x, y, w = _shape(view, 0), _shape(view, 0, output=True), _shape(view, 1)
    if x is None or y is None or w is None or len(x) != len(y) or len(w) != len(x) or len(x) < 3:
        return None
    n = len(x) - 2
    kernel = tuple(int(k) for k in (view.attr("kernel_shape") or w[2:]))
    strides = tuple(int(v) for v in (view.attr("strides") or (1,) * n))
    dilations = tuple(int(v) for v in (view.attr("dilations") or (1,) * n))
    pads = tuple(int(v) for v in (view.attr("pads") or (0,) * (2 * n)))
    auto_pad = view.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if len(kernel) != n or len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        return None
    axes = []
    for axis in range(n):
        size, out, k, s, d = x[axis + 2], y[axis + 2], kernel[axis], strides[axis], dilations[axis]
        lead, total = pads[axis], pads[axis] + pads[axis + n]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max((out - 1) * s + d * (k - 1) + 1 - size, 0)
            lead = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            lead = total = 0
        if s <= 0 or (size + total - d * (k - 1) - 1) // s + 1 != out:
            return None  # the attributes do not give this output: no window to follow
        axes.append((size, out, k, s, d, lead))
    return axes


@lru_cache(maxsize=1024)
def _border_share(size: int, out: int, k: int, stride: int, dilation: int, lead: int) -> float:
    """Along one axis: the share of output positions with a tap outside ``[0, size)``."""
    if out <= 0 or k <= 0:
        return 0.0
    border = sum(1 for o in range(out) if any(not 0 <= o * stride - lead + j * dilation < size for j in range(k)))
    return border / out


@lru_cache(maxsize=1024)
def _inside_share(size: int, out: int, k: int, stride: int, dilation: int, lead: int) -> float:
    """Along one axis: the share of (output position, tap) pairs whose input index lies in ``[0, size)``."""
    if out <= 0 or k <= 0:
        return 1.0
    inside = sum(1 for o in range(out) for j in range(k) if 0 <= o * stride - lead + j * dilation < size)
    return inside / (out * k)
