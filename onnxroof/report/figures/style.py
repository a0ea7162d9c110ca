"""What every figure shares: a colour per op type that stays the same across figures, marker sizes, number formats.

Pure Python: no matplotlib here, so that the data modules and tests can use these without drawing anything.
"""

from __future__ import annotations

import hashlib
import math

# A qualitative palette (Tableau 20: ten hues, each dark then light), distinguishable on screen and in print.
PALETTE: tuple[str, ...] = (
    "#1f77b4",
    "#aec7e8",
    "#ff7f0e",
    "#ffbb78",
    "#2ca02c",
    "#98df8a",
    "#d62728",
    "#ff9896",
    "#9467bd",
    "#c5b0d5",
    "#8c564b",
    "#c49c94",
    "#e377c2",
    "#f7b6d2",
    "#7f7f7f",
    "#c7c7c7",
    "#bcbd22",
    "#dbdb8d",
    "#17becf",
    "#9edae5",
)

# The op types most models spend their time in keep one distinct colour each, the same in every figure and report;
# any other op type gets one of the palette's colours by a stable hash of its name.
FIXED_COLOURS: dict[str, str] = {
    "Conv": "#1f77b4",
    "MatMul": "#ff7f0e",
    "Gemm": "#2ca02c",
    "Relu": "#d62728",
    "Add": "#9467bd",
    "BatchNormalization": "#8c564b",
    "MaxPool": "#e377c2",
    "GlobalAveragePool": "#7f7f7f",
    "Softmax": "#bcbd22",
    "Mul": "#17becf",
    "LayerNormalization": "#aec7e8",
    "Clip": "#ffbb78",
    "Concat": "#98df8a",
    "Transpose": "#ff9896",
    "Reshape": "#c5b0d5",
    "Div": "#c49c94",
    "Erf": "#f7b6d2",
    "Gather": "#c7c7c7",
    "Sigmoid": "#dbdb8d",
    "Resize": "#9edae5",
    "AveragePool": "#393b79",
    "Sub": "#637939",
    "Split": "#8c6d31",
    "Slice": "#843c39",
    "Flatten": "#7b4173",
    "Tanh": "#5254a3",
    "ReduceMean": "#8ca252",
    "Pow": "#bd9e39",
    "Sqrt": "#ad494a",
    "Cast": "#a55194",
}
# Marker shapes per device, in the order the devices are given: several devices share one figure.
DEVICE_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")
# Line styles per precision roof other than the analysis' own (solid).
SECONDARY_DASHES: tuple[str, ...] = ("--", "-.", ":")

FIGURE_SIZE: tuple[float, float] = (9.0, 6.0)  # inches
MIN_MARKER_AREA = 12.0  # points^2: a layer that takes no time is still visible
MAX_MARKER_AREA = 600.0  # points^2: the layer that takes all the time
MODEL_MARKER_AREA = 260.0
TOP_LAYERS = 5  # how many of the slowest layers are named next to their points
FLOOR_COLOUR = "#555555"


def op_colour(op_type: str) -> str:
    """The colour of an op type: a fixed one for common ops, else one picked by a stable hash of the name (the same
    op type gets the same colour in every figure and every run)."""
    if op_type in FIXED_COLOURS:
        return FIXED_COLOURS[op_type]
    digest = hashlib.sha1(op_type.encode("utf-8")).digest()
    return PALETTE[digest[0] % len(PALETTE)]


def marker_area(share: float) -> float:
    """A point's area (points^2) from its share of the model's time: area grows linearly with the share."""
    clipped = min(max(share, 0.0), 1.0)
    return MIN_MARKER_AREA + (MAX_MARKER_AREA - MIN_MARKER_AREA) * clipped


def marker_radius(area: float) -> float:
    """The radius in points of a circle marker of ``area`` points^2 (matplotlib's scatter sizes are areas)."""
    return math.sqrt(area) / 2.0


def device_marker(index: int) -> str:
    return DEVICE_MARKERS[index % len(DEVICE_MARKERS)]


LABEL_CHARS = 28  # a layer's name written beside its point keeps its last this many characters


def short_name(name: str, limit: int = LABEL_CHARS) -> str:
    """A layer name as a figure writes it beside a point: whole when short, else its end after an ellipsis (an
    exporter's names differ at their end: "...encoder_layer_1.mlp.3.matmul"). Hover text keeps the whole name."""
    return name if len(name) <= limit else "\u2026" + name[-(limit - 1) :]


def log_limits(values: list[float], pad: float = 2.0) -> tuple[float, float]:
    """Limits of a log axis that show every positive value with a margin of ``pad`` times either side, widened
    to whole decades; (1, 10) when there is none."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return (1.0, 10.0)
    low = 10 ** math.floor(math.log10(min(positive) / pad))
    high = 10 ** math.ceil(math.log10(max(positive) * pad))
    return (low, high)
