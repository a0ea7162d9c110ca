"""The engines a user names for a device (``--engine``, or ``DEVICE@ENGINE``): what runs the model there.

Each engine is named once here with the device kinds it runs on and one line of doc; what it runs and charges is
its engine profile (``onnxroof.predict.profiles``). Where none is named, a device runs its own: a calibrated host
onnxruntime, the engine it was measured with; a datasheet device (GPU, CPU or TPU) the plain roofline of the graph
as exported, which an engine's profile then refines.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from onnxroof.devices.schema import Device
from onnxroof.errors import UserError

__all__ = ["ENGINES", "ONNXRUNTIME", "ROOFLINE", "Engine", "parse_engine", "release_key", "split_engine", "with_engine"]

ROOFLINE = "roofline"
ONNXRUNTIME = "onnxruntime"


@dataclass(frozen=True)
class Engine:
    """An engine users name: its ``name``, the device ``kinds`` it runs on, what it is, and ``by_release``: what
    of its profile depends on the release a user names (``--engine tensorrt:8.2``); '' where nothing does."""

    name: str
    kinds: frozenset[str]
    doc: str
    by_release: str = ""


ENGINES: Mapping[str, Engine] = {
    e.name: e
    for e in (
        Engine(ROOFLINE, frozenset({"cpu", "gpu", "tpu"}), "the plain roofline of the graph as exported"),
        Engine(ONNXRUNTIME, frozenset({"cpu", "gpu"}), "onnxruntime as a calibrated host profile measured it"),
        Engine("onnxruntime-cuda", frozenset({"gpu"}), "onnxruntime's CUDA provider on its optimized graph"),
        Engine(
            "tensorrt",
            frozenset({"gpu"}),
            "TensorRT: fused kernels, attention as one",
            "whether an attention block is one kernel (TENSORRT_FUSION.attention_since)",
        ),
        Engine("pytorch-eager", frozenset({"gpu"}), "PyTorch eager: every op a kernel, dispatched from Python"),
    )
}


def split_engine(spec: str) -> tuple[str, str | None]:
    """``"a100-sxm4-80gb@tensorrt"`` -> ("a100-sxm4-80gb", "tensorrt"); a spec without ``@`` has no engine."""
    device, at, engine = spec.rpartition("@")
    return (device, engine) if at and device else (spec, None)


_RELEASE = re.compile(r"\d+(\.\d+)*")


def release_key(release: str) -> tuple[int, ...]:
    """``"8.6.1"`` -> (8, 6, 1), which orders releases."""
    return tuple(int(part) for part in release.split("."))


def parse_engine(spec: str) -> tuple[Engine, str | None]:
    """The engine and release ``spec`` names (``NAME`` or ``NAME:RELEASE``): a UserError for an unknown engine and
    for a release of an engine none of whose profile depends on its release."""
    name, colon, release = spec.partition(":")
    engine = ENGINES.get(name)
    if engine is None:
        raise UserError(f"unknown engine {name!r}", hint=f"use one of {', '.join(ENGINES)}")
    if colon and not (engine.by_release and _RELEASE.fullmatch(release)):
        releases = [n for n, e in ENGINES.items() if e.by_release]
        raise UserError(
            f"engine {name} takes no release {release!r}" if not engine.by_release else f"bad release {release!r}",
            hint=f"a release is dotted numbers (tensorrt:8.2), for {', '.join(releases)}",
        )
    return engine, release or None


def with_engine(device: Device, spec: str) -> Device:
    """``device`` run by the engine ``spec`` names (``NAME`` or ``NAME:RELEASE``, :func:`parse_engine`): a
    UserError as there, for an engine that does not run on the device's kind, and for onnxruntime on a device
    without a calibration (its ceilings are measured, not published)."""
    engine, release = parse_engine(spec)
    name = engine.name
    if device.kind not in engine.kinds:
        raise UserError(
            f"engine {name} runs on {' and '.join(sorted(engine.kinds))} devices; {device.key} is a {device.kind}",
            hint=f"pick a device of that kind with -d, or --engine {ROOFLINE}",
        )
    if name == ROOFLINE:
        return dataclasses.replace(device, engine=None, engine_release=None)
    if name == ONNXRUNTIME:
        if device.calibration is None:
            others = ", ".join(n for n, e in ENGINES.items() if device.kind in e.kinds and n != ONNXRUNTIME)
            raise UserError(
                f"engine onnxruntime needs a calibrated profile; {device.key} is a datasheet device",
                hint=f"use -d host (this machine, calibrated), or one of {others}",
            )
        return device
    return dataclasses.replace(device, engine=name, engine_release=release)
