"""From samples to a device's figures: the per-class ceilings (binned efficiency points), the size a shared cache
level serves at its bandwidth, the matrix products' rates, ``dram_overlap``, ``network_factor``, the costs of
subnormal floats, and the calibration's warnings (a busy machine, a class left without its ceiling).

Efficiencies are computed with the functions the prediction uses (``onnxroof.predict.engine.predict_engine`` on
the optimized graph's node, on a device without ceilings), so a calibrated point predicts back its measured
time.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import onnx

from onnxroof.devices import CEILING_NAMES, Ceiling, Device, FrozenMap, Sourced, WeightReuse, WeightWait
from onnxroof.ir import Graph
from onnxroof.ort import optimized
from onnxroof.ort.calibrate.classes import (
    ATTENTION_CLASSES,
    COMPUTE_CLASSES,
    INT8_CLASSES,
    MEMORY_CLASSES,
    PRODUCT_CLASSES,
    RECURRENT_CLASSES,
)
from onnxroof.ort.calibrate.jobs import Profiled, Sample
from onnxroof.ort.measure import OTHERS_LOAD_BOUND, fast_estimate
from onnxroof.predict import class_work, engine, op_classes, term_times, terms
from onnxroof.predict.analysis import analyze_graph, node_precision
from onnxroof.predict.memory import bytes_moved
from onnxroof.units import binary_bytes

__all__ = [
    "HOLDS",
    "STEAL_WARN",
    "bin_levels",
    "bin_points",
    "calibration_warnings",
    "class_ceilings",
    "conv_weight_wait",
    "dram_overlap",
    "effective_size",
    "efficiencies_over_one",
    "matrix_rate",
    "network_factor",
    "subnormal_costs",
    "unread_ceilings_warning",
    "weight_reuse",
]

HOLDS = 0.75  # a shared cache level serves a working set while its bandwidth there holds within this share
STEAL_WARN = 0.05  # share of CPU time taken by the hypervisor above which the calibration says so
_MAX_REUSE = 64.0  # the largest weight-reuse speedup the bisection looks for: far beyond any cache's over DRAM


PEAK_MIN_S = 1e-4  # a kernel shorter than this is dominated by fixed costs: its rate says little of the peak


def peak_candidates(samples: Sequence[Sample], precision: str = "fp32") -> list[tuple[float, str]]:
    """(FLOP/s, label) of the class benchmarks' kernels the ``precision`` peak may be read on: whole kernels of a
    compute class at that precision that ran at least PEAK_MIN_S. An epilogue sample is the time of a fused
    activation's pass alone, while its cost is the whole convolution's, so its rate is no kernel's and it is never
    a candidate; an 8-bit kernel runs on the int8 peak, not the fp32 one. A rate counts the FLOPs the kernel
    computes: an NCHWc convolution's taps inside its input (``op_classes.taps_inside``), as predictions count
    them."""
    return [
        (x.cost.flops * op_classes.taps_inside(x.view) / x.time_s, x.label)
        for x in samples
        if x.part == "node"
        and op_classes.op_class(x.view) in COMPUTE_CLASSES
        and node_precision(x.view.op_type, x.view.inputs, x.view.outputs, x.view.attrs) == precision
        and x.time_s >= PEAK_MIN_S
        and x.cost.flops > 0
    ]


def bin_levels(
    points: list[tuple[float, float, str]], factor: float = 1.6, least: int = 3
) -> tuple[tuple[float, float], ...]:
    """Memory points (bytes, efficiency, memory level) binned as ``bin_points`` bins them, each level's apart: an
    efficiency is a fraction of its level's bandwidth, and a group spanning two levels would give a kernel of one
    the median of the other's (a pass over an L3-sized output at the efficiency of those in L2). A level with fewer
    than ``least`` points is a group of its own. Where two levels' bytes overlap, the point of the level with the
    smaller bytes is kept at a shared byte count."""
    by_level: dict[str, list[tuple[float, float]]] = {}
    for work, efficiency, level in points:
        by_level.setdefault(level, []).append((work, efficiency))
    out: dict[float, float] = {}
    for group in sorted(by_level.values(), key=lambda g: min(w for w, _ in g)):
        for work, efficiency in bin_points(group, factor, least=min(least, len(group))):
            out.setdefault(work, efficiency)
    return tuple(sorted(out.items()))


def bin_points(
    points: list[tuple[float, float]], factor: float = 1.6, least: int = 3
) -> tuple[tuple[float, float], ...]:
    """Merge (work, efficiency) points whose work lies within ``factor`` of each other, and every group of fewer
    than ``least`` points with its neighbour by work, into groups that each hold their median efficiency across
    the works their kernels span: a point at the group's least work and one at its greatest (one point where
    they are equal), 4 significant figures each.

    A group of at least three is what makes the median robust: a busy moment that slowed one benchmark, or one
    shape that runs unlike its class, cannot set a point of the ceiling on its own. The median holds over the
    whole span, and the interpolation runs only between groups, so that a kernel the size of a group's smallest
    benchmark gets that group's efficiency rather than one drawn toward the group below it. A class with fewer
    points than ``least`` gets one group, their median."""
    points = sorted(p for p in points if p[0] > 0 and p[1] > 0 and math.isfinite(p[1]))
    groups: list[list[tuple[float, float]]] = []
    for p in points:
        if groups and (len(groups[-1]) < least or p[0] <= groups[-1][0][0] * factor):
            groups[-1].append(p)
        else:
            groups.append([p])
    if len(groups) > 1 and len(groups[-1]) < least:
        short = groups.pop()
        groups[-1] += short
    out: dict[float, float] = {}
    for g in groups:
        efficiency = float(f"{statistics.median(e for _, e in g):.4g}")
        for work in (g[0][0], g[-1][0]):
            out.setdefault(float(f"{work:.4g}"), efficiency)
    return tuple(sorted(out.items()))


def _memory_point(s: Sample, cls: str, compute_s: float, memory_s: float) -> bool:
    """Whether a sample of a compute class gives a point of its class's memory ceiling: a matrix product, a
    ConvInteger, a single-position convolution or a GroupQueryAttention whose data takes longer to stream than
    its products take at the peak (a product by a weight read cold with a few rows, a deep int8 layer on a small
    output, a squeeze-and-excitation product, a decode step whose heads each read a cache of their own: their time
    grows with their data). Its compute ceiling then stays that of the kernels whose arithmetic bounds them.

    A GroupQueryAttention whose query heads share their key/value heads (``num_heads`` above ``kv_num_heads``)
    gives a compute point whatever its bytes: onnxruntime runs each query head over its key/value head's cache, a
    group's heads one after the other, so every head after a group's first finds that cache in the core's caches
    and the group's time is its heads' products, which its bytes (one read of each cache) do not count."""
    if cls in ATTENTION_CLASSES:
        return memory_s > compute_s and not _shares_kv_heads(s)
    streams = cls in PRODUCT_CLASSES or cls in {"conv_integer", "conv_vector"}
    return streams and memory_s > compute_s


def _shares_kv_heads(s: Sample) -> bool:
    """Whether an attention node's query heads share key/value heads (``kv_num_heads`` below ``num_heads``)."""
    heads = int(s.view.attr("num_heads", 0) or 0)
    return 0 < int(s.view.attr("kv_num_heads", heads) or heads) < heads


