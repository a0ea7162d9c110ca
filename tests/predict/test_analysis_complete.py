"""Totals that could not count every node say so: ``complete`` and ``uncounted`` in the totals, the nodes named in
``uncounted_nodes``, and the table's headline marked as a lower bound."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.predict.analysis import Analysis
from onnxroof.report.analysis import render

CUSTOM = "example.custom"


def _beyond_inference(with_branch: bool = False) -> onnx.ModelProto:
    """x [8, 64] -> Relu -> a custom op no inference knows -> MatMul by W [64, 64]: inference never reaches the
    MatMul, whose input shape is unknown (onnxruntime cannot load the custom op, so no run finds it either). With
    ``with_branch`` the MatMul sits in the then-branch of an If on a runtime condition instead."""
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "W")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Frobnicate", ["r"], ["f"], name="custom", domain=CUSTOM),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])]
    if with_branch:
        out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
        then = helper.make_graph([helper.make_node("MatMul", ["f", "W"], ["y"], name="then_mm")], "then", [], out)
        other = helper.make_graph([helper.make_node("Neg", ["f"], ["y"], name="else_neg")], "else", [], out)
        nodes.append(helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then, else_branch=other))
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    else:
        nodes.append(helper.make_node("MatMul", ["f", "W"], ["y"], name="mm"))
    graph = helper.make_graph(nodes, "m", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(CUSTOM, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _analyze(model: onnx.ModelProto) -> Analysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unsupported ops' warnings and the failed shape run's
        return analyze(model, device="v100-sxm2")


@pytest.mark.ort
def test_a_matmul_that_inference_cannot_reach_makes_the_totals_incomplete():
    a = _analyze(_beyond_inference())
    # Only the Relu is counted in full: one FLOP per element of [8, 64] = 512. The MatMul's 2*8*64*64 = 65536
    # FLOPs are not in the total, and the totals say so.
    assert a.totals.flops == 512
    assert not a.totals.complete and not a.complete and a.totals.uncounted == 2
    assert [(u.name, u.op_type, u.domain, u.reason) for u in a.uncounted] == [
        ("custom", "Frobnicate", CUSTOM, "no cost function"),
        ("mm", "MatMul", "", "shape unknown"),
    ]
    data = json.loads(render(a, "json"))
    assert data["totals"]["complete"] is False and data["totals"]["uncounted"] == 2
    assert data["uncounted_nodes"] == [
        {"name": "custom", "op_type": "Frobnicate", "domain": CUSTOM, "reason": "no cost function"},
        {"name": "mm", "op_type": "MatMul", "domain": "", "reason": "shape unknown"},
    ]
    # The output shapes the table's shape column shows: the Relu's is known, the others' are not.
    assert [n["output_shape"] for n in data["nodes"]] == [[8, 64], None, None]


@pytest.mark.ort
def test_the_headline_of_incomplete_totals_says_they_are_lower_bounds():
    text = render(_analyze(_beyond_inference()), "table")
    headline = text.split("\n\n")[1]  # the block of totals, after the model and device lines
    assert "INCOMPLETE: 2 node(s) not counted in full, so the totals are lower bounds" in headline
    assert "custom (no cost function), mm (shape unknown)" in headline
    assert "FLOPs at least 512 " in headline and "predicted at least " in headline


@pytest.mark.ort
def test_a_node_inside_a_branch_is_named_by_its_path():
    a = _analyze(_beyond_inference(with_branch=True))
    # The Neg of the else-branch is costed on an unknown shape too: both branches are costed to pick the costlier.
    assert [(u.name, u.reason) for u in a.uncounted] == [
        ("custom", "no cost function"),
        ("if/then_mm", "shape unknown"),
        ("if/else_neg", "shape unknown"),
    ]
    assert a.totals.uncounted == 3 and not a.totals.complete


def test_totals_that_count_every_node_are_complete():
    relu = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    a = analyze(helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)]), device="v100-sxm2")
    assert a.totals.complete and a.uncounted == ()
    data = json.loads(render(a, "json"))
    assert data["totals"]["complete"] is True and data["totals"]["uncounted"] == 0 and data["uncounted_nodes"] == []
    text = render(a, "table")
    assert "INCOMPLETE" not in text and "at least" not in text
