"""The rewrite command: passes in a fixed order, output comparison, and every way a user can get it wrong
answered with one line, a hint and exit code 2, the input file untouched."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import UserError
from onnxroof.whatif.rewrite import RewriteRequest, calibration_feeds, rewrite, steps


@pytest.fixture
def conv_model(tmp_path: Path) -> Path:
    """Conv 3x3 (4 -> 8 channels, 8x8, with bias) + Relu, weights inline."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], name="relu"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
        inits,
    )
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def test_passes_run_in_a_fixed_order() -> None:
    request = RewriteRequest(fp16=True, separable=(), batch=2, input_size=(16, 16), strides={"conv": 2})
    assert [name for name, _ in steps(request)] == ["batch", "input-size", "stride", "separable", "fp16"]


def test_precision_rewrites_exclude_each_other() -> None:
    with pytest.raises(UserError, match="choose one"):
        steps(RewriteRequest(fp16=True, int8="dynamic"))


@pytest.mark.ort
def test_fp16_rewrite_compares_outputs_and_leaves_the_input_alone(conv_model: Path) -> None:
    before = conv_model.read_bytes()
    done = rewrite(conv_model, RewriteRequest(fp16=True, keep_io_types=True))
    assert conv_model.read_bytes() == before
    (difference,) = done.differences
    # fp16 keeps 11 significant bits: one rounding is at most 2^-11 = 4.9e-4 relative; this conv rounds the
    # input, the weights and about 36 products' partial sums, so 1e-2 of the output's scale bounds it.
    assert difference.name == "y" and difference.finite and 0 < difference.max_rel < 1e-2


def test_shape_rewrites_are_not_compared(conv_model: Path) -> None:
    done = rewrite(conv_model, RewriteRequest(batch=2))
    assert done.comparison_skipped == "the rewrite changes the input or output shapes"
    assert [d.dim_value for d in done.result.model.graph.output[0].type.tensor_type.shape.dim] == [2, 8, 8, 8]


@pytest.mark.ort
def test_cli_writes_the_model_and_reports_json(cli, conv_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "half.onnx"
    run = cli("rewrite", str(conv_model), "-o", str(out), "--fp16", "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["passes"] == ["fp16"] and report["written"] == [str(out)]
    assert onnx.load(str(out)).graph.initializer[0].data_type == TensorProto.FLOAT16


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--fp16", "--int8", "dynamic"], "both change the precision"),
        (["--stride", "conv"], "expected NODE=S"),
        (["--stride", "lwu", "--stride", "conv=2"], "preset of its own"),
        (["--calibration", "x.npz", "--int8", "dynamic"], "for static int8"),
        ([], "no rewrite asked for"),
        (["--fp16-block", "relu", "--fp16"], "relu"),
    ],
)
def test_cli_bad_options_are_one_line_and_exit_2(cli, conv_model: Path, tmp_path: Path, options, message) -> None:
    run = cli("rewrite", str(conv_model), "-o", str(tmp_path / "out.onnx"), *options)
    assert run.returncode == 2
    assert message in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.ort
def test_cli_refuses_to_replace_an_output_without_force(cli, conv_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    out.write_bytes(b"mine")
    run = cli("rewrite", str(conv_model), "-o", str(out), "--fp16")
    assert run.returncode == 2 and "--force" in run.stderr
    assert out.read_bytes() == b"mine"
    assert cli("rewrite", str(conv_model), "-o", str(out), "--fp16", "--force").returncode == 0


def test_cli_refuses_weights_outside_the_model_folder(cli, conv_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "inner"
    folder.mkdir()
    model = onnx.load(str(conv_model))
    onnx.save_model(model, str(folder / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    proto = onnx.load(str(folder / "m.onnx"), load_external_data=False)
    for init in proto.graph.initializer:
        for entry in init.external_data:
            if entry.key == "location":
                entry.value = "../m.data"
    onnx.save(proto, str(folder / "m.onnx"))
    run = cli("rewrite", str(folder / "m.onnx"), "-o", str(tmp_path / "out.onnx"), "--fp16")
    assert run.returncode == 2 and "outside the model's folder" in run.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--separable", "no_such_conv"], "no node named no_such_conv"),
        (["--stride", "lwu"], "no U-Net encoder block found"),
        (["--stride", "relu=2"], "relu"),
    ],
)
def test_cli_a_pass_that_does_not_apply_names_the_node(cli, conv_model: Path, tmp_path: Path, options, message) -> None:
    before = conv_model.read_bytes()
    run = cli("rewrite", str(conv_model), "-o", str(tmp_path / "out.onnx"), *options)
    assert run.returncode == 2, run.stderr
    assert message in run.stderr and "(hint: " in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert conv_model.read_bytes() == before and not (tmp_path / "out.onnx").exists()


@pytest.mark.ort
def test_static_int8_calibrates_on_every_sample_of_an_npz(conv_model: Path, tmp_path: Path) -> None:
    model = onnx.load(str(conv_model))
    rng = np.random.default_rng(1)
    stacked = tmp_path / "three.npz"
    np.savez(stacked, x=rng.standard_normal((3, 1, 4, 8, 8)).astype(np.float32))  # three samples of x
    feeds = calibration_feeds(model, str(stacked))
    assert len(feeds) == 3 and all(f["x"].shape == (1, 4, 8, 8) for f in feeds)
    single = tmp_path / "one.npz"
    np.savez(single, x=rng.standard_normal((1, 4, 8, 8)).astype(np.float32))
    assert len(calibration_feeds(model, str(single))) == 1
    assert len(calibration_feeds(model, None, count=5)) == 5  # random inputs otherwise
    with pytest.raises(UserError, match="cannot read calibration inputs"):
        calibration_feeds(model, str(tmp_path / "missing.npz"))
    done = rewrite(conv_model, RewriteRequest(int8="static", calibration=str(stacked)))
    assert {n.op_type for n in done.result.model.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
