"""LSTM, GRU, RNN and DynamicQuantizeLSTM costs against closed forms derived from the ONNX operator definitions."""

from __future__ import annotations

import pytest

from onnxroof.ir import UnknownShape
from tests.helpers import INT8, INT32, T, W, cost_of, make_node

# Paper 001's LSTM kernel: batch 16, sequence 16, 32 features, hidden 16, forward.
SEQ, BATCH, I, H = 16, 16, 32, 16  # noqa: E741 (I is the paper's input size)


def lstm_node(
    *,
    seq: int = SEQ,
    batch: int = BATCH,
    dirs: int = 1,
    bias: bool = False,
    peepholes: bool = False,
    layout: int = 0,
    constants: dict | None = None,
    seq_lens: bool = False,
    **attrs,
):
    x_shape = [batch, seq, I] if layout else [seq, batch, I]
    y_shape = [batch, seq, dirs, H] if layout else [seq, dirs, batch, H]
    state_shape = [batch, dirs, H] if layout else [dirs, batch, H]
    inputs = [
        T(x_shape),
        W([dirs, 4 * H, I]),
        W([dirs, 4 * H, H]),
        W([dirs, 8 * H]) if bias else None,
        T([batch], INT32) if seq_lens else None,
        None,
        None,
        W([dirs, 3 * H]) if peepholes else None,
    ]
    direction = {1: "forward", 2: "bidirectional"}[dirs]
    attrs.setdefault("hidden_size", H)
    return make_node(
        "LSTM",
        inputs,
        [T(y_shape), T(state_shape), T(state_shape)],
        constants=constants,
        direction=direction,
        layout=layout,
        **attrs,
    )


def test_paper_001_lstm_macs_and_kernels():
    cost = cost_of(lstm_node())
    # 16 steps * 16 batch * 4 gates * 16 hidden * (32 input + 16 recurrent) = 786432
    assert cost.macs == 16 * 16 * 4 * 16 * (32 + 16) == 786432
    # one GEMM + one elementwise kernel per step: 16 gemmSN_TN_kernel + 16 LSTM_elementWise_fp = 32
    assert cost.kernels == 2 * 16 == 32


def test_lstm_flops_are_two_per_mac_plus_22h_gate_work():
    cost = cost_of(lstm_node())
    # per step and batch element: 4H add the GEMMs + 3 sigmoids * 4H + tanh(c~) H + tanh(C) H
    # + 4H for C = f*C + i*c~ and h = o*tanh(C) = 22H
    per_step = (4 + 3 * 4 + 1 + 1 + 4) * H
    assert per_step == 22 * H
    assert cost.flops == 2 * 786432 + SEQ * BATCH * per_step == 1662976


def test_lstm_bias_adds_4h_per_step():
    cost = cost_of(lstm_node(bias=True))
    # Wb + Rb is weight-only work; per step the summed bias is one add on each of the 4H pre-activations: 26H
    assert cost.flops == 2 * 786432 + SEQ * BATCH * 26 * H
    # params: W 64*32 + R 64*16 + B 128
    assert cost.params == 4 * H * I + 4 * H * H + 8 * H == 3200


def test_lstm_bytes_read_inputs_once_and_write_outputs_once():
    cost = cost_of(lstm_node(bias=True))
    x = SEQ * BATCH * I * 4  # 32768
    w = 4 * H * I * 4  # 8192
    r = 4 * H * H * 4  # 4096
    b = 8 * H * 4  # 512
    assert cost.bytes_read == x + w + r + b == 45568
    y = SEQ * 1 * BATCH * H * 4  # 16384
    y_h = y_c = 1 * BATCH * H * 4  # 1024 each
    assert cost.bytes_written == y + y_h + y_c == 18432


def test_lstm_bidirectional_doubles_work_and_kernels():
    forward, both = cost_of(lstm_node()), cost_of(lstm_node(dirs=2))
    assert both.macs == 2 * 786432
    assert both.flops == 2 * forward.flops
    assert both.kernels == 2 * 2 * 16 == 64


def test_lstm_reverse_costs_like_forward():
    node = lstm_node()
    forward = cost_of(node)
    reverse = cost_of(make_node("LSTM", node.inputs, node.outputs, direction="reverse", hidden_size=H))
    assert (reverse.macs, reverse.flops, reverse.kernels) == (forward.macs, forward.flops, forward.kernels)


def test_lstm_layout_1_reads_batch_first():
    # layout 1: X is [batch=4, seq=10, input]; 10 steps of 4 batch elements
    cost = cost_of(lstm_node(seq=10, batch=4, layout=1))
    assert cost.macs == 10 * 4 * 4 * H * (I + H) == 122880
    assert cost.kernels == 2 * 10


def test_lstm_hidden_size_from_r_when_attribute_absent():
    node = lstm_node()
    node = make_node("LSTM", node.inputs, node.outputs)  # no hidden_size (R is [1, 64, 16]), no direction: forward
    assert cost_of(node).macs == 786432


def test_lstm_peepholes_add_3h_macs():
    cost = cost_of(lstm_node(peepholes=True))
    # P_i*C_{t-1}, P_f*C_{t-1}, P_o*C_t: 3H multiply-adds per step and batch element
    assert cost.macs == SEQ * BATCH * (4 * H * (I + H) + 3 * H) == 798720
    assert cost.flops == 2 * cost.macs + SEQ * BATCH * 22 * H


