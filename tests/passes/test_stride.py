"""The stride pass and the LWU-Net preset: the strides they set, the repairs they make, what they refuse."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import ModelProto, TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.passes import Refused, RewriteResult
from onnxroof.passes.stride import lwu, stride
from tests.helpers import IR_VERSION, model_flops

FLOAT = TensorProto.FLOAT


def model_of(
    nodes: Sequence[onnx.NodeProto],
    x_shape: Sequence[int],
    out_shape: Sequence[int] | None,
    weights: dict[str, np.ndarray],
) -> ModelProto:
    """A model of ``nodes`` from input "x" to output "y" (declared ``out_shape``) with ``weights`` as initializers."""
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info("x", FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", FLOAT, None if out_shape is None else list(out_shape))],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def kernel(c_out: int, c_in: int, k: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((c_out, c_in, k, k)).astype(np.float32)


def run(model: ModelProto, x: np.ndarray) -> np.ndarray:
    """The first output of ``model`` on ``x`` with onnxruntime's CPU provider."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {session.get_inputs()[0].name: x})[0])


def checked(result: RewriteResult, model: ModelProto, before: bytes) -> ModelProto:
    """The rewritten model, after checking that the input's bytes did not change and the result passes the full
    check."""
    assert model.SerializeToString() == before
    onnx.checker.check_model(result.model, full_check=True)
    return result.model


def ops(model: ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node if n.op_type != "Constant"]


def attrs_of(model: ModelProto, name: str) -> dict[str, Any]:
    node = next(n for n in model.graph.node if n.name == name)
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def declared_shape(model: ModelProto, index: int = 0) -> list[int]:
    return [d.dim_value for d in model.graph.output[index].type.tensor_type.shape.dim]


def residual(join: str = "Add", size: int = 8) -> ModelProto:
    """x -> Conv "main" (3x3, pad 1) and Conv "side" (1x1) -> join -> y, 4 channels, ``size`` x ``size``."""
    nodes = [
        helper.make_node("Conv", ["x", "wa"], ["a"], name="main", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "wb"], ["b"], name="side"),
        helper.make_node(join, ["a", "b"], ["y"], name="join", **({"axis": 1} if join == "Concat" else {})),
    ]
    channels = 8 if join == "Concat" else 4
    weights = {"wa": kernel(4, 4, 3, 1), "wb": kernel(4, 4, 1, 2)}
    return model_of(nodes, [1, 4, size, size], [1, channels, size, size], weights)


@pytest.mark.ort
def test_a_join_gets_a_nearest_resize_on_its_smaller_input() -> None:
    model = residual("Add")
    before = model.SerializeToString()
    result = stride(model, {"main": 2})
    out = checked(result, model, before)

    assert sorted(ops(out)) == ["Add", "Conv", "Conv", "Resize"]
    resize = next(n for n in out.graph.node if n.op_type == "Resize")
    add = next(n for n in out.graph.node if n.op_type == "Add")
    assert resize.name == "join.upsample" and resize.input[0] == "a" and list(add.input) == [resize.output[0], "b"]
    scales = next(t for t in out.graph.initializer if t.name == resize.input[2])
    assert numpy_helper.to_array(scales).tolist() == [1, 1, 2, 2]
    assert attrs_of(out, "join.upsample")["mode"] == b"nearest"
    assert attrs_of(out, "main")["strides"] == [2, 2]
    assert [n.node for n in result.notes] == ["main", "join"]
    assert "input 'a' is 1x4x4x4" in result.notes[1].change and "upsampled 2x2" in result.notes[1].change
    assert declared_shape(out) == [1, 4, 8, 8] and result.changed

    # The repaired model adds the strided conv's output, each element repeated over a 2x2 block, to the side conv.
    x = np.random.default_rng(3).standard_normal((1, 4, 8, 8)).astype(np.float32)
    strided = model_of(
        [helper.make_node("Conv", ["x", "wa"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
        [1, 4, 8, 8],
        None,
        {"wa": kernel(4, 4, 3, 1)},
    )
    side = model_of([helper.make_node("Conv", ["x", "wb"], ["y"])], [1, 4, 8, 8], None, {"wb": kernel(4, 4, 1, 2)})
    expected = run(strided, x).repeat(2, axis=2).repeat(2, axis=3) + run(side, x)
    np.testing.assert_allclose(run(out, x), expected, rtol=1e-5, atol=1e-5)


def test_a_concat_with_a_non_integer_ratio_is_refused() -> None:
    model = residual("Concat", size=9)  # a stride-2 3x3 conv with pad 1 makes 9x9 into 5x5
    with pytest.raises(Refused, match=r"Concat join joins inputs of 1x4x9x9 and 1x4x5x5: 9/5 on axis 2"):
        stride(model, {"main": 2})


@pytest.mark.ort
def test_an_input_that_broadcasts_is_left_alone() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["c", "scale"], ["y"], name="scale"),
    ]
    weights = {"w": kernel(4, 2, 3), "scale": np.full((1, 4, 1, 1), 2.0, np.float32)}
    model = model_of(nodes, [1, 2, 8, 8], [1, 4, 8, 8], weights)
    before = model.SerializeToString()
    result = stride(model, {"conv": 2})
    out = checked(result, model, before)
    assert ops(out) == ["Conv", "Mul"]
    assert [str(n) for n in result.notes] == [
        "conv: stride 1x1 -> 2",
        "y: output 'y' is now 1x4x4x4, was 1x4x8x8",
    ]
    assert declared_shape(out) == [1, 4, 4, 4]
    assert run(out, np.ones((1, 2, 8, 8), np.float32)).shape == (1, 4, 4, 4)


def test_a_node_that_would_get_no_size_is_refused() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "wa"], ["a"], name="first", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["a", "wb"], ["y"], name="second"),  # 3x3, no padding: needs 3x3 or more
    ]
    model = model_of(nodes, [1, 2, 4, 4], [1, 2, 2, 2], {"wa": kernel(2, 2, 3), "wb": kernel(2, 2, 3)})
    # first with stride 4: (4 + 2 - 3) // 4 + 1 = 1; second on 1x1: (1 - 3) // 1 + 1 = -1.
    with pytest.raises(Refused, match=r"Conv second would get an output of 1x2x-1x-1: a size of 0 or less"):
        stride(model, {"first": 4})