def class_ceilings(samples: Sequence[Sample], bare: Device, threads: int) -> dict[str, Ceiling]:
    """Per class, (work, efficiency) points: the roofline time on the bare device over the measured time (less
    the time the prediction adds to a compute-bound kernel's arithmetic: the weights a matrix product waits for, a
    Gemm's pass over its output for C). The work is the node's FLOPs or bytes, or those of one unit its kernel
    repeats (``class_work.ceiling_work``: one product of a batched matmul, one group of a plain-layout grouped
    convolution, one row of a softmax, one time step of a recurrent op, one head of a GroupQueryAttention), as the
    prediction reads them.

    A compute class's points are by FLOPs against the peak of the precision the node computes at (int8 for the
    8-bit convolutions and MatMulNBits at accuracy_level 4), a memory class's by bytes against the level
    bandwidth; a matrix product, a ConvInteger or a GroupQueryAttention bound by its data (it streams longer than
    its products take) gives a memory point of its class. An
    epilogue sample gives a point of the epilogue ceiling: its pass's bytes and time. A recurrent op's points
    are read after the products' ceilings, on the bare device with those: its input projection runs as one
    product (the ``projection`` term), and only the rest of its time is its steps'."""
    points = _Points()
    steps = [s.part != "epilogue" and op_classes.op_class(s.view) in RECURRENT_CLASSES for s in samples]
    for s, stepped in zip(samples, steps, strict=True):
        if not stepped:
            points.add(s, bare)
    products = {c: ceiling for c, ceiling in _ceilings(points, threads).items() if c in PRODUCT_CLASSES}
    with_products = replace(bare, ceilings=FrozenMap(products))
    for s, stepped in zip(samples, steps, strict=True):
        if stepped:
            points.add(s, with_products)
    return _ceilings(points, threads)


