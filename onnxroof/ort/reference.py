"""A reference block, timed the same way when a host is calibrated and when a prediction is validated.

A calibrated profile is only as good as the machine's speed staying what it was. Shared and virtual machines
drift: a neighbour's load, a host that throttles its guests. Timing one fixed block of typical kernels at both
moments gives the machine's speed relative to its calibration, so that a validation compares the measurement
with the prediction at the speed the machine ran at, and says "the machine is 40% slower than when
calibrated" instead of blaming the model's prediction.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from onnxroof.ort.measure import fast_estimate, time_runs

DRIFT_BOUND = 0.10  # a speed more than this far from 1.0 is reported
# A timed stretch of a shared machine runs in one of its phases: the reference's typical run is read as a model's
# measured time is defined, the median of a round of runs in the quietest of a few rounds, each round one of this
# many consecutive stretches of its samples.
QUIET_STRETCHES = 3
# The block's width and input: the size of a ResNet's first stage (64 channels at 56 x 56), small enough to time
# between a measurement's samples without stretching it.
CHANNELS = 64
REFERENCE_INPUT = [1, 32, 56, 56]  # NCHW


def reference_model() -> ModelProto:
    """A small convolutional block, the kernel every calibration and validation times: 3x3 conv, ReLU, depthwise
    3x3, 1x1 conv, residual Add, 2x2 max pool, 3x3 conv, ReLU, global average pool and a 1000-way Gemm.

    It mixes what models spend their time in (dense, depthwise and pointwise convolutions, elementwise, pooling, a
    matrix-vector product) because a shared machine's phases slow those unequally: a lone kernel such as one MatMul
    follows only its own kind of work, and scaling a whole model's prediction by it would misjudge the machine."""
    c = CHANNELS
    rng = np.random.default_rng(0)
    shapes = {
        "w1": (c, 32, 3, 3),
        "b1": (c,),
        "w2": (c, 1, 3, 3),
        "b2": (c,),
        "w3": (c, c, 1, 1),
        "b3": (c,),
        "w4": (2 * c, c, 3, 3),
        "b4": (2 * c,),
        "w5": (1000, 2 * c),
        "b5": (1000,),
    }
    weights = [numpy_helper.from_array((0.1 * rng.standard_normal(s)).astype(np.float32), n) for n, s in shapes.items()]
    pads = [1, 1, 1, 1]  # a 3x3 convolution with these keeps its input's height and width
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=pads),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=c, pads=pads),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["c3", "r1"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w4", "b4"], ["c4"], pads=pads),
        helper.make_node("Relu", ["c4"], ["r4"]),
        helper.make_node("GlobalAveragePool", ["r4"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w5", "b5"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "reference",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, REFERENCE_INPUT)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


class ReferenceSampler:
    """The reference block, timed between the samples of a measurement: one untimed run, then timed batches of
    back-to-back runs each time it is called; every calibration pass times it through this class too, and the
    calibration's factor network (``built``: another graph and its feeds) the same way.

    A shared machine runs in phases of seconds to minutes (a neighbour's load on the host), and a whole model's
    time follows them: timed between the model's own samples, the reference reads the machine in the same
    moments, where a separate window of its own would catch another phase (see reference_model for why the
    block mixes kernels)."""

    def __init__(
        self,
        threads: int,
        provider: str = "cpu",
        *,
        clock: Callable[[], float] = time.perf_counter,
        built: tuple[ModelProto, dict[str, np.ndarray]] | None = None,
    ) -> None:
        from onnxroof.ort.session_spec import SessionSpec
        from onnxroof.ort.sessions import make_session

        if built is None:
            x = np.random.default_rng(1).standard_normal(REFERENCE_INPUT).astype(np.float32)
            built = reference_model(), {"x": x}
        model, feeds = built
        self.model = model  # the graph it times
        # Parked between runs, as the calibration's reference session is: both moments read the kernel alike.
        session, _ = make_session(model, SessionSpec(provider, threads), park_when_idle=True)
        self._run = lambda: session.run(None, feeds)
        self._clock = clock
        self.batch = time_runs(
            self._run, warmup=3, repeat=1, batch=None, timeout_s=60.0, progress=None, clock=clock
        ).runs_per_sample
        self.samples: list[float] = []

    def sample(self, reps: int = 1) -> None:
        """Time ``reps`` more batches of the reference after one untimed run (seconds per run go to ``samples``)."""
        self.samples += time_runs(
            self._run, warmup=1, repeat=reps, batch=self.batch, timeout_s=60.0, progress=None, clock=self._clock
        ).samples

    def time_s(self) -> float | None:
        """Seconds per run of the reference over the samples taken so far, read as every onnxroof timing is (their
        fast estimate); None before the first."""
        return fast_estimate(self.samples) if self.samples else None

    def typical_s(self, stretches: int = QUIET_STRETCHES) -> float | None:
        """Seconds per run of the reference as a user's timing loop reports it, in the quietest of ``stretches``
        consecutive stretches of the samples taken so far: each stretch's median, the lowest of them (None before
        the first sample). Unlike the fast estimate, it carries the run-to-run jitter this machine always has;
        unlike the median of every sample, not a phase in which a neighbour slowed the whole machine down."""
        if not self.samples:
            return None
        size = -(-len(self.samples) // max(stretches, 1))  # ceiling division: at most ``stretches`` stretches
        return min(statistics.median(self.samples[i : i + size]) for i in range(0, len(self.samples), size))

    def speed(self, calibrated_s: float) -> float | None:
        """The machine's speed relative to its calibration: the block's time then (``calibrated_s``) over its time
        in the samples taken so far (1.0: as calibrated; None before the first sample)."""
        now = self.time_s()
        return calibrated_s / now if now else None


def drift_warning(speed: float, threads: int) -> str | None:
    """A warning when the machine's speed relative to its calibration (``speed``, 1.0 = as calibrated) is off by
    more than DRIFT_BOUND; None otherwise."""
    if abs(speed - 1.0) <= DRIFT_BOUND:
        return None
    how = "slower" if speed < 1.0 else "faster"
    return (
        f"this machine runs the reference block {abs(1.0 - speed):.0%} {how} than when it was calibrated "
        f"({speed:.2f}x): the predictions compared with the measurement are scaled to this speed; recalibrate "
        f"(onnxroof calibrate --threads {threads}) for a profile of the machine as it runs now"
    )
