"""The HTML report as text: its sections, the page data its script reads, escaping of hostile names, figure
embedding, measured columns only with a validation, the page's size on a 500-layer model, and writing it."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from onnxroof.api import analyze
from onnxroof.errors import UserError
from onnxroof.ort.validate import validate
from onnxroof.predict.analysis import Analysis
from onnxroof.report.embedded import EmbeddedFigure
from onnxroof.report.html import build_report, write_report
from onnxroof.report.html_data import COLUMNS, MEASURED_COLUMNS, script_json
from onnxroof.report.html_figures import embed_svg, prefix_ids
from tests.helpers import CONV, IR_VERSION, calibrated_host, small_conv_net, three_bound_model
from tests.report.html_inputs import figure_of, point_places

HOSTILE = '</script><script>alert("x")</script><!-- & </style>'


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of each <script> element, as a browser's parser reads
    them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None


def _parse(page: str) -> _Elements:
    parser = _Elements()
    parser.feed(page)
    return parser


def _data(page: str) -> dict:
    """The JSON document the page's script reads."""
    scripts = _parse(page).scripts
    found = [text for attrs, text in scripts if attrs.get("type") == "application/json"]
    assert len(found) == 1
    return json.loads(found[0])


def _rows(page: str, which: int = 0) -> list[dict]:
    data = _data(page)
    analysis = data["analyses"][which]
    names = data["columns"] + (data["measured_columns"] if analysis["measured"] else [])
    return [dict(zip(names, row)) for row in analysis["rows"]]


@pytest.fixture(scope="module")
def three() -> Analysis:
    return analyze(three_bound_model(), "v100-sxm2")


def test_the_page_has_every_section_and_forbids_network_access(three: Analysis):
    page = build_report([three], [figure_of(three)])
    assert page.startswith("<!DOCTYPE html>")
    ids = {attrs.get("id") for _, attrs in _parse(page).tags}
    assert {"summary", "devices", "figures", "layers", "op-types", "warnings", "layer-table", "tooltip"} <= ids
    assert "validation" not in ids  # no validation given
    policy = [a["content"] for t, a in _parse(page).tags if t == "meta" and a.get("http-equiv")]
    assert policy and "default-src 'none'" in (policy[0] or "")
    # Nothing on the page names a resource to load: no src attribute, no stylesheet link, no http(s) URL outside
    # the SVG namespace declarations.
    assert not any("src" in attrs for _, attrs in _parse(page).tags)
    assert not any(t == "link" and a.get("rel") == "stylesheet" for t, a in _parse(page).tags)
    urls = set(re.findall(r"https?://[^\s\"')]+", page))
    assert urls <= {"http://www.w3.org/1999/xlink", "http://www.w3.org/2000/svg"}
    # The summary names the device and the model's predicted time, 137 + 14 + 4.2 us = 155 us on the V100
    # (each layer's time from three_bound_model's docstring, summed).
    assert "NVIDIA Tesla V100 SXM2 16 GB" in page
    assert "155 us" in page
    # The devices section gives each peak its source.
    fp32 = three.device.peak_flops["fp32"]
    assert "15.7 TFLOP/s" in page and fp32.source.split(":")[0] in page


def test_the_page_data_holds_every_layer_with_its_numbers(three: Analysis):
    rows = _rows(build_report([three]))
    assert [r["name"] for r in rows] == ["matmul", "add", "relu"]
    assert [r["bound"] for r in rows] == ["compute", "memory", "overhead"]
    matmul = rows[0]
    assert matmul["flops"] == 2 * 1024**3  # 2*M*N*K
    assert matmul["bytes"] == 3 * 1024 * 1024 * 4  # x and y read, m written, 4 bytes each
    assert matmul["op"] == "MatMul" and matmul["precision"] == "fp32" and matmul["index"] == 0
    # Shares are each layer's predicted time over their sum.
    assert sum(r["share"] for r in rows) == pytest.approx(1.0, rel=1e-5)
    assert rows[2]["predicted_s"] == pytest.approx(4.2e-6)  # one launch
    assert set(rows[0]) == set(COLUMNS)  # no measured columns without a validation