class _Points:
    """The (work, efficiency) points of each class, and the benchmarks they came from."""

    def __init__(self) -> None:
        self.compute: dict[str, list[tuple[float, float]]] = {}
        self.memory: dict[str, list[tuple[float, float, str]]] = {}  # (bytes, efficiency, memory level)
        self.labels: dict[str, list[str]] = {}

    def add(self, s: Sample, device: Device) -> None:
        """The point a sample gives on ``device`` (the bare device, with the products' ceilings for a recurrent
        op), if its class has a ceiling."""
        if s.part == "epilogue":
            pass_s = term_times.epilogue_time(s.view, device)
            level, _ = term_times.epilogue_level(s.view, device)
            self.memory.setdefault("epilogue", []).append((term_times.epilogue_bytes(s.view), pass_s / s.time_s, level))
            self.labels.setdefault("epilogue", []).append(s.label)
            return
        cls = op_classes.op_class(s.view)
        if cls not in COMPUTE_CLASSES and cls not in MEMORY_CLASSES:
            return
        precision = node_precision(s.view.op_type, s.view.inputs, s.view.outputs, s.view.attrs)
        pred, note = engine.predict_engine(s.view, s.cost, precision, device)
        flops, nbytes = class_work.ceiling_work(s.view, s.cost, cls)
        if cls in COMPUTE_CLASSES and not _memory_point(s, cls, pred.compute_time_s, pred.memory_time_s):
            # The arithmetic's share of the measured time: the terms the prediction adds to it (a product's cold
            # weights, a Gemm's pass over its output for C, a recurrent op's input projection at its product's
            # ceiling) are not the kernel's rate, and the same named terms come off here.
            predicted_s, arithmetic_s = terms.kernel_arithmetic(s.time_s, note.terms)
            if flops <= 0 or arithmetic_s <= 0:
                return
            self.compute.setdefault(cls, []).append((flops, predicted_s / arithmetic_s))
        else:
            if nbytes <= 0:
                return
            # A product bound by its weights reads them from DRAM whatever level its working set names: its
            # points bin together. An attention's cache is an activation, in the level its working set names.
            level = note.level if cls in MEMORY_CLASSES or cls in ATTENTION_CLASSES else "weights"
            self.memory.setdefault(cls, []).append((nbytes, pred.memory_time_s / s.time_s, level))
        self.labels.setdefault(cls, [])
        if s.label not in self.labels[cls]:
            self.labels[cls].append(s.label)


