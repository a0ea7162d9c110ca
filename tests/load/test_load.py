"""Loading: weights identified without reading their bytes, shapes fixed and inferred, bad input refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import UserError
from onnxroof.load import load_graph, parse_shape
from onnxroof.load.read import shape_of

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _tiny_model(batch: int | str = 1) -> onnx.ModelProto:
    """x[batch,4] -> MatMul(W[4,3]) -> Add(b) -> Mul(scale) -> y, where scale = Constant * ConstantOfShape(shape)."""
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "W")
    b = numpy_helper.from_array(np.zeros((3,), np.float32), "b")
    nodes = [
        helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(np.array([3], np.int64))),
        helper.make_node(
            "ConstantOfShape", ["shape"], ["ones"], value=numpy_helper.from_array(np.array([1.0], np.float32))
        ),
        helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, np.float32))),
        helper.make_node("Mul", ["ones", "two"], ["scale"]),  # computed only from weights: folded
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["h"]),
        helper.make_node("Mul", ["h", "scale"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_weights_are_initializers_constants_and_what_is_computed_only_from_them():
    g = load_graph(_tiny_model())
    folded = {n.op_type + ":" + n.outputs[0] for n in g.nodes if n.folded}
    assert folded == {"Constant:shape", "ConstantOfShape:ones", "Constant:two", "Mul:scale"}
    assert {n.outputs[0] for n in g.nodes if not n.folded} == {"xw", "h", "y"}
    assert g.tensors["scale"].is_weight and g.tensors["W"].is_weight
    assert not g.tensors["h"].is_weight
    assert g.tensors["y"].shape == (1, 3)
    assert g.inputs == ("x",)


def test_the_callers_proto_is_not_modified():
    model = _tiny_model("batch")
    before = model.SerializeToString()
    load_graph(model, dims={"batch": 2})
    assert model.SerializeToString() == before


def test_dim_and_input_overrides():
    g = load_graph(_tiny_model("batch"), dims={"batch": 8})
    assert g.tensors["y"].shape == (8, 3)
    g = load_graph(_tiny_model("batch"), inputs={"x": "5x4"})
    assert g.tensors["y"].shape == (5, 3)


def test_unresolved_dim_names_the_dim_and_the_fix():
    with pytest.raises(UserError) as err:
        load_graph(_tiny_model("batch"))
    assert "'batch'" in err.value.message and "--dim batch=1" in err.value.hint


def test_a_zero_dim_is_a_known_dim_of_an_empty_tensor():
    # A declared dim_value of 0 is a real size (an empty tensor, or the empty axes list some reductions take),
    # not an unknown dim: the model loads and the empty shape propagates.
    model = _tiny_model()
    del model.graph.input[0].type.tensor_type.shape.dim[:]
    model.graph.input[0].type.tensor_type.shape.dim.add().dim_value = 0
    model.graph.input[0].type.tensor_type.shape.dim.add().dim_value = 4
    g = load_graph(model)
    assert g.tensors["x"].shape == (0, 4)
    assert g.tensors["y"].shape == (0, 3)


def test_a_negative_dim_in_value_info_is_unknown_and_inference_gives_the_shape():
    # A negative dim_value is no size (some exporters write -1 for an unknown dim): the tensor's shape is left to
    # inference, which gives xw its [1, 3] from x and W.
    model = _tiny_model()
    model.graph.value_info.append(helper.make_tensor_value_info("xw", TensorProto.FLOAT, [1, -1]))
    g = load_graph(model)
    assert g.tensors["xw"].shape == (1, 3)


def test_node_strings_that_are_not_utf8_read_as_text(tmp_path: Path):
    # protobuf hands a string field's invalid UTF-8 back as bytes; the loader decodes it with replacement
    # characters, as the native reader does, so the op is one without a cost function, named in text.
    data = _tiny_model().SerializeToString()
    assert data.count(b"MatMul") == 1
    path = tmp_path / "model.onnx"
    path.write_bytes(data.replace(b"MatMul", b"Mat\xfful"))
    g = load_graph(path)
    assert next(n.op_type for n in g.nodes if not n.folded) == "Mat\ufffdul"


def test_tensor_names_that_are_not_utf8_read_as_text(tmp_path: Path):
    # A large weight's name, where the node that reads it names it too: both read as the same text, so the node
    # still reads a weight of known shape.
    w = numpy_helper.from_array(np.ones((8, 16), np.float32), "weight_name")
    node = helper.make_node("MatMul", ["x", "weight_name"], ["y"], name="matmul")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    path = tmp_path / "model.onnx"
    path.write_bytes(data.replace(b"weight_name", b"weight_n\xffme"))
    g = load_graph(path)
    name = "weight_n\ufffdme"
    assert g.nodes[0].inputs == ("x", name)
    assert g.tensors[name].shape == (8, 16) and g.tensors[name].is_weight


def test_unknown_input_and_unknown_dim_names_are_refused():
    with pytest.raises(UserError, match="no input named 'nope'"):
        load_graph(_tiny_model(), inputs={"nope": (1, 4)})
    with pytest.raises(UserError, match="--dim names no symbolic dim"):
        load_graph(_tiny_model("batch"), dims={"sequence": 4})
    with pytest.raises(UserError, match="bad shape"):
        parse_shape("1xthree")


def test_missing_external_data_analyzes_the_same_and_the_file_is_untouched(tmp_path: Path):
    model = _tiny_model()
    # Make W large enough to be stored externally.
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones((4, 3), np.float32), "W"))
    path = tmp_path / "m.onnx"
    onnx.save(
        model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="m.data", size_threshold=0
    )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with_data = load_graph(path)
    (tmp_path / "m.data").unlink()
    without_data = load_graph(path)
    assert with_data.tensors == without_data.tensors
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_a_model_referencing_200_gb_of_absent_weights_loads(tmp_path: Path):
    # 4 weights of 50e9 / 4 float elements each: 50 G params, 200 GB, none of it on disk.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 125000])
    inits, nodes, prev = [], [], "x"
    for i in range(4):
        t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[125000, 100000])
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", str(i * 50_000_000_000)), ("length", "50000000000")):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        inits.append(t)
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
        nodes.append(helper.make_node("Slice", [f"h{i}", "starts", "ends"], [f"s{i}"]))
        prev = f"s{i}"
    inits += [
        numpy_helper.from_array(np.array([0], np.int64), "starts"),
        numpy_helper.from_array(np.array([125000], np.int64), "ends"),
    ]
    graph = helper.make_graph(nodes, "huge", [x], [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    path = tmp_path / "huge.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert path.stat().st_size < 10_000
    g = load_graph(path)
    assert sum(g.tensors[f"w{i}"].numel for i in range(4)) == 50_000_000_000


def test_bad_files_are_user_errors(tmp_path: Path):
    with pytest.raises(UserError, match="no such file"):
        load_graph(tmp_path / "absent.onnx")
    with pytest.raises(UserError, match="directory"):
        load_graph(tmp_path)
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a protobuf\n" * 20)
    with pytest.raises(UserError, match="not"):
        load_graph(text)
    good = tmp_path / "good.onnx"
    onnx.save(_tiny_model(), str(good))
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(UserError):
        load_graph(truncated)


def test_unknown_zoo_name_is_a_user_error():
    with pytest.raises(UserError, match="no zoo model named"):
        load_graph("zoo:not-a-model")


def test_symbolic_shape_inference_fills_what_onnx_leaves_unknown():
    # onnx's inference does not know the com.microsoft Gelu op; onnxruntime's symbolic inference does.
    nodes = [
        helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft"),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "contrib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    g = load_graph(model)
    assert g.tensors["g"].shape == (2, 8)
    assert g.tensors["y"].shape == (2, 8)


def test_symbolic_inference_does_not_read_weight_bytes():
    # Symbolic inference reads the value of any initializer an Add takes, to follow shape arithmetic. The bias
    # has 96 elements, above the small-constant limit, so loading strips its bytes (as it leaves external weights
    # unread): symbolic inference must treat it as a value it cannot know, and still give Add's shape.
    from onnxroof.load.read import drop_weight_bytes
    from onnxroof.load.symbolic import symbolic_infer

    bias = numpy_helper.from_array(np.ones((96, 1, 1), np.float32), "bias")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["y"])],
        "bias",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 96, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    drop_weight_bytes(model.graph)
    inferred = symbolic_infer(model)
    y = next(vi for vi in inferred.graph.output if vi.name == "y")
    assert [d.dim_value for d in y.type.tensor_type.shape.dim] == [1, 96, 4, 4]
    assert [t.name for t in model.graph.initializer] == ["bias"]  # the model given is left as it was


@pytest.mark.skipif(not LIGHT_DIR.exists(), reason="onnx's bundled light models are not installed")
def test_light_models_use_ir3_inputs_and_constant_of_shape_weights():
    g = load_graph(LIGHT_DIR / "light_resnet50.onnx")
    assert g.ir_version == 3
    assert g.inputs == ("gpu_0/data_0",)  # the 269 initializers listed as inputs are weights
    assert all(n.folded for n in g.nodes if n.op_type == "ConstantOfShape")


def test_a_failing_symbolic_inference_is_a_warning_and_onnx_shapes_stay(monkeypatch):
    # onnx cannot infer the custom op, so symbolic inference runs; when it raises (no sympy, an op it chokes
    # on), loading goes on with onnx's shapes and says why the rest stayed unknown.
    def broken(model: onnx.ModelProto) -> onnx.ModelProto:
        raise RuntimeError("no sympy here\nsecond line")

    monkeypatch.setattr("onnxroof.load.symbolic.symbolic_infer", broken)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mystery", ["r"], ["y"], domain="example.custom")],
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    )
    g = load_graph(model)
    assert g.warnings == ("symbolic shape inference failed (no sympy here)",)
    assert g.tensors["r"].shape == (2, 3)
    assert g.tensor("y").shape is None


def test_incomplete_shape_inference_writes_nothing_and_keeps_what_it_resolved(tmp_path: Path, monkeypatch):
    # A custom op nobody can infer: onnxruntime's symbolic inference gives up on it (and would save its working
    # model into the current directory); what comes before it keeps its shape.
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Mystery", ["r"], ["m"], domain="example.custom"),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    )
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    g = load_graph(model)
    assert list(work.iterdir()) == []
    assert g.tensors["r"].shape == (2, 3)
    assert g.tensor("m").shape is None


def _weights_model(ir_version: int) -> onnx.ModelProto:
    """x[2,200] -> MatMul(W[200,200]) -> Reshape(to) -> y[400,100]: one large weight, one small shape constant.

    The weight's name is 150 bytes and its dims 200, so their wire encodings take two-byte lengths and values.
    """
    w_name = "w" * 150
    w = numpy_helper.from_array(np.ones((200, 200), np.float32), w_name)
    to = numpy_helper.from_array(np.array([4, 100], np.int64), "to")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 200])]
    if ir_version < 4:  # IR 3 declares every initializer as a graph input too
        inputs += [
            helper.make_tensor_value_info(w_name, TensorProto.FLOAT, [200, 200]),
            helper.make_tensor_value_info("to", TensorProto.INT64, [2]),
        ]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", w_name], ["h"]), helper.make_node("Reshape", ["h", "to"], ["y"])],
        "weights",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, to],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir_version)


@pytest.mark.parametrize("ir_version", [3, 8])
def test_inference_gets_large_weights_as_typed_inputs_and_small_constants_as_values(ir_version: int):
    # Shape inference gets the 40,000-element weight as a graph input of its type, after the declared inputs
    # (once: IR 3 declares it already), and keeps the 2-element Reshape target as an initializer whose values
    # it needs: y is [2,200] reshaped to [4,100].
    from onnxroof.load.lean import weights_as_inputs
    from onnxroof.load.read import read_graph

    model = _weights_model(ir_version)
    w_name = "w" * 150
    lean = onnx.ModelProto.FromString(weights_as_inputs(model, read_graph(model.graph).initializers))
    declared = ["x", w_name, "to"] if ir_version < 4 else ["x"]
    assert [vi.name for vi in lean.graph.input] == declared + ([] if ir_version < 4 else [w_name])
    w_input = next(vi for vi in lean.graph.input if vi.name == w_name)
    assert w_input == helper.make_tensor_value_info(w_name, TensorProto.FLOAT, [200, 200])
    assert [t.name for t in lean.graph.initializer] == ["to"]
    assert len(lean.graph.node) == 2

    g = load_graph(_weights_model(ir_version))
    assert g.inputs == ("x",)
    assert g.tensors[w_name].is_weight and g.tensors[w_name].shape == (200, 200)
    assert g.tensors["y"].shape == (4, 100)


def test_model_graph_bytes_finds_and_merges_the_graph_field():
    # ModelProto.graph is field 7. A model serialized by protobuf holds it once, between other fields (ir_version
    # 1, opset_import 8, producer_name 2); weights_as_inputs appends a second occurrence, which protobuf merges
    # into the first, so the two payloads concatenated parse to the same merged graph.
    from onnxroof.load.lean import weights_as_inputs
    from onnxroof.load.read import model_graph_bytes, read_graph

    model = _weights_model(8)
    model.producer_name = "p" * 300  # a length-delimited field over 127 bytes: a two-byte length varint
    assert model_graph_bytes(model.SerializeToString()) == model.graph.SerializeToString()
    lean = weights_as_inputs(model, read_graph(model.graph).initializers)
    assert onnx.GraphProto.FromString(model_graph_bytes(lean)) == onnx.ModelProto.FromString(lean).graph
    assert model_graph_bytes(onnx.ModelProto().SerializeToString()) == b""
    with pytest.raises(ValueError):
        model_graph_bytes(model.SerializeToString()[:-1])  # the last field's payload is cut short


def test_inference_without_its_bytes_binding_reads_the_same_shapes(monkeypatch):
    # The loader calls onnx's C++ inference from bytes to bytes; where that binding cannot be imported it uses the
    # public infer_shapes and serializes its result. Both give y = [2,200] reshaped to [4,100].
    import sys

    expected = load_graph(_weights_model(8))
    monkeypatch.setitem(sys.modules, "onnx.onnx_cpp2py_export.shape_inference", None)  # import raises ImportError
    g = load_graph(_weights_model(8))
    assert g.warnings == ()  # a failed inference would say so (and leave y to symbolic inference)
    assert g.tensors == expected.tensors
    assert g.tensors["y"].shape == (4, 100)


def test_symbolic_inference_sees_the_large_weights_given_as_inputs():
    # onnx cannot infer the com.microsoft Gelu, so symbolic inference runs on what onnx's inference returned,
    # where the 40,000-element weight is an input: the MatMul after the Gelu still gets its shape from it.
    w = numpy_helper.from_array(np.ones((200, 200), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft"), helper.make_node("MatMul", ["g", "W"], ["y"])],
        "contrib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 200])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    g = load_graph(model)
    assert g.warnings == ()
    assert g.tensors["y"].shape == (2, 200)
    assert g.inputs == ("x",) and g.tensors["W"].is_weight


def test_a_failing_onnx_inference_is_a_warning_and_the_weights_stay_weights(monkeypatch):
    # onnx's inference raises (as it does on some odd but runnable models): loading goes on with the shapes the
    # model declares, says why, and the weight that inference was given as an input is still a weight, not a
    # runtime input. Symbolic inference is made to fail too, so that only declared shapes remain.
    def broken(*args, **kwargs):
        raise RuntimeError("[ShapeInferenceError] odd model")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", broken)
    monkeypatch.setattr("onnxroof.load.infer.onnx_infer_bytes", broken)  # the loader's bytes-to-bytes call
    monkeypatch.setattr("onnxroof.load.symbolic.symbolic_infer", broken)
    g = load_graph(_weights_model(8))
    assert g.warnings[0] == "onnx shape inference failed ([ShapeInferenceError] odd model); shapes may be missing"
    assert g.inputs == ("x",)
    w = g.tensors["w" * 150]
    assert w.is_weight and w.shape == (200, 200)
    assert g.tensors["x"].shape == (2, 200)
    assert g.tensor("h").shape is None


@pytest.mark.parametrize(("ir_version", "opset"), [(3, 9), (8, 17)])
def test_shape_arithmetic_onnx_does_not_follow_is_evaluated(monkeypatch, ir_version: int, opset: int):
    # Expand(x, Where(Equal(Shape(y), -1), 1, Shape(y))): the pattern exporters write for "-1 means keep". onnx's
    # data propagation stops at Equal and Where, so the target is unknown to it; evaluated on the known shape of y
    # it is [2, 3, 4], and so is Expand's output (x [2, 1, 4] broadcast to it).
    nodes = [
        helper.make_node("Shape", ["y"], ["s"]),
        helper.make_node("Constant", [], ["minus_one"], value=numpy_helper.from_array(np.array(-1, np.int64))),
        # value_int needs opset 12; an older one writes the same constant as a tensor
        helper.make_node(
            "Constant",
            [],
            ["one"],
            **({"value_int": 1} if opset >= 12 else {"value": numpy_helper.from_array(np.array(1, np.int64))}),
        ),
        helper.make_node("Equal", ["s", "minus_one"], ["keep"]),
        helper.make_node("Where", ["keep", "one", "s"], ["target"]),
        helper.make_node("Expand", ["x", "target"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "expand_where",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 4]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    # IR 3 reads an initializer only when it is also a graph input: the evaluated values must be given as both
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    plain = onnx.shape_inference.infer_shapes(model, data_prop=True)
    assert shape_of(plain.graph.output[0].type)[1] is None  # onnx alone leaves a dim of it unknown
    # only the evaluation may resolve it here: the symbolic inference after it is made to resolve nothing
    monkeypatch.setattr("onnxroof.load.symbolic.symbolic_infer", lambda model: onnx.ModelProto())
    g = load_graph(model)
    assert g.tensors["target"].shape == (3,)
    assert g.tensors["z"].shape == (2, 3, 4)
    # computed from the static shape of y alone: folded at load time, as an engine folds it; Expand reads x
    assert g.tensors["target"].is_weight
    assert [n.op_type for n in g.nodes if not n.folded] == ["Expand"]
