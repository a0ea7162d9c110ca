"""``--input``/``--dim`` on exports that store their shapes: the shape asked for is analyzed (and run), through the
batch and input-size repairs, or one line names the node and the size the export fixed. Tiny graphs emulate the
exports: a dynamo-like one stores value_info for every value and a Reshape target at batch 1; a legacy BERT-like
one adds a position-embedding initializer of the exported length to the embedded tokens."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.errors import UserError
from onnxroof.passes.input_shapes import at_input_shapes
from tests.helpers import IR_VERSION, calibrated_host


def dynamo_like() -> onnx.ModelProto:
    """x [1, 3, 8, 8] -> Conv 3x3 3 -> 4 (pad 1, no bias) -> Relu -> Reshape to the constant [1, 256] -> MatMul by
    [256, 10]; value_info for every value at batch 1, as the dynamo exporter writes it."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([1, 256], np.int64), "target"),
        numpy_helper.from_array(rng.standard_normal((256, 10)).astype(np.float32), "fc"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "target"], ["f"], name="view"),
        helper.make_node("MatMul", ["f", "fc"], ["y"], name="fc"),
    ]
    stored = [("c", [1, 4, 8, 8]), ("r", [1, 4, 8, 8]), ("f", [1, 256])]
    graph = helper.make_graph(
        nodes,
        "dynamo_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
        value_info=[helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in stored],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=IR_VERSION)


