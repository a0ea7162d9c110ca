"""Inputs of the HTML report's tests: figures in the form the figure module hands over (a matplotlib-style SVG
document with its XML prologue, a viewBox in pt, the ids every matplotlib figure reuses, and the points' places
in its user units), and the analyses to report on."""

from __future__ import annotations

import html
from collections.abc import Sequence

from onnxroof.predict.analysis import Analysis
from onnxroof.report.embedded import EmbeddedFigure, PlacedPoint

WIDTH, HEIGHT = 400.0, 300.0  # the SVG's viewBox, in user units (pt)
RADIUS = 3.0


def point_places(count: int) -> list[tuple[float, float]]:
    """Where the i-th point is drawn: left to right across the axes, alternating high and low."""
    step = (WIDTH - 80) / max(count, 1)
    return [(60 + i * step, 80.0 if i % 2 == 0 else 200.0) for i in range(count)]


def figure_of(
    analysis: Analysis, kind: str = "roofline", title: str = "Roofline", layers: Sequence[str] = ()
) -> EmbeddedFigure:
    """A figure with one marker per layer (all of the analysis' layers unless ``layers`` names some): a <circle>
    under a clip path and a <use> of a shared marker path, as matplotlib draws a scatter."""
    names = list(layers) or [n.name for n in analysis.nodes]
    places = point_places(len(names))
    markers = "".join(
        f'<circle cx="{x}" cy="{y}" r="{RADIUS}" style="fill: #1f77b4"/>'
        f'<use xlink:href="#marker" x="{x}" y="{y}" style="fill: none; stroke: #000"/>'
        for x, y in places
    )
    svg = (
        '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n'
        '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n  "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
        f'<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="{WIDTH}pt" height="{HEIGHT}pt" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" version="1.1">\n'
        ' <metadata><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/></metadata>\n'
        ' <defs><style type="text/css">*{stroke-linejoin: round; stroke-linecap: butt}</style>'
        f'<clipPath id="clip1"><rect x="40" y="20" width="{WIDTH - 60}" height="{HEIGHT - 50}"/></clipPath>'
        '<path id="marker" d="M 0 3 L 3 0 L 0 -3 L -3 0 z"/></defs>\n'
        ' <g id="figure_1"><g id="patch_1">'
        f'<path d="M 0 0 L {WIDTH} 0 L {WIDTH} {HEIGHT} L 0 {HEIGHT} z" style="fill: #ffffff"/></g>\n'
        f'  <g id="axes_1" clip-path="url(#clip1)">{markers}</g>\n'
        f'  <text x="{WIDTH / 2}" y="14" style="text-anchor: middle">{html.escape(title)}</text>\n'
        " </g>\n</svg>\n"
    )
    by_name = {n.name: n for n in analysis.nodes}
    points = tuple(
        PlacedPoint(
            name,
            x,
            y,
            RADIUS,
            f"{name}\n{by_name[name].op_type}, {by_name[name].prediction.bound}-bound",
        )
        for name, (x, y) in zip(names, places)
    )
    return EmbeddedFigure(kind, title, svg, points)
