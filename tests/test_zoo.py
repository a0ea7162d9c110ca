"""Tests of the model zoo: every model builds, checks, runs in onnxruntime, is deterministic, and has the
parameter count of its reference definition; ``weights=False`` models carry no weight bytes."""

from __future__ import annotations

from math import prod

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

import model_zoo

ALL = model_zoo.names()

# (batch, size) for the build-and-run test: small batches, and a reduced size for the heavy models where the
# architecture allows it (ViT at 32 -> 2x2 patches + class token = 5 tokens; VGG-16 at 32 -> 1x1 feature map,
# which the adaptive pool replicates to 7x7). None keeps the model's default size.
RUN_CASES: dict[str, tuple[int, int | None]] = {
    "alexnet": (2, None),
    "conv2d_kernel": (2, None),
    "lstm_kernel": (2, None),
    "mobilenetv2": (2, None),
    "resnet18": (2, None),
    "resnet34": (1, None),
    "resnet50": (1, None),
    "unet": (2, None),
    "vgg16": (1, 32),
    "vit_b_16": (1, 32),
}

# Models whose weights=True build is cheap enough to build twice for the byte-identity test; the others
# (61M-138M parameters) are compared with weights=False, and share the seeded-generator code path.
CHEAP = ["conv2d_kernel", "lstm_kernel", "mobilenetv2", "resnet18", "resnet34", "resnet50", "unet"]

# torchvision's published parameter counts (sum of p.numel() over model.parameters()).
TORCHVISION_PARAMS: dict[str, int] = {
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "alexnet": 61_100_840,
    "mobilenetv2": 3_504_872,
    "vit_b_16": 86_567_656,
}


def param_count(model: onnx.ModelProto) -> int:
    """Elements of the float initializers, as torchvision counts parameters.

    BatchNormalization inputs 3 and 4 (running mean and running variance) are excluded: in torchvision they
    are buffers, not parameters, while BN weight and bias (inputs 1 and 2) are parameters. int64 tensors
    (shapes, indices) are never parameters; the zoo keeps those in Constant nodes anyway.
    """
    bn_stats = {n.input[i] for n in model.graph.node if n.op_type == "BatchNormalization" for i in (3, 4)}
    return sum(
        prod(t.dims) for t in model.graph.initializer if t.data_type == TensorProto.FLOAT and t.name not in bn_stats
    )


def input_shape(model: onnx.ModelProto) -> list[int]:
    (inp,) = model.graph.input
    assert inp.name == "input"
    return [d.dim_value for d in inp.type.tensor_type.shape.dim]


def expected_output_shape(name: str, batch: int, size: int | None) -> tuple[int, ...]:
    if name == "unet":
        return (batch, 4, size or 128, size or 128)
    if name == "conv2d_kernel":
        side = ((size or 112) + 2 - 3) // 2 + 1
        return (batch, 64, side, side)
    if name == "lstm_kernel":
        return (size or 16, 1, batch, 16)
    return (batch, 1000)


def run(model: onnx.ModelProto) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(input_shape(model)).astype(np.float32)
    return session.run(None, {"input": x})


def unet_params(base: int = 32, classes: int = 4, in_channels: int = 3, depth: int = 4) -> int:
    """Closed form: sum over convs of k*k*cin*cout + cout. A block is two 3x3 convs (cin->c, c->c); encoder
    level l has c = base*2^l; the bottleneck has base*2^depth; decoder level l takes the upsampled deeper
    features concatenated with the skip (c_deeper + base*2^l) down to base*2^l; the head is a 1x1 conv."""

    def block(cin: int, cout: int) -> int:
        return 9 * cin * cout + cout + 9 * cout * cout + cout

    total, c = 0, in_channels
    for level in range(depth):
        total += block(c, base * 2**level)
        c = base * 2**level
    total += block(c, base * 2**depth)
    c = base * 2**depth
    for level in reversed(range(depth)):
        total += block(c + base * 2**level, base * 2**level)
        c = base * 2**level
    return total + c * classes + classes


# -- registry ----------------------------------------------------------------------------------------------


def test_names_are_sorted_once_each_and_all_run_here() -> None:
    assert sorted(set(ALL)) == ALL
    assert set(RUN_CASES) == set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_describe_is_one_line(name: str) -> None:
    text = model_zoo.describe(name)
    assert text.startswith(f"{name}: ") and "\n" not in text