def _ceilings(points: _Points, threads: int) -> dict[str, Ceiling]:
    """Each class's ceiling from its binned points, with its source."""
    by_class, by_memory, labels = points.compute, points.memory, points.labels
    out = {}
    for cls in [c for c in CEILING_NAMES if c in by_class or c in by_memory]:
        # A recurrent benchmark's sample is already one kernel's rate over its many time steps, run pass after
        # pass: each is a point of its own, so that a step whose weights stay in L2 (hidden 64 to 128) and one
        # whose weights do not (256 and up), each timed at a few sizes only, are not merged into one median.
        least = 1 if cls in RECURRENT_CLASSES else 3
        compute, memory = bin_points(by_class.get(cls, []), least=least), bin_levels(by_memory.get(cls, []))
        if not compute and not memory:
            continue
        what = "; ".join(labels[cls][:6]) + (f"; and {len(labels[cls]) - 6} more" if len(labels[cls]) > 6 else "")
        parts = []
        if compute:
            parts.append(
                f"fraction of the {'int8' if cls in INT8_CLASSES else 'fp32'} peak reached, by FLOPs, by "
                f"{len(by_class[cls])} onnxruntime {cls} kernel(s)"
                + (" per time step, their input projection apart" if cls in RECURRENT_CLASSES else "")
            )
        if memory and cls == "epilogue":
            parts.append(
                f"fraction of the memory level's bandwidth reached, by bytes moved, by the fused Clip's pass "
                f"over the output of {len(by_memory[cls])} convolution(s) (their time with Clip less their "
                f"time with Relu)"
            )
        elif memory:
            kind = "data-bound " if cls in ATTENTION_CLASSES else "weight-bound " if cls in COMPUTE_CLASSES else ""
            parts.append(
                f"fraction of the memory level's bandwidth reached, by bytes moved, by {len(by_memory[cls])} "
                f"{kind}{cls} kernel(s)"
            )
        source = f"calibrated: {'; '.join(parts)}; {threads} thread(s) ({what})"
        out[cls] = Ceiling(compute=compute, memory=memory, source=source)
    return out


def effective_size(
    nominal: int, level_bytes: int, level_bw: float, probes: Sequence[tuple[int, float]]
) -> tuple[int, str]:
    """The largest working set a shared cache level serves at its measured bandwidth, and a note on how it was
    found: ``level_bw`` is measured on ``level_bytes``; ``probes`` are (bytes, bandwidth) at larger working sets.

    The level's size is the largest probe whose bandwidth holds within HOLDS of ``level_bw``, or the size of the
    level's own benchmark when even the smallest probe falls below; the reported ``nominal`` size stands when
    every probe holds. A virtual machine reports the host's whole last-level cache, which other tenants share:
    a working set well inside that size can already run at DRAM speed.
    """
    size = level_bytes
    for nbytes, bandwidth in sorted(probes):
        if bandwidth < HOLDS * level_bw:
            return size, (
                f"serves up to {binary_bytes(size)}: at {binary_bytes(nbytes)} its bandwidth fell to "
                f"{bandwidth / level_bw:.0%} of the level's ({bandwidth / 1e9:.1f} GB/s)"
            )
        size = nbytes
    return nominal, ""


def matrix_rate(job: Profiled | None, profiler_overhead: float, n: int) -> float | None:
    """OP/s of an n x n x n matrix product benchmark (None when the provider has no kernel for it)."""
    if job is None:
        return None
    times = [t for ts in job.kernel_times().values() for t in ts]
    if not times:
        return None
    return 2.0 * n**3 / max(fast_estimate(times) - profiler_overhead, 1e-9)


