"""The memory estimate on graphs small enough to work out by hand: liveness over an order, views, shared weights,
what-if precision, the greedy order, and ResNet-50's published parameter count.

Every image tensor below is 1x8x8x8 fp32 = 512 elements * 4 B = 2048 B unless a comment says otherwise.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.errors import UserError
from onnxroof.ir import Graph
from onnxroof.load import load_graph
from onnxroof.predict.memory import best_order, estimate_memory, read_distances
from tests.helpers import IR_VERSION, loaded_graph

IMAGE = [1, 8, 8, 8]
B = 2048  # bytes of one IMAGE tensor at fp32


def _vi(name: str, shape, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _relu_chain() -> Graph:
    """x -> Relu -> a -> Relu -> b -> Relu -> y."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="r1"),
        helper.make_node("Relu", ["a"], ["b"], name="r2"),
        helper.make_node("Relu", ["b"], ["y"], name="r3"),
    ]
    return loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("y", IMAGE)])


def _residual() -> Graph:
    """x -> Conv(8->8, 3x3, pad 1) -> c -> Relu -> r -> Add(r, x) -> y."""
    w = numpy_helper.from_array(np.zeros((8, 8, 3, 3), np.float32), "W")  # 576 * 4 = 2304 B
    bias = numpy_helper.from_array(np.zeros(8, np.float32), "bias")  # 8 * 4 = 32 B
    nodes = [
        helper.make_node("Conv", ["x", "W", "bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["y"], name="add"),
    ]
    return loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("y", IMAGE)], [w, bias])


def test_a_chain_holds_one_tensor_in_and_one_out_at_each_step():
    # Step 0 (r1): x (input, last read here) + a = 2B.  Step 1 (r2): a + b = 2B.  Step 2 (r3): b + y = 2B.
    # The peak is the first step reaching 2B; no weights, so the total is the peak.
    m = estimate_memory(_relu_chain())
    assert m.live_bytes == (2 * B, 2 * B, 2 * B)
    assert m.peak_activation_bytes == 2 * B
    assert (m.peak_step, m.peak_node) == (0, "r1")
    assert {t.name: t.kind for t in m.live_at_peak} == {"x": "input", "a": "activation"}
    assert (m.weights_bytes, m.inputs_bytes, m.outputs_bytes) == (0, B, B)
    assert m.total_bytes == 2 * B
    # Footprint, no reuse: params 0 + input B + a, b, y = 4B.
    assert m.footprint_bytes == 4 * B
    assert m.order == "stored" and m.unknown == () and not m.lower_bound


def test_a_residual_input_stays_live_until_the_add():
    # x is read by the Add at step 2, so it is live at every step.
    # Step 0 (conv): x + c = 2B.  Step 1 (relu): x + c + r = 3B.  Step 2 (add): x + r + y = 3B.
    m = estimate_memory(_residual())
    assert m.live_bytes == (2 * B, 3 * B, 3 * B)
    assert m.peak_activation_bytes == 3 * B
    assert m.peak_node == "relu"
    assert sorted(t.name for t in m.live_at_peak) == ["c", "r", "x"]
    assert m.weights_bytes == 2304 + 32
    assert m.total_bytes == 2336 + 3 * B
    assert m.footprint_bytes == 2336 + B + 3 * B


def test_a_skip_connection_is_live_across_every_node_it_spans():
    """U-Net-like: s = Relu(x) is read again after three more nodes."""
    nodes = [
        helper.make_node("Relu", ["x"], ["s"], name="enc"),
        helper.make_node("Sigmoid", ["s"], ["t1"], name="n1"),
        helper.make_node("Tanh", ["t1"], ["t2"], name="n2"),
        helper.make_node("Sigmoid", ["t2"], ["t3"], name="n3"),
        helper.make_node("Add", ["t3", "s"], ["y"], name="dec"),
    ]
    m = estimate_memory(loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("y", IMAGE)]))
    # Step 0: x + s.  Step 1: s + t1.  Step 2: s + t1 + t2.  Step 3: s + t2 + t3.  Step 4: s + t3 + y.
    # A plain chain would hold 2B at each step; the skip adds s (B) from step 2 on.
    assert m.live_bytes == (2 * B, 2 * B, 3 * B, 3 * B, 3 * B)
    assert (m.peak_activation_bytes, m.peak_node) == (3 * B, "n2")
    assert "s" in {t.name for t in m.live_at_peak}


def _two_branches() -> Graph:
    """Two branches that each grow x fourfold (Concat) and shrink it to 32 floats (GlobalAveragePool), stored
    breadth-first: both Concats run before either pool."""
    nodes = [
        helper.make_node("Concat", ["x", "x", "x", "x"], ["a1"], name="grow_a", axis=1),
        helper.make_node("Concat", ["x", "x", "x", "x"], ["b1"], name="grow_b", axis=1),
        helper.make_node("GlobalAveragePool", ["a1"], ["a2"], name="pool_a"),
        helper.make_node("GlobalAveragePool", ["b1"], ["b2"], name="pool_b"),
        helper.make_node("Add", ["a2", "b2"], ["y"], name="add"),
    ]
    return loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("y", [1, 32, 1, 1])])