def test_unknown_name_raises_key_error() -> None:
    with pytest.raises(KeyError):
        model_zoo.build("resnet19")
    with pytest.raises(KeyError):
        model_zoo.describe("resnet19")


def test_unknown_keyword_raises_type_error() -> None:
    with pytest.raises(TypeError):
        model_zoo.build("resnet18", weights=False, depth=3)


# -- full models ---------------------------------------------------------------------------------------------


@pytest.mark.ort
@pytest.mark.parametrize("name", ALL)
def test_builds_checks_and_runs(name: str) -> None:
    batch, size = RUN_CASES[name]
    model = model_zoo.build(name, batch=batch, size=size)
    assert model.opset_import[0].version == 17 and model.ir_version == 8
    onnx.checker.check_model(model, full_check=True)
    outputs = run(model)
    assert model.graph.output[0].name == "output"
    assert outputs[0].shape == expected_output_shape(name, batch, size)
    assert all(np.isfinite(o).all() for o in outputs)
    # The dims-only model has the same parameters.
    assert param_count(model) == param_count(model_zoo.build(name, batch=batch, size=size, weights=False))


@pytest.mark.parametrize("name", ALL)
def test_without_weights(name: str) -> None:
    model = model_zoo.build(name, weights=False)
    onnx.checker.check_model(model)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    offset = 0
    assert model.graph.initializer
    for t in model.graph.initializer:
        assert t.data_location == TensorProto.EXTERNAL
        for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
            assert not getattr(t, field), (t.name, field)
        entries = {e.key: e.value for e in t.external_data}
        assert entries["location"] == f"#{name}.weights.data"
        assert int(entries["offset"]) == offset
        assert int(entries["length"]) == prod(t.dims) * 4
        offset += int(entries["length"])
    # Every node output gets a fully static shape from shape inference, so analysis needs no weights.
    shapes = {v.name: v.type.tensor_type.shape for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for node in inferred.graph.node:
        for out in node.output:
            assert out in shapes and all(d.HasField("dim_value") for d in shapes[out].dim), (node.name, out)


@pytest.mark.parametrize("name", ALL)
def test_deterministic(name: str) -> None:
    a = model_zoo.build(name, weights=False).SerializeToString()
    assert a == model_zoo.build(name, weights=False).SerializeToString()
    if name in CHEAP:
        batch, size = RUN_CASES[name]
        a = model_zoo.build(name, batch=batch, size=size).SerializeToString()
        assert a == model_zoo.build(name, batch=batch, size=size).SerializeToString()


@pytest.mark.parametrize("name", sorted(TORCHVISION_PARAMS))
def test_parameter_count_matches_torchvision(name: str) -> None:
    assert param_count(model_zoo.build(name, weights=False)) == TORCHVISION_PARAMS[name]


def test_unet_parameter_count() -> None:
    # Defaults: encoder 10,144 + 55,424 + 221,440 + 885,248; bottleneck 3,539,968;
    # decoder 2,359,808 + 590,080 + 147,584 + 36,928; head 32*4 + 4 = 132.
    assert unet_params() == 7_846_756
    assert param_count(model_zoo.build("unet", weights=False)) == 7_846_756


def test_kernel_parameter_counts() -> None:
    assert param_count(model_zoo.build("conv2d_kernel", weights=False)) == 64 * 64 * 3 * 3
    # W [1, 64, 32] + R [1, 64, 16] + B [1, 128]
    assert param_count(model_zoo.build("lstm_kernel", weights=False)) == 64 * 32 + 64 * 16 + 128


# -- shapes and options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "default_shape"),
    [
        ("alexnet", [1, 3, 224, 224]),
        ("conv2d_kernel", [16, 64, 112, 112]),
        ("lstm_kernel", [16, 16, 32]),
        ("mobilenetv2", [1, 3, 224, 224]),
        ("resnet18", [1, 3, 224, 224]),
        ("resnet34", [1, 3, 224, 224]),
        ("resnet50", [1, 3, 224, 224]),
        ("unet", [1, 3, 128, 128]),
        ("vgg16", [1, 3, 224, 224]),
        ("vit_b_16", [1, 3, 224, 224]),
    ],
)
def test_batch_and_size_change_the_input_shape(name: str, default_shape: list[int]) -> None:
    assert input_shape(model_zoo.build(name, weights=False)) == default_shape
    size = {"vgg16": 448, "alexnet": 63, "lstm_kernel": 8}.get(name, 64)
    model = model_zoo.build(name, batch=3, size=size, weights=False)
    if name == "lstm_kernel":
        assert input_shape(model) == [size, 3, 32]
    else:
        assert input_shape(model) == [3, default_shape[1], size, size]
    onnx.checker.check_model(model)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    out = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    assert tuple(out) == expected_output_shape(name, 3, size)


