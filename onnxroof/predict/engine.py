"""Engine-aware per-node prediction: the roofline corrected by a calibrated host profile's per-op-class ceilings.

A single peak and a single bandwidth miss how an engine's kernels really run: kernels of different kinds reach
very different fractions of the peak (onnxruntime's blocked NCHWc convolution most of it, a depthwise
convolution or LRN, which do little arithmetic per element they load, far less), and a kernel whose data sits
in a cache streams faster than one that reads DRAM. This module predicts the time onnxruntime's CPU executor
spends on one node of the graph it actually runs (``onnxroof.ort.sessions.optimized_model``) from

- the node's op class (``op_classes.op_class``): conv, depthwise, 1x1, gemm, pooling, LRN, ... (``OP_CLASSES``),
  the base class its op registers with its cost function refined by the node's shapes;
- that class's ceiling on the device (:class:`onnxroof.devices.Ceiling`): the fraction of the peak and of the
  memory level's bandwidth such kernels reach, interpolated by kernel size (``class_work.ceiling_work``: one
  product, group or time step where the kernel repeats one);
- the memory level the node's working set fits in (:func:`memory_level`), whose measured bandwidth applies to
  the activations it moves; weights are charged at DRAM bandwidth, because a weight is read once per inference
  and the rest of the model streams through the caches in between, unless the whole model is small enough that
  its weights come back from the caches between back-to-back runs: then at the DRAM bandwidth times the device's
  calibrated ``weight_reuse`` speedup at the bytes one inference of the model moves (its ``traffic``);
- the per-node overhead (``device.launch_overhead``): what the executor spends dispatching one node;
- the epilogue of a convolution or Gemm whose fused activation onnxruntime does not apply inside the kernel (every
  activation but Relu, e.g. MobileNet's Clip): a separate pass reading and writing the output at that level's
  bandwidth and the device's ``epilogue`` ceiling (the calibration's conv ceilings are measured with Relu, which
  is free; its epilogue ceiling is what the same convolutions take longer with Clip);
- for a convolution whose working set is served at DRAM bandwidth (a batched one, larger than
  every faster cache), the DRAM traffic its computation does not hide: ``(1 - dram_overlap) * memory``, the
  share the calibration measured on such a convolution (its ceilings come from kernels whose data sits in a
  cache);
- for a matrix product by weights of ``COLD_WEIGHTS`` or more (class gemm), the time its weights
  take to arrive, in full: its kernel runs each prepacked panel of the weight over the rows of the input and
  waits for the next one, so a product with a few dozen rows (speech encoders' 50 frames) runs its arithmetic
  plus its weights' time, not the larger of the two (:func:`exposed_weight_time`); in a model, smaller weights
  too, which the calibration reads warm but a model's layer finds where the rest of the inference left them;
- for a dense convolution, the share of its weights' read its kernel does not hide behind its
  arithmetic, at the device's calibrated ``conv_weight_wait`` (:func:`exposed_weight_time`), cold or, in a
  model, from where the rest of the inference left them, as a product's;
- for a matrix product (class gemm) whose working set does not fit the core's own cache, the write of
  its output, each line read before it is written (:func:`output_write_time`);
- for a Softmax behind a constant attention mask of large negative scores and the product that reads its output,
  the time its elements on the slow path of subnormal floats take (``onnxroof.predict.subnormal``), at the
  device's calibrated ``softmax_underflow`` and ``subnormal_product``;
- for a Gemm with a C input, the pass over its output that writes C there and reads it back
  (:func:`bias_pass_time`).

``time = combine(overlap, compute + stalls, memory, per-node overhead) + epilogue + subnormal time`` with
``compute = flops / (peak * eff_c)``, ``memory = (activation bytes / bw_level + weight bytes / bw_dram) / eff_m``
and ``stalls`` the four additions above that stall the arithmetic (the DRAM traffic a convolution does not hide,
the weights' wait, the output's write, the pass for C), i.e. ``max(compute + stalls, memory) + epilogue +
subnormal + overhead`` on a calibrated (serial) host profile. The stalls count where the arithmetic with them
outlasts the memory time, and not otherwise: the memory time holds the weights and the output then. A kernel
whose ceilings move it from one side to the other moves its prediction continuously, not by the stalls at once.

Every node the executor runs pays the per-node overhead, shape-only nodes (Reshape, Flatten, Squeeze, ...) too:
they cost no FLOPs and no bytes (their output aliases their input), and the calibration measures the per-node
overhead as what a Reshape between two nodes adds to a run (the device's ``launch_overhead`` source states the
figure), so they predict exactly that overhead. What onnxruntime's profiler reports for them on top of that is
its own per-node bookkeeping (``device.calibration.profiler_overhead``), which a comparison with profiled
per-node times adds to every prediction. The device's ``run_overhead`` (the fixed cost of one ``session.run``)
is not part of any node: callers add it once per model (:func:`model_time`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnxroof.costs import OTHER, SHAPE, Cost, NodeView, engine_class
from onnxroof.devices import Device
from onnxroof.devices.classes import refined_from, with_trait
from onnxroof.predict import roofline
from onnxroof.predict.class_work import InputProjection, ceiling_work, input_projection, repeats, stepped_flops
from onnxroof.predict.op_classes import ceiling_for, classify
from onnxroof.predict.roofline import Prediction
from onnxroof.predict.subnormal import SubnormalWork, subnormal_time
from onnxroof.units import decimal_bytes

__all__ = [
    "COLD_WEIGHTS",
    "WEIGHT_WAIT_CLASSES",
    "EngineNote",
    "bias_pass_time",
    "core_cache_bytes",
    "distant_read_time",
    "epilogue_activation",
    "epilogue_bytes",
    "epilogue_level",
    "epilogue_time",
    "exposed_dram_time",
    "exposed_weight_time",
    "memory_level",
    "model_time",
    "output_write_time",
    "predict_engine",
    "projection_time",
    "weight_bytes",
    "weight_speedup",
    "working_set",
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
_READ_COLD = with_trait("read_cold")
# The recurrent ops, whose ceilings are read on warm weights whatever their size (exposed_weight_time).
_RECURRENT_CLASSES = refined_from("recurrent")
# The cache scopes private to a core (or a GPU's multiprocessor), of the device schema's CACHE_SCOPES.
_PRIVATE_SCOPES = frozenset({"per-core", "per-sm"})

# Fused activations onnxruntime's convolution and Gemm kernels apply while writing the output; any other one is a
# second pass over the output.
_IN_KERNEL_ACTIVATIONS = frozenset({"", "Relu", "Identity"})
# The Gemm ops among the matrix products (base class "gemm"): their kernel may carry a fused activation (every
# convolution's may) and takes a C input.
_GEMM_OPS = frozenset({"Gemm", "FusedGemm"})
# The classes whose kernels stream their input once into an output of the same order of size, with no arithmetic
# to hide the stream behind: in a network, the lines of the buffer they write come back from where the node
# before them pushed them (write_allocate_time).
_STREAMING_CLASSES = with_trait("streaming")
# The classes the calibrated dram_overlap describes: the convolutions, on which it is measured.
_DRAM_OVERLAP_CLASSES = refined_from("conv", "conv_integer", "qconv")


@dataclass(frozen=True)
class EngineNote:
    """Why a node got its engine prediction: its op class, the ceiling applied, and where its data was taken from.

    ``ceiling`` names the class whose ceiling the device had (the node's own class, or the class it falls back
    to, see CLASS_FALLBACK); None when the device has none and the plain roofline applied. ``level`` is the
    smallest memory level the node's working set fits in and ``level_bandwidth`` that level's bandwidth, which
    applies to the activations; ``weight_bytes`` of weights are charged at the DRAM bandwidth times
    ``weight_speedup`` (above 1 where the model's weights stay in the caches between runs, see
    :class:`onnxroof.devices.WeightReuse`).
    """

    op_class: str
    ceiling: str | None
    compute_efficiency: float
    memory_efficiency: float
    level: str
    level_bandwidth: float
    working_set: float
    weight_bytes: float
    epilogue: str | None = None  # the fused activation applied in a second pass over the output, if any
    epilogue_time_s: float = 0.0
    exposed_memory_s: float = 0.0  # memory time the computation does not hide (exposed_dram_time, exposed_weight_time)
    network_factor: float = 1.0  # the device's: a kernel in a network takes this times its time alone
    weight_speedup: float = 1.0  # the weights' rate over DRAM's, from the device's weight_reuse at the traffic
    subnormal_time_s: float = 0.0  # the slow path of subnormal floats: an underflowing Softmax, its product
    projection_s: float = 0.0  # a recurrent op's input projection, part of its compute time (projection_time)
    distant_s: float = 0.0  # inputs written long before, read from a farther level (distant_read_time)
    bias_pass_s: float = 0.0  # a Gemm's C broadcast into its output and read back (bias_pass_time)
    write_allocate_s: float = 0.0  # its output's lines brought back from a farther level (write_allocate_time)
    branch: str | None = None  # an If's: the branch whose nodes' predictions it sums (onnxroof.predict.control)
    branch_overhead_s: float = 0.0  # an If's: what running a branch adds to its nodes (device.branch_overhead)
    reason: str = ""  # why the node has its op class (op_classes.classify)

    def describe(self) -> str:
        """One line for a report: the class, the efficiencies applied and the memory level."""
        if self.op_class == SHAPE:
            return "shape-only: per-node overhead only"
        if self.branch is not None:
            return f"If: its {self.branch}'s nodes as predicted, plus {self.branch_overhead_s * 1e6:.3g} us to run it"
        if self.ceiling is None:
            head = f"{self.op_class}: no ceiling (plain roofline)"
        else:
            via = "" if self.ceiling == self.op_class else f" via {self.ceiling}"
            head = (
                f"{self.op_class}{via}: {self.compute_efficiency:.0%} of peak, "
                f"{self.memory_efficiency:.0%} of bandwidth"
            )
        data = f"data in {self.level} ({decimal_bytes(self.working_set)}, {self.level_bandwidth / 1e9:.3g} GB/s)"
        kept = f"at {self.weight_speedup:.2g}x DRAM's rate (cached between runs)"
        source = "from DRAM" if self.weight_speedup == 1.0 else kept
        weights = f", weights {decimal_bytes(self.weight_bytes)} {source}" if self.weight_bytes else ""
        epilogue = (
            f"; {self.epilogue} as a second pass over the output, {self.epilogue_time_s * 1e6:.3g} us"
            if self.epilogue
            else ""
        )
        exposed = (
            f"; {self.exposed_memory_s * 1e6:.3g} us of memory traffic not hidden by compute"
            if self.exposed_memory_s
            else ""
        )
        subnormal = (
            f"; {self.subnormal_time_s * 1e6:,.0f} us on subnormal floats (masked attention)"
            if self.subnormal_time_s
            else ""
        )
        projection = f"; input projection {self.projection_s * 1e6:,.0f} us as one product" if self.projection_s else ""
        distant = f"; {self.distant_s * 1e6:.3g} us more reading inputs written long before" if self.distant_s else ""
        bias = f"; C written into the output and read back, {self.bias_pass_s * 1e6:.3g} us" if self.bias_pass_s else ""
        evicted = (
            f"; {self.write_allocate_s * 1e6:.3g} us writing over lines the node before pushed out of {self.level}"
            if self.write_allocate_s
            else ""
        )
        network = f"; x{self.network_factor:.3g} in a network" if self.network_factor != 1.0 else ""
        return f"{head}; {data}{weights}{projection}{distant}{evicted}{bias}{epilogue}{exposed}{subnormal}{network}"


# ------------------------------------------------------------------------------------------------ memory


def weight_bytes(view: NodeView, cost: Cost) -> float:
    """Bytes of the distinct weights (initializers) a node reads, at most what its cost says it reads."""
    seen: set[str] = set()
    total = 0.0
    for t in view.inputs:
        if t is not None and t.is_weight and t.known and t.name not in seen:
            seen.add(t.name)
            total += t.nbytes
    return min(total, cost.bytes_read)


def working_set(view: NodeView, cost: Cost) -> float:
    """Bytes a kernel touches while it runs: every distinct input it reads and every output it writes (the
    compulsory traffic of its Cost). This decides which memory level its data is served from."""
    return cost.bytes_read + cost.bytes_written


def _threads(device: Device) -> int:
    """The threads the device's profile was calibrated with (1 without a calibration)."""
    return device.calibration.threads if device.calibration is not None else 1


