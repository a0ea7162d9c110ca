"""The depthwise-separable pass: which Convs it converts, the weights it computes, what it costs, what it refuses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import ModelProto, TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.passes import Refused
from onnxroof.passes.separable import factorize, separable
from onnxroof.passes.weights import is_absent
from tests.helpers import IR_VERSION, model_flops

RNG_SEED = 0


def conv_model(
    weight: np.ndarray | None,
    hw: int,
    *,
    bias: np.ndarray | None = None,
    dims: Sequence[int] | None = None,
    dtype: int = TensorProto.FLOAT,
    weight_as_input: bool = False,
    opset: int = 17,
    **attrs: Any,
) -> ModelProto:
    """x -> Conv "conv" (weight "w", optional bias "b") -> Relu -> y. ``weight`` None makes "w" absent (shapes
    only, ``dims``); ``weight_as_input`` makes "w" a graph input instead of an initializer."""
    dims = list(weight.shape) if weight is not None else list(dims or ())
    group = int(attrs.get("group", 1))
    c_in = dims[1] * group
    inits: list[TensorProto] = []
    inputs = [helper.make_tensor_value_info("x", dtype, [1, c_in, hw, hw])]
    if weight_as_input:
        inputs.append(helper.make_tensor_value_info("w", dtype, dims))
    elif weight is None:
        proto = TensorProto(name="w", data_type=dtype, dims=dims, data_location=TensorProto.EXTERNAL)
        for key, value in (("location", "#absent"), ("offset", "0"), ("length", str(int(np.prod(dims)) * 4))):
            entry = proto.external_data.add()
            entry.key, entry.value = key, value
        inits.append(proto)
    else:
        inits.append(numpy_helper.from_array(weight, "w"))
    conv_inputs = ["x", "w"]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
        conv_inputs.append("b")
    nodes = [
        helper.make_node("Conv", conv_inputs, ["c"], name="conv", **attrs),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", dtype, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    return onnx.shape_inference.infer_shapes(model)


def run(model: ModelProto, x: np.ndarray) -> np.ndarray:
    """The first output of ``model`` on input ``x`` (named "x", or "input" for the zoo) with onnxruntime's CPU
    provider."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {session.get_inputs()[0].name: x})[0])


def rewrite(model: ModelProto, nodes: Sequence[str] | None = None) -> Any:
    """separable(), checking that the input's bytes are the same afterwards and the result passes the full check."""
    before = model.SerializeToString()
    result = separable(model, nodes)
    assert model.SerializeToString() == before
    onnx.checker.check_model(result.model, full_check=True)
    return result


def initializer(model: ModelProto, name: str) -> TensorProto:
    return next(t for t in model.graph.initializer if t.name == name)


def attrs_of(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.ort
def test_an_exactly_separable_kernel_gives_the_same_outputs() -> None:
    rng = np.random.default_rng(RNG_SEED)
    c_out, c_in, k = 6, 4, 3
    p = rng.standard_normal((c_out, c_in))
    d = rng.standard_normal((c_in, k, k))
    weight = (p[:, :, None, None] * d[None]).astype(np.float32)  # W[o, c] = p[o, c] * d[c]
    bias = rng.standard_normal(c_out).astype(np.float32)
    attrs = {"strides": [2, 2], "pads": [1, 2, 1, 2], "dilations": [2, 1]}
    model = conv_model(weight, 11, bias=bias, **attrs)

    result = rewrite(model)

    nodes = list(result.model.graph.node)
    assert [n.op_type for n in nodes] == ["Conv", "Conv", "Relu"]
    assert [n.name for n in nodes] == ["conv.depthwise", "conv.pointwise", "relu"]
    depthwise, pointwise = nodes[0], nodes[1]
    assert attrs_of(depthwise) == {"group": c_in, "kernel_shape": [k, k], **attrs}
    assert attrs_of(pointwise) == {"kernel_shape": [1, 1]}
    assert depthwise.input[0] == "x" and list(pointwise.output) == ["c"]
    assert list(pointwise.input) == [depthwise.output[0], pointwise.input[1], "b"]
    assert list(initializer(result.model, depthwise.input[1]).dims) == [c_in, 1, k, k]
    assert list(initializer(result.model, pointwise.input[1]).dims) == [c_out, c_in, 1, 1]
    assert result.changed and not result.graph_only
    [note] = result.notes
    assert note.node == "conv" and note.error is not None and note.error < 1e-6

    x = rng.standard_normal((1, c_in, 11, 11)).astype(np.float32)
    np.testing.assert_allclose(run(result.model, x), run(model, x), rtol=1e-5, atol=1e-5)


@pytest.mark.ort
def test_the_reported_error_and_the_outputs_match_the_best_rank_1_approximation() -> None:
    rng = np.random.default_rng(RNG_SEED + 1)
    weight = rng.standard_normal((5, 3, 3, 2)).astype(np.float32)
    model = conv_model(weight, 8, pads=[1, 0, 1, 1])

    result = rewrite(model)

    # Eckart-Young: the best rank-1 approximation of A_c leaves the singular values after the first, so
    # ||W - W_approx||_F^2 = sum over c of sum_{i >= 2} s_{c,i}^2.
    w64 = weight.astype(np.float64)
    singular = [np.linalg.svd(w64[:, c].reshape(5, 6), compute_uv=False) for c in range(3)]
    expected = np.sqrt(sum(float(np.sum(s[1:] ** 2)) for s in singular)) / np.linalg.norm(w64)
    [note] = result.notes
    assert note.error == pytest.approx(expected, rel=1e-9)
    assert 0 < note.error < 1

    # The rewritten model computes the conv whose weight is the rank-1 approximation, built here channel by channel.
    approx = np.empty_like(w64)
    for c in range(3):
        u, s, vh = np.linalg.svd(w64[:, c].reshape(5, 6))
        approx[:, c] = (s[0] * np.outer(u[:, 0], vh[0])).reshape(5, 3, 2)
    reference = conv_model(approx.astype(np.float32), 8, pads=[1, 0, 1, 1])
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run(result.model, x), run(reference, x), rtol=1e-5, atol=1e-5)


