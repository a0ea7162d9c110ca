"""Engine profiles as data: what an engine runs and what it charges a node.

A profile names the graph its engine executes, the device kinds it runs on, the op classes its calibrated ceilings
describe (a node of another class takes the device's peak and bandwidth), its overlap rule (how a node's compute,
memory and overhead combine, ``roofline.combine``; None where the device's own field decides, as onnxruntime's
profiles leave it: a calibrated host's executor runs its nodes one after the other, "serial", a roofline-only
profile's kernels overlap their launches, "max") and the prediction terms it charges, by name, its per-node cost
among them (``onnxroof.predict.terms``). A device names its profile through its ``engine`` field: a profile's own
name, or an engine's, whose profile for the device's kind applies (``engine = "onnxruntime"`` on a calibrated host
profile: onnxruntime's CPU executor).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from onnxroof.devices import OP_CLASSES, Device
from onnxroof.devices.engines import ENGINES, ONNXRUNTIME
from onnxroof.predict.fusion import FusionRules
from onnxroof.predict.terms import TERMS, Term

__all__ = [
    "ONNXRUNTIME",
    "PROFILES",
    "EngineProfile",
    "engine_profile",
    "named_profile",
    "profile_terms",
    "reads_host_memory",
    "without_terms",
]

# The graph onnxruntime runs: the model after its optimizer's fusions and layout changes (ort.optimized.engine_graph).
ONNXRUNTIME_GRAPH = "onnxruntime-optimized"


@dataclass(frozen=True, eq=False)
class EngineProfile:
    """One engine's execution as the prediction sees it (see the module's docstring). Each profile is one object
    of the registry, compared and hashed by identity."""

    name: str
    engine: str
    kinds: frozenset[str]
    graph: str
    overlap: str | None  # None: the device's own overlap field (what its calibration measured)
    classes: frozenset[str]
    terms: tuple[str, ...]
    doc: str
    # Whether the engine's process peak is this host's calibrated session and arena factors over the graph's need
    # (ort.memory_calibration): onnxruntime's CPU executor on the host it runs on.
    host_memory: bool = False
    # The kernels it runs: which nodes of its graph it fuses into one (None: each node its own kernel).
    fusion: FusionRules | None = None
    # What the host spends issuing each kernel (None: nothing apart from the device's own terms). The GPU runs a
    # kernel once the host has issued it and the one before has ended (``pipeline.streamed``).
    host: HostCost | None = None
    # The base classes whose fp32 products run as TF32 on a device with a TF32 rate (the engine's default).
    tf32_products: frozenset[str] = frozenset()
    # Under an int8 what-if, the precision of the tensors a node that is no product reads or writes (None: int8
    # like the rest): the engine has no int8 kernel for it.
    int8_others: str | None = None
    # What its predicted time holds, as a report says it.
    includes: str = "the nodes' kernels and the engine's cost per run"


@dataclass(frozen=True)
class HostCost:
    """Seconds the host spends on each ``per`` ("kernel": each node that launches one; "node": every node the
    engine runs, shape-only ones too), with its source."""

    seconds: float
    per: str
    source: str


_EVERY_TERM = tuple(t.name for t in TERMS)
ONNXRUNTIME_CUDA, TENSORRT, PYTORCH_EAGER = "onnxruntime-cuda", "tensorrt", "pytorch-eager"
# The graph onnxruntime runs on its CUDA provider (its basic rewrites, then its transformer optimizer's GPU
# fusions), and the graph as exported (an eager framework's ops one by one; TensorRT's fusions applied to it).
ONNXRUNTIME_CUDA_GRAPH, EXPORTED_GRAPH = "onnxruntime-cuda-optimized", "as-exported"
_GPU_INCLUDES = "the kernels' time on the GPU and the host's issuing them; not host-device copies or data loading"
# onnxroof's calibrated CPU executor's terms: read against a calibrated host's ceilings.
_HOST_TERMS = (
    "arithmetic",
    "projection",
    "activations",
    "weights",
    "distant_reads",
    "write_allocate",
    "bias_pass",
    "epilogue",
    "exposed_dram",
    "weight_wait",
    "output_write",
    "subnormal",
    "dispatch",
)
# A GPU engine's terms: the hardware's structure and published microbenchmarks (predict/gpu_times.py).
_GPU_TERMS = ("tensor_arithmetic", "vector_arithmetic", "streamed_bytes", "kernel_latency")

# TensorRT's layer fusions (its documentation's "Layer Fusion Catalog" and "Fused Attention"): a convolution or
# matrix product with the bias, scale, activation and elementwise sum after it; pointwise layers with each other; a
# softmax or normalization with the pointwise layers after it; multi-head attention (its two products and the
# softmax) as one kernel; shuffles (transposes, reshapes) folded into the layers beside them; Q/DQ pairs folded
# into the products.
# The first release taken to run an ONNX graph's attention block as one kernel: "on x86 TensorRT 8.6.1, it can use
# mha kernel" (NVIDIA/TensorRT issue 3575); the releases before 8.6 are assumed to run it as its two products and
# its softmax, which no release note read here contradicts.
TENSORRT_ATTENTION_SINCE = "8.6"
TENSORRT_FUSION = FusionRules(
    name=TENSORRT,
    epilogue=True,
    pointwise=True,
    normalization=True,
    attention=True,
    quantize=True,
    transposes=True,
    source="TensorRT's documentation, 'Layer Fusion Catalog' and 'Fused Attention' (docs.nvidia.com)",
    attention_since=TENSORRT_ATTENTION_SINCE,
)
# What the host spends launching one CUDA kernel: "nop_triton_direct_culaunch | 3.0us | 3.3us | cuLaunchKernel
# (raw CUDA driver)" (meta-pytorch/tritonbench, pull request 1017, on a GB200's host).
_LAUNCH_S = 3.0e-6
_LAUNCH = "cuLaunchKernel 3.0 us on the host (meta-pytorch/tritonbench pull request 1017)"
TENSORRT_HOST = HostCost(_LAUNCH_S, "kernel", f"one launch per kernel of the engine: {_LAUNCH}")
ORT_CUDA_HOST = HostCost(
    _LAUNCH_S + 2.0e-6,
    "node",
    f"assumed: {_LAUNCH}, plus 2 us of onnxruntime's executor per node, which no publication gives",
)
# PyTorch dispatches about 280 thousand operations per second ("Making Deep Learning Go Brrrr From First
# Principles", H. He, overhead section): 3.6 us an op before its kernel's launch.
EAGER_HOST = HostCost(
    1 / 280e3 + _LAUNCH_S,
    "node",
    f"derived: 1 / 280e3 ops/s of PyTorch's dispatch (H. He, 'Making Deep Learning Go Brrrr') + {_LAUNCH}",
)
# The base classes of the products an engine may compute in TF32.
_TF32_PRODUCTS = frozenset({"conv", "gemm", "matmul"})


def _gpu_profile(
    name: str,
    graph: str,
    doc: str,
    host: HostCost,
    tf32_products: frozenset[str],
    fusion: FusionRules | None = None,
    int8_others: str | None = None,
) -> EngineProfile:
    """A GPU engine's profile: named as its engine, on the kinds that engine runs on, charging the GPU terms with
    each kernel's latency added to its work ('serial': a stream starts a kernel when the one before it ends), and
    no calibrated class ceilings."""
    return EngineProfile(
        name=name,
        engine=name,
        kinds=ENGINES[name].kinds,
        graph=graph,
        overlap="serial",
        classes=frozenset(),
        terms=_GPU_TERMS,
        doc=doc,
        fusion=fusion,
        host=host,
        tf32_products=tf32_products,
        int8_others=int8_others,
        includes=_GPU_INCLUDES,
    )


PROFILES: tuple[EngineProfile, ...] = (
    EngineProfile(
        name="onnxruntime-cpu",
        engine=ONNXRUNTIME,
        kinds=frozenset({"cpu"}),
        graph=ONNXRUNTIME_GRAPH,
        overlap=None,
        classes=frozenset(OP_CLASSES),
        terms=_HOST_TERMS,
        doc="onnxruntime's CPU executor: one node after the other, each its kernel's time plus its dispatch",
        host_memory=True,
    ),
    EngineProfile(
        name="onnxruntime-accelerator",
        engine=ONNXRUNTIME,
        kinds=frozenset({"gpu", "tpu"}),
        graph=ONNXRUNTIME_GRAPH,
        overlap=None,
        classes=frozenset(OP_CLASSES),
        # An accelerator streams a kernel's weights while it computes, and its Gemm adds C inside the kernel.
        terms=tuple(name for name in _HOST_TERMS if name not in ("weight_wait", "bias_pass")),
        doc="onnxruntime on an accelerator (the CUDA provider): launches overlap the kernels before them",
    ),
    _gpu_profile(
        ONNXRUNTIME_CUDA,
        ONNXRUNTIME_CUDA_GRAPH,
        "onnxruntime's CUDA provider: the graph its optimizer hands back, one kernel per node",
        ORT_CUDA_HOST,
        # "By default, enable TF32 to speed up float GEMM/MatMul or cuDNN convolution of float matrices. bool
        # use_tf32{true};" (onnxruntime's cuda_execution_provider_info.h)
        _TF32_PRODUCTS,
    ),
    _gpu_profile(
        TENSORRT,
        EXPORTED_GRAPH,
        "TensorRT: products with their pointwise epilogues, pointwise chains and attention as one kernel each",
        TENSORRT_HOST,
        _TF32_PRODUCTS,  # BuilderFlag::kTF32: "Enabled by default" (NvInfer.h)
        TENSORRT_FUSION,
        # In int8, "if a layer runs faster in INT8 then it executes in INT8. Otherwise, FP32 or FP16 is used"
        # (TensorRT's developer guide, "Explicit Versus Implicit Quantization"), FP16 where the builder allows it as
        # Torch-TensorRT's int8 builds do (NVIDIA/TRTorch commit 26709cc, "Enable FP16 kernels for INT8
        # applications"): the softmax, the normalizations and the pointwise ops outside a product's kernel.
        int8_others="fp16",
    ),
    _gpu_profile(
        PYTORCH_EAGER,
        EXPORTED_GRAPH,
        "PyTorch in eager mode: every op its own kernel, each dispatched from Python",
        EAGER_HOST,
        # torch.backends.cudnn.allow_tf32 "defaults to True"; matmul's allow_tf32 "False in PyTorch 1.12 and
        # later" (PyTorch docs, notes/cuda.rst, "TensorFloat-32 (TF32) on Ampere (and later) devices").
        frozenset({"conv"}),
    ),
)
_BY_NAME = {p.name: p for p in PROFILES}
_BY_KIND = {(p.engine, kind): p for p in PROFILES for kind in sorted(p.kinds)}


def named_profile(device: Device) -> EngineProfile | None:
    """The profile the device's ``engine`` field names: a profile of that name, or the profile of that engine for
    the device's kind; None for a device without an engine (a datasheet device: the plain roofline) or with one no
    profile describes."""
    if device.engine is None:
        return None
    return _BY_NAME.get(device.engine) or _BY_KIND.get((device.engine, device.kind))


def engine_profile(device: Device) -> EngineProfile:
    """The profile a node's engine prediction follows on ``device``: the one it names, else onnxruntime's for its
    kind (the calibration reads its ceilings through that prediction on a device that has none yet)."""
    return named_profile(device) or _BY_KIND.get((ONNXRUNTIME, device.kind)) or PROFILES[0]


def reads_host_memory(device: Device) -> bool:
    """Whether the device's engine profile reads its process memory from this host's calibrated factors."""
    profile = named_profile(device)
    return profile is not None and profile.host_memory


@functools.cache
def profile_terms(profile: EngineProfile) -> tuple[Term, ...]:
    """The terms a profile charges, in the registry's order (the order each side sums them)."""
    unknown = set(profile.terms) - set(_EVERY_TERM)
    if unknown:
        raise KeyError(f"profile {profile.name} names unknown terms: {', '.join(sorted(unknown))}")
    return tuple(t for t in TERMS if t.name in profile.terms)


def without_terms(profile: EngineProfile, names: frozenset[str]) -> EngineProfile:
    """``profile`` charging none of the terms ``names`` (a KeyError for a name it does not charge): what the
    prediction is without them, as ``tools/ablation.py`` asks."""
    missing = names - set(profile.terms)
    if missing:
        raise KeyError(f"profile {profile.name} charges no term {', '.join(sorted(missing))}")
    kept = tuple(name for name in profile.terms if name not in names)
    return dataclasses.replace(profile, name=f"{profile.name} without {', '.join(sorted(names))}", terms=kept)
