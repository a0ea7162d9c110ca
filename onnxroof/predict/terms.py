"""The prediction terms by name: each term an engine may charge a node, declared once, and the rule that combines
a node's terms into its time.

A term has a name, a kind (where it adds), the op classes it applies to and a pure function of the node's context
(:class:`NodeContext`) and the device giving seconds. Its kind says where those seconds go:

- ``compute``: the compute side of the roofline (the kernel's arithmetic at its class's ceiling, a recurrent op's
  input projection);
- ``memory``: the memory side (activations at their level's bandwidth, weights at DRAM's, inputs written long
  before, output lines evicted by the node before);
- ``exposed``: memory traffic the arithmetic does not hide, and ``stall``: a pass the arithmetic waits for; both
  add to the compute side before it meets the memory side, and count only where the arithmetic with them outlasts
  the memory time (the memory time holds the weights and the output then);
- ``overhead``: what dispatching the node costs;
- ``after``: a pass after the kernel (a fused activation applied separately, the slow path of subnormal floats).

``time = combine(overlap, compute + exposed + stalls, memory, overhead) + after`` (:func:`combine`), each side the
sum of its terms in the order of :data:`TERMS`. Which terms apply is the engine profile's
(``onnxroof.predict.profiles``); a term asks nothing about the engine or the device's kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from onnxroof.costs import Cost, NodeView
from onnxroof.devices import OP_CLASSES, Device, FrozenMap
from onnxroof.predict import roofline
from onnxroof.predict.class_work import input_projection, stepped_flops
from onnxroof.predict.gpu_times import (
    PRODUCT_CLASSES,
    product_rate,
    product_shape,
    shortest_kernel,
    streamed_time,
    vector_rate,
)
from onnxroof.predict.subnormal import SubnormalWork, subnormal_time
from onnxroof.predict.term_times import (
    DRAM_OVERLAP_CLASSES,
    RECURRENT_CLASSES,
    STREAMING_CLASSES,
    WEIGHT_WAIT_CLASSES,
    bias_pass_time,
    distant_read_time,
    epilogue_time,
    exposed_dram_time,
    exposed_weight_time,
    output_write_time,
    projection_time,
    write_allocate_time,
)

__all__ = [
    "AFTER",
    "ALONE",
    "COMPUTE",
    "EXPOSED",
    "KINDS",
    "MEMORY",
    "OVERHEAD",
    "STALL",
    "TERMS",
    "Combined",
    "InModel",
    "NodeContext",
    "Term",
    "charge",
    "combine",
    "kernel_arithmetic",
    "shown",
    "term",
    "total",
]

COMPUTE, MEMORY, EXPOSED, STALL, OVERHEAD, AFTER = "compute", "memory", "exposed", "stall", "overhead", "after"
KINDS = (COMPUTE, MEMORY, EXPOSED, STALL, OVERHEAD, AFTER)


class InModel(NamedTuple):
    """What a node's place in a model adds to what the node itself says: ``traffic``, the bytes one inference of
    the model moves (the weights' reuse between runs is read there; None outside a model); ``subnormal``, its work
    on subnormal floats; ``reads``, (bytes, reuse distance) of the activations it reads; ``after``, the working set
    of the node run before it that moved data (0 for none)."""

    traffic: float | None = None
    subnormal: SubnormalWork | None = None
    reads: Sequence[tuple[float, float]] = ()
    after: float = 0.0


ALONE = InModel()  # a kernel run alone, as the calibration's benchmarks run it


class NodeContext(NamedTuple):
    """Everything a term reads about one node, built once (``engine.node_context``): its view and cost, its op
    class and why, the ceiling it runs under and the efficiencies read there, the peak at its precision, the memory
    level its working set fits in, its weights, the network factor it takes, the rate its weights come at (DRAM's
    bandwidth times ``reuse``, ``speedup`` being the model's reuse at its traffic) and its place in the model."""

    view: NodeView
    cost: Cost
    op_class: str
    reason: str
    ceiling: str | None
    compute_efficiency: float
    memory_efficiency: float
    peak: float
    precision: str
    level: str
    level_bandwidth: float
    working_set: float
    weights: float
    network: float
    dram: float
    speedup: float
    reuse: float
    around: InModel
    product_precision: str = ""  # the precision its product runs at on the engine (tf32 for fp32 where it does)

    @property
    def weight_read_s(self) -> float:
        """The weights' read at DRAM's rate times the reuse they get, in a network."""
        return self.network * self.weights / (self.dram * self.reuse)

    @property
    def kept_read_s(self) -> float:
        """In a model, the weights' read from where the model's traffic leaves them (whatever their size); 0
        outside one."""
        if self.around.traffic is None:
            return 0.0
        return self.network * self.weights / (self.dram * self.speedup)


# A term's seconds from the node's context, the device and the node's memory time (the memory side's terms summed so
# far: all of them for a term of another kind, which TERMS lists after the sides').
TermFn = Callable[[NodeContext, Device, float], float]


@dataclass(frozen=True)
class Term:
    """One prediction term: ``name``, ``kind`` (one of KINDS), the op classes it applies to (None: every class),
    its seconds, one line of doc, and ``line``: its part of a node's explanation, a format string of ``us`` (its
    microseconds) and ``note`` (the node's EngineNote); terms with the same line are shown as one, their seconds
    summed. An empty line shows nothing: the explanation's head states the roofline's own terms."""

    name: str
    kind: str
    seconds: TermFn
    doc: str
    classes: frozenset[str] | None = None
    line: str = ""


def _arithmetic(n: NodeContext, d: Device, _: float) -> float:
    return n.network * stepped_flops(n.view, n.cost, n.op_class) / (n.peak * n.compute_efficiency)


def _projection(n: NodeContext, d: Device, _: float) -> float:
    return n.network * projection_time(d, input_projection(n.view, n.op_class), n.peak)


def _activations(n: NodeContext, d: Device, _: float) -> float:
    return n.network * (n.cost.bytes - n.weights) / n.level_bandwidth / n.memory_efficiency


def _weights(n: NodeContext, d: Device, _: float) -> float:
    return n.weight_read_s / n.memory_efficiency


def _distant_reads(n: NodeContext, d: Device, _: float) -> float:
    reads = [(min(b, n.cost.bytes_read), distance) for b, distance in n.around.reads]  # no more than it reads
    return n.network * distant_read_time(d, reads, n.level_bandwidth, n.memory_efficiency)


def _write_allocate(n: NodeContext, d: Device, _: float) -> float:
    return n.network * write_allocate_time(d, n.op_class, n.working_set, n.around.after, n.cost.bytes_written)


def _bias_pass(n: NodeContext, d: Device, _: float) -> float:
    return n.network * bias_pass_time(n.view, d, n.op_class)


def _epilogue(n: NodeContext, d: Device, _: float) -> float:
    return n.network * epilogue_time(n.view, d)


def _exposed_dram(n: NodeContext, d: Device, memory_s: float) -> float:
    return exposed_dram_time(d, n.op_class, n.level_bandwidth, memory_s)


def _weight_wait(n: NodeContext, d: Device, _: float) -> float:
    return exposed_weight_time(d, n.op_class, n.weights, n.weight_read_s, n.kept_read_s)


def _output_write(n: NodeContext, d: Device, _: float) -> float:
    return n.network * output_write_time(n.view, d, n.op_class, n.working_set)


def _subnormal(n: NodeContext, d: Device, _: float) -> float:
    return n.network * subnormal_time(d, n.around.subnormal)


def _dispatch(n: NodeContext, d: Device, _: float) -> float:
    return d.launch_overhead.value


def _tensor_arithmetic(n: NodeContext, d: Device, _: float) -> float:
    return n.cost.flops / product_rate(d, n.product_precision or n.precision, product_shape(n.view))


def _vector_arithmetic(n: NodeContext, d: Device, _: float) -> float:
    return 0.0 if n.op_class in PRODUCT_CLASSES else n.cost.flops / vector_rate(d)


def _streamed(n: NodeContext, d: Device, _: float) -> float:
    return streamed_time(n.cost, n.weights, d)


def _kernel_latency(n: NodeContext, d: Device, _: float) -> float:
    return shortest_kernel(d) if n.cost.kernels > 0 else 0.0


_NOT_HIDDEN = "; {us:.3g} us of memory traffic not hidden by compute"

# Every term, in the order each side sums them and a node's explanation shows them; the compute and memory sides'
# terms first, so that charge() hands every other term the whole memory time.
TERMS: tuple[Term, ...] = (
    Term("arithmetic", COMPUTE, _arithmetic, "the FLOPs the kernel computes at its class's compute ceiling"),
    Term(
        "projection",
        COMPUTE,
        _projection,
        "a recurrent op's input projection, one product at its product class's ceiling (term_times.projection_time)",
        RECURRENT_CLASSES,
        "; input projection {us:,.0f} us as one product",
    ),
    Term(
        "tensor_arithmetic",
        COMPUTE,
        _tensor_arithmetic,
        "a product on the tensor cores: its FLOPs at the published large-product rate over its tiles' waves "
        "(gpu_times.tile_efficiency); one of a few rows on the CUDA cores (gpu_times.product_rate)",
        PRODUCT_CLASSES,
    ),
    Term(
        "vector_arithmetic",
        COMPUTE,
        _vector_arithmetic,
        "any other kernel's FLOPs on the CUDA cores at the fp32 peak and sustained clock (gpu_times.vector_rate)",
    ),
    Term("activations", MEMORY, _activations, "the activations at their level's bandwidth and the class's efficiency"),
    Term("weights", MEMORY, _weights, "the weights at DRAM's bandwidth times their reuse between runs"),
    Term(
        "distant_reads",
        MEMORY,
        _distant_reads,
        "inputs written long before, read from the level their reuse distance fits in (term_times.distant_read_time)",
        frozenset(OP_CLASSES),
        "; {us:.3g} us more reading inputs written long before",
    ),
    Term(
        "write_allocate",
        MEMORY,
        _write_allocate,
        "a streaming kernel's output lines the node before pushed out of its level (term_times.write_allocate_time)",
        STREAMING_CLASSES,
        "; {us:.3g} us writing over lines the node before pushed out of {note.level}",
    ),
    Term(
        "streamed_bytes",
        MEMORY,
        _streamed,
        "activations from L2 where they fit, else DRAM; weights from DRAM; at achievable rates (gpu_times)",
    ),
    Term(
        "bias_pass",
        STALL,
        _bias_pass,
        "a Gemm's C written into its output and read back (term_times.bias_pass_time)",
        frozenset({"gemm"}),
        "; C written into the output and read back, {us:.3g} us",
    ),
    Term(
        "epilogue",
        AFTER,
        _epilogue,
        "a fused activation applied in a second pass over the output (term_times.epilogue_time)",
        None,
        "; {note.epilogue} as a second pass over the output, {us:.3g} us",
    ),
    Term(
        "exposed_dram",
        EXPOSED,
        _exposed_dram,
        "a convolution's DRAM traffic its arithmetic does not hide (term_times.exposed_dram_time)",
        DRAM_OVERLAP_CLASSES,
        _NOT_HIDDEN,
    ),
    Term(
        "weight_wait",
        EXPOSED,
        _weight_wait,
        "the weights' read a product, dense convolution or recurrent op waits for (term_times.exposed_weight_time)",
        frozenset({"gemm"}) | WEIGHT_WAIT_CLASSES | RECURRENT_CLASSES,
        _NOT_HIDDEN,
    ),
    Term(
        "output_write",
        EXPOSED,
        _output_write,
        "a product's output written past the core's cache (term_times.output_write_time)",
        frozenset({"gemm"}),
        _NOT_HIDDEN,
    ),
    Term(
        "subnormal",
        AFTER,
        _subnormal,
        "the slow path of subnormal floats: an underflowing Softmax, its product (onnxroof.predict.subnormal)",
        None,
        "; {us:,.0f} us on subnormal floats (masked attention)",
    ),
    Term("dispatch", OVERHEAD, _dispatch, "what the executor spends dispatching one node (device.launch_overhead)"),
    Term(
        "kernel_latency",
        OVERHEAD,
        _kernel_latency,
        "what a kernel holds the GPU's stream beyond its work (gpu_times.shortest_kernel): launch to start, first "
        "loads, drain; a stream runs its kernels one after another, so it adds to the work (serial overlap)",
    ),
)
_BY_NAME: dict[str, Term] = {t.name: t for t in TERMS}
_KIND_OF: dict[str, str] = {t.name: t.kind for t in TERMS}


def term(name: str) -> Term:
    """The term of that name (a KeyError names an unknown one)."""
    return _BY_NAME[name]


def charge(node: NodeContext, device: Device, terms: Sequence[Term]) -> dict[str, float]:
    """Each of ``terms``' seconds for the node, by name, in their order (0 for a term whose classes the node's is
    not one of). The sides' terms come first (TERMS' order), so that a term of another kind reads the node's whole
    memory time."""
    cls = node.op_class
    seconds: dict[str, float] = {}
    memory = 0.0
    for t in terms:
        s = seconds[t.name] = t.seconds(node, device, memory) if t.classes is None or cls in t.classes else 0.0
        if t.kind == MEMORY:
            memory += s
    return seconds


def total(terms: Mapping[str, float], kind: str, but: str = "") -> float:
    """The seconds of a node's terms of one kind (``but`` one of them), summed in their order."""
    seconds = 0.0
    for name, s in terms.items():
        if name != but and _KIND_OF[name] == kind:
            seconds += s
    return seconds


class Combined(NamedTuple):
    """A node's terms combined: its compute, memory and overhead sides, its time, and its terms as charged (the
    exposed and stall terms 0 where the memory side outlasts the arithmetic with them)."""

    compute_s: float
    memory_s: float
    overhead_s: float
    time_s: float
    terms: Mapping[str, float]


def combine(terms: Mapping[str, float], overlap: str) -> Combined:
    """The node's time from its terms under an overlap rule (``roofline.combine``: 'serial' or 'max'): the exposed
    and stall terms add to the compute side where the arithmetic with them outlasts the memory side, and not
    otherwise, so that a kernel whose ceilings move it from one side to the other moves its time continuously; the
    after terms add to the combined time, in their order."""
    sums = dict.fromkeys(KINDS, 0.0)
    for name, s in terms.items():  # each kind's terms summed in their order
        sums[_KIND_OF[name]] += s
    compute, memory, exposed, stalls = sums[COMPUTE], sums[MEMORY], sums[EXPOSED], sums[STALL]
    if compute + exposed + stalls < memory:  # bound by its memory time, which holds its weights and its output
        terms = {n: 0.0 if _KIND_OF[n] in (EXPOSED, STALL) else s for n, s in terms.items()}
        exposed = stalls = 0.0
    time = roofline.combine(overlap, compute + exposed + stalls, memory, sums[OVERHEAD])
    for name, s in terms.items():
        if _KIND_OF[name] == AFTER:
            time += s
    return Combined(compute, memory, sums[OVERHEAD], time, FrozenMap(terms))


def kernel_arithmetic(measured_s: float, terms: Mapping[str, float]) -> tuple[float, float]:
    """(predicted, measured) seconds of a kernel's own arithmetic, the inverse of :func:`combine` on a compute-bound
    kernel: the compute side less the compute terms beside the arithmetic (an input projection), and the measured
    time less those, the exposed and the stall terms. The calibration reads a compute ceiling as their ratio, so
    that the ceiling applied with the same terms gives back the measured time."""
    beside = total(terms, COMPUTE, but="arithmetic")
    predicted = total(terms, COMPUTE) - beside
    return predicted, measured_s - total(terms, EXPOSED) - beside - total(terms, STALL)


def shown(terms: Mapping[str, float], note: Any) -> str:
    """The terms' lines of a node's explanation, in the terms' order: each line with its terms' seconds summed,
    where they are not 0."""
    lines: dict[str, float] = {}
    for name, s in terms.items():
        line = _BY_NAME[name].line
        if line:
            lines[line] = lines.get(line, 0.0) + s
    return "".join(line.format(us=s * 1e6, note=note) for line, s in lines.items() if s)