def _capacity(device: Device, size: float, scope: str) -> float:
    """A cache's capacity for one run: a private cache counts once per thread the profile was measured with."""
    return size * _threads(device) if scope in _PRIVATE_SCOPES else size


def memory_level(device: Device, nbytes: float) -> tuple[str, float]:
    """(level name, bandwidth in bytes/s) of the smallest memory level ``nbytes`` fits in.

    Only cache levels with a measured bandwidth count; a working set larger than all of them is served from
    DRAM at ``device.memory_bandwidth``. Fitting means ``nbytes <= capacity``, the capacity of a per-core
    cache being multiplied by the thread count of the calibration.
    """
    levels = sorted((c for c in device.caches if c.bandwidth is not None), key=lambda c: c.size)
    for cache in levels:
        if nbytes <= _capacity(device, cache.size, cache.scope):
            return cache.level, float(cache.bandwidth)  # type: ignore[arg-type]
    return "DRAM", device.memory_bandwidth.value


# ------------------------------------------------------------------------------------------------ prediction


def epilogue_activation(view: NodeView) -> str | None:
    """The fused activation of a convolution or Gemm that onnxruntime applies as a second pass over the output
    (anything but Relu: Clip, LeakyRelu, HardSigmoid, Sigmoid, Tanh, ...); None when there is none."""
    base = engine_class(view.domain, view.op_type)
    if base != "conv" and not (base == "gemm" and view.op_type in _GEMM_OPS):
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


