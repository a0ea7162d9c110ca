"""The kernels an engine fuses a graph's nodes into, and what a fused kernel costs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxroof.predict.analysis import analyze_graph
from onnxroof.predict.fusion import FUSED_OP, FusionRules, fuse, kernel_members
from onnxroof.predict.profiles import TENSORRT_FUSION
from tests.helpers import loaded_graph

NONE = FusionRules("none", False, False, False, False, False, False, "test")


def _v(name: str, *shape: int):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _w(name: str, *shape: int):
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


def _conv_block():
    """x -> Conv(8 -> 8, 3x3, pad 1) -> BatchNormalization -> Add(x) -> Relu -> y, on 1x8x16x16."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="bn"),
        helper.make_node("Add", ["n", "x"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu"),
    ]
    inits = [_w("w", 8, 8, 3, 3), _w("s", 8), _w("b", 8), _w("m", 8), _w("v", 8)]
    return loaded_graph(nodes, [_v("x", 1, 8, 16, 16)], [_v("y", 1, 8, 16, 16)], inits)


def _kernels(graph):
    return [kernel_members(n) for n in graph.nodes if not n.folded]


def test_a_convolution_takes_its_normalization_residual_add_and_activation():
    fused = fuse(_conv_block(), TENSORRT_FUSION)
    assert _kernels(fused) == [("conv", "bn", "add", "relu")]
    (kernel,) = [n for n in fused.nodes if not n.folded]
    assert (kernel.domain, kernel.op_type) == FUSED_OP
    assert kernel.outputs == ("y",)
    assert kernel.inputs[:2] == ("x", "w")  # the residual x is read once: it is the convolution's input too


def test_rules_that_fuse_nothing_leave_every_node_its_own_kernel():
    assert _kernels(fuse(_conv_block(), NONE)) == [("conv",), ("bn",), ("add",), ("relu",)]


def test_a_fused_kernel_costs_its_nodes_arithmetic_and_only_its_own_inputs_and_outputs():
    graph = _conv_block()
    alone = analyze_graph(graph, _device())
    kernel = analyze_graph(fuse(graph, TENSORRT_FUSION), _device())
    assert kernel.totals.flops == alone.totals.flops  # the same arithmetic
    # x (1x8x16x16 floats = 8192 bytes) and the weights: w 8*8*3*3 = 576 floats, s b m v 4 x 8 floats = 32;
    # (2048 + 576 + 32) x 4 = 10624 bytes read; y 2048 floats = 8192 bytes written; one kernel.
    assert kernel.totals.bytes_read == 10624
    assert kernel.totals.bytes_written == 8192
    assert kernel.totals.kernels == 1
    assert kernel.totals.params == alone.totals.params


def test_an_intermediate_read_by_another_kernel_is_written_and_stays_an_output():
    """A Conv's output read by a Relu and a MaxPool: the Relu does not join it (the pool, which no rule fuses, reads
    that output as well, so it is written)."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[1, 1]),
    ]
    graph = loaded_graph(
        nodes, [_v("x", 1, 4, 8, 8)], [_v("r", 1, 4, 8, 8), _v("p", 1, 4, 8, 8)], [_w("w", 4, 4, 1, 1)]
    )
    assert _kernels(fuse(graph, TENSORRT_FUSION)) == [("conv",), ("relu",), ("pool",)]


def test_a_product_does_not_take_a_pointwise_op_that_spreads_its_output_over_a_larger_tensor():
    """A squeeze-excitation's scale: Conv (1x1 on 1x8x1x1) -> Sigmoid -> Mul by the 1x8x16x16 feature map x. The
    Sigmoid works on the Conv's 8 outputs and joins its kernel; the Mul writes 2048 values, each from one of x,
    which no epilogue of an 8-output kernel computes: it is a kernel of its own."""
    nodes = [
        helper.make_node("Conv", ["pooled", "w"], ["c"], name="fc"),
        helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
        helper.make_node("Mul", ["x", "s"], ["y"], name="scale"),
    ]
    graph = loaded_graph(
        nodes, [_v("pooled", 1, 8, 1, 1), _v("x", 1, 8, 16, 16)], [_v("y", 1, 8, 16, 16)], [_w("w", 8, 8, 1, 1)]
    )
    assert _kernels(fuse(graph, TENSORRT_FUSION)) == [("fc", "gate"), ("scale",)]


def _scalar(name: str, value, dtype) -> object:
    return numpy_helper.from_array(np.array(value, dtype), name)


def _quantized_convs():
    """x -> Q -> DQ -> Conv (weight: DQ of an int8 initializer) -> Relu -> Q -> DQ -> Conv (the same weight) -> y,
    on 1x8x16x16 with 8x8x3x3 weights, every scale one float and every zero point one int8."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_in"),
        helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"], name="dq_w"),
        helper.make_node("Conv", ["xd", "w"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"], name="q1"),
        helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"], name="dq1"),
        helper.make_node("Conv", ["rd", "w"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    weight = numpy_helper.from_array(np.ones((8, 8, 3, 3), np.int8), "wq")
    inits = [weight, _scalar("s", 0.1, np.float32), _scalar("z", 0, np.int8)]
    return loaded_graph(nodes, [_v("x", 1, 8, 16, 16)], [_v("y", 1, 8, 16, 16)], inits)


def test_quantize_pairs_fold_into_the_products_that_read_the_quantized_tensors():
    """TensorRT's Q/DQ folding: each convolution dequantizes its int8 input and weight as it reads them and the
    first writes its output quantized; no DequantizeLinear is a kernel of its own and no float activation is
    written between the convolutions."""
    kernels = _kernels(fuse(_quantized_convs(), TENSORRT_FUSION))
    assert kernels == [("q_in",), ("dq_in", "dq_w", "conv1", "relu", "q1"), ("dq1", "dq_w", "conv2")]


def test_a_kernel_of_quantized_convolutions_reads_and_writes_int8():
    # conv1's kernel reads xq (1x8x16x16 int8 = 2048 B), wq (8x8x3x3 int8 = 576 B), the scale s (one float, 4 B)
    # and the zero point z (one int8, 1 B): 2629 B; it writes rq, 2048 int8 = 2048 B.
    analysis = analyze_graph(fuse(_quantized_convs(), TENSORRT_FUSION), _device())
    first = next(n for n in analysis.nodes if n.name.startswith("conv1"))
    assert first.cost.bytes_read == 2048 + 576 + 4 + 1
    assert first.cost.bytes_written == 2048
    assert analysis.totals.params == 576 + 1 + 1  # the int8 weight and the scale and zero point, once each


def _attention_block():
    """q @ k -> Div -> Softmax -> @ v on two heads of 16 positions by 8."""
    nodes = [
        helper.make_node("MatMul", ["q", "k"], ["s"], name="scores"),
        helper.make_node("Div", ["s", "d"], ["t"], name="scale"),
        helper.make_node("Softmax", ["t"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="context"),
    ]
    inputs = [_v("q", 1, 2, 16, 8), _v("k", 1, 2, 8, 16), _v("v", 1, 2, 16, 8)]
    return loaded_graph(nodes, inputs, [_v("o", 1, 2, 16, 8)], [_w("d", 1)])


def test_attention_is_one_kernel_where_the_engine_fuses_it():
    """q @ k -> Div -> Softmax -> @ v: one kernel under TensorRT's rules; without attention fusion the product
    takes the Div only and the softmax and the second product are kernels of their own."""
    graph = _attention_block()
    assert _kernels(fuse(graph, TENSORRT_FUSION)) == [("scores", "scale", "softmax", "context")]
    products_only = FusionRules("products", True, False, False, False, False, False, "test")
    assert _kernels(fuse(graph, products_only)) == [("scores", "scale"), ("softmax",), ("context",)]


def test_attention_is_one_kernel_from_the_release_that_fuses_it_on():
    """TensorRT before 8.6 runs the block above as its products and softmax: the first product takes the Div, the
    softmax and the second product are kernels of their own; 8.6, 8.6.1, 10.0 and no release named fuse it."""
    graph = _attention_block()
    one = [("scores", "scale", "softmax", "context")]
    for release in ("8.0", "8.2.1", "8.5"):
        assert _kernels(fuse(graph, TENSORRT_FUSION.at(release))) == [("scores", "scale"), ("softmax",), ("context",)]
    for release in ("8.6", "8.6.1", "10.0", None):
        assert _kernels(fuse(graph, TENSORRT_FUSION.at(release))) == one


def test_a_residual_add_joins_a_kernel_opened_before_the_branch_it_reads_and_runs_after_it():
    """conv1 (x) and conv2 (x), conv1 + conv2: the Add joins conv1's kernel but reads conv2's output, so that
    kernel runs after conv2's."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1"),
        helper.make_node("Conv", ["x", "w2"], ["b"], name="conv2"),
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    inits = [_w("w1", 4, 4, 1, 1), _w("w2", 4, 4, 1, 1)]
    graph = loaded_graph(nodes, [_v("x", 1, 4, 8, 8)], [_v("y", 1, 4, 8, 8)], inits)
    assert _kernels(fuse(graph, TENSORRT_FUSION)) == [("conv2",), ("conv1", "add")]


def _device():
    from onnxroof.devices import load_device

    return load_device("a100-sxm4-80gb")
