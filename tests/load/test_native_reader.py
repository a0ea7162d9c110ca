"""The native graph reader (onnxroof/_wire.c) against the Python reader: the same values from the same graphs.

The extension is compiled here from this checkout's source, so these tests check its C code whether or not an
installed copy was built. They are skipped only where there is no C compiler, and then onnxroof reads graphs
through the Python reader, which every other test uses.
"""

from __future__ import annotations

import importlib.util
import shutil
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.api import analyze
from onnxroof.ir import Tensor
from onnxroof.load import native
from onnxroof.load.lean import typed_inputs_python
from onnxroof.load.read import (
    SMALL_CONSTANT,
    STRIPPED,
    RawInitializer,
    RawNode,
    Serialized,
    drop_weight_bytes,
    read_graph_native,
    read_graph_python,
    value_types,
)

ROOT = Path(__file__).resolve().parents[2]
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) to build the native reader")
    from setuptools import Distribution, Extension

    build = tmp_path_factory.mktemp("native")
    extension = Extension("onnxroof.load._wire", [str(ROOT / "onnxroof" / "load" / "_wire.c")])
    command = Distribution({"name": "onnxroof", "ext_modules": [extension]}).get_command_obj("build_ext")
    command.build_lib, command.build_temp = str(build), str(build / "tmp")
    command.ensure_finalized()
    command.run()  # a compile error fails the tests: the compiler is there
    spec = importlib.util.spec_from_file_location(
        "onnxroof.load._wire", command.get_ext_fullpath("onnxroof.load._wire")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plain(value: Any) -> Any:
    """A value with numpy arrays made comparable with ==."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # the type's name kept: a RawNode must not equal a plain tuple
        return (type(value).__name__, [_plain(v) for v in value])
    return value


def _every_attribute_kind() -> onnx.ModelProto:
    """Nodes with an attribute of each kind the reader decodes or hands back, names it must make up, a Constant,
    repeated attribute names, non-ASCII names and initializers small, large, scalar, typed and external."""
    small = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "small")
    as_floats = helper.make_tensor("as_floats", TensorProto.FLOAT, [3], [0.5, -1.25, 3.0])  # float_data, not raw
    scalar = numpy_helper.from_array(np.array(7.5, dtype=np.float32), "scalar")
    large = numpy_helper.from_array(np.zeros((10, 10), dtype=np.float32), "large")
    external = TensorProto(name="external", data_type=TensorProto.FLOAT16, dims=[4, 4])
    external.data_location = TensorProto.EXTERNAL
    entry = external.external_data.add()
    entry.key, entry.value = "location", "absent.bin"
    branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["b"])],
        "branch",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node(
            "Custom",
            ["x", "", "small"],
            ["y", ""],
            name="näme",
            domain="example.domain",
            i=-3,
            big=2**40,
            f=0.1,
            s="text ü",
            ints=[1, -1, 2**33],
            floats=[1.5, -0.25],
            strings=["a", "ß"],
            t=numpy_helper.from_array(np.array([1, 2], dtype=np.int32)),
            g=branch,
            gs=[branch, branch],
            ts=[numpy_helper.from_array(np.array([3], dtype=np.int8))],
        ),
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones((3, 2), dtype=np.float32))),
        helper.make_node("Constant", [], ["ci"], value_int=4),
        helper.make_node("Constant", [], ["cs"], value_ints=[1, 2]),
        helper.make_node("Relu", ["y"], ["z"]),
        helper.make_node("Relu", ["z"], ["w"], name=""),
        helper.make_node("Cast", ["w"], ["v"], to=TensorProto.FLOAT16),
    ]
    nodes[0].attribute.append(helper.make_attribute("empty_ints", [], attr_type=AttributeProto.INTS))
    repeated = nodes[6].attribute.add()  # a second "to": readers keep the last of a name
    repeated.CopyFrom(helper.make_attribute("to", TensorProto.INT8))
    tensor_then_int = nodes[4].attribute
    tensor_then_int.extend(
        [
            helper.make_attribute("k", numpy_helper.from_array(np.array([1], dtype=np.int64))),
            helper.make_attribute("k", 5),
        ]
    )
    int_then_tensor = nodes[5].attribute
    int_then_tensor.extend(
        [
            helper.make_attribute("k", 5),
            helper.make_attribute("k", numpy_helper.from_array(np.array([9], dtype=np.int64))),
        ]
    )
    graph = helper.make_graph(
        nodes,
        "every kind",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT16, None)],
        [small, as_floats, scalar, large, external],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _models() -> list[tuple[str, onnx.ModelProto]]:
    models = [("every attribute kind", _every_attribute_kind())]
    for name in ("resnet18", "mobilenetv2", "vit_b_16", "lstm_kernel", "unet"):
        models.append((f"zoo:{name}", model_zoo.build(name, weights=name == "lstm_kernel")))
    if LIGHT_DIR.exists():
        models += [(path.name, onnx.load(str(path))) for path in sorted(LIGHT_DIR.glob("*.onnx"))]
    return models


MODELS = _models()


@pytest.mark.parametrize("label,model", MODELS, ids=[label for label, _ in MODELS])
def test_graph_contents_match_the_python_reader(reader: ModuleType, label: str, model: onnx.ModelProto):
    ours, theirs = read_graph_native(model.graph, reader), read_graph_python(model.graph)
    assert _plain(ours.nodes) == _plain(theirs.nodes)
    assert _plain(ours.initializers) == _plain(theirs.initializers)


def test_every_attribute_kind_reads_as_defined(reader: ModuleType):
    """Spot checks of the hand-built graph against the values it was built with (not against either reader)."""
    raw = read_graph_native(_every_attribute_kind().graph, reader)
    custom, constant, constant_int, _, relu, relu_unnamed, cast = raw.nodes
    assert all(type(node) is RawNode for node in raw.nodes)
    assert all(type(init) is RawInitializer for init in raw.initializers)
    name, op_type, domain, inputs, outputs, attrs, constant_type, has_subgraph = custom
    assert (name, op_type, domain, inputs, outputs) == (
        "näme",
        "Custom",
        "example.domain",
        ("x", "", "small"),
        ("y", ""),
    )
    assert attrs["i"] == -3 and attrs["big"] == 2**40 and attrs["ints"] == [1, -1, 2**33] and attrs["empty_ints"] == []
    assert attrs["f"] == pytest.approx(0.1) and attrs["floats"] == [1.5, -0.25]  # both exact in float32
    assert attrs["s"] == "text ü" and attrs["strings"] == ["a", "ß"]
    assert attrs["t"].tolist() == [1, 2] and attrs["g"] == "g" and attrs["gs"] == "gs"
    assert has_subgraph and constant_type is None
    assert constant[6] == (TensorProto.FLOAT, (3, 2)) and constant_int[6] is None
    assert relu[0] == "Relu_4" and relu_unnamed[0] == "Relu_5"  # made-up names carry the node's index
    assert relu[5]["k"] == 5 and relu_unnamed[5]["k"].tolist() == [9]  # the last "k" of each node
    assert cast[5] == {"to": TensorProto.INT8}
    by_name = {name: (dtype, dims, value) for name, dtype, dims, value in raw.initializers}
    assert by_name["small"][2].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert by_name["as_floats"][2].tolist() == [0.5, -1.25, 3.0]
    assert by_name["scalar"][1] == () and by_name["scalar"][2].item() == 7.5
    assert by_name["large"] == (TensorProto.FLOAT, (10, 10), None)  # more than SMALL_CONSTANT elements
    assert by_name["external"] == (TensorProto.FLOAT16, (4, 4), None)


def _typed_graph() -> onnx.GraphProto:
    """Value infos of every shape state: static, scalar, symbolic, unknown dim, zero dim, negative dim, no shape,
    non-tensor;
    an output declared without a shape that value_info has one for; a second input."""
    unknown_dim = helper.make_tensor_value_info("unknown_dim", TensorProto.FLOAT, [2, 3])
    unknown_dim.type.tensor_type.shape.dim[1].Clear()
    value_infos = [
        helper.make_tensor_value_info("static", TensorProto.FLOAT, [1, 3, 300, 70000]),
        helper.make_tensor_value_info("scalar", TensorProto.INT64, []),
        helper.make_tensor_value_info("symbolic", TensorProto.FLOAT16, ["batch", 4]),
        unknown_dim,
        helper.make_tensor_value_info("empty", TensorProto.FLOAT, [0, 5]),
        helper.make_tensor_value_info("negative", TensorProto.FLOAT, [2, -1]),
        helper.make_tensor_value_info("no_shape", TensorProto.BFLOAT16, None),
        helper.make_tensor_sequence_value_info("sequence", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("out", TensorProto.FLOAT, [6]),
    ]
    return helper.make_graph(
        [],
        "types",
        [
            helper.make_tensor_value_info("in0", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("in1", TensorProto.INT8, ["k"]),
        ],
        [
            helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("static", TensorProto.FLOAT, None),
        ],
        value_info=value_infos,
    )


def _inferred(model: onnx.ModelProto) -> onnx.GraphProto:
    return onnx.shape_inference.infer_shapes(model, strict_mode=False).graph


TYPED = [("value infos", _typed_graph())] + [(label, _inferred(model)) for label, model in MODELS[1:]]


@pytest.mark.parametrize("label,graph", TYPED, ids=[label for label, _ in TYPED])
@pytest.mark.parametrize("input_count", [None, 1])
def test_value_types_match_the_python_reader(
    reader: ModuleType, monkeypatch: pytest.MonkeyPatch, label: str, graph: onnx.GraphProto, input_count: int | None
):
    monkeypatch.setattr(native, "reader", None)
    expected = value_types(graph, input_count)
    count = -1 if input_count is None else input_count
    assert reader.value_types(graph.SerializeToString(), count, Tensor) == expected


@pytest.mark.parametrize("label,graph", TYPED[1:], ids=[label for label, _ in TYPED[1:]])
def test_inferred_model_bytes_give_the_python_readers_shapes(
    reader: ModuleType, monkeypatch: pytest.MonkeyPatch, label: str, graph: onnx.GraphProto
):
    # The loader keeps onnx's inference result serialized and reads its value types from the model's bytes.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    monkeypatch.setattr(native, "reader", None)
    expected = value_types(graph, 1)
    monkeypatch.setattr(native, "reader", reader)
    assert Serialized(model.SerializeToString()).value_types(1) == expected


def test_value_types_read_as_defined(reader: ModuleType):
    shapes = reader.value_types(_typed_graph().SerializeToString(), 1, Tensor)
    expected = {
        "in0": (TensorProto.FLOAT, (1,)),  # in1 is past the first input
        "static": (TensorProto.FLOAT, (1, 3, 300, 70000)),  # the output declared without a shape keeps it
        "scalar": (TensorProto.INT64, ()),
        "symbolic": (TensorProto.FLOAT16, None),
        "unknown_dim": (TensorProto.FLOAT, None),
        "empty": (TensorProto.FLOAT, (0, 5)),  # a dim of 0 is a size
        "negative": (TensorProto.FLOAT, None),  # a negative dim is none: the shape is unknown
        "no_shape": (TensorProto.BFLOAT16, None),
        "sequence": (0, None),  # not a tensor type
        "out": (TensorProto.FLOAT, (6,)),
    }
    assert shapes == {name: Tensor(name, dtype, shape, False) for name, (dtype, shape) in expected.items()}
    assert all(type(t) is Tensor for t in shapes.values())


def test_records_are_built_only_as_tuple_types(reader: ModuleType):
    graph = _typed_graph().SerializeToString()
    with pytest.raises(TypeError, match="tuple subclass"):
        reader.value_types(graph, 1, dict)
    with pytest.raises(TypeError, match="tuple subclass"):
        reader.graph_contents(graph, 64, dict, RawInitializer)
    with pytest.raises(TypeError, match="tuple subclass"):
        reader.graph_contents(graph, 64, RawNode, list)


def test_typed_inputs_encode_as_the_python_encoder_does(reader: ModuleType):
    entries = [
        ("w", TensorProto.FLOAT, (256, 256)),
        ("ünï", TensorProto.FLOAT16, ()),
        ("big", TensorProto.INT8, (2**40, 1)),
    ]
    encoded = reader.typed_inputs(entries)
    assert encoded == typed_inputs_python(entries)
    graph = onnx.GraphProto.FromString(encoded)  # the fields of a GraphProto's inputs, and nothing else
    assert [
        (vi.name, vi.type.tensor_type.elem_type, tuple(d.dim_value for d in vi.type.tensor_type.shape.dim))
        for vi in graph.input
    ] == entries
    assert graph.input[1].type.tensor_type.HasField("shape")  # a scalar: a shape with no dims
    assert reader.typed_inputs([]) == b""


def test_packed_repeated_fields_are_read(reader: ModuleType):
    """protobuf writes onnx's repeated numbers unpacked, but parsers must accept them packed too."""
    packed_ints = bytes([0x42, 3, 1, 0x80, 0x01])  # field 8 (ints), wire type 2: varints 1, 128
    packed_floats = bytes([0x3A, 8]) + np.array([0.5, 2.0], dtype="<f4").tobytes()  # field 7 (floats), wire type 2

    def attribute(name: bytes, payload: bytes, kind: int) -> bytes:
        return bytes([0x0A, len(name)]) + name + payload + bytes([0xA0, 0x01, kind])  # name, ..., type (field 20)

    ints, floats = attribute(b"p", packed_ints, 7), attribute(b"q", packed_floats, 6)
    node = (
        bytes([0x22, 1]) + b"N" + bytes([0x2A, len(ints)]) + ints + bytes([0x2A, len(floats)]) + floats
    )  # op_type, 2 attributes
    tensor = bytes([0x0A, 2, 3, 4, 0x10, 1, 0x42, 1]) + b"t"  # dims packed (3, 4), data_type 1, name "t"
    graph = bytes([0x0A, len(node)]) + node + bytes([0x2A, len(tensor)]) + tensor
    nodes, initializers, raw_attributes = reader.graph_contents(graph, 64, RawNode, RawInitializer)
    assert nodes[0][5] == {"p": [1, 128], "q": [0.5, 2.0]} and not raw_attributes
    assert initializers[0][:3] == ("t", TensorProto.FLOAT, (3, 4))


def _varint(value: int) -> bytes:
    out = b""
    while value > 0x7F:
        out += bytes([value & 0x7F | 0x80])
        value >>= 7
    return out + bytes([value])


def _weights_of_every_layout() -> bytes:
    """A serialized model whose initializers are stripped (large raw, large float_data, large int64, dims given
    packed) and kept (small, external, a dim of 0, a negative dim, a scalar), in two graph fields that protobuf
    merges."""
    large_floats = helper.make_tensor("large_floats", TensorProto.FLOAT, [80], [0.5] * 80)  # float_data
    packed = numpy_helper.from_array(np.ones((9, 9), np.float32), "packed")
    zero = TensorProto(name="zero", data_type=TensorProto.FLOAT, dims=[0, 1000])
    negative = TensorProto(name="negative", data_type=TensorProto.FLOAT, dims=[-1, -100], raw_data=b"\0" * 8)
    external = TensorProto(name="external", data_type=TensorProto.FLOAT, dims=[100, 100])
    external.data_location = TensorProto.EXTERNAL
    external.external_data.add().key = "location"
    inits = [
        numpy_helper.from_array(np.arange(200, dtype=np.float32).reshape(10, 20), "large_raw"),
        large_floats,
        numpy_helper.from_array(np.arange(65, dtype=np.int64), "large_int64"),
        packed,
        zero,
        negative,
        external,
        numpy_helper.from_array(np.arange(64, dtype=np.float32), "small"),
        numpy_helper.from_array(np.array(2.0, np.float32), "scalar"),
    ]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], doc_string="kept as it is")
    data = model.SerializeToString()
    # Rewrite the packed tensor's dims as one packed field (protobuf writes them unpacked), then append a second
    # graph field with one more large initializer: a parser merges it into the first.
    unpacked = bytes([0x08, 9, 0x08, 9])  # dims: 9, 9
    assert data.count(unpacked) == 1
    data = data.replace(unpacked, bytes([0x0A, 2, 9, 9]))
    extra = onnx.GraphProto(
        initializer=[numpy_helper.from_array(np.ones(100, np.float16), "extra")]
    ).SerializeToString()
    return data + bytes([0x3A]) + _varint(len(extra)) + extra  # ModelProto.graph again


