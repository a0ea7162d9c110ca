"""Input shapes left open: every input and dim named in one error, and a hint with values a user would give,
built from the model's own names, in the options of the command that meets it."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from onnxroof.load import fix_inputs
from onnxroof.load.unresolved import UnresolvedInputs


def _model(*inputs: onnx.ValueInfoProto) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [vi.name], [f"{vi.name}_out"]) for vi in inputs]
    outputs = [helper.make_tensor_value_info(f"{vi.name}_out", TensorProto.FLOAT, None) for vi in inputs]
    graph = helper.make_graph(nodes, "g", list(inputs), outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _refused(model: onnx.ModelProto) -> UnresolvedInputs:
    with pytest.raises(UnresolvedInputs) as refused:
        fix_inputs(model, {}, {})
    return refused.value


def test_every_open_dim_of_every_input_is_named_in_one_error():
    error = _refused(
        _model(
            helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, "height", "width"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 1]),
        )
    )
    assert error.message == "input 'images' has unresolved dims 'height', 'width'; input 'mask' has dim 'batch'"


def test_the_hint_gives_an_image_its_sides_and_a_batch_one():
    error = _refused(
        _model(
            helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, "height", "width"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 1]),
        )
    )
    # A 224x224 image (ImageNet's size), not a meaningless --dim height=1; the batch 1.
    assert error.hint == (
        "pass e.g. --dim height=224 --dim width=224 --dim batch=1 (or --input images=1x3x224x224 --input mask=1x1)"
    )


def test_a_sequence_gets_a_length_and_an_unnamed_dim_an_input_shape():
    error = _refused(
        _model(
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None]),
        )
    )
    assert "input 'x' has unknown dim at position 1" in error.message
    assert "--dim batch_size=1 --dim sequence_length=128" in error.hint and "--input x=" in error.hint


def test_a_dim_no_name_or_place_explains_is_said_to_be_what_it_is():
    error = _refused(_model(helper.make_tensor_value_info("feats", TensorProto.FLOAT, [1, "k", 16])))
    assert error.hint.startswith("pass e.g. --dim k=N (or --input feats=1xNx16)")
    assert "N is the size of dim 1 of input 'feats' [1, k, 16]" in error.hint


def test_an_input_without_a_declared_shape_is_named_with_the_rest():
    error = _refused(
        _model(
            helper.make_tensor_value_info("sr", TensorProto.INT64, None),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
        )
    )
    assert error.message == "input 'sr' has no declared shape; input 'x' has dim 'batch'"
    assert "--input sr=" in error.hint and "--dim batch=1" in error.hint


@pytest.mark.parametrize(
    ("options", "hint"),
    [
        ({"--batch", "--input-size"}, "pass --batch 1 --input-size 224x224"),
        ({"--batch"}, "write the shapes in first: onnxroof rewrite MODEL -o FIXED.onnx --batch 1 --input-size 224x224"),
    ],
)
def test_a_command_without_dim_gets_its_own_options(options: set[str], hint: str):
    error = _refused(_model(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])))
    assert error.hint_for(options) == hint


def test_a_scalar_input_takes_an_empty_shape():
    from onnxroof.load import parse_shape

    model = _model(helper.make_tensor_value_info("sr", TensorProto.INT64, None))
    fix_inputs(model, {"sr": parse_shape("")}, {})
    shape = model.graph.input[0].type.tensor_type
    assert shape.HasField("shape") and len(shape.shape.dim) == 0


def test_an_input_without_a_shape_is_not_for_the_shape_passes():
    error = _refused(_model(helper.make_tensor_value_info("sr", TensorProto.INT64, None)))
    assert error.hint_for({"--batch", "--input-size"}).startswith("this command needs static input shapes")
