"""Figures as the HTML report inlines them: each SVG stripped of its prologue and metadata, its ids given a prefix
unique to the figure (matplotlib reuses ids such as "patch_1" and clip-path names from one figure to the next, and
one page holds several figures), and an overlay of transparent hover targets at the figure's points."""

from __future__ import annotations

import html
import re

from onnxroof.report.embedded import EmbeddedFigure, PlacedPoint

__all__ = ["MIN_TARGET_RADIUS", "embed_svg", "figure_section", "prefix_ids"]

# A point's hover target is at least this many SVG user units across its radius (matplotlib's 1 pt, so a
# 3 pt marker still catches a pointer that is near it).
MIN_TARGET_RADIUS = 4.0

_PROLOGUE = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?", re.IGNORECASE)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_ID = re.compile(r'(\sid=")([^"]+)(")')
_URL = re.compile(r"url\(\s*#([^)\s]+)\s*\)")
_HREF = re.compile(r'((?:xlink:)?href=")#([^"]+)(")')
_ROOT_SIZE = re.compile(r'^(<svg\b[^>]*?)\s(width|height)="[^"]*"', re.DOTALL)
_ROOT_OPEN = re.compile(r"<svg\b[^>]*>", re.DOTALL)
_ROOT_CLOSE = re.compile(r"</svg>\s*$")
_UNIVERSAL_STYLE = re.compile(r"(<style[^>]*>)\s*\*\s*\{")


def prefix_ids(svg: str, prefix: str) -> str:
    """``svg`` with every id, ``url(#id)`` and ``href="#id"`` renamed to ``prefix + id``, so that two figures on
    one page never share an id and each reference still finds its own element."""
    svg = _ID.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}{m.group(3)}", svg)
    svg = _URL.sub(lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return _HREF.sub(lambda m: f"{m.group(1)}#{prefix}{m.group(2)}{m.group(3)}", svg)


def _overlay(points: tuple[PlacedPoint, ...]) -> str:
    """A group of transparent circles at the points: the elements the page's script hovers and highlights."""
    targets = [
        f'<circle class="target" cx="{p.x:.2f}" cy="{p.y:.2f}" r="{max(p.r, MIN_TARGET_RADIUS):.2f}" '
        f'data-layer="{html.escape(p.layer)}" data-tip="{html.escape(p.text)}"/>'
        for p in points
    ]
    return '<g class="targets">' + "".join(targets) + "</g>"


def _root_tag(tag: str, prefix: str) -> str:
    """The root <svg> tag with the figure's own id and class (any id it had is replaced)."""
    tag = re.sub(r'\sid="[^"]*"', "", tag)
    return tag[:-1].rstrip() + f' id="{prefix}svg" class="figure-svg">'


def embed_svg(figure: EmbeddedFigure, prefix: str) -> str:
    """The figure's SVG ready to sit inside an HTML page: no XML prologue, metadata or comments, ids prefixed,
    the root sized by the page's style sheet (its viewBox keeps the aspect ratio), the points' overlay last so
    that it lies above everything it covers."""
    svg = _PROLOGUE.sub("", figure.svg, count=1)
    svg = _METADATA.sub("", svg)
    svg = _COMMENT.sub("", svg).strip()
    svg = prefix_ids(svg, prefix)
    # matplotlib's style sheet sets stroke joins on every element ("*{...}"): scoped to this figure, so that an
    # inlined figure does not restyle the page or the other figures.
    svg = _UNIVERSAL_STYLE.sub(lambda m: f"{m.group(1)}#{prefix}svg *{{", svg)
    while _ROOT_SIZE.search(svg):
        svg = _ROOT_SIZE.sub(r"\1", svg, count=1)
    svg = _ROOT_OPEN.sub(lambda m: _root_tag(m.group(0), prefix), svg, count=1)
    if figure.points:
        svg = _ROOT_CLOSE.sub(lambda m: _overlay(figure.points) + "</svg>", svg.rstrip(), count=1)
    return svg.strip()


def figure_section(figures: tuple[EmbeddedFigure, ...] | list[EmbeddedFigure]) -> str:
    """The figures section: each figure in its own block with its heading and kind."""
    if not figures:
        return '<section id="figures"><h2>Figures</h2><p class="empty">No figures in this report.</p></section>'
    blocks = []
    for index, figure in enumerate(figures):
        prefix = f"f{index}-"
        blocks.append(
            f'<figure class="figure" id="figure-{index}" data-kind="{html.escape(figure.kind)}">'
            f"<figcaption>{html.escape(figure.title)}</figcaption>{embed_svg(figure, prefix)}</figure>"
        )
    return '<section id="figures"><h2>Figures</h2><div class="figure-grid">' + "".join(blocks) + "</div></section>"