@pytest.mark.parametrize("label", ["weights of every layout"] + [label for label, _ in MODELS])
def test_stripped_weight_bytes_parse_as_drop_weight_bytes_leaves_them(reader: ModuleType, label: str):
    data = _weights_of_every_layout() if label == "weights of every layout" else dict(MODELS)[label].SerializeToString()
    stripped = onnx.ModelProto.FromString(reader.strip_weight_bytes(data, SMALL_CONSTANT, STRIPPED.encode()))
    dropped = onnx.ModelProto.FromString(data)
    drop_weight_bytes(dropped.graph)
    assert stripped == dropped


def test_strip_weight_bytes_leaves_out_what_it_says(reader: ModuleType):
    data = _weights_of_every_layout()
    model = onnx.ModelProto.FromString(reader.strip_weight_bytes(data, SMALL_CONSTANT, STRIPPED.encode()))
    by_name = {t.name: t for t in model.graph.initializer}
    # More than SMALL_CONSTANT (64) elements and inline: 10*20, 80, 65, 9*9 and 100 (in the second graph field).
    stripped = {name for name, t in by_name.items() if t.external_data and t.external_data[-1].value == STRIPPED}
    assert stripped == {"large_raw", "large_floats", "large_int64", "packed", "extra"}
    for name in stripped:
        t = by_name[name]
        assert t.data_location == TensorProto.EXTERNAL and not (t.raw_data or t.float_data or t.int64_data)
    assert tuple(by_name["packed"].dims) == (9, 9)
    assert numpy_helper.to_array(by_name["small"]).tolist() == list(range(64))
    assert by_name["negative"].raw_data == b"\0" * 8 and by_name["external"].external_data[0].key == "location"
    assert model.doc_string == "kept as it is"