def test_an_order_that_shrinks_one_branch_first_peaks_lower():
    # a1, b1: 1x32x8x8 fp32 = 8192 B (4B); a2, b2, y: 1x32x1x1 fp32 = 128 B.
    big, small = 4 * B, 128
    graph = _two_branches()
    stored = estimate_memory(graph)
    # Stored, step 1 (grow_b): x (last read here) + a1 + b1 = B + 8B.
    assert stored.peak_activation_bytes == B + 2 * big
    assert stored.peak_node == "grow_b"

    # The greedy order: after grow_a, pool_a writes 128 B and frees a1, grow_b writes b1 and frees only x.
    order = best_order(graph)
    assert order == ["grow_a", "pool_a", "grow_b", "pool_b", "add"]
    best = estimate_memory(graph, order=order)
    # Step 0: x + a1.  Step 1: x + a1 + a2.  Step 2: x + a2 + b1.  Step 3: a2 + b1 + b2.  Step 4: a2 + b2 + y.
    assert best.live_bytes == (B + big, B + big + small, B + small + big, big + 2 * small, 3 * small)
    assert best.peak_activation_bytes == B + big + small < stored.peak_activation_bytes
    assert best.order == "given"
    # The order changes liveness, not what exists.
    assert (best.weights_bytes, best.footprint_bytes) == (stored.weights_bytes, stored.footprint_bytes)


def test_the_best_order_is_never_worse_than_the_stored_one():
    for graph in (_relu_chain(), _residual(), _two_branches()):
        best = estimate_memory(graph, order=best_order(graph))
        assert best.peak_activation_bytes <= estimate_memory(graph).peak_activation_bytes


def test_a_weight_read_twice_counts_once():
    w = numpy_helper.from_array(np.zeros((16, 16), np.float32), "W")  # 256 * 4 = 1024 B
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["a"], name="mm1"),
        helper.make_node("MatMul", ["a", "W"], ["y"], name="mm2"),
    ]
    m = estimate_memory(loaded_graph(nodes, [_vi("x", [1, 16])], [_vi("y", [1, 16])], [w]))
    assert m.weights_bytes == 1024
    # x, a, y: 16 floats = 64 B each.  Footprint: W + x + a + y.
    assert m.footprint_bytes == 1024 + 3 * 64
    assert m.total_bytes == 1024 + 2 * 64


def _reshape_between_relus() -> Graph:
    """x -> Relu -> a -> Reshape([1, 512]) -> r -> Relu -> y (1x512)."""
    shape = numpy_helper.from_array(np.array([1, 512], np.int64), "shape")  # 2 * 8 = 16 B, read at run time
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu1"),
        helper.make_node("Reshape", ["a", "shape"], ["r"], name="view"),
        helper.make_node("Relu", ["r"], ["y"], name="relu2"),
    ]
    return loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("y", [1, 512])], [shape])


def test_a_reshape_is_a_view_of_its_input():
    m = estimate_memory(_reshape_between_relus())
    # r is a's buffer relabelled: one buffer, live until relu2 reads r.
    # Step 0 (relu1): x + a = 2B.  Step 1 (view): a alone = B.  Step 2 (relu2): a + y = 2B.
    assert m.live_bytes == (2 * B, B, 2 * B)
    assert {t.name for t in m.live_at_peak} == {"x", "a"}
    assert m.weights_bytes == 16
    # Without reuse the view's output is a buffer of its own: 16 + x + a, r, y.
    assert m.footprint_bytes == 16 + B + 3 * B


def test_a_view_of_a_graph_output_lives_to_the_end():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Flatten", ["a"], ["flat"], name="flatten"),
        helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
    ]
    graph = loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("flat", [1, 512]), _vi("s", IMAGE)])
    m = estimate_memory(graph)
    # a's buffer is returned (as flat), so it is live to the last step; x is read last by the sigmoid.
    # Step 0: x + a.  Step 1: x + a.  Step 2: x + a + s.
    assert m.live_bytes == (2 * B, 2 * B, 3 * B)
    assert {t.name: t.kind for t in m.live_at_peak} == {"x": "input", "a": "output", "s": "output"}
    assert m.outputs_bytes == 2 * B


def test_a_view_of_a_weight_holds_no_activation_bytes():
    w = numpy_helper.from_array(np.zeros(512, np.float32), "W")  # 2048 B
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),  # of a static shape: folded at load time
        helper.make_node("Reshape", ["W", "s"], ["w_image"], name="view"),  # of a weight by a constant: folded
        helper.make_node("Add", ["x", "w_image"], ["y"], name="add"),
    ]
    m = estimate_memory(loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("y", IMAGE)], [w]))
    # w_image is W's storage, counted once among the weights. The one runtime step (add): x + y.
    assert m.weights_bytes == B
    assert m.live_bytes == (2 * B,)
    # Footprint: W + x + y.
    assert m.footprint_bytes == B + B + B