def test_a_reshape_whose_fixed_target_no_longer_fits_is_refused() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "target"], ["y"], name="reshape"),
    ]
    weights = {"w": kernel(2, 2, 3)}
    model = model_of(nodes, [1, 2, 8, 8], [1, 128], weights)
    model.graph.initializer.append(numpy_helper.from_array(np.array([1, 128], np.int64), "target"))
    with pytest.raises(Refused, match=r"Reshape reshape has the fixed target \[1, 128\], .* 1x2x4x4 \(32 elements\)"):
        stride(model, {"conv": 2})


def test_a_flatten_whose_output_changes_is_refused() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Flatten", ["c"], ["y"], name="flatten"),
    ]
    model = model_of(nodes, [1, 2, 8, 8], [1, 128], {"w": kernel(2, 2, 3)})
    with pytest.raises(Refused, match=r"Flatten flatten now gives 1x32, was 1x128"):
        stride(model, {"conv": 2})


def test_what_stride_refuses() -> None:
    model = residual("Add")
    with pytest.raises(Refused, match=r"no node named mian \(did you mean main\?\)"):
        stride(model, {"mian": 2})
    with pytest.raises(Refused, match=r"node join is a Add, not a Conv"):
        stride(model, {"join": 2})
    with pytest.raises(Refused, match=r"stride 0 for Conv main: a stride is an integer of at least 1"):
        stride(model, {"main": 0})
    with pytest.raises(Refused, match=r"Conv main already has stride 1: nothing to change"):
        stride(model, {"main": 1})


def test_an_empty_mapping_changes_nothing() -> None:
    model = residual("Add")
    result = stride(model, {})
    assert not result.changed and result.model is model and result.notes == ()


