"""The calibration of a GPU through onnxruntime's CUDA provider: its roofline as paper 001 defines it, measured with
onnxruntime's own kernels. The fp32 and fp16 peaks are the rates of chains of large matrix products, the memory's
bandwidth that of chains of Neg over tensors far larger than any GPU's L2, the cost of a kernel that of chains of
Neg on 16 floats, and the cost of a run that of a one-node graph. Each is a chain timed by the wall clock at two
lengths (``jobs.Chain``): ``session.run`` returns once the device is done, and the difference of two chains' times
is what their extra kernels took on it. A chain's input and output are a few elements (``chains.stream_chain``,
``chains.matmul_chain``), so the copies between host and device are small and cancel in the difference.

The fp32 peak is the rate of fp32 products as the provider runs them (on tensor-core GPUs cuBLAS may compute them
in TF32 where onnxruntime lets it), the rate an fp32 model's products get.

The op-class ceilings of the CPU's calibration are not read here: they describe onnxruntime's CPU kernels (MLAS,
NCHWc). A GPU profile predicts each kernel by its roofline: the longest of its compute time, its memory time and
a launch (overlap "max": the GPU runs a kernel while the host launches the next).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from onnx import TensorProto

from onnxroof.devices import Calibration, Device, FrozenMap, Peak, Sourced
from onnxroof.errors import UserError
from onnxroof.ort import sessions
from onnxroof.ort.calibrate import chains
from onnxroof.ort.calibrate.graphs import FLOAT, Built, Rand
from onnxroof.ort.calibrate.host import cpu_model, host_key, nvidia_gpu, ort_version
from onnxroof.ort.calibrate.jobs import Chain, Flush, Job, Reference, Runner, time_passes
from onnxroof.ort.calibrate.suite import SUITE
from onnxroof.ort.measure import fast_estimate
from onnxroof.ort.session_spec import SessionSpec, provider_name
from onnxroof.predict.profiles import ONNXRUNTIME

__all__ = ["GPU", "TINY", "RooflineSuite", "calibrate_roofline", "product_rate", "stream_rate"]


@dataclass(frozen=True)
class RooflineSuite:
    """The chains of a roofline calibration: their sizes and lengths, and how many passes of how many runs."""

    launch_lengths: tuple[int, int]  # chains of Neg on 16 floats
    stream_floats: int  # the elements each Neg of the bandwidth chain reads and writes
    stream_lengths: tuple[int, int]
    matrix_size: int  # n of the n x n x n products (a power of two: chains.hadamard)
    matrix_lengths: tuple[int, int]
    passes: int
    reps: int


# 2**26 floats: a Neg reads and writes 256 MiB, several times the L2 of any GPU so far. 4096 x 4096 products:
# 137 GFLOP each, over a tenth of a millisecond even at a datacenter GPU's fp16 rate, where a launch takes
# microseconds.
GPU = RooflineSuite(
    launch_lengths=(16, 144),
    stream_floats=1 << 26,
    stream_lengths=(4, 36),
    matrix_size=4096,
    matrix_lengths=(2, 18),
    passes=8,
    reps=5,
)
# The same pipeline on sizes a CPU runs in a moment (tests).
TINY = RooflineSuite(
    launch_lengths=(4, 12),
    stream_floats=1 << 12,
    stream_lengths=(2, 6),
    matrix_size=64,
    matrix_lengths=(2, 6),
    passes=2,
    reps=2,
)


def stream_rate(floats: int, itemsize: int, seconds: float) -> float:
    """Bytes per second of a Neg over ``floats`` elements of ``itemsize`` bytes taking ``seconds``: it reads each
    element and writes it, ``2 * floats * itemsize`` bytes."""
    return 2.0 * floats * itemsize / seconds


def product_rate(n: int, seconds: float) -> float:
    """FLOP/s of an n x n by n x n product taking ``seconds``: n * n outputs of n multiply-adds, ``2 * n**3``."""
    return 2.0 * n**3 / seconds


@dataclass
class _Jobs:
    """The chains of one roofline calibration, and the reference block validation reads the machine's speed by."""

    launch: Chain
    single: Chain
    stream: Chain
    fp32: Chain
    fp16: Chain | None  # None where the provider has no fp16 MatMul
    reference: Reference


def calibrate_roofline(
    provider: str = "cuda",
    threads: int = 1,
    budget_s: float = 60.0,
    progress: Callable[[int, int], None] | None = None,
    suite: RooflineSuite = GPU,
) -> Device:
    """Measure the roofline of ``provider``'s device through onnxruntime and return it as a calibrated Device (a
    GPU for the CUDA provider). The chains run in passes of ``suite.reps`` runs each until ``suite.passes`` or the
    budget is spent (at least two passes); a chain's time is the fast estimate of its runs. A UserError where
    onnxruntime runs the provider's graphs elsewhere (the CUDA provider without a GPU falls back to the CPU)."""
    start = time.perf_counter()
    total = 6 + suite.passes
    done = 0

    def step() -> None:
        nonlocal done
        done = min(done + 1, total)
        if progress is not None:
            progress(done, total)

    _check_provider(provider, threads)
    with tempfile.TemporaryDirectory(prefix="onnxroof-calibrate-") as tmp:
        jobs = _set_up(Runner(threads, provider, tmp), suite, step)
        order: list[Job] = [jobs.launch, jobs.single, jobs.stream, jobs.fp32, *([jobs.fp16] if jobs.fp16 else [])]
        order.append(jobs.reference)
        # chains hold no cold weights: nothing to flush between runs
        passes = time_passes(order, suite.reps, suite.passes, start + budget_s - 1.0, Flush(0), step)
        if progress is not None:
            progress(total, total)
        return _device(jobs, suite, provider, threads, passes, time.perf_counter() - start)


