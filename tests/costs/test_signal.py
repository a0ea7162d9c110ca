"""Signal ops (DFT, STFT, windows, MelWeightMatrix) against closed forms worked from their definitions.

Counting rules (onnxroof/costs/signal.py): a power-of-two length N runs a radix-2 FFT, 5 N log2 N FLOPs, plus 2 N
for an inverse's scaling; any other N runs Bluestein with P = next power of two >= 2N - 1: per transform
2 * 5 P log2 P + 6 * (samples read) + 8 P + 8 * bins, plus one 5 P log2 P chirp FFT per node.
"""

from __future__ import annotations

import pytest

from onnxroof.costs.signal import bluestein_size, is_power_of_two
from onnxroof.ir import UnknownShape
from tests.helpers import INT32, INT64, T, W, cost_of, make_node

DOUBLE = 11


def dft(x, y, inputs=(), constants=None, **attrs):
    return cost_of(make_node("DFT", [x, *inputs], [y], constants=constants, **attrs))


def test_power_of_two_and_bluestein_sizes():
    assert [n for n in range(1, 20) if is_power_of_two(n)] == [1, 2, 4, 8, 16]
    # P >= 2N - 1: N = 6 -> 11 -> 16; N = 10 -> 19 -> 32; N = 12 -> 23 -> 32; N = 16 -> 31 -> 32
    assert [bluestein_size(n) for n in (6, 10, 12, 16)] == [16, 32, 32, 32]


def test_dft_complex_power_of_two():
    # x [4, 8, 2], axis 1: 4 complex transforms of N = 8; FFT 5 * 8 * log2(8) = 120 each
    cost = dft(T([4, 8, 2]), T([4, 8, 2]), axis=1)
    assert cost.flops == 4 * 120 == 480
    assert cost.macs == 0
    # reads 4*8*2 floats = 256 B; writes the same shape
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (256, 256, 0, 1)


def test_dft_inverse_adds_the_scaling():
    # each of the 8 complex points divided by N: 2 FLOPs each, 16 per transform
    cost = dft(T([4, 8, 2]), T([4, 8, 2]), axis=1, inverse=1)
    assert cost.flops == 4 * (120 + 16) == 544


def test_dft_real_onesided_runs_the_full_fft():
    # x [4, 8, 1] real, onesided: the kernel still runs the full complex FFT (120 each) and keeps 8 // 2 + 1 = 5 bins
    cost = dft(T([4, 8, 1]), T([4, 5, 2]), axis=1, onesided=1)
    assert cost.flops == 480
    # reads 4*8*1 floats = 128 B; writes 4*5*2 floats = 160 B
    assert (cost.bytes_read, cost.bytes_written) == (128, 160)


def test_dft_non_power_of_two_is_bluestein():
    # x [2, 6, 1], N = 6: P = 16, FFT(16) = 5*16*4 = 320
    # per transform: 2*320 + 6*6 (chirp on 6 samples) + 8*16 (spectrum product 6 + inverse scale 2) + 8*6 bins = 852
    # 2 transforms + the chirp's FFT once: 2*852 + 320 = 2024
    cost = dft(T([2, 6, 1]), T([2, 6, 2]), axis=1)
    assert cost.flops == 2024
    assert (cost.bytes_read, cost.bytes_written) == (2 * 6 * 4, 2 * 6 * 2 * 4)


def test_dft_bluestein_onesided_writes_fewer_bins():
    # bins = 6 // 2 + 1 = 4: per transform 640 + 36 + 128 + 8*4 = 836; 2*836 + 320 = 1992
    cost = dft(T([2, 6, 1]), T([2, 4, 2]), axis=1, onesided=1)
    assert cost.flops == 1992
    assert cost.bytes_written == 2 * 4 * 2 * 4


def test_dft_length_pads_to_a_power_of_two():
    # dft_length = 8 > 6: the 6 samples are zero-padded to an 8-point FFT, 120 per transform, 2 transforms
    cost = dft(T([2, 6, 1]), T([2, 8, 2]), [T([], INT64)], constants={1: 8}, axis=1)
    assert cost.flops == 240
    # reads the 6 samples of each transform (2*6*4 = 48 B) and the int64 scalar (8 B); writes 2*8*2 floats
    assert (cost.bytes_read, cost.bytes_written) == (56, 128)


def test_dft_length_truncates_and_reads_only_the_samples_used():
    # dft_length = 4 < 6: FFT(4) = 5*4*2 = 40 per transform; only the first 4 samples are read
    cost = dft(T([2, 6, 1]), T([2, 4, 2]), [T([], INT64)], constants={1: 4}, axis=1)
    assert cost.flops == 80
    assert (cost.bytes_read, cost.bytes_written) == (2 * 4 * 4 + 8, 2 * 4 * 2 * 4)


def test_dft_length_from_the_output_when_not_constant():
    # dft_length is a runtime input; the two-sided output [2, 8, 2] says N = 8: 2 * 120
    cost = dft(T([2, 6, 1]), T([2, 8, 2]), [T([], INT64)], axis=1)
    assert cost.flops == 240


