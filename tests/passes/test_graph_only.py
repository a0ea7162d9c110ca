"""Every pass on a graph-only model (its external data file missing), through the command line: a result that
says it is graph-only, or one line naming the value the pass would need."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.passes.weights import ABSENT
from tests.helpers import IR_VERSION

# Conv 3x3 8 -> 16 (pad 1, bias) on 16x16 -> Relu -> GlobalAveragePool -> Reshape [1, 16] -> MatMul [16, 10].
C_IN, C_OUT, SIDE, CLASSES = 8, 16, 16, 10


def graph_only_model(folder: Path, target_inline: bool = True) -> Path:
    """The model saved with every initializer in one data file (size_threshold 0), which is then deleted.

    ``target_inline`` keeps the Reshape target in a Constant node (as the TorchScript exporter writes it: node
    attributes stay in the model file), else it is an initializer, whose value is then absent too."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((C_OUT, C_IN, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(C_OUT).astype(np.float32), "b"),
        numpy_helper.from_array(rng.standard_normal((C_OUT, CLASSES)).astype(np.float32), "fc"),
    ]
    target = numpy_helper.from_array(np.array([1, C_OUT], np.int64), "target")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Reshape", ["p", "target"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "fc"], ["y"], name="fc"),
    ]
    if target_inline:
        nodes.insert(0, helper.make_node("Constant", [], ["target"], name="target", value=target))
    else:
        inits.append(target)
    graph = helper.make_graph(
        nodes,
        "graph_only",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C_IN, SIDE, SIDE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CLASSES])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    path = folder / "m.onnx"
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="m.onnx.data",
        size_threshold=0,
    )
    (folder / "m.onnx.data").unlink()
    return path


def rewritten(cli, tmp_path: Path, *options: str) -> tuple[dict, onnx.ModelProto]:
    """``rewrite`` of the graph-only model with ``options``: its JSON report and the model it wrote."""
    source, out = graph_only_model(tmp_path), tmp_path / "out.onnx"
    before = source.read_bytes()
    run = cli("rewrite", str(source), "-o", str(out), "-f", "json", *options)
    assert run.returncode == 0, run.stderr
    assert source.read_bytes() == before
    report = json.loads(run.stdout)
    assert report["graph_only"] is True
    assert report["comparison_skipped"] == "the weights are absent (graph-only model)"
    return report, onnx.load(str(out), load_external_data=False)


def input_shape(model: onnx.ModelProto) -> list[int]:
    return [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]


def test_separable_works_on_shapes_alone(cli, tmp_path: Path) -> None:
    report, model = rewritten(cli, tmp_path, "--separable")
    (note,) = report["notes"]
    assert note["node"] == "conv" and note["error"] is None  # no SVD without values: no error figure
    assert "weight values are absent" in note["change"]
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert [n.name for n in convs] == ["conv.depthwise", "conv.pointwise"]
    weights = {t.name: t for t in model.graph.initializer}
    assert list(weights["conv.depthwise.weight"].dims) == [C_IN, 1, 3, 3]
    assert list(weights["conv.pointwise.weight"].dims) == [C_OUT, C_IN, 1, 1]
    assert all(t.data_location == TensorProto.EXTERNAL for t in weights.values())


def test_fp16_converts_absent_weights_by_type(cli, tmp_path: Path) -> None:
    report, model = rewritten(cli, tmp_path, "--fp16")
    assert any("became float16 by type and size alone" in n["change"] for n in report["notes"])
    weights = {t.name: t for t in model.graph.initializer}
    assert weights["w"].data_type == TensorProto.FLOAT16
    data = {e.key: e.value for e in weights["w"].external_data}
    # Its float32 bytes in m.onnx.data are not its values: it points at no file. 16*8*3*3 halves at 2 bytes.
    assert data["location"] == ABSENT and data["length"] == str(C_OUT * C_IN * 9 * 2)


