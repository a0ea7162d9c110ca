"""The int8 pass: the quantized ops of each mode, outputs against float32, refusals, notes, quiet logging.

What the output comparison asserts: 8-bit per-tensor quantization splits a tensor's range into 255 steps, so
each quantized activation or weight is off by at most half a step, 1/510 (0.2%) of its range. The small conv net
quantizes four activations and three weights on the path to an output; errors of that size, compounded through
the layers and all of one sign, stay below 12 half steps, so the largest output difference is asserted below 5%
of the largest output magnitude, and the outputs' correlation with float32 above 0.99 (a wrongly scaled or
dropped weight fails both). Static quantization clips activations to the ranges its calibration saw, so its
outputs are compared within that tolerance on the calibration inputs; on a fresh input a value beyond a calibrated
range saturates, and only the correlation is asserted there.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.passes import Refused, check_model
from onnxroof.passes.int8 import int8
from tests.helpers import IR_VERSION, LIGHT_DIR, small_conv_net

RELATIVE_TOLERANCE = 0.05  # of the largest output magnitude; see the module docstring
MIN_CORRELATION = 0.99


def matmul_net() -> onnx.ModelProto:
    """MatMul by a 16x8 weight, then Relu, on a 4x16 input."""
    w = numpy_helper.from_array(np.random.default_rng(5).standard_normal((16, 8)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Relu", ["m"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "matmul_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def images(count: int, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(count)]


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, feeds)[0])


def assert_close(candidate: np.ndarray, reference: np.ndarray) -> None:
    assert np.abs(candidate - reference).max() < RELATIVE_TOLERANCE * np.abs(reference).max()
    assert np.corrcoef(candidate.ravel(), reference.ravel())[0, 1] > MIN_CORRELATION


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


@pytest.mark.ort
def test_dynamic_makes_integer_convolutions_and_matmuls() -> None:
    model = small_conv_net()
    before = model.SerializeToString()
    result = int8(model, "dynamic")
    assert model.SerializeToString() == before
    check_model(result.model)
    counts = op_counts(result.model)
    assert counts["ConvInteger"] == 2 and counts["MatMulInteger"] == 1
    assert counts["DynamicQuantizeLinear"] == 3
    assert "Conv" not in counts and "Gemm" not in counts
    weights = {t.name: t for t in result.model.graph.initializer}
    for node in result.model.graph.node:
        if node.op_type in ("ConvInteger", "MatMulInteger"):
            assert weights[node.input[1]].data_type == TensorProto.UINT8
    assert [o.domain for o in result.model.opset_import] == [""]
    notes = {n.node: n.change for n in result.notes}
    assert notes["quantized"] == "Conv x2, Gemm x1"
    assert notes["left in float"] == "Flatten x1, GlobalAveragePool x1, Relu x1"
    assert notes["ConvInteger"] == "dynamic quantization: 0 -> 2 nodes"
    x = images(1, seed=9)[0]
    assert_close(run(result.model, x), run(model, x))


@pytest.mark.ort
def test_dynamic_matmul() -> None:
    result = int8(matmul_net(), "dynamic")
    check_model(result.model)
    counts = op_counts(result.model)
    assert counts.get("MatMulInteger") == 1 and "MatMul" not in counts
    x = {"x": np.random.default_rng(6).standard_normal((4, 16)).astype(np.float32)}
    assert_close(run(result.model, x), run(matmul_net(), x))


@pytest.mark.ort
def test_static_inserts_quantize_dequantize_pairs() -> None:
    model = small_conv_net()
    before = model.SerializeToString()
    result = int8(model, "static", feeds=images(3))
    assert model.SerializeToString() == before
    check_model(result.model)
    graph = result.model.graph
    producers = {out: n for n in graph.node for out in n.output}
    compute = [n for n in graph.node if n.op_type in ("Conv", "Gemm")]
    assert len(compute) == 3
    for node in compute:  # activation, weight and bias all arrive dequantized
        assert all(producers[name].op_type == "DequantizeLinear" for name in node.input)
    for dq in (n for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0] in producers):
        assert producers[dq.input[0]].op_type == "QuantizeLinear"  # activations: a Q/DQ pair
    counts = op_counts(result.model)
    assert counts["QuantizeLinear"] >= 4 and counts["DequantizeLinear"] > counts["QuantizeLinear"]
    notes = {n.node: n.change for n in result.notes}
    assert "Conv x2" in notes["quantized"] and "Gemm x1" in notes["quantized"]
    for x in images(3):  # the calibration inputs
        assert_close(run(result.model, x), run(model, x))
    fresh = images(1, seed=9)[0]
    y8, y32 = run(result.model, fresh), run(model, fresh)
    assert np.corrcoef(y8.ravel(), y32.ravel())[0, 1] > MIN_CORRELATION


def test_refusals() -> None:
    with pytest.raises(Refused, match=r"unknown int8 mode 'fast'.*dynamic, static"):
        int8(small_conv_net(), "fast")
    with pytest.raises(Refused, match=r"no calibration inputs.*pass feeds.*x"):
        int8(small_conv_net(), "static")
    with pytest.raises(Refused, match="calibration feed 0 lacks the input"):
        int8(small_conv_net(), "static", feeds=[{"z": np.zeros((1, 3, 16, 16), np.float32)}])
    with pytest.raises(Refused, match="needs the weights' values"):
        int8(model_zoo.build("resnet18", size=64, weights=False), "dynamic")


@pytest.mark.ort
def test_symbolic_inference_failure_names_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    from onnxruntime.tools import symbolic_shape_infer

    def fail(*args: object, **kwargs: object) -> None:
        raise Exception("Incomplete symbolic shape inference")

    monkeypatch.setattr(symbolic_shape_infer.SymbolicShapeInference, "infer_shapes", staticmethod(fail))
    with pytest.raises(Refused, match=r"symbolic shape inference.*skip_symbolic_shape=True"):
        int8(small_conv_net(), "dynamic")
    result = int8(small_conv_net(), "dynamic", skip_symbolic_shape=True)  # the failing step is not run
    assert op_counts(result.model)["ConvInteger"] == 2


def test_the_library_logs_nothing_to_the_terminal(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    root = logging.getLogger()
    handlers = root.handlers[:]
    result = int8(small_conv_net(), "dynamic", preprocess=False)  # without preprocessing onnxruntime warns
    assert root.handlers == handlers
    assert op_counts(result.model)["ConvInteger"] == 2
    out, err = capfd.readouterr()
    assert "pre-processing" not in out + err and "WARNING" not in out + err
    assert not caplog.records  # the root logger's handlers (pytest's among them) heard nothing


@pytest.mark.ort
def test_resnet18_end_to_end() -> None:
    model = model_zoo.build("resnet18", size=64, weights=True)
    result = int8(model, "dynamic")
    check_model(result.model)
    counts = op_counts(result.model)
    assert counts["ConvInteger"] == 20 and "Conv" not in counts and "BatchNormalization" not in counts
    notes = {n.node: n.change for n in result.notes}
    assert notes["BatchNormalization"].endswith("20 -> 0 nodes")  # folded into Conv by preprocessing
    x = {"input": np.random.default_rng(7).standard_normal((1, 3, 64, 64)).astype(np.float32)}
    y8, y32 = run(result.model, x), run(model, x)
    assert np.corrcoef(y8.ravel(), y32.ravel())[0, 1] > 0.95  # 21 quantized layers: correlation only


@pytest.mark.ort
@pytest.mark.skipif(not (LIGHT_DIR / "light_squeezenet.onnx").exists(), reason="this onnx has no light models")
@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_an_ir3_model_keeps_initializers_as_inputs_and_needs_only_its_own_feeds(mode: str) -> None:
    # onnx's light SqueezeNet is IR version 3, where every initializer is also a graph input, and its weights come
    # from ConstantOfShape nodes that the preprocessing folds into initializers.
    model = onnx.load(str(LIGHT_DIR / "light_squeezenet.onnx"))
    assert model.ir_version == 3
    rng = np.random.default_rng(0)
    feeds = [{"data_0": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(2)]
    result = int8(model, mode, feeds=feeds if mode == "static" else None).model
    check_model(result)
    inputs = [vi.name for vi in result.graph.input]
    assert len(inputs) == len(set(inputs))
    assert set(inputs) - {init.name for init in result.graph.initializer} == {"data_0"}
    session = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, feeds[0])
    assert out.shape == (1, 1000, 1, 1)
