"""The roofline terms, bound and combination rule of paper 001, on devices with round numbers."""

from __future__ import annotations

import pytest

from onnxroof.costs import Cost
from onnxroof.devices import device_from_dict
from onnxroof.predict import roofline


def _device(overlap: str = "max"):
    """1 TFLOP/s fp32, 2 TFLOP/s fp16, 100 GB/s, 5 us per kernel: every expected value below is mental arithmetic."""
    return device_from_dict(
        "round",
        {
            "name": "Round numbers",
            "kind": "gpu",
            "overlap": overlap,
            "peak_flops": {
                "fp32": {"value": 1e12, "dense": True, "source": "test"},
                "fp16": {"value": 2e12, "dense": True, "source": "test"},
            },
            "memory_bandwidth": {"value": 100e9, "source": "test"},
            "launch_overhead": {"value": 5e-6, "source": "test"},
        },
    )


def test_compute_bound_kernel():
    # 1e9 FLOPs / 1e12 FLOP/s = 1 ms; 1e6 B / 1e11 B/s = 10 us; 1 kernel = 5 us.
    p = roofline.predict(Cost(flops=1e9, bytes_read=6e5, bytes_written=4e5, kernels=1), _device(), "fp32")
    assert p.compute_time_s == pytest.approx(1e-3)
    assert p.memory_time_s == pytest.approx(1e-5)
    assert p.overhead_time_s == pytest.approx(5e-6)
    assert p.predicted_time_s == pytest.approx(1e-3)
    assert p.bound == "compute"
    assert p.ridge_point == pytest.approx(10.0)  # 1e12 / 1e11


def test_memory_bound_kernel_and_attainable():
    # AI = 1e6 / 1e8 = 0.01 FLOP/B, below the ridge of 10: attainable = 0.01 * 1e11 = 1e9 FLOP/s.
    cost = Cost(flops=1e6, bytes_read=1e8, kernels=1)
    p = roofline.predict(cost, _device(), "fp32")
    assert p.bound == "memory"
    assert p.predicted_time_s == pytest.approx(1e-3)  # 1e8 / 1e11
    assert roofline.attainable_flops(cost.arithmetic_intensity, p.peak_flops_s, p.bandwidth_bytes_s) == pytest.approx(
        1e9
    )
    assert roofline.attainable_flops(1000.0, 1e12, 1e11) == 1e12  # far right of the ridge: the peak


def test_overhead_bound_and_serial_combination():
    # 32 tiny kernels: 32 * 5 us = 160 us of launch overhead, 1e3 FLOPs = 1 ns, 1e3 B = 10 ns.
    cost = Cost(flops=1e3, bytes_read=1e3, kernels=32)
    assert roofline.predict(cost, _device("max"), "fp32").predicted_time_s == pytest.approx(160e-6)
    assert roofline.predict(cost, _device("max"), "fp32").bound == "overhead"
    # serial: max(1 ns, 10 ns) + 160 us
    assert roofline.predict(cost, _device("serial"), "fp32").predicted_time_s == pytest.approx(160e-6 + 10e-9)


def test_precision_picks_its_peak():
    cost = Cost(flops=2e12, kernels=1)
    assert roofline.predict(cost, _device(), "fp16").compute_time_s == pytest.approx(1.0)  # 2e12 / 2e12
    assert roofline.predict(cost, _device(), "fp32").compute_time_s == pytest.approx(2.0)


def test_free_node_has_no_bound():
    p = roofline.predict(Cost(), _device(), "fp32")
    assert p.bound == "none" and p.predicted_time_s == 0


def test_totals_sum_terms_and_take_the_largest_sum_as_bound():
    d = _device()
    a = roofline.predict(Cost(flops=1e9, kernels=1), d, "fp32")  # 1 ms compute
    b = roofline.predict(Cost(bytes_read=3e8, kernels=1), d, "fp32")  # 3 ms memory
    t = roofline.total([a, b], d, "fp32")
    assert t.compute_time_s == pytest.approx(1e-3)
    assert t.memory_time_s == pytest.approx(3e-3)
    assert t.predicted_time_s == pytest.approx(4e-3)
    assert t.bound == "memory"


def test_totals_weight_each_prediction_by_the_nodes_it_stands_for():
    # Two nodes like a (1 ms compute each) and one like b (3 ms memory): compute 2 ms, memory 3 ms, 5 ms in all,
    # memory-bound; the same as passing a twice.
    d = _device()
    a = roofline.predict(Cost(flops=1e9, kernels=1), d, "fp32")
    b = roofline.predict(Cost(bytes_read=3e8, kernels=1), d, "fp32")
    t = roofline.total([a, b], d, "fp32", counts=[2, 1])
    assert t.compute_time_s == pytest.approx(2e-3)
    assert t.memory_time_s == pytest.approx(3e-3)
    assert t.predicted_time_s == pytest.approx(5e-3)
    assert t.bound == "memory"
    assert t.overhead_time_s == pytest.approx(roofline.total([a, a, b], d, "fp32").overhead_time_s)
