"""Figures of an analysis (matplotlib, imported only when a figure is drawn): the roofline, paper 001's time-based
roofline and complexity plane, per-layer intensity and op-type shares, and a sweep's trajectories.

Each kind has a data function (``*_data``: frozen dataclasses of everything the figure shows, which tests check)
and a drawing function that takes only that data. ``draw(kind, inputs)`` and ``embed(kind, inputs)`` go through
the registry; the functions below are the Python API, each returning a ``matplotlib.figure.Figure``. The data
functions live in ``plane_data`` (roofline, time, complexity), ``bar_data`` (layers) and ``sweep_data``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from onnxroof.report.figures.output import FORMATS, embed, format_of, render, save
from onnxroof.report.figures.registry import KINDS, FigureInputs, applicable, as_tuple, draw, figure_data

if TYPE_CHECKING:  # importing the package stays light (the command line's --help reads KINDS)
    from onnxroof.devices import Device
    from onnxroof.ort.validate import Validation
    from onnxroof.predict.analysis import Analysis
    from onnxroof.whatif.sweep import Sweep

__all__ = [
    "FORMATS",
    "KINDS",
    "FigureInputs",
    "applicable",
    "complexity",
    "draw",
    "embed",
    "figure_data",
    "format_of",
    "layers",
    "render",
    "roofline",
    "save",
    "sweep",
    "time_roofline",
]


def roofline(analyses: Analysis | Sequence[Analysis], validation: Validation | None = None) -> Any:
    """The roofline of one model on one or more devices; with a validation, measured points beside predicted."""
    return draw("roofline", FigureInputs(as_tuple(analyses), validation))


def time_roofline(analyses: Analysis | Sequence[Analysis], validation: Validation | None = None) -> Any:
    """Paper 001's time-based roofline: compute time against memory time, overhead box, runtime isocurves."""
    return draw("time", FigureInputs(as_tuple(analyses), validation))


def complexity(analyses: Analysis | Sequence[Analysis]) -> Any:
    """Paper 001 Fig. 2(b): FLOPs against bytes per layer with each device's machine-balance diagonal."""
    return draw("complexity", FigureInputs(as_tuple(analyses)))


def layers(analyses: Analysis | Sequence[Analysis]) -> Any:
    """Per-layer arithmetic intensity against each device's ridge point; FLOPs, bytes and time by op type."""
    return draw("layers", FigureInputs(as_tuple(analyses)))


def sweep(sweep_result: Sweep, devices: Sequence[Device | str] | None = None) -> Any:
    """A sweep's trajectories across the roofline of ``devices`` (Device objects or catalog keys; by default the
    catalog devices the sweep's rows name -- a device that is not in the catalog, such as a calibrated host, then
    gets no roof)."""
    return draw("sweep", FigureInputs(sweep=sweep_result, devices=_devices(sweep_result, devices)))


def _devices(result: Sweep, devices: Sequence[Device | str] | None) -> tuple[Device, ...]:
    from onnxroof.devices.resolve import resolve_device
    from onnxroof.errors import UserError

    if devices is not None:
        return tuple(resolve_device(d) for d in devices)
    out = []
    for key in dict.fromkeys(r.device for r in result.rows):
        try:
            out.append(resolve_device(key))
        except UserError:
            continue
    return tuple(out)