def dram_overlap(sample: Sample, device: Device, how: str) -> Sourced | None:
    """The share of a convolution's DRAM traffic time that its computation hides, from a convolution whose data is
    larger than every cache: ``1 - (measured - compute) / memory``, compute at the conv ceiling (fitted on
    convolutions whose data sits in a cache) and memory at the DRAM bandwidth, clipped to [0, 1]. None when
    its data fits a cache faster than DRAM after all or it is memory-bound: then there is nothing to
    measure it on."""
    prediction, note = engine.predict_engine(sample.view, sample.cost, "fp32", device)
    compute, memory = prediction.compute_time_s, prediction.memory_time_s
    if note.level_bandwidth > device.memory_bandwidth.value or memory <= 0 or compute < memory:
        return None
    hidden = min(max(1.0 - (sample.time_s - compute) / memory, 0.0), 1.0)
    return Sourced(
        float(f"{hidden:.3g}"),
        (
            f"calibrated: {sample.label} ran {sample.time_s * 1e3:.3g} ms against {compute * 1e3:.3g} ms of compute at "
            f"the conv ceiling and {memory * 1e3:.3g} ms of DRAM traffic ({binary_bytes(note.working_set)}); {how}"
        ),
        FrozenMap(measured_s=sample.time_s, compute_s=compute, memory_s=memory, working_set_bytes=note.working_set),
    )


def network_factor(device: Device, model: onnx.ModelProto, typical_s: float, how: str) -> Sourced:
    """The factor network's (``network.factor_network``, ``model``) median run, ``typical_s``, over its prediction on
    ``device`` (which has no factor yet).

    Every ceiling is read on a kernel run alone, again and again, by its fast estimate; in a network each kernel
    follows others that took the caches, the branch predictors and the prefetchers for themselves, a shared
    machine's neighbours weigh differently on a network's larger working sets than on the small benchmarks, and
    a user's timing loop reports the median run, with the jitter the machine always has. The network is a few
    dozen typical kernels run one after the other as in a model, timed in the same passes as the benchmarks, so its
    ratio carries all three to every prediction, and the misfits of single kernels to their class ceilings average
    out over it."""
    analysis = analyze_graph(optimized.engine_graph(model, device), device, engine=True)
    predicted = analysis.totals.predicted_time_s
    # The factor scales the kernels' work, not the fixed costs: the run overhead and each node's dispatch.
    fixed = (device.run_overhead.value if device.run_overhead is not None else 0.0) + sum(
        n.prediction.overhead_time_s for n in analysis.nodes
    )
    factor = (typical_s - fixed) / max(predicted - fixed, 1e-12)
    return Sourced(
        float(f"{factor:.3g}"),
        (
            f"calibrated: the factor network (onnxroof.ort.calibrate.network) ran {typical_s * 1e3:.3g} ms a run "
            f"against {predicted * 1e3:.3g} ms predicted from its kernels' ceilings; {how}"
        ),
        FrozenMap(median_s=typical_s, predicted_s=predicted, fixed_s=fixed),
    )


def subnormal_costs(
    plain: Mapping[str, Sequence[float]],
    masked: Mapping[str, Sequence[float]],
    underflows: int,
    products: int,
    how: str,
) -> tuple[Sourced | None, Sourced | None]:
    """(``softmax_underflow``, ``subnormal_product``): the seconds one Softmax element whose exp underflows and one
    multiply-add with a subnormal operand add, from the kernel times of a masked attention block
    (``graphs.masked_attention``, nodes ``softmax`` and ``context``) with its mask at -100 (``masked``) and at 0
    (``plain``): each node's fast time masked less unmasked, over the block's ``underflows`` masked elements and
    ``products`` multiply-adds on them. Each is None where a node's times are missing; 0 where masking does not
    slow it down (a CPU that handles subnormals in hardware)."""

    def per_element(node: str, count: int, what: str) -> Sourced | None:
        if not plain.get(node) or not masked.get(node) or count <= 0:
            return None
        slow, fast = fast_estimate(masked[node]), fast_estimate(plain[node])
        value = max(slow - fast, 0.0) / count
        return Sourced(
            float(f"{value:.3g}"),
            f"calibrated: attention's {node} node ran {slow * 1e6:.4g} us masked against {fast * 1e6:.4g} us unmasked, "
            f"over {count} {what}; {how}",
            FrozenMap(masked_s=slow, unmasked_s=fast, count=count),
        )

    return (
        per_element("softmax", underflows, "elements whose exp underflows"),
        per_element("context", products, "multiply-adds with a subnormal operand"),
    )


