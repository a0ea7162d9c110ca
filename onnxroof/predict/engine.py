"""Engine-aware per-node prediction: the roofline corrected by a calibrated host profile's per-op-class ceilings.

A single peak and a single bandwidth miss how an engine's kernels really run: kernels of different kinds reach
very different fractions of the peak (onnxruntime's blocked NCHWc convolution most of it, a depthwise
convolution or LRN, which do little arithmetic per element they load, far less), and a kernel whose data sits
in a cache streams faster than one that reads DRAM. This module predicts the time onnxruntime's CPU executor
spends on one node of the graph it actually runs (``onnxroof.ort.sessions.optimized_model``) from

- the node's op class (:func:`op_class`): conv, depthwise, 1x1, gemm, pooling, LRN, ... (``OP_CLASSES``), the
  base class its op registers with its cost function refined by the node's shapes (:data:`REFINEMENTS`);
- that class's ceiling on the device (:class:`onnxroof.devices.Ceiling`): the fraction of the peak and of the
  memory level's bandwidth such kernels reach, interpolated by kernel size;
- the memory level the node's working set fits in (:func:`memory_level`), whose measured bandwidth applies to
  the activations it moves; weights are charged at DRAM bandwidth, because a weight is read once per inference
  and the rest of the model streams through the caches in between;
- the per-node overhead (``device.launch_overhead``): what the executor spends dispatching one node;
- the epilogue of a convolution or Gemm whose fused activation onnxruntime does not apply inside the kernel (every
  activation but Relu, e.g. MobileNet's Clip): a separate pass reading and writing the output at that level's
  bandwidth and the device's ``epilogue`` ceiling (the calibration's conv ceilings are measured with Relu, which
  is free; its epilogue ceiling is what the same convolutions take longer with Clip);
- for a compute-bound kernel whose working set is served at DRAM bandwidth (a batched convolution, larger than
  every faster cache), the DRAM traffic its computation does not hide: ``(1 - dram_overlap) * memory``, the
  share the calibration measured on such a convolution (its ceilings come from kernels whose data sits in a
  cache).

``time = combine(overlap, flops / (peak * eff_c), (activation bytes / bw_level + weight bytes / bw_dram) / eff_m,
per-node overhead) + epilogue + exposed DRAM time``, i.e. ``max(compute, memory) + epilogue + exposed + overhead``
on a calibrated (serial) host profile.

Every node the executor runs pays the per-node overhead, shape-only nodes (Reshape, Flatten, Squeeze, ...) too:
they cost no FLOPs and no bytes (their output aliases their input), and the calibration measures the per-node
overhead as what a Reshape between two nodes adds to a run (the device's ``launch_overhead`` source states the
figure), so they predict exactly that overhead. What onnxruntime's profiler reports for them on top of that is
its own per-node bookkeeping (``device.calibration.profiler_overhead``), which a comparison with profiled
per-node times adds to every prediction. The device's ``run_overhead`` (the fixed cost of one ``session.run``)
is not part of any node: callers add it once per model (:func:`model_time`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from math import prod

from onnxroof.costs import OTHER, SHAPE, Cost, NodeView, engine_class
from onnxroof.devices import OP_CLASSES, Ceiling, Device
from onnxroof.ir import Tensor
from onnxroof.predict import roofline
from onnxroof.predict.roofline import Prediction

__all__ = [
    "CLASS_FALLBACK",
    "OP_CLASSES",
    "OTHER",
    "REFINEMENTS",
    "SHAPE",
    "EngineNote",
    "Refinement",
    "ceiling_for",
    "epilogue_activation",
    "epilogue_bytes",
    "epilogue_time",
    "exposed_dram_time",
    "memory_level",
    "model_time",
    "op_class",
    "predict_engine",
    "weight_bytes",
    "working_set",
]

NCHWC_DOMAIN = "com.microsoft.nchwc"  # onnxruntime's blocked-layout CPU kernels

# A device without a ceiling for a class uses the ceiling of the class it falls back to (first one it has).
CLASS_FALLBACK: Mapping[str, str] = {
    "conv1x1": "conv",
    "conv_wide": "conv",
    "conv_stem": "conv",
    "conv_mid": "conv",
    "conv_small": "conv",
    "conv_grouped": "conv_small",
    "conv_integer": "conv",
    "conv_integer_grouped": "conv_integer",
    "qconv": "conv",
    "qconv_depthwise": "depthwise",
    "matmul": "gemm",
    "global_pool": "pool",
    "pool_nchw": "pool",
    "broadcast": "elementwise",
    "instancenorm": "layernorm",
    "batchnorm": "elementwise",
    "transpose": "movement",
    "reorder": "movement",
    "reorder_short": "reorder",
    "resize": "movement",
    "epilogue": "elementwise",
    "cast": "elementwise",
    "transpose_generic": "transpose",
    "quantize": "elementwise",
}

# Dense convolutions this small run well below the large-conv efficiency: few output positions per image
# (the 7x7 stages of ResNets), very few output channels, or a stem (a handful of input channels) with a small
# kernel: its NCHWc kernel reads a plain NCHW input and does little work per input pixel. Stems with large
# kernels (7x7, 11x11) come close to the large-conv efficiency on one thread but split less well over threads
# than 3x3 convolutions of the same FLOPs: a class of their own, so that they do not set the large-conv ceiling
# at their size. Mid-sized outputs (the 14x14 stages) lose efficiency to the short rows the kernel walks, which
# ranks them below equal-FLOP convs on larger outputs.
# Past the stem, a 5x5 or wider kernel (AlexNet's and ZFNet's second layers, Inception's 5x5 branches) runs at
# a rate per FLOP of its own, different from a 3x3 one's on the same output: a class of its own, so that neither
# skews the other's ceiling.
SMALL_CONV_POSITIONS = 100
MID_CONV_POSITIONS = 400
SMALL_CONV_IN_CHANNELS = 16
SMALL_CONV_OUT_CHANNELS = 32
SMALL_STEM_KERNEL_AREA = 25
WIDE_CONV_KERNEL_AREA = 25

# Convolutions whose activations are channels-last (``[N, spatial..., C]``), weights staying ``[M, C/group, k...]``.
_NHWC_CONV = frozenset({"NhwcConv", "NhwcFusedConv"})

# Fused activations onnxruntime's convolution and Gemm kernels apply while writing the output; any other one is a
# second pass over the output.
_IN_KERNEL_ACTIVATIONS = frozenset({"", "Relu", "Identity"})
# The matrix products (base class "gemm") whose kernel may carry a fused activation; every convolution may.
_FUSED_ACTIVATION_GEMMS = frozenset({"Gemm", "FusedGemm"})


@dataclass(frozen=True)
class EngineNote:
    """Why a node got its engine prediction: its op class, the ceiling applied, and where its data was taken from.

    ``ceiling`` names the class whose ceiling the device had (the node's own class, or the class it falls back
    to, see CLASS_FALLBACK); None when the device has none and the plain roofline applied. ``level`` is the
    smallest memory level the node's working set fits in and ``level_bandwidth`` that level's bandwidth, which
    applies to the activations; ``weight_bytes`` of weights are charged at the DRAM bandwidth.
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
    exposed_memory_s: float = 0.0  # DRAM traffic time the computation does not hide (see exposed_dram_time)
    network_factor: float = 1.0  # the device's: a kernel in a network takes this times its time alone

    def describe(self) -> str:
        """One line for a report: the class, the efficiencies applied and the memory level."""
        if self.op_class == SHAPE:
            return "shape-only: per-node overhead only"
        if self.ceiling is None:
            head = f"{self.op_class}: no ceiling (plain roofline)"
        else:
            via = "" if self.ceiling == self.op_class else f" via {self.ceiling}"
            head = (
                f"{self.op_class}{via}: {self.compute_efficiency:.0%} of peak, "
                f"{self.memory_efficiency:.0%} of bandwidth"
            )
        data = f"data in {self.level} ({_size(self.working_set)}, {self.level_bandwidth / 1e9:.3g} GB/s)"
        weights = f", weights {_size(self.weight_bytes)} from DRAM" if self.weight_bytes else ""
        epilogue = (
            f"; {self.epilogue} as a second pass over the output, {self.epilogue_time_s * 1e6:.3g} us"
            if self.epilogue
            else ""
        )
        exposed = (
            f"; {self.exposed_memory_s * 1e6:.3g} us of DRAM traffic not hidden by compute"
            if self.exposed_memory_s
            else ""
        )
        network = f"; x{self.network_factor:.3g} in a network" if self.network_factor != 1.0 else ""
        return f"{head}; {data}{weights}{epilogue}{exposed}{network}"


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


