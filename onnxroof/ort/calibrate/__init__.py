"""Calibrate this host: an empirical roofline of onnxruntime's CPU executor, in the spirit of the Empirical Roofline
Toolkit (paper 001, section III-B), measured with onnxruntime itself rather than hand-written loops.

Tiny ONNX graphs (built with ``onnx.helper``, random weights) are run by onnxruntime sessions at the requested
thread count and default optimization level, so every kernel measured is the kernel a real model gets (NCHWc
convolutions, prepacked Gemm, fused activations). Two ways of timing are used:

- **chains**: N identical shape-preserving nodes in a row (each reads the previous one's output, as in a model),
  timed by the wall clock at two chain lengths; the slope is one node's time including its dispatch. Accurate
  for small kernels, and the data is as hot as in a model.
- **profiled**: onnxruntime's profiler gives each node's kernel time, minus what the profiler itself adds per node
  (measured on tiny nodes). Used for shape-changing ops and large kernels. The measured node writes an
  intermediate tensor (a Neg follows it), and a node with large weights finds them cold: a buffer larger than the
  caches is read before each timed run, then the node's inputs are read back in, as a model hands them over.

Every benchmark is set up once and then timed a few runs at a time in passes spread over the time budget; a
kernel's time is the mean of its fastest eighth of runs. On a shared machine other work comes and goes in phases
of seconds; spreading the runs gives each benchmark runs outside them, and the fastest runs are those untouched.

What is measured:

- per-run overhead (a one-node graph) and per-node overhead (slope of run time over chains of tiny nodes);
- bandwidth of each cache level (chains of Neg over working sets sized to half of L1, L2 and part of L3; sizes
  read from /sys/devices/system/cpu/cpu0/cache or lscpu, with defaults) and of DRAM (a MatMul streaming an
  operand larger than the last-level cache); the shared last level is measured again at 2x and 4x its working
  set, and serves only the working sets at which its bandwidth holds (``effective_size``);
- peak FLOP/s: fp32 as the best of large Gemm/Conv kernels, int8 with MatMulInteger, fp16 only where the provider
  has fp16 kernels (when onnxruntime inserts Casts to fp32 there is none, and fp16 is left out);
- per op class (``onnxroof.devices.OP_CLASSES``) a ceiling: for compute classes the fraction of the peak, for
  memory classes the fraction of the level bandwidth, at several kernel sizes (see ``onnxroof.predict.engine``);
- the ``epilogue`` ceiling: the fraction of the level bandwidth that a convolution's fused Clip reaches in its
  pass over the output, timed as the difference between the same convolution fused with Clip and with Relu;
- the share of a compute-bound kernel's DRAM traffic that its computation hides (``dram_overlap``), from a
  batch-32 strided convolution whose data is larger than any cache; its NCHWc reorders give the reorder class
  points at DRAM sizes;
- the time of the reference block (``onnxroof.ort.reference``), timed in every pass, and from it the
  ``network_factor``: the block's measured time over its prediction from everything above, what a network's
  kernels run one after the other take beyond the same kernels timed alone.

Efficiencies are computed with the same functions the prediction uses (``onnxroof.predict.engine.predict_engine`` on
the optimized graph's own node, on a device without ceilings), so a calibrated point predicts back its measured
time. The repeated timings' spread is recorded; a large spread (a busy machine) becomes a calibration warning.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxroof.costs import Cost, NodeView, compute_cost
from onnxroof.devices import (
    CEILING_NAMES,
    CacheLevel,
    Calibration,
    Ceiling,
    Device,
    FrozenMap,
    Peak,
    Sourced,
    load_device,
    save_device,
)
from onnxroof.errors import UserError
from onnxroof.ir import UnknownShape
from onnxroof.ort import sessions
from onnxroof.ort.measure import fast_estimate
from onnxroof.ort.reference import ReferenceSampler, reference_model
from onnxroof.predict import engine
from onnxroof.predict.analysis import analyze_graph

__all__ = [
    "COMPUTE_CLASSES",
    "MEMORY_CLASSES",
    "cache_dir",
    "cache_levels",
    "cache_path",
    "calibrate",
    "cpu_model",
    "host_device",
    "host_key",
]

_CONVS = frozenset(
    {"conv", "conv1x1", "conv_wide", "conv_stem", "conv_mid", "conv_small", "conv_grouped", "depthwise"}
)  # the convolution classes, each a compute class
# Which term of the roofline a ceiling corrects: compute classes are timed against FLOPs / peak, memory classes
# (and the epilogue pass) against bytes / level bandwidth. The other term keeps efficiency 1.
COMPUTE_CLASSES: frozenset[str] = _CONVS | frozenset(
    {
        "gemm",
        "matmul",
        "lrn",
        "softmax",
        "activation",
        "layernorm",
        "instancenorm",
    }
)
MEMORY_CLASSES: frozenset[str] = frozenset(
    {
        "pool",
        "pool_nchw",
        "global_pool",
        "batchnorm",
        "elementwise",
        "broadcast",
        "movement",
        "transpose",
        "reorder",
        "reorder_short",
        "resize",
        "reduce",
        "epilogue",
    }
)

FLOAT = TensorProto.FLOAT
_OPSET = 17
_SPREAD_WARN = 0.25  # median/min - 1 above which a benchmark's repeats count as noisy
_STEAL_WARN = 0.05  # share of CPU time taken by the hypervisor above which the calibration says so
_MIN_PROFILED_S = 8e-6  # profiled kernels shorter than this are too coarse (1 us resolution) to calibrate with
_REPS = 3  # timed runs of each benchmark per pass
_REORDERS = frozenset({"reorder", "reorder_short"})
_COLD_BYTES = 64 * 2**20  # what a benchmark with weights reads before each timed run to push them out of caches
_COLD_MIN_WEIGHTS = 2**20  # weights below this are left hot: they cost little, and small models keep them cached
_MAX_PASSES = 16
# The shared last level is measured on a slice of its reported size; its bandwidth is measured again at these
# multiples of that slice, and the level serves a working set only while its bandwidth holds within _HOLDS.
_PROBE_FACTORS = (2, 4)
_HOLDS = 0.75
# The benchmark suite's version, recorded in every profile: a cached profile from an older suite lacks what this
# one measures, and --device host calibrates again. 2: the epilogue ceiling of a fused Clip. 3: a grouped
# convolution in NCHWc layout is a sample of a dense class, no longer of conv_grouped. 4: the reference kernel is
# a small convolutional block (its time, reference_time_s), no longer a MatMul (its rate), and the block gives
# the network_factor. 5: stems with 5x5 and wider kernels (conv_stem) are a class of their own, no longer conv
# samples.
SUITE = 5
_GEMV_RATIO = 10.0  # a matrix product whose memory time exceeds its compute time this much is a matrix-vector one


# ---------------------------------------------------------------------------------------------------- host facts


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo, else the platform module), or 'unknown CPU'."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")) and ":" in line:
                name = line.split(":", 1)[1].strip()
                if name:
                    return re.sub(r"\s+", " ", name)
    return platform.processor().strip() or platform.machine().strip() or "unknown CPU"


def _ort_version() -> str:
    """The installed onnxruntime's version string."""
    return str(sessions.ort().__version__)


def _slug(text: str) -> str:
    """A file-name-safe lower-case form of a CPU model name."""
    text = re.sub(r"\((r|tm|c)\)", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:48] or "cpu"


def host_key(threads: int = 1, provider: str = "cpu") -> str:
    """The key of this host's calibrated profile: CPU model, onnxruntime version, provider and thread count."""
    return f"host-{_slug(cpu_model())}-ort{_ort_version()}-{provider.lower()}-t{threads}"


