"""The calibration's chains keep their values normal floats however long they run: a value in the subnormal range
takes many times longer per operation, and a chain that drifts there times the slow path instead of the kernel."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from onnxroof.ort.calibrate import chains, graphs


def _run(built: graphs.Built) -> np.ndarray:
    model, feeds = built
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feeds)[0])


def _normal(values: np.ndarray) -> bool:
    """Whether every value is a normal float: finite, and no smaller in magnitude than the smallest normal one."""
    smallest = np.finfo(np.float32).tiny
    return bool(np.all(np.isfinite(values)) and np.all(np.abs(values) >= smallest))


def test_a_long_per_channel_mul_chain_neither_underflows_nor_overflows():
    # 400 products by the same per-channel scale: any scale but +-1 takes a channel's values below 1.2e-38 or
    # above 3.4e38 within that many nodes (0.8 ** 400 ~ 1e-39, 1.25 ** 400 ~ 1e39).
    out = _run(chains.per_channel_chain(graphs.Rand(0), 400, "Mul", (1, 16, 4, 4)))
    assert _normal(out)


@pytest.mark.parametrize(
    ("op", "alpha"),
    [("QuickGelu", 1.0), ("QuickGelu", 1.702), ("Gelu", None), ("FastGelu", None)],
)
def test_a_long_chain_of_an_activation_that_halves_small_inputs_stays_normal(op: str, alpha: float | None):
    # x * sigmoid(x) keeps 98% of an input of 4, 62% of one of 0.5 (0.5 * sigmoid(0.5) = 0.31) and half of one near
    # 0, so from inputs of 4 the values fall below 1.2e-38 within 400 nodes; from 12 up each node keeps all but 6e-6
    # of them.
    out = _run(chains.activation_chain(graphs.Rand(0), 400, op, (1, 64), "com.microsoft", alpha))
    assert _normal(out)
