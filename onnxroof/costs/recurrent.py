"""Cost functions: recurrent layers (LSTM, GRU, RNN and onnxruntime's DynamicQuantizeLSTM).

Every recurrent op is costed per time step, per direction and per batch element, then multiplied out:

    total = per_step * steps * batch * num_directions

where ``steps * batch`` becomes ``sum(sequence_lens)`` when the ``sequence_lens`` input is a constant known at
analysis time (the padded tail of a shorter sequence is not computed).

MACs per step (G gates, input size I, hidden size H): ``G*H*I`` for the input projection ``X_t W^T`` plus
``G*H*H`` for the recurrent projection ``H_{t-1} R^T``, so LSTM (G=4) ``4H(I+H)``, GRU (G=3) ``3H(I+H)`` and
RNN (G=1) ``H(I+H)``. FLOPs = 2 * MACs + the elementwise gate work, written out per op below with the FLOPs of
each activation taken from ``ACTIVATION_FLOPS``.

Kernels: 2 per time step per direction, one GEMM and one fused elementwise kernel. This is what paper 001
profiled for a cuDNN-backed PyTorch LSTM (batch 16, sequence 16, 32 features, hidden 16): 16 GEMM kernels
(``gemmSN_TN_kernel``) each paired with an ``LSTM_elementWise_fp`` kernel, 32 launches for 16 steps. Batch does not
change the launch count; sequence length and directions multiply it.

Bytes: the compulsory-traffic model. X, W, R, B, sequence_lens, the initial states and P are read once; Y, Y_h and
Y_c are written once. The per-step reuse of R and of the hidden state is on-chip traffic and is not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnxroof.costs import Cost, NodeView, as_text, register, weight_params
from onnxroof.costs.common import ACTIVATION_FLOPS, io_bytes
from onnxroof.ir import UnknownShape

__all__ = ["ACTIVATION_FLOPS", "KERNELS_PER_STEP", "dynamic_quantize_lstm", "gru", "lstm", "rnn"]

# One GEMM and one elementwise kernel per time step and direction (paper 001's cuDNN LSTM profile).
KERNELS_PER_STEP = 2


@dataclass(frozen=True, slots=True)
class _Dims:
    """The sizes a recurrent op's cost depends on."""

    seq_length: int
    batch: int
    input_size: int
    hidden_size: int
    num_directions: int
    step_batch: int  # time steps x batch elements actually computed (sum of sequence_lens when known)
    steps: int  # time steps launched (max of sequence_lens when known)