def cache_dir() -> Path:
    """Where calibrated profiles are kept: $ONNXROOF_CACHE_DIR, else $XDG_CACHE_HOME/onnxroof, else
    ~/.cache/onnxroof."""
    if os.environ.get("ONNXROOF_CACHE_DIR"):
        return Path(os.environ["ONNXROOF_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "onnxroof"
    return Path.home() / ".cache" / "onnxroof"


def cache_path(threads: int = 1, provider: str = "cpu") -> Path:
    """The file this host's calibrated profile for (threads, provider) is cached in."""
    return cache_dir() / f"{host_key(threads, provider)}.toml"


@dataclass(frozen=True)
class _Cache:
    """A cache level as the OS reports it: name, size in bytes, scope, and where the size was read."""

    level: str
    size: int
    scope: str
    source: str


def _parse_size(text: str) -> int | None:
    """'48K' / '2048K' / '300M' (sysfs cache sizes) in bytes; None when unreadable."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if not m:
        return None
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def _count_cpus(cpu_list: str) -> int:
    """How many CPUs a sysfs list such as '0-1' or '0,32' names."""
    count = 0
    for part in cpu_list.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            count += int(hi) - int(lo) + 1
        elif part.strip():
            count += 1
    return count


def _sysfs_caches(root: Path) -> list[_Cache]:
    """Data and unified caches of one CPU from sysfs, one per level; private when only that CPU shares it."""
    found: dict[int, _Cache] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = _parse_size((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip() if (index / "shared_cpu_list").exists() else ""
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or not size:
            continue
        scope = "per-core" if level <= 2 or (shared and _count_cpus(shared) <= 1) else "shared"
        name = "L1d" if level == 1 else f"L{level}"
        found[level] = _Cache(name, size, scope, f"os: {index}/size = {size // 1024} KiB")
    return [found[level] for level in sorted(found)]


def _lscpu_caches() -> list[_Cache]:
    """Cache sizes per instance from ``lscpu -B`` (total over its instances); L3 counted as shared."""
    try:
        out = subprocess.run(["lscpu", "-B"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    caches = []
    for line in out.splitlines():
        m = re.match(r"\s*(L1d|L2|L3) cache:\s*(\d+)(?:\s*\((\d+) instances?\))?", line)
        if m:
            total, instances = int(m.group(2)), int(m.group(3) or 1)
            scope = "shared" if m.group(1) == "L3" else "per-core"
            caches.append(_Cache(m.group(1), total // instances, scope, f"os: lscpu -B: {line.strip()}"))
    return caches


_DEFAULT_CACHES = (
    _Cache("L1d", 32 * 1024, "per-core", "assumed: typical 32 KiB L1 data cache (the OS reported none)"),
    _Cache("L2", 1024 * 1024, "per-core", "assumed: typical 1 MiB L2 cache (the OS reported none)"),
    _Cache("L3", 8 * 1024 * 1024, "shared", "assumed: typical 8 MiB L3 cache (the OS reported none)"),
)


def cache_levels() -> tuple[_Cache, ...]:
    """This CPU's data cache levels (level, size in bytes, scope, source): sysfs, else lscpu, else defaults."""
    caches = _sysfs_caches(Path("/sys/devices/system/cpu/cpu0/cache")) or _lscpu_caches()
    return tuple(caches) if caches else _DEFAULT_CACHES


def _cpu_times() -> tuple[int, int] | None:
    """(all, stolen) CPU time ticks of the machine from /proc/stat; stolen time is what a hypervisor gave other
    guests while this one wanted to run. None where there is no such file."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        if fields[0] == "cpu":
            ticks = [int(x) for x in fields[1:]]
            return sum(ticks[:8]), (ticks[7] if len(ticks) > 7 else 0)
    return None


def _memory_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes, None where there is no such file."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


# ---------------------------------------------------------------------------------------------------- graphs


def _vi(name: str, shape: Sequence[int] | None, dtype: int = FLOAT) -> onnx.ValueInfoProto:
    """A typed graph input/output (shape None: unstated)."""
    return helper.make_tensor_value_info(name, dtype, list(shape) if shape is not None else None)


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[Sequence[int], int]],
    outputs: Sequence[str],
    inits: Mapping[str, np.ndarray] | None = None,
) -> onnx.ModelProto:
    """A model of ``nodes`` (opset 17 plus com.microsoft) with typed inputs and float outputs of unstated shape."""
    graph = helper.make_graph(
        list(nodes),
        "calibration",
        [_vi(n, s, t) for n, (s, t) in inputs.items()],
        [_vi(o, None) for o in outputs],
        [onnx.numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return model


class _Rand:
    """Deterministic small random tensors (no denormals, no overflow), as sessions.random_array makes them."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def f(self, *shape: int) -> np.ndarray:
        return sessions.random_array(tuple(shape), FLOAT, self.rng)

    def positive(self, *shape: int) -> np.ndarray:
        return (np.abs(self.f(*shape)) + 0.5).astype(np.float32)


# A benchmark builds (model, feeds); a chain benchmark builds them for a chain length n.
Built = tuple[onnx.ModelProto, dict[str, np.ndarray]]


@dataclass(frozen=True)
class _Bench:
    """One micro-benchmark: what it measures (a label), how (chain, profiled, or an epilogue pair), and its graph
    builder."""

    label: str
    mode: str  # "chain" | "profile" | "epilogue"
    build: Callable[..., Built]
    harvest: frozenset[str] | None = None  # op classes whose nodes are kept (None: every node measured)
    cold: bool | None = None  # read the weights cold (None: when they are large, see _COLD_MIN_WEIGHTS)


def _chain_model(
    op: str,
    shape: Sequence[int],
    n: int,
    rand: _Rand,
    *,
    domain: str = "",
    extra: Sequence[str] = (),
    inits: Mapping[str, np.ndarray] | None = None,
    feeds_extra: Mapping[str, np.ndarray] | None = None,
    **attrs: Any,
) -> Built:
    """x -> op -> op -> ... (n nodes), each also reading the shared ``extra`` inputs (initializers or inputs)."""
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [prev, *extra], [out], name=f"{op}_{i}", domain=domain, **attrs))
        prev = out
    inputs = {"x": (tuple(shape), FLOAT)}
    feeds = {"x": rand.f(*shape)}
    for name, value in (feeds_extra or {}).items():
        inputs[name] = (value.shape, FLOAT)
        feeds[name] = value
    return _model(nodes, inputs, ["y"], inits or {}), feeds


def _single(
    op: str,
    inputs: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray] | None = None,
    *,
    order: Sequence[str],
    domain: str = "",
    outputs: int = 1,
    **attrs: Any,
) -> Built:
    """One node reading ``order`` (graph inputs fed with ``inputs``, initializers from ``weights``)."""
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, list(order), outs, name=op, domain=domain, **attrs)
    model = _model([node], {k: (v.shape, FLOAT) for k, v in inputs.items()}, outs, weights or {})
    return model, dict(inputs)


def _tailed(built: Built) -> Built:
    """The model with a Neg after each graph output, so that the measured node writes an intermediate tensor (an
    arena buffer that stays in cache between runs, as inside a model) rather than a fresh graph output."""
    model, feeds = built
    outputs = {o.name for o in model.graph.output}
    for node in list(model.graph.node):
        for i, out in enumerate(node.output):
            if out in outputs:
                node.output[i] = f"{out}__body"
                model.graph.node.append(helper.make_node("Neg", [f"{out}__body"], [out], name=f"{out}__tail"))
    return model, feeds


def _reorder_chain(rand: _Rand, c: int, hw: int, segments: int = 4) -> Built:
    """1x1 Conv -> Neg, repeated: onnxruntime reorders every conv's input to NCHWc and its output back for the Neg,
    on intermediate tensors, as between the NCHWc and plain parts of a model."""
    nodes, prev = [], "x"
    for i in range(segments):
        out = "y" if i == segments - 1 else f"n{i}"
        nodes.append(helper.make_node("Conv", [prev, "w"], [f"c{i}"], name=f"conv{i}", kernel_shape=[1, 1]))
        nodes.append(helper.make_node("Neg", [f"c{i}"], [out], name=f"neg{i}"))
        prev = out
    return _model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], {"w": rand.f(c, c, 1, 1)}), {"x": rand.f(1, c, hw, hw)}


# ---------------------------------------------------------------------------------------------------- benchmarks


def _conv(
    rand: _Rand,
    cin: int,
    cout: int,
    hw: int,
    k: int,
    stride: int = 1,
    group: int = 1,
    batch: int = 1,
    activation: str = "Relu",
) -> Built:
    """Conv, followed by an activation that onnxruntime fuses into it: Relu (as in most CNNs) or Clip to [0, 6]
    (MobileNet's ReLU6)."""
    pad = k // 2
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w", "b"],
            ["c"],
            name="conv",
            group=group,
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad] * 4,
        )
    ]
    weights = {"w": rand.f(cout, cin // group, k, k), "b": rand.f(cout)}
    if activation == "Clip":
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="clip"))
        weights.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
    else:
        nodes.append(helper.make_node(activation, ["c"], ["y"], name="act"))
    return _model(nodes, {"x": ((batch, cin, hw, hw), FLOAT)}, ["y"], weights), {"x": rand.f(batch, cin, hw, hw)}


def _gemm(rand: _Rand, m: int, k: int, n: int) -> Built:
    """Gemm by a weight with transB, as PyTorch exports Linear layers."""
    return _single(
        "Gemm", {"a": rand.f(m, k)}, {"w": rand.f(n, k), "bias": rand.f(n)}, order=["a", "w", "bias"], transB=1
    )


def _matmul_weight(rand: _Rand, batch: int, m: int, k: int, n: int) -> Built:
    """MatMul of an activation by a weight (onnxruntime prepacks it, like Gemm's)."""
    return _single("MatMul", {"a": rand.f(batch, m, k)}, {"w": rand.f(k, n)}, order=["a", "w"])


def _matmul_act(rand: _Rand, heads: int, m: int, k: int, n: int) -> Built:
    """Batched MatMul of two activations, as attention computes scores and context per head."""
    return _single("MatMul", {"a": rand.f(1, heads, m, k), "b": rand.f(1, heads, k, n)}, order=["a", "b"])


def _pool(rand: _Rand, op: str, c: int, hw: int, k: int, stride: int, pad: int, after_conv: bool = False) -> Built:
    """A pooling window op; ``after_conv`` puts a 1x1 conv in front so that onnxruntime runs the NCHWc pool."""
    attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    if not after_conv:
        return _single(op, {"x": rand.f(1, c, hw, hw)}, order=["x"], **attrs)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node(op, ["c"], ["y"], name="pool", **attrs),
    ]
    return _model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], {"w": rand.f(c, c, 1, 1)}), {"x": rand.f(1, c, hw, hw)}


def _global_pool(rand: _Rand, op: str, c: int, hw: int, after_conv: bool) -> Built:
    """A global pooling; ``after_conv`` puts a 1x1 conv in front so that onnxruntime runs it in NCHWc."""
    if not after_conv:
        return _single(op, {"x": rand.f(1, c, hw, hw)}, order=["x"])
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node(op, ["c"], ["y"], name="gpool"),
    ]
    return _model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], {"w": rand.f(c, c, 1, 1)}), {"x": rand.f(1, c, hw, hw)}


