"""The inference steps: each runs only where it applies, and they stop once no node output is unknown."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.load import load_graph
from onnxroof.load.infer import Inferred, infer
from onnxroof.load.read import read_graph


def _infer(model: onnx.ModelProto) -> Inferred:
    """infer on a copy of ``model``, as load_graph calls it."""
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    return infer(copy, read_graph(copy.graph))


def _model(
    nodes: list[onnx.NodeProto], inits: list[TensorProto] = (), opset: int = 17, **extra: int
) -> onnx.ModelProto:
    """x [2, 8] float in, y out; ``extra`` opset imports by domain."""
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        list(inits),
    )
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra.items()]
    return helper.make_model(graph, opset_imports=opsets)


def _ints(name: str, values: list[int]) -> TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def test_a_graph_onnx_infers_fully_takes_one_plain_pass():
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        [numpy_helper.from_array(np.ones((8, 300), np.float32), "w")],  # a large weight: an input for inference
    )
    inferred = _infer(model)
    assert inferred.steps == ("onnx",)
    assert inferred.types["y"].shape == (2, 300)
    assert "w" not in inferred.types  # a weight given to inference as an input is not a declared input


def test_a_graph_that_computes_shapes_from_shape_starts_with_data_propagation():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    inferred = _infer(_model(nodes))
    assert inferred.steps == ("onnx with data propagation",)
    assert inferred.types["y"].shape == (2, 8)


def test_data_propagation_follows_a_plain_pass_that_leaves_outputs_unknown():
    # A Reshape target concatenated from constants: the plain pass does not know its values, data propagation
    # does.
    nodes = [
        helper.make_node("Constant", [], ["a"], value=_ints("a", [4])),
        helper.make_node("Constant", [], ["b"], value=_ints("b", [4])),
        helper.make_node("Concat", ["a", "b"], ["to"], axis=0),
        helper.make_node("Reshape", ["x", "to"], ["y"]),
    ]
    inferred = _infer(_model(nodes))
    assert inferred.steps == ("onnx", "onnx with data propagation")
    assert inferred.types["y"].shape == (4, 4)


def test_shape_arithmetic_onnx_does_not_follow_is_folded_before_symbolic_inference():
    # Expand(x, Where(Equal(s, -1), 1, s)) with s = Shape(z): data propagation stops at Equal; the folding step
    # evaluates the target and the inference after it gives y its shape, so symbolic inference is not needed.
    nodes = [
        helper.make_node("Shape", ["z"], ["s"]),
        helper.make_node("Constant", [], ["minus_one"], value=numpy_helper.from_array(np.array(-1, np.int64))),
        helper.make_node("Constant", [], ["one"], value_int=1),
        helper.make_node("Equal", ["s", "minus_one"], ["keep"]),
        helper.make_node("Where", ["keep", "one", "s"], ["target"]),
        helper.make_node("Expand", ["x", "target"], ["y"]),
    ]
    model = _model(nodes)
    model.graph.input.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 2, 8]))
    inferred = _infer(model)
    assert inferred.steps == ("onnx with data propagation", "shape arithmetic")
    assert inferred.types["y"].shape == (3, 2, 8)


def test_a_constants_output_is_known_from_its_value(monkeypatch: pytest.MonkeyPatch):
    # With onnx's inference failing, a graph of Constant nodes has nothing left unknown: no step follows the
    # first. A graph with any other node goes on to the symbolic step.
    def broken(model: bytes, data_prop: bool) -> bytes:
        raise RuntimeError("odd model")

    monkeypatch.setattr("onnxroof.load.infer.onnx_infer_bytes", broken)
    constant = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones((3, 2), np.float32)))
    inferred = _infer(_model([constant]))
    assert inferred.steps == ("onnx",)
    assert inferred.warnings == ["onnx shape inference failed (odd model); shapes may be missing"]
    inferred = _infer(_model([constant, helper.make_node("Relu", ["x"], ["y"])]))
    assert inferred.steps[-1] == "symbolic"


def test_stand_ins_come_first_and_their_helper_tensors_never_reach_the_graph():
    # A FusedMatMul with a transposed operand of unknown rank (behind a Gelu) stands in as MatMul of a reshaped
    # operand: the helper tensors of that stand-in have names of their own, which the graph never holds.
    nodes = [
        helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft"),
        helper.make_node("FusedMatMul", ["x", "g"], ["y"], domain="com.microsoft", transB=1),
    ]
    model = _model(nodes, opset=17, **{"com.microsoft": 1})
    inferred = _infer(model)
    assert inferred.steps[0] == "stand-ins"
    graph = load_graph(model)
    assert graph.tensors["y"].shape == (2, 2)
    produced = {o for node in graph.nodes for o in node.outputs}
    assert set(graph.tensors) == produced | {"x"}
    assert [(n.domain, n.op_type) for n in graph.nodes] == [("com.microsoft", "Gelu"), ("com.microsoft", "FusedMatMul")]


def test_stand_ins_read_the_dims_of_weights_given_to_inference_as_inputs():
    # ReorderInput pads the channels to the count the NCHWc Conv that reads it holds in its weight (8 x group).
    # That weight has more than SMALL_CONSTANT elements, so inference gets it as a typed input, not an
    # initializer: the stand-in must still find its dims.
    nchwc = "com.microsoft.nchwc"
    nodes = [
        helper.make_node("ReorderInput", ["x4"], ["r"], domain=nchwc),
        helper.make_node("Conv", ["r", "w", "b"], ["c"], domain=nchwc, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("ReorderOutput", ["c"], ["y"], domain=nchwc, channels=16),
    ]
    graph = helper.make_graph(
        nodes,
        "nchwc",
        [helper.make_tensor_value_info("x4", TensorProto.FLOAT, [1, 5, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.ones((16, 8, 3, 3), np.float32), "w"),
            numpy_helper.from_array(np.ones(16, np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(nchwc, 1)])
    g = load_graph(model)
    assert g.tensors["r"].shape == (1, 8, 8, 8)
    assert g.tensors["c"].shape == (1, 16, 8, 8)
    assert g.tensors["y"].shape == (1, 16, 8, 8)
    assert g.tensors["w"].is_weight
