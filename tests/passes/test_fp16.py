"""The fp16 pass: types of the result, Casts where float32 stays, outputs against float32, refusals, notes.

Tolerance of the outputs: float16 keeps 11 significant bits, so each rounding is off by at most 2^-11 (4.9e-4)
relative. The small conv net below rounds its input, its weights and every intermediate value (Conv, Relu, Conv,
GlobalAveragePool, Flatten, Gemm: about 15 roundings on the path to an output, with sums of up to 72 products in
between that onnxruntime may also accumulate in float16). Errors of random sign grow like the square root of
their count (about 4 x 4.9e-4 = 2e-3 here); 1e-2 of the largest output magnitude, 20 roundings all of one sign,
bounds that with margin, while a wrong conversion (a weight lost, a wrong type) is off by far more.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.passes import Refused, check_model
from onnxroof.passes.fp16 import FP16_MAX, fp16
from onnxroof.passes.weights import is_absent
from tests.helpers import IR_VERSION, small_conv_net

RELATIVE_TOLERANCE = 1e-2  # of the largest output magnitude; see the module docstring


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, feeds)[0])


def relative_error(candidate: np.ndarray, reference: np.ndarray) -> float:
    """Largest absolute difference over the largest reference magnitude."""
    return float(np.abs(candidate.astype(np.float32) - reference).max() / np.abs(reference).max())


@pytest.mark.ort
def test_conv_net_becomes_float16_and_matches_float32() -> None:
    model = small_conv_net()
    before = model.SerializeToString()
    result = fp16(model)
    assert model.SerializeToString() == before
    assert result.changed and not result.graph_only
    check_model(result.model)
    out = result.model
    assert all(t.data_type == TensorProto.FLOAT16 for t in out.graph.initializer)
    assert [vi.type.tensor_type.elem_type for vi in (*out.graph.input, *out.graph.output)] == [TensorProto.FLOAT16] * 2
    assert [n.op_type for n in out.graph.node] == [n.op_type for n in model.graph.node]  # no Cast needed
    assert [(o.domain, o.version) for o in out.opset_import] == [("", 17)]
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    y16 = run(out, {"x": x.astype(np.float16)})
    assert y16.dtype == np.float16
    assert relative_error(y16, run(model, {"x": x})) < RELATIVE_TOLERANCE
    notes = [str(n) for n in result.notes]
    assert "initializers: 6 of 6 float32 initializers are float16" in notes
    assert "nodes: 6 of 6 nodes on float32 values compute in float16" in notes


@pytest.mark.ort
def test_keep_io_types_casts_at_the_boundary() -> None:
    model = small_conv_net()
    result = fp16(model, keep_io_types=True)
    check_model(result.model)
    graph = result.model.graph
    assert [vi.type.tensor_type.elem_type for vi in (*graph.input, *graph.output)] == [TensorProto.FLOAT] * 2
    first, last = graph.node[0], graph.node[-1]
    assert (first.op_type, first.input[0], first.attribute[0].i) == ("Cast", "x", TensorProto.FLOAT16)
    assert (last.op_type, last.output[0], last.attribute[0].i) == ("Cast", "y", TensorProto.FLOAT)
    assert sum(n.op_type == "Cast" for n in graph.node) == 2
    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    y = run(result.model, {"x": x})
    assert y.dtype == np.float32
    assert relative_error(y, run(model, {"x": x})) < RELATIVE_TOLERANCE
    assert any("2 Casts inserted (2 at the graph's inputs and outputs" in str(n) for n in result.notes)


@pytest.mark.ort
def test_block_ops_keep_an_op_in_float32() -> None:
    result = fp16(small_conv_net(), block_ops=["Relu"])
    check_model(result.model)
    nodes = {n.name: n for n in result.model.graph.node}
    producers = {out: n for n in result.model.graph.node for out in n.output}
    relu = nodes["relu1"]
    cast_in = producers[relu.input[0]]
    assert (cast_in.op_type, cast_in.attribute[0].i) == ("Cast", TensorProto.FLOAT)
    cast_out = next(n for n in result.model.graph.node if relu.output[0] in n.input)
    assert (cast_out.op_type, cast_out.attribute[0].i) == ("Cast", TensorProto.FLOAT16)
    assert any(n.node == "Relu" and "kept in float32" in n.change for n in result.notes)
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float16)
    assert run(result.model, {"x": x}).shape == (1, 4)


def test_block_ops_spelling_is_checked() -> None:
    with pytest.raises(Refused, match=r"'relu'.*did you mean Relu\?"):
        fp16(small_conv_net(), block_ops=["relu"])
    with pytest.raises(Refused, match="empty or padded"):
        fp16(small_conv_net(), block_ops=[""])
    with pytest.raises(Refused, match="empty or padded"):
        fp16(small_conv_net(), block_ops=[" Relu"])
    result = fp16(small_conv_net(), block_ops=["Softmax"])  # an onnx op this model does not use
    assert any(n.node == "Softmax" and "no effect" in n.change for n in result.notes)


def test_a_model_without_float32_is_refused() -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["c"])]
    graph = helper.make_graph(
        nodes,
        "ints",
        [helper.make_tensor_value_info("a", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("c", TensorProto.INT64, [4])],
        [numpy_helper.from_array(np.arange(4, dtype=np.int64), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    with pytest.raises(Refused, match="nothing to convert: no float32 tensor"):
        fp16(model)


def test_a_weight_beyond_float16_is_named_and_clamped() -> None:
    result = fp16(small_conv_net(big=1e5))
    bias = numpy_helper.to_array(next(t for t in result.model.graph.initializer if t.name == "bg"))
    assert float(bias[1]) == FP16_MAX
    overflow = [n for n in result.notes if n.node == "bg"]
    assert len(overflow) == 1 and "clamped" in overflow[0].change and "100000" in overflow[0].change
    assert not any(n.node in ("w1", "wg") for n in result.notes)


def test_graph_only_weights_convert_by_type() -> None:
    model = model_zoo.build("resnet18", size=64, weights=False)
    before = model.SerializeToString()
    result = fp16(model)
    assert model.SerializeToString() == before
    check_model(result.model)
    assert result.graph_only
    originals = {t.name: t for t in model.graph.initializer}
    for tensor in result.model.graph.initializer:
        assert is_absent(tensor) and tensor.data_type == TensorProto.FLOAT16
        length = {e.key: int(e.value) for e in tensor.external_data if e.key != "location"}["length"]
        original = {e.key: e.value for e in originals[tensor.name].external_data}["length"]
        assert 2 * length == int(original)
    assert any(n.node == "weights" and "values absent" in n.change for n in result.notes)
    assert not result.model.graph.value_info or all(vi.name not in originals for vi in result.model.graph.value_info)


@pytest.mark.ort
def test_unet_end_to_end_keeps_resize_scales_in_float32() -> None:
    model = model_zoo.build("unet", size=32, weights=True)
    result = fp16(model, keep_io_types=True)
    check_model(result.model)
    graph = result.model.graph
    producers = {out: n for n in graph.node for out in n.output}
    resizes = [n for n in graph.node if n.op_type == "Resize"]
    assert resizes
    for resize in resizes:
        cast = producers[resize.input[2]]
        assert (cast.op_type, cast.attribute[0].i) == ("Cast", TensorProto.FLOAT)
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    y16, y32 = run(result.model, {"input": x}), run(model, {"input": x})
    assert y16.shape == y32.shape
    assert np.abs(y16 - y32).max() < 1e-2  # sigmoid outputs in (0, 1), a deeper net than conv_net
