"""A figure as the HTML report embeds it: its SVG text and, for the figures whose points stand for layers, where
each point lies in that SVG, so that the page can name a layer under the pointer and mark a layer's point."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlacedPoint:
    """One layer's point in an SVG figure.

    ``layer`` is the node name the per-layer table shows (the key a table row and its points share); ``x`` and
    ``y`` are the point's centre in the SVG's user units (origin at the top left, as in the SVG's viewBox), ``r``
    its radius in the same units; ``text`` is what hovering over it shows (the layer, its op type and numbers).
    """

    layer: str
    x: float
    y: float
    r: float
    text: str


@dataclass(frozen=True)
class EmbeddedFigure:
    """A figure of the report: ``kind`` (roofline, time, ...), its heading, the SVG document and its points."""

    kind: str
    title: str
    svg: str
    points: tuple[PlacedPoint, ...] = ()