def test_dft_length_ambiguous_for_a_onesided_output():
    # 5 one-sided bins come from N = 8 (an FFT) or N = 9 (Bluestein): they cost differently
    with pytest.raises(UnknownShape, match="dft_length"):
        dft(T([2, 6, 1]), T([2, 5, 2]), [T([], INT64)], axis=1, onesided=1)


def test_dft_axis_input_opset20():
    # x [3, 4, 8, 2], axis input -2 -> axis 2: 3*4 = 12 transforms of N = 8, 120 each
    x = T([3, 4, 8, 2])
    cost = dft(x, T([3, 4, 8, 2]), [None, T([], INT64)], constants={2: -2})
    assert cost.flops == 12 * 120 == 1440
    # x is 3*4*8*2 floats = 768 B, plus the int64 axis scalar
    assert cost.bytes_read == 768 + 8
    # axis 1: 3*8 = 24 transforms of N = 4, FFT(4) = 40 each
    assert dft(x, T([3, 4, 8, 2]), [None, T([], INT64)], constants={2: 1}).flops == 24 * 40 == 960


def test_dft_default_axis_is_ambiguous_between_opsets_on_rank_4():
    # no axis attribute or input: opset 17 means axis 1 (24 transforms of 4), opset 20 axis 2 (12 of 8)
    with pytest.raises(UnknownShape, match="axis"):
        dft(T([3, 4, 8, 2]), T([3, 4, 8, 2]))


def test_dft_default_axis_resolved_by_the_output_shape():
    # dft_length = 16: output [3, 4, 16, 2] can only come from axis 2: 12 transforms, FFT(16) = 5*16*4 = 320
    cost = dft(T([3, 4, 8, 2]), T([3, 4, 16, 2]), [T([], INT64)], constants={1: 16})
    assert cost.flops == 12 * 320 == 3840


def test_dft_default_axis_on_rank_3_needs_no_opset():
    # rank 3: opset 17's axis 1 and opset 20's axis -2 are the same axis
    assert dft(T([4, 8, 2]), T([4, 8, 2])).flops == 480


def test_irfft():
    # x [2, 5, 2] one-sided complex, onesided=1 inverse=1: N = 2*(5-1) = 8, an FFT with scaling: 120 + 16 = 136 each
    cost = dft(T([2, 5, 2]), T([2, 8, 1]), axis=1, onesided=1, inverse=1)
    assert cost.flops == 2 * 136 == 272
    # reads the 5 complex bins of each transform (2*5*2 floats = 80 B); writes 2*8 real floats = 64 B
    assert (cost.bytes_read, cost.bytes_written) == (80, 64)


def test_dft_output_shape_computed_when_unknown():
    # RFFT of [4, 8, 1]: output [4, 5, 2] = 160 B even without shape inference
    assert dft(T([4, 8, 1]), T(None), axis=1, onesided=1).bytes_written == 160


def test_dft_unknown_input_shape_raises():
    with pytest.raises(UnknownShape):
        dft(T(None), T([4, 8, 2]), axis=1)


# ---------------------------------------------------------------------------------------------------------
# STFT


def stft(signal, y, inputs, constants=None, **attrs):
    return cost_of(make_node("STFT", [signal, *inputs], [y], constants=constants, **attrs))


def test_stft_with_window():
    # signal [2, 64, 1], frame_step 16, window of 16 (so frame_length 16), onesided (default): 16 // 2 + 1 = 9 bins
    # frames = (64 - 16) // 16 + 1 = 4; 2*4 = 8 FFTs of 16 at 5*16*4 = 320, plus the window multiply 8*16 = 128
    cost = stft(T([2, 64, 1]), T([2, 4, 9, 2]), [T([], INT64), W([16])], constants={1: 16})
    assert cost.flops == 8 * 320 + 128 == 2688
    assert cost.macs == 0
    # signal 2*64 floats = 512 B (all inside frames), step 8 B, window 64 B; output 2*4*9*2 floats = 576 B
    assert (cost.bytes_read, cost.bytes_written) == (512 + 8 + 64, 576)
    assert (cost.params, cost.kernels) == (16, 1)


def test_stft_complex_bluestein_without_window():
    # signal [1, 40, 2], step 8, frame_length 12, onesided=0: frames = (40 - 12) // 8 + 1 = 4, bins = 12
    # N = 12: P = 32, FFT(32) = 5*32*5 = 800; per frame 1600 + 6*12 + 8*32 + 8*12 = 2024; 4*2024 + 800 = 8896
    cost = stft(
        T([1, 40, 2]), T([1, 4, 12, 2]), [T([], INT64), None, T([], INT64)], constants={1: 8, 3: 12}, onesided=0
    )
    assert cost.flops == 8896
    # frames cover samples 0 .. 3*8 + 12 = 36: 36 complex samples = 288 B, plus two int64 scalars; out 96 floats
    assert (cost.bytes_read, cost.bytes_written) == (288 + 16, 384)


