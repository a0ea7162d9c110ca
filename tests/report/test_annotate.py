"""Annotations: each node's costs in its metadata_props and a model summary, on a copy that runs as the original
does; Model Explorer node data keyed by the ids its ONNX adapter gives."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.devices import catalog
from onnxroof.errors import UserError
from onnxroof.report.annotate import PREFIX, annotate, loader_names, match_nodes
from onnxroof.report.model_explorer import BOUND_CODES, explorer_node_ids, node_data, node_data_json
from tests.helpers import IR_VERSION, calibrated_host, small_conv_net

NODE_KEYS = {
    PREFIX + key
    for key in (
        "flops",
        "macs",
        "bytes",
        "bytes_read",
        "bytes_written",
        "params",
        "intensity",
        "bound",
        "predicted_time",
        "compute_time",
        "memory_time",
        "overhead_time",
        "time_share",
        "precision",
        "device",
    )
}


def _model(nodes, inputs, outputs, inits, name="g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def conv_matmul_model() -> onnx.ModelProto:
    """x[1,3,8,8] -> Conv(4 filters 3x3, pad 1, bias) -> Flatten -> MatMul(W[256,10]) -> y[1,10]."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
        numpy_helper.from_array(rng.standard_normal((256, 10)).astype(np.float32), "W"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Flatten", ["c"], ["f"], axis=1, name="flatten"),
        helper.make_node("MatMul", ["f", "W"], ["y"], name="matmul"),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )


def props(proto) -> dict[str, str]:
    return {e.key: e.value for e in proto.metadata_props}


def test_every_node_gets_every_key_with_hand_derived_values():
    model = conv_matmul_model()
    done = annotate(model, analyze(model, "v100-sxm2"))
    conv, flatten, matmul = (props(n) for n in done.model.graph.node)
    for values in (conv, flatten, matmul):
        assert set(values) == NODE_KEYS
    v100 = catalog()["v100-sxm2"]
    launch = v100.launch_overhead.value

    # Conv: 2*N*C_out*H_out*W_out*(C_in/group)*kH*kW + bias N*C_out*H_out*W_out = 2*1*4*8*8*3*3*3 + 4*8*8
    # = 13824 + 256 = 14080 FLOPs; 13824/2 = 6912 MACs.
    assert conv[PREFIX + "flops"] == "14.1 kFLOP"
    assert conv[PREFIX + "macs"] == "6.91 kMAC"
    # Read x 1*3*8*8*4 = 768 B, w 4*3*3*3*4 = 432 B, b 4*4 = 16 B: 1216 B; written c 4*8*8*4 = 1024 B; 2240 B.
    assert conv[PREFIX + "bytes_read"] == "1.22 kB"
    assert conv[PREFIX + "bytes_written"] == "1.02 kB"
    assert conv[PREFIX + "bytes"] == "2.24 kB"
    assert conv[PREFIX + "params"] == "112"  # 108 weights + 4 biases
    assert conv[PREFIX + "intensity"] == "6.29 FLOP/B"  # 14080 / 2240 = 6.2857
    # On the V100 (15.7 TFLOP/s fp32, 900 GB/s): compute 14080/15.7e12 = 0.897 ns, memory 2240/900e9 = 2.49 ns,
    # both under the launch overhead, which bounds the kernel and is its time (the terms overlap: max of three).
    assert conv[PREFIX + "compute_time"] == "0.897 ns"
    assert conv[PREFIX + "memory_time"] == "2.49 ns"
    assert conv[PREFIX + "bound"] == "overhead"
    assert launch == 4.2e-6 and conv[PREFIX + "predicted_time"] == "4.20 us"
    # Two kernels of one launch each (Flatten is shape-only and free): each takes half of the model's time.
    assert conv[PREFIX + "time_share"] == "50%"
    assert conv[PREFIX + "precision"] == "fp32"
    assert conv[PREFIX + "device"] == "v100-sxm2"

    # Flatten of a contiguous tensor is shape-only: no FLOPs, no bytes, no bound, no time.
    assert flatten[PREFIX + "flops"] == "0 FLOP"
    assert flatten[PREFIX + "bytes"] == "0 B"
    assert flatten[PREFIX + "bound"] == "none"
    assert flatten[PREFIX + "predicted_time"] == "0 s"

    # MatMul [1,256] x [256,10]: 2*M*N*K = 2*1*10*256 = 5120 FLOPs; reads 256*4 + 256*10*4 = 11264 B, writes
    # 10*4 = 40 B: 11304 B, intensity 5120/11304 = 0.453 FLOP/B.
    assert matmul[PREFIX + "flops"] == "5.12 kFLOP"
    assert matmul[PREFIX + "bytes"] == "11.3 kB"
    assert matmul[PREFIX + "intensity"] == "0.453 FLOP/B"
    assert matmul[PREFIX + "params"] == "2.56 k"

    summary = props(done.model)
    assert summary[PREFIX + "device"] == f"{v100.name} [v100-sxm2]"
    assert summary[PREFIX + "flops"] == "19.2 kFLOP"  # 14080 + 5120 = 19200
    assert summary[PREFIX + "predicted_time"] == "8.40 us"  # 2 launches of 4.2 us
    assert summary[PREFIX + "bound"] == "overhead"
    assert summary[PREFIX + "time_by_bound"].startswith("compute 0 s (0%), memory 0 s (0%), overhead")
    assert summary[PREFIX + "nodes"] == "3 annotated"
    assert summary[PREFIX + "graph"] == "as-exported"
    assert summary[PREFIX + "version"].startswith("onnxroof ")
    assert not any(re.search(r"\d{4}-\d{2}-\d{2}", v) for v in summary.values())  # no dates: reproducible
    assert (done.annotated, done.folded, done.in_subgraphs) == (3, 0, 0)


