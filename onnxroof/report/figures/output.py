"""A figure to a file (PNG, SVG or PDF by the extension, written atomically) or to the SVG text and point
positions the HTML report embeds."""

from __future__ import annotations

import io
import os
from typing import Any

from onnxroof.atomic import write_bytes
from onnxroof.report.embedded import EmbeddedFigure, PlacedPoint
from onnxroof.report.figures.registry import FigureInputs, drawn
from onnxroof.report.figures.style import marker_radius
from onnxroof.report.format import format_by_extension

FORMATS: dict[str, str] = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
PNG_DPI = 150


def format_of(path: str | os.PathLike[str]) -> str:
    """The file format an output path's extension names; a UserError for any other."""
    return format_by_extension(path, FORMATS, "figure")


def render(figure: Any, fmt: str) -> bytes:
    """The figure rendered in memory: PNG at PNG_DPI, SVG and PDF as vectors (no creation date, so that the same
    figure gives the same bytes)."""
    buffer = io.BytesIO()
    metadata: dict[str, Any] = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt, {})
    figure.savefig(buffer, format=fmt, dpi=PNG_DPI if fmt == "png" else None, metadata=metadata)
    return buffer.getvalue()


def save(figure: Any, path: str | os.PathLike[str]) -> None:
    """Write ``figure`` to ``path`` in the format its extension names (.png, .svg, .pdf), atomically."""
    write_bytes(path, render(figure, format_of(path)))


def embed(kind: str, inputs: FigureInputs) -> EmbeddedFigure:
    """The figure of ``kind`` as the HTML report embeds it: its SVG text and, for the roofline and time figures,
    each layer point's centre and radius in the SVG's user units (72 per inch, origin at the top left)."""
    result = drawn(kind, inputs)
    figure = result.figure
    svg = render(figure, "svg").decode("utf-8")  # draws the figure: the layout the transforms below read is final
    height = figure.get_figheight() * 72.0
    dpi = figure.dpi
    points = []
    if kind in ("roofline", "time"):
        for mark in result.marks:
            px, py = mark.axes.transData.transform((mark.x, mark.y))
            points.append(
                PlacedPoint(mark.layer, px / dpi * 72.0, height - py / dpi * 72.0, marker_radius(mark.area), mark.text)
            )
    return EmbeddedFigure(kind, result.title, svg, tuple(points))
