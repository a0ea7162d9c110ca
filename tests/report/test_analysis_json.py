"""The JSON contract as text: ``analyze --format json`` writes the Analysis' fields under the contract's keys, in
the contract's order, laid out as ``json.dumps(..., indent=2)`` lays them out, whichever way the text is made."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.load import load_graph
from onnxroof.predict.analysis import Analysis, NodeResult, UnsupportedOpWarning, analyze_graph
from onnxroof.report.analysis import render
from onnxroof.report.analysis_json import to_json
from tests.helpers import CONV, ELEMENTWISE, calibrated_host, small_conv_net

NAMES_TO_ESCAPE = ('relu "quoted"', "relu-naïve\\back")  # a quote, a non-ASCII letter, a backslash


def mixed_model() -> onnx.ModelProto:
    """Two MatMuls sharing a weight and two Relus alike (repeated blocks whose nodes the analysis costs once),
    named with characters JSON escapes; an op without a cost function, whose output has no known shape; a Relu of
    that output, whose cost carries a note."""
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "W")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["a"], name="mm0"),
        helper.make_node("Relu", ["a"], ["b"], name=NAMES_TO_ESCAPE[0]),
        helper.make_node("MatMul", ["b", "W"], ["c"], name="mm1"),
        helper.make_node("Relu", ["c"], ["d"], name=NAMES_TO_ESCAPE[1]),
        helper.make_node("Frobnicate", ["d"], ["e"], name="custom", domain="example.custom"),
        helper.make_node("Relu", ["e"], ["y"], name="of_unknown_shape"),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def attainable(intensity: float, prediction: Any) -> float:
    return min(prediction.peak_flops_s, intensity * prediction.bandwidth_bytes_s)


def reference_node(n: NodeResult) -> dict[str, Any]:
    c, p = n.cost, n.prediction
    engine = None if n.engine is None else n.engine.to_dict()
    return {
        "name": n.name,
        "op_type": n.op_type,
        "domain": n.domain,
        "output_shape": None if n.output_shape is None else list(n.output_shape),
        "precision": p.precision,
        "flops": c.flops,
        "macs": c.macs,
        "bytes_read": c.bytes_read,
        "bytes_written": c.bytes_written,
        "params": c.params,
        "kernels": c.kernels,
        "arithmetic_intensity": c.arithmetic_intensity,
        "attainable_flops_s": attainable(c.arithmetic_intensity, p),
        "ridge_point": p.peak_flops_s / p.bandwidth_bytes_s,
        "bound": p.bound,
        "compute_time_s": p.compute_time_s,
        "memory_time_s": p.memory_time_s,
        "overhead_time_s": p.overhead_time_s,
        "predicted_time_s": p.predicted_time_s,
        "supported": n.supported,
        "note": c.note,
        "engine": engine,
    }


def reference(a: Analysis) -> str:
    """The contract written out key by key from the Analysis' fields, laid out by json.dumps(indent=2)."""
    t, p, d = a.totals, a.totals.prediction, a.device
    document = {
        "model": a.model,
        "graph": a.graph,
        "device": {
            "key": d.key,
            "name": d.name,
            "label": d.label(),  # a calibrated profile's CPU, threads, onnxruntime and date in one line
            "calibration": None if d.calibration is None else dataclasses.asdict(d.calibration),
            "peak_flops_s": p.peak_flops_s,
            "memory_bandwidth_bytes_s": d.memory_bandwidth.value,
            "launch_overhead_s": d.launch_overhead.value,
            "run_overhead_s": d.run_overhead.value if d.run_overhead else 0.0,
            "engine": d.engine,
            "engine_release": d.engine_release,
            "overlap": d.overlap,
        },
        "includes": a.includes,
        "precision": a.precision,
        "totals": {
            "flops": t.flops,
            "macs": t.macs,
            "bytes_read": t.bytes_read,
            "bytes_written": t.bytes_written,
            "params": t.params,
            "kernels": t.kernels,
            "arithmetic_intensity": t.arithmetic_intensity,
            "attainable_flops_s": attainable(t.arithmetic_intensity, p),
            "ridge_point": p.peak_flops_s / p.bandwidth_bytes_s,
            "precision": p.precision,
            "compute_time_s": p.compute_time_s,
            "memory_time_s": p.memory_time_s,
            "overhead_time_s": p.overhead_time_s,
            "predicted_time_s": p.predicted_time_s,
            "bound": p.bound,
            "time_by_bound": dict(t.time_by_bound),
            "complete": t.uncounted == 0,
            "uncounted": t.uncounted,
        },
        "nodes": [reference_node(n) for n in a.nodes],
        "by_op_type": [dataclasses.asdict(o) for o in a.by_op_type],
        "unsupported": [dataclasses.asdict(u) for u in a.unsupported],
        "uncounted_nodes": [dataclasses.asdict(u) for u in a.uncounted],
        "folded_nodes": a.folded_nodes,
        "fused_kernels": {name: list(nodes) for name, nodes in a.fused.items()},
        "warnings": list(a.warnings),
    }
    return json.dumps(document, indent=2) + "\n"


