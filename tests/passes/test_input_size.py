"""The input-size pass: whole-input pools, Reshape targets and Resize sizes at a new size, refusals by node, and
the input proto left as it was."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.passes import Refused, check_model
from onnxroof.passes.input_size import input_size
from tests.helpers import IR_VERSION, LIGHT_DIR

LIGHT_RESNET50 = LIGHT_DIR / "light_resnet50.onnx"


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def dims(vi: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def head_model(size: int = 4) -> onnx.ModelProto:
    """x [1, 2, s, s] -> AveragePool over the whole map -> Reshape [1, 2] -> Gemm 2 -> 3."""
    inits = [
        numpy_helper.from_array(np.array([1, 2], np.int64), "target"),
        numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "w"),
    ]
    nodes = [
        helper.make_node("AveragePool", ["x"], ["p"], name="pool", kernel_shape=[size, size]),
        helper.make_node("Reshape", ["p", "target"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "w"], ["y"], name="head", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def flat_head_model() -> onnx.ModelProto:
    """x [1, 2, 4, 4] -> Reshape [1, 32] -> MatMul with a [32, 3] weight: a head with fixed features."""
    inits = [
        numpy_helper.from_array(np.array([1, 32], np.int64), "target"),
        numpy_helper.from_array(np.ones((32, 3), np.float32), "w"),
    ]
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "w"], ["y"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "flat_head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def resize_model(sizes: list[int]) -> onnx.ModelProto:
    """x [1, 1, 4, 6] -> Resize to constant ``sizes`` (nearest)."""
    inits = [numpy_helper.from_array(np.array(sizes, np.int64), "sizes")]
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="up", mode="nearest")
    graph = helper.make_graph(
        [node],
        "resize",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, sizes)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


@pytest.mark.ort
def test_whole_input_pool_becomes_global_and_the_model_runs() -> None:
    model = head_model()
    before = model.SerializeToString()
    naive = head_model()
    for d, v in zip(naive.graph.input[0].type.tensor_type.shape.dim[2:], (6, 6)):
        d.dim_value = v
    with pytest.raises(Exception, match=r"(?i)reshape"):
        run(naive, {"x": np.ones((1, 2, 6, 6), np.float32)})

    result = input_size(model, 6, 6)
    assert model.SerializeToString() == before
    check_model(result.model)
    assert [n.op_type for n in result.model.graph.node] == ["GlobalAveragePool", "Reshape", "Gemm"]
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    (y,) = run(result.model, {"x": x})
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(y, x.mean(axis=(2, 3)) @ w.T, rtol=1e-5)
    assert "pool" in {note.node for note in result.notes}


def test_flatten_into_fixed_head_is_refused_with_both_sizes() -> None:
    with pytest.raises(Refused, match=r"MatMul head: its weight w takes 32 features but the new size gives 72"):
        input_size(flat_head_model(), 6, 6)


@pytest.mark.ort
def test_resize_sizes_scale_with_the_input() -> None:
    model = resize_model([1, 1, 6, 9])  # 4x6 -> 6x9: by 3/2 on both axes
    result = input_size(model, 8, 4)
    check_model(result.model)
    (y,) = run(result.model, {"x": np.ones((1, 1, 8, 4), np.float32)})
    assert y.shape == (1, 1, 8 * 6 // 4, 4 * 9 // 6)
    assert dims(result.model.graph.output[0]) == [1, 1, 12, 6]
    with pytest.raises(Refused, match=r"Resize up: sizes \[1, 1, 6, 9\] scaled by 5/6 on axis 3 is not an integer"):
        input_size(model, 4, 5)


def test_refusals_of_bad_sizes_and_inputs() -> None:
    with pytest.raises(Refused, match="at least 1"):
        input_size(head_model(), 0, 4)
    flat = head_model()
    flat.graph.input[0].type.tensor_type.shape.dim.pop()
    with pytest.raises(Refused, match="no rank-4"):
        input_size(flat, 8, 8)


def test_same_size_is_unchanged() -> None:
    model = head_model()
    result = input_size(model, 4, 4)
    assert not result.changed and result.model is model


@pytest.mark.ort
@pytest.mark.skipif(not LIGHT_RESNET50.exists(), reason="this onnx package has no bundled light_resnet50.onnx")
def test_light_resnet50_runs_at_448() -> None:
    model = onnx.load(str(LIGHT_RESNET50))
    before = model.SerializeToString()
    result = input_size(model, 448, 448)
    assert model.SerializeToString() == before
    check_model(result.model)
    ops = [n.op_type for n in result.model.graph.node]
    assert "AveragePool" not in ops and ops.count("GlobalAveragePool") == 1
    (y,) = run(result.model, {"gpu_0/data_0": np.zeros((1, 3, 448, 448), np.float32)})
    assert y.shape == (1, 1000)


def test_zoo_unet_at_192() -> None:
    model = model_zoo.build("unet", weights=False)
    before = model.SerializeToString()
    result = input_size(model, 192, 192)
    assert model.SerializeToString() == before
    check_model(result.model)
    assert dims(result.model.graph.input[0]) == [1, 3, 192, 192]
    assert dims(result.model.graph.output[0]) == [1, 4, 192, 192]
    assert [n.op_type for n in result.model.graph.node] == [n.op_type for n in model.graph.node]


def test_vit_refuses_sizes_it_cannot_take() -> None:
    model = model_zoo.build("vit_b_16", weights=False)
    with pytest.raises(Refused, match=r"Conv conv_proj: a patch embedding .* multiple of its stride"):
        input_size(model, 200, 200)
    # 448/16 = 28 patches a side: 28*28 + the class token = 785 tokens, where the embedding holds 14*14 + 1 = 197.
    with pytest.raises(
        Refused,
        match=r"Add encoder.add_pos_embedding: its input 'encoder.pos_embedding' \[1, 197, 768\] comes from "
        r"constants alone and fixes dim 1 at 197, the size the model was exported at, where the new shapes give "
        r"785 \('tokens' is \[1, 785, 768\]\)",
    ):
        input_size(model, 448, 448)


def test_zoo_classifier_head_without_pooling_is_refused() -> None:
    with pytest.raises(Refused, match=r"Gemm classifier.0: .* takes 25088 features but the new size gives 100352"):
        input_size(model_zoo.build("vgg16", weights=False), 448, 448)