def _num_directions(node: NodeView) -> int:
    """1 for forward or reverse, 2 for bidirectional (the `direction` attribute, default forward)."""
    direction = node.text("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ValueError(f"{node.name}: unknown direction {direction!r}")
    return 2 if direction == "bidirectional" else 1


def _dims(node: NodeView, hidden_from_r: int, *, layout_attr: bool = True) -> _Dims:
    """Resolve sequence length, batch, input and hidden sizes and directions.

    ``hidden_from_r`` is the axis of R that holds H when the ``hidden_size`` attribute is absent. ``layout`` 0 means
    X is ``[seq, batch, input]``, 1 means ``[batch, seq, input]`` (DynamicQuantizeLSTM has no layout attribute).
    """
    x = node.input(0)
    if x is None:
        raise UnknownShape(f"{node.name}: no input X")
    shape = x.need_shape()
    if len(shape) != 3:
        raise UnknownShape(f"{node.name}: X {x.name} must be rank 3, got {shape}")
    layout = int(node.attr("layout", 0)) if layout_attr else 0
    seq_length, batch = (shape[1], shape[0]) if layout == 1 else (shape[0], shape[1])
    hidden = node.attr("hidden_size")
    if hidden is None:
        r = node.input(2)
        if r is None:
            raise UnknownShape(f"{node.name}: no hidden_size attribute and no R input")
        hidden = r.need_shape()[hidden_from_r]
    step_batch, steps = seq_length * batch, seq_length
    lens = node.constant(4)
    if lens is not None and lens.size == batch:
        clipped = [min(max(int(n), 0), seq_length) for n in lens.reshape(-1)]
        step_batch, steps = sum(clipped), max(clipped, default=0)
    return _Dims(seq_length, batch, shape[2], int(hidden), _num_directions(node), step_batch, steps)


def _activations(node: NodeView, defaults: Sequence[str], num_directions: int) -> tuple[list[list[str]], list[str]]:
    """The activation names per direction (attribute, else the op's defaults) and notes for unknown ones."""
    given = node.attr("activations")
    names = [as_text(a) for a in given] if given else list(defaults) * num_directions
    per_dir = len(defaults)
    if len(names) < per_dir * num_directions:  # one set given for a bidirectional op: reuse it
        names = (names[:per_dir] * num_directions)[: per_dir * num_directions]
    groups = [names[d * per_dir : (d + 1) * per_dir] for d in range(num_directions)]
    notes = [f"unknown activation {n!r} counted as 1 FLOP" for n in dict.fromkeys(names) if n not in ACTIVATION_FLOPS]
    return groups, notes


def _act(name: str) -> float:
    """FLOPs per element of an activation; an unknown one counts 1 and is noted by ``_activations``."""
    return ACTIVATION_FLOPS.get(name, 1)


def _total(
    node: NodeView, dims: _Dims, macs_per_step: float, ew_per_direction: Sequence[float], notes: Sequence[str]
) -> Cost:
    """Multiply per-step work out over steps, batch and directions; bytes, params and kernels as documented."""
    read, written = io_bytes(node)
    macs = macs_per_step * dims.step_batch * dims.num_directions
    elementwise = sum(ew_per_direction) * dims.step_batch
    cost = Cost(
        flops=2 * macs + elementwise,
        macs=macs,
        bytes_read=read,
        bytes_written=written,
        params=weight_params(node.inputs),
        kernels=KERNELS_PER_STEP * dims.steps * dims.num_directions,
    )
    return cost.with_note("; ".join(notes)) if notes else cost


def _lstm(node: NodeView, dims: _Dims) -> Cost:
    """LSTM arithmetic shared by the ONNX op and the dynamically quantized one.

    Per time step, direction and batch element (H = hidden size, I = input size):

    - MACs: ``4H*I`` (``X_t W^T``) + ``4H*H`` (``H_{t-1} R^T``), plus ``3H`` when peepholes P are given
      (``P_i * C_{t-1}``, ``P_f * C_{t-1}``, ``P_o * C_t``).
    - Elementwise FLOPs:
        4H  add the two GEMM results
        4H  add the bias, when B is given (``Wb + Rb`` is weight-only work, summed once and not counted)
        8H  clip the gate pre-activations to [-clip, clip] (min and max), when ``clip`` is set
        3H * f   the i, o, f gates (default f = Sigmoid, 4 FLOPs: neg, exp, add, div)
        1H * g   the cell candidate (default g = Tanh, 1 FLOP)
        1H * h   the output squash of C_t (default h = Tanh, 1 FLOP)
        4H  ``C_t = f*C_{t-1} + i*c~`` (2 products, 1 add) and ``H_t = o * h(C_t)`` (1 product)
      With the default activations this is 4 + 12 + 1 + 1 + 4 = 22H, and 26H with a bias.
      ``input_forget`` (coupled i and f gates) is not modelled separately.
    """
    h, i = dims.hidden_size, dims.input_size
    has_p = node.input(7) is not None
    macs = 4 * h * (i + h) + (3 * h if has_p else 0)
    groups, notes = _activations(node, ("Sigmoid", "Tanh", "Tanh"), dims.num_directions)
    bias = 4 * h if node.input(3) is not None else 0
    clip = 8 * h if node.attr("clip") is not None else 0
    fixed = 4 * h + bias + clip + 4 * h  # add the GEMMs, bias, clip, cell and hidden-state update
    per_dir = [fixed + h * (3 * _act(f) + _act(g) + _act(hh)) for f, g, hh in groups]
    return _total(node, dims, macs, per_dir, notes)


@register("LSTM", engine="recurrent")
def lstm(node: NodeView) -> Cost:
    """ONNX LSTM: W ``[dirs, 4H, I]``, R ``[dirs, 4H, H]``, B ``[dirs, 8H]``, P ``[dirs, 3H]``.

    MACs ``4H(I+H)`` per step, direction and batch element; FLOPs ``2*MACs + 22H`` (``26H`` with a bias); see
    ``_lstm`` for the elementwise terms, and the module docstring for kernels and bytes.
    """
    return _lstm(node, _dims(node, hidden_from_r=2))


@register("com.microsoft::DynamicQuantizeLSTM", engine="recurrent")
def dynamic_quantize_lstm(node: NodeView) -> Cost:
    """onnxruntime's DynamicQuantizeLSTM: an LSTM whose W ``[dirs, I, 4H]`` and R ``[dirs, H, 4H]`` are int8.

    The same MACs and gate work as LSTM (the MACs run as int8 x uint8 with int32 accumulation); the int8 weights
    and their scales and zero points are read at their own sizes by ``io_bytes``. The dynamic quantization of
    X_t and H_{t-1} and the rescaling of the int32 accumulators are O(I + H) per step against the O(H(I+H))
    GEMMs and are not counted. X is always ``[seq, batch, input]`` (the op has no layout attribute).
    """
    return _lstm(node, _dims(node, hidden_from_r=1, layout_attr=False))


@register("GRU", engine="recurrent")
def gru(node: NodeView) -> Cost:
    """ONNX GRU: W ``[dirs, 3H, I]``, R ``[dirs, 3H, H]``, B ``[dirs, 6H]``.

    Per time step, direction and batch element:

    - MACs: ``3H*I + 3H*H = 3H(I+H)``.
    - Elementwise FLOPs:
        3H  add the input and recurrent GEMM results of the z, r and h gates
        3H  bias, when B is given (4H with ``linear_before_reset``: ``Rbh`` is added before the reset product)
        6H  clip (min and max of 3H pre-activations), when ``clip`` is set
        1H  the reset product ``r * H_{t-1}`` (or ``r * (H_{t-1} Rh^T + Rbh)`` with ``linear_before_reset``)
        2H * f  the z and r gates (default f = Sigmoid, 4 FLOPs)
        1H * g  the candidate h~ (default g = Tanh, 1 FLOP)
        4H  ``H_t = (1 - z) * h~ + z * H_{t-1}`` (subtract, 2 products, add)
      With the default activations this is 3 + 1 + 8 + 1 + 4 = 17H, and 20H with a bias.
    """
    dims = _dims(node, hidden_from_r=2)
    h, i = dims.hidden_size, dims.input_size
    linear_before_reset = bool(node.attr("linear_before_reset", 0))
    bias = (4 * h if linear_before_reset else 3 * h) if node.input(3) is not None else 0
    clip = 6 * h if node.attr("clip") is not None else 0
    groups, notes = _activations(node, ("Sigmoid", "Tanh"), dims.num_directions)
    fixed = 3 * h + bias + clip + h + 4 * h
    per_dir = [fixed + h * (2 * _act(f) + _act(g)) for f, g in groups]
    return _total(node, dims, 3 * h * (i + h), per_dir, notes)


@register("RNN", engine="recurrent")
def rnn(node: NodeView) -> Cost:
    """ONNX RNN (Elman): W ``[dirs, H, I]``, R ``[dirs, H, H]``, B ``[dirs, 2H]``.

    Per time step, direction and batch element:

    - MACs: ``H*I + H*H = H(I+H)``.
    - Elementwise FLOPs: 1H to add the two GEMM results, 1H bias when B is given, 2H clip when ``clip`` is set,
      and 1H * f for the activation (default f = Tanh, 1 FLOP): 2H by default, 3H with a bias.
    """
    dims = _dims(node, hidden_from_r=2)
    h, i = dims.hidden_size, dims.input_size
    groups, notes = _activations(node, ("Tanh",), dims.num_directions)
    fixed = h + (h if node.input(3) is not None else 0) + (2 * h if node.attr("clip") is not None else 0)
    per_dir = [fixed + h * _act(f) for (f,) in groups]
    return _total(node, dims, h * (i + h), per_dir, notes)