def _batchnorm_nchwc(rand: _Rand, c: int, hw: int) -> Built:
    """Conv+Relu then BatchNormalization: onnxruntime turns the BN into a depthwise 1x1 NCHWc conv (DenseNet)."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("BatchNormalization", ["r", "s", "b", "m", "v"], ["y"], name="bn"),
    ]
    weights = {"w": rand.f(c, c, 1, 1), "s": rand.positive(c), "b": rand.f(c), "m": rand.f(c), "v": rand.positive(c)}
    return _model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], weights), {"x": rand.f(1, c, hw, hw)}


def _concat(rand: _Rand, parts: int, c: int, hw: int) -> Built:
    """Concat of ``parts`` NCHW tensors along channels (Inception, DenseNet, U-Net skips)."""
    inputs = {f"x{i}": rand.f(1, c, hw, hw) for i in range(parts)}
    return _single("Concat", inputs, order=list(inputs), axis=1)


def _split(rand: _Rand, parts: int, c: int, hw: int) -> Built:
    """Split along channels into ``parts`` equal tensors (ShuffleNet v2)."""
    return _single("Split", {"x": rand.f(1, c * parts, hw, hw)}, order=["x"], outputs=parts, axis=1)


def _slice(rand: _Rand, shape: Sequence[int], axis: int, end: int) -> Built:
    """The first ``end`` entries of ``axis``."""
    node = helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"], name="slice")
    inits = {"st": np.array([0], np.int64), "en": np.array([end], np.int64), "ax": np.array([axis], np.int64)}
    return _model([node], {"x": (tuple(shape), FLOAT)}, ["y"], inits), {"x": rand.f(*shape)}


def _transpose(rand: _Rand, shape: Sequence[int], perm: Sequence[int]) -> Built:
    """Transpose by ``perm`` (attention head splits and merges, channel shuffles, layout changes)."""
    return _single("Transpose", {"x": rand.f(*shape)}, order=["x"], perm=list(perm))


def _resize(rand: _Rand, c: int, hw: int, after_conv: bool) -> Built:
    """Nearest 2x upsampling as PyTorch exports it; after a conv onnxruntime runs it as an NCHWc Upsample."""
    scales = np.array([1, 1, 2, 2], dtype=np.float32)
    attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    if not after_conv:
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", **attrs)
        return _model([node], {"x": ((1, c, hw, hw), FLOAT)}, ["y"], {"scales": scales}), {"x": rand.f(1, c, hw, hw)}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node("Resize", ["c", "", "scales"], ["y"], name="resize", **attrs),
    ]
    weights = {"w": rand.f(c, c, 1, 1), "scales": scales}
    return _model(nodes, {"x": ((1, c, hw, hw), FLOAT)}, ["y"], weights), {"x": rand.f(1, c, hw, hw)}


def _reduce(rand: _Rand, op: str, shape: Sequence[int], axes: Sequence[int]) -> Built:
    """A reduction over ``axes`` (ReduceSum takes them as an input since opset 13, the others as an attribute)."""
    node = (
        helper.make_node(op, ["x", "axes"], ["y"], name=op, keepdims=1)
        if op == "ReduceSum"
        else helper.make_node(op, ["x"], ["y"], name=op, keepdims=1, axes=list(axes))
    )
    inits = {"axes": np.array(axes, dtype=np.int64)} if op == "ReduceSum" else {}
    return _model([node], {"x": (tuple(shape), FLOAT)}, ["y"], inits), {"x": rand.f(*shape)}


def _benchmarks(rand: _Rand, quick: bool) -> list[_Bench]:
    """The op-class benchmarks: shapes typical of CNNs and transformers at batch 1 (a reduced set when quick)."""
    b: list[_Bench] = []

    def profile(label: str, build: Callable[[], Built], harvest: Iterable[str], cold: bool | None = None) -> None:
        b.append(_Bench(label, "profile", lambda: _tailed(build()), frozenset(harvest), cold))

    def chain(label: str, build: Callable[[int], Built]) -> None:
        b.append(_Bench(label, "chain", build))

    def epilogue(label: str, build: Callable[[str], Built]) -> None:
        b.append(_Bench(label, "epilogue", lambda activation: _tailed(build(activation))))

    # convolutions (NCHWc after optimization unless grouped): ResNet, VGG, U-Net, AlexNet, Inception, MobileNet stems
    convs = [
        (64, 64, 56, 3, 1),
        (128, 128, 28, 3, 1),
        (256, 256, 14, 3, 1),
        (96, 128, 28, 3, 1),
        (64, 96, 14, 3, 1),
        (512, 512, 14, 3, 1),
        (128, 128, 56, 3, 2),
        (32, 64, 27, 5, 1),
        (16, 64, 55, 3, 1),
        (64, 256, 56, 1, 1),
        (256, 64, 56, 1, 1),
        (128, 512, 28, 1, 1),
        (512, 128, 28, 1, 1),
        (1024, 256, 14, 1, 1),
        (256, 1024, 14, 1, 1),
        (192, 32, 28, 1, 1),
        (256, 512, 28, 1, 2),
        (96, 32, 56, 1, 1),
        (512, 512, 7, 3, 1),
        (160, 224, 7, 3, 1),
        (256, 512, 8, 3, 1),
        (1024, 256, 7, 1, 1),
        (2048, 512, 7, 1, 1),
        (3, 64, 224, 7, 2),
        (3, 32, 224, 3, 2),
        (32, 16, 112, 1, 1),
        (16, 96, 112, 1, 1),
        (64, 16, 56, 1, 1),
        (128, 128, 112, 3, 1),
        (256, 256, 56, 3, 1),
        (192, 64, 64, 3, 1),
        (384, 128, 32, 3, 1),
        (32, 32, 128, 3, 1),
        (256, 512, 13, 3, 1),
        (64, 192, 27, 5, 1),
        (96, 256, 55, 5, 2),
        (3, 64, 224, 3, 1),
        (3, 64, 224, 11, 4),
        (3, 96, 224, 7, 2),
        (32, 4, 128, 1, 1),
        (16, 32, 28, 5, 1),
        (32, 96, 28, 5, 1),
    ]
    if quick:
        convs = [(32, 32, 28, 3, 1), (64, 64, 28, 1, 1), (64, 64, 14, 3, 1), (64, 64, 7, 3, 1)]
    for cin, cout, hw, k, s in convs:
        profile(f"Conv {cin}->{cout} {k}x{k}/{s} @{hw}x{hw}", lambda a=(cin, cout, hw, k, s): _conv(rand, *a), _CONVS)
    # strided ones; the stride-1 ones are the Relu twins of the epilogue pairs below
    depthwise = [(96, 112, 2), (144, 56, 2), (576, 14, 2)]
    if quick:
        depthwise = [(64, 28, 1)]
    for c, hw, s in depthwise:
        profile(
            f"depthwise Conv {c} 3x3/{s} @{hw}x{hw}",
            lambda a=(c, hw, s): _conv(rand, a[0], a[0], a[1], 3, a[2], group=a[0]),
            _CONVS,
        )
    # MobileNet's ReLU6 (Clip) is applied in a pass over the output after the kernel: its depthwise convolutions
    # and 1x1 expansions, outputs from 188 kB to 4.8 MB (the depthwise Relu twins are depthwise class samples too)
    epilogues = [
        (144, 144, 56, 3, 144),
        (32, 32, 112, 3, 32),
        (192, 192, 28, 3, 192),
        (384, 384, 14, 3, 384),
        (960, 960, 7, 3, 960),
        (16, 96, 112, 1, 1),
        (24, 144, 56, 1, 1),
        (32, 192, 28, 1, 1),
        (64, 384, 14, 1, 1),
        (160, 960, 7, 1, 1),
    ]
    if quick:  # large enough that the Clip's pass stands out of the profiler's 1 us resolution
        epilogues = [(32, 192, 28, 1, 1)]
    for cin, cout, hw, k, g in epilogues:
        epilogue(
            f"{'depthwise ' if g > 1 else ''}Conv {cin}->{cout} {k}x{k} @{hw}x{hw}",
            lambda activation, a=(cin, cout, hw, k, g): _conv(rand, *a[:4], group=a[4], activation=activation),
        )
    # grouped: ShuffleNet's 1x1 and ResNeXt's 3x3 in plain layout; AlexNet's two-group 3x3, whose groups fill
    # whole NCHWc blocks, is a conv_mid sample
    grouped = [(136, 28, 1, 4), (272, 14, 1, 4), (544, 7, 1, 4), (384, 13, 3, 2), (128, 56, 3, 32)]
    if quick:
        grouped = [(136, 28, 1, 4)]
    for c, hw, k, g in grouped:
        profile(
            f"grouped Conv {c} g{g} {k}x{k} @{hw}x{hw}",
            lambda a=(c, hw, k, g): _conv(rand, a[0], a[0], a[1], a[2], group=a[3]),
            _CONVS,
        )

    # matrix products: transformer projections and MLPs, attention, and matrix-vector classifiers at batch 1
    gemms = [
        (197, 768, 768),
        (197, 768, 3072),
        (197, 3072, 768),
        (197, 768, 2304),
        (50, 512, 512),
        (128, 1024, 1024),
        (16, 256, 256),
    ]
    gemms += [(1, 9216, 4096), (1, 4096, 4096), (1, 2048, 1000), (1, 1024, 1000), (1, 512, 1000)]
    if quick:
        gemms = [(64, 128, 128), (1, 1024, 1000)]
    for m, k, n in gemms:
        profile(f"Gemm {m}x{k}x{n}", lambda a=(m, k, n): _gemm(rand, *a), {"gemm"})
    if not quick:
        profile("MatMul 1x197x768 by weight 768x768", lambda: _matmul_weight(rand, 1, 197, 768, 768), {"gemm"})
    acts = [(12, 197, 64, 197), (12, 197, 197, 64), (8, 128, 64, 128), (4, 64, 32, 64)]
    if quick:
        acts = [(4, 64, 32, 64)]
    for h, m, k, n in acts:
        profile(f"MatMul {h}x{m}x{k}x{n}", lambda a=(h, m, k, n): _matmul_act(rand, *a), {"matmul"})

    # pooling
    pools = [
        ("MaxPool", 64, 112, 3, 2, 1, True),
        ("MaxPool", 96, 109, 3, 2, 0, True),
        ("MaxPool", 192, 56, 3, 2, 1, True),
        ("MaxPool", 256, 27, 3, 2, 0, True),
        ("MaxPool", 480, 28, 3, 2, 1, True),
        ("AveragePool", 192, 28, 3, 1, 1, True),
        ("AveragePool", 576, 14, 3, 1, 1, True),
        ("AveragePool", 128, 56, 2, 2, 0, True),
        ("MaxPool", 256, 13, 3, 2, 0, True),
        ("MaxPool", 512, 14, 2, 2, 0, True),
        ("MaxPool", 128, 32, 2, 2, 0, True),
        ("MaxPool", 24, 112, 3, 2, 1, False),
        ("AveragePool", 60, 28, 3, 2, 1, False),
        ("AveragePool", 64, 56, 3, 1, 1, False),
        ("MaxPool", 64, 112, 3, 2, 1, False),
    ]
    if quick:
        pools = [("MaxPool", 64, 56, 3, 2, 1, True), ("AveragePool", 64, 28, 3, 1, 1, False)]
    for op, c, hw, k, s, p, nchwc in pools:
        profile(
            f"{op} {c} {k}x{k}/{s} @{hw}x{hw}{'' if nchwc else ' (NCHW)'}",
            lambda a=(op, c, hw, k, s, p, nchwc): _pool(rand, *a),
            {"pool", "pool_nchw"},
        )
    gpools = [
        ("GlobalAveragePool", 2048, 7, True),
        ("GlobalAveragePool", 1024, 7, True),
        ("GlobalAveragePool", 512, 7, True),
        ("GlobalAveragePool", 1000, 13, False),
        ("GlobalAveragePool", 64, 56, True),
        ("GlobalMaxPool", 1280, 7, True),
    ]
    if quick:
        gpools = [("GlobalAveragePool", 512, 14, True)]
    for op, c, hw, nchwc in gpools:
        profile(f"{op} {c} @{hw}x{hw}", lambda a=(op, c, hw, nchwc): _global_pool(rand, *a), {"global_pool"})

    # normalization
    for c, hw in [(64, 56), (128, 28), (256, 14), (512, 7), (256, 56), (640, 14)] if not quick else [(64, 56)]:
        profile(
            f"BatchNormalization {c} @{hw}x{hw} (NCHWc)", lambda a=(c, hw): _batchnorm_nchwc(rand, *a), {"batchnorm"}
        )
    for c, hw in [(64, 56), (96, 28)] if not quick else [(16, 14)]:
        chain(
            f"BatchNormalization {c} @{hw}x{hw}",
            lambda n, a=(c, hw): _chain_model(
                "BatchNormalization",
                (1, a[0], a[1], a[1]),
                n,
                rand,
                extra=["s", "b", "m", "v"],
                inits={"s": rand.positive(a[0]), "b": rand.f(a[0]), "m": rand.f(a[0]), "v": rand.positive(a[0])},
            ),
        )
    for t, d in [(197, 768), (50, 512), (128, 1024), (16, 256)] if not quick else [(16, 64)]:
        chain(
            f"LayerNormalization {t}x{d}",
            lambda n, a=(t, d): _chain_model(
                "LayerNormalization",
                (1, a[0], a[1]),
                n,
                rand,
                extra=["g", "bt"],
                inits={"g": rand.positive(a[1]), "bt": rand.f(a[1])},
                axis=-1,
            ),
        )
    for c, hw in [(64, 56), (32, 128), (256, 14)] if not quick else [(8, 14)]:
        chain(
            f"InstanceNormalization {c} @{hw}x{hw}",
            lambda n, a=(c, hw): _chain_model(
                "InstanceNormalization",
                (1, a[0], a[1], a[1]),
                n,
                rand,
                extra=["s", "b"],
                inits={"s": rand.positive(a[0]), "b": rand.f(a[0])},
            ),
        )
    for c, hw in [(96, 55), (64, 56), (192, 27), (256, 13)] if not quick else [(16, 14)]:
        chain(
            f"LRN {c} @{hw}x{hw}",
            lambda n, a=(c, hw): _chain_model(
                "LRN", (1, a[0], a[1], a[1]), n, rand, size=5, alpha=1e-4, beta=0.75, bias=1.0
            ),
        )
    for shape in [(1, 1000), (1, 12, 197, 197), (1, 8, 128, 128), (1, 4, 64, 64)] if not quick else [(1, 2, 32, 32)]:
        chain(f"Softmax {'x'.join(map(str, shape))}", lambda n, s=shape: _chain_model("Softmax", s, n, rand, axis=-1))

    # elementwise and activations, over sizes spanning the cache levels
    sizes = [(1, 64, 16, 16), (1, 64, 56, 56), (1, 256, 56, 56), (1, 197, 768), (1, 128, 28, 28), (1, 32, 112, 112)]
    if quick:
        sizes = [(1, 16, 14, 14), (1, 64, 28, 28)]
    for shape in sizes:
        label = "x".join(map(str, shape))
        chain(f"Relu {label}", lambda n, s=shape: _chain_model("Relu", s, n, rand))
        chain(
            f"Add {label}",
            lambda n, s=shape: _chain_model("Add", s, n, rand, extra=["o"], feeds_extra={"o": rand.f(*s)}),
        )
        if len(shape) == 4 and not quick:
            chain(
                f"Mul per-channel {label}",
                lambda n, s=shape: _chain_model("Mul", s, n, rand, extra=["c"], inits={"c": rand.f(s[1], 1, 1)}),
            )
            chain(
                f"Add per-channel {label}",
                lambda n, s=shape: _chain_model("Add", s, n, rand, extra=["c"], inits={"c": rand.f(s[1], 1, 1)}),
            )
    if not quick:
        chain(
            "Clip 1x144x56x56",
            lambda n: _chain_model(
                "Clip",
                (1, 144, 56, 56),
                n,
                rand,
                extra=["lo", "hi"],
                inits={"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)},
            ),
        )
    acts = [
        ("Sigmoid", (1, 64, 56, 56)),
        ("Tanh", (1, 197, 768)),
        ("Gelu", (1, 197, 3072)),
        ("Gelu", (1, 50, 512)),
        ("Sigmoid", (1, 256, 14, 14)),
        ("Erf", (1, 197, 768)),
    ]
    if quick:
        acts = [("Sigmoid", (1, 16, 14, 14))]
    for op, shape in acts:
        domain = "com.microsoft" if op == "Gelu" else ""
        chain(
            f"{op} {'x'.join(map(str, shape))}",
            lambda n, o=op, s=shape, d=domain: _chain_model(o, s, n, rand, domain=d),
        )

    # data movement
    for c, hw in (
        [(64, 28), (64, 56), (32, 112), (96, 28), (256, 14), (512, 7), (768, 14), (1024, 7)]
        if not quick
        else [(32, 28)]
    ):
        profile(
            f"Reorder NCHW <-> NCHWc {c} @{hw}x{hw}", lambda a=(c, hw): _reorder_chain(rand, *a), _REORDERS, cold=False
        )
    concats = [(2, 64, 28), (4, 64, 56), (2, 256, 14), (3, 128, 28), (2, 32, 128), (4, 128, 7)]
    if quick:  # tens of microseconds, well above _MIN_PROFILED_S
        concats = [(2, 64, 56)]
    for parts, c, hw in concats:
        profile(f"Concat {parts}x{c} @{hw}x{hw}", lambda a=(parts, c, hw): _concat(rand, *a), {"movement"})
    if not quick:
        profile(
            "Split 3x768 of 197x2304",
            lambda: _single("Split", {"x": rand.f(1, 197, 2304)}, order=["x"], outputs=3, axis=-1),
            {"movement"},
        )
        profile("Split 2x116 @28x28", lambda: _split(rand, 2, 116, 28), {"movement"})
        profile("Slice half of 1x256x56x56", lambda: _slice(rand, (1, 256, 56, 56), 1, 128), {"movement"})
    transposes = [
        ((1, 197, 12, 64), (0, 2, 1, 3)),
        ((1, 197, 12, 64), (0, 2, 3, 1)),
        ((1, 12, 197, 64), (0, 2, 1, 3)),
        ((1, 4, 34, 28, 28), (0, 2, 1, 3, 4)),
        ((1, 64, 56, 56), (0, 2, 3, 1)),
        ((1, 768, 196), (0, 2, 1)),
        ((1, 2, 116, 14, 14), (0, 2, 1, 3, 4)),
        ((1, 8, 128, 64), (0, 2, 1, 3)),
    ]
    if quick:
        transposes = [((1, 64, 28, 28), (0, 2, 3, 1))]
    for shape, perm in transposes:
        profile(
            f"Transpose {'x'.join(map(str, shape))} perm {perm}",
            lambda a=(shape, perm): _transpose(rand, *a),
            {"transpose"},
        )
    for c, hw, nchwc in (
        [(64, 32, True), (128, 16, True), (32, 64, True), (256, 8, True)] if not quick else [(32, 28, True)]
    ):
        profile(f"Resize x2 {c} @{hw}x{hw}", lambda a=(c, hw, nchwc): _resize(rand, *a), {"resize"})
    reduces = [
        ("ReduceMean", (1, 197, 768), (2,)),
        ("ReduceSum", (1, 256, 56, 56), (2, 3)),
        ("ReduceMax", (1, 1000), (1,)),
        ("ReduceMean", (1, 512, 14, 14), (2, 3)),
    ]
    if quick:
        reduces = [("ReduceMean", (1, 256, 28, 28), (2, 3))]
    for op, shape, axes in reduces:
        profile(
            f"{op} {'x'.join(map(str, shape))} axes {axes}", lambda a=(op, shape, axes): _reduce(rand, *a), {"reduce"}
        )
    return b


# ---------------------------------------------------------------------------------------------------- timing


@dataclass
class _Sample:
    """One measured node: its view and cost on the optimized graph, and its kernel time."""

    view: NodeView
    cost: Cost
    time_s: float
    label: str
    part: str = "node"  # "node": the whole kernel; "epilogue": its fused activation's pass over the output


def _spread(times: Sequence[float]) -> float:
    """How much slower the median run was than the fast estimate (0.3 = 30 %)."""
    fast = fast_estimate(times)
    return statistics.median(times) / fast - 1 if times and fast > 0 else 0.0


def _views(model: onnx.ModelProto) -> dict[str, tuple[NodeView, Cost]]:
    """Every runtime node of an optimized graph: its view and cost, as the analysis pass computes them."""
    from onnxroof.load import load_graph

    graph = load_graph(model)
    out: dict[str, tuple[NodeView, Cost]] = {}
    for node in graph.nodes:
        if node.folded:
            continue
        constants = {i: graph.constants[n] for i, n in enumerate(node.inputs) if n in graph.constants}
        view = NodeView(
            node.name,
            node.op_type,
            node.domain,
            tuple(graph.tensor(i) for i in node.inputs),
            tuple(graph.tensor(o) for o in node.outputs),
            node.attrs,
            constants,
        )
        try:
            cost, _ = compute_cost(view)
        except UnknownShape:
            continue
        out[node.name] = (view, cost)
    return out


def _weight_bytes(model: onnx.ModelProto) -> int:
    """Bytes of a benchmark's float initializers."""
    return sum(int(np.prod(t.dims)) * 4 for t in model.graph.initializer if t.data_type == FLOAT)


