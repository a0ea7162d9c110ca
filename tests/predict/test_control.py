"""An If on a calibrated host is predicted as the nodes of its branch, each under its own class's ceiling, plus the
device's branch_overhead: the branch a constant condition selects, else the slower one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.devices import Sourced
from onnxroof.load import load_graph
from onnxroof.predict.analysis import analyze_graph
from tests.helpers import IR_VERSION, calibrated_host

N = 1024  # floats of x
OWN = 2e-6  # the If's own cost on the test host


def branching(condition: bool | None):
    """x (N,) -> If(c): then Relu(x); else Neg(Relu(x)) -> y; c a graph input, or a constant where given."""

    def branch(name: str, ops: list[str]):
        nodes, prev = [], "x"
        for i, op in enumerate(ops):
            out = f"{name}_{i}"
            nodes.append(helper.make_node(op, [prev], [out], name=f"{name}_{op.lower()}"))
            prev = out
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [N])])

    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])]
    inits = []
    if condition is None:
        inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    else:
        inits.append(numpy_helper.from_array(np.array(condition), "c"))
    node = helper.make_node(
        "If", ["c"], ["y"], name="if", then_branch=branch("then", ["Relu"]), else_branch=branch("else", ["Relu", "Neg"])
    )
    graph = helper.make_graph([node], "m", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N])], inits)
    return load_graph(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION))


# One Relu or Neg of N floats on the test host (no ceilings): N FLOPs at 100 GFLOP/s = 10.24 ns; 2 * 4N = 8192 bytes
# in L1 (32 KiB) at 100 GB/s = 81.92 ns; serial: max(10.24 ns, 81.92 ns) + 1 us per node = 1.08192 us.
ONE_NODE = 1.08192e-6


@pytest.mark.parametrize(
    ("condition", "nodes", "branch"),
    [(None, 2, "else_branch"), (True, 1, "then_branch"), (False, 2, "else_branch")],
    ids=["unknown: the slower branch", "constant true", "constant false"],
)
def test_an_if_is_its_branchs_nodes_plus_its_own_cost(condition, nodes, branch):
    host = replace(calibrated_host(), branch_overhead=Sourced(OWN, "calibrated: test"))
    analysis = analyze_graph(branching(condition), host, engine=True)
    (node,) = analysis.nodes
    assert node.prediction.predicted_time_s == pytest.approx(nodes * ONE_NODE + OWN)
    assert node.prediction.overhead_time_s == pytest.approx(nodes * 1e-6 + OWN)
    assert node.engine is not None and node.engine.branch == branch
    assert node.engine.describe() == f"If: its {branch}'s nodes as predicted, plus 2 us to run it"
    # the model: the If and the run overhead, 5 us, once
    assert analysis.totals.predicted_time_s == pytest.approx(nodes * ONE_NODE + OWN + 5e-6)


def test_without_a_calibrated_branch_cost_an_if_is_its_nodes_alone():
    analysis = analyze_graph(branching(None), calibrated_host(), engine=True)
    assert analysis.nodes[0].prediction.predicted_time_s == pytest.approx(2 * ONE_NODE)
