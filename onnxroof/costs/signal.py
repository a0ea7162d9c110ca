"""Cost functions: signal processing (DFT, STFT, the Blackman/Hamming/Hann windows, MelWeightMatrix).

The Fourier transforms are counted for the algorithm onnxruntime's CPU kernel runs (``signal/dft.cc``):

- a transform whose length N is a power of two (1 included) runs an iterative radix-2 FFT, counted at the standard
  published ``5 N log2 N`` real FLOPs per complex transform (FFTW's benchmark convention; onnxruntime's butterfly
  does two complex multiplies where one would do, which this count does not follow). The kernel runs the full
  complex FFT also for a real input and for a one-sided output (it keeps half of it), so neither changes the count;
  an inverse transform adds the 1/N scaling, 2 FLOPs per complex point.
- any other length runs Bluestein's chirp-z algorithm (current onnxruntime; releases before it ran a direct
  O(N^2) DFT): with ``P = next power of two >= 2N - 1``, one P-point FFT of the chirp per node call (cached across
  the transforms of that call), and per transform a chirp multiply of each input sample (a complex multiply, 6
  FLOPs), a forward and an inverse P-point FFT (``2 * 5 P log2 P``) with the inverse's 1/P scaling (2 per point),
  a pointwise product with the chirp spectrum (6 per point) and, per output bin, a chirp multiply and the output
  scale (6 + 2). So per transform ``10 P log2 P + 6 n_in + 8 P + 8 bins``.

Twiddle and chirp factors (N sines and cosines per node call) are O(N) setup, not counted. A transform is a sum of
products but not a matrix-like product in these algorithms, so MACs are 0.

The windows and MelWeightMatrix read only small constant-like inputs; in real models their inputs are constants and
they are folded as weights (then they never reach a cost function). When they do run, they are costed per output
element as stated where each is registered.

Bytes follow the compulsory-traffic model: the samples a transform uses are read once (DFT reads only the first
``dft_length`` samples along the axis when that is shorter), the small scalar inputs are read, and each output is
written once (the transforms at the shape their definition gives, even where onnx's inference differs; the
windows and MelWeightMatrix at ``output_datatype``). Each op is one kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import log2, prod

from onnxroof.costs import OTHER, Cost, NodeView, register, weight_params
from onnxroof.costs.common import input_bytes, output_bytes
from onnxroof.ir import Tensor, UnknownShape
from onnxroof.protos import TensorProto

__all__ = [
    "COMPLEX_MUL_FLOPS",
    "FFT_FLOPS_PER_POINT_LEVEL",
    "MEL_WEIGHT_FLOPS",
    "WINDOW_FLOPS",
    "bluestein_size",
    "fft_flops",
    "is_power_of_two",
    "setup_flops",
    "transform_flops",
]

FFT_FLOPS_PER_POINT_LEVEL = 5  # 5 N log2 N real FLOPs per complex radix-2 FFT of length N
COMPLEX_MUL_FLOPS = 6  # (a + bi)(c + di): 4 multiplies, 1 add, 1 subtract
COMPLEX_SCALE_FLOPS = 2  # (a + bi) * s: 2 multiplies (or divides by s)

# Per output element of the cosine-sum windows ``a0 - a1 cos(w n) + a2 cos(2 w n)``, the form onnxruntime evaluates
# (w = 2 pi / N, N = size for periodic, size - 1 for symmetric; Hann is a0 = a1 = 0.5, the spec's sin^2(pi n / N)).
WINDOW_FLOPS: dict[str, float] = {
    "HannWindow": 4,  # w * n, cos, mul a1, subtract from a0
    "HammingWindow": 4,  # same form: a0 = 25/46, a1 = 21/46
    "BlackmanWindow": 8,  # the 4 above + (2w) * n, cos, mul a2 = 0.08, add
}

# Per element of the [dft_length // 2 + 1, num_mel_bins] matrix: a triangle value (j - left) / (center - left) or
# (right - j) / (right - center), a subtract and a divide. Which elements lie inside a triangle depends on the input
# values (sample rate, edge frequencies), so every element is counted (the zeros cost less: an upper bound).
MEL_WEIGHT_FLOPS = 2


def is_power_of_two(n: int) -> bool:
    """Whether n is a power of two (1 included), the test onnxruntime uses to pick the radix-2 FFT."""
    return n > 0 and n & (n - 1) == 0


def bluestein_size(n: int) -> int:
    """The FFT length P of Bluestein's algorithm for a length-n transform: the next power of two >= 2n - 1."""
    p = 1
    while p < 2 * n - 1:
        p <<= 1
    return p