def encoder_sizes(size: int, depth: int = 4, base: int = 32) -> list[tuple[int, int]]:
    """(channels, spatial side) of each encoder level of the zoo U-Net."""
    return [(base * 2**level, size // 2**level) for level in range(depth)]


@pytest.mark.ort
def test_lwu_rewrites_the_zoo_unet() -> None:
    model = model_zoo.build("unet", size=64)
    before = model.SerializeToString()
    result = lwu(model)
    out = checked(result, model, before)

    for level in range(4):
        assert attrs_of(out, f"encoder{level}.conv2")["strides"] == [2, 2]
        assert attrs_of(out, f"encoder{level}.conv1")["strides"] == [1, 1]
    assert "MaxPool" not in ops(out)
    assert ops(out).count("Resize") == 8  # the 4 decoder upsamplings and one per skip connection
    concat_inputs = {n.name: list(n.input) for n in out.graph.node if n.op_type == "Concat"}
    by_output = {o: n for n in out.graph.node for o in n.output}
    for level in range(4):
        skip = by_output[concat_inputs[f"decoder{level}.concat"][1]]
        assert skip.op_type == "Resize" and skip.input[0] == f"encoder{level}.relu2"
    # The pool is gone: each block's output feeds the next level's first conv directly, and the skip's Resize.
    consumers = {i: [n for n in out.graph.node if i in n.input] for i in by_output}
    for level, following in enumerate(["encoder1.conv1", "encoder2.conv1", "encoder3.conv1", "bottleneck.conv1"]):
        chain = [by_output[by_output[f"encoder{level}.relu2"].input[0]], by_output[f"encoder{level}.relu2"]]
        assert [n.name for n in chain] == [f"encoder{level}.conv2", f"encoder{level}.relu2"]
        after = sorted((n.op_type, n.name) for n in consumers[f"encoder{level}.relu2"])
        assert after == [("Conv", following), ("Resize", f"decoder{level}.concat.upsample")]
    notes = [str(n) for n in result.notes]
    assert sum("stride 1x1 -> 2" in n for n in notes) == 4
    assert sum("MaxPool removed" in n for n in notes) == 4
    assert sum("upsampled 2x2" in n for n in notes) == 4
    assert not any("output 'output'" in n for n in notes)
    assert declared_shape(out) == [1, 4, 64, 64]
    y = run(out, np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32))
    assert y.shape == (1, 4, 64, 64)

    # Per encoder level (C channels, side S), by the counting conventions of onnxroof.costs:
    # - conv2 (3x3, C -> C, bias) costs 2*9*C + 1 FLOPs per output element on C*S^2 elements,
    #   18*C^2*S^2 + C*S^2 in all; with stride 2 it computes (S/2)^2 = S^2/4 of the positions, saving 3/4 of that;
    # - relu2 (1 FLOP per element) now sees a quarter of its C*S^2 elements: saves 3/4 * C*S^2;
    # - the 2x2 MaxPool (one comparison per window element: 4 per output, on C*(S/2)^2 outputs) goes: saves C*S^2;
    # - the nearest Resize on each skip is a copy: 0 FLOPs. Every other node keeps its shapes.
    saved = sum((3 * (18 * c * c * s * s + c * s * s) + 3 * c * s * s) // 4 + c * s * s for c, s in encoder_sizes(64))
    assert model_flops(model) - model_flops(out) == saved


def test_lwu_keeps_the_default_unet_output_at_128() -> None:
    model = model_zoo.build("unet", weights=False)
    result = lwu(model)
    onnx.checker.check_model(result.model, full_check=True)
    assert declared_shape(result.model) == [1, 4, 128, 128] and result.graph_only
    inferred = onnx.shape_inference.infer_shapes(result.model, strict_mode=True)
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [1, 4, 128, 128]


def test_lwu_refuses_a_model_without_unet_encoder_blocks() -> None:
    # Conv -> Relu -> Conv -> Relu -> MaxPool, but nothing else reads the pre-pool tensor: no skip connection.
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    model = model_of(nodes, [1, 2, 8, 8], [1, 2, 4, 4], {"w1": kernel(2, 2, 3), "w2": kernel(2, 2, 3, 1)})
    with pytest.raises(Refused, match=r"no U-Net encoder block found .*: the LWU-Net preset applies to a U-Net"):
        lwu(model)
    with pytest.raises(Refused, match=r"no U-Net encoder block found"):
        lwu(residual("Add"))


def test_a_conflict_the_repairs_do_not_cover_is_refused_with_onnxs_message() -> None:
    # Reshape to [1, -1] still fits, but the Gemm after it holds a weight for 2*8*8 = 128 features, not 32.
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "target"], ["r"], name="reshape"),
        helper.make_node("Gemm", ["r", "fc"], ["y"], name="fc"),
    ]
    weights = {"w": kernel(2, 2, 3), "fc": np.ones((128, 10), np.float32)}
    model = model_of(nodes, [1, 2, 8, 8], [1, 10], weights)
    model.graph.initializer.append(numpy_helper.from_array(np.array([1, -1], np.int64), "target"))
    with pytest.raises(Refused, match=r"the new sizes break the model: .*node name: fc"):
        stride(model, {"conv": 2})
