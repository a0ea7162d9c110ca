"""The GPU's roofline calibration: its rates from a chain's time, its chains' graphs, the pipeline end to end (run on
the CPU provider at tiny sizes, as the CUDA provider runs it on a GPU), and the refusal where there is no GPU."""

from __future__ import annotations

import numpy as np
import onnxruntime as rt
import pytest
from onnx import TensorProto

from onnxroof.api import analyze
from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.ort import calibrate
from onnxroof.ort.calibrate import chains
from onnxroof.ort.calibrate.accelerator import TINY, calibrate_roofline, product_rate, stream_rate
from onnxroof.ort.calibrate.graphs import Rand
from onnxroof.ort.calibrate.host import Gpu, parse_nvidia_smi
from onnxroof.ort.calibrate.suite import SUITE
from tests.helpers import cuda_runs_here


def _run(built: tuple) -> np.ndarray:
    model, feeds = built
    sess = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


# ------------------------------------------------------------------------------------------------ rates


def test_stream_rate_counts_a_read_and_a_write_of_every_element():
    # A Neg over 2**26 fp32 elements reads 2**28 bytes and writes 2**28: 2**29 bytes in 1 ms is 5.36870912e11 B/s.
    assert stream_rate(1 << 26, 4, 1e-3) == pytest.approx(2**29 / 1e-3)
    # fp16 elements move half the bytes: 2 * 1000 * 2 = 4000 bytes in 2 us, 2e9 B/s.
    assert stream_rate(1000, 2, 2e-6) == pytest.approx(2e9)


def test_product_rate_counts_two_flops_per_multiply_add():
    # 4096 x 4096 outputs of 4096 multiply-adds: 2 * 4096**3 = 137,438,953,472 FLOPs; in 1 ms, 1.374e14 FLOP/s.
    assert product_rate(4096, 1e-3) == pytest.approx(137_438_953_472 / 1e-3)
    assert product_rate(2, 1.0) == 16.0  # 2 x 2 outputs of 2 multiply-adds = 8 multiply-adds


# ------------------------------------------------------------------------------------------------ graphs


def test_hadamard_is_orthogonal_and_its_own_inverse():
    h = chains.hadamard(8)
    assert set(np.unique(np.abs(h))) == {1 / np.sqrt(8)}  # every entry +-1/sqrt(8)
    np.testing.assert_allclose(h @ h, np.eye(8), atol=1e-12)  # symmetric and orthogonal: H H = I
    with pytest.raises(ValueError, match="power of two"):
        chains.hadamard(12)


@pytest.mark.ort
@pytest.mark.parametrize("n", [1, 4])
def test_matmul_chain_multiplies_by_the_hadamard_matrix_n_times(n: int):
    built = chains.matmul_chain(Rand(0), n, 32)
    model, feeds = built
    assert [node.op_type for node in model.graph.node] == ["Expand"] + ["MatMul"] * n + ["Slice"]
    x = feeds["x"].astype(np.float64)  # one row, expanded to all 32
    # H H = I: an even chain gives its input row back, an odd one the row times H.
    expected = x if n % 2 == 0 else x @ chains.hadamard(32)
    np.testing.assert_allclose(_run(built), expected[:, :16], rtol=1e-5, atol=1e-6)


@pytest.mark.ort
def test_matmul_chain_in_fp16_keeps_its_values_in_range():
    built = chains.matmul_chain(Rand(0), 6, 64, dtype=TensorProto.FLOAT16)
    x = built[1]["x"]
    assert x.dtype == np.float16
    # six products by H: H H = I three times over, the input row again (to fp16's 3 significant digits)
    np.testing.assert_allclose(_run(built).astype(np.float32), x[:, :16].astype(np.float32), rtol=1e-2, atol=1e-3)


@pytest.mark.ort
def test_stream_chain_negates_n_times_and_returns_16_elements():
    built = chains.stream_chain(Rand(0), 3, 1000)
    model, feeds = built
    assert [node.op_type for node in model.graph.node] == ["Expand"] + ["Neg"] * 3 + ["Slice"]
    # the one input element, expanded to 1000 and negated three times: its negation, 16 times
    np.testing.assert_array_equal(_run(built), np.full(16, -feeds["x"][0], np.float32))


# ------------------------------------------------------------------------------------------------ the device


def test_parse_nvidia_smi_reads_the_first_gpu_in_bytes():
    out = "NVIDIA H200, 143771\nNVIDIA H200, 143771\n"
    assert parse_nvidia_smi(out) == Gpu("NVIDIA H200", 143771 * 2**20)  # memory.total in MiB
    assert parse_nvidia_smi("NVIDIA A100-SXM4-80GB, 81920") == Gpu("NVIDIA A100-SXM4-80GB", 81920 * 2**20)
    assert parse_nvidia_smi("") is None
    assert parse_nvidia_smi("No devices were found") is None


@pytest.fixture(scope="module")
def roofline_run() -> tuple[Device, list[tuple[int, int]]]:
    calls: list[tuple[int, int]] = []
    return calibrate_roofline("cpu", 1, 30.0, lambda done, total: calls.append((done, total)), TINY), calls


@pytest.mark.ort
@pytest.mark.calibrate
def test_roofline_calibration_end_to_end_on_the_cpu_provider(roofline_run: tuple[Device, list[tuple[int, int]]]):
    device, calls = roofline_run
    assert device.kind == "cpu" and device.overlap == "max" and device.engine == "onnxruntime"
    assert device.peak_flops["fp32"].value > 0 and "64x64x64 fp32 MatMul" in device.peak_flops["fp32"].source
    assert device.memory_bandwidth.value > 0
    assert f"Neg over {TINY.stream_floats} floats" in device.memory_bandwidth.source
    assert 0 < device.launch_overhead.value < 1e-3 and device.run_overhead is not None
    assert device.caches == () and not device.ceilings  # a roofline: no cache levels, no op-class ceilings
    c = device.calibration
    assert c is not None and (c.provider, c.threads, c.suite) == ("cpu", 1, SUITE) and c.reference_time_s
    assert calls[-1][0] == calls[-1][1] and [d for d, _ in calls] == sorted(d for d, _ in calls)


@pytest.mark.ort
@pytest.mark.skipif(cuda_runs_here(), reason="a GPU is here: the CUDA provider calibrates rather than refuses")
def test_cuda_calibration_without_a_gpu_is_a_user_error(cli):
    with pytest.raises(UserError, match="cannot calibrate CUDAExecutionProvider"):
        calibrate.calibrate(provider="cuda", quick=True)
    result = cli("calibrate", "--provider", "cuda")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "cannot calibrate CUDAExecutionProvider" in result.stderr and "hint:" in result.stderr


@pytest.mark.ort
def test_a_roofline_profile_predicts_each_kernel_by_its_longest_term(
    roofline_run: tuple[Device, list[tuple[int, int]]], conv_bn_relu
):
    device, _ = roofline_run
    analysis = analyze(conv_bn_relu, device)
    assert analysis.graph == "onnxruntime-optimized" and analysis.nodes
    for node in analysis.nodes:
        p = node.prediction
        # overlap "max" and no ceiling: the longest of compute at the peak, memory at the bandwidth, and a launch
        assert p.predicted_time_s == pytest.approx(max(p.compute_time_s, p.memory_time_s, p.overhead_time_s))
        assert p.overhead_time_s == device.launch_overhead.value