def test_analysis_reads_a_file_the_same_through_either_reader(
    reader: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    path = tmp_path / "resnet18.onnx"
    onnx.save(model_zoo.build("resnet18", weights=True), str(path))
    before = path.read_bytes()
    monkeypatch.setattr(native, "reader", None)
    expected = analyze(str(path))
    monkeypatch.setattr(native, "reader", reader)
    assert analyze(str(path)) == expected
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "data", [b"\x0a\x05abc", b"\x0a", b"\x0b", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"]
)
def test_malformed_bytes_raise_value_error(reader: ModuleType, data: bytes):
    # A length past the end, a missing length, a group (wire type 3), a varint longer than 64 bits.
    with pytest.raises(ValueError, match="malformed protobuf"):
        reader.graph_contents(data, 64, RawNode, RawInitializer)
    with pytest.raises(ValueError, match="malformed protobuf"):
        reader.value_types(data, -1, Tensor)
    with pytest.raises(ValueError, match="malformed protobuf"):
        reader.strip_weight_bytes(data, 64, b"")


@pytest.mark.parametrize("spec", ["zoo:resnet18", "zoo:vit_b_16", "zoo:lstm_kernel"])
def test_analysis_is_the_same_through_either_reader(reader: ModuleType, monkeypatch: pytest.MonkeyPatch, spec: str):
    monkeypatch.setattr(native, "reader", None)
    expected = analyze(spec)
    monkeypatch.setattr(native, "reader", reader)
    assert analyze(spec) == expected
