"""The seconds the prediction terms of onnxroof.predict.terms charge, each a pure function of a node and a device.

Each function here computes one correction to a kernel's roofline time on an engine whose ceilings were read on
kernels run alone (``onnxroof.ort.calibrate``): a fused activation applied in a second pass, the DRAM traffic a
convolution does not hide, the weights a product waits for, its output's write past the core's cache, a Gemm's pass
over its output for C, inputs written long before, the output's lines a streaming kernel finds evicted, a
recurrent op's input projection. Which of them an engine charges is its profile's (``onnxroof.predict.profiles``),
not theirs: none of them asks which engine or device kind it runs for.
"""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.costs import NodeView, engine_class
from onnxroof.devices import Device
from onnxroof.devices.classes import refined_from, with_trait
from onnxroof.predict.class_work import InputProjection
from onnxroof.predict.levels import core_cache_bytes, memory_level, threads
from onnxroof.predict.op_classes import ceiling_for

__all__ = [
    "COLD_WEIGHTS",
    "DRAM_OVERLAP_CLASSES",
    "GEMM_OPS",
    "READ_COLD",
    "RECURRENT_CLASSES",
    "STREAMING_CLASSES",
    "WEIGHT_WAIT_CLASSES",
    "bias_pass_time",
    "distant_read_time",
    "epilogue_activation",
    "epilogue_bytes",
    "epilogue_level",
    "epilogue_time",
    "exposed_dram_time",
    "exposed_weight_time",
    "output_write_time",
    "projection_time",
    "write_allocate_time",
]

# The calibration times a benchmark whose weights reach this many bytes on cold weights (a buffer larger than the
# caches is read before each run) and one with fewer on warm weights: the ceilings of kernels with small weights
# already carry warm reads, and only a node whose weights reach it reads them faster for being kept between runs.
COLD_WEIGHTS = 2**20
# The dense convolutions in onnxruntime's NCHWc layout, whose time grows by a share of their weights' read when the
# weights come from memory (the device's conv_weight_wait, exposed_weight_time).
WEIGHT_WAIT_CLASSES = with_trait("weight_wait")
# Classes whose ceiling is read on cold weights whatever their size: a one-row product's time is its weight's read,
# and the suite times those on weights past COLD_WEIGHTS only. A smaller weight of theirs in a model is kept between
# runs as a larger one is.
READ_COLD = with_trait("read_cold")
# The recurrent ops, whose ceilings are read on warm weights whatever their size (exposed_weight_time).
RECURRENT_CLASSES = refined_from("recurrent")
# Fused activations onnxruntime's convolution and Gemm kernels apply while writing the output; any other one is a
# second pass over the output.
_IN_KERNEL_ACTIVATIONS = frozenset({"", "Relu", "Identity"})
# The Gemm ops among the matrix products (base class "gemm"): their kernel may carry a fused activation (every
# convolution's may) and takes a C input.
GEMM_OPS = frozenset({"Gemm", "FusedGemm"})
# The classes whose kernels stream their input once into an output of the same order of size, with no arithmetic
# to hide the stream behind: in a network, the lines of the buffer they write come back from where the node
# before them pushed them (write_allocate_time).
STREAMING_CLASSES = with_trait("streaming")
# The classes the calibrated dram_overlap describes: the convolutions, on which it is measured.
DRAM_OVERLAP_CLASSES = refined_from("conv", "conv_integer", "qconv")


def epilogue_activation(view: NodeView) -> str | None:
    """The fused activation of a convolution or Gemm that onnxruntime applies as a second pass over the output
    (anything but Relu: Clip, LeakyRelu, HardSigmoid, Sigmoid, Tanh, ...); None when there is none."""
    base = engine_class(view.domain, view.op_type)
    if base != "conv" and not (base == "gemm" and view.op_type in GEMM_OPS):
        return None
    activation = view.attr("activation")
    if isinstance(activation, bytes):
        activation = activation.decode()
    if not activation or activation in _IN_KERNEL_ACTIVATIONS:
        return None
    return str(activation)


def epilogue_bytes(view: NodeView) -> float:
    """Bytes an epilogue pass moves: the node's outputs, read and written once more."""
    return 2.0 * sum(t.nbytes for t in view.outputs if t is not None and t.known)


def epilogue_level(view: NodeView, device: Device) -> tuple[str, float]:
    """(level name, bandwidth) of an epilogue pass (see :func:`epilogue_time`): the level the node's outputs fit
    in, up to the largest private cache."""
    output = epilogue_bytes(view) / 2
    core = core_cache_bytes(device)
    return memory_level(device, min(output, core) if core > 0 else output)