class _Flush:
    """Reads a buffer larger than the caches hold for the benchmarks with weights, before each timed run: a model
    reads each weight once per inference and streams the rest of the model through the caches in between, so its
    kernels find their weights in DRAM, not where the previous repetition left them."""

    def __init__(self, nbytes: int) -> None:
        self.buffer = np.ones(max(nbytes // 4, 1), dtype=np.float32)

    def __call__(self) -> None:
        float(self.buffer.sum())


class _Runner:
    """Creates sessions (kept for the whole calibration) in a scratch directory. Their thread pools park when a
    run returns, so that the idle sessions do not take cores from the one being timed (see
    sessions.session_options); within a run they spin as a user's session does."""

    def __init__(self, threads: int, provider: str, tmp: str) -> None:
        self.threads, self.provider, self.tmp = threads, provider, tmp
        self.count = 0

    def _path(self, stem: str) -> str:
        self.count += 1
        return os.path.join(self.tmp, f"{stem}{self.count}")

    def session(self, model: onnx.ModelProto, *, profile: bool = False) -> tuple[Any, onnx.ModelProto]:
        """A session on the model, and the optimized graph onnxruntime saved while creating it."""
        opt = self._path("opt") + ".onnx"
        prefix = self._path("prof") if profile else None
        sess, _ = sessions.make_session(
            model, self.provider, self.threads, "all", profile_prefix=prefix, optimized_path=opt, park_when_idle=True
        )
        return sess, onnx.load(opt, load_external_data=False)


def _timed(sess: Any, feeds: Mapping[str, np.ndarray]) -> float:
    """Wall-clock seconds of one session.run."""
    t0 = time.perf_counter()
    sess.run(None, feeds)
    return time.perf_counter() - t0


class _Profiled:
    """A benchmark timed by onnxruntime's profiler: every node's kernel time in each timed run.

    The session lives for the whole calibration; each pass runs it once untimed (to re-warm code and data after the
    other benchmarks) and ``reps`` times timed, a cold benchmark reading the flush buffer before each timed run.
    """

    def __init__(
        self, runner: _Runner, label: str, built: Built, harvest: frozenset[str] | None = None, cold: bool | None = None
    ) -> None:
        model, self.feeds = built
        self.label, self.harvest = label, harvest
        self.cold = _weight_bytes(model) >= _COLD_MIN_WEIGHTS if cold is None else cold
        self.sess, self.opt = runner.session(model, profile=True)
        self.timed: list[bool] = []  # per run, in order: whether it was a timed one
        self._times: dict[str, list[float]] | None = None

    def run_pass(self, reps: int, flush: _Flush) -> None:
        self.sess.run(None, self.feeds)
        self.timed.append(False)
        for _ in range(reps):
            if self.cold:
                flush()
                for value in self.feeds.values():  # the activations come back: a model hands them over hot
                    float(value.sum())
            self.sess.run(None, self.feeds)
            self.timed.append(True)

    def kernel_times(self) -> dict[str, list[float]]:
        """Per node, its kernel times (seconds) in the timed runs; the first call ends the profiling."""
        if self._times is None:
            self._times = self._read_profile()
        return self._times

    def _read_profile(self) -> dict[str, list[float]]:
        path = self.sess.end_profiling()
        try:
            events = json.loads(Path(path).read_text(encoding="utf-8"))
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        per: dict[str, list[float]] = {}
        for e in events:
            if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
                per.setdefault(e["name"][: -len("_kernel_time")], []).append(float(e["dur"]) * 1e-6)
        return {name: [t for t, timed in zip(ts, self.timed) if timed] for name, ts in per.items()}

    def samples(self, profiler_overhead: float, spreads: list[float]) -> list[_Sample]:
        """The nodes of the harvested classes, their kernel time net of the profiler's own cost per node."""
        views = _views(self.opt)
        found = []
        for name, ts in self.kernel_times().items():
            if name not in views or not ts:
                continue
            view, cost = views[name]
            cls = engine.op_class(view)
            if self.harvest is not None and cls not in self.harvest:
                continue
            if self.cold and cls in _REORDERS:
                continue  # the flush pushed out the activation it reads, which a model would hand it hot
            fast = fast_estimate(ts)
            if fast < _MIN_PROFILED_S or fast - profiler_overhead <= 0:
                continue
            spreads.append(_spread(ts))
            found.append(_Sample(view, cost, fast - profiler_overhead, self.label))
        return found


class _EpiloguePair:
    """A convolution profiled with Relu (applied inside the kernel) and with Clip (applied in a pass over the
    output afterwards), one after the other in each pass: the difference of their kernel times is the time of
    the Clip's pass. Measured by difference because it is a part of a kernel the profiler cannot time apart.
    A depthwise Relu twin is also a sample of the depthwise class, which then need not time the same graph again."""

    def __init__(self, runner: _Runner, label: str, build: Callable[[str], Built]) -> None:
        self.label = label
        self.relu = _Profiled(runner, f"{label} + Relu", build("Relu"), frozenset({"depthwise"}), cold=False)
        self.clip = _Profiled(runner, f"{label} + Clip", build("Clip"), frozenset(_CONVS), cold=False)

    def run_pass(self, reps: int, flush: _Flush) -> None:
        self.relu.run_pass(reps, flush)
        self.clip.run_pass(reps, flush)

    def samples(self, profiler_overhead: float, spreads: list[float]) -> list[_Sample]:
        """A depthwise Relu twin's kernel, and the Clip's pass as an epilogue sample of the Clip convolution; no
        epilogue sample when onnxruntime did not fuse the activations as expected or the difference is lost in
        the noise."""
        found = self.relu.samples(profiler_overhead, spreads)
        relu, clip = _conv_sample(self.relu, profiler_overhead), _conv_sample(self.clip, profiler_overhead)
        if relu is None or clip is None or engine.epilogue_activation(clip.view) != "Clip":
            return found
        if engine.epilogue_activation(relu.view) is not None or clip.time_s <= relu.time_s:
            return found
        spreads += [_spread(ts) for ts in self.clip.kernel_times().values() if ts]
        return found + [_Sample(clip.view, clip.cost, clip.time_s - relu.time_s, self.label, part="epilogue")]


class _Reference:
    """The reference block as a calibration job: ``reps`` batches a pass, timed as validation times it."""

    def __init__(self, threads: int, provider: str) -> None:
        self.sampler = ReferenceSampler(threads, provider)

    def run_pass(self, reps: int, flush: _Flush) -> None:
        self.sampler.sample(reps)


class _Chain:
    """A benchmark timed by the wall clock: two chains of the same node, ``lo`` and ``hi`` long, run alternately;
    the difference of their run times over ``hi - lo`` is one node's time, its dispatch included."""

    def __init__(
        self,
        runner: _Runner,
        label: str,
        build: Callable[[int], Built],
        lengths: tuple[int, int] | None = None,
        target_s: float = 0.004,
    ) -> None:
        self.label = label
        if lengths is None:
            model, feeds = build(2)
            sess, _ = runner.session(model)
            sess.run(None, feeds)
            per_node = max(min(_timed(sess, feeds) for _ in range(3)) / 2, 1e-7)
            lengths = (2, 2 + int(min(max(target_s / per_node, 4), 200)))
        self.lo, self.hi = lengths
        self.model_lo, self.feeds_lo = build(self.lo)
        model_hi, self.feeds_hi = build(self.hi)
        self.sess_lo, self.opt = runner.session(self.model_lo)
        self.sess_hi, _ = runner.session(model_hi)
        self.t_lo: list[float] = []
        self.t_hi: list[float] = []

    def run_pass(self, reps: int, flush: _Flush) -> None:
        self.sess_lo.run(None, self.feeds_lo)
        self.sess_hi.run(None, self.feeds_hi)
        for _ in range(reps):
            self.t_lo.append(_timed(self.sess_lo, self.feeds_lo))
            self.t_hi.append(_timed(self.sess_hi, self.feeds_hi))

    def per_node(self, spreads: list[float] | None = None) -> float:
        """Seconds per chain node, dispatch included."""
        if spreads is not None:
            spreads += [_spread(self.t_lo), _spread(self.t_hi)]
        return max((fast_estimate(self.t_hi) - fast_estimate(self.t_lo)) / (self.hi - self.lo), 0.0)

    def samples(self, node_overhead: float, spreads: list[float]) -> list[_Sample]:
        chain_nodes = [vc for vc in _views(self.opt).values() if engine.op_class(vc[0]) not in _REORDERS]
        if not chain_nodes:
            return []
        view, cost = chain_nodes[len(chain_nodes) // 2]
        return [_Sample(view, cost, max(self.per_node(spreads) - node_overhead, 1e-9), self.label)]


def _tiny_chains(rand: _Rand, quick: bool) -> tuple[Callable[[int], Built], Callable[[int], Built], tuple[int, int]]:
    """Chains of Neg on 16 floats (the per-node overhead) and of Neg + Reshape pairs (a shape-only node's cost)."""
    tiny = (16,)

    def neg(n: int) -> Built:
        return _chain_model("Neg", tiny, n, rand)

    def neg_reshape(n: int) -> Built:
        nodes, prev = [], "x"
        for i in range(n):
            mid, out = f"m{i}", ("y" if i == n - 1 else f"t{i}")
            nodes.append(helper.make_node("Neg", [prev], [mid], name=f"neg{i}"))
            nodes.append(helper.make_node("Reshape", [mid, "s0" if i % 2 == 0 else "s1"], [out], name=f"reshape{i}"))
            prev = out
        inits = {"s0": np.array([4, 4], np.int64), "s1": np.array([16], np.int64)}
        return _model(nodes, {"x": (tiny, FLOAT)}, ["y"], inits), {"x": rand.f(*tiny)}

    return neg, neg_reshape, (8, 48 if quick else 208)


def _neg_chain(n_floats: int, rand: _Rand) -> Callable[[int], Built]:
    """A builder of Neg chains over ``n_floats`` floats (the bandwidth of the level that holds 8 * n_floats bytes)."""
    return lambda k: _chain_model("Neg", (n_floats,), k, rand)


def _gemv_input(nbytes: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """A MatMul (1 x K) @ (K x N) whose (K x N) operand, ``nbytes`` large, is a graph input streamed from DRAM."""
    k = 4096
    n = max(nbytes // (4 * k), 16)
    a = np.random.default_rng(3).standard_normal((1, k), dtype=np.float32)
    b = np.full((k, n), 0.01, dtype=np.float32)
    model = _model(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="gemv")],
        {"a": ((1, k), FLOAT), "b": ((k, n), FLOAT)},
        ["y"],
    )
    return model, {"a": a, "b": b}, f"MatMul (1x{k}) @ ({k}x{n}) streaming a {_human(4 * k * n)} operand"


def _int8_model(n: int) -> Built:
    """MatMulInteger of uint8 (n x n) by an int8 (n x n) weight."""
    rng = np.random.default_rng(4)
    node = helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="mmi")
    graph = helper.make_graph(
        [node],
        "calibration",
        [_vi("a", (n, n), TensorProto.UINT8)],
        [_vi("y", None, TensorProto.INT32)],
        [onnx.numpy_helper.from_array(rng.integers(-127, 127, size=(n, n), dtype=np.int8), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    return model, {"a": rng.integers(0, 255, size=(n, n), dtype=np.uint8)}


def _fp16_model(n: int) -> Built:
    """MatMul of fp16 (n x n) by an fp16 (n x n) weight."""
    rng = np.random.default_rng(5)
    node = helper.make_node("MatMul", ["a", "w"], ["y"], name="mm16")
    w = (rng.standard_normal((n, n)) * 0.05).astype(np.float16)
    graph = helper.make_graph(
        [node],
        "calibration",
        [_vi("a", (n, n), TensorProto.FLOAT16)],
        [_vi("y", None, TensorProto.FLOAT16)],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    return model, {"a": (rng.standard_normal((n, n)) * 0.05).astype(np.float16)}


def _level_bytes(cache: _Cache, threads: int, quick: bool) -> int:
    """Working set of the bandwidth benchmark for a cache level: half of L1/L2, a slice of the last level."""
    capacity = cache.size * (threads if cache.scope == "per-core" else 1)
    target = capacity // 2 if cache.level in ("L1d", "L2") else min(capacity // 4, 32 * 2**20)
    return int(min(target, 4 * 2**20) if quick else target)


def effective_size(
    nominal: int, level_bytes: int, level_bw: float, probes: Sequence[tuple[int, float]]
) -> tuple[int, str]:
    """The largest working set a shared cache level serves at its measured bandwidth, and a note on how it was
    found: ``level_bw`` was measured on ``level_bytes``; ``probes`` are (bytes, bandwidth) at larger working sets.

    The level's size is the largest probe whose bandwidth holds within _HOLDS of ``level_bw``, or the size of the
    level's own benchmark when even the smallest probe falls below; the reported ``nominal`` size stands when
    every probe holds. A virtual machine reports the host's whole last-level cache, which other tenants share:
    a working set well inside that size can already run at DRAM speed.
    """
    size = level_bytes
    for nbytes, bandwidth in sorted(probes):
        if bandwidth < _HOLDS * level_bw:
            return size, (
                f"serves up to {_human(size)}: at {_human(nbytes)} its bandwidth fell to "
                f"{bandwidth / level_bw:.0%} of the level's ({bandwidth / 1e9:.1f} GB/s)"
            )
        size = nbytes
    return nominal, ""


def _dram_bytes(caches: Sequence[_Cache], quick: bool) -> int:
    """Size of the DRAM benchmark's streamed operand: twice the last cache level, 256 MiB to 1 GiB, at most a
    quarter of the available memory (64 MiB at most when quick)."""
    last = caches[-1].size if caches else 8 * 2**20
    if quick:
        return int(min(max(2 * last, 16 * 2**20), 64 * 2**20))
    size = min(max(2 * last, 256 * 2**20), 1024 * 2**20)
    available = _memory_available()
    return int(min(size, available // 4) if available else size)


def _human(nbytes: float) -> str:
    """Bytes in binary units, e.g. '1.5 MiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


# ---------------------------------------------------------------------------------------------------- ceilings


def _bin(points: list[tuple[float, float]], factor: float = 1.6, least: int = 3) -> tuple[tuple[float, float], ...]:
    """Merge points whose work lies within ``factor`` of each other, and every group of fewer than ``least`` points
    with its neighbour by work: geometric-mean work, median efficiency.

    A group of at least three is what makes the median robust: a busy moment that slowed one benchmark, or one
    shape that runs unlike its class, cannot set a point of the ceiling on its own (on a shared 2-core host, conv
    ceiling points of one to three kernels came out about 10% under what the same kernels reached when timed
    again alone). A class with fewer points than ``least`` gets one point, their median."""
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
    out = []
    for g in groups:
        work = math.exp(sum(math.log(w) for w, _ in g) / len(g))
        out.append((float(f"{work:.4g}"), float(f"{statistics.median(e for _, e in g):.4g}")))
    dedup: dict[float, float] = {}
    for w, e in out:
        dedup.setdefault(w, e)
    return tuple(sorted(dedup.items()))


def _ceilings(samples: Sequence[_Sample], bare: Device, threads: int) -> dict[str, Ceiling]:
    """Per class, (work, efficiency) points: the roofline time on the bare device over the measured time."""
    by_class: dict[str, list[tuple[float, float]]] = {}
    by_memory: dict[str, list[tuple[float, float]]] = {}
    labels: dict[str, list[str]] = {}
    for s in samples:
        if s.part == "epilogue":
            bare_pass = engine.epilogue_time(s.view, bare)
            by_memory.setdefault("epilogue", []).append((engine.epilogue_bytes(s.view), bare_pass / s.time_s))
            labels.setdefault("epilogue", []).append(s.label)
            continue
        cls = engine.op_class(s.view)
        if cls not in COMPUTE_CLASSES and cls not in MEMORY_CLASSES:
            continue
        pred, _ = engine.predict_engine(s.view, s.cost, "fp32", bare)
        gemv = cls in ("gemm", "matmul") and pred.memory_time_s > _GEMV_RATIO * pred.compute_time_s
        if cls in COMPUTE_CLASSES and not gemv:
            if s.cost.flops <= 0:
                continue
            by_class.setdefault(cls, []).append((s.cost.flops, pred.compute_time_s / s.time_s))
        else:
            if s.cost.bytes <= 0:
                continue
            by_memory.setdefault(cls, []).append((s.cost.bytes, pred.memory_time_s / s.time_s))
        labels.setdefault(cls, [])
        if s.label not in labels[cls]:
            labels[cls].append(s.label)
    out = {}
    for cls in [c for c in CEILING_NAMES if c in by_class or c in by_memory]:
        compute, memory = _bin(by_class.get(cls, [])), _bin(by_memory.get(cls, []))
        if not compute and not memory:
            continue
        what = "; ".join(labels[cls][:6]) + (f"; and {len(labels[cls]) - 6} more" if len(labels[cls]) > 6 else "")
        parts = []
        if compute:
            parts.append(
                f"fraction of the fp32 peak reached, by FLOPs, by {len(by_class[cls])} onnxruntime {cls} kernel(s)"
            )
        if memory and cls == "epilogue":
            parts.append(
                f"fraction of the memory level's bandwidth reached, by bytes moved, by the fused Clip's pass "
                f"over the output of {len(by_memory[cls])} convolution(s) (their time with Clip less their "
                f"time with Relu)"
            )
        elif memory:
            kind = "matrix-vector " if cls in COMPUTE_CLASSES else ""
            parts.append(
                f"fraction of the memory level's bandwidth reached, by bytes moved, by {len(by_memory[cls])} "
                f"{kind}{cls} kernel(s)"
            )
        source = f"calibrated: {'; '.join(parts)}; {threads} thread(s) ({what})"
        out[cls] = Ceiling(compute=compute, memory=memory, source=source)
    return out


# ---------------------------------------------------------------------------------------------------- the run


def calibrate(
    threads: int = 1,
    provider: str = "cpu",
    budget_s: float = 120.0,
    progress: Callable[[int, int], None] | None = None,
    *,
    quick: bool = False,
) -> Device:
    """Measure this host's onnxruntime roofline and per-op-class ceilings; return it as a calibrated Device.

    ``threads`` is onnxruntime's intra-op thread count, ``provider`` the execution provider (only "cpu" can be
    calibrated), ``budget_s`` the time the run may take: every benchmark is set up once, then timed in passes
    spread over the budget (a few runs each per pass), so that a benchmark a busy moment slowed down in one pass is
    measured again in the next; a kernel's time is the mean of its fastest eighth of runs. ``progress(done,
    total)`` is called as benchmarks are set up and passes run. ``quick`` runs a reduced set of small shapes in two
    passes (for tests and smoke checks). A large spread between runs (a busy machine) is reported in
    ``device.calibration.warnings``; nothing is raised for it.
    """
    if provider.lower() not in ("cpu", "cpuexecutionprovider"):
        raise UserError(
            f"cannot calibrate the {provider!r} provider",
            "calibration measures onnxruntime's CPU executor: use provider cpu",
        )
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise UserError(f"threads must be a positive integer, got {threads!r}", "pass threads=1 or more")
    if budget_s <= 0:
        raise UserError(f"the calibration budget must be positive, got {budget_s!r} s", "pass budget_s=120")
    provider = "cpu"
    start = time.perf_counter()
    cpu_start = _cpu_times()
    rand = _Rand(0)
    benches = _benchmarks(rand, quick)
    caches = cache_levels()
    max_passes = 2 if quick else _MAX_PASSES
    total = len(benches) + len(caches) + 9 + max_passes
    done = 0

    def step(n: int = 1) -> None:
        nonlocal done
        done = min(done + n, total)
        if progress is not None:
            progress(done, total)

    with tempfile.TemporaryDirectory(prefix="onnxroof-calibrate-") as tmp:
        runner = _Runner(threads, provider, tmp)
        flush = _Flush(min(_COLD_BYTES, 8 * 2**20) if quick else _COLD_BYTES)

        # set up every benchmark once
        neg, neg_reshape, lengths = _tiny_chains(_Rand(1), quick)
        node_chain = _Chain(runner, "chains of Neg on 16 floats", neg, lengths)
        reshape_chain = _Chain(runner, "chains of Neg + Reshape on 16 floats", neg_reshape, lengths)
        single = _Chain(runner, "a one-node graph", neg, (1, 2))
        profiler_probe = _Profiled(runner, "64 Neg on 16 floats", neg(64))
        # The reference block, timed in every pass like the ceilings: its prediction from them gives the network
        # factor, and validation times it again to read the machine's speed against the speed they were read at.
        reference_job = _Reference(threads, provider)
        jobs: list[Any] = [node_chain, reshape_chain, single, profiler_probe, reference_job]
        step(5)
        levels: list[tuple[_Cache, _Chain, int]] = []
        probes: dict[str, list[tuple[int, _Chain]]] = {}
        for cache in caches:
            n_floats = max(_level_bytes(cache, threads, quick) // 8, 16)
            chain = _Chain(
                runner,
                f"chain of Neg over {n_floats} floats ({_human(8 * n_floats)} read + written per node)",
                _neg_chain(n_floats, _Rand(2)),
                target_s=0.0015 if quick else 0.004,
            )
            levels.append((cache, chain, n_floats))
            jobs.append(chain)
            for factor in () if quick or cache.scope != "shared" else _PROBE_FACTORS:
                wider = factor * n_floats
                if 8 * wider <= cache.size:  # chains of 1 and 3 nodes: each node streams tens of MiB
                    wider_chain = _Chain(
                        runner, f"chain of Neg over {wider} floats", _neg_chain(wider, _Rand(2)), (1, 3)
                    )
                    probes.setdefault(cache.level, []).append((8 * wider, wider_chain))
                    jobs.append(wider_chain)
            step()
        gemv_model, gemv_feeds, dram_what = _gemv_input(_dram_bytes(caches, quick))
        dram = _Profiled(runner, dram_what, (gemv_model, gemv_feeds))
        peak_size = 256 if quick else 1024
        peaks = [
            _Profiled(
                runner,
                f"Gemm {peak_size}x{peak_size}x{peak_size}",
                _gemm(rand, peak_size, peak_size, peak_size),
                frozenset({"gemm"}),
            )
        ]
        if not quick:
            peaks.append(
                _Profiled(runner, "Conv 128->128 3x3 @56x56", _conv(rand, 128, 128, 56, 3), frozenset({"conv"}))
            )
        jobs += [dram, *peaks]
        # A ResNet downsampling convolution (3x3, stride 2) at batch 32: its data (61 MiB) is larger than any
        # cache, which the class benchmarks' is not. Its conv kernel gives dram_overlap; its NCHWc reorders join
        # the reorder class at DRAM sizes. A strided convolution reads four times the input per FLOP that a
        # stride-1 one does, and on a 2-core Xeon host it hid little or none of its DRAM traffic where a batch-32
        # stride-1 3x3 convolution hid nearly all: the figure errs toward traffic exposed. (Not paper
        # 001's batch-16 kernel, which the accuracy benchmark validates against.)
        batched = (
            None
            if quick
            else _Profiled(runner, _BATCHED_CONV_LABEL, _conv(rand, 128, 128, 56, 3, 2, batch=32), _REORDERS)
        )
        if batched is not None:
            jobs.append(batched)
        step(2)
        int8 = fp16 = None
        with contextlib.suppress(UserError):
            int8 = _Profiled(
                runner,
                f"MatMulInteger uint8 ({peak_size}x{peak_size}) @ int8 ({peak_size}x{peak_size})",
                _int8_model(peak_size),
            )
            jobs.append(int8)
        with contextlib.suppress(UserError):
            fp16 = _Profiled(
                runner, f"MatMul fp16 ({peak_size}x{peak_size}) @ ({peak_size}x{peak_size})", _fp16_model(peak_size)
            )
            if any(n.op_type == "Cast" for n in fp16.opt.graph.node):
                fp16.sess.end_profiling()
                fp16 = None  # onnxruntime runs it in fp32 between Casts: the provider has no fp16 kernel
            else:
                jobs.append(fp16)
        step(2)
        class_jobs: list[Any] = []
        for bench in benches:
            with contextlib.suppress(UserError):  # an op this onnxruntime build lacks leaves its class out
                if bench.mode == "chain":
                    class_jobs.append(_Chain(runner, bench.label, bench.build, target_s=0.0015 if quick else 0.004))
                elif bench.mode == "epilogue":
                    class_jobs.append(_EpiloguePair(runner, bench.label, bench.build))
                else:
                    class_jobs.append(_Profiled(runner, bench.label, bench.build(), bench.harvest, bench.cold))
            step()
        jobs += class_jobs

        # time every benchmark in passes spread over what is left of the budget
        passes = 0
        pass_time = 0.0
        while passes < max_passes:
            left = budget_s - (time.perf_counter() - start)
            if passes >= 2 and left < 1.2 * pass_time + 1.0:
                break
            t0 = time.perf_counter()
            for job in jobs:
                job.run_pass(_REPS if not quick else 2, flush)
            pass_time = time.perf_counter() - t0
            passes += 1
            step()
        step(total)

        # what the passes measured
        spreads: list[float] = []
        node_overhead = node_chain.per_node(spreads)
        reshape_cost = max(reshape_chain.per_node(spreads) - node_overhead, 0.0)
        run_overhead = max(fast_estimate(single.t_lo) - node_overhead, 0.0)
        probe = [t for ts in profiler_probe.kernel_times().values() for t in ts]
        profiler_overhead = fast_estimate(probe) if probe else 0.0
        level_bw = {
            cache.level: (8 * n_floats / max(chain.per_node(spreads) - node_overhead, 1e-9), chain.label)
            for cache, chain, n_floats in levels
        }
        level_sizes = {
            cache.level: effective_size(
                cache.size,
                8 * n_floats,
                level_bw[cache.level][0],
                [
                    (nbytes, nbytes / max(wide.per_node(spreads) - node_overhead, 1e-9))
                    for nbytes, wide in probes[cache.level]
                ],
            )
            for cache, _, n_floats in levels
            if cache.level in probes
        }
        dram_times = dram.kernel_times().get("gemv", [])
        if not dram_times:
            raise UserError("calibration failed: the DRAM bandwidth benchmark produced no timings", "run it again")
        b = gemv_feeds["b"]
        dram_bw = 4.0 * (b.size + b.shape[0] + b.shape[1]) / max(fast_estimate(dram_times) - profiler_overhead, 1e-9)
        del gemv_feeds, b
        fp32 = [
            (x.cost.flops / x.time_s, f"{x.label} ({x.view.domain or 'ai.onnx'}::{x.view.op_type})")
            for job in peaks
            for x in job.samples(profiler_overhead, spreads)
        ]
        int8_peak = _matrix_rate(int8, profiler_overhead, peak_size)
        fp16_peak = _matrix_rate(fp16, profiler_overhead, peak_size)
        samples = [
            x
            for job in class_jobs + ([batched] if batched is not None else [])
            for x in (
                job.samples(node_overhead, spreads)
                if isinstance(job, _Chain)
                else job.samples(profiler_overhead, spreads)
            )
        ]
        batched_conv = _conv_sample(batched, profiler_overhead) if batched is not None else None

    # assemble the device: the peak is the best fp32 rate seen on a large kernel
    candidates = fp32 + [
        (x.cost.flops / x.time_s, x.label)
        for x in samples
        if engine.op_class(x.view) in COMPUTE_CLASSES and x.time_s >= 1e-4 and x.cost.flops > 0
    ]
    if not candidates:
        raise UserError("calibration failed: no compute benchmark produced a timing", "run the calibration again")
    peak_value, peak_what = max(candidates)
    ort_version = _ort_version()
    how = f"onnxruntime {ort_version} {provider} provider, {threads} thread(s), fastest eighth of {passes} passes"
    peak_table = {"fp32": Peak(peak_value, True, f"calibrated: best fp32 rate of large kernels, {peak_what}; {how}")}
    if fp16_peak is not None:
        peak_table["fp16"] = Peak(fp16_peak, True, f"calibrated: {fp16.label}; {how}")  # type: ignore[union-attr]
    if int8_peak is not None:
        peak_table["int8"] = Peak(
            int8_peak,
            True,
            f"calibrated: {int8.label} (OP/s, a multiply-accumulate counts 2); "  # type: ignore[union-attr]
            f"{how}",
        )
    # A smaller level is never slower than a larger one: a tiny level's chain is mostly dispatch, and its
    # measured bandwidth is raised to the next level's when it came out lower.
    floor = dram_bw
    bandwidths: dict[str, float] = {}
    for cache, _, _ in reversed(levels):
        floor = bandwidths[cache.level] = max(level_bw[cache.level][0], floor)
    cache_out = []
    for c, _, _ in levels:
        size, size_note = level_sizes.get(c.level, (c.size, ""))
        cache_out.append(
            CacheLevel(
                c.level,
                size,
                bandwidths[c.level],
                f"calibrated: bandwidth of a {level_bw[c.level][1]}"
                + ("" if bandwidths[c.level] == level_bw[c.level][0] else ", raised to the next level's")
                + (f"; {size_note}; reported size from {c.source}" if size_note else f"; size from {c.source}"),
                c.scope,
            )
        )
    cpu = cpu_model()
    bare = Device(
        key=host_key(threads, provider),
        name=f"{cpu}, onnxruntime {ort_version} {provider}, {threads} thread(s) (calibrated)",
        kind="cpu",
        overlap="serial",
        peak_flops=FrozenMap(peak_table),
        memory_bandwidth=Sourced(dram_bw, f"calibrated: {dram_what}; {how}"),
        memory_capacity=None,
        launch_overhead=Sourced(
            node_overhead,
            (
                f"calibrated: slope of session.run time over chains of {lengths[0]} and {lengths[1]} Neg nodes on 16 "
                f"floats; a Reshape between them adds {reshape_cost * 1e6:.2f} us; {how}"
            ),
        ),
        caches=tuple(cache_out),
        engine="onnxruntime",
        run_overhead=Sourced(run_overhead, f"calibrated: session.run time of a one-node graph minus one node; {how}"),
    )
    ceilings = _ceilings(samples, bare, threads)
    reference = reference_job.sampler.time_s()
    duration = time.perf_counter() - start
    cpu_end = _cpu_times()
    steal = None
    if cpu_start is not None and cpu_end is not None and cpu_end[0] > cpu_start[0]:
        steal = (cpu_end[1] - cpu_start[1]) / (cpu_end[0] - cpu_start[0])
    calibration = Calibration(
        provider=provider,
        threads=threads,
        onnxruntime=ort_version,
        cpu=cpu,
        date=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        duration_s=round(duration, 1),
        warnings=tuple(_warnings(spreads, duration, budget_s, steal)),
        profiler_overhead=float(f"{profiler_overhead:.4g}"),
        reference_time_s=float(f"{reference:.4g}") if reference else None,
        suite=SUITE,
    )
    device = replace(bare, ceilings=FrozenMap(ceilings), calibration=calibration)
    if batched_conv is not None:
        device = replace(device, dram_overlap=_dram_overlap(batched_conv, device, how))
    return replace(device, network_factor=_network_factor(device, reference, how)) if reference else device


_BATCHED_CONV_LABEL = "Conv 128->128 3x3/2 @56x56, batch 32"


def _conv_sample(job: _Profiled, profiler_overhead: float) -> _Sample | None:
    """The convolution kernel of a profiled benchmark, its time net of the profiler's cost per node."""
    views = _views(job.opt)
    for name, ts in job.kernel_times().items():
        if name in views and ts and engine.op_class(views[name][0]) in _CONVS:
            view, cost = views[name]
            return _Sample(view, cost, max(fast_estimate(ts) - profiler_overhead, 1e-9), job.label)
    return None


def _dram_overlap(sample: _Sample, device: Device, how: str) -> Sourced | None:
    """The share of a convolution's DRAM traffic time that its computation hid, from a convolution whose data is
    larger than every cache: ``1 - (measured - compute) / memory``, compute at the conv ceiling (fitted on
    convolutions whose data sits in a cache) and memory at the DRAM bandwidth, clipped to [0, 1]. None when
    its data fit a cache faster than DRAM after all or it came out memory-bound: then there is nothing to
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
            f"the conv ceiling and {memory * 1e3:.3g} ms of DRAM traffic ({_human(note.working_set)}); {how}"
        ),
    )


def _network_factor(device: Device, reference_s: float, how: str) -> Sourced:
    """The reference block's measured time over its prediction on ``device`` (which has no factor yet).

    Every ceiling is read on a kernel run alone, again and again; in a network each kernel follows others that
    took the caches, the branch predictors and the prefetchers for themselves, and a shared machine's
    neighbours weigh differently on the block's larger working sets than on the small benchmarks. The block
    is typical kernels run one after the other as in a model, timed in the same passes as the benchmarks, so
    its ratio carries both to every prediction."""
    analysis = analyze_graph(sessions.engine_graph(reference_model(), device), device, engine=True)
    predicted = analysis.totals.predicted_time_s
    # The factor scales the kernels' work, not the fixed costs: the run overhead and each node's dispatch.
    fixed = (device.run_overhead.value if device.run_overhead is not None else 0.0) + sum(
        n.prediction.overhead_time_s for n in analysis.nodes
    )
    factor = (reference_s - fixed) / max(predicted - fixed, 1e-12)
    return Sourced(
        float(f"{factor:.3g}"),
        (
            f"calibrated: the reference block (onnxroof.ort.reference) ran {reference_s * 1e3:.3g} ms a run against "
            f"{predicted * 1e3:.3g} ms predicted from its kernels' ceilings; {how}"
        ),
    )


def _matrix_rate(job: _Profiled | None, profiler_overhead: float, n: int) -> float | None:
    """OP/s of an n x n x n matrix product benchmark (None when the provider has no kernel for it)."""
    if job is None:
        return None
    times = [t for ts in job.kernel_times().values() for t in ts]
    if not times:
        return None
    return 2.0 * n**3 / max(fast_estimate(times) - profiler_overhead, 1e-9)


def _warnings(spreads: Sequence[float], duration: float, budget_s: float, steal: float | None = None) -> list[str]:
    """A busy machine (runs of one benchmark far apart, or CPU time taken by the hypervisor) and an overrun budget,
    in words."""
    out = []
    if steal is not None and steal > _STEAL_WARN:
        out.append(
            f"the hypervisor took {steal:.0%} of the CPU time while calibrating (steal time in /proc/stat): "
            f"other guests were busy and every number may be pessimistic; calibrate again when they are idle"
        )
    spreads = [x for x in spreads if math.isfinite(x)]
    if spreads:
        noisy = sum(1 for x in spreads if x > _SPREAD_WARN) / len(spreads)
        median = statistics.median(spreads)
        if median > 0.1 or noisy > 0.25:
            out.append(
                f"timings varied between runs (median run {median:.0%} slower than the fastest eighth, "
                f"{noisy:.0%} of benchmarks over {_SPREAD_WARN:.0%}): the machine was busy; calibrate again "
                f"when it is idle"
            )
    if duration > budget_s:
        out.append(f"the calibration took {duration:.0f} s, over its {budget_s:.0f} s budget")
    return out


def host_device(
    threads: int = 1,
    provider: str = "cpu",
    recalibrate: bool = False,
    progress: Callable[[int, int], None] | None = None,
    budget_s: float = 120.0,
) -> Device:
    """This machine's calibrated profile: read from the cache (see :func:`cache_path`), or calibrated and cached
    first when there is none, when it cannot be read, when an older benchmark suite measured it (``SUITE``), or
    when ``recalibrate`` is set. The file is written atomically, so concurrent runs never see half a profile."""
    path = cache_path(threads, provider)
    if path.exists() and not recalibrate:
        try:
            device = load_device(path)
        except UserError:
            device = None
        if (
            device is not None
            and device.engine == "onnxruntime"
            and device.calibration is not None
            and device.calibration.suite >= SUITE
        ):
            return device
    device = calibrate(threads=threads, provider=provider, budget_s=budget_s, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_device(device, path)
    return load_device(path)