def weight_reuse(device: Device, loops: Sequence[tuple[onnx.ModelProto, float]], how: str) -> WeightReuse | None:
    """How much faster than from DRAM weights come back between back-to-back runs, from graphs of matrix-vector
    products timed that way (``loops``: each graph and its seconds a run), one point per graph at the bytes it
    moves a run (``bytes_moved``: its weights and a few vectors).

    A graph's speedup is the one at which its prediction on ``device`` (which has no weight_reuse yet) equals its
    measured time, found by bisection between 1 and ``_MAX_REUSE``: everything else in the prediction (the gemv
    ceiling, read on cold weights, and the overheads) stays as it is, so the speedup is what a model's weights
    gain by being read warm. The points do not rise with the traffic (a model moving more cannot keep more of its
    weights) and are at least 1. None without loops."""
    points: list[tuple[float, float]] = []
    for model, seconds in loops:
        graph = optimized.engine_graph(model, device)
        traffic = bytes_moved(graph)

        def predicted(speedup: float, graph: Graph = graph, traffic: float = traffic) -> float:
            trial = replace(device, weight_reuse=WeightReuse(((traffic, speedup),), ""))
            return analyze_graph(graph, trial, engine=True).totals.predicted_time_s

        lo, hi = 1.0, _MAX_REUSE
        if predicted(lo) <= seconds:
            hi = lo
        elif predicted(hi) >= seconds:
            lo = hi
        for _ in range(40 if lo < hi else 0):  # in log space: the speedup's relative error falls below 1e-9
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if predicted(mid) > seconds else (lo, mid)
        points.append((traffic, lo))
    if not points:
        return None
    points.sort()
    kept = [points[0]]
    for traffic, speedup in points[1:]:
        kept.append((traffic, min(speedup, kept[-1][1])))
    tidy = tuple((f, float(f"{max(x, 1.0):.3g}")) for f, x in kept)
    shown = ", ".join(f"{x:.3g}x at {binary_bytes(int(f))}" for f, x in tidy)
    return WeightReuse(
        tidy,
        f"calibrated: chains of 4 MatMul (1xN) @ (NxN) timed back to back read their weights at {shown} of the DRAM "
        f"rate their prediction reads cold weights at; {how}",
    )


def conv_weight_wait(waits: Sequence[tuple[float, float, float]], dram_bandwidth: float, how: str) -> WeightWait | None:
    """How much of its weights' read a compute-bound convolution waits for, from convolutions profiled with their
    weights cold and warm (``WaitPair.wait``: their weights' and output's bytes, the seconds the cold run's kernel
    took longer): per convolution, that time less its output's write-allocate (each line read from memory before
    it is written, at ``dram_bandwidth``) over its weights' read at ``dram_bandwidth``; a point per weight size (the
    median where convolutions share one), a share never below 0. None without a measured convolution."""
    by_bytes: dict[float, list[float]] = {}
    for weights, output, extra_s in waits:
        share = (extra_s - output / dram_bandwidth) * dram_bandwidth / weights
        by_bytes.setdefault(weights, []).append(max(share, 0.0))
    if not by_bytes:
        return None
    points = tuple((w, float(f"{statistics.median(shares):.3g}")) for w, shares in sorted(by_bytes.items()))
    shown = ", ".join(f"{x:.3g} at {binary_bytes(int(w))}" for w, x in points)
    return WeightWait(
        points,
        f"calibrated: {len(waits)} convolution(s) profiled with their weights cold and warm, the share of their "
        f"weights' read at the DRAM bandwidth the cold runs took longer, their outputs' write-allocate apart: "
        f"{shown}; {how}",
    )