def test_the_singular_value_goes_to_the_pointwise_weights() -> None:
    """Each depthwise kernel has unit norm; the pointwise column carries s."""
    weight = np.random.default_rng(RNG_SEED + 2).standard_normal((4, 3, 3, 3))
    depthwise, pointwise = factorize(weight)
    np.testing.assert_allclose(np.linalg.norm(depthwise.reshape(3, 9), axis=1), 1.0, rtol=1e-12)
    first = [np.linalg.svd(weight[:, c].reshape(4, 9), compute_uv=False)[0] for c in range(3)]
    np.testing.assert_allclose(np.linalg.norm(pointwise.reshape(4, 3), axis=0), first, rtol=1e-12)


def test_the_flops_drop_by_the_ratio_of_paper_000s_table_2() -> None:
    m, n, dk, df = 8, 16, 3, 10  # M = C_in, N = C_out, DK kernel side, DF output side ('same' padding)
    weight = np.random.default_rng(RNG_SEED + 3).standard_normal((n, m, dk, dk)).astype(np.float32)
    model = conv_model(weight, df, pads=[1, 1, 1, 1])
    standard = model_flops(model)
    separated = model_flops(rewrite(model).model)
    relu = n * df * df  # the Relu after the conv, one FLOP per element in both graphs
    # Without a bias the standard conv does M*N*DK^2*DF^2 multiply-accumulates; the depthwise conv does M*DK^2*DF^2
    # (one input channel per output channel) and the pointwise conv M*N*DF^2. Both are 2 FLOPs per MAC, so
    # separable / standard = (M*DK^2*DF^2 + M*N*DF^2) / (M*N*DK^2*DF^2) = 1/N + 1/DK^2 = (DK^2 + N) / (N*DK^2),
    # compared here without rounding.
    assert standard - relu == 2 * m * n * dk * dk * df * df
    assert (separated - relu) * n * dk * dk == (standard - relu) * (dk * dk + n)


@pytest.mark.ort
def test_the_zoo_unet_converts_every_conv_but_the_1x1_head_and_runs() -> None:
    model = model_zoo.build("unet", size=64)
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]

    result = rewrite(model)

    assert [note.node for note in result.notes] == [c for c in convs if c != "head"]
    assert all(note.error is not None and 0 <= note.error < 1 for note in result.notes)
    by_name = {n.name: n for n in result.model.graph.node}
    names = list(by_name)
    for conv in convs[:-1]:
        assert conv not in names
        assert by_name[f"{conv}.pointwise"].input[0] == by_name[f"{conv}.depthwise"].output[0]
    ops = [n.op_type for n in result.model.graph.node if n.op_type != "Constant"]
    assert ops[:6] == ["Conv", "Conv", "Relu", "Conv", "Conv", "Relu"]
    assert ops.count("Conv") == 2 * (len(convs) - 1) + 1
    assert "head" in names and "sigmoid" in names
    assert result.model.ir_version == model.ir_version
    assert list(result.model.opset_import) == list(model.opset_import)
    assert result.model.producer_name == model.producer_name and result.model.doc_string == model.doc_string
    out = run(result.model, np.random.default_rng(RNG_SEED).standard_normal((1, 3, 64, 64)).astype(np.float32))
    assert out.shape == (1, 4, 64, 64)


