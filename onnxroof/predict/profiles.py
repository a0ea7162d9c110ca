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
from onnxroof.predict.terms import TERMS, Term

__all__ = [
    "ONNXRUNTIME",
    "PROFILES",
    "EngineProfile",
    "engine_profile",
    "named_profile",
    "profile_terms",
    "without_terms",
]

ONNXRUNTIME = "onnxruntime"
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


_EVERY_TERM = tuple(t.name for t in TERMS)

PROFILES: tuple[EngineProfile, ...] = (
    EngineProfile(
        name="onnxruntime-cpu",
        engine=ONNXRUNTIME,
        kinds=frozenset({"cpu"}),
        graph=ONNXRUNTIME_GRAPH,
        overlap=None,
        classes=frozenset(OP_CLASSES),
        terms=_EVERY_TERM,
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
        terms=tuple(name for name in _EVERY_TERM if name not in ("weight_wait", "bias_pass")),
        doc="onnxruntime on an accelerator (the CUDA provider): launches overlap the kernels before them",
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