# ------------------------------------------------------------------------------------------------ op classes


def _known(t: Tensor | None) -> tuple[int, ...] | None:
    return t.shape if t is not None and t.shape is not None else None


def _conv_class(view: NodeView) -> str:
    """depthwise / batchnorm (a depthwise 1x1 conv is a per-channel scale and shift) / conv_grouped / conv_small /
    conv_mid / conv_stem / conv_wide / conv1x1 / conv, from the weight's shape (or the attributes when it is
    unknown); a grouped convolution in onnxruntime's NCHWc layout takes the dense class of one group."""
    x, y = _known(view.input(0)), _known(view.output(0))
    w = _known(view.input(1))
    nhwc = view.op_type in _NHWC_CONV
    group = int(view.attr("group", 1) or 1)
    if w is not None and len(w) >= 3:
        kernel = tuple(w[2:]) if not nhwc else tuple(w[1:-1])
        per_group_in = w[1] if not nhwc else w[-1]
    else:
        kernel = tuple(view.attr("kernel_shape") or ())
        per_group_in = None
    c_in = (x[1] if not nhwc else x[-1]) if x is not None and len(x) >= 3 else None
    if per_group_in is None and c_in is not None:
        per_group_in = c_in // group
    pointwise = bool(kernel) and all(k == 1 for k in kernel)
    if view.op_type == "ConvTranspose":
        return "conv_grouped" if group > 1 else "conv"
    if group > 1 and per_group_in == 1:
        return "batchnorm" if pointwise else "depthwise"
    if group > 1 and view.domain != NCHWC_DOMAIN:
        return "conv_grouped"
    c_out = (y[1] if not nhwc else y[-1]) if y is not None and len(y) >= 3 else None
    if group > 1:
        # onnxruntime blocks a grouped convolution into NCHWc only when each group's channels fill whole blocks,
        # and then runs every group as a dense convolution of its own channels: such a convolution runs at the
        # rate of the dense classes, not at that of the plain-layout grouped kernel (conv_grouped).
        c_in, c_out = per_group_in, (c_out // group if c_out is not None else None)
    positions = (prod(y[2:]) if not nhwc else prod(y[1:-1])) if y is not None and len(y) >= 3 else None
    stem = c_in is not None and c_in < SMALL_CONV_IN_CHANNELS and bool(kernel)
    if (
        (positions is not None and positions < SMALL_CONV_POSITIONS)
        or (stem and prod(kernel) < SMALL_STEM_KERNEL_AREA)
        or (c_out is not None and c_out < SMALL_CONV_OUT_CHANNELS)
    ):
        return "conv_small"
    if positions is not None and positions < MID_CONV_POSITIONS:
        return "conv_mid"
    if stem:
        return "conv_stem"
    if kernel and prod(kernel) >= WIDE_CONV_KERNEL_AREA:  # past the stem: stems returned above
        return "conv_wide"
    return "conv1x1" if pointwise else "conv"


def _grouping(view: NodeView, w_index: int) -> tuple[int, int | None]:
    """(group, input channels per group) of a convolution whose weight is input ``w_index``: the weight's second
    dimension, else the input's channels over the groups (None when neither is known)."""
    group = int(view.attr("group", 1) or 1)
    w = _known(view.input(w_index))
    if w is not None and len(w) >= 3:
        return group, w[1]
    x = _known(view.input(0))
    return group, (x[1] // group if x is not None and len(x) >= 3 else None)


def _integer_conv_class(view: NodeView) -> str:
    """conv_integer_grouped for a depthwise ConvInteger (one input channel per group), conv_integer otherwise:
    onnxruntime's ConvInteger runs an im2col and an integer matrix product per group, so a depthwise one pays that
    fixed cost once per channel for a product of one row, while the groups of a grouped convolution with several
    channels each (ShuffleNet's) are dense products like an ungrouped one's."""
    group, per_group_in = _grouping(view, 1)
    return "conv_integer_grouped" if group > 1 and per_group_in == 1 else "conv_integer"


def _qconv_class(view: NodeView) -> str:
    """qconv_depthwise for a QLinearConv with one input channel per group (onnxruntime's depthwise int8 kernel),
    qconv otherwise."""
    group, per_group_in = _grouping(view, 3)
    return "qconv_depthwise" if group > 1 and per_group_in == 1 else "qconv"


def _product_class(view: NodeView) -> str:
    """gemm when the second operand is a weight (prepacked by the engine), matmul for two activations."""
    b = view.input(3) if view.op_type == "QLinearMatMul" else view.input(1)
    return "gemm" if b is not None and b.is_weight else "matmul"


def _pool_class(view: NodeView) -> str:
    """pool for a window in onnxruntime's NCHWc layout (after a convolution), pool_nchw for the plain-layout kernel,
    which runs slower per byte."""
    return "pool" if view.domain == NCHWC_DOMAIN else "pool_nchw"


def _elementwise_class(view: NodeView) -> str:
    """broadcast when an operand is broadcast along the innermost axis (e.g. a (C,1,1) scale on an NCHW tensor):
    onnxruntime then loops per channel instead of streaming one contiguous range, which costs more per byte;
    elementwise otherwise."""
    out = _known(view.output(0))
    if len(view.inputs) < 2 or out is None or not out or out[-1] == 1:
        return "elementwise"
    for t in view.inputs:
        shape = _known(t)
        if shape is not None and shape and shape[-1] == 1 and prod(shape) < prod(out):
            return "broadcast"
    return "elementwise"


def _reorder_class(view: NodeView) -> str:
    """reorder_short for an NCHWc -> NCHW reorder onto planes of fewer than MID_CONV_POSITIONS positions (a 14x14
    or 7x7 stage): onnxruntime then writes each channel's short plane on its own, at a lower bandwidth than along
    long rows. The opposite reorder (NCHW -> NCHWc) and a channels-last output stay reorder."""
    out = _known(view.output(0))
    if view.op_type != "ReorderOutput" or out is None or len(out) < 3 or int(view.attr("channels_last", 0) or 0):
        return "reorder"
    return "reorder_short" if prod(out[2:]) < MID_CONV_POSITIONS else "reorder"


def _transpose_class(view: NodeView) -> str:
    """transpose_generic for a Transpose that moves more than one axis (dims of size 1 aside), which onnxruntime
    runs element by element; transpose for one that moves a single axis (a head split, a channel shuffle in NCHW, a
    layout change), for which it has block-copy kernels, and for DepthToSpace and SpaceToDepth."""
    shape = _known(view.input(0))
    perm = view.attr("perm")
    if view.op_type != "Transpose" or shape is None:
        return "transpose"
    axes = list(perm) if perm is not None else list(reversed(range(len(shape))))
    moved = [int(a) for a in axes if shape[int(a)] != 1]
    return "transpose" if _moves_one_axis(moved) else "transpose_generic"


def _moves_one_axis(order: list[int]) -> bool:
    """Whether the permutation ``order`` is the identity with at most one axis taken out and put elsewhere."""
    for i in range(len(order)):
        rest = order[:i] + order[i + 1 :]
        if all(a < b for a, b in pairwise(rest)):
            return True
    return len(order) < 2


@dataclass(frozen=True)
class Refinement:
    """How the nodes of one base class (the class an op registers with its cost function) split by their shapes,
    layout or operands: ``refine`` returns one of ``classes``."""

    refine: Callable[[NodeView], str]
    classes: frozenset[str]


# The base classes whose nodes an engine runs with kernels of different efficiency, and how to tell them apart.
REFINEMENTS: Mapping[str, Refinement] = {
    "conv": Refinement(
        _conv_class,
        frozenset(
            {
                "conv",
                "conv1x1",
                "conv_wide",
                "conv_stem",
                "conv_mid",
                "conv_small",
                "conv_grouped",
                "depthwise",
                "batchnorm",  # a depthwise 1x1 convolution: the per-channel scale and shift of a folded BatchNorm
            }
        ),
    ),
    "conv_integer": Refinement(_integer_conv_class, frozenset({"conv_integer", "conv_integer_grouped"})),
    "qconv": Refinement(_qconv_class, frozenset({"qconv", "qconv_depthwise"})),
    "gemm": Refinement(_product_class, frozenset({"gemm", "matmul"})),
    "pool": Refinement(_pool_class, frozenset({"pool", "pool_nchw"})),
    "elementwise": Refinement(_elementwise_class, frozenset({"elementwise", "broadcast"})),
    "reorder": Refinement(_reorder_class, frozenset({"reorder", "reorder_short"})),
    "transpose": Refinement(_transpose_class, frozenset({"transpose", "transpose_generic"})),
}


def op_class(view: NodeView) -> str:
    """The ceiling class of a node (one of OP_CLASSES), or SHAPE for shape-only ops and OTHER for the rest.

    The base class is the one the op registered with its cost function (``onnxroof.costs.engine_class``; OTHER for
    an op without one); :data:`REFINEMENTS` splits convolutions by their weight's shape and the output's size,
    integer convolutions (ConvInteger, QLinearConv) into grouped or depthwise ones and the rest,
    matrix products by their second operand, pooling windows by layout (NCHWc or plain), elementwise ops by
    whether they broadcast along the innermost axis, and NCHWc output reorders by the size of the planes they
    write.
    """
    base = engine_class(view.domain, view.op_type) or OTHER
    refinement = REFINEMENTS.get(base)
    return base if refinement is None else refinement.refine(view)


def ceiling_for(device: Device, cls: str) -> tuple[str, Ceiling] | None:
    """The ceiling a node of class ``cls`` gets on ``device``: its own, else its fallback's; None when neither."""
    seen = set()
    while cls and cls not in seen:
        seen.add(cls)
        if cls in device.ceilings:
            return cls, device.ceilings[cls]
        cls = CLASS_FALLBACK.get(cls, "")
    return None


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


def _capacity(device: Device, size: float, scope: str) -> float:
    """A cache's capacity for one run: a private cache counts once per thread the profile was measured with."""
    threads = device.calibration.threads if device.calibration is not None else 1
    return size * threads if scope in ("per-core", "per-sm") else size


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
    if base != "conv" and not (base == "gemm" and view.op_type in _FUSED_ACTIVATION_GEMMS):
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


def epilogue_time(view: NodeView, device: Device) -> float:
    """A pass reading and writing the node's outputs, at the bandwidth of the level they sit in and the device's
    epilogue ceiling (calibrated on convolutions fused with Clip; a device without one uses its elementwise
    ceiling, see CLASS_FALLBACK). Zero for a node with no epilogue activation."""
    moved = epilogue_bytes(view)
    if moved <= 0 or epilogue_activation(view) is None:
        return 0.0
    _, bw = memory_level(device, moved)
    found = ceiling_for(device, "epilogue")
    eff = found[1].memory_efficiency(moved) if found is not None else 1.0
    return moved / (bw * eff)


def exposed_dram_time(device: Device, level_bandwidth: float, compute_s: float, memory_s: float) -> float:
    """The part of a kernel's memory time that adds to its compute time instead of overlapping it: for a
    compute-bound kernel whose working set is served at DRAM bandwidth (it fits no faster level), the share of
    its memory time that the device's calibrated ``dram_overlap`` says compute does not hide. Zero for any other
    kernel (its ceiling was calibrated with ``max``), and on a device without that figure."""
    if device.dram_overlap is None or level_bandwidth > device.memory_bandwidth.value or compute_s < memory_s:
        return 0.0
    return (1.0 - device.dram_overlap.value) * memory_s


def predict_engine(view: NodeView, cost: Cost, precision: str, device: Device) -> tuple[Prediction, EngineNote]:
    """The time onnxruntime's executor spends on one node, and why.

    ``compute = flops / (peak[precision] * eff_c)``; ``memory = (activation bytes / bw_level + weight bytes /
    bw_dram) / eff_m`` where ``eff_c``/``eff_m`` come from the node's class ceiling at its FLOPs/bytes and
    ``bw_level`` is the bandwidth of the smallest memory level its working set fits in; ``overhead`` is one
    per-node overhead (every dispatched node pays it, shape-only ones included). They combine under the device's
    overlap: ``max(compute, memory) + overhead`` for a calibrated (serial) host profile, plus the epilogue of a
    fused activation applied in a second pass (:func:`epilogue_activation`, ``Prediction.epilogue_time_s``) and
    the DRAM traffic a compute-bound kernel does not hide (:func:`exposed_dram_time`). Compute, memory, epilogue
    and exposed times are multiplied by the device's ``network_factor``, what the ceilings read on kernels run
    alone miss of a network's kernels run one after the other (calibrated on the reference block). The Prediction's
    ``peak_flops_s`` and ``bandwidth_bytes_s`` are the node's own ceilings (peak x eff_c, the effective
    bandwidth), so its ridge point and attainable FLOP/s read against the roof it actually runs under.

    The device's ``run_overhead`` is not included: it is paid once per ``session.run``, so callers add it once
    per model (see :func:`model_time`).
    """
    cls = op_class(view)
    peak, used = device.peak(precision)
    found = ceiling_for(device, cls) if cls not in (SHAPE, OTHER) else None
    ceiling_name, ceiling = found if found is not None else (None, None)
    eff_c = ceiling.compute_efficiency(cost.flops) if ceiling is not None and cost.flops > 0 else 1.0
    eff_m = ceiling.memory_efficiency(cost.bytes) if ceiling is not None and cost.bytes > 0 else 1.0
    ws = working_set(view, cost)
    level, bw = memory_level(device, ws)
    weights = weight_bytes(view, cost)
    dram = device.memory_bandwidth.value
    network = device.network_factor.value if device.network_factor is not None else 1.0
    compute = network * cost.flops / (peak * eff_c)
    memory = network * ((cost.bytes - weights) / bw + weights / dram) / eff_m
    overhead = device.launch_overhead.value
    effective_bw = cost.bytes / memory if memory > 0 else bw * eff_m / network
    epilogue = epilogue_activation(view)
    epilogue_s = network * epilogue_time(view, device)
    exposed = exposed_dram_time(device, bw, compute, memory)
    prediction = Prediction(
        compute_time_s=compute,
        memory_time_s=memory,
        overhead_time_s=overhead,
        predicted_time_s=roofline.combine(device.overlap, compute, memory, overhead) + epilogue_s + exposed,
        bound=roofline.bound_of(compute, memory, overhead),
        peak_flops_s=peak * eff_c / network,
        bandwidth_bytes_s=effective_bw,
        precision=used,
        epilogue_time_s=epilogue_s,
    )
    note = EngineNote(cls, ceiling_name, eff_c, eff_m, level, bw, ws, weights, epilogue, epilogue_s, exposed, network)
    return prediction, note


def model_time(node_times_s: list[float] | tuple[float, ...], device: Device) -> float:
    """A whole model's predicted latency: its nodes' predicted times plus the device's run overhead, once."""
    run = device.run_overhead.value if device.run_overhead is not None else 0.0
    return run + sum(node_times_s)