def _check_provider(provider: str, threads: int) -> None:
    """A UserError where onnxruntime runs a graph meant for ``provider`` on another one (onnxruntime-gpu falls back
    to the CPU where there is no GPU or no CUDA runtime): what would be measured is not the device asked for."""
    model, _ = chains.activation_chain(Rand(0), 1, "Neg", (16,))
    _, actual = sessions.make_session(model, SessionSpec(provider, threads, allow_fallback=True))
    if actual != provider_name(provider):
        raise UserError(
            f"cannot calibrate {provider_name(provider)}: onnxruntime runs its graphs on {actual} here",
            "calibrate on a machine with an NVIDIA GPU, its driver and onnxroof[cuda] installed",
        )


def _set_up(runner: Runner, suite: RooflineSuite, step: Callable[[], None]) -> _Jobs:
    """Every chain's sessions, created once."""
    rand = Rand(0)

    def neg(n: int) -> Built:
        return chains.activation_chain(rand, n, "Neg", (16,))

    launch = Chain(runner, "chains of Neg on 16 floats", neg, suite.launch_lengths)
    step()
    single = Chain(runner, "a one-node graph", neg, (1, 2))
    step()
    stream = Chain(
        runner,
        f"chains of Neg over {suite.stream_floats} floats",
        lambda n: chains.stream_chain(rand, n, suite.stream_floats),
        suite.stream_lengths,
    )
    step()
    size = suite.matrix_size

    def products(dtype: int) -> Callable[[int], Built]:
        return lambda n: chains.matmul_chain(rand, n, size, dtype)

    fp32 = Chain(runner, f"chains of {size}x{size}x{size} fp32 MatMul", products(FLOAT), suite.matrix_lengths)
    step()
    fp16 = None
    with contextlib.suppress(UserError):  # a provider without an fp16 MatMul kernel cannot load the chain
        fp16 = Chain(
            runner,
            f"chains of {size}x{size}x{size} fp16 MatMul",
            products(TensorProto.FLOAT16),
            suite.matrix_lengths,
        )
    step()
    reference = Reference(runner.threads, runner.provider)
    step()
    return _Jobs(launch, single, stream, fp32, fp16, reference)


def _per_node(chain: Chain) -> float:
    """A chain's seconds per node, never below a nanosecond. The launch is not taken off: a GPU runs a kernel while
    the host launches the next, so a large kernel's time is its own (the profile's overlap is "max")."""
    return max(chain.per_node(), 1e-9)


def _device(jobs: _Jobs, suite: RooflineSuite, provider: str, threads: int, passes: int, duration: float) -> Device:
    """The calibrated device from the chains' times."""
    how = f"onnxruntime {ort_version()} {provider} provider, fastest eighth of {passes} passes"
    launch = jobs.launch.per_node()
    run_overhead = max(fast_estimate(jobs.single.t_lo) - launch, 0.0)
    n = suite.matrix_size
    peaks = {
        "fp32": Peak(
            product_rate(n, _per_node(jobs.fp32)),
            True,
            f"calibrated: {jobs.fp32.label}, {jobs.fp32.lo} and {jobs.fp32.hi} long, 2n^3 FLOPs a node; {how}",
        )
    }
    if jobs.fp16 is not None:
        peaks["fp16"] = Peak(
            product_rate(n, _per_node(jobs.fp16)),
            True,
            f"calibrated: {jobs.fp16.label}, {jobs.fp16.lo} and {jobs.fp16.hi} long, 2n^3 FLOPs a node; {how}",
        )
    bandwidth = stream_rate(suite.stream_floats, 4, _per_node(jobs.stream))
    on_gpu = provider_name(provider) == "CUDAExecutionProvider"
    gpu = nvidia_gpu() if on_gpu else None
    reference = jobs.reference.sampler.time_s()
    return Device(
        key=host_key(threads, provider),
        name=f"{gpu.name if gpu else cpu_model()}, onnxruntime {ort_version()} {provider} (calibrated)",
        kind="gpu" if on_gpu else "cpu",
        overlap="max",
        peak_flops=FrozenMap(peaks),
        memory_bandwidth=Sourced(
            bandwidth,
            f"calibrated: {jobs.stream.label} ({jobs.stream.lo} and {jobs.stream.hi} long), each reading and "
            f"writing them; {how}",
        ),
        memory_capacity=Sourced(float(gpu.memory_bytes), "nvidia-smi: memory.total") if gpu else None,
        launch_overhead=Sourced(
            launch,
            f"calibrated: slope of session.run time over {jobs.launch.label}, {jobs.launch.lo} and "
            f"{jobs.launch.hi} long; {how}",
        ),
        engine=ONNXRUNTIME,
        run_overhead=Sourced(run_overhead, f"calibrated: session.run time of a one-node graph minus one node; {how}"),
        calibration=Calibration(
            provider=provider,
            threads=threads,
            onnxruntime=ort_version(),
            cpu=cpu_model(),
            date=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            duration_s=round(duration, 1),
            reference_time_s=float(f"{reference:.4g}") if reference else None,
            suite=SUITE,
        ),
    )
