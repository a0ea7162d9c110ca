"""The Device schema: precisions, op classes, and the frozen dataclasses a device profile is made of.

``onnxroof.devices`` documents the file format; ``onnxroof.devices.files`` reads and writes it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onnxroof.devices.classes import TABLE
from onnxroof.errors import UserError

PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
KINDS: tuple[str, ...] = ("gpu", "cpu", "tpu")
OVERLAPS: tuple[str, ...] = ("max", "serial")
CACHE_SCOPES: tuple[str, ...] = ("per-core", "per-sm", "shared")

# The op classes a calibrated device may hold a ceiling for (``[ceilings.<class>]``), in the order a device file
# lists them: ``onnxroof.predict.op_classes.op_class`` maps every node to one of them (or to "shape" / "other",
# which never have a ceiling). PART_CEILINGS are ceilings for a part of a node rather than for a class of nodes
# ("epilogue": the second pass over a convolution's or Gemm's output that a fused activation other than Relu
# costs). Each is declared once, with its fallback, roof and unit of work, in onnxroof.devices.classes.TABLE.
OP_CLASSES: tuple[str, ...] = tuple(c.name for c in TABLE if not c.part)
PART_CEILINGS: tuple[str, ...] = tuple(c.name for c in TABLE if c.part)

# Every ceiling a device may hold, in the order a device file lists them.
CEILING_NAMES: tuple[str, ...] = OP_CLASSES + PART_CEILINGS

# Which peak a precision uses when the device lists none for it: the first entry of its chain that the device
# lists. Every chain contains fp32, bf16 and fp16, and every device must list at least one of those three, so
# every precision resolves on every device.
#   - a narrower float falls back to fp16 first (int8 and fp8 run on the same matrix units where they exist),
#     then to the other 16-bit format, then to fp32;
#   - fp64 and tf32 fall back to fp32 (consumer parts list fp64 by architecture; TPUs list neither);
#   - fp32 falls back to bf16 for TPUs, which list only bf16/int8/fp8 (XLA's default precision runs f32
#     matrix products as bf16 passes on the MXU), then to fp16;
#   - fp16 falls back to fp32 (an engine computes half tensors in fp32 where there is no half-rate hardware),
#     then to bf16 (TPUs).
FALLBACK: Mapping[str, tuple[str, ...]] = {
    "fp64": ("fp64", "fp32", "bf16", "fp16"),
    "fp32": ("fp32", "bf16", "fp16"),
    "tf32": ("tf32", "fp32", "bf16", "fp16"),
    "fp16": ("fp16", "fp32", "bf16"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp8": ("fp8", "fp16", "bf16", "fp32"),
    "int8": ("int8", "fp16", "bf16", "fp32"),
}
# Every device lists a peak for at least one of these: each precision's FALLBACK chain ends in them.
TERMINAL_PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")

# Other spellings a user (or an ONNX dtype name) may give for a precision.
_PRECISION_ALIASES: Mapping[str, str] = {
    "double": "fp64",
    "float64": "fp64",
    "f64": "fp64",
    "float": "fp32",
    "float32": "fp32",
    "single": "fp32",
    "f32": "fp32",
    "tensorfloat32": "tf32",
    "half": "fp16",
    "float16": "fp16",
    "f16": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "float8e4m3fn": "fp8",
    "float8e5m2": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "uint8": "int8",
    "i8": "int8",
}


def _no_inputs() -> Mapping[str, float]:
    return FrozenMap()


@dataclass(frozen=True)
class Sourced:
    """A number and where it comes from (a datasheet line, a paper's table, or a stated derivation). A calibrated
    figure's ``inputs`` are the measured numbers it was computed from, by name, each name ending in its unit
    (``_s`` seconds, ``bytes``, ``_bytes_s``, ``_flops_s``, ``_hz``; a bare count otherwise): the numbers its
    ``source`` prose states, to check a figure against without reading prose. Empty for a datasheet figure and for
    a file written before they were recorded."""

    value: float
    source: str
    inputs: Mapping[str, float] = dataclasses.field(default_factory=_no_inputs)


@dataclass(frozen=True)
class Peak:
    """Peak throughput for one precision in FLOP/s (OP/s for int8).

    ``value`` is the dense figure when ``dense`` is true; ``sparse_value`` optionally records a datasheet's
    2:4-structured-sparsity figure, which is informative only and never used as the peak; ``inputs`` the measured
    numbers a calibrated peak came from (see Sourced).
    """

    value: float
    dense: bool
    source: str
    sparse_value: float | None = None
    inputs: Mapping[str, float] = dataclasses.field(default_factory=_no_inputs)  # as Sourced's


@dataclass(frozen=True)
class CacheLevel:
    """One level of on-chip memory: its size in bytes, whether it is private or shared, optional bandwidth, and the
    measured numbers a calibrated level came from (``inputs``, see Sourced)."""

    level: str
    size: float
    bandwidth: float | None
    source: str
    scope: str = "shared"  # per-core | per-sm | shared (by the whole chip)
    inputs: Mapping[str, float] = dataclasses.field(default_factory=_no_inputs)  # as Sourced's


def _interpolate(points: tuple[tuple[float, float], ...], work: float) -> float:
    """Efficiency at ``work`` from (work, efficiency) points sorted by work: linear in log(work), constant
    outside the measured range; 1 when there are no points."""
    if not points:
        return 1.0
    if work <= points[0][0]:
        return points[0][1]
    if work >= points[-1][0]:
        return points[-1][1]
    for (w0, e0), (w1, e1) in itertools.pairwise(points):
        if work <= w1:
            frac = (math.log(work) - math.log(w0)) / (math.log(w1) - math.log(w0))
            return e0 + frac * (e1 - e0)
    return points[-1][1]  # pragma: no cover - the loop always returns


@dataclass(frozen=True)
class Ceiling:
    """How close the kernels of one op class come to the roofline on a calibrated host.

    ``compute`` holds (FLOPs of a kernel, fraction of the device's peak it reaches) points and ``memory``
    (bytes a kernel moves, fraction of the bandwidth of the memory level its data sits in) points, each sorted
    by work. Efficiencies are interpolated in log(work) so that small kernels, which pay fixed costs a single
    peak ignores, get the lower efficiency measured on small kernels. A missing table means efficiency 1.
    A memory efficiency may exceed 1 where the class streams faster than its level's bandwidth benchmark.
    """

    compute: tuple[tuple[float, float], ...]
    memory: tuple[tuple[float, float], ...]
    source: str

    def compute_efficiency(self, flops: float) -> float:
        """Fraction of the peak a kernel of this class doing ``flops`` FLOPs reaches."""
        return _interpolate(self.compute, flops)

    def memory_efficiency(self, nbytes: float) -> float:
        """Fraction of its memory level's bandwidth a kernel of this class moving ``nbytes`` bytes reaches."""
        return _interpolate(self.memory, nbytes)


@dataclass(frozen=True)
class WeightReuse:
    """How many times faster than from DRAM a model's weights are read in back-to-back runs, by the bytes one
    inference moves (its ``traffic``: every kernel's inputs and outputs, weights included). A model that moves
    little finds its weights where its previous run left them, in the last cache level; one that moves much
    streams them from DRAM every run.

    ``points`` are (traffic bytes, speedup) pairs sorted by traffic, interpolated linearly in log(traffic)
    and held constant beyond the measured range; a speedup is never below 1.
    """

    points: tuple[tuple[float, float], ...]
    source: str

    def speedup(self, traffic: float) -> float:
        """How many times DRAM's rate a model moving ``traffic`` bytes a run reads its weights at."""
        return max(_interpolate(self.points, traffic), 1.0)


@dataclass(frozen=True)
class WeightWait:
    """How much of its weights' read a compute-bound convolution waits for on top of its arithmetic, by its weights'
    bytes: the time the convolution takes longer with its weights read cold (from DRAM) than with them in the
    core's cache, as a share of ``weight bytes / DRAM bandwidth``. Its kernel reads each block of filters as it
    reaches it, and how much of that read its arithmetic hides depends on the bank's size: the calibration
    measures it at a few sizes.

    ``points`` are (weight bytes, share) pairs sorted by bytes, interpolated linearly in log(bytes) and held
    constant beyond the measured range; a share is never below 0.
    """

    points: tuple[tuple[float, float], ...]
    source: str

    def share(self, weight_bytes: float) -> float:
        """The share of ``weight_bytes / DRAM bandwidth`` a convolution with that many bytes of weights waits for."""
        return max(_interpolate(self.points, weight_bytes), 0.0)


@dataclass(frozen=True)
class Calibration:
    """How a calibrated device profile was measured: engine, provider, threads, host, when, how long, and what
    went wrong (``warnings``, e.g. a busy machine). ``profiler_overhead`` is what the engine's profiler adds to
    each node's reported kernel time (seconds), for comparing predictions with profiled per-node times;
    ``reference_time_s`` the time of a run of the reference block (``onnxroof.ort.reference``) then, to detect a
    machine that has since slowed down or sped up; ``suite`` the version of onnxroof's benchmark suite that measured
    it (1 for a file without the field), so that a cached profile lacking what the current suite measures is
    redone."""

    provider: str
    threads: int
    onnxruntime: str
    cpu: str
    date: str
    duration_s: float
    warnings: tuple[str, ...] = ()
    profiler_overhead: float | None = None
    reference_time_s: float | None = None
    suite: int = 1

    def describe(self) -> str:
        """The profile in one line, as every output that predicts on it names it: 'AMD EPYC (family 25 model 1,
        AVX2), 1 thread, onnxruntime 1.23.2, calibrated 2026-12-01' (the provider where it is not the CPU's)."""
        threads = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        provider = "" if self.provider.lower() == "cpu" else f" {self.provider}"
        day = self.date.split("T", 1)[0]
        return f"{self.cpu}, {threads}, onnxruntime {self.onnxruntime}{provider}, calibrated {day}"


class FrozenMap(dict):
    """A read-only, hashable dict, so that a frozen Device is hashable and cannot be changed in place.

    A dict subclass (rather than a Mapping proxy) so that ``dataclasses.asdict`` and ``json.dumps`` handle it.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    # dict declares __hash__ = None (a mutable mapping is unhashable); this read-only one is hashable.
    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __copy__(self) -> FrozenMap:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenMap:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"


def normalize_precision(precision: str) -> str:
    """The canonical key (one of PRECISIONS) for a precision name; accepts e.g. 'float16', 'BF16', 'half'."""
    name = str(precision).strip().lower().replace("_", "").replace("-", "")
    if name in PRECISIONS:
        return name
    if name in _PRECISION_ALIASES:
        return _PRECISION_ALIASES[name]
    raise UserError(
        f"unknown precision {precision!r}",
        hint=f"use one of {', '.join(PRECISIONS)}",
    )


# The GPU figures a device table may hold under ``gpu`` (see GpuFigures), each a sourced number.
GPU_FIGURES = (
    "sm_count",
    "boost_clock",
    "sustained_clock",
    "dram_achievable",
    "l2_bandwidth",
    "shortest_kernel",
    "nvlink_bandwidth",
    "pcie_bandwidth",
)


@dataclass(frozen=True)
class GpuFigures:
    """What a GPU's structure and published microbenchmarks say beyond its datasheet peaks, each with its source:
    ``sm_count`` (streaming multiprocessors, or compute units), ``boost_clock`` (Hz: the clock the datasheet's
    peaks assume) and ``sustained_clock`` (Hz: the clock a published run held under sustained load),
    ``gemm_achievable`` (FLOP/s per precision: the most a published large matrix-product benchmark reached) and
    ``gemm_sustained`` (what one held over minutes, where a power cap lowers it: the rate a model's run sees),
    ``dram_achievable`` (bytes/s: a published streaming benchmark's), ``l2_bandwidth`` (bytes/s) and
    ``shortest_kernel`` (seconds: the least time a kernel holds the stream when kernels run back to back);
    ``nvlink_bandwidth`` and ``pcie_bandwidth`` (bytes/s one GPU sends to its peers each way, over NVLink where
    the GPUs have it, else over PCIe: what a tensor-parallel all-reduce moves at). A figure
    no publication gives is absent, or its source says "assumed"."""

    sm_count: Sourced | None = None
    boost_clock: Sourced | None = None
    sustained_clock: Sourced | None = None
    gemm_achievable: Mapping[str, Sourced] = dataclasses.field(default_factory=FrozenMap)
    gemm_sustained: Mapping[str, Sourced] = dataclasses.field(default_factory=FrozenMap)
    dram_achievable: Sourced | None = None
    l2_bandwidth: Sourced | None = None
    shortest_kernel: Sourced | None = None
    nvlink_bandwidth: Sourced | None = None
    pcie_bandwidth: Sourced | None = None

    def to_toml_lines(self) -> list[str]:
        """The figures as ``[gpu.NAME]`` tables of a device file."""
        lines: list[str] = []
        named = [(f"gpu.{name}", getattr(self, name)) for name in GPU_FIGURES]
        named += [(f"gpu.gemm_achievable.{prec}", item) for prec, item in self.gemm_achievable.items()]
        named += [(f"gpu.gemm_sustained.{prec}", item) for prec, item in self.gemm_sustained.items()]
        for table, item in named:
            if item is not None:
                lines += ["", f"[{table}]", f"value = {_toml_num(item.value)}", f"source = {_toml_str(item.source)}"]
                lines += _toml_inputs(item.inputs)
        return lines


@dataclass(frozen=True)
class Device:
    """A roofline target: peaks per precision, DRAM bandwidth, per-kernel overhead and how they combine.

    ``overlap`` says how compute time, memory time and launch overhead combine for one kernel: ``"max"`` (the
    largest of the three, as when launches overlap execution on a GPU stream or in a compiled TPU program) or
    ``"serial"`` (``max(compute, memory) + overhead``, as in a CPU executor that dispatches one node at a time).
    ``engine`` names the runtime a calibrated host profile was measured with (e.g. ``"onnxruntime"``); ``None``
    for datasheet devices. A calibrated profile also carries ``run_overhead`` (the engine's fixed cost per run,
    added once per model), ``ceilings`` (per op class efficiencies, see :class:`Ceiling`), ``calibration``
    (how it was measured) and ``dram_overlap``: the share of a compute-bound kernel's DRAM traffic time that its
    computation hides when its working set is served at DRAM bandwidth (1 or absent: all of it, as ``max`` has
    it), ``network_factor``: how many times their predictions a network's kernels take when they run one
    after the other in a model, where each ceiling was read on a kernel run alone (absent: 1), and
    ``weight_reuse``: how much faster than from DRAM a small model's weights come back between back-to-back runs
    (see :class:`WeightReuse`; absent: never), ``conv_weight_wait``: how much of its weights' read a
    compute-bound convolution waits for (see :class:`WeightWait`; absent: none), ``softmax_underflow``: seconds a
    Softmax element whose exp falls below the normal float range adds, and ``subnormal_product``: seconds a
    multiply-add with a subnormal operand adds (see :mod:`onnxroof.predict.subnormal`; absent: none),
    ``branch_overhead``: seconds an If adds to the nodes of the branch it runs (the branch's own execution; absent:
    none), and ``load_limit`` and ``flop_limit``: the most the calibrated threads' cores can load and store (bytes/s)
    and compute (fp32 FLOP/s) by their clock, vector width and ports, which no calibrated bandwidth or peak may
    exceed (:func:`limit_violations`); datasheet devices have none of them. A GPU's ``gpu`` holds its structure
    and the published microbenchmarks' figures (:class:`GpuFigures`) that the GPU engines' prediction reads.
    """

    key: str
    name: str
    kind: str
    overlap: str
    peak_flops: Mapping[str, Peak]
    memory_bandwidth: Sourced
    memory_capacity: Sourced | None
    launch_overhead: Sourced
    caches: tuple[CacheLevel, ...] = ()
    engine: str | None = None
    engine_release: str | None = None  # the engine's release where the user names one (``--engine tensorrt:8.2``)
    run_overhead: Sourced | None = None
    ceilings: Mapping[str, Ceiling] = dataclasses.field(default_factory=FrozenMap)
    calibration: Calibration | None = None
    dram_overlap: Sourced | None = None
    network_factor: Sourced | None = None
    weight_reuse: WeightReuse | None = None
    conv_weight_wait: WeightWait | None = None
    softmax_underflow: Sourced | None = None
    subnormal_product: Sourced | None = None
    branch_overhead: Sourced | None = None
    load_limit: Sourced | None = None
    flop_limit: Sourced | None = None
    gpu: GpuFigures | None = None

    def label(self) -> str:
        """The device as every renderer names it: a calibrated profile by what it was measured on and when, 'host
        (AMD EPYC (family 25 model 1, AVX2), 1 thread, onnxruntime 1.23.2, calibrated 2026-12-01)', so that two
        profiles can be told apart; any other device by its name."""
        if self.calibration is None:
            return self.name if self.engine is None else f"{self.name}, {self.engine_spec()}"
        return f"host ({self.calibration.describe()})"

    def tag(self) -> str:
        """The device as a legend or a one-line result names it: a datasheet device by its key, a calibrated
        profile by its :meth:`label` (its key, 'host-amd-epyc-...-t1', says neither when nor on what it was
        measured in words); a datasheet device an engine runs as ``KEY@ENGINE``, as it is named."""
        return self.label() if self.calibration is not None else self.spec()

    def spec(self) -> str:
        """The device as a user names it: its key, and ``@ENGINE`` where an engine runs a datasheet device."""
        return self.key if self.engine is None or self.calibration is not None else f"{self.key}@{self.engine_spec()}"

    def engine_spec(self) -> str | None:
        """The engine as a user names it: its name, and ``:RELEASE`` where a release is named."""
        if self.engine is None or self.engine_release is None:
            return self.engine
        return f"{self.engine}:{self.engine_release}"

    def resolve_precision(self, precision: str) -> str:
        """The precision whose peak is used for ``precision`` on this device (see FALLBACK)."""
        wanted = normalize_precision(precision)
        for candidate in FALLBACK[wanted]:
            if candidate in self.peak_flops:
                return candidate
        # device_from_dict guarantees one of fp32/bf16/fp16; this is only reachable for a hand-built Device.
        raise UserError(
            f"device {self.key!r} lists no peak usable for {wanted}",
            hint=f"give it at least one of {', '.join(TERMINAL_PRECISIONS)} in [peak_flops]",
        )

    def peak(self, precision: str) -> tuple[float, str]:
        """Peak FLOP/s for ``precision`` and the precision actually used.

        When the device lists no peak for the precision, the first precision of ``FALLBACK[precision]`` that it
        lists is used instead: int8 -> fp16 -> bf16 -> fp32; fp8 -> fp16 -> bf16 -> fp32;
        bf16 -> fp16 -> fp32; fp16 -> fp32 -> bf16; tf32 -> fp32 -> bf16 -> fp16; fp32 -> bf16 -> fp16;
        fp64 -> fp32 -> bf16 -> fp16. Callers should report the returned precision when it differs.
        """
        used = self.resolve_precision(precision)
        return self.peak_flops[used].value, used

    def ridge_point(self, precision: str) -> float:
        """Arithmetic intensity (FLOP per byte of DRAM traffic) above which a kernel is compute-bound."""
        return self.peak(precision)[0] / self.memory_bandwidth.value

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON-ready types (dicts, lists, numbers, strings), sources included."""
        out = dataclasses.asdict(self)
        out["peak_flops"] = {prec: _inputs_if_any(peak) for prec, peak in out["peak_flops"].items()}
        out["caches"] = [_inputs_if_any(cache) for cache in out["caches"]]
        for name, item in out.items():
            if isinstance(item, dict) and "inputs" in item:
                out[name] = _inputs_if_any(item)
        out["ceilings"] = {
            name: {
                "compute": [list(p) for p in c["compute"]],
                "memory": [list(p) for p in c["memory"]],
                "source": c["source"],
            }
            for name, c in out["ceilings"].items()
        }
        if out["calibration"] is not None:
            out["calibration"]["warnings"] = list(out["calibration"]["warnings"])
        for curve in ("weight_reuse", "conv_weight_wait"):
            if out[curve] is not None:
                out[curve]["points"] = [list(p) for p in out[curve]["points"]]
        return out

    def to_toml(self) -> str:
        """This device as a stand-alone device file (top-level fields), which :func:`load_device` reads back."""
        lines = [
            f"key = {_toml_str(self.key)}",
            f"name = {_toml_str(self.name)}",
            f"kind = {_toml_str(self.kind)}",
            f"overlap = {_toml_str(self.overlap)}",
        ]
        if self.engine is not None:
            lines.append(f"engine = {_toml_str(self.engine_spec() or self.engine)}")
        for prec, pk in self.peak_flops.items():
            lines += [
                "",
                f"[peak_flops.{prec}]",
                f"value = {_toml_num(pk.value)}",
                f"dense = {'true' if pk.dense else 'false'}",
            ]
            if pk.sparse_value is not None:
                lines.append(f"sparse_value = {_toml_num(pk.sparse_value)}")
            lines += [f"source = {_toml_str(pk.source)}", *_toml_inputs(pk.inputs)]
        for fname in (
            "memory_bandwidth",
            "memory_capacity",
            "launch_overhead",
            "run_overhead",
            "dram_overlap",
            "network_factor",
            "softmax_underflow",
            "subnormal_product",
            "branch_overhead",
            "load_limit",
            "flop_limit",
        ):
            item = getattr(self, fname)
            if item is not None:
                lines += ["", f"[{fname}]", f"value = {_toml_num(item.value)}", f"source = {_toml_str(item.source)}"]
                lines += _toml_inputs(item.inputs)
        for cache in self.caches:
            lines += [
                "",
                "[[caches]]",
                f"level = {_toml_str(cache.level)}",
                f"size = {_toml_num(cache.size)}",
                f"scope = {_toml_str(cache.scope)}",
            ]
            if cache.bandwidth is not None:
                lines.append(f"bandwidth = {_toml_num(cache.bandwidth)}")
            lines += [f"source = {_toml_str(cache.source)}", *_toml_inputs(cache.inputs)]
        if self.calibration is not None:
            cal = self.calibration
            lines += [
                "",
                "[calibration]",
                f"provider = {_toml_str(cal.provider)}",
                f"threads = {cal.threads}",
                f"onnxruntime = {_toml_str(cal.onnxruntime)}",
                f"cpu = {_toml_str(cal.cpu)}",
                f"date = {_toml_str(cal.date)}",
                f"duration_s = {_toml_num(cal.duration_s)}",
            ]
            if cal.profiler_overhead is not None:
                lines.append(f"profiler_overhead = {_toml_num(cal.profiler_overhead)}")
            if cal.reference_time_s is not None:
                lines.append(f"reference_time_s = {_toml_num(cal.reference_time_s)}")
            lines.append("warnings = [" + ", ".join(_toml_str(w) for w in cal.warnings) + "]")
            lines.append(f"suite = {cal.suite}")
        for name, curve in (("weight_reuse", self.weight_reuse), ("conv_weight_wait", self.conv_weight_wait)):
            if curve is not None:
                points = ", ".join(f"[{_toml_num(f)}, {_toml_num(x)}]" for f, x in curve.points)
                lines += ["", f"[{name}]", f"points = [{points}]", f"source = {_toml_str(curve.source)}"]
        if self.gpu is not None:
            lines += self.gpu.to_toml_lines()
        for name, ceiling in self.ceilings.items():
            lines += ["", f"[ceilings.{name}]"]
            for table in ("compute", "memory"):
                points = getattr(ceiling, table)
                if points:
                    lines.append(
                        f"{table} = [" + ", ".join(f"[{_toml_num(w)}, {_toml_num(e)}]" for w, e in points) + "]"
                    )
            lines.append(f"source = {_toml_str(ceiling.source)}")
        return "\n".join(lines) + "\n"


def limit_violations(device: Device) -> list[str]:
    """What a calibrated profile holds beyond its cores' physical limits (``load_limit``, ``flop_limit``), one line
    each: a memory level's bandwidth (a cache's or DRAM's) above what the cores can load and store, an fp32 peak
    above what their vector units compute. Empty where the profile records no limits or keeps within them."""
    out = []
    if device.load_limit is not None:
        levels = [(c.level, c.bandwidth) for c in device.caches if c.bandwidth is not None]
        for level, bandwidth in [*levels, ("DRAM", device.memory_bandwidth.value)]:
            if bandwidth > device.load_limit.value:
                out.append(
                    f"{level} bandwidth {bandwidth / 1e9:.4g} GB/s is above the cores' load and store rate, "
                    f"{device.load_limit.value / 1e9:.4g} GB/s ({device.load_limit.source})"
                )
    fp32 = device.peak_flops.get("fp32")
    if device.flop_limit is not None and fp32 is not None and fp32.value > device.flop_limit.value:
        out.append(
            f"fp32 peak {fp32.value / 1e9:.4g} GFLOP/s is above the cores' vector rate, "
            f"{device.flop_limit.value / 1e9:.4g} GFLOP/s ({device.flop_limit.source})"
        )
    return out


def _toml_str(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _inputs_if_any(table: dict[str, Any]) -> dict[str, Any]:
    """A figure's plain dict with its ``inputs`` as a plain dict, or without them where it has none (a datasheet
    figure's JSON is as it was before figures had inputs)."""
    inputs = table.pop("inputs", None)
    return {**table, "inputs": dict(inputs)} if inputs else table


def _toml_inputs(inputs: Mapping[str, float]) -> list[str]:
    """A figure's ``inputs`` as one inline-table line (none where it has none)."""
    if not inputs:
        return []
    return ["inputs = { " + ", ".join(f"{name} = {_toml_num(value)}" for name, value in inputs.items()) + " }"]


def _toml_num(value: float) -> str:
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))