def test_a_500_layer_model_keeps_every_layer_and_a_small_page():
    count = 500
    nodes = [
        helper.make_node("Relu" if i % 2 else "Sigmoid", [f"t{i}"], [f"t{i + 1}"], name=f"layer{i}")
        for i in range(count)
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 64, 56, 56])],
        [helper.make_tensor_value_info(f"t{count}", TensorProto.FLOAT, [1, 64, 56, 56])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    analysis = analyze(model, "a100-sxm4-80gb")
    bare = build_report([analysis])
    assert [r["name"] for r in _rows(bare)] == [f"layer{i}" for i in range(count)]
    # The page's own weight for 500 layers (style, script, sections and data): far under the 5 MB budget.
    assert len(bare.encode()) < 300_000
    # With four figures of 500 points each, every figure's SVG grown to about 700 kB as matplotlib's are, the
    # page is the figures plus about what it was without them (the hover targets add ~150 B a point).
    big = [_padded(figure_of(analysis, title=f"figure {k}"), 700_000) for k in range(4)]
    page = build_report([analysis], big)
    assert len(page.encode()) < 5_000_000
    overhead = len(page.encode()) - sum(len(f.svg.encode()) for f in big)
    assert overhead < len(bare.encode()) + 4 * count * 200


def _padded(figure: EmbeddedFigure, size: int) -> EmbeddedFigure:
    """The figure with paths added until its SVG is about ``size`` bytes, as a matplotlib figure with text drawn
    as glyph paths is."""
    glyph = '<path d="M 10 10 L 20 20 L 30 10 z" style="fill: #000"/>\n'
    extra = glyph * (max(0, size - len(figure.svg)) // len(glyph))
    return EmbeddedFigure(figure.kind, figure.title, figure.svg.replace("</svg>", extra + "</svg>"), figure.points)


def test_a_hostile_layer_name_cannot_break_out_of_the_data_or_the_markup():
    analysis = analyze(three_bound_model(relu_name=HOSTILE), "v100-sxm2")
    page = build_report([analysis], [figure_of(analysis)], title=HOSTILE)
    parsed = _parse(page)
    # Exactly the page's two scripts: the data and the code; the name's "<script>" opened none.
    assert [attrs.get("type") for attrs, _ in parsed.scripts] == ["application/json", None]
    assert "alert" not in parsed.scripts[1][1]
    # The name round-trips through the data and the figure's hover target.
    assert _rows(page)[2]["name"] == HOSTILE
    targets = [a for t, a in parsed.tags if t == "circle" and a.get("class") == "target"]
    assert HOSTILE in {a["data-layer"] for a in targets}
    # The JSON has none of the characters that end an element or open a comment.
    assert not set("<>&") & set(script_json({"name": HOSTILE}))
    assert json.loads(script_json({"name": HOSTILE, "line": "\u2028"})) == {"name": HOSTILE, "line": "\u2028"}


def test_unsupported_ops_and_warnings_are_listed():
    nodes = [
        helper.make_node("Frobnicate", ["x"], ["f"], domain="example.custom", name="frob"),
        helper.make_node("Relu", ["f"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])],
        value_info=[helper.make_tensor_value_info("f", TensorProto.FLOAT16, [2, 3])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)
    with pytest.warns(UserWarning):
        analysis = analyze(model, "gtx940mx")  # a device with no fp16 peak: fp16 layers use its fp32 one
    section = build_report([analysis]).split('id="warnings"')[1].split("</section>")[0]
    assert "example.custom::Frobnicate" in section and "no cost function" in section
    assert "gtx940mx lists no fp16 peak" in section
    assert [r["supported"] for r in _rows(build_report([analysis]))] == [False, True]


def test_figures_are_inlined_with_ids_unique_to_each_and_their_references_kept(three: Analysis):
    figures = [figure_of(three), figure_of(three, kind="time", title="Time", layers=["add"])]
    page = build_report([three], figures)
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page and "<metadata>" not in page
    ids = [a["id"] for _, a in _parse(page).tags if a.get("id")]
    assert len(ids) == len(set(ids))  # both figures define clip1, marker, patch_1: prefixed apart
    referenced = re.findall(r"url\(#([^)]+)\)", page) + re.findall(r'href="#([^"]+)"', page)
    svg_refs = [r for r in referenced if r.startswith("f")]
    assert {"f0-clip1", "f1-clip1", "f0-marker", "f1-marker"} <= set(svg_refs)
    assert set(svg_refs) <= set(ids)
    # One transparent target per point, at the point, carrying its layer.
    targets = [a for t, a in _parse(page).tags if t == "circle" and a.get("class") == "target"]
    assert [a["data-layer"] for a in targets] == ["matmul", "add", "relu", "add"]
    (x0, y0) = point_places(3)[0]
    assert (float(targets[0]["cx"]), float(targets[0]["cy"])) == pytest.approx((x0, y0))
    # matplotlib's style sheet for every element is scoped to its own figure.
    assert "#f0-svg *{" in page and "#f1-svg *{" in page


def test_prefixing_rewrites_ids_urls_and_hrefs_only():
    svg = '<g id="a" clip-path="url(#a)"><use xlink:href="#a"/><a href="#a"/><text>id="b" url</text></g>'
    assert prefix_ids(svg, "p-") == (
        '<g id="p-a" clip-path="url(#p-a)"><use xlink:href="#p-a"/><a href="#p-a"/><text>id="b" url</text></g>'
    )


def test_a_figure_without_points_gets_no_overlay_and_keeps_its_viewbox(three: Analysis):
    bare = EmbeddedFigure("memory", "Memory", figure_of(three).svg)
    svg = embed_svg(bare, "f3-")
    assert 'class="targets"' not in svg
    assert 'viewBox="0 0 400.0 300.0"' in svg and 'width="400.0pt"' not in svg  # sized by the page's style


def test_a_page_without_figures_says_so(three: Analysis):
    page = build_report([three])
    assert "No figures in this report." in page and 'class="target"' not in page


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory):
    """A real validation of a small conv net: timed and profiled by onnxruntime against a hand-made host."""
    path = tmp_path_factory.mktemp("model") / "conv_net.onnx"
    onnx.save(small_conv_net(), path)
    return validate(str(path), calibrated_host({"conv": CONV}), repeat=5, runs=5, spread_s=0.0)


@pytest.mark.ort
def test_measured_columns_and_the_comparison_come_with_a_validation(validated):
    page = build_report([validated.analysis], validation=validated)
    rows = _rows(page)
    assert set(rows[0]) == set(COLUMNS) | set(MEASURED_COLUMNS)
    # Each kernel named after a node puts its measured time on that node's row.
    measured = {r["name"]: r["measured_s"] for r in rows}
    for kernel in validated.kernels:
        if kernel.name in measured:
            assert measured[kernel.name] == pytest.approx(kernel.measured_time_s, rel=1e-5)
    section = page.split('id="validation"')[1]
    assert "Predicted against measured" in page
    assert all(k.name in section for k in validated.kernels)
    assert f"{validated.model_error:+.1%}" in section


@pytest.mark.ort
def test_a_validation_adds_its_analysis_beside_the_others(validated):
    other = analyze(small_conv_net(), "v100-sxm2")
    data = _data(build_report([other], validation=validated))
    assert [a["measured"] for a in data["analyses"]] == [False, True]
    assert data["analyses"][1]["device"] == validated.analysis.device.key


def test_write_report_is_atomic_and_refuses_an_existing_file_without_force(tmp_path: Path, three: Analysis):
    target = tmp_path / "report.html"
    page = build_report([three])
    write_report(target, page)
    assert target.read_text(encoding="utf-8") == page
    with pytest.raises(UserError, match="already exists"):
        write_report(target, "other")
    assert target.read_text(encoding="utf-8") == page  # untouched
    write_report(target, "other", force=True)
    assert target.read_text(encoding="utf-8") == "other"
    assert os.listdir(tmp_path) == ["report.html"]  # no temporary file left
    with pytest.raises(UserError, match="no folder"):
        write_report(tmp_path / "missing" / "report.html", page)
    with pytest.raises(UserError, match="is a folder"):
        write_report(tmp_path, page, force=True)


def test_cache_sizes_are_given_in_binary_units():
    # calibrated_host's caches: L1d 32 * 1024 B, L2 1024 * 1024 B, L3 8 * 1024 * 1024 B.
    page = build_report([analyze(small_conv_net(), calibrated_host(), as_exported=True)])
    devices = page.split('id="devices"')[1].split("</section>")[0]
    assert all(size in devices for size in (">32 KiB<", ">1 MiB<", ">8 MiB<"))