def epilogue_time(view: NodeView, device: Device) -> float:
    """A pass reading and writing the node's outputs in place, at the bandwidth of the level they sit in and the
    device's epilogue ceiling (calibrated on convolutions fused with Clip; a device without one uses its elementwise
    ceiling, see CLASS_FALLBACK), by the bytes it moves. onnxruntime applies the activation to each block of the
    output right after the kernel computed it, while the block is in the core's own cache, and rewrites each value
    where it read it: the level is the one the outputs fit in, up to the largest private cache (an output larger
    than that is still rewritten there, a block at a time), and the pass's working set is the outputs once though
    it moves them twice. Zero for a node with no epilogue activation."""
    moved = epilogue_bytes(view)
    if moved <= 0 or epilogue_activation(view) is None:
        return 0.0
    _, bw = epilogue_level(view, device)
    found = ceiling_for(device, "epilogue")
    eff = found[1].memory_efficiency(moved) if found is not None else 1.0
    return moved / (bw * eff)


def exposed_dram_time(device: Device, cls: str, level_bandwidth: float, memory_s: float) -> float:
    """The part of a kernel's memory time that adds to its compute time instead of overlapping it: for a
    convolution whose working set is served at DRAM bandwidth (it fits no faster level), the share of its memory
    time that the device's calibrated ``dram_overlap`` says compute does not hide. The figure is read on a batched
    convolution, whose activations stream through it; a matrix product by a weight streams its prepacked panels in
    order (see :func:`exposed_weight_time`). Zero for any other kernel (its ceiling was calibrated with ``max``),
    and on a device without that figure."""
    if (
        device.dram_overlap is None
        or cls not in DRAM_OVERLAP_CLASSES
        or level_bandwidth > device.memory_bandwidth.value
    ):
        return 0.0
    return (1.0 - device.dram_overlap.value) * memory_s


def exposed_weight_time(device: Device, cls: str, weights: float, weight_s: float, kept_s: float = 0.0) -> float:
    """The time a matrix product (class gemm), dense convolution (``WEIGHT_WAIT_CLASSES``) or recurrent op waits
    for its weights on top of its arithmetic: a share of ``weight_s``, the weights' read at the rate they come at
    (DRAM's, times the model's reuse between runs; not the class's memory efficiency, which is read on kernels with
    small weights whose time is mostly their dispatch). The calibration takes this same time off a sample's measured
    time before reading its class's compute ceiling, so that the ceiling is the kernel's rate on weights at hand.

    A recurrent op (LSTM, GRU, RNN) waits for all of its weights' read in a model, ``kept_s``, and for none outside
    one: its ceilings are read on warm weights whatever their size, as a model's steps run on weights its first step
    brought in (a benchmark's first step on cold weights stalls for longer than their read from memory takes, and
    its steps would spread that over the ceiling).

    A product waits for all of it: onnxruntime's kernel multiplies the rows of its input by one prepacked panel of
    the weight after another, and a panel read from memory is not hidden behind the arithmetic on the one before it.
    A convolution waits for the device's calibrated ``conv_weight_wait`` share at its weights' bytes (none without
    it): its kernel overlaps part of a large filter bank's stream with its arithmetic, little of a small one's.

    Weights under ``COLD_WEIGHTS`` are read warm by the calibration, in the core's cache where the benchmark's
    previous run left them, and the ceilings carry that read; in a model the rest of an inference has passed through
    the caches since the layer last ran, and its weights come from where the model's traffic leaves them:
    ``kept_s``, their read at DRAM's rate times the model's reuse (zero outside a model). Zero for any other
    class."""
    if cls in RECURRENT_CLASSES:
        return kept_s
    if cls == "gemm":
        share = 1.0
    elif cls in WEIGHT_WAIT_CLASSES and device.conv_weight_wait is not None:
        share = device.conv_weight_wait.share(weights)
    else:
        return 0.0
    return share * (weight_s if weights >= COLD_WEIGHTS else kept_s)


