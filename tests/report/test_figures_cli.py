"""onnxroof plot: each kind to each format, the measured host beside the catalog devices, and the user's mistakes
refused (exit code 2) before any work, with no file written."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import onnx
import pytest

from onnxroof.cli import main
from tests.helpers import small_conv_net
from tests.report.figure_models import matmul_relu_reshape

MAGIC = {
    ".png": lambda data: data.startswith(b"\x89PNG\r\n\x1a\n"),
    ".svg": lambda data: ET.fromstring(data).tag == "{http://www.w3.org/2000/svg}svg",
    ".pdf": lambda data: data.startswith(b"%PDF-"),
}


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "mm.onnx"
    onnx.save(matmul_relu_reshape(), str(path))
    return path


@pytest.mark.parametrize(
    ("kind", "suffix", "extra"),
    [
        ("roofline", ".png", ["-d", "v100-sxm2,t4"]),
        ("roofline", ".svg", ["-d", "v100-sxm2", "-d", "a100-sxm4-80gb", "--precision", "fp32,fp16"]),
        ("time", ".pdf", []),
        ("complexity", ".svg", ["-d", "v100-sxm2,t4"]),
        ("layers", ".png", ["-d", "v100-sxm2,t4"]),
        ("sweep", ".png", ["--batch", "1,4", "--precision", "fp32,fp16", "-d", "v100-sxm2,t4"]),
    ],
)
def test_plot_writes_each_kind_in_the_format_its_extension_names(
    kind: str, suffix: str, extra: list[str], model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    if kind == "sweep":  # the batch pass rewrites a batch it can find: the conv net's, not the flattening Reshape's
        onnx.save(small_conv_net(), str(model))
    out = tmp_path / f"figure{suffix}"
    assert main(["plot", str(model), "--kind", kind, *extra, "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data and MAGIC[suffix](data)
    assert str(out) in capsys.readouterr().out


def test_plot_replaces_a_file_only_with_force(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "figure.png"
    out.write_bytes(b"mine")
    assert main(["plot", str(model), "-o", str(out)]) == 2
    assert out.read_bytes() == b"mine"
    assert "exists" in capsys.readouterr().err
    assert main(["plot", str(model), "-o", str(out), "--force"]) == 0
    assert MAGIC[".png"](out.read_bytes())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "{tmp}/figure.jpg"], "names no format"),
        (["-o", "{tmp}/figure.png", "-d", "no-such-device"], "no-such-device"),
        (["-o", "{tmp}/figure.png", "--batch", "2"], "--batch is a sweep axis"),
        (["-o", "{tmp}/figure.png", "--kind", "layers", "--measure"], "--measure adds measured points"),
        (["-o", "{tmp}/figure.png", "--measure", "--precision", "fp16"], "cannot be measured"),
        (["-o", "{tmp}/figure.png", "--kind", "sweep", "--dim", "batch=2"], "do not apply to --kind sweep"),
        (["-o", "{tmp}/no-such-folder/figure.png"], "is not a folder"),
    ],
)
def test_plot_refuses_a_mistake_with_exit_code_2_and_writes_nothing(
    args: list[str], message: str, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    before = sorted(tmp_path.iterdir())
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["plot", str(model), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "hint" in err and "Traceback" not in err
    assert sorted(tmp_path.iterdir()) == before


def test_plot_refuses_an_unknown_kind(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(model), "--kind", "pie", "-o", str(tmp_path / "f.png")])
    assert exit_info.value.code == 2
    assert "invalid choice: 'pie'" in capsys.readouterr().err


@pytest.mark.ort
def test_measure_adds_the_measured_host_with_each_kernels_measured_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measured_on_test_host: list[object]
):
    """--measure validates on this machine's host; here the host is the hand-made calibrated one (no calibration
    run), and the figure's data holds each kernel's predicted and measured points."""
    from onnxroof.report.figures import registry

    path = tmp_path / "net.onnx"
    onnx.save(small_conv_net(), str(path))
    seen = []
    real_data = registry.figure_data
    monkeypatch.setattr(registry, "figure_data", lambda kind, inputs: seen.append(real_data(kind, inputs)) or seen[-1])
    out = tmp_path / "time.svg"
    assert main(["plot", str(path), "--kind", "time", "--measure", "-o", str(out)]) == 0
    assert measured_on_test_host == ["host"] and MAGIC[".svg"](out.read_bytes())
    (data,) = seen
    assert {p.device for p in data.points} == {"v100-sxm2", "test-host"}
    host = [p for p in data.points if p.device == "test-host"]
    measured = [p for p in host if p.measured]
    assert measured and len(measured) == len(host) / 2  # a measured point beside every predicted one
    checked = 0
    for m in measured:
        p = next(q for q in host if q.layer == m.layer and not q.measured)
        # on the kernel's intensity diagonal, scaled by measured / predicted time
        if p.x > 0 and p.y > 0 and p.time_s > 0:
            assert m.x / p.x == pytest.approx(m.measured_time_s / p.time_s)
            assert m.y / m.x == pytest.approx(p.y / p.x)
            checked += 1
    assert checked  # the convolutions at least move bytes and compute