def test_named_nodes_convert_and_the_others_stay_as_they_are() -> None:
    model = model_zoo.build("unet", size=64)
    result = rewrite(model, ["encoder1.conv2", "decoder0.conv1"])
    assert [note.node for note in result.notes] == ["encoder1.conv2", "decoder0.conv1"]
    kept = {n.name: n for n in result.model.graph.node}
    originals = {n.name: n for n in model.graph.node}
    assert set(originals) - set(kept) == {"encoder1.conv2", "decoder0.conv1"}
    for name in set(originals) - {"encoder1.conv2", "decoder0.conv1"}:
        assert kept[name] == originals[name]


def test_a_graph_only_model_gets_absent_weights_of_the_same_dtype() -> None:
    model = conv_model(None, 8, dims=[6, 4, 3, 3], dtype=TensorProto.FLOAT16, pads=[1, 1, 1, 1])
    result = rewrite(model)
    [note] = result.notes
    assert note.error is None and "absent" in note.change
    assert result.graph_only
    depthwise, pointwise = list(result.model.graph.node)[:2]
    for name, dims in ((depthwise.input[1], [4, 1, 3, 3]), (pointwise.input[1], [6, 4, 1, 1])):
        proto = initializer(result.model, name)
        assert is_absent(proto) and list(proto.dims) == dims and proto.data_type == TensorProto.FLOAT16


def test_the_zoo_unet_without_weights_converts_on_shapes() -> None:
    result = rewrite(model_zoo.build("unet", size=64, weights=False))
    assert len(result.notes) == 18 and all(note.error is None for note in result.notes)


def test_new_names_never_collide_with_existing_ones() -> None:
    weight = np.ones((2, 2, 3, 3), np.float32)
    model = conv_model(weight, 6, pads=[1, 1, 1, 1])
    model.graph.node[1].output[0] = "conv.depthwise"  # a tensor already has the name the pass would choose
    model.graph.output[0].name = "conv.depthwise"
    result = rewrite(model)
    names = [n.name for n in result.model.graph.node]
    assert names[:2] == ["conv.depthwise_1", "conv.pointwise"]
    tensors = [t for n in result.model.graph.node for t in n.output]
    assert len(tensors) == len(set(tensors)) and "conv.depthwise" in tensors


def test_model_metadata_is_kept() -> None:
    model = conv_model(np.ones((2, 2, 3, 3), np.float32), 6, opset=13)
    model.producer_name, model.model_version, model.doc_string = "maker", 7, "a model"
    onnx.helper.set_model_props(model, {"author": "someone"})
    out = rewrite(model).model
    assert (out.producer_name, out.model_version, out.doc_string) == ("maker", 7, "a model")
    assert [(p.key, p.value) for p in out.metadata_props] == [("author", "someone")]
    assert [(o.domain, o.version) for o in out.opset_import] == [("", 13)] and out.ir_version == IR_VERSION


@pytest.mark.parametrize(
    ("weight_shape", "attrs", "reason"),
    [
        ((8, 1, 3, 3), {"group": 8}, "Conv conv has group == C_in: already depthwise"),
        ((8, 2, 3, 3), {"group": 4}, "Conv conv has group 4: grouped convolutions are not separated"),
        ((8, 8, 1, 1), {}, "Conv conv is 1x1: already pointwise"),
    ],
)
def test_an_ineligible_named_conv_is_refused(weight_shape: tuple[int, ...], attrs: dict[str, Any], reason: str) -> None:
    model = conv_model(np.ones(weight_shape, np.float32), 6, **attrs)
    with pytest.raises(Refused) as refused:
        separable(model, ["conv"])
    assert refused.value.message == reason
    with pytest.raises(Refused, match=f"no Conv of the model can be separated: {reason[5:]}"):
        separable(model)


def test_a_weight_that_is_not_an_initializer_is_refused() -> None:
    model = conv_model(np.ones((4, 2, 3, 3), np.float32), 6, weight_as_input=True)
    with pytest.raises(Refused, match=r"^Conv conv weight is not a constant initializer \(hint: "):
        separable(model, ["conv"])


def test_a_1d_conv_is_refused() -> None:
    weight = np.ones((4, 2, 3), np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1d")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    with pytest.raises(Refused, match="Conv conv1d is 1-D: only 2-D convolutions are separated"):
        separable(model, ["conv1d"])


def test_unknown_and_non_conv_names_are_refused() -> None:
    model = model_zoo.build("unet", size=64)
    with pytest.raises(Refused, match=r"no node named encoder0\.conv3 \(did you mean encoder0\.conv[12]"):
        separable(model, ["encoder0.conv3"])
    with pytest.raises(Refused, match=r"^no node named nothing \(hint: "):
        separable(model, ["nothing"])
    with pytest.raises(Refused, match=r"node encoder0\.pool is a MaxPool, not a Conv"):
        separable(model, ["encoder0.conv1", "encoder0.pool"])


def test_a_model_without_a_conv_is_refused() -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    with pytest.raises(Refused, match="the model has no Conv"):
        separable(model)
