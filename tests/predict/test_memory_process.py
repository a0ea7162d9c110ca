"""Weights by the kind of op reading them and the process peak from memory factors, on graphs small enough to
work out by hand (fp32: 4 B per element)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.devices import Sourced
from onnxroof.ir import Graph
from onnxroof.predict.memory import estimate_memory
from onnxroof.predict.process_memory import (
    LARGE_WEIGHT_BYTES,
    WEIGHT_KINDS,
    SessionMemoryFactors,
    process_peak_bytes,
    weights_by_kind,
)
from tests.helpers import loaded_graph


def _vi(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _w(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(shape, dtype=np.float32), name)


def _mixed() -> Graph:
    """x[1,3,4,4] -Conv(cw[2,3,1,1], cb[2])-> c[1,2,4,4] -Flatten-> f[1,32] -Gemm(gw[32,8] via a Reshape of
    gr[256])-> g[1,8] -MatMul(mw[8,4])-> m[1,4] -Add(aw[4])-> y[1,4]."""
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv"),
        helper.make_node("Flatten", ["c"], ["f"], name="flat"),
        helper.make_node("Reshape", ["gr", "gshape"], ["gw"], name="view"),
        helper.make_node("Gemm", ["f", "gw"], ["g"], name="gemm"),
        helper.make_node("MatMul", ["g", "mw"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "aw"], ["y"], name="add"),
    ]
    inits = [
        _w("cw", (2, 3, 1, 1)),
        _w("cb", (2,)),
        _w("gr", (256,)),
        numpy_helper.from_array(np.array([32, 8], dtype=np.int64), "gshape"),
        _w("mw", (8, 4)),
        _w("aw", (4,)),
    ]
    return loaded_graph(nodes, [_vi("x", [1, 3, 4, 4])], [_vi("y", [1, 4])], inits)


def _factors(
    constant: float, conv: float, gemm: float, matmul: float, activation: float, large: float = 1.0
) -> SessionMemoryFactors:
    return SessionMemoryFactors(
        constant=Sourced(constant, "test"),
        conv=Sourced(conv, "test"),
        gemm=Sourced(gemm, "test"),
        matmul=Sourced(matmul, "test"),
        large=Sourced(large, "test"),
        activation=Sourced(activation, "test"),
    )


def test_weights_by_kind_follows_the_reading_op_and_sums_to_the_weights() -> None:
    graph = _mixed()
    kinds = weights_by_kind(graph)
    assert tuple(kinds) == WEIGHT_KINDS
    # conv: cw 6 + cb 2 elements; gemm: the 256 elements of gr, read through its Reshape; matmul: mw 32; other:
    # aw 4 elements (a loader that folds the Reshape leaves gw, of the same 256 elements, to Gemm: also gemm).
    assert kinds == {"conv": 8 * 4, "gemm": 256 * 4, "matmul": 32 * 4, "large": 0, "other": 4 * 4}
    assert sum(kinds.values()) == estimate_memory(graph).weights_bytes


def test_weights_by_kind_at_a_what_if_precision_halves_fp32() -> None:
    kinds = weights_by_kind(_mixed(), precision="fp16")
    assert kinds == {"conv": 8 * 2, "gemm": 256 * 2, "matmul": 32 * 2, "large": 0, "other": 4 * 2}


def test_a_weight_shared_by_two_kinds_counts_once_as_its_first_reader() -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        helper.make_node("Gemm", ["a", "w"], ["y"], name="gemm"),
    ]
    graph = loaded_graph(nodes, [_vi("x", [4, 4])], [_vi("y", [4, 4])], [_w("w", (4, 4))])
    assert weights_by_kind(graph) == {"conv": 0, "gemm": 0, "matmul": 64, "large": 0, "other": 0}


def test_a_weight_of_at_least_the_large_size_is_large_whatever_reads_it() -> None:
    # At a 128 B threshold: gr (1024 B, read by Gemm through a view) is large, and so is mw (exactly 128 B);
    # cw (24 B), cb (8 B) and aw (16 B) keep their readers' kinds.
    kinds = weights_by_kind(_mixed(), large_bytes=128)
    assert kinds == {"conv": 8 * 4, "gemm": 0, "matmul": 0, "large": 256 * 4 + 32 * 4, "other": 4 * 4}
    # At fp16 mw is 64 B, below the threshold again.
    kinds = weights_by_kind(_mixed(), precision="fp16", large_bytes=128)
    assert kinds == {"conv": 8 * 2, "gemm": 0, "matmul": 32 * 2, "large": 256 * 2, "other": 4 * 2}
    assert LARGE_WEIGHT_BYTES == 32 * 1024 * 1024


def test_large_weights_take_the_large_factor() -> None:
    graph = _mixed()
    estimate = estimate_memory(graph)
    factors = _factors(1000.0, 3.0, 1.5, 2.0, 2.5, large=1.1)
    expected = 1000 + 3.0 * 32 + 1.1 * (1024 + 128) + 1.0 * 16 + 2.5 * 160
    assert process_peak_bytes(estimate, weights_by_kind(graph, large_bytes=128), factors) == round(expected)


def test_process_peak_is_constant_plus_weights_by_factor_plus_activations_by_factor() -> None:
    graph = _mixed()
    estimate = estimate_memory(graph)
    # Peak of live activations: at the conv step x (48 floats) and c (32 floats) are live: 320 B; no later step
    # holds more (f is c's view; g 8, m 4, y 4 floats). Without the input x, the peak is at the Gemm step: c (its
    # view f) and g, 40 floats: 160 B.
    assert estimate.peak_activation_bytes == 320
    assert estimate.peak_allocated_bytes == 160
    factors = _factors(1000.0, 3.0, 1.5, 2.0, 2.5)
    expected = 1000 + 3.0 * 32 + 1.5 * 1024 + 2.0 * 128 + 1.0 * 16 + 2.5 * 160
    assert process_peak_bytes(estimate, weights_by_kind(graph), factors) == round(expected)


def test_unit_factors_and_no_constant_give_the_weights_and_the_allocated_peak() -> None:
    graph = _mixed()
    estimate = estimate_memory(graph)
    expected = estimate.weights_bytes + estimate.peak_allocated_bytes
    assert process_peak_bytes(estimate, weights_by_kind(graph), _factors(0, 1, 1, 1, 1)) == expected


def test_factors_round_trip_and_reject_what_is_not_a_factor() -> None:
    factors = _factors(9.5e6, 3.2, 1.1, 1.7, 2.0)
    assert SessionMemoryFactors.from_dict(factors.to_dict()) == factors
    data = factors.to_dict()
    data["conv"] = {"value": -1.0, "source": "x"}
    with pytest.raises(ValueError, match="conv"):
        SessionMemoryFactors.from_dict(data)
    data = factors.to_dict()
    data["gemm"] = {"value": 1.0, "source": " "}
    with pytest.raises(ValueError, match="source"):
        SessionMemoryFactors.from_dict(data)
    data = factors.to_dict()
    del data["large"]
    with pytest.raises(ValueError, match="large"):
        SessionMemoryFactors.from_dict(data)
    data = factors.to_dict()
    del data["activation"]
    with pytest.raises(ValueError, match="activation"):
        SessionMemoryFactors.from_dict(data)


def test_an_unknown_weight_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        process_peak_bytes(estimate_memory(_mixed()), {"lstm": 4}, _factors(0, 1, 1, 1, 1))