def fft_flops(n: int) -> float:
    """Real FLOPs of one complex radix-2 FFT of a power-of-two length n: ``5 n log2 n``."""
    return FFT_FLOPS_PER_POINT_LEVEL * n * log2(n) if n > 1 else 0.0


def transform_flops(n: int, n_in: int, bins: int, inverse: bool) -> float:
    """FLOPs of one length-n transform that reads ``n_in`` samples and produces ``bins`` outputs.

    Power of two: ``5 n log2 n`` plus ``2 n`` for an inverse's 1/n scaling. Otherwise Bluestein with P =
    ``bluestein_size(n)``: ``10 P log2 P + 6 n_in + 8 P + 8 bins`` (see the module docstring)."""
    if is_power_of_two(n):
        return fft_flops(n) + (COMPLEX_SCALE_FLOPS * n if inverse else 0)
    p = bluestein_size(n)
    return (
        2 * fft_flops(p)  # forward and inverse P-point FFTs
        + COMPLEX_MUL_FLOPS * n_in  # input samples times the chirp
        + (COMPLEX_MUL_FLOPS + COMPLEX_SCALE_FLOPS) * p  # product with the chirp spectrum; inverse FFT's 1/P
        + (COMPLEX_MUL_FLOPS + COMPLEX_SCALE_FLOPS) * bins  # outputs times the chirp, times the output scale
    )


def setup_flops(n: int) -> float:
    """Once per node call: the FFT of Bluestein's chirp (``5 P log2 P``) for a non-power-of-two n; 0 otherwise."""
    return 0.0 if is_power_of_two(n) else fft_flops(bluestein_size(n))


def _scalar(node: NodeView, i: int) -> int | None:
    """Input i as an int when it is a constant scalar (or one-element tensor)."""
    value = node.constant(i)
    if value is None or value.size != 1:
        return None
    return int(value.reshape(-1)[0])


def _given(node: NodeView, i: int) -> bool:
    t = node.input(i)
    return t is not None and bool(t.name)


def _pick(node: NodeView, readings: Sequence[tuple[Cost, bool]], what: str) -> Cost:
    """The cost shared by the possible readings of an attribute or input not known as a constant, given as (cost,
    whether it gives the inferred output shape). Readings that match the inferred shape win; when none does, the
    op's definition wins over the inference (onnx infers STFT's output with onesided=0 when the attribute is
    absent, though its default is 1). UnknownShape when the remaining readings cost differently."""
    costs = [c for c, matches in readings if matches] or [c for c, _ in readings]
    if not costs:
        raise UnknownShape(f"{node.name}: no valid {what}")
    if any(c != costs[0] for c in costs[1:]):
        raise UnknownShape(f"{node.name}: {what} unknown and the possible values cost differently")
    return costs[0]


def _matches(node: NodeView, shape: Sequence[int]) -> bool:
    """Whether output 0's inferred shape is ``shape`` (True when inference left it unknown)."""
    out = node.output(0)
    return out is None or not out.known or out.need_shape() == tuple(shape)


def _written(node: NodeView, x: Tensor, shape: Sequence[int]) -> float:
    """Bytes of output 0 at the ``shape`` the op's definition gives, at its dtype (default: x's)."""
    out = node.output(0)
    itemsize = out.itemsize if out is not None and out.itemsize else x.itemsize
    return prod(shape) * itemsize


def _lengths_from_bins(bins: int, onesided: bool) -> list[int]:
    """The transform lengths that give ``bins`` outputs: n itself, or both 2(b - 1) and 2b - 1 when one-sided."""
    if not onesided:
        return [bins]
    return [n for n in (2 * (bins - 1), 2 * bins - 1) if n > 0]


# ---------------------------------------------------------------------------------------------------------
# DFT


def _dft_axes(node: NodeView, rank: int) -> list[int]:
    """Candidate axes: the axis input (opset 20) or attribute (opset 17); without either the default, which is 1
    in opset 17 and -2 from opset 20 (both kept when they differ); a non-constant axis input allows any signal
    axis. The output shape then picks among them."""
    if _given(node, 2):
        axis = _scalar(node, 2)
        candidates = range(rank - 1) if axis is None else [axis]
    elif node.attr("axis") is not None:
        candidates = [int(node.attr("axis"))]
    else:
        candidates = [1, -2]
    return sorted({a % rank for a in candidates if -rank <= a < rank and a % rank != rank - 1})


