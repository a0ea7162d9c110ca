"""The memory calibration's synthetic graphs (their weights and closed-form activation peak), its cache, and one
real calibration on this host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnxroof.devices import Sourced
from onnxroof.load import load_graph
from onnxroof.ort import memory_calibration
from onnxroof.ort.memory_calibration import (
    CHAIN_CHANNELS,
    CHAIN_SIDE,
    LARGE_FC_LAYERS,
    LARGE_FC_WIDTH,
    chain_model,
    conv_model,
    fc_model,
    host_memory_factors,
    memory_factors_path,
)
from onnxroof.predict.memory import estimate_memory
from onnxroof.predict.process_memory import LARGE_WEIGHT_BYTES, SessionMemoryFactors, weights_by_kind


def test_the_chains_live_activation_peak_is_two_activations_with_the_input_or_without() -> None:
    one = 4 * CHAIN_CHANNELS * CHAIN_SIDE * CHAIN_SIDE
    estimate = estimate_memory(load_graph(chain_model()))
    assert estimate.peak_activation_bytes == 2 * one
    assert estimate.peak_allocated_bytes == 2 * one


@pytest.mark.parametrize(
    ("model", "kind", "nbytes"),
    [
        (conv_model(), "conv", 6 * 512 * 512 * 9 * 4),
        (fc_model("Gemm"), "gemm", 4 * 2048 * 2048 * 4),
        (fc_model("MatMul"), "matmul", 4 * 2048 * 2048 * 4),
        (fc_model("Gemm", LARGE_FC_WIDTH, LARGE_FC_LAYERS), "large", 2 * 4096 * 4096 * 4),
    ],
)
def test_each_weight_model_holds_one_kind_of_weight(model: object, kind: str, nbytes: int) -> None:
    kinds = weights_by_kind(load_graph(model))  # type: ignore[arg-type]
    assert kinds[kind] == nbytes
    assert sum(kinds.values()) == nbytes


def test_the_small_weights_lie_below_the_large_size_and_the_large_ones_above() -> None:
    assert 2048 * 2048 * 4 < LARGE_WEIGHT_BYTES < 4096 * 4096 * 4
    assert LARGE_WEIGHT_BYTES > 512 * 512 * 9 * 4


def test_fc_model_refuses_another_op() -> None:
    with pytest.raises(ValueError, match="Gemm or MatMul"):
        fc_model("Conv")


def _fake(value: float) -> SessionMemoryFactors:
    s = Sourced(value, "fake")
    return SessionMemoryFactors(constant=s, conv=s, gemm=s, matmul=s, large=s, activation=s)


def test_factors_are_cached_beside_the_host_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path))
    calls: list[int] = []

    def calibrate(threads: int = 1, progress: object = None) -> SessionMemoryFactors:
        calls.append(threads)
        return _fake(2.0)

    monkeypatch.setattr(memory_calibration, "calibrate_memory", calibrate)
    path = memory_factors_path(1)
    assert path.parent == tmp_path and path.name.endswith("-cpu-t1-memory.json")
    assert host_memory_factors() == _fake(2.0)
    assert json.loads(path.read_text())["conv"] == {"value": 2.0, "source": "fake"}
    assert host_memory_factors() == _fake(2.0)
    assert calls == [1]  # the second call read the cache
    path.write_text("{}")
    assert host_memory_factors() == _fake(2.0)  # an unreadable cache is calibrated again
    assert host_memory_factors(recalibrate=True) == _fake(2.0)
    assert calls == [1, 1, 1]


@pytest.mark.ort
@pytest.mark.calibrate
def test_a_real_calibration_gives_finite_factors_with_sources() -> None:
    factors = memory_calibration.calibrate_memory()
    data = factors.to_dict()
    assert set(data) == {"constant", "conv", "gemm", "matmul", "large", "activation"}
    for name, entry in data.items():
        assert entry["source"].startswith("calibrated: "), name
        assert entry["value"] >= 0
    # A session holds at least the weights it was given (resident-set noise is far below 56-67 MB of weights).
    assert factors.conv.value >= 0.9 and factors.gemm.value >= 0.9 and factors.matmul.value >= 0.9
    # A large weight's stored copy leaves the process once prepacked: held about once.
    assert 0.8 <= factors.large.value <= 1.3
    assert factors.constant.value > 0
