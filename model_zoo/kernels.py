"""The two single-kernel benchmarks of the time-based roofline study (paper 001, section IV).

``conv2d_kernel``: the Conv2D kernel taken from ResNet-50 with the paper's defaults: batch 16, input
64 channels x 112x112, kernel 3x3x64x64, stride 2; 'same' padding (pad 1) gives a 56x56 output; no bias.
A single Conv node. The paper also sweeps the number of filters, the kernel size and the stride, which the
builder exposes as keyword arguments.

``lstm_kernel``: the LSTM kernel with the paper's defaults: batch 16, sequence length 16, 32 input features,
hidden size 16, one forward layer. A single ONNX LSTM node with W ``[1, 64, 32]``, R ``[1, 64, 16]`` and
B ``[1, 128]`` (input and recurrent biases, as PyTorch's ``b_ih`` and ``b_hh``); X is ``[seq, batch, features]``
(layout 0). Outputs are Y (``output``, ``[seq, 1, batch, hidden]``), the last hidden state (``h_n``) and the
last cell state (``c_n``).
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder, conv_out

__all__ = ["conv2d_kernel", "lstm_kernel"]


def conv2d_kernel(
    batch: int = 16,
    size: int = 112,
    *,
    in_channels: int = 64,
    filters: int = 64,
    kernel: int = 3,
    stride: int = 2,
    weights: bool = True,
) -> onnx.ModelProto:
    """Paper 001's Conv2D kernel: one bias-free Conv with 'same' padding (pad = kernel // 2)."""
    pad = kernel // 2
    out = conv_out(size, kernel, stride, pad)
    if out < 1:
        raise ValueError(f"conv2d_kernel: input size {size} is smaller than the kernel {kernel}")
    b = GraphBuilder(
        "conv2d_kernel",
        seed=1,
        weights=weights,
        doc=f"Conv2D kernel (paper 001): {filters}@{kernel}x{kernel}/{stride} on {in_channels}x{size}x{size}",
    )
    b.conv("input", "conv", in_channels, filters, kernel, stride=stride, pad=pad, bias=False, out="output")
    return b.model([("input", (batch, in_channels, size, size))], [("output", (batch, filters, out, out))])


def lstm_kernel(
    batch: int = 16,
    size: int | None = None,
    *,
    seq_len: int | None = None,
    features: int = 32,
    hidden: int = 16,
    weights: bool = True,
) -> onnx.ModelProto:
    """Paper 001's LSTM kernel; ``size`` is the sequence length (an alias of ``seq_len``)."""
    if size is not None and seq_len is not None and size != seq_len:
        raise ValueError(f"lstm_kernel: size ({size}) and seq_len ({seq_len}) disagree")
    steps = seq_len if seq_len is not None else (size if size is not None else 16)
    if steps < 1:
        raise ValueError(f"lstm_kernel: sequence length must be positive, got {steps}")
    b = GraphBuilder(
        "lstm_kernel",
        seed=3,
        weights=weights,
        doc=f"LSTM kernel (paper 001): seq {steps}, batch {batch}, {features} features, hidden {hidden}",
    )
    w = b.add_weight("lstm.W", [1, 4 * hidden, features], fan_in=features)
    r = b.add_weight("lstm.R", [1, 4 * hidden, hidden], fan_in=hidden)
    bias = b.add_weight("lstm.B", [1, 8 * hidden], init="zeros")
    b.node_outputs(
        "LSTM",
        ["input", w, r, bias],
        "lstm",
        outputs=["output", "h_n", "c_n"],
        hidden_size=hidden,
        direction="forward",
        layout=0,
    )
    return b.model(
        [("input", (steps, batch, features))],
        [
            ("output", (steps, 1, batch, hidden)),
            ("h_n", (1, batch, hidden)),
            ("c_n", (1, batch, hidden)),
        ],
    )