def core_cache_bytes(device: Device) -> float:
    """What the largest private (per-core) cache level with a measured bandwidth holds over the profile's threads;
    zero on a device without one."""
    private = [c for c in device.caches if c.bandwidth is not None and c.scope in _PRIVATE_SCOPES]
    return max((_capacity(device, c.size, c.scope) for c in private), default=0.0)


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
    convolution whose working set is served at DRAM bandwidth (it fits no faster level), the share
    of its memory time that the device's calibrated ``dram_overlap`` says compute does not hide. The figure is
    read on a batched convolution, whose activations stream through it; a matrix product by a weight streams its
    prepacked panels in order (see :func:`exposed_weight_time`). Zero for any other kernel (its ceiling was
    calibrated with ``max``), and on a device without that figure."""
    if (
        device.dram_overlap is None
        or cls not in _DRAM_OVERLAP_CLASSES
        or level_bandwidth > device.memory_bandwidth.value
    ):
        return 0.0
    return (1.0 - device.dram_overlap.value) * memory_s


def exposed_weight_time(device: Device, cls: str, weights: float, weight_s: float, kept_s: float = 0.0) -> float:
    """The time a matrix product (class gemm), dense convolution (``WEIGHT_WAIT_CLASSES``) or recurrent op of
    onnxruntime's CPU executor waits for its weights on top of its arithmetic: a share of ``weight_s``, the
    weights' read at the rate they come at (DRAM's, times the model's reuse between runs; not the class's memory
    efficiency, which is read on kernels with small weights whose time is mostly their dispatch). The calibration
    takes this same time off a sample's measured time before reading its class's compute ceiling, so that the
    ceiling is the kernel's rate on weights at hand.

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
    ``kept_s``, their read at DRAM's rate times the model's reuse (zero outside a model). Zero for any other class
    and on a GPU, which streams a kernel's weights while it computes."""
    if device.kind != "cpu":
        return 0.0
    if cls in _RECURRENT_CLASSES:
        return kept_s
    if cls == "gemm":
        share = 1.0
    elif cls in WEIGHT_WAIT_CLASSES and device.conv_weight_wait is not None:
        share = device.conv_weight_wait.share(weights)
    else:
        return 0.0
    return share * (weight_s if weights >= COLD_WEIGHTS else kept_s)