def test_vit_size_must_be_a_multiple_of_16() -> None:
    with pytest.raises(ValueError):
        model_zoo.build("vit_b_16", size=200, weights=False)
    model = model_zoo.build("vit_b_16", size=32, weights=False)
    pos = next(t for t in model.graph.initializer if t.name == "encoder.pos_embedding")
    assert list(pos.dims) == [1, 5, 768]


def test_adaptive_pool_forms() -> None:
    ops = {n.op_type for n in model_zoo.build("vgg16", weights=False).graph.node}
    assert "AveragePool" not in ops and "Resize" not in ops  # identity at 224
    ops = {n.op_type for n in model_zoo.build("vgg16", size=448, weights=False).graph.node}
    assert "AveragePool" in ops  # 14x14 -> 7x7
    ops = {n.op_type for n in model_zoo.build("alexnet", size=63, weights=False).graph.node}
    assert "Resize" in ops  # 1x1 -> 6x6
    with pytest.raises(ValueError):
        model_zoo.build("vgg16", size=256, weights=False)  # 8x8 -> 7x7 has no exact single-op form


@pytest.mark.ort
def test_unet_options() -> None:
    model = model_zoo.build("unet", batch=1, size=32, base_filters=8, classes=2, in_channels=1, depth=3)
    onnx.checker.check_model(model, full_check=True)
    (out,) = run(model)
    assert out.shape == (1, 2, 32, 32) and np.all((out >= 0) & (out <= 1))
    assert param_count(model) == unet_params(8, 2, 1, 3)
    with pytest.raises(ValueError):
        model_zoo.build("unet", size=100, weights=False)  # not divisible by 2**4


def test_unet_structure() -> None:
    ops = [n.op_type for n in model_zoo.build("unet", weights=False).graph.node]
    assert ops.count("Conv") == 2 * 9 + 1 and ops.count("Relu") == 2 * 9
    assert ops.count("MaxPool") == 4 and ops.count("Resize") == 4 and ops.count("Concat") == 4
    assert ops[-1] == "Sigmoid"


@pytest.mark.ort
def test_lstm_options() -> None:
    model = model_zoo.build("lstm_kernel", batch=4, seq_len=8, features=10, hidden=5)
    onnx.checker.check_model(model, full_check=True)
    y, h, c = run(model)
    assert input_shape(model) == [8, 4, 10]
    assert y.shape == (8, 1, 4, 5) and h.shape == (1, 4, 5) and c.shape == (1, 4, 5)
    np.testing.assert_allclose(y[-1, 0], h[0], rtol=1e-6)
    with pytest.raises(ValueError):
        model_zoo.build("lstm_kernel", size=8, seq_len=16)


def test_conv2d_kernel_is_one_conv() -> None:
    model = model_zoo.build("conv2d_kernel", weights=False)
    (node,) = model.graph.node
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert node.op_type == "Conv" and len(node.input) == 2
    assert attrs["strides"] == [2, 2] and attrs["pads"] == [1, 1, 1, 1] and attrs["kernel_shape"] == [3, 3]
    assert list(model.graph.initializer[0].dims) == [64, 64, 3, 3]


def test_resnet50_is_v1_5() -> None:
    model = model_zoo.build("resnet50", weights=False)
    strides = {
        n.name: onnx.helper.get_attribute_value(next(a for a in n.attribute if a.name == "strides"))
        for n in model.graph.node
        if n.op_type == "Conv"
    }
    assert strides["layer2.0.conv1"] == [1, 1] and strides["layer2.0.conv2"] == [2, 2]
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert all(len(n.input) == 2 for n in convs)  # no conv bias
    assert sum(n.op_type == "BatchNormalization" for n in model.graph.node) == len(convs)


def test_mobilenetv2_relu6_is_clip_with_inputs() -> None:
    model = model_zoo.build("mobilenetv2", weights=False)
    clips = [n for n in model.graph.node if n.op_type == "Clip"]
    assert len(clips) == 35 and all(len(n.input) == 3 and not n.attribute for n in clips)