def test_user_metadata_is_kept_and_reannotation_replaces_only_our_keys():
    model = conv_matmul_model()
    model.graph.node[0].metadata_props.add(key="owner", value="vision team")
    model.metadata_props.add(key="author", value="someone")
    first = annotate(model, analyze(model, "v100-sxm2")).model
    assert props(first.graph.node[0])["owner"] == "vision team"
    assert props(first)["author"] == "someone"
    # The user's entries keep their place, first.
    assert first.graph.node[0].metadata_props[0].key == "owner"

    # Annotating the annotated model with the same analysis gives the same bytes: nothing is added twice.
    again = annotate(first, analyze(first, "v100-sxm2")).model
    assert again.SerializeToString() == first.SerializeToString()

    # Another device replaces every onnxroof key; the user's entries stay.
    t4 = annotate(first, analyze(first, "t4")).model
    conv = [(e.key, e.value) for e in t4.graph.node[0].metadata_props]
    assert [k for k, _ in conv].count(PREFIX + "device") == 1
    assert dict(conv)[PREFIX + "device"] == "t4"
    assert dict(conv)["owner"] == "vision team"
    assert props(t4)["author"] == "someone"


def test_the_input_model_is_not_modified_and_only_metadata_differs():
    model = small_conv_net()
    before = model.SerializeToString()
    done = annotate(model, analyze(model, "v100-sxm2"))
    assert model.SerializeToString() == before
    # Clearing every metadata_props of the copy gives the original back.
    stripped = onnx.ModelProto()
    stripped.CopyFrom(done.model)
    del stripped.metadata_props[:]
    for node in stripped.graph.node:
        del node.metadata_props[:]
    assert stripped.SerializeToString() == before


@pytest.mark.ort
def test_the_annotated_model_checks_and_gives_the_same_outputs():
    ort = pytest.importorskip("onnxruntime")
    model = small_conv_net()
    annotated = annotate(model, analyze(model, "v100-sxm2")).model
    onnx.checker.check_model(annotated, full_check=True)
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    outputs = []
    for m in (model, annotated):
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        outputs.append(session.run(None, {"x": x})[0])
    assert np.array_equal(outputs[0], outputs[1])