@pytest.fixture(scope="module")
def mixed() -> Analysis:
    with pytest.warns(UnsupportedOpWarning):
        return analyze(mixed_model(), device="v100-sxm2")


@pytest.fixture(scope="module")
def on_engine() -> Analysis:
    """Every node carries an engine note: the graph the calibrated host's engine runs."""
    return analyze_graph(
        load_graph(small_conv_net()), calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE}), engine=True
    )


@pytest.mark.ort
def test_the_model_has_what_the_contract_must_carry(mixed: Analysis, on_engine: Analysis) -> None:
    names = [n.name for n in mixed.nodes]
    assert set(NAMES_TO_ESCAPE) <= set(names)
    relus = [n for n in mixed.nodes if n.name in NAMES_TO_ESCAPE]
    assert relus[0].cost is relus[1].cost  # a group costed once: its nodes share their cost
    assert {u.op_type for u in mixed.unsupported} == {"Frobnicate", "Relu"}
    assert not mixed.totals.complete and [u.name for u in mixed.uncounted] == ["custom", "of_unknown_shape"]
    assert any(n.output_shape is None for n in mixed.nodes) and any(n.output_shape for n in mixed.nodes)
    assert any(n.cost.note for n in mixed.nodes)
    assert mixed.warnings
    assert on_engine.nodes and all(n.engine is not None for n in on_engine.nodes)


@pytest.mark.ort
@pytest.mark.parametrize("which", ["mixed", "on_engine"])
def test_json_is_the_contract_byte_for_byte(which: str, request: pytest.FixtureRequest) -> None:
    a = request.getfixturevalue(which)
    expected = reference(a)
    assert to_json(a) == expected
    assert render(a, "json") == expected
    assert json.loads(to_json(a))["nodes"][0]["name"] == a.nodes[0].name


@pytest.mark.ort
def test_json_of_an_analysis_without_nodes(mixed: Analysis) -> None:
    empty = dataclasses.replace(mixed, nodes=())
    assert to_json(empty) == reference(empty)
    assert '\n  "nodes": [],\n' in to_json(empty)


@pytest.mark.ort
def test_nodes_that_share_a_cost_keep_their_own_names_and_order(mixed: Analysis) -> None:
    # Many nodes of one group, as a large network's repeated blocks give: each keeps its name and place.
    relu = next(n for n in mixed.nodes if n.name == NAMES_TO_ESCAPE[0])
    many = tuple(relu._replace(name=f"block{i}/relu") for i in range(50))
    a = dataclasses.replace(mixed, nodes=many + mixed.nodes)
    assert to_json(a) == reference(a)
    assert [n["name"] for n in json.loads(to_json(a))["nodes"][:3]] == ["block0/relu", "block1/relu", "block2/relu"]


def test_nodes_that_differ_in_any_part_but_the_name_get_text_of_their_own(on_engine: Analysis) -> None:
    first = on_engine.nodes[0]
    other = next(n for n in on_engine.nodes if n.engine != first.engine)
    variants = (
        first._replace(name="same"),
        first._replace(name="op", op_type="Sigmoid"),
        first._replace(name="domain", domain="example.custom"),
        first._replace(name="cost", cost=dataclasses.replace(first.cost, note="a note of its own")),
        first._replace(name="prediction", prediction=dataclasses.replace(first.prediction, bound="memory")),
        first._replace(name="support", supported=False),
        first._replace(name="engine", engine=other.engine),
        first._replace(name="no engine", engine=None),
        first._replace(name="shape", output_shape=(7, 7)),
        first._replace(name="no shape", output_shape=None),
    )
    a = dataclasses.replace(on_engine, nodes=(first, *variants))
    assert to_json(a) == reference(a)
