"""The view a cost function gets of a node of a graph: its tensors, attributes and small constant inputs."""

from __future__ import annotations

import numpy as np

from onnxroof.costs import Cost, node_view
from onnxroof.ir import Graph, Node, Tensor
from onnxroof.protos import TensorProto

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def resize_graph() -> tuple[Node, Graph]:
    """A Resize with its roi omitted ('') and its scales a small constant: x [1, 3, 8, 8] -> y [1, 3, 16, 16]."""
    x, scales = Tensor("x", FLOAT, (1, 3, 8, 8)), Tensor("scales", FLOAT, (4,), True)
    y = Tensor("y", FLOAT, (1, 3, 16, 16))
    node = Node("resize", "Resize", "", ("x", "", "scales"), ("y",), {"mode": "nearest"})
    scale_values = np.array([1, 1, 2, 2], np.float32)
    graph = Graph("g", (node,), {"x": x, "scales": scales, "y": y}, {"scales": scale_values}, ("x",), ("y",))
    return node, graph


def test_a_view_holds_the_graphs_tensors_and_the_constant_inputs_by_position():
    node, graph = resize_graph()
    view = node_view(node, graph)
    assert (view.name, view.op_type, view.domain, view.text("mode")) == ("resize", "Resize", "", "nearest")
    assert view.inputs == (graph.tensors["x"], None, graph.tensors["scales"])  # the omitted roi is None
    assert view.outputs == (graph.tensors["y"],)
    assert list(view.constants) == [2]
    np.testing.assert_array_equal(view.constant(2), [1, 1, 2, 2])
    assert view.cost_subgraph is None


def test_the_callers_tensors_and_subgraph_cost_replace_the_graphs():
    node, graph = resize_graph()
    half = Tensor("y", TensorProto.FLOAT16, (1, 3, 16, 16))
    view = node_view(node, graph, outputs=(half,), cost_subgraph=lambda attr: Cost(flops=1.0))
    assert view.outputs == (half,)
    assert view.inputs[0] == graph.tensors["x"]
    assert view.cost_subgraph is not None and view.cost_subgraph("body") == Cost(flops=1.0)