def dynamo_linear() -> onnx.ModelProto:
    """A Linear on x [1, 4, 6] as the dynamo exporter writes it: Reshape to [4, 6] (batch*seq merged), MatMul by
    [6, 5], Reshape to [1, 4, 5]; value_info for every value."""
    inits = [
        numpy_helper.from_array(np.array([4, 6], np.int64), "merged"),
        numpy_helper.from_array(np.arange(30, dtype=np.float32).reshape(6, 5), "w"),
        numpy_helper.from_array(np.array([1, 4, 5], np.int64), "unmerged"),
    ]
    nodes = [
        helper.make_node("Reshape", ["x", "merged"], ["m"], name="view"),
        helper.make_node("MatMul", ["m", "w"], ["p"], name="mm"),
        helper.make_node("Reshape", ["p", "unmerged"], ["y"], name="view_1"),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamo_linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5])],
        inits,
        value_info=[
            helper.make_tensor_value_info("m", TensorProto.FLOAT, [4, 6]),
            helper.make_tensor_value_info("p", TensorProto.FLOAT, [4, 5]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=IR_VERSION)


VOCAB, LENGTH, HIDDEN = 50, 8, 16


def legacy_bert_like() -> onnx.ModelProto:
    """ids [1, 8] -> Gather from [50, 16] -> Add the position embedding [1, 8, 16] (an initializer: the legacy
    exporter folds the positions' lookup at the exported length) -> MatMul by [16, 16]."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32), "word"),
        numpy_helper.from_array(rng.standard_normal((1, LENGTH, HIDDEN)).astype(np.float32), "pos"),
        numpy_helper.from_array(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32), "wq"),
    ]
    nodes = [
        helper.make_node("Gather", ["word", "ids"], ["e"], name="embed"),
        helper.make_node("Add", ["e", "pos"], ["h"], name="emb_add"),
        helper.make_node("MatMul", ["h", "wq"], ["y"], name="query"),
    ]
    graph = helper.make_graph(
        nodes,
        "legacy_bert_like",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, LENGTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, LENGTH, HIDDEN])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def dynamo_flops(batch: int) -> int:
    """Conv 2*B*4*(8*8)*(3*3*3) = 13824B, Relu B*4*8*8 = 256B, Reshape 0, MatMul 2*B*256*10 = 5120B."""
    return 13824 * batch + 256 * batch + 5120 * batch


def saved(model: onnx.ModelProto, folder: Path, name: str) -> Path:
    path = folder / name
    onnx.save(model, str(path))
    return path


# The lengths are repaired first, at the exported batch of 1: the embedded tokens are [1, 16, 16] there.
POSITION_MESSAGE = (
    "--input ids=4x16: Add emb_add: its input 'pos' [1, 8, 16] comes from constants alone and fixes dim 1 at 8, "
    "the size the model was exported at, where the new shapes give 16 ('e' is [1, 16, 16])"
)


def test_a_new_batch_goes_through_the_batch_repairs() -> None:
    model = dynamo_like()
    before = model.SerializeToString()
    analysis = analyze(model, "v100-sxm2", inputs={"x": (8, 3, 8, 8)})
    assert model.SerializeToString() == before
    assert analysis.totals.flops == dynamo_flops(8) == 153600
    assert any("view: Reshape target [1, 256] -> [8, 256]" in w for w in analysis.warnings)


@pytest.mark.ort
def test_the_engine_graph_is_the_one_at_the_batch_asked() -> None:
    """On an onnxruntime host the prediction is made on the graph onnxruntime builds from the repaired model."""
    analysis = analyze(dynamo_like(), calibrated_host(), inputs={"x": (8, 3, 8, 8)})
    assert analysis.graph == "onnxruntime-optimized"
    fc = next(n for n in analysis.nodes if n.name == "fc")
    assert fc.cost.flops == 2 * 8 * 256 * 10  # MatMul [8, 256] x [256, 10]


def test_another_length_goes_through_the_size_repairs() -> None:
    # MatMul: 2*B*S*6*5 = 60*B*S FLOPs; at [2, 8]: 960 (the stored shapes say [4, 6] x [6, 5]: 240).
    assert analyze(dynamo_linear(), "v100-sxm2", inputs={"x": (2, 8, 6)}).totals.flops == 60 * 2 * 8
    reshaped = at_input_shapes(dynamo_linear(), {"x": (2, 8, 6)}, {})
    assert reshaped is not None
    targets = {
        init.name.split(".")[0]: numpy_helper.to_array(init).tolist()
        for init in reshaped.model.graph.initializer
        if init.data_type == TensorProto.INT64
    }
    # [4, 6] merges batch and seq: 2*8 = 16 rows; [1, 4, 5] leads with the batch, then the length.
    assert targets == {"merged": [16, 6], "unmerged": [2, 8, 5]}
    weights = {init.name: init for init in reshaped.model.graph.initializer}
    assert numpy_helper.to_array(weights["w"]).tolist() == np.arange(30).reshape(6, 5).tolist()  # bytes kept


def test_a_legacy_bert_at_a_new_batch() -> None:
    # Gather 0, Add B*S*16, MatMul 2*B*S*16*16: at [4, 8] 512 + 16384 = 16896.
    assert analyze(legacy_bert_like(), "v100-sxm2", inputs={"ids": (4, 8)}).totals.flops == 16896


def test_a_constant_of_the_exported_length_is_named() -> None:
    with pytest.raises(UserError) as caught:
        analyze(legacy_bert_like(), "v100-sxm2", inputs={"ids": (4, 16)})
    assert caught.value.message == POSITION_MESSAGE
    assert "re-export" in (caught.value.hint or "")


def test_symbolic_dims_need_no_repair() -> None:
    model = legacy_bert_like()
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    dim.Clear()
    dim.dim_param = "batch"
    assert at_input_shapes(model, {}, {"batch": 3}) is None
    assert at_input_shapes(legacy_bert_like(), {"ids": (1, LENGTH)}, {}) is None  # the shape as exported


def test_a_batch_for_some_inputs_only_is_refused() -> None:
    model = legacy_bert_like()
    model.graph.input.append(helper.make_tensor_value_info("mask", TensorProto.INT64, [1, LENGTH]))
    with pytest.raises(UserError, match=r"change the batch \(dim 0\) of some inputs only: ids 1 -> 4, mask 1 -> 1"):
        at_input_shapes(model, {"ids": (4, LENGTH)}, {})


def test_analyze_and_annotate_at_the_batch_asked(cli, tmp_path: Path) -> None:
    path = saved(dynamo_like(), tmp_path, "dyn.onnx")
    run = cli("analyze", str(path), "--input", "x=8x3x8x8", "-f", "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["totals"]["flops"] == dynamo_flops(8)
    assert "Reshape target [1, 256] -> [8, 256]" in run.stderr  # the warning says what was repaired
    out = tmp_path / "annotated.onnx"
    run = cli("annotate", str(path), "-o", str(out), "--input", "x=8x3x8x8")
    assert run.returncode == 0, run.stderr
    conv = next(n for n in onnx.load(str(out)).graph.node if n.name == "conv")
    assert {p.key: p.value for p in conv.metadata_props}["onnxroof.flops"] == "111 kFLOP"  # 13824*8 = 110592


@pytest.mark.ort
def test_measure_and_validate_run_the_batch_asked(cli, tmp_path: Path) -> None:
    path = saved(dynamo_like(), tmp_path, "dyn.onnx")
    run = cli("measure", str(path), "--input", "x=8x3x8x8", "--repeat", "3", "-f", "json")
    assert run.returncode == 0, run.stderr
    assert any("[1, 256] -> [8, 256]" in note for note in json.loads(run.stdout)["notes"])
    run = cli(
        "validate", str(path), "--input", "x=8x3x8x8", "-d", "v100-sxm2", "--repeat", "3", "--runs", "2",
        "--spread", "0.1", "-f", "json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["totals"]["flops"] == dynamo_flops(8)


@pytest.mark.parametrize(
    "command",
    [
        ["analyze"],
        ["measure", "--repeat", "3"],
        ["validate", "-d", "v100-sxm2"],
        ["annotate", "-o", "{dir}/annotated.onnx"],
        ["plot", "-o", "{dir}/layers.svg"],
        ["report", "-o", "{dir}/report.html"],
    ],
)
def test_every_command_names_the_constant(cli, tmp_path: Path, command: list[str]) -> None:
    path = saved(legacy_bert_like(), tmp_path, "bert.onnx")
    args = [word.format(dir=tmp_path) for word in command]
    run = cli(args[0], str(path), *args[1:], "--input", "ids=4x16")
    assert run.returncode == 2, run.stdout + run.stderr
    assert POSITION_MESSAGE in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