def unnamed_model() -> onnx.ModelProto:
    """Unnamed nodes, a folded one (w + w: weights only) and two nodes of one name:
    Add(w, w) -> w2 (folded); MatMul(x[2,16], w2[16,8]) -> h; Relu 'same'; Relu 'same'."""
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    nodes = [
        helper.make_node("Add", ["w", "w"], ["w2"]),
        helper.make_node("MatMul", ["x", "w2"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"], name="same"),
        helper.make_node("Sigmoid", ["r"], ["y"], name="same"),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [w],
    )


def test_unnamed_and_repeated_nodes_are_matched_by_position():
    model = unnamed_model()
    assert loader_names(model.graph) == ["Add_0", "MatMul_1", "same", "same"]
    analysis = analyze(model, "v100-sxm2")
    results = match_nodes(model.graph, analysis)
    assert results[0] is None  # the weight-only Add is folded at load: no per-run cost
    assert [r.op_type for r in results[1:] if r is not None] == ["MatMul", "Relu", "Sigmoid"]

    done = annotate(model, analysis)
    add, matmul, relu, sigmoid = (props(n) for n in done.model.graph.node)
    assert set(add) == {PREFIX + "folded"}
    assert matmul[PREFIX + "flops"] == "512 FLOP"  # 2*M*N*K = 2*2*8*16
    assert relu[PREFIX + "flops"] == "16 FLOP"  # one per element of [2,8]
    assert set(sigmoid) == NODE_KEYS
    assert (done.annotated, done.folded) == (3, 1)
    assert props(done.model)[PREFIX + "nodes"].startswith("3 annotated; 1 without values: computed from weights")


def if_model() -> onnx.ModelProto:
    """y = If(c, then: Relu(x) -> Neg, else: Abs(x)); the then-branch's Relu carries a stale onnxroof key."""

    def branch(name, ops):
        nodes, last = [], "x"
        for i, op in enumerate(ops):
            out = f"{name}_{i}" if i < len(ops) - 1 else f"{name}_out"
            nodes.append(helper.make_node(op, [last], [out]))
            last = out
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(last, TensorProto.FLOAT, [4])])

    then_branch = branch("then", ["Relu", "Neg"])
    then_branch.node[0].metadata_props.add(key=PREFIX + "flops", value="stale")
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=branch("else", ["Abs"]))
    return _model(
        [node],
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [],
    )


def test_subgraph_nodes_get_no_values_and_the_summary_says_why():
    model = if_model()
    done = annotate(model, analyze(model, "v100-sxm2"))
    assert done.in_subgraphs == 3  # Relu and Neg in the then-branch, Abs in the else-branch
    if_node = done.model.graph.node[0]
    # The If is costed as its costlier branch, and says so: Relu and Neg, one FLOP per element each, 2*4 = 8.
    assert set(props(if_node)) == NODE_KEYS | {PREFIX + "note"}
    assert props(if_node)[PREFIX + "note"] == "then_branch counted: the costlier branch"
    assert props(if_node)[PREFIX + "flops"] == "8 FLOP"
    for attr in if_node.attribute:
        for inner in attr.g.node:
            assert not any(key.startswith(PREFIX) for key in props(inner))  # the stale key is gone too
    assert "3 inside If/Loop/Scan bodies without values" in props(done.model)[PREFIX + "nodes"]


def test_an_analysis_of_another_graph_is_refused():
    model = conv_matmul_model()
    with pytest.raises(UserError, match="not among the model's nodes"):
        annotate(model, analyze(small_conv_net(), "v100-sxm2"))
    # The analysis of a model whose nodes are the first of this one's: every result finds a node, and the
    # unmatched rest would pass for folded nodes, but the analysis folded none.
    longer = conv_matmul_model()
    longer.graph.node.append(helper.make_node("Relu", ["y"], ["z"], name="relu"))
    longer.graph.output[0].name = "z"
    with pytest.raises(UserError, match="1 of the model's 4 nodes have no result where the analysis folded 0"):
        annotate(longer, analyze(model, "v100-sxm2"))
    optimized = dataclasses.replace(analyze(model, "v100-sxm2"), graph="onnxruntime-optimized")
    with pytest.raises(UserError, match="as_exported=True"):
        annotate(model, optimized)