def output_write_time(view: NodeView, device: Device, cls: str, ws: float) -> float:
    """The write of a matrix product's (class gemm) output when its working set does not fit the
    core's own cache: each line of the output is read from the level the working set is in before it is written
    (write-allocate) and written back there, twice the output's bytes at that level's bandwidth, and the kernel
    stalls on those stores instead of hiding them behind its arithmetic (most visible on a product with few terms
    per output and a large output, such as a Swin stage's 3136 x 96 by 96 x 384). The calibration takes it off a
    sample's time before reading the gemm ceiling, as it does the weights' wait. Zero for any other class and where
    the working set fits the core's cache (the ceilings carry those writes)."""
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
    onnxruntime's Gemm writes C, broadcast, into the output on one thread before the product, whose kernel then
    adds onto it (beta 1) and reads it back; twice the output's bytes. On one thread they go at the bandwidth of the
    level the output fits in; on several, the product's threads read the rows one thread wrote from the other
    cores' caches, through the last cache level, and the pass goes at one thread's share of that level's bandwidth
    (of the output's level where that is slower). Zero without C or with beta 0, for a MatMul (no C), for any other
    class (a short product's output is a few rows) and on a GPU (onnxruntime's CPU Gemm makes this pass)."""
    if cls != "gemm" or view.op_type not in _GEMM_OPS or device.kind != "cpu":
        return 0.0
    c = view.input(2)
    if c is None or not c.name or float(view.attr("beta", 1.0)) == 0.0:
        return 0.0
    out = view.output(0)
    if out is None or not out.known:
        return 0.0
    _, bandwidth = memory_level(device, out.nbytes)
    threads = _threads(device)
    if threads > 1:
        shared = [level.bandwidth for level in device.caches if level.bandwidth is not None and level.scope == "shared"]
        bandwidth = min([bandwidth, *shared]) / threads
    return 2.0 * out.nbytes / bandwidth


def predict_engine(
    view: NodeView,
    cost: Cost,
    precision: str,
    device: Device,
    traffic: float | None = None,
    subnormal: SubnormalWork | None = None,
    reads: Sequence[tuple[float, float]] = (),
    after: float = 0.0,
) -> tuple[Prediction, EngineNote]:
    """The time onnxruntime's executor spends on one node, and why.

    ``compute = flops / (peak[precision] * eff_c)`` (the FLOPs of the taps inside the input for an NCHWc
    convolution, which skips those in the padding: ``op_classes.taps_inside``; for a recurrent op, its steps' FLOPs
    plus its input projection at its product's ceiling: :func:`projection_time`); ``memory = (activation bytes /
    bw_level + weight bytes / (bw_dram * reuse)) / eff_m`` (plus the inputs written long before, read from the level
    their reuse distance fits in: :func:`distant_read_time`, and for a streaming kernel the lines of its output that
    the node run before it, ``after`` bytes, pushed out of its level: :func:`write_allocate_time`) where ``reuse``
    is the device's weight-reuse speedup at ``traffic``, the bytes one inference of the node's model moves (1
    without a traffic: weights read cold, as the calibration's benchmarks read them; 1 for weights under
    ``COLD_WEIGHTS``, which the ceilings were read on warm), and ``eff_c``/``eff_m`` come from the node's class
    ceiling at its FLOPs/bytes (those of one product of a batched matmul, one group of a plain-layout grouped
    convolution, one time step of one direction of a recurrent op: ``class_work.ceiling_work``) and ``bw_level`` is
    the bandwidth of the smallest memory level its working set fits in; ``overhead`` is one per-node overhead (every
    dispatched node pays it, shape-only ones included). What stalls the arithmetic adds to the compute time: the
    DRAM traffic a convolution does not hide (:func:`exposed_dram_time`), the weights' time a product waits for
    (:func:`exposed_weight_time`), its output's write (:func:`output_write_time`) and the pass a Gemm makes over
    its output for its C input (:func:`bias_pass_time`), all of them where the arithmetic with them outlasts the
    memory time and none where it does not. They combine under the device's overlap: ``max(compute + stalls,
    memory) + overhead`` for a calibrated (serial) host profile, plus the epilogue of a fused activation applied in
    a second pass (:func:`epilogue_activation`, ``Prediction.epilogue_time_s``) and the time of the node's
    ``subnormal`` work, its elements on the slow path of subnormal floats
    (:func:`onnxroof.predict.subnormal.subnormal_time`). Compute, memory, epilogue, exposed and subnormal times are
    multiplied by the device's ``network_factor``, what the ceilings read on kernels run alone miss of a network's
    kernels run one after the other (calibrated on the reference block). The Prediction's ``peak_flops_s`` and
    ``bandwidth_bytes_s`` are the node's own ceilings (peak x eff_c, the effective bandwidth), so its ridge point
    and attainable FLOP/s read against the roof it actually runs under.

    The device's ``run_overhead`` is not included: it is paid once per ``session.run``, so callers add it once
    per model (see :func:`model_time`).
    """
    cls, reason = classify(view)
    peak, used = device.peak(precision)
    found = ceiling_for(device, cls) if cls not in (SHAPE, OTHER) else None
    ceiling_name, ceiling = found if found is not None else (None, None)
    flops_key, bytes_key = ceiling_work(view, cost, cls)
    eff_c = ceiling.compute_efficiency(flops_key) if ceiling is not None and cost.flops > 0 else 1.0
    eff_m = ceiling.memory_efficiency(bytes_key) if ceiling is not None and cost.bytes > 0 else 1.0
    ws = working_set(view, cost)
    level, bw = memory_level(device, ws)
    weights = weight_bytes(view, cost)
    dram = device.memory_bandwidth.value
    network = step_network_factor(device.network_factor.value if device.network_factor is not None else 1.0, view, cls)
    # An NCHWc convolution computes only its taps inside the input, with or without a ceiling: the calibration reads
    # the conv ceilings on a device without them, and its own benchmarks must come out at their measured times.
    # A recurrent op's input projection runs as one product before its steps, at that product's ceiling.
    projection_s = network * projection_time(device, input_projection(view, cls), peak)
    compute = network * stepped_flops(view, cost, cls) / (peak * eff_c) + projection_s
    speedup = weight_speedup(device, traffic)
    reuse = speedup if weights >= COLD_WEIGHTS or cls in _READ_COLD else 1.0
    weight_dram_s = network * weights / (dram * reuse)
    # A shape-only node reads no data (Shape reads its input's shape); a read counts no more bytes than the node's
    # cost reads (a Slice reads its slice of the input).
    distant = [(min(b, cost.bytes_read), d) for b, d in reads] if cls not in (SHAPE, OTHER) else []
    distant_s = network * distant_read_time(device, distant, bw, eff_m)
    evicted_s = network * write_allocate_time(device, cls, ws, after, cost.bytes_written)
    memory = network * (cost.bytes - weights) / bw / eff_m + weight_dram_s / eff_m + distant_s + evicted_s
    overhead = device.launch_overhead.value
    effective_bw = cost.bytes / memory if memory > 0 else bw * eff_m / network
    epilogue = epilogue_activation(view)
    epilogue_s = network * epilogue_time(view, device)
    # A small weight's read in a model, from the level the model's traffic leaves it in (none outside a model).
    kept_s = network * weights / (dram * speedup) if traffic is not None else 0.0
    exposed = (
        exposed_dram_time(device, cls, bw, memory)
        + exposed_weight_time(device, cls, weights, weight_dram_s, kept_s)
        + network * output_write_time(view, device, cls, ws)
    )
    bias_s = network * bias_pass_time(view, device, cls)
    if compute + exposed + bias_s < memory:  # bound by its memory time, which holds its weights and its output
        exposed = bias_s = 0.0
    slow_path = network * subnormal_time(device, subnormal)
    prediction = Prediction(
        compute_time_s=compute,
        memory_time_s=memory,
        overhead_time_s=overhead,
        predicted_time_s=roofline.combine(device.overlap, compute + exposed + bias_s, memory, overhead)
        + epilogue_s
        + slow_path,
        bound=roofline.bound_of(compute, memory, overhead),
        peak_flops_s=peak * eff_c / network,
        bandwidth_bytes_s=effective_bw,
        precision=used,
        epilogue_time_s=epilogue_s,
    )
    note = EngineNote(
        cls,
        ceiling_name,
        eff_c,
        eff_m,
        level,
        bw,
        ws,
        weights,
        epilogue,
        epilogue_s,
        exposed,
        network,
        reuse,
        slow_path,
        projection_s,
        distant_s,
        bias_s,
        evicted_s,
        reason=reason,
    )
    return prediction, note


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
    if cls not in _STREAMING_CLASSES or after <= 0 or written <= 0:
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


def step_network_factor(factor: float, view: NodeView, cls: str) -> float:
    """The network factor a node's work takes: ``factor``, but for a recurrent op, whose time steps run one after
    the other on the state and weights the step before left in the caches, as its class's benchmarks run them:
    only its first step follows the kernels before it, and the factor's excess over 1 is spread over its steps,
    ``1 + (factor - 1) / steps`` (an LSTM tagger's 128 steps ran at their benchmark's rate in a model)."""
    if cls not in _RECURRENT_CLASSES:
        return factor
    return 1.0 + (factor - 1.0) / max(repeats(view, cls), 1)


def weight_speedup(device: Device, traffic: float | None) -> float:
    """How many times DRAM's rate a model's weights are read at when one inference moves ``traffic`` bytes: the
    device's calibrated weight-reuse speedup there; 1 without a traffic or without that calibration."""
    if traffic is None or device.weight_reuse is None:
        return 1.0
    return device.weight_reuse.speedup(traffic)


def model_time(node_times_s: list[float] | tuple[float, ...], device: Device) -> float:
    """A whole model's predicted latency: its nodes' predicted times plus the device's run overhead, once."""
    run = device.run_overhead.value if device.run_overhead is not None else 0.0
    return run + sum(node_times_s)