def test_stft_window_on_a_complex_signal_is_two_flops_per_sample():
    # as above with a window of 12: + 4 frames * 12 samples * 2 (real and imaginary parts scaled) = 96
    cost = stft(
        T([1, 40, 2]), T([1, 4, 12, 2]), [T([], INT64), W([12]), T([], INT64)], constants={1: 8, 3: 12}, onesided=0
    )
    assert cost.flops == 8896 + 96
    assert cost.bytes_read == 288 + 16 + 12 * 4
    assert cost.params == 12


def test_stft_step_longer_than_frame_skips_samples():
    # signal [1, 40, 1], step 16, frame_length 8: frames = (40 - 8) // 16 + 1 = 3, at 0, 16, 32: 3 FFTs of 8 = 360
    cost = stft(T([1, 40, 1]), T([1, 3, 5, 2]), [T([], INT64), None, T([], INT64)], constants={1: 16, 3: 8})
    assert cost.flops == 3 * 120
    # 3 frames of 8 samples = 24 floats = 96 B read (not 40), plus two int64 scalars; output 1*3*5*2 floats
    assert (cost.bytes_read, cost.bytes_written) == (96 + 16, 120)


def test_stft_frame_length_from_output_and_frame_count():
    # frame_length a runtime input; 9 one-sided bins mean 16 or 17, and step 16 gives (64-16)//16+1 = 4 frames for
    # 16 but (64-17)//16+1 = 3 for 17: the output's 4 frames pick 16, 4 FFTs of 320
    cost = stft(T([1, 64, 1]), T([1, 4, 9, 2]), [T([], INT64), None, T([], INT64)], constants={1: 16})
    assert cost.flops == 4 * 320


def test_stft_onesided_default_wins_over_a_wrong_inferred_shape():
    # onnx's shape inference reads an absent onesided as 0 and infers [1, 15, 16, 2]; the op's default is 1, so the
    # kernel writes 16 // 2 + 1 = 9 bins: 1*15*9*2 floats = 1080 B. frames = (128 - 16) // 8 + 1 = 15 FFTs of 320
    cost = stft(T([1, 128, 1]), T([1, 15, 16, 2]), [T([], INT64), None, T([], INT64)], constants={1: 8, 3: 16})
    assert (cost.flops, cost.bytes_written) == (15 * 320, 1080)


def test_stft_ambiguous_frame_length_raises():
    # neither frame_step nor frame_length is a constant: 16 and 17 both fit the output shape
    with pytest.raises(UnknownShape, match="frame_length"):
        stft(T([1, 128, 1]), T([1, 15, 9, 2]), [T([], INT64), None, T([], INT64)])


# ---------------------------------------------------------------------------------------------------------
# Windows and MelWeightMatrix


@pytest.mark.parametrize("op, per_sample", [("HannWindow", 4), ("HammingWindow", 4), ("BlackmanWindow", 8)])
def test_windows(op, per_sample):
    # 10 samples of a0 - a1 cos(w n) (+ a2 cos(2 w n)): 4 FLOPs (w*n, cos, mul, sub), Blackman 4 more
    cost = cost_of(make_node(op, [T([], INT64)], [T([10])]))
    assert cost.flops == 10 * per_sample
    # reads the int64 size (8 B), writes 10 floats
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (8, 40, 0, 1)


def test_window_periodic_flag_does_not_change_the_count():
    periodic = cost_of(make_node("HannWindow", [T([], INT32)], [T([10])], periodic=1))
    symmetric = cost_of(make_node("HannWindow", [T([], INT32)], [T([10])], periodic=0))
    assert periodic == symmetric
    assert periodic.bytes_read == 4  # int32 size


def test_window_size_from_constant_and_output_datatype():
    # output unknown: size 10 from the constant, written as double (output_datatype 11): 10*8 = 80 B
    cost = cost_of(make_node("HammingWindow", [T([], INT64)], [T(None, 0)], constants={0: 10}, output_datatype=DOUBLE))
    assert (cost.flops, cost.bytes_written) == (40, 80)


def test_window_unknown_size_raises():
    with pytest.raises(UnknownShape):
        cost_of(make_node("HannWindow", [T([], INT64)], [T(None)]))


def mel_inputs():
    return [T([], INT64), T([], INT64), T([], INT64), T([]), T([])]


def test_mel_weight_matrix():
    # 8 mel bins, dft_length 16: [16 // 2 + 1, 8] = [9, 8] = 72 elements, 2 FLOPs each (subtract, divide)
    cost = cost_of(make_node("MelWeightMatrix", mel_inputs(), [T([9, 8])]))
    assert cost.flops == 144
    # reads 3 int64 + 2 float scalars = 24 + 8 = 32 B; writes 72 floats = 288 B
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (32, 288, 0, 1)


def test_mel_weight_matrix_shape_from_constants():
    node = make_node("MelWeightMatrix", mel_inputs(), [T(None)], constants={0: 8, 1: 16})
    assert (cost_of(node).flops, cost_of(node).bytes_written) == (144, 288)