def _dft_lengths(node: NodeView, x_shape: Sequence[int], axis: int, onesided: bool, inverse: bool) -> list[int]:
    """Candidate dft_length values: the constant input 1; the default (the axis length, or 2 (L - 1) for IRFFT)
    when it is omitted; from the output shape when it is given but not constant."""
    length = x_shape[axis]
    if not _given(node, 1):
        return [2 * (length - 1) if onesided and inverse else length]
    n = _scalar(node, 1)
    if n is not None:
        return [n]
    out = node.output(0)
    if out is None or not out.known or out.rank != len(x_shape):
        raise UnknownShape(f"{node.name}: dft_length is not a constant and the output shape is unknown")
    return _lengths_from_bins(out.need_shape()[axis], onesided and not inverse)


def _dft_cost(node: NodeView, x: Tensor, axis: int, n: int, onesided: bool, inverse: bool) -> tuple[Cost, bool]:
    """The cost for one reading of (axis, dft_length) and whether it gives the inferred output shape."""
    x_shape = x.need_shape()
    components = x_shape[-1]
    irfft = onesided and inverse
    bins = n if inverse or not onesided else n // 2 + 1
    out_shape = list(x_shape)
    out_shape[axis] = bins
    out_shape[-1] = 1 if irfft else 2
    transforms = prod(d for i, d in enumerate(x_shape) if i not in (axis, len(x_shape) - 1))
    n_in = min(x_shape[axis], n)
    flops = transforms * transform_flops(n, n_in, bins, inverse) + setup_flops(n)
    read = transforms * n_in * components * x.itemsize + input_bytes(node.inputs[1:])
    cost = Cost(
        flops=flops,
        bytes_read=read,
        bytes_written=_written(node, x, out_shape),
        params=weight_params(node.inputs),
        kernels=1,
    )
    return cost, _matches(node, out_shape)


@register("DFT", engine=OTHER)
def dft(node: NodeView) -> Cost:
    """DFT over one axis of ``[..., L, ..., 1 or 2]`` (real or complex): ``T`` independent transforms of length
    N = dft_length, T = the product of the other signal dims. FLOPs = ``T * transform_flops(N, min(L, N), bins,
    inverse) + setup_flops(N)``: a radix-2 FFT (5 N log2 N) for a power-of-two N, Bluestein otherwise, as
    onnxruntime runs them (module docstring). bins = N, or N // 2 + 1 for a one-sided forward transform (RFFT);
    IRFFT (onesided and inverse) writes N real values. Reads the min(L, N) samples used per transform."""
    x = node.need_input(0)
    x_shape = x.need_shape()
    if len(x_shape) < 2:
        raise UnknownShape(f"{node.name}: DFT input {x.name} has rank {len(x_shape)} < 2")
    onesided = bool(node.attr("onesided", 0))
    inverse = bool(node.attr("inverse", 0))
    readings = [
        _dft_cost(node, x, axis, n, onesided, inverse)
        for axis in _dft_axes(node, len(x_shape))
        for n in _dft_lengths(node, x_shape, axis, onesided, inverse)
        if n > 0
    ]
    return _pick(node, readings, "DFT axis or dft_length")


# ---------------------------------------------------------------------------------------------------------
# STFT


