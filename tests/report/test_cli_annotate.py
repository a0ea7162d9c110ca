"""onnxroof annotate: the annotated model and Model Explorer data written, weights carried, outputs refused before
the work, and a user's mistakes answered with one line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxroof.cli import main
from onnxroof.report.annotate import PREFIX
from tests.helpers import small_conv_net


@pytest.fixture
def net(tmp_path: Path) -> Path:
    path = tmp_path / "net.onnx"
    onnx.save(small_conv_net(), str(path))
    return path


def props(proto) -> dict[str, str]:
    return {e.key: e.value for e in proto.metadata_props}


def test_annotate_writes_the_model_and_model_explorer_data(net: Path, tmp_path: Path, capsys):
    before = net.read_bytes()
    out, explorer = tmp_path / "out.onnx", tmp_path / "bound.json"
    args = ["annotate", str(net), "-o", str(out), "-d", "t4", "--model-explorer", str(explorer)]
    assert main([*args, "--model-explorer-value", "bound"]) == 0
    printed = capsys.readouterr().out
    assert "NVIDIA T4" in printed and f"wrote {out}, {explorer}" in printed
    assert net.read_bytes() == before  # the input is never written

    annotated = onnx.load(str(out))
    onnx.checker.check_model(annotated, full_check=True)
    # small_conv_net: conv1 3->8 channels, 3x3, pad 1, on 16x16, with bias:
    # 2*1*8*16*16*3*3*3 + 8*16*16 = 110592 + 2048 = 112640 FLOPs.
    assert props(annotated.graph.node[0])[PREFIX + "flops"] == "113 kFLOP"
    assert props(annotated)[PREFIX + "device"].endswith("[t4]")

    data = json.loads(explorer.read_text())
    # The main graph's id is its name; the nodes are named, so their ids are their names.
    assert list(data["conv_net"]["results"]) == ["conv1", "relu1", "conv2", "pool", "flatten", "fc"]
    assert "thresholds" in data["conv_net"]

    assert main([*args, "--force", "-f", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["annotated_nodes"] == 6 and report["folded_nodes"] == 0
    assert report["written"] == [str(out), str(explorer)]
    assert report["summary"]["flops"] == props(onnx.load(str(out)))[PREFIX + "flops"]


@pytest.mark.ort
def test_external_weights_are_carried_into_the_annotated_model(tmp_path: Path):
    ort = pytest.importorskip("onnxruntime")
    source_dir, out_dir = tmp_path / "src", tmp_path / "out"
    source_dir.mkdir()
    out_dir.mkdir()
    model = small_conv_net()
    weights = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    onnx.save(model, str(source_dir / "net.onnx"), save_as_external_data=True, location="net.bin", size_threshold=0)
    assert (source_dir / "net.bin").exists()

    out = out_dir / "net.annotated.onnx"
    assert main(["annotate", str(source_dir / "net.onnx"), "-o", str(out)]) == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["net.annotated.onnx"]  # weights inline, under 2 GB
    annotated = onnx.load(str(out))
    for init in annotated.graph.initializer:
        assert init.data_location == onnx.TensorProto.DEFAULT
        assert np.array_equal(numpy_helper.to_array(init), weights[init.name])

    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    runs = [
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        for m in (small_conv_net(), annotated)  # onnx.save moved `model`'s weights out: build it afresh
    ]
    assert np.array_equal(runs[0], runs[1])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-d", "no-such-device"], "no-such-device"),
        (["--model-explorer", "data.txt"], "extension .txt"),
        (["-p", "fp12"], "unknown precision"),
        (["--dim", "batch=x"], "must be an integer"),
    ],
)
def test_user_errors_exit_2_with_one_line(net: Path, tmp_path: Path, capsys, extra, message):
    out = tmp_path / "out.onnx"
    assert main(["annotate", str(net), "-o", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "(hint: " in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_an_unreadable_model_exits_2(tmp_path: Path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    assert main(["annotate", str(bad), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "not a readable ONNX model" in err and "(hint: " in err
    assert main(["annotate", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "(hint: " in err


def test_outputs_are_refused_before_any_work(net: Path, tmp_path: Path, capsys):
    before = net.read_bytes()
    # The input as the output is refused, with --force too.
    assert main(["annotate", str(net), "-o", str(net), "--force"]) == 2
    assert "is the input model" in capsys.readouterr().err
    assert net.read_bytes() == before

    out, explorer = tmp_path / "out.onnx", tmp_path / "me.json"
    explorer.write_text("{}")
    # An existing --model-explorer file stops the command before the model is written.
    assert main(["annotate", str(net), "-o", str(out), "--model-explorer", str(explorer)]) == 2
    assert "me.json exists" in capsys.readouterr().err
    assert not out.exists() and explorer.read_text() == "{}"

    out.write_bytes(b"keep")
    assert main(["annotate", str(net), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_bytes() == b"keep"
    assert main(["annotate", str(net), "-o", str(tmp_path / "no_folder" / "out.onnx")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_help_says_the_graph_is_the_one_exported(capsys):
    with pytest.raises(SystemExit):
        main(["annotate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "graph as exported" in text and "--model-explorer" in text


def test_absent_weights_give_a_graph_only_annotation_that_says_so(tmp_path: Path, capsys):
    onnx.save(small_conv_net(), str(tmp_path / "net.onnx"), save_as_external_data=True, location="w.bin")
    (tmp_path / "w.bin").unlink()
    out = tmp_path / "out.onnx"
    assert main(["annotate", str(tmp_path / "net.onnx"), "-o", str(out), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["graph_only"] is True
    annotated = onnx.load(str(out), load_external_data=False)
    assert props(annotated.graph.node[0])[PREFIX + "flops"] == "113 kFLOP"  # the costs need shapes only
