"""Target devices: peak FLOP/s per precision, memory bandwidth, launch overhead, with a source for every number.

The bundled catalog (``catalog.toml`` next to this file) and a user's device file share one schema and one
parser, :func:`device_from_dict`. A device file holds ONE device; its top-level keys are the device's fields
(``key`` defaults to the file stem), or, equally, a single table copied from the catalog::

    name = "My workstation GPU"
    kind = "gpu"                   # gpu | cpu | tpu
    overlap = "max"                # max | serial, see Device.overlap
    [peak_flops.fp32]
    value = 19.5e12                # FLOP/s
    dense = true                   # a dense figure, not a 2:4-sparsity one
    source = "vendor datasheet: 19.5 TFLOPS FP32"
    [memory_bandwidth]
    value = 1555e9                 # bytes/s
    source = "vendor datasheet: 1,555 GB/s"
    [launch_overhead]
    value = 4.2e-6                 # seconds per kernel
    source = "paper 001: 4.2 us measured kernel launch latency on V100"
    # optional: [memory_capacity] (bytes), [[caches]] (level, size in bytes, scope, optional bandwidth), engine

A calibrated host profile (``onnxroof.calibrate``) adds what an engine-aware prediction (``onnxroof.engine``)
needs on top of the roofline: the engine's fixed cost per run, how it was measured, and per op class how close
its kernels come to the peak and to the bandwidth of the memory level their data sits in::

    engine = "onnxruntime"
    [run_overhead]                 # seconds per session.run, paid once per model
    value = 1.2e-05
    source = "calibrated: ..."
    [dram_overlap]                 # optional: share of a compute-bound kernel's DRAM time its compute hides
    value = 0.4
    source = "calibrated: ..."
    [network_factor]               # optional: a network's kernels take this times their time alone
    value = 1.1
    source = "calibrated: ..."
    [calibration]                  # how the numbers were measured (metadata, no sources needed)
    provider = "cpu"
    threads = 1
    onnxruntime = "1.23.2"
    cpu = "Intel(R) Xeon(R) Processor"
    date = "2025-01-01T00:00:00+00:00"
    duration_s = 95.0
    profiler_overhead = 2.5e-06    # optional: what onnxruntime's profiler adds to each node's kernel time
    reference_time_s = 1.9e-3      # optional: seconds per run of onnxroof.reference's block when calibrated
    warnings = []                  # optional: e.g. a busy machine (large spread between repeats)
    suite = 2                      # optional: the calibration suite's version (1 when absent)
    [ceilings.conv]                # one table per op class (see OP_CLASSES), or per part (PART_CEILINGS)
    compute = [[2.0e7, 0.71], [2.3e8, 0.84], [1.8e9, 0.88]]   # [FLOPs, fraction of the peak]
    memory = [[1.0e5, 0.4], [4.0e6, 0.9]]                     # [bytes moved, fraction of the level bandwidth]
    source = "calibrated: ..."

A ceiling's points are interpolated linearly in log(work) and held constant beyond the first and last point,
so small kernels get the lower efficiency measured on small kernels. Either table may be left out (efficiency 1).

Conventions:

- Units are SI: FLOP/s, bytes/s, bytes, seconds. Capacities are converted in the unit their source states:
  a vendor's "80 GB" is 80e9 bytes, Google's "32 GiB" is 32 * 2**30 bytes. Cache sizes are binary (KiB/MiB).
- ``value`` of a peak is always the dense figure. Datasheets that quote 2:4 structured sparsity (A100, H100,
  H200, L4) double the dense rate; that figure may be kept as ``sparse_value`` and is never used as the peak.
- Every number carries a non-empty ``source``; derived numbers say ``derived: <formula>``, assumptions say so.
- Integer precisions (int8) are in OP/s and count a multiply-accumulate as 2 ops, like the FLOP counts.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from onnxroof.errors import UserError

__all__ = [
    "PRECISIONS",
    "KINDS",
    "OVERLAPS",
    "CACHE_SCOPES",
    "OP_CLASSES",
    "PART_CEILINGS",
    "CEILING_NAMES",
    "FALLBACK",
    "Sourced",
    "Peak",
    "CacheLevel",
    "Ceiling",
    "Calibration",
    "Device",
    "FrozenMap",
    "catalog",
    "load_device",
    "device_from_dict",
    "normalize_precision",
]

PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
KINDS: tuple[str, ...] = ("gpu", "cpu", "tpu")
OVERLAPS: tuple[str, ...] = ("max", "serial")
CACHE_SCOPES: tuple[str, ...] = ("per-core", "per-sm", "shared")

# The op classes a calibrated device may hold a ceiling for (``[ceilings.<class>]``); ``onnxroof.engine.op_class``
# maps every node to one of them (or to "shape" / "other", which never have a ceiling).
OP_CLASSES: tuple[str, ...] = (
    "conv",          # dense KxK convolution on a large output (20x20 positions or more)
    "conv1x1",       # dense pointwise convolution on a large output
    "conv_wide",     # dense convolution with a 5x5 or wider kernel on a large output, past the stem
    "conv_stem",     # a stem: a 5x5 or wider kernel over a few input channels (an image's 3), on a large output
    "conv_mid",      # dense convolution on a mid-sized output (10x10 to 19x19 positions: a 14x14 stage)
    "conv_small",    # dense convolution on a small output (<= 9x9 positions) or with few channels
    "conv_grouped",  # grouped convolution in plain layout (not depthwise; a blocked NCHWc one is a dense class)
    "depthwise",     # one input channel per group
    "gemm",          # matrix product with a weight operand (Gemm, FusedGemm, MatMul by an initializer)
    "matmul",        # matrix product of two activations (attention scores, context)
    "pool",          # MaxPool / AveragePool / LpPool windows in onnxruntime's NCHWc layout (after a convolution)
    "pool_nchw",     # the same windows in plain NCHW layout, a slower kernel per byte
    "global_pool",   # GlobalAveragePool / GlobalMaxPool
    "batchnorm",     # BatchNormalization, and the per-channel scale-and-shift it becomes (depthwise 1x1 conv)
    "layernorm",     # LayerNormalization and its fused / simplified variants
    "instancenorm",  # InstanceNormalization, GroupNormalization
    "lrn",           # LRN
    "softmax",       # Softmax, LogSoftmax
    "elementwise",   # cheap elementwise arithmetic and activations (Add, Mul, Relu, Clip, Sum, ...)
    "broadcast",     # elementwise arithmetic with an operand broadcast along the innermost axis (a per-channel Mul)
    "activation",    # transcendental activations (Gelu, Erf, Sigmoid, Tanh, Exp, ...)
    "movement",      # copies: Concat, Split, Slice, Pad, Gather, Expand, Tile, ...
    "transpose",     # Transpose, DepthToSpace, SpaceToDepth
    "reorder",       # onnxruntime's NCHW <-> NCHWc layout conversions
    "reorder_short",  # NCHWc -> NCHW onto a small output (under 20x20 positions): short rows, half the bandwidth
    "resize",        # Resize, Upsample
    "reduce",        # ReduceSum/Mean/Max/..., ArgMax/ArgMin
)

# Ceilings for a part of a node rather than for a class of nodes: "epilogue" is the second pass over a
# convolution's or Gemm's output that a fused activation other than Relu costs (MobileNet's Clip).
PART_CEILINGS: tuple[str, ...] = ("epilogue",)

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
_TERMINAL = ("fp32", "bf16", "fp16")

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


@dataclass(frozen=True)
class Sourced:
    """A number and where it comes from (a datasheet line, a paper's table, or a stated derivation)."""

    value: float
    source: str


@dataclass(frozen=True)
class Peak:
    """Peak throughput for one precision in FLOP/s (OP/s for int8).

    ``value`` is the dense figure when ``dense`` is true; ``sparse_value`` optionally records a datasheet's
    2:4-structured-sparsity figure, which is informative only and never used as the peak.
    """

    value: float
    dense: bool
    source: str
    sparse_value: float | None = None


@dataclass(frozen=True)
class CacheLevel:
    """One level of on-chip memory: its size in bytes, whether it is private or shared, optional bandwidth."""

    level: str
    size: float
    bandwidth: float | None
    source: str
    scope: str = "shared"  # per-core | per-sm | shared (by the whole chip)


def _interpolate(points: tuple[tuple[float, float], ...], work: float) -> float:
    """Efficiency at ``work`` from (work, efficiency) points sorted by work: linear in log(work), constant
    outside the measured range; 1 when there are no points."""
    if not points:
        return 1.0
    if work <= points[0][0]:
        return points[0][1]
    if work >= points[-1][0]:
        return points[-1][1]
    for (w0, e0), (w1, e1) in zip(points, points[1:]):
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
    A memory efficiency may exceed 1 where the class streams faster than the bandwidth benchmark did.
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
class Calibration:
    """How a calibrated device profile was measured: engine, provider, threads, host, when, how long, and what
    went wrong (``warnings``, e.g. a busy machine). ``profiler_overhead`` is what the engine's profiler adds to
    each node's reported kernel time (seconds), for comparing predictions with profiled per-node times;
    ``reference_time_s`` the time of a run of the reference block (onnxroof.reference) then, to detect a machine that
    has since slowed down or sped up; ``suite`` the version of onnxroof's benchmark suite that measured it (1 for
    files that predate the field), so that a cached profile lacking what a newer suite measures is redone."""

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


class FrozenMap(dict):
    """A read-only, hashable dict, so that a frozen Device is hashable and cannot be changed in place.

    A dict subclass (rather than a Mapping proxy) so that ``dataclasses.asdict`` and ``json.dumps`` handle it.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]

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
    it), and ``network_factor``: how many times their predictions a network's kernels take when they run one
    after the other in a model, where each ceiling was read on a kernel run alone (absent: 1); datasheet devices
    have none of them.
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
    run_overhead: Sourced | None = None
    ceilings: Mapping[str, Ceiling] = dataclasses.field(default_factory=FrozenMap)
    calibration: Calibration | None = None
    dram_overlap: Sourced | None = None
    network_factor: Sourced | None = None

    def resolve_precision(self, precision: str) -> str:
        """The precision whose peak is used for ``precision`` on this device (see FALLBACK)."""
        wanted = normalize_precision(precision)
        for candidate in FALLBACK[wanted]:
            if candidate in self.peak_flops:
                return candidate
        # device_from_dict guarantees one of fp32/bf16/fp16; this is only reachable for a hand-built Device.
        raise UserError(
            f"device {self.key!r} lists no peak usable for {wanted}",
            hint=f"give it at least one of {', '.join(_TERMINAL)} in [peak_flops]",
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
        out["peak_flops"] = dict(out["peak_flops"])
        out["caches"] = list(out["caches"])
        out["ceilings"] = {name: {"compute": [list(p) for p in c["compute"]], "memory": [list(p) for p in c["memory"]],
                                  "source": c["source"]} for name, c in out["ceilings"].items()}
        if out["calibration"] is not None:
            out["calibration"]["warnings"] = list(out["calibration"]["warnings"])
        return out

    def to_toml(self) -> str:
        """This device as a stand-alone device file (top-level fields), which :func:`load_device` reads back."""
        lines = [f"key = {_toml_str(self.key)}", f"name = {_toml_str(self.name)}", f"kind = {_toml_str(self.kind)}",
                 f"overlap = {_toml_str(self.overlap)}"]
        if self.engine is not None:
            lines.append(f"engine = {_toml_str(self.engine)}")
        for prec, pk in self.peak_flops.items():
            lines += ["", f"[peak_flops.{prec}]", f"value = {_toml_num(pk.value)}",
                      f"dense = {'true' if pk.dense else 'false'}"]
            if pk.sparse_value is not None:
                lines.append(f"sparse_value = {_toml_num(pk.sparse_value)}")
            lines.append(f"source = {_toml_str(pk.source)}")
        for fname in ("memory_bandwidth", "memory_capacity", "launch_overhead", "run_overhead", "dram_overlap",
                      "network_factor"):
            item = getattr(self, fname)
            if item is not None:
                lines += ["", f"[{fname}]", f"value = {_toml_num(item.value)}", f"source = {_toml_str(item.source)}"]
        for cache in self.caches:
            lines += ["", "[[caches]]", f"level = {_toml_str(cache.level)}", f"size = {_toml_num(cache.size)}",
                      f"scope = {_toml_str(cache.scope)}"]
            if cache.bandwidth is not None:
                lines.append(f"bandwidth = {_toml_num(cache.bandwidth)}")
            lines.append(f"source = {_toml_str(cache.source)}")
        if self.calibration is not None:
            cal = self.calibration
            lines += ["", "[calibration]", f"provider = {_toml_str(cal.provider)}", f"threads = {cal.threads}",
                      f"onnxruntime = {_toml_str(cal.onnxruntime)}", f"cpu = {_toml_str(cal.cpu)}",
                      f"date = {_toml_str(cal.date)}", f"duration_s = {_toml_num(cal.duration_s)}"]
            if cal.profiler_overhead is not None:
                lines.append(f"profiler_overhead = {_toml_num(cal.profiler_overhead)}")
            if cal.reference_time_s is not None:
                lines.append(f"reference_time_s = {_toml_num(cal.reference_time_s)}")
            lines.append("warnings = [" + ", ".join(_toml_str(w) for w in cal.warnings) + "]")
            lines.append(f"suite = {cal.suite}")
        for name, ceiling in self.ceilings.items():
            lines += ["", f"[ceilings.{name}]"]
            for table in ("compute", "memory"):
                points = getattr(ceiling, table)
                if points:
                    lines.append(f"{table} = [" + ", ".join(f"[{_toml_num(w)}, {_toml_num(e)}]" for w, e in points) + "]")
            lines.append(f"source = {_toml_str(ceiling.source)}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- parsing

_REQUIRED = ("name", "kind", "overlap", "peak_flops", "memory_bandwidth", "launch_overhead")
_OPTIONAL = ("memory_capacity", "caches", "engine", "run_overhead", "calibration", "ceilings", "dram_overlap",
             "network_factor")
_FIELDS = _REQUIRED + _OPTIONAL
_SCHEMA_HINT = "see the device file format in the onnxroof.devices docstring, or copy an entry of `onnxroof devices`"


def _fail(where: str, problem: str, hint: str | None = None) -> UserError:
    return UserError(f"{where}: {problem}", hint=hint or _SCHEMA_HINT)


def _check_keys(table: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for name in table:
        if name not in allowed:
            close = difflib.get_close_matches(str(name), allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed fields: {', '.join(allowed)}"
            raise _fail(where, f"unknown field {name!r}", hint)


def _number(table: Mapping[str, Any], name: str, where: str, *, allow_zero: bool = False) -> float:
    if name not in table:
        raise _fail(where, f"missing required field '{name}'")
    raw = table[name]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise _fail(where, f"field '{name}' must be a number, got {raw!r}")
    value = float(raw)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise _fail(where, f"field '{name}' must be {'non-negative' if allow_zero else 'positive'}, got {raw!r}")
    return value


def _text(table: Mapping[str, Any], name: str, where: str) -> str:
    if name not in table:
        raise _fail(where, f"missing required field '{name}'")
    raw = table[name]
    if not isinstance(raw, str) or not raw.strip():
        raise _fail(where, f"field '{name}' must be a non-empty string, got {raw!r}")
    return raw.strip()


def _choice(table: Mapping[str, Any], name: str, choices: tuple[str, ...], where: str) -> str:
    value = _text(table, name, where)
    if value not in choices:
        raise _fail(where, f"field '{name}' must be one of {', '.join(choices)}, got {value!r}")
    return value


def _table(data: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    raw = data[name]
    if not isinstance(raw, Mapping):
        raise _fail(
            where,
            f"field '{name}' must be a table with 'value' and 'source', got {raw!r}",
            hint=f"write it as [{name}] with value = ... and source = \"...\" (every number needs a source)",
        )
    return raw


def _sourced(data: Mapping[str, Any], name: str, where: str, *, allow_zero: bool = False) -> Sourced:
    table = _table(data, name, where)
    here = f"{where}, {name}"
    _check_keys(table, ("value", "source"), here)
    return Sourced(_number(table, "value", here, allow_zero=allow_zero), _text(table, "source", here))


def _peak(table: Any, prec: str, where: str) -> Peak:
    here = f"{where}, peak_flops.{prec}"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table with value, dense and source, got {table!r}")
    _check_keys(table, ("value", "dense", "sparse_value", "source"), here)
    value = _number(table, "value", here)
    if "dense" not in table:
        raise _fail(here, "missing required field 'dense'", hint="say dense = true for a dense figure, "
                    "false for a 2:4-sparsity figure (store dense values as value, sparse ones as sparse_value)")
    if not isinstance(table["dense"], bool):
        raise _fail(here, f"field 'dense' must be true or false, got {table['dense']!r}")
    sparse = None
    if "sparse_value" in table:
        sparse = _number(table, "sparse_value", here)
        if sparse < value:
            raise _fail(here, f"sparse_value {sparse:g} is below the dense value {value:g}")
    return Peak(value, table["dense"], _text(table, "source", here), sparse)


def _cache(table: Any, index: int, where: str) -> CacheLevel:
    here = f"{where}, caches[{index}]"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table ([[caches]]), got {table!r}")
    _check_keys(table, ("level", "size", "bandwidth", "scope", "source"), here)
    bandwidth = _number(table, "bandwidth", here) if "bandwidth" in table else None
    return CacheLevel(
        level=_text(table, "level", here),
        size=_number(table, "size", here),
        bandwidth=bandwidth,
        source=_text(table, "source", here),
        scope=_choice(table, "scope", CACHE_SCOPES, here),
    )


def _points(raw: Any, where: str) -> tuple[tuple[float, float], ...]:
    """[[work, efficiency], ...] -> sorted tuple of pairs; work and efficiency positive, work distinct."""
    hint = "write e.g. compute = [[1e6, 0.3], [1e8, 0.8]]: pairs of [work, efficiency], both positive"
    if not isinstance(raw, list) or not raw:
        raise _fail(where, f"must be a non-empty array of [work, efficiency] pairs, got {raw!r}", hint)
    points = []
    for pair in raw:
        if (not isinstance(pair, list) or len(pair) != 2
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in pair)):
            raise _fail(where, f"each point must be [work, efficiency], got {pair!r}", hint)
        work, eff = float(pair[0]), float(pair[1])
        if not (math.isfinite(work) and math.isfinite(eff)) or work <= 0 or eff <= 0:
            raise _fail(where, f"work and efficiency must be positive and finite, got {pair!r}", hint)
        points.append((work, eff))
    points.sort()
    for (w0, _), (w1, _) in zip(points, points[1:]):
        if w0 == w1:
            raise _fail(where, f"two points at work {w0:g}", "give each work size once")
    return tuple(points)


def _ceiling(table: Any, name: str, where: str) -> Ceiling:
    here = f"{where}, ceilings.{name}"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table with compute and/or memory points and a source, got {table!r}")
    _check_keys(table, ("compute", "memory", "source"), here)
    if "compute" not in table and "memory" not in table:
        raise _fail(here, "needs a 'compute' or a 'memory' table of [work, efficiency] points")
    compute = _points(table["compute"], f"{here}.compute") if "compute" in table else ()
    memory = _points(table["memory"], f"{here}.memory") if "memory" in table else ()
    return Ceiling(compute, memory, _text(table, "source", here))


def _calibration(table: Any, where: str) -> Calibration:
    here = f"{where}, calibration"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table, got {table!r}")
    # reference_flops_s: suites 1-3 timed a lone MatMul as the reference; its rate says nothing of the block's time
    # that replaced it, so such a file is read without a reference reading.
    _check_keys(table, ("provider", "threads", "onnxruntime", "cpu", "date", "duration_s", "warnings",
                        "profiler_overhead", "reference_time_s", "reference_flops_s", "suite"), here)
    threads, suite = table.get("threads"), table.get("suite", 1)
    for name, value in (("threads", threads), ("suite", suite)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(here, f"field {name!r} must be a positive integer, got {value!r}")
    warnings = table.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _fail(here, f"field 'warnings' must be an array of strings, got {warnings!r}")
    overhead = _number(table, "profiler_overhead", here, allow_zero=True) if "profiler_overhead" in table else None
    reference = _number(table, "reference_time_s", here) if "reference_time_s" in table else None
    return Calibration(
        provider=_text(table, "provider", here),
        threads=threads,
        onnxruntime=_text(table, "onnxruntime", here),
        cpu=_text(table, "cpu", here),
        date=_text(table, "date", here),
        duration_s=_number(table, "duration_s", here, allow_zero=True),
        warnings=tuple(warnings),
        profiler_overhead=overhead,
        reference_time_s=reference,
        suite=suite,
    )


def device_from_dict(key: str, data: Mapping[str, Any], *, origin: str | None = None) -> Device:
    """Validate one device's fields (as parsed from TOML) and build the Device; raises UserError naming the field.

    ``origin`` (a file path, or "catalog") only makes the error messages say where the device came from.
    """
    where = f"device {key!r}" + (f" in {origin}" if origin else "")
    if not isinstance(key, str) or not key.strip():
        raise _fail(where, "the device key must be a non-empty string")
    if not isinstance(data, Mapping):
        raise _fail(where, f"expected a table of device fields, got {type(data).__name__}")
    _check_keys(data, _FIELDS + ("key",), where)
    if "key" in data and data["key"] != key:
        raise _fail(where, f"field 'key' says {data['key']!r}, which contradicts the key {key!r} it is loaded as")
    for name in _REQUIRED:
        if name not in data:
            raise _fail(where, f"missing required field '{name}'")

    peaks_raw = data["peak_flops"]
    if not isinstance(peaks_raw, Mapping) or not peaks_raw:
        raise _fail(where, "field 'peak_flops' must be a table with at least one precision",
                    hint="write [peak_flops.fp32] with value, dense and source")
    _check_keys(peaks_raw, PRECISIONS, f"{where}, peak_flops")
    peaks = {prec: _peak(peaks_raw[prec], prec, where) for prec in PRECISIONS if prec in peaks_raw}
    if not any(prec in peaks for prec in _TERMINAL):
        raise _fail(where, f"peak_flops must list at least one of {', '.join(_TERMINAL)}",
                    hint="every other precision falls back to one of these (see onnxroof.devices.FALLBACK)")

    caches_raw = data.get("caches", [])
    if not isinstance(caches_raw, list):
        raise _fail(where, "field 'caches' must be an array of tables ([[caches]])")

    engine = None
    if "engine" in data:
        engine = _text(data, "engine", where)

    ceilings_raw = data.get("ceilings", {})
    if not isinstance(ceilings_raw, Mapping):
        raise _fail(where, "field 'ceilings' must be a table of op classes ([ceilings.conv], ...)")
    _check_keys(ceilings_raw, CEILING_NAMES, f"{where}, ceilings")
    ceilings = {name: _ceiling(ceilings_raw[name], name, where) for name in CEILING_NAMES if name in ceilings_raw}

    return Device(
        key=key.strip(),
        name=_text(data, "name", where),
        kind=_choice(data, "kind", KINDS, where),
        overlap=_choice(data, "overlap", OVERLAPS, where),
        peak_flops=FrozenMap(peaks),
        memory_bandwidth=_sourced(data, "memory_bandwidth", where),
        memory_capacity=_sourced(data, "memory_capacity", where) if "memory_capacity" in data else None,
        launch_overhead=_sourced(data, "launch_overhead", where, allow_zero=True),
        caches=tuple(_cache(c, i, where) for i, c in enumerate(caches_raw)),
        engine=engine,
        run_overhead=_sourced(data, "run_overhead", where, allow_zero=True) if "run_overhead" in data else None,
        ceilings=FrozenMap(ceilings),
        calibration=_calibration(data["calibration"], where) if "calibration" in data else None,
        dram_overlap=_share(data, "dram_overlap", where) if "dram_overlap" in data else None,
        network_factor=_sourced(data, "network_factor", where) if "network_factor" in data else None,
    )


def _share(data: Mapping[str, Any], name: str, where: str) -> Sourced:
    """A sourced fraction between 0 and 1."""
    item = _sourced(data, name, where, allow_zero=True)
    if item.value > 1:
        raise _fail(f"{where}, {name}", f"value {item.value:g} is a share and must be at most 1")
    return item


# ---------------------------------------------------------------------------------------------------- loading


@functools.cache
def _bundled() -> Mapping[str, Device]:
    text = resources.files(__name__).joinpath("catalog.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    return FrozenMap({key: device_from_dict(key, entry, origin="the bundled catalog") for key, entry in data.items()})


def catalog() -> dict[str, Device]:
    """The bundled device catalog by key (parsed once; each call returns a fresh dict of the same Devices)."""
    return dict(_bundled())


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or "\\" in spec


def load_device(spec: str | Path) -> Device:
    """A device by catalog key (``"v100-sxm2"``; case and ``_``/``-`` are forgiven) or from a .toml device file.

    A string counts as a path when it ends in ``.toml`` or contains a path separator; a Path always does.
    """
    if isinstance(spec, Path) or _looks_like_path(str(spec)):
        return _load_file(Path(spec))
    devices = _bundled()
    name = str(spec).strip()
    if name in devices:
        return devices[name]
    folded = name.lower().replace("_", "-").replace(" ", "-")
    if folded in devices:
        return devices[folded]
    suggestions = [k for k in devices if folded and k.startswith(folded)]
    close = difflib.get_close_matches(folded, list(devices), n=3, cutoff=0.5)
    suggestions += [k for k in close if k not in suggestions]
    hint = "`onnxroof devices` lists the catalog; a path to a .toml file describes your own device"
    if suggestions:
        hint = f"did you mean {', '.join(suggestions[:3])}? " + hint
    raise UserError(f"unknown device {name!r}", hint=hint)


def _load_file(path: Path) -> Device:
    hint = "give a catalog key (`onnxroof devices` lists them) or the path of a .toml device file"
    if not path.exists():
        raise UserError(f"device file not found: {path}", hint=hint)
    if not path.is_file():
        raise UserError(f"device file is not a file: {path}", hint=hint)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"device file {path} is not valid TOML: {exc}", hint=_SCHEMA_HINT) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"device file {path} is not UTF-8 text: {exc}", hint=_SCHEMA_HINT) from None

    # A single table copied from the catalog ([my-gpu] with the fields inside) is accepted as well.
    if len(data) == 1 and not any(name in data for name in _FIELDS + ("key",)):
        (key, inner), = data.items()
        if isinstance(inner, Mapping):
            return device_from_dict(key, inner, origin=str(path))
    data = dict(data)
    key = data.pop("key", path.stem)
    if not isinstance(key, str):
        raise _fail(f"device file {path}", f"field 'key' must be a string, got {key!r}")
    return device_from_dict(key, data, origin=str(path))


# ---------------------------------------------------------------------------------------------------- TOML out


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


def _toml_num(value: float) -> str:
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))