def _stft_cost(node: NodeView, signal: Tensor, frame_length: int, onesided: bool) -> tuple[Cost, bool] | None:
    """The cost for one reading of frame_length and whether it gives the inferred output shape; None when it
    contradicts the window's length."""
    shape = signal.need_shape()
    batch, length = shape[0], shape[1]
    components = shape[2] if len(shape) == 3 else 1
    window = node.input(2)
    if window is not None and window.known and window.need_shape()[0] != frame_length:
        return None
    step = _scalar(node, 1)
    bins = frame_length // 2 + 1 if onesided else frame_length
    out = node.output(0)
    if step is not None and step > 0:
        frames = max((length - frame_length) // step + 1, 0)
    elif out is not None and out.known and out.rank == 4:
        frames = out.need_shape()[1]
    else:
        raise UnknownShape(f"{node.name}: frame_step is not a constant and the output shape is unknown")
    out_shape = (batch, frames, bins, 2)
    transforms = batch * frames
    window_flops = transforms * frame_length * components if _given(node, 2) else 0  # x * w: 1 or 2 per sample
    flops = transforms * transform_flops(frame_length, frame_length, bins, False) + setup_flops(frame_length)
    # Samples inside some frame: frames start every `step`, so a step longer than the frame skips the gaps.
    if not frames:
        covered = 0
    elif step is None or step <= 0:
        covered = length
    else:
        covered = min(length, (frames - 1) * min(step, frame_length) + frame_length)
    read = batch * covered * components * signal.itemsize + input_bytes(node.inputs[1:])
    cost = Cost(
        flops=flops + window_flops,
        bytes_read=read,
        bytes_written=_written(node, signal, out_shape),
        params=weight_params(node.inputs),
        kernels=1,
    )
    return cost, _matches(node, out_shape)


@register("STFT", engine=OTHER)
def stft(node: NodeView) -> Cost:
    """STFT of ``[batch, L, 1 or 2]`` (a rank-2 signal is real): ``batch * frames`` DFTs of frame_length samples
    (``transform_flops``: FFT or Bluestein as for DFT, plus one chirp FFT per call for a non-power-of-two length),
    frames = ``(L - frame_length) // frame_step + 1``, plus the window multiply, 1 FLOP per real sample (2 per
    complex one) of every frame when a window is given (none is a rectangular window). frame_length: the constant
    input 3, else the window's length, else L. Bins: frame_length // 2 + 1 when onesided (the default), else
    frame_length. Reads the signal samples that fall inside some frame."""
    signal = node.need_input(0, "signal")
    shape = signal.need_shape()
    if len(shape) not in (2, 3):
        raise UnknownShape(f"{node.name}: STFT signal {signal.name} has rank {len(shape)}, expected 3 (or 2, real)")
    onesided = bool(node.attr("onesided", 1))
    window = node.input(2)
    out = node.output(0)
    if (n := _scalar(node, 3)) is not None:
        lengths = [n]
    elif window is not None and window.known:
        lengths = [window.need_shape()[0]]
    elif not _given(node, 3):
        lengths = [shape[1]]
    elif out is not None and out.known and out.rank == 4:
        lengths = _lengths_from_bins(out.need_shape()[2], onesided)
    else:
        raise UnknownShape(f"{node.name}: frame_length is not a constant and the output shape is unknown")
    readings = [r for n in lengths if n > 0 and (r := _stft_cost(node, signal, n, onesided)) is not None]
    return _pick(node, readings, "frame_length")


# ---------------------------------------------------------------------------------------------------------
# Windows and MelWeightMatrix


def _generated(node: NodeView, flops_per_element: float, fallback: Callable[[], tuple[int, ...] | None]) -> Cost:
    """An op that computes its output from scalar inputs: ``flops_per_element`` per output element, the scalars
    read, the output written at its dtype (``output_datatype``, default float). ``fallback`` gives the output
    shape from constant inputs when shape inference left it unknown."""
    out = node.output(0)
    shape = out.shape if out is not None and out.known else fallback()
    if shape is None:
        raise UnknownShape(f"{node.name}: output shape unknown and its size inputs are not constants")
    dtype = int(node.attr("output_datatype", TensorProto.FLOAT))
    return Cost(
        flops=flops_per_element * prod(shape),
        bytes_read=input_bytes(node.inputs),
        bytes_written=output_bytes(node, {0: shape}, {0: dtype}),
        params=weight_params(node.inputs),
        kernels=1,
    )


@register(*WINDOW_FLOPS, engine=OTHER)
def cosine_window(node: NodeView) -> Cost:
    """Hann/Hamming/Blackman window of ``size`` samples: ``WINDOW_FLOPS[op]`` per sample (4 for the two-term
    cosine sums, 8 for Blackman's three terms), the same for periodic and symmetric windows."""

    def from_size() -> tuple[int, ...] | None:
        size = _scalar(node, 0)
        return None if size is None else (size,)

    return _generated(node, WINDOW_FLOPS[node.op_type], from_size)


@register("MelWeightMatrix", engine=OTHER)
def mel_weight_matrix(node: NodeView) -> Cost:
    """MelWeightMatrix, ``[dft_length // 2 + 1, num_mel_bins]``: 2 FLOPs per element (a triangle value, subtract
    and divide; counted for every element since which ones are non-zero depends on the input values). The
    O(num_mel_bins) mel-to-hertz conversions of the triangle corners are not counted."""

    def from_constants() -> tuple[int, ...] | None:
        mel_bins, dft_length = _scalar(node, 0), _scalar(node, 1)
        return None if mel_bins is None or dft_length is None else (dft_length // 2 + 1, mel_bins)

    return _generated(node, MEL_WEIGHT_FLOPS, from_constants)