def test_fp16_halves_every_floating_point_tensor_and_leaves_integers_alone():
    fp32, fp16 = estimate_memory(_residual()), estimate_memory(_residual(), precision="fp16")
    assert fp16.precision == "fp16"
    assert fp16.weights_bytes * 2 == fp32.weights_bytes
    assert fp16.peak_activation_bytes * 2 == fp32.peak_activation_bytes
    assert fp16.footprint_bytes * 2 == fp32.footprint_bytes
    # The int64 shape of a Reshape keeps its 16 B; the float tensors halve (B/2 each).
    view = estimate_memory(_reshape_between_relus(), precision="fp16")
    assert view.weights_bytes == 16
    assert view.live_bytes == (B, B // 2, B)


def test_an_unknown_precision_is_a_user_error():
    with pytest.raises(UserError):
        estimate_memory(_relu_chain(), precision="fp12")


def test_an_order_must_run_every_node_after_what_it_reads():
    graph = _relu_chain()
    with pytest.raises(UserError):
        estimate_memory(graph, order=["r2", "r1", "r3"])
    with pytest.raises(UserError):
        estimate_memory(graph, order=["r1", "r2"])
    with pytest.raises(UserError):
        estimate_memory(graph, order=["r1", "r2", "r3", "nope"])


def test_unknown_shapes_count_nothing_and_make_a_lower_bound():
    # A custom op's output has no inferable shape; the Relu reading it has none either.
    nodes = [
        helper.make_node("Mystery", ["x"], ["m"], name="mystery", domain="example.custom"),
        helper.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "m", [_vi("x", IMAGE)], [_vi("y", None)])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("example.custom", 1)],
        ir_version=IR_VERSION,
    )
    m = estimate_memory(load_graph(model))
    assert {"m", "y"} <= set(m.unknown)
    assert m.lower_bound
    # Only x is known: live at step 0 with m (0 B).
    assert m.live_bytes == (B, 0)


def test_the_json_form_has_every_figure():
    m = estimate_memory(_residual())
    d = json.loads(json.dumps(m.to_dict()))
    assert d["total_bytes"] == d["weights_bytes"] + d["peak_activation_bytes"]
    assert d["live_at_peak"][0]["bytes"] >= d["live_at_peak"][-1]["bytes"]
    assert d["order"] == "stored" and d["lower_bound"] is False


@pytest.fixture(scope="module")
def resnet50() -> Graph:
    return load_graph(model_zoo.build("resnet50", weights=False))


def test_resnet50_weighs_its_parameters_and_its_batch_norm_statistics(resnet50: Graph):
    m = estimate_memory(resnet50)
    # torchvision ResNet-50 has 25,557,032 parameters (102,228,128 B at fp32). The exported graph's
    # BatchNormalization nodes also read each channel's running mean and variance, which torchvision counts as
    # buffers, not parameters: 2 per BN channel. BN channels: stem 64; layer1 3*(64+64+256) + 256 = 1408;
    # layer2 4*(128+128+512) + 512 = 3584; layer3 6*(256+256+1024) + 1024 = 10240;
    # layer4 3*(512+512+2048) + 2048 = 11264; in all 26,560.
    bn_channels = 64 + 1408 + 3584 + 10240 + 11264
    assert m.weights_bytes == (25_557_032 + 2 * bn_channels) * 4 == 102_228_128 + 212_480
    assert m.inputs_bytes == 3 * 224 * 224 * 4
    assert m.outputs_bytes == 1000 * 4
    assert m.unknown == ()
    # At the first convolution, the image and its 1x64x112x112 output are both live.
    assert m.peak_activation_bytes >= 3 * 224 * 224 * 4 + 64 * 112 * 112 * 4
    # Paper 004's footprint keeps every tensor; the peak reuses.
    assert m.footprint_bytes >= m.total_bytes
    assert estimate_memory(resnet50, order=best_order(resnet50)).peak_activation_bytes <= m.peak_activation_bytes
    half = estimate_memory(resnet50, precision="fp16")
    assert half.weights_bytes * 2 == m.weights_bytes


def test_a_read_distance_is_the_bytes_moved_since_the_input_was_written():
    """x -> conv -> c -> Relu -> r -> Reshape (a view) -> v -> Add(v, c) -> y, with a skip from the conv's output.

    conv moves x, W, bias and c: 2048 + 2304 + 32 + 2048 = 6432 B; relu c and r: 4096 B; the view moves nothing."""
    w = numpy_helper.from_array(np.zeros((8, 8, 3, 3), np.float32), "W")
    bias = numpy_helper.from_array(np.zeros(8, np.float32), "bias")
    shape = numpy_helper.from_array(np.array(IMAGE, np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "W", "bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["v"], name="view"),
        helper.make_node("Add", ["v", "c"], ["y"], name="add"),
    ]
    distances = read_distances(loaded_graph(nodes, [_vi("x", IMAGE)], [_vi("y", IMAGE)], [w, bias, shape]))
    # The graph input and the weights are not counted; relu reads c just written (distance 0); the view reads
    # nothing; add reads r through the view (written by relu, the last node to move bytes: 0) and c, written
    # before relu moved its 4096 B.
    assert distances == {"relu": ((B, 0.0),), "add": ((B, 0.0), (B, 4096.0))}