def test_batch_repairs_the_constant_target(cli, tmp_path: Path) -> None:
    report, model = rewritten(cli, tmp_path, "--batch", "4")
    assert input_shape(model) == [4, C_IN, SIDE, SIDE]
    assert any(n["node"] == "flat" and "[1, 16] -> [4, 16]" in n["change"] for n in report["notes"])


def test_input_size_and_stride_change_the_shapes(cli, tmp_path: Path) -> None:
    _, model = rewritten(cli, tmp_path, "--input-size", "32x32")
    assert input_shape(model) == [1, C_IN, 32, 32]
    report, model = rewritten(cli, tmp_path, "--stride", "conv=2", "--force")
    assert [n["node"] for n in report["notes"]][:1] == ["conv"]
    conv = next(n for n in model.graph.node if n.name == "conv")
    assert helper.get_attribute_value(next(a for a in conv.attribute if a.name == "strides")) == [2, 2]


def test_int8_refuses_saying_the_weights_are_needed(cli, tmp_path: Path) -> None:
    source = graph_only_model(tmp_path)
    run = cli("rewrite", str(source), "-o", str(tmp_path / "out.onnx"), "--int8", "dynamic")
    assert run.returncode == 2
    assert "needs the weights' values" in run.stderr and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("option", ["--separable", "--fp16"])
def test_passes_that_keep_the_shapes_need_no_shape_constant(cli, tmp_path: Path, option: str) -> None:
    """With the Reshape target absent, no inference follows the shapes past it; the check takes the graph's
    structure, and the rewrite goes through."""
    source = graph_only_model(tmp_path, target_inline=False)
    run = cli("rewrite", str(source), "-o", str(tmp_path / "out.onnx"), option)
    assert run.returncode == 0, run.stderr
    assert "graph-only" in run.stdout


@pytest.mark.parametrize("option", [["--batch", "2"], ["--input-size", "8x8"], ["--stride", "conv=2"]])
def test_an_absent_shape_constant_is_named(cli, tmp_path: Path, option: list[str]) -> None:
    """The Reshape target is an initializer in the missing data file: no pass can tell the shapes after it."""
    source = graph_only_model(tmp_path, target_inline=False)
    run = cli("rewrite", str(source), "-o", str(tmp_path / "out.onnx"), *option)
    assert run.returncode == 2, run.stderr
    assert "Reshape flat: its input 'target' is absent (graph-only model" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_explore_ranks_what_works_on_shapes(cli, tmp_path: Path) -> None:
    run = cli("explore", str(graph_only_model(tmp_path)), "-d", "v100-sxm2", "-f", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["graph_only"] is True
    applied = {c["name"] for c in report["candidates"] if c["refused"] is None}
    refused = {c["name"]: c["refused"] for c in report["candidates"] if c["refused"] is not None}
    assert applied == {"separable", "fp16"}
    assert "needs the weights' values" in refused["int8-dynamic"]


def test_sweep_over_batch_and_size(cli, tmp_path: Path) -> None:
    run = cli("sweep", str(graph_only_model(tmp_path)), "--batch", "1,4", "--input-size", "16x16,32x32", "-f", "json")
    assert run.returncode == 0, run.stderr
    rows = {(r["batch"], r["input_size"]): r["flops"] for r in json.loads(run.stdout)["rows"]}
    # Per sample at P = H*W pixels: the conv 2*16*P*8*9 = 2304P and its bias 16P, Relu 16P, GlobalAveragePool one
    # add per input element and one divide per output (16P + 16), MatMul 2*16*10 = 320: 2352P + 336.
    per_sample = {"16x16": 2352 * 256 + 336, "32x32": 2352 * 1024 + 336}
    assert rows == {(n, size): n * flops for n in (1, 4) for size, flops in per_sample.items()}


def test_report_over_batches(cli, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    run = cli("report", str(graph_only_model(tmp_path)), "--batch", "1,2", "-o", str(out))
    assert run.returncode == 0, run.stderr
    assert out.stat().st_size > 0
