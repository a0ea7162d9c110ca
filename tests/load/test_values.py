"""Input values (--value): written in as constants for the analysis, so that shapes computed from them resolve, and
fed as they are to the runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import UserError
from onnxroof.load import load_graph
from onnxroof.load.model_spec import ModelSpec
from onnxroof.load.values import parse_value


def _sized_by_input(tmp_path: Path, declared: list | None = None) -> Path:
    """An int64 input n sizes a buffer: input x (one float) expanded to n floats, then Relu over them."""
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
        helper.make_node("Expand", ["x", "n1"], ["wide"], name="expand"),
        helper.make_node("Relu", ["wide"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "sized",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("n", TensorProto.INT64, declared),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [axes],
    )
    path = tmp_path / "sized.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


@pytest.mark.parametrize(("text", "numbers"), [("16000", [16000]), ("1,2,3", [1, 2, 3]), ("0.5", [0.5]), ("true", [1])])
def test_values_parse(text: str, numbers: list[float]):
    assert parse_value(text) == numbers


def test_a_bad_value_is_a_user_error():
    with pytest.raises(UserError, match="bad value"):
        parse_value("fast")


def test_a_value_resolves_the_shapes_computed_from_it(tmp_path: Path):
    graph = load_graph(_sized_by_input(tmp_path, []), values={"n": "16000"})
    assert graph.tensors["y"].shape == (16000,)
    assert list(graph.inputs) == ["x"]  # a constant now: n is no runtime input


def test_without_the_value_the_shape_stays_unknown(tmp_path: Path):
    assert load_graph(_sized_by_input(tmp_path, [])).tensors["y"].shape is None


def test_a_value_counts_in_the_analysis(tmp_path: Path):
    import onnxroof

    analysis = onnxroof.analyze(_sized_by_input(tmp_path, []), device="t4", values={"n": "16000"})
    (relu,) = [n for n in analysis.nodes if n.name == "relu"]
    assert relu.cost.flops == 16000  # Relu: one FLOP per output element, 16000 of them


def test_a_scalar_value_of_an_input_without_a_shape_is_a_scalar(tmp_path: Path):
    from onnxroof.ort.sessions import random_feeds, runnable_model

    runnable = runnable_model(ModelSpec(_sized_by_input(tmp_path, None), values={"n": "16000"}))
    feed = random_feeds(runnable)["n"]
    assert feed.dtype == np.int64 and feed.shape == () and int(feed) == 16000
    assert runnable.inputs["n"] == ((), TensorProto.INT64)


def test_a_list_takes_a_declared_static_shape(tmp_path: Path):
    from onnxroof.ort.sessions import random_feeds, runnable_model

    runnable = runnable_model(ModelSpec(_sized_by_input(tmp_path, [1]), values={"n": "7"}))
    assert random_feeds(runnable)["n"].tolist() == [7]
    with pytest.raises(UserError, match="2 number"):
        runnable_model(ModelSpec(_sized_by_input(tmp_path, [1]), values={"n": "7,8"}))


def test_a_value_for_no_input_names_the_inputs(tmp_path: Path):
    with pytest.raises(UserError, match="no input named 'm'") as refused:
        load_graph(_sized_by_input(tmp_path, []), values={"m": "1"})
    assert "n" in str(refused.value.hint)


def test_a_whole_input_takes_no_fraction(tmp_path: Path):
    with pytest.raises(UserError, match="not whole"):
        load_graph(_sized_by_input(tmp_path, []), values={"n": "0.5"})