def output_write_time(view: NodeView, device: Device, cls: str, ws: float) -> float:
    """The write of a matrix product's (class gemm) output when its working set ``ws`` does not fit the core's own
    cache: each line of the output is read from the level the working set is in before it is written
    (write-allocate) and written back there, twice the output's bytes at that level's bandwidth, and the kernel
    stalls on those stores instead of hiding them behind its arithmetic (most visible on a product with few terms
    per output and a large output). The calibration takes it off a sample's time before reading the gemm ceiling,
    as it does the weights' wait. Zero for any other class and where the working set fits the core's cache (the
    ceilings carry those writes)."""
    if cls != "gemm":
        return 0.0
    core = core_cache_bytes(device)
    if core <= 0 or ws <= core:
        return 0.0
    out = view.output(0)
    if out is None or not out.known:
        return 0.0
    _, bandwidth = memory_level(device, ws)
    return 2.0 * out.nbytes / bandwidth


def bias_pass_time(view: NodeView, device: Device, cls: str) -> float:
    """The pass a matrix product by a weight (class gemm) makes over its output for a Gemm's C input:
    onnxruntime's CPU Gemm writes C, broadcast, into the output on one thread before the product, whose kernel then
    adds onto it (beta 1) and reads it back; twice the output's bytes. On one thread they go at the bandwidth of the
    level the output fits in; on several, the product's threads read the rows one thread wrote from the other
    cores' caches, through the last cache level, and the pass goes at one thread's share of that level's bandwidth
    (of the output's level where that is slower). Zero without C or with beta 0, for a MatMul (no C) and for any
    other class (a short product's output is a few rows)."""
    if cls != "gemm" or view.op_type not in GEMM_OPS:
        return 0.0
    c = view.input(2)
    if c is None or not c.name or float(view.attr("beta", 1.0)) == 0.0:
        return 0.0
    out = view.output(0)
    if out is None or not out.known:
        return 0.0
    _, bandwidth = memory_level(device, out.nbytes)
    count = threads(device)
    if count > 1:
        shared = [level.bandwidth for level in device.caches if level.bandwidth is not None and level.scope == "shared"]
        bandwidth = min([bandwidth, *shared]) / count
    return 2.0 * out.nbytes / bandwidth


def distant_read_time(
    device: Device, reads: Sequence[tuple[float, float]], level_bandwidth: float, memory_efficiency: float
) -> float:
    """What a node's reads of activations written long before add to its memory time. ``reads`` are (bytes, reuse
    distance: the bytes moved since the activation was written, ``memory.read_distances``); each comes from the
    level its distance and its own bytes fit in, and where that level is slower than the node's own (its working
    set's, ``level_bandwidth``) it is charged at that level's bandwidth in place of its share of the node's level
    at the class's efficiency: the class ceilings are read on kernels whose inputs were just written (a chain's
    previous node, a benchmark's fed input), where a residual branch's input written a layer earlier has been
    pushed out by the layer's own traffic. 0 without such reads."""
    extra = 0.0
    for nbytes, distance in reads:
        _, far = memory_level(device, distance + nbytes)
        if far < level_bandwidth:
            extra += max(nbytes / far - nbytes / (level_bandwidth * memory_efficiency), 0.0)
    return extra


def write_allocate_time(device: Device, cls: str, working_set: float, after: float, written: float) -> float:
    """What a streaming kernel's writes add in a network (class elementwise, broadcast, movement, transpose,
    reorder or cast): the buffer it writes was last touched before the node run just before it, whose ``after``
    bytes (its working set) pushed the buffer's lines out of the node's own level where both working sets do not
    fit it together. Each of its ``written`` bytes is then read from the level that holds both before it is written
    (write-allocate) and written back to it when evicted: ``2 * written / bw(working_set + after)``. The class
    ceilings are read on kernels that write the same buffer run after run, hot in their level, and charge the
    write once at the node's level. 0 where both fit the node's level, without a node before, or for another
    class (a convolution or a product computes while its output streams; a pooling writes a fraction of what it
    reads)."""
    if cls not in STREAMING_CLASSES or after <= 0 or written <= 0:
        return 0.0
    _, own = memory_level(device, working_set)
    _, far = memory_level(device, working_set + after)
    return 2.0 * written / far if far < own else 0.0


def projection_time(device: Device, projection: InputProjection | None, peak: float) -> float:
    """A recurrent op's input projection at the ceiling of its product class (gemm, gemm_short or gemv by its
    rows), read at one direction's FLOPs; at the peak on a device without that ceiling, 0 without a projection."""
    if projection is None:
        return 0.0
    found = ceiling_for(device, projection.product_class)
    eff = found[1].compute_efficiency(projection.flops / projection.directions) if found is not None else 1.0
    return projection.flops / (peak * eff)
