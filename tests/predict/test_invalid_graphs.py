"""A graph whose shapes or attributes contradict each other is bad input: the analysis refuses it with a UserError
that names the node (its name and op type) and the shapes, and the CLI prints that one line and exits with 2.
A shape that is merely unknown is not an error: the node is charged its known bytes and listed as unsupported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.cli import main
from onnxroof.errors import UserError
from onnxroof.predict.analysis import UnsupportedOpWarning
from tests.helpers import IR_VERSION, small_conv_net

FLOAT = TensorProto.FLOAT


def _model(nodes: list, inputs: list, inits: list | None = None) -> onnx.ModelProto:
    """A graph of ``nodes`` whose single output, the last node's, is declared without a shape (inference, not the
    declaration, is what decides it)."""
    output = helper.make_tensor_value_info(nodes[-1].output[0], FLOAT, None)
    graph = helper.make_graph(nodes, "invalid", inputs, [output], inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def conv_into_mismatched_add() -> onnx.ModelProto:
    """A 3x3 Conv with pads 1 keeps x's [1, 4, 28, 28]; the Add beside it takes y of [1, 4, 28, 29]."""
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Add", ["c", "y"], ["s"], name="add"),
    ]
    inputs = [
        helper.make_tensor_value_info("x", FLOAT, [1, 4, 28, 28]),
        helper.make_tensor_value_info("y", FLOAT, [1, 4, 28, 29]),
    ]
    return _model(nodes, inputs, [w])


def mismatched_concat() -> onnx.ModelProto:
    """A Concat on axis 1 of [1, 4, 28, 28] and [1, 2, 28, 29]: the last dims differ off the axis."""
    nodes = [helper.make_node("Concat", ["a", "b"], ["s"], axis=1, name="cat")]
    inputs = [
        helper.make_tensor_value_info("a", FLOAT, [1, 4, 28, 28]),
        helper.make_tensor_value_info("b", FLOAT, [1, 2, 28, 29]),
    ]
    return _model(nodes, inputs)


def run_cli(model: onnx.ModelProto, folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    path = folder / "model.onnx"
    onnx.save(model, path)
    capsys.readouterr()
    code = main(["analyze", str(path), "-f", "json"])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.ort
def test_operands_that_cannot_broadcast_name_the_node_and_both_shapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = run_cli(conv_into_mismatched_add(), tmp_path, capsys)
    assert code == 2
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("onnxroof: error: ")
    assert "'add' (Add)" in line
    assert "[1, 4, 28, 28]" in line and "[1, 4, 28, 29]" in line
    assert "hint:" in line


@pytest.mark.ort
def test_a_concat_of_mismatched_sizes_names_the_node_and_the_shapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = run_cli(mismatched_concat(), tmp_path, capsys)
    assert code == 2
    assert len(lines) == 1
    assert "'cat' (Concat)" in lines[0]
    assert "[1, 4, 28, 28]" in lines[0] and "[1, 2, 28, 29]" in lines[0]
    assert "hint:" in lines[0]


@pytest.mark.ort
def test_the_api_raises_a_user_error_for_an_invalid_graph() -> None:
    with pytest.raises(UserError, match=r"'add' \(Add\)") as raised:
        analyze(conv_into_mismatched_add())
    assert raised.value.hint


@pytest.mark.ort
def test_a_matrix_product_whose_inner_dims_differ_is_refused() -> None:
    """x[2, 8] @ w[7, 16]: K is 8 on one side and 7 on the other."""
    w = numpy_helper.from_array(np.ones((7, 16), np.float32), "w")
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul")],
        [helper.make_tensor_value_info("x", FLOAT, [2, 8])],
        [w],
    )
    with pytest.raises(UserError, match=r"'matmul' \(MatMul\).*\[2, 8\] and \[7, 16\].*inner dims 8 and 7"):
        analyze(model)


def test_a_conv_whose_weight_does_not_match_the_input_channels_is_refused() -> None:
    """small_conv_net's first Conv takes 3 channels; an input of 5 channels contradicts its weight [8, 3, 3, 3]."""
    model = small_conv_net()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 5
    with pytest.raises(UserError, match=r"'conv1' \(Conv\).*\[1, 5, 16, 16\].*\[8, 3, 3, 3\]"):
        analyze(model)


@pytest.mark.ort
def test_a_zero_stride_is_refused_as_an_invalid_attribute() -> None:
    model = small_conv_net()
    model.graph.node[0].attribute.append(helper.make_attribute("strides", [0, 1]))
    with pytest.raises(UserError, match=r"'conv1' \(Conv\): strides \[0, 1\]"):
        analyze(model)


@pytest.mark.ort
def test_an_attribute_of_the_wrong_kind_is_refused() -> None:
    """Concat's axis given as a list of ints instead of one int."""
    model = mismatched_concat()
    model.graph.input[1].type.tensor_type.shape.dim[3].dim_value = 28
    del model.graph.node[0].attribute[:]
    model.graph.node[0].attribute.append(helper.make_attribute("axis", [1]))
    with pytest.raises(UserError, match=r"'cat' \(Concat\): attribute axis is \[1\], not a number"):
        analyze(model)


@pytest.mark.ort
def test_an_unknown_shape_is_not_an_error() -> None:
    """An Add whose second operand's shape nothing gives is charged its known bytes, listed as unsupported."""
    model = _model(
        [helper.make_node("Add", ["x", "y"], ["s"], name="add")],
        [helper.make_tensor_value_info("x", FLOAT, [2, 3]), helper.make_tensor_value_info("y", FLOAT, [2, 3])],
    )
    model.graph.input.remove(model.graph.input[1])  # y becomes a name nothing declares or produces
    with pytest.warns(UnsupportedOpWarning):
        result = analyze(model)
    assert [(u.op_type, u.reason) for u in result.unsupported] == [("Add", "shape unknown")]