def test_lstm_clip_adds_min_and_max_on_4h_preactivations():
    cost = cost_of(lstm_node(clip=3.0))
    assert cost.flops == 2 * 786432 + SEQ * BATCH * (22 + 8) * H


def test_lstm_activations_attribute_changes_gate_work():
    cost = cost_of(lstm_node(activations=["Relu", "Tanh", "Tanh"]))
    # 3 Relu gates at 1 FLOP instead of 3 sigmoids at 4: 4 + 3*1 + 1 + 1 + 4 = 13H
    assert cost.flops == 2 * 786432 + SEQ * BATCH * 13 * H


def test_lstm_unknown_activation_is_flagged_not_silent():
    cost = cost_of(lstm_node(activations=["Mystery", "Tanh", "Tanh"]))
    assert "Mystery" in cost.note


def test_lstm_constant_sequence_lens_count_only_real_steps():
    # batch 2, sequences of 5 and 3 steps: 8 (step, batch) pairs computed; 5 steps launched
    cost = cost_of(lstm_node(seq=5, batch=2, seq_lens=True, constants={4: [5, 3]}))
    assert cost.macs == (5 + 3) * 4 * H * (I + H) == 24576
    assert cost.kernels == 2 * 5


def test_lstm_needs_a_known_input_shape():
    node = lstm_node()
    node = make_node("LSTM", (T(None),) + node.inputs[1:], node.outputs, hidden_size=H)
    with pytest.raises(UnknownShape):
        cost_of(node)


def gru_node(*, bias: bool, linear_before_reset: int = 0):
    # seq 5, batch 3, input 10, hidden 8
    return make_node(
        "GRU",
        [T([5, 3, 10]), W([1, 24, 10]), W([1, 24, 8]), W([1, 48]) if bias else None],
        [T([5, 1, 3, 8]), T([1, 3, 8])],
        hidden_size=8,
        linear_before_reset=linear_before_reset,
    )


def test_gru_macs_and_flops():
    cost = cost_of(gru_node(bias=True))
    # 5 steps * 3 batch * 3 gates * 8 hidden * (10 + 8)
    assert cost.macs == 5 * 3 * 3 * 8 * (10 + 8) == 6480
    # per step: 3H add GEMMs + 3H bias + 1H reset product + 2 sigmoids * 4H + 1 tanh H
    # + 4H for H_t = (1 - z)*h~ + z*H_{t-1} = 20H
    assert cost.flops == 2 * 6480 + 5 * 3 * (3 + 3 + 1 + 2 * 4 + 1 + 4) * 8 == 15360
    assert cost.kernels == 2 * 5


def test_gru_without_bias_and_linear_before_reset():
    assert cost_of(gru_node(bias=False)).flops == 2 * 6480 + 5 * 3 * 17 * 8
    # linear_before_reset: Rbh is added before the reset product, one more H of bias adds: 21H
    assert cost_of(gru_node(bias=True, linear_before_reset=1)).flops == 2 * 6480 + 5 * 3 * 21 * 8


def rnn_node(*, dirs: int, bias: bool):
    # seq 5, batch 3, input 10, hidden 8
    return make_node(
        "RNN",
        [T([5, 3, 10]), W([dirs, 8, 10]), W([dirs, 8, 8]), W([dirs, 16]) if bias else None],
        [T([5, dirs, 3, 8]), T([dirs, 3, 8])],
        hidden_size=8,
        direction="bidirectional" if dirs == 2 else "forward",
    )


def test_rnn_macs_and_flops():
    cost = cost_of(rnn_node(dirs=1, bias=False))
    assert cost.macs == 5 * 3 * 8 * (10 + 8) == 2160
    # per step: H to add the GEMMs + H for tanh = 2H
    assert cost.flops == 2 * 2160 + 5 * 3 * 2 * 8 == 4560
    assert cost.kernels == 2 * 5


def test_rnn_bidirectional_with_bias():
    cost = cost_of(rnn_node(dirs=2, bias=True))
    assert cost.macs == 2 * 2160
    # per step and direction: add GEMMs H + bias H + tanh H = 3H
    assert cost.flops == 2 * 4320 + 2 * 5 * 3 * 3 * 8 == 9360
    assert cost.kernels == 2 * 5 * 2


def test_dynamic_quantize_lstm_same_macs_int8_weights():
    inputs = [
        T([SEQ, BATCH, I]),
        W([1, I, 4 * H], INT8),  # [dirs, input, 4H]: transposed against ONNX LSTM
        W([1, H, 4 * H], INT8),
        None,
        None,
        None,
        None,
        None,
        W([1]),  # W_scale
        W([1], INT8),  # W_zero_point
        W([1]),  # R_scale
        W([1], INT8),  # R_zero_point
    ]
    outputs = [T([SEQ, 1, BATCH, H]), T([1, BATCH, H]), T([1, BATCH, H])]
    cost = cost_of(make_node("DynamicQuantizeLSTM", inputs, outputs, domain="com.microsoft"))  # H from R's shape
    assert cost.macs == 786432
    assert cost.flops == 2 * 786432 + SEQ * BATCH * 22 * H
    assert cost.kernels == 32
    # X float 16*16*32*4 + W int8 32*64 + R int8 16*64 + two float scales + two int8 zero points
    assert cost.bytes_read == SEQ * BATCH * I * 4 + I * 4 * H + H * 4 * H + 2 * 4 + 2 * 1 == 35850