@pytest.mark.ort
def test_on_a_calibrated_host_the_graph_as_exported_is_annotated():
    pytest.importorskip("onnxruntime")
    model = small_conv_net()
    host = calibrated_host()
    # The engine's graph (onnxruntime's optimizer output: fused Conv+Relu, ...) has nodes the file does not.
    with pytest.raises(UserError, match="onnxruntime-optimized"):
        annotate(model, analyze(model, host))
    done = annotate(model, analyze(model, host, as_exported=True))
    assert done.annotated == len(model.graph.node)
    assert props(done.model.graph.node[0])[PREFIX + "device"] == "test-host"
    # conv1 (3->8 channels, 3x3, pad 1, bias, on 16x16): 2*8*16*16*3*3*3 + 8*16*16 = 112640 FLOPs, 1.13 us at the
    # test host's 100 GFLOP/s; it moves x 3072 B + w1 864 B + b1 32 B + c1 8192 B = 12160 B, 1.216 us at its
    # 10 GB/s DRAM. The largest of compute, memory and the 1 us launch is memory; a serial host adds the launch
    # to the larger of the other two: 1.216 + 1 = 2.216 us.
    conv1 = props(done.model.graph.node[0])
    assert conv1[PREFIX + "bound"] == "memory"
    assert conv1[PREFIX + "compute_time"] == "1.13 us"
    assert conv1[PREFIX + "memory_time"] == "1.22 us"
    assert conv1[PREFIX + "predicted_time"] == "2.22 us"


def test_explorer_node_ids_follow_the_adapters_name_fixing():
    relu = helper.make_tensor_value_info("o", TensorProto.FLOAT, [1])
    nodes = [
        helper.make_node("Relu", ["x"], ["a0"]),
        helper.make_node("Relu", ["a0"], ["a1"], name="a"),
        helper.make_node("Relu", ["a1"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["a3"], name="a"),
        helper.make_node("Relu", ["a3"], ["o"], name="node"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], [relu])
    # A unique name is kept; a node without one prefers "node"; a taken name gets the next free "_<count>" of a
    # counter per preferred name: "node", "a", "node_1" (node taken), "a_1" (a taken), "node_2" (node taken).
    assert explorer_node_ids(graph) == ["node", "a", "node_1", "a_1", "node_2"]

    # Subgraphs have a scope of names of their own but share the counter, and are walked right after their node:
    # "node"; the If "node_1"; the then-branch "node" and "node_2"; the else-branch "node" and "node_3"; the last
    # main node "node_4".
    inner = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["i0"]), helper.make_node("Relu", ["i0"], ["i1"])],
        "then",
        [],
        [helper.make_tensor_value_info("i1", TensorProto.FLOAT, [1])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["b0"]),
        helper.make_node("If", ["c"], ["b1"], then_branch=inner, else_branch=inner),
        helper.make_node("Relu", ["b1"], ["o"]),
    ]
    graph = helper.make_graph(nodes, "g", [], [relu])
    assert explorer_node_ids(graph) == ["node", "node_1", "node_4"]


def test_model_explorer_node_data_structure_and_values():
    model = unnamed_model()
    done = annotate(model, analyze(model, "v100-sxm2"))
    data = json.loads(node_data_json(done.model, done.results, "time"))
    assert list(data) == ["g"]  # the main graph's id is its name
    graph = data["g"]
    # Ids: Add "node", MatMul "node_1", then the repeated name "same" and "same_1"; the folded Add has no value.
    assert list(graph["results"]) == ["node_1", "same", "same_1"]
    by_id = dict(zip(["node_1", "same", "same_1"], [r for r in done.results if r is not None]))
    for node_id, result in by_id.items():
        assert graph["results"][node_id] == {"value": result.prediction.predicted_time_s * 1e6}  # microseconds
    stops = [s["stop"] for s in graph["gradient"]]
    assert stops[0] == 0 and stops[-1] == 1 and stops == sorted(stops)
    assert all(s["bgColor"].startswith("#") for s in graph["gradient"])

    bound = node_data(done.model, done.results, "bound")["g"]
    assert "gradient" not in bound
    assert [t["value"] for t in bound["thresholds"]] == [0, 1, 2, 3]
    assert bound["results"]["same"] == {"value": BOUND_CODES[by_id["same"].prediction.bound]}

    flops = node_data(done.model, done.results, "flops")["g"]["results"]
    assert flops["node_1"] == {"value": 512}  # 2*2*8*16
    intensity = node_data(done.model, done.results, "intensity")["g"]["results"]
    # MatMul reads x 2*16*4 = 128 B and w2 16*8*4 = 512 B, writes 2*8*4 = 64 B: 512 / 704 FLOP/B.
    assert intensity["node_1"]["value"] == pytest.approx(512 / 704)
    with pytest.raises(ValueError, match="unknown node value"):
        node_data(done.model, done.results, "colour")
