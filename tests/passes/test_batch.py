"""The batch pass: inputs, the constants that hard-code the batch, declared shapes, refusals, and the input proto
left as it was."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.passes import Refused, check_model
from onnxroof.passes.batch import batch
from tests.helpers import IR_VERSION, LIGHT_DIR

LIGHT_RESNET50 = LIGHT_DIR / "light_resnet50.onnx"


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def flatten_model(batch_dim: int | str = 1, target_value: tuple[int, ...] = (1, 6)) -> onnx.ModelProto:
    """x [b, 2, 3] -> Reshape to a constant target ([1, 6]: it hard-codes batch 1) -> Relu."""
    target = numpy_helper.from_array(np.array(target_value, np.int64), "target")
    nodes = [helper.make_node("Reshape", ["x", "target"], ["r"], name="flat"), helper.make_node("Relu", ["r"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "flat",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])],
        [target],
        value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 6])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def dims(vi: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def target_of(model: onnx.ModelProto, node_name: str) -> list[int]:
    node = next(n for n in model.graph.node if n.name == node_name)
    name = node.input[1]
    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init).tolist()
    const = next(n for n in model.graph.node if n.op_type == "Constant" and n.output[0] == name)
    return numpy_helper.to_array(const.attribute[0].t).tolist()


@pytest.mark.ort
def test_naive_change_breaks_and_the_pass_repairs_the_reshape() -> None:
    model = flatten_model()
    before = model.SerializeToString()
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 2, 3) - 10
    naive = flatten_model(4)
    del naive.graph.value_info[:]
    naive.graph.output[0].type.tensor_type.ClearField("shape")
    with pytest.raises(Exception, match=r"(?i)reshape"):
        run(naive, {"x": x})

    result = batch(model, 4)
    assert model.SerializeToString() == before
    assert result.changed
    check_model(result.model)
    assert dims(result.model.graph.input[0]) == [4, 2, 3]
    assert target_of(result.model, "flat") == [4, 6]
    assert dims(result.model.graph.output[0]) == [4, 6]
    assert dims(result.model.graph.value_info[0]) == [4, 6]
    (y,) = run(result.model, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x.reshape(4, 6), 0))
    assert {note.node for note in result.notes} == {"x", "flat", "y", "value_info"}


@pytest.mark.ort
def test_symbolic_batch_becomes_n() -> None:
    model = flatten_model("N", (-1, 6))
    result = batch(model, 3)
    check_model(result.model)
    assert dims(result.model.graph.input[0]) == [3, 2, 3]
    assert target_of(result.model, "flat") == [-1, 6]  # the -1 takes the batch: nothing to repair
    assert dims(result.model.graph.output[0]) == [3, 6]
    x = np.ones((3, 2, 3), np.float32)
    assert run(result.model, {"x": x})[0].shape == (3, 6)


def test_symbolic_batch_with_a_hard_coded_target_is_refused() -> None:
    with pytest.raises(Refused, match=r"Reshape flat: its constant target \[1, 6\] folds the batch"):
        batch(flatten_model("N"), 3)


@pytest.mark.ort
def test_batch_merged_into_the_next_dim_is_repaired() -> None:
    """x [1, 2, 3] -> target [2, 3]: the batch merges with the 2 (runs [1, 2] -> [2], [3] -> [3]), so at batch 2
    the entry of that run is 2*2 = 4."""
    model = flatten_model()
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array([2, 3], np.int64), "target"))
    del model.graph.value_info[:]
    result = batch(model, 2)
    check_model(result.model)
    assert target_of(result.model, "flat") == [4, 3]
    x = np.arange(2 * 6, dtype=np.float32).reshape(2, 2, 3) - 5
    np.testing.assert_array_equal(run(result.model, {"x": x})[0], np.maximum(x.reshape(4, 3), 0))


def test_a_batch_run_split_over_two_entries_is_refused() -> None:
    """x [1, 2, 3] -> target [3, 2]: one run holds the batch, the 2 and the 3, and the target splits it over two
    entries; at batch 2 it could be [6, 2] or [3, 4]."""
    model = flatten_model()
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array([3, 2], np.int64), "target"))
    del model.graph.value_info[:]
    with pytest.raises(Refused, match=r"Reshape flat: its constant target \[3, 2\] folds the batch"):
        batch(model, 2)


def dynamo_linear(seq: int = 4, hidden: int = 6, out: int = 5) -> onnx.ModelProto:
    """A Linear on a [1, seq, hidden] input as the dynamo exporter writes it, with value_info for every value:
    Reshape to [seq, hidden] (batch*seq merged), MatMul by [hidden, out], Reshape back to [1, seq, out]."""
    weight = np.arange(hidden * out, dtype=np.float32).reshape(hidden, out) / 10
    inits = [
        numpy_helper.from_array(np.array([seq, hidden], np.int64), "merged"),
        numpy_helper.from_array(np.array([1, seq, out], np.int64), "unmerged"),
        numpy_helper.from_array(weight, "w"),
    ]
    nodes = [
        helper.make_node("Reshape", ["x", "merged"], ["m"], name="view"),
        helper.make_node("MatMul", ["m", "w"], ["p"], name="mm"),
        helper.make_node("Reshape", ["p", "unmerged"], ["y"], name="view_1"),
    ]
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, out])],
        inits,
        value_info=[
            helper.make_tensor_value_info("m", TensorProto.FLOAT, [seq, hidden]),
            helper.make_tensor_value_info("p", TensorProto.FLOAT, [seq, out]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=IR_VERSION)


@pytest.mark.ort
def test_a_dynamo_linear_follows_the_batch() -> None:
    result = batch(dynamo_linear(), 3)
    check_model(result.model)
    # view: [seq, hidden] = [4, 6] merges the batch with seq: [3*4, 6]; view_1: [1, 4, 5] leads with the batch.
    assert target_of(result.model, "view") == [12, 6]
    assert target_of(result.model, "view_1") == [3, 4, 5]
    assert {dims(vi)[0] for vi in result.model.graph.value_info} == {12}
    x = np.arange(3 * 4 * 6, dtype=np.float32).reshape(3, 4, 6) / 7
    w = numpy_helper.to_array(next(i for i in result.model.graph.initializer if i.name == "w"))
    np.testing.assert_allclose(run(result.model, {"x": x})[0], x @ w, rtol=1e-6)


def test_refusals_of_bad_arguments_and_inputs() -> None:
    with pytest.raises(Refused, match="at least 1"):
        batch(flatten_model(), 0)
    scalar = flatten_model()
    scalar.graph.input.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, []))
    with pytest.raises(Refused, match="input s is a scalar"):
        batch(scalar, 2)
    two = flatten_model()
    two.graph.input.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 5]))
    with pytest.raises(Refused, match=r"disagree on the batch.*x \(1\).*z \(2\)"):
        batch(two, 2)


def test_same_batch_is_unchanged() -> None:
    model = flatten_model()
    result = batch(model, 1)
    assert not result.changed and result.model is model


@pytest.mark.ort
@pytest.mark.skipif(not LIGHT_RESNET50.exists(), reason="this onnx package has no bundled light_resnet50.onnx")
def test_light_resnet50_runs_at_batch_8() -> None:
    model = onnx.load(str(LIGHT_RESNET50))
    before = model.SerializeToString()
    result = batch(model, 8)
    assert model.SerializeToString() == before
    check_model(result.model)
    assert [n.op_type for n in result.model.graph.node] == [n.op_type for n in model.graph.node]
    assert target_of(result.model, "n173") == [8, 2048]
    feeds = {"gpu_0/data_0": np.zeros((8, 3, 224, 224), np.float32)}
    (y,) = run(result.model, feeds)
    assert y.shape == (8, 1000)


@pytest.mark.parametrize("name", ["resnet50", "mobilenetv2", "unet", "vit_b_16"])
def test_zoo_models_at_batch_4(name: str) -> None:
    model = model_zoo.build(name, weights=False)
    before = model.SerializeToString()
    result = batch(model, 4)
    assert model.SerializeToString() == before
    assert result.graph_only
    check_model(result.model)
    assert dims(result.model.graph.input[0])[0] == 4
    assert dims(result.model.graph.output[0])[0] == 4
    assert dims(result.model.graph.output[0])[1:] == dims(model.graph.output[0])[1:]


def test_vit_reshapes_and_class_token_follow_the_batch() -> None:
    model = model_zoo.build("vit_b_16", weights=False)
    result = batch(model, 4)
    changed = {note.node for note in result.notes}
    assert "class_token_expand" in changed and "patches" in changed
    reshapes = [n.name for n in model.graph.node if n.op_type == "Reshape"]
    assert set(reshapes) <= changed
    for name in reshapes:
        assert target_of(result.model, name)[0] == 4
    assert target_of(model, "patches")[0] == 1  # the input's shared constants are untouched