def calibration_warnings(
    duration: float,
    budget_s: float,
    steal: float | None = None,
    others_cores: float | None = None,
    cpus: int = 1,
    threads: int = 1,
) -> list[str]:
    """A busy machine and an overrun budget, in words. Busy means load from elsewhere: CPU time the hypervisor
    gave other guests (``steal``, a share of all CPU time) or other processes on this machine (``others_cores``,
    the cores they kept busy on average), past the bound measurements warn at (measure.OTHERS_LOAD_BOUND of the
    cores the calibration leaves free)."""
    out = []
    if steal is not None and steal > STEAL_WARN:
        out.append(
            f"the hypervisor took {steal:.0%} of the CPU time while calibrating (steal time in /proc/stat): "
            f"other guests were busy and every number may be pessimistic; calibrate again when they are idle"
        )
    if others_cores is not None and others_cores > OTHERS_LOAD_BOUND * max(cpus - threads, 1):
        out.append(
            f"other processes kept {others_cores:.1f} of {cpus} CPU cores busy while calibrating ({threads} "
            f"thread(s) calibrated): the ceilings may be pessimistic; calibrate again when they are idle"
        )
    if duration > budget_s:
        out.append(f"the calibration took {duration:.0f} s, over its {budget_s:.0f} s budget")
    return out


def efficiencies_over_one(device: Device) -> str | None:
    """The classes whose ceilings hold points above 100% on ``device``, each with its highest, and why, in one
    line; None where there are none.

    A memory point's efficiency is its kernel's rate over the bandwidth of the level its whole working set fits in,
    as its level's chain of Neg measured it: a working set just past a level's size still finds part of its data in
    that faster level, and a kernel that streams better than Neg does beats the chain. A compute point over 100%
    beat the benchmarks its peak was read on. Either way the prediction reads the kernel's own rate back
    (efficiency times the peak or bandwidth): the figure is no error, it says what the peak and the level do not."""
    over: dict[str, dict[str, float]] = {"memory": {}, "compute": {}}
    for cls, ceiling in device.ceilings.items():
        for table, points in (("memory", ceiling.memory), ("compute", ceiling.compute)):
            highest = max((e for _, e in points), default=0.0)
            if highest > 1.0:
                over[table][cls] = highest
    parts = []
    if over["memory"]:
        named = ", ".join(f"{cls} ({_percent(e)})" for cls, e in over["memory"].items())
        parts.append(
            f"memory for {named}: faster than the level their working set is counted in (one just past a level's "
            "size finds part of its data in the faster level; a level's bandwidth is its chain of Neg's)"
        )
    if over["compute"]:
        named = ", ".join(f"{cls} ({_percent(e)})" for cls, e in over["compute"].items())
        parts.append(f"compute for {named}: faster than the benchmarks their peak was read on")
    if not parts:
        return None
    return "efficiencies over 100%: " + "; ".join(parts) + "; predictions read each kernel's own rate back"


def _percent(share: float) -> str:
    """A share over 1 as a percentage, with a decimal where whole percents would round it to 100%."""
    return f"{share:.0%}" if share >= 1.005 else f"{share:.1%}"


def unread_ceilings_warning(measured: Iterable[str], device: Device) -> str | None:
    """A warning naming the classes the suite measures that got no ceiling on ``device`` (none of their samples
    survived: a fused activation's pass whose difference was lost in the machine's noise, say) and what their
    kernels are predicted with instead: the ceiling their fallback names (op_classes.CLASS_FALLBACK), else the
    device's peak and bandwidth. None when every measured class has its ceiling."""
    missing = sorted(set(measured) - set(device.ceilings))
    if not missing:
        return None
    used = []
    for cls in missing:
        found = op_classes.ceiling_for(device, cls)
        used.append(f"{cls} uses the {found[0]} ceiling" if found is not None else f"{cls} the peak and bandwidth")
    return (
        f"no ceiling read for {', '.join(missing)}: none of their benchmarks gave a usable time (a difference lost "
        f"in the machine's noise); {'; '.join(used)}; calibrate again for their own"
    )
