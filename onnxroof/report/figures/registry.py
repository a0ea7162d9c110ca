"""One entry per figure kind: what it needs, its data, and its drawing. ``draw`` and ``embed`` go through here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onnxroof.errors import UserError

if TYPE_CHECKING:  # the registry stays light: the command line's --help reads KINDS from it
    from onnxroof.devices import Device
    from onnxroof.ort.validate import Validation
    from onnxroof.predict.analysis import Analysis
    from onnxroof.report.figures.drawing import Drawn
    from onnxroof.whatif.sweep import Sweep

KINDS: tuple[str, ...] = ("roofline", "time", "complexity", "layers", "sweep", "census")

DESCRIPTIONS: dict[str, str] = {
    "roofline": "FLOP/s against FLOP/byte: roofs, ridge points, one point per layer, the whole model",
    "time": "compute time against memory time: launch-overhead box, runtime isocurves",
    "complexity": "FLOPs against bytes per layer, with the machine-balance diagonal",
    "layers": "per-layer intensity against the ridge points; FLOPs, bytes and time by op type",
    "sweep": "a sweep's trajectories (batch, input size, precision) across the roofline",
    "census": "a census file's models: FLOPs against memory footprint, by device, coloured by intensity",
}


@dataclass(frozen=True)
class FigureInputs:
    """What a figure is drawn from: analyses of one model (one per device or precision), optionally a validation
    on this machine (measured points) and a sweep (its trajectories); ``devices`` give the sweep's roofs;
    ``census`` a census' rows (``whatif.census``)."""

    analyses: tuple[Analysis, ...] = ()
    validation: Validation | None = None
    sweep: Sweep | None = None
    devices: tuple[Device, ...] = ()
    census: tuple[Mapping[str, Any], ...] = ()


def applicable(kind: str, inputs: FigureInputs) -> bool:
    """Whether ``inputs`` hold what figure ``kind`` needs: a sweep for 'sweep', census rows for 'census', analyses
    for the others."""
    check_kind(kind)
    if kind == "sweep":
        return inputs.sweep is not None and bool(inputs.sweep.rows)
    if kind == "census":
        return bool(inputs.census)
    return bool(inputs.analyses)


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise UserError(f"unknown figure kind {kind!r}", f"use one of {', '.join(KINDS)}")


def figure_data(kind: str, inputs: FigureInputs) -> Any:
    """The data a figure of ``kind`` shows (a PlaneData, LayersData, SweepData or CensusData)."""
    from onnxroof.report.figures.bar_data import layers_data
    from onnxroof.report.figures.census_data import census_data
    from onnxroof.report.figures.plane_data import complexity_data, roofline_data, time_data
    from onnxroof.report.figures.sweep_data import sweep_data

    if not applicable(kind, inputs):
        need = {"sweep": "a sweep with rows", "census": "census rows"}.get(kind, "at least one analysis")
        raise UserError(f"the {kind} figure needs {need}", "give the inputs it is drawn from")
    makers: dict[str, Callable[[], Any]] = {
        "roofline": lambda: roofline_data(inputs.analyses, inputs.validation),
        "time": lambda: time_data(inputs.analyses, inputs.validation),
        "complexity": lambda: complexity_data(inputs.analyses),
        "layers": lambda: layers_data(inputs.analyses),
        "sweep": lambda: sweep_data(inputs.sweep, inputs.devices),  # type: ignore[arg-type]
        "census": lambda: census_data(inputs.census),
    }
    return makers[kind]()


def drawn(kind: str, inputs: FigureInputs) -> Drawn:
    """The figure of ``kind`` and where its layer points went."""
    from onnxroof.report.figures.bars import draw_layers
    from onnxroof.report.figures.census_drawing import draw_census
    from onnxroof.report.figures.planes import draw_complexity, draw_roofline, draw_time
    from onnxroof.report.figures.sweep_drawing import draw_sweep

    drawers: dict[str, Callable[[Any], Drawn]] = {
        "roofline": draw_roofline,
        "time": draw_time,
        "complexity": draw_complexity,
        "layers": draw_layers,
        "sweep": draw_sweep,
        "census": draw_census,
    }
    return drawers[kind](figure_data(kind, inputs))


def draw(kind: str, inputs: FigureInputs) -> Any:
    """The matplotlib Figure of ``kind`` drawn from ``inputs``."""
    return drawn(kind, inputs).figure


def as_tuple(analyses: Analysis | Sequence[Analysis]) -> tuple[Analysis, ...]:
    """One analysis or several, as a tuple."""
    from onnxroof.predict.analysis import Analysis

    return (analyses,) if isinstance(analyses, Analysis) else tuple(analyses)
