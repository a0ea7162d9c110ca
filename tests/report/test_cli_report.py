"""onnxroof report: one page per model with every figure that applies, real figures' points under the page's
hover targets, a 500-layer model far under the 5 MB the page may take, and the user's mistakes refused (exit
code 2) before any work, with no file written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from onnxroof.cli import main
from tests.helpers import IR_VERSION, small_conv_net, three_bound_model


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "three.onnx"
    onnx.save(three_bound_model(), str(path))
    return path


def _page_data(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert found, "the page carries its data"
    return json.loads(found.group(1))


def _kinds(page: str) -> list[str]:
    return re.findall(r'<figure class="figure" id="figure-\d+" data-kind="([a-z]+)"', page)


def test_a_report_on_two_devices_holds_every_analysis_figure_with_each_layers_points(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "report.html"
    assert main(["report", str(model), "-d", "v100-sxm2,t4", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    # Without sweep axes every figure but the sweep applies.
    assert _kinds(page) == ["roofline", "time", "complexity", "layers"]
    # The roofline and time figures get a hover target per layer and device: 3 layers x 2 devices each.
    for index in (0, 1):
        figure = page.split(f'id="figure-{index}"')[1].split("</figure>")[0]
        targets = re.findall(r'<circle class="target"[^>]*data-layer="([^"]+)"', figure)
        assert sorted(targets) == sorted(["matmul", "add", "relu"] * 2)
    assert "wrote the report to" in capsys.readouterr().out


def test_sweep_axes_add_the_sweep_figure(tmp_path: Path):
    path = tmp_path / "net.onnx"
    onnx.save(small_conv_net(), str(path))
    out = tmp_path / "report.html"
    assert main(["report", str(path), "--batch", "1,4", "-o", str(out)]) == 0
    assert _kinds(out.read_text(encoding="utf-8")) == ["roofline", "time", "complexity", "layers", "sweep"]


def _chain(layers: int) -> onnx.ModelProto:
    """``layers`` nodes in a chain, alternating Relu and Sigmoid on a [1, 64, 28, 28] tensor."""
    nodes = [
        helper.make_node("Relu" if i % 2 else "Sigmoid", [f"t{i}"], [f"t{i + 1}"], name=f"layer{i}")
        for i in range(layers)
    ]
    shape = [1, 64, 28, 28]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(f"t{layers}", TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def test_a_500_layer_model_on_two_devices_stays_under_5_mb(tmp_path: Path):
    path = tmp_path / "chain.onnx"
    onnx.save(_chain(500), str(path))
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-d", "v100-sxm2,t4", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert out.stat().st_size < 5_000_000
    assert len(_kinds(page)) == 4
    # Every layer of both analyses is in the page's data, none dropped to keep it small.
    data = _page_data(page)
    assert [len(a["rows"]) for a in data["analyses"]] == [500, 500]


def test_the_report_replaces_a_file_only_with_force(model: Path, tmp_path: Path):
    out = tmp_path / "report.html"
    out.write_text("mine")
    assert main(["report", str(model), "-o", str(out)]) == 2
    assert out.read_text() == "mine"
    assert main(["report", str(model), "-o", str(out), "--force"]) == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "{tmp}/report.pdf"], "names no format"),
        (["-o", "{tmp}/report.html", "-d", "no-such-device"], "no-such-device"),
        (["-o", "{tmp}/report.html", "--measure", "--precision", "fp16"], "cannot be measured"),
        (["-o", "{tmp}/report.html", "--threads", "0"], "--threads 0"),
        (["-o", "{tmp}/report.html", "--batch", "2", "--dim", "n=2"], "do not apply with the sweep axes"),
        (["-o", "{tmp}/no-such-folder/report.html"], "is not a folder"),
    ],
)
def test_the_report_refuses_a_mistake_with_exit_code_2_and_writes_nothing(
    args: list[str], message: str, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    before = sorted(tmp_path.iterdir())
    assert main(["report", str(model), *[a.replace("{tmp}", str(tmp_path)) for a in args]]) == 2
    err = capsys.readouterr().err
    assert message in err and "hint" in err and "Traceback" not in err
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.ort
def test_measure_adds_the_host_its_kernels_and_the_comparison(tmp_path: Path, measured_on_test_host: list[object]):
    """--measure validates on this machine's host; here the host is the hand-made calibrated one (no calibration
    run). The page then holds the host's analysis beside the catalog device's, the measured points in the
    roofline and time figures, and the predicted-against-measured section."""
    path = tmp_path / "net.onnx"
    onnx.save(small_conv_net(), str(path))
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-d", "v100-sxm2,host", "--measure", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert measured_on_test_host == ["host"]  # measured once; the host named among the devices is the measured one
    analyses = _page_data(page)["analyses"]
    assert [(a["device"], a["measured"]) for a in analyses] == [("v100-sxm2", False), ("test-host", True)]
    assert '<section id="validation">' in page
    # The roofline's targets: each v100 layer once, each host kernel predicted and measured.
    roofline = page.split('id="figure-0"')[1].split("</figure>")[0]
    texts = re.findall(r'<circle class="target"[^>]*data-tip="([^"]*)"', roofline)
    assert any("measured" in t for t in texts)
