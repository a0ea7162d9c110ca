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


class ReferenceSampler:
    """The reference kernel, timed between the samples of a measurement: one untimed run, then timed batches of
    back-to-back runs each time it is called; every calibration pass times it through this class too.

    A shared machine runs in phases of seconds to minutes (a neighbour's load on the host), and a whole model's
    time follows them: timed between the model's own samples, the reference reads the machine in the same
    moments, where a separate window of its own would catch another phase (here a model's and the interleaved
    reference's fast estimates over 15 s windows correlated 0.89-0.96 across four minutes)."""

    def __init__(self, threads: int, provider: str = "cpu", *, clock: Callable[[], float] = time.perf_counter) -> None:
        from onnxroof.runtime import make_session

        # Parked between runs, as the calibration's reference session is: both moments read the kernel alike.
        session, _ = make_session(reference_model(), provider, threads, "all", park_when_idle=True)
        feeds = {"x": np.random.default_rng(1).standard_normal((REFERENCE_N, REFERENCE_N)).astype(np.float32)}
        self._run = lambda: session.run(None, feeds)
        self._clock = clock
        self.batch = time_runs(self._run, warmup=3, repeat=1, batch=None, timeout_s=60.0, progress=None,
                               clock=clock).runs_per_sample
        self.samples: list[float] = []

    def sample(self, reps: int = 1) -> None:
        """Time ``reps`` more batches of the reference after one untimed run (seconds per run go to ``samples``)."""
        self.samples += time_runs(self._run, warmup=1, repeat=reps, batch=self.batch, timeout_s=60.0, progress=None,
                                  clock=self._clock).samples

    def flops_s(self) -> float | None:
        """The reference's FLOP/s over the samples taken so far (None before the first)."""
        return reference_flops_s(self.samples) if self.samples else None


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
