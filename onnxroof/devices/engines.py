"""The engines a user names for a device (``--engine``, or ``DEVICE@ENGINE``): what runs the model there.

Each engine is named once here with the device kinds it runs on and one line of doc; what it runs and charges is
its engine profile (``onnxroof.predict.profiles``). Where none is named, a device runs its own: a calibrated host
onnxruntime, the engine it was measured with; a datasheet device (GPU, CPU or TPU) the plain roofline of the graph
as exported, which an engine's profile then refines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from onnxroof.devices.schema import Device
from onnxroof.errors import UserError

__all__ = ["ENGINES", "ONNXRUNTIME", "ROOFLINE", "Engine", "split_engine", "with_engine"]

ROOFLINE = "roofline"
ONNXRUNTIME = "onnxruntime"


@dataclass(frozen=True)
class Engine:
    """An engine users name: its ``name``, the device ``kinds`` it runs on, and what it is."""

    name: str
    kinds: frozenset[str]
    doc: str


ENGINES: Mapping[str, Engine] = {
    e.name: e
    for e in (
        Engine(ROOFLINE, frozenset({"cpu", "gpu", "tpu"}), "the plain roofline of the graph as exported"),
        Engine(ONNXRUNTIME, frozenset({"cpu", "gpu"}), "onnxruntime as a calibrated host profile measured it"),
        Engine("onnxruntime-cuda", frozenset({"gpu"}), "onnxruntime's CUDA provider on its optimized graph"),
        Engine("tensorrt", frozenset({"gpu"}), "TensorRT: fused kernels, attention as one"),
        Engine("pytorch-eager", frozenset({"gpu"}), "PyTorch eager: every op a kernel, dispatched from Python"),
    )
}


def split_engine(spec: str) -> tuple[str, str | None]:
    """``"a100-sxm4-80gb@tensorrt"`` -> ("a100-sxm4-80gb", "tensorrt"); a spec without ``@`` has no engine."""
    device, at, engine = spec.rpartition("@")
    return (device, engine) if at and device else (spec, None)


def with_engine(device: Device, name: str) -> Device:
    """``device`` run by the engine ``name``: a UserError for an unknown engine, one that does not run on the
    device's kind, and onnxruntime on a device without a calibration (its ceilings are measured, not published)."""
    engine = ENGINES.get(name)
    if engine is None:
        raise UserError(f"unknown engine {name!r}", hint=f"use one of {', '.join(ENGINES)}")
    if device.kind not in engine.kinds:
        raise UserError(
            f"engine {name} runs on {' and '.join(sorted(engine.kinds))} devices; {device.key} is a {device.kind}",
            hint=f"pick a device of that kind with -d, or --engine {ROOFLINE}",
        )
    if name == ROOFLINE:
        return dataclasses.replace(device, engine=None)
    if name == ONNXRUNTIME:
        if device.calibration is None:
            others = ", ".join(n for n, e in ENGINES.items() if device.kind in e.kinds and n != ONNXRUNTIME)
            raise UserError(
                f"engine onnxruntime needs a calibrated profile; {device.key} is a datasheet device",
                hint=f"use -d host (this machine, calibrated), or one of {others}",
            )
        return device
    return dataclasses.replace(device, engine=name)
