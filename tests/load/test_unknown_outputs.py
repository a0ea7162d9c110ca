"""The one rule for which node outputs shape inference left unknown: every output without a static shape, except
an omitted one (''), a Constant's value and a weight's name, whose shapes the assembled graph takes elsewhere."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnxroof.ir import Tensor
from onnxroof.load.fill_from_run import branch_unknowns
from onnxroof.load.read import read_graph, shapeless_outputs, unknown_outputs

FLOAT = TensorProto.FLOAT


def test_only_outputs_that_inference_must_shape_count():
    types = {"known": Tensor("known", FLOAT, (2, 3)), "ranked": Tensor("ranked", FLOAT, None)}
    nodes = [
        (("known", "", "ranked"), False),  # '' is an omitted output; 'ranked' has no static shape
        (("value",), True),  # a Constant's value: its shape comes from the value
        (("w",), False),  # an initializer of the same name wins in the assembled graph
        (("missing",), False),  # not typed at all
    ]
    assert shapeless_outputs(types, nodes, {"w"}) == ["ranked", "missing"]


def body(name: str) -> onnx.GraphProto:
    """A graph of a Constant (its value known), a node writing over an initializer's name and an untyped Relu."""
    nodes = [
        helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", FLOAT, [1], [1.0])),
        helper.make_node("Identity", ["c"], ["w"]),
        helper.make_node("Relu", ["w"], ["r"]),
    ]
    init = [helper.make_tensor("w", FLOAT, [1], [0.0])]
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info("r", FLOAT, None)], init)


def test_the_graph_as_read_and_an_if_branch_follow_the_same_rule():
    assert unknown_outputs({}, read_graph(body("top"))) == ["r"]
    outer = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=body("then"), else_branch=body("else"))],
        "outer",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", FLOAT, None)],
    )
    found = sorted((branch.name, names) for branch, names in branch_unknowns(outer))
    assert found == [("else", ["r"]), ("then", ["r"])]
