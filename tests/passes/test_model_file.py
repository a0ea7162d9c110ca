"""Reading models for a rewrite (external weights only from inside the model's folder, absent weights make a
graph-only model) and writing them (atomic, --force, 2 GB and over with a data file beside)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import UserError
from onnxroof.passes import model_file
from onnxroof.passes.model_file import read_source, write_model
from onnxroof.passes.weights import absent_tensor, has_values, is_absent, values


def _model(rows: int = 64) -> onnx.ModelProto:
    """MatMul of x (1 x rows) by a rows x rows weight: one weight large enough to go external."""
    w = numpy_helper.from_array(np.arange(rows * rows, dtype=np.float32).reshape(rows, rows), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _save_external(model: onnx.ModelProto, path: Path, location: str) -> None:
    onnx.save_model(model, str(path), save_as_external_data=True, location=location, size_threshold=0)


def test_external_weights_inside_the_folder_are_loaded(tmp_path: Path) -> None:
    _save_external(_model(), tmp_path / "m.onnx", "m.data")
    source = read_source(tmp_path / "m.onnx")
    assert not source.graph_only and has_values(source.model)
    w = values(source.model.graph.initializer[0])
    assert w is not None and w[1, 2] == 66  # arange: row 1, column 2 of a 64-wide matrix = 64 + 2


def test_absent_weights_give_a_graph_only_model(tmp_path: Path) -> None:
    _save_external(_model(), tmp_path / "m.onnx", "m.data")
    (tmp_path / "m.data").unlink()
    source = read_source(tmp_path / "m.onnx")
    assert source.graph_only and is_absent(source.model.graph.initializer[0])


@pytest.mark.parametrize("location", ["../outside.data", "/etc/passwd"])
def test_a_weight_outside_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    _save_external(_model(), folder / "m.onnx", "m.data")
    proto = onnx.load(str(folder / "m.onnx"), load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    onnx.save(proto, str(folder / "m.onnx"))
    with pytest.raises(UserError, match="outside the model's folder"):
        read_source(folder / "m.onnx")


def test_a_link_that_leaves_the_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    _save_external(_model(), tmp_path / "m.onnx", "m.data")
    os.replace(tmp_path / "m.onnx", folder / "m.onnx")
    (folder / "m.data").symlink_to(tmp_path / "m.data")
    with pytest.raises(UserError, match="outside the model's folder"):
        read_source(folder / "m.onnx")


def test_write_refuses_an_existing_file_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    out.write_bytes(b"keep me")
    with pytest.raises(UserError, match="--force"):
        write_model(_model(), out)
    assert out.read_bytes() == b"keep me"
    write_model(_model(), out, force=True)
    assert onnx.load(str(out)).graph.node[0].op_type == "MatMul"
    assert [p.name for p in tmp_path.iterdir()] == ["out.onnx"]  # no staging files left


def test_a_model_at_the_protobuf_limit_is_written_with_a_data_file(tmp_path: Path, monkeypatch) -> None:
    # The limit lowered to 8 KiB stands in for 2 GB: the 64x64 fp32 weight is 16 KiB.
    monkeypatch.setattr(model_file, "PROTOBUF_LIMIT", 8192 + 64 * 2**20)
    written = write_model(_model(), tmp_path / "big.onnx")
    assert [p.name for p in written] == ["big.onnx", "big.onnx.data"]
    assert (tmp_path / "big.onnx.data").stat().st_size == 64 * 64 * 4
    back = onnx.load(str(tmp_path / "big.onnx"))
    assert numpy_helper.to_array(back.graph.initializer[0])[1, 2] == 66


def test_an_absent_weight_round_trips_without_bytes(tmp_path: Path) -> None:
    model = _model()
    del model.graph.initializer[:]
    model.graph.initializer.append(absent_tensor("w", [64, 64], TensorProto.FLOAT))
    onnx.checker.check_model(model, full_check=True)
    write_model(model, tmp_path / "g.onnx")
    source = read_source(tmp_path / "g.onnx")
    assert source.graph_only and values(source.model.graph.initializer[0]) is None


def test_zoo_models_come_with_weights() -> None:
    source = read_source("zoo:unet?size=32")
    assert not source.graph_only and has_values(source.model)
