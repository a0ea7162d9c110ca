"""A reference kernel, timed the same way when a host is calibrated and when a prediction is validated.

A calibrated profile is only as good as the machine's speed staying what it was. Shared and virtual machines
drift: a neighbour's load, a host that throttles its guests. Timing one fixed kernel at both moments tells
whether the machine runs at the speed it was calibrated at, so that a validation can say "the machine is 40%
slower than when calibrated" instead of blaming the model's prediction.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxroof.measure import fast_estimate, time_runs

REFERENCE_N = 256  # an n x n x n fp32 MatMul: compute bound at any thread count, under a millisecond a run
REFERENCE_SPREAD_S = 1.0  # samples are spread over this long, so that a short disturbance spares some of them
REFERENCE_SAMPLES = 16
DRIFT_BOUND = 0.10  # a speed more than this far from 1.0 is reported


def reference_model(n: int = REFERENCE_N):
    """Y = X @ W with X and W n x n fp32 (W a weight), the kernel every calibration and validation times."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "reference",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def reference_flops_s(samples: Sequence[float]) -> float:
    """FLOP/s of the reference MatMul from per-run seconds, read as every timing here is (their fast estimate)."""
    return 2.0 * REFERENCE_N**3 / fast_estimate(samples)


def reference_rate(
    threads: int,
    provider: str = "cpu",
    *,
    spread_s: float = REFERENCE_SPREAD_S,
    samples: int = REFERENCE_SAMPLES,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """FLOP/s of the reference MatMul on this machine now: the fast estimate of ``samples`` batches of runs
    spread over ``spread_s`` seconds, at ``threads`` intra-op threads."""
    from onnxroof.runtime import make_session

    n = REFERENCE_N
    # Parked between runs, as the calibration's reference session is: both moments read the kernel alike.
    session, _ = make_session(reference_model(n), provider, threads, "all", park_when_idle=True)
    feeds = {"x": np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)}
    timing = time_runs(
        lambda: session.run(None, feeds), warmup=3, repeat=samples, batch=None, timeout_s=spread_s + 60.0,
        progress=None, spread_s=spread_s, clock=clock,
    )
    return reference_flops_s(timing.samples)


def drift_warning(speed: float, threads: int) -> str | None:
    """A warning when the machine's speed relative to its calibration (``speed``, 1.0 = as calibrated) is off by
    more than DRIFT_BOUND; None otherwise."""
    if abs(speed - 1.0) <= DRIFT_BOUND:
        return None
    how = "slower" if speed < 1.0 else "faster"
    return (
        f"this machine runs the reference MatMul {abs(1.0 - speed):.0%} {how} than when it was calibrated "
        f"({speed:.2f}x): predictions assume the calibrated speed; recalibrate (onnxroof calibrate --threads "
        f"{threads}) or validate when the machine is as quiet as it was"
    )
