"""Figures as files and as the HTML report embeds them: every kind drawn, each format's file of that format, the
SVG's point positions where matplotlib drew the points."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from onnxroof.api import analyze
from onnxroof.errors import UserError
from onnxroof.report import figures
from onnxroof.report.figures import KINDS, FigureInputs, applicable, embed, save
from onnxroof.report.figures.style import FIGURE_SIZE, marker_area, marker_radius
from onnxroof.whatif.sweep import Sweep, SweepRow
from tests.report.figure_models import MATMUL_BYTES, MATMUL_FLOPS, V100_LAUNCH, matmul_relu_reshape

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"


@pytest.fixture(scope="module")
def inputs() -> FigureInputs:
    model = matmul_relu_reshape()
    rows = tuple(
        SweepRow(b, "-", "stored", "stored", "v100-sxm2", "as-exported", 1e-4 * b, 1e9 * b, 1e8 * b, 10.0, "memory")
        for b in (1, 4)
    )
    census = ({"model": "mm.onnx", "device": "v100-sxm2", "flops": 1e9, "footprint_bytes": 1e8, "intensity": 10.0},)
    return FigureInputs(
        analyses=(analyze(model, "v100-sxm2"), analyze(model, "t4")),
        sweep=Sweep("mm", rows),
        devices=(analyze(model, "v100-sxm2").device,),
        census=census,
    )


def test_each_kind_applies_to_what_it_is_drawn_from(inputs: FigureInputs):
    assert all(applicable(kind, inputs) for kind in KINDS)
    assert not applicable("sweep", FigureInputs(analyses=inputs.analyses))
    assert not applicable("roofline", FigureInputs(sweep=inputs.sweep))
    with pytest.raises(UserError, match="unknown figure kind"):
        applicable("pie", inputs)
    with pytest.raises(UserError, match="needs a sweep"):
        figures.draw("sweep", FigureInputs(analyses=inputs.analyses))


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_drawn_and_titled_with_the_model(kind: str, inputs: FigureInputs):
    figure = figures.draw(kind, inputs)
    titles = " ".join(ax.get_title() for ax in figure.axes)
    names = " ".join(t.get_text() for ax in figure.axes for t in ax.texts)  # a census names its models by point
    assert "mm" in titles + names and "v100-sxm2" in titles
    labelled = [ax for ax in figure.axes if ax.get_xlabel() and ax.get_ylabel()]
    assert labelled  # the main axes say what they measure


def test_the_api_functions_return_figures(inputs: FigureInputs):
    from matplotlib.figure import Figure

    analyses = inputs.analyses
    drawn = [
        figures.roofline(analyses[0]),
        figures.time_roofline(analyses),
        figures.complexity(analyses),
        figures.layers(analyses),
        figures.sweep(inputs.sweep, ["v100-sxm2"]),
    ]
    assert all(isinstance(f, Figure) for f in drawn)


@pytest.mark.parametrize(
    ("suffix", "check"),
    [
        (".png", lambda data: data.startswith(b"\x89PNG\r\n\x1a\n")),
        (".svg", lambda data: ET.fromstring(data).tag == SVG + "svg"),
        (".pdf", lambda data: data.startswith(b"%PDF-")),
    ],
)
def test_save_writes_the_format_the_extension_names(suffix: str, check, inputs: FigureInputs, tmp_path: Path):
    path = tmp_path / f"figure{suffix.upper()}"  # the extension's case does not matter
    save(figures.roofline(inputs.analyses), path)
    data = path.read_bytes()
    assert data and check(data)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


def test_save_refuses_an_extension_that_names_no_figure_format(inputs: FigureInputs, tmp_path: Path):
    with pytest.raises(UserError, match=r"\.jpg names no figure format"):
        save(figures.roofline(inputs.analyses), tmp_path / "figure.jpg")
    assert list(tmp_path.iterdir()) == []


def test_embed_places_each_layer_point_where_the_svg_draws_it(inputs: FigureInputs):
    embedded = embed("roofline", FigureInputs(inputs.analyses[:1]))
    root = ET.fromstring(embedded.svg)
    width, height = FIGURE_SIZE[0] * 72, FIGURE_SIZE[1] * 72  # SVG user units: 72 per inch
    assert [float(v) for v in root.get("viewBox", "").split()] == [0, 0, width, height]
    assert {p.layer for p in embedded.points} == {"matmul", "relu", "reshape"}
    matmul = next(p for p in embedded.points if p.layer == "matmul")
    assert matmul.r == pytest.approx(marker_radius(marker_area(0.5)))  # half the model's time
    assert "MatMul" in matmul.text and "overhead-bound" in matmul.text and "4.20 us" in matmul.text

    # The figure drawn again: matplotlib's own transform of the point's data coordinates, y flipped into SVG units.
    figure = figures.roofline(inputs.analyses[0])
    figures.render(figure, "svg")
    ax = figure.axes[0]
    px, py = ax.transData.transform((MATMUL_FLOPS / MATMUL_BYTES, MATMUL_FLOPS / V100_LAUNCH))
    expected = (px / figure.dpi * 72, height - py / figure.dpi * 72)
    assert (matmul.x, matmul.y) == pytest.approx(expected, abs=0.01)
    # and the SVG itself has a marker there
    markers = [(float(u.get("x", "nan")), float(u.get("y", "nan"))) for u in root.iter(SVG + "use")]
    assert any(abs(x - matmul.x) < 0.05 and abs(y - matmul.y) < 0.05 for x, y in markers)
    # the point lies inside the plotting area
    left, bottom = ax.transAxes.transform((0, 0)) / figure.dpi * 72
    right, top = ax.transAxes.transform((1, 1)) / figure.dpi * 72
    assert left < matmul.x < right and height - top < matmul.y < height - bottom


def test_embed_of_a_figure_without_layer_points_carries_only_its_svg(inputs: FigureInputs):
    embedded = embed("layers", inputs)
    assert embedded.kind == "layers" and embedded.points == ()
    assert ET.fromstring(embedded.svg).tag == SVG + "svg"
    assert "mm" in embedded.title


def test_embed_titles_the_figure_on_one_line_whatever_the_drawing_wraps(inputs: FigureInputs):
    embedded = embed("roofline", inputs)
    assert embedded.title == "Roofline of mm on v100-sxm2 (fp32), t4 (fp32)"
    assert {p.layer for p in embedded.points} == {"matmul", "relu", "reshape"}
    assert len(embedded.points) == 6  # each layer on each of the two devices
