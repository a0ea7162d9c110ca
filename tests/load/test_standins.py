"""Shapes through onnxruntime's contrib ops: every stand-in gives the shapes and dtypes onnxruntime really produces.

End to end, small models are optimized by onnxruntime (ORT_ENABLE_ALL and ORT_ENABLE_EXTENDED) and saved; every
tensor a node produces must then have a known shape after load_graph, equal to the one onnxruntime computes
when the saved model runs with every intermediate tensor fetched. Per rule, a single-node model checks one
stand-in against onnxruntime running that op (or against the op's documented shape where the CPU has no kernel).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import ModelProto, TensorProto, helper, numpy_helper

from onnxroof.load import load_graph
from onnxroof.load.infer import infer
from onnxroof.load.read import read_graph
from onnxroof.load.standin_context import MS, NCHWC
from onnxroof.load.standin_rules import STANDINS
from onnxroof.load.standins import needs_standins, standin_model

ort = pytest.importorskip("onnxruntime")

F32, U8, I8 = np.float32, np.uint8, np.int8
RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _scratch_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime's symbolic shape inference saves a model into the working directory when it gives up."""
    monkeypatch.chdir(tmp_path)


# -------------------------------------------------------------------------------------------------------------
# Helpers


def _weight(name: str, *shape: int) -> TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.1).astype(F32), name)


def _scalar(name: str, value: float) -> TensorProto:
    return numpy_helper.from_array(np.array(value, F32), name)


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, tuple[int, Sequence[int]]],
    outputs: Sequence[str],
    initializers: Sequence[TensorProto] = (),
    opset: int = 17,
) -> ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "m",
        [helper.make_tensor_value_info(name, dtype, shape) for name, (dtype, shape) in inputs.items()],
        [onnx.ValueInfoProto(name=name) for name in outputs],
        list(initializers),
    )
    domains = sorted({n.domain for n in nodes if n.domain})
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)  # an IR every supported onnxruntime reads


def _optimize(model: ModelProto, level: Any, directory: Path, name: str) -> Path:
    """Let onnxruntime optimize ``model`` on the CPU and save the result; returns the saved model's path."""
    source, saved = directory / f"{name}.onnx", directory / f"{name}_optimized.onnx"
    onnx.save(model, str(source))
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.optimized_model_filepath = str(saved)
    options.log_severity_level = 3
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    return saved


def _feeds(session: Any, model: ModelProto) -> dict[str, np.ndarray]:
    types = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
    feeds = {}
    for i in session.get_inputs():
        dtype = helper.tensor_dtype_to_np_dtype(types[i.name])
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feeds[i.name] = (RNG.random(shape) * 4).astype(dtype) if dtype != np.bool_ else RNG.random(shape) > 0.5
    return feeds


def _run_all(model: ModelProto, feeds: dict[str, np.ndarray] | None = None) -> dict[str, tuple[tuple[int, ...], int]]:
    """Shape and element type of every tensor a node of ``model`` produces, as onnxruntime computes them."""
    model = ModelProto.FromString(model.SerializeToString())
    listed = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in listed:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
                listed.add(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    values = session.run(None, feeds if feeds is not None else _feeds(session, model))
    return {
        out.name: (tuple(value.shape), helper.np_dtype_to_tensor_dtype(value.dtype))
        for out, value in zip(session.get_outputs(), values)
    }


def _assert_like_onnxruntime(path: Path) -> dict[str, tuple[tuple[int, ...], int]]:
    """Every tensor a node produces has a known shape after load_graph, equal (with its dtype) to onnxruntime's."""
    real = _run_all(onnx.load(str(path)))
    graph = load_graph(path)
    wrong = {}
    for node in graph.nodes:
        for name in filter(None, node.outputs):
            tensor = graph.tensors.get(name)
            got = (tensor.shape, tensor.dtype) if tensor is not None else None
            if got != real[name]:
                wrong[f"{node.domain}::{node.op_type} -> {name}"] = (got, real[name])
    assert not wrong, wrong
    assert not graph.warnings
    return real


def _contrib_ops(path: Path) -> set[tuple[str, str]]:
    return {(n.domain, n.op_type) for n in onnx.load(str(path)).graph.node if n.domain}


@functools.cache
def _nchwc_block() -> int:
    """The NCHWc block size of this CPU: the channel count ReorderInput pads 4 channels to (1 without NCHWc)."""
    reorder = helper.make_node("ReorderInput", ["x"], ["y"], domain=NCHWC)
    model = _model([reorder], {"x": (TensorProto.FLOAT, [1, 4, 2, 2])}, ["y"])
    try:
        return _run_all(model)["y"][0][1]
    except Exception:
        return 1


LEVELS = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}


# -------------------------------------------------------------------------------------------------------------
# End to end: models onnxruntime optimized


def _residual_cnn(channels: int = 32) -> ModelProto:
    """Conv+BN+Relu, Conv+BN + residual Add + Relu, MaxPool, strided Conv+Sigmoid, AveragePool, nearest Resize,
    an NHWC Transpose, GlobalAveragePool, Flatten, Gemm+Relu."""
    c = channels
    inits = [
        _weight("w1", c, 3, 3, 3), _weight("b1", c), _weight("w2", c, c, 3, 3),
        _weight("s2", c), _weight("bb2", c), _weight("m2", c),
        numpy_helper.from_array(RNG.random(c).astype(F32) + 0.5, "v2"),
        _weight("w3", 48, c, 3, 3), _weight("b3", 48),
        numpy_helper.from_array(np.array([1, 1, 2, 2], F32), "scales"),
        _weight("wg", 10, 48), _weight("bg", 10),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "s2", "bb2", "m2", "v2"], ["bn2"]),
        helper.make_node("Add", ["bn2", "r1"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Sigmoid", ["c3"], ["sg"]),
        helper.make_node("AveragePool", ["sg"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node(
            "Resize", ["ap", "", "scales"], ["up"], mode="nearest",
            coordinate_transformation_mode="asymmetric", nearest_mode="floor",
        ),
        helper.make_node("Transpose", ["up"], ["nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("GlobalAveragePool", ["up"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["gm"], transB=1),
        helper.make_node("Relu", ["gm"], ["y"]),
    ]  # fmt: skip
    return _model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 16, 16])}, ["y", "nhwc"], inits, opset=13)


def _padded_cnn() -> ModelProto:
    """Channel counts that are not multiples of the NCHWc block (24, and 20 at the input), a depthwise Conv, a
    BatchNormalization onnxruntime turns into an NCHWc Conv, a channel Concat, GlobalMaxPool."""
    inits = [
        _weight("w1", 24, 20, 3, 3), _weight("b1", 24), _weight("w2", 32, 24, 1, 1), _weight("w3", 32, 1, 3, 3),
        _weight("w4", 32, 32, 1, 1), _weight("b4", 32), _weight("s5", 32), _weight("bb5", 32), _weight("m5", 32),
        numpy_helper.from_array(RNG.random(32).astype(F32) + 0.5, "v5"),
        _weight("w6", 16, 32, 3, 3), _weight("w7", 16, 32, 1, 1),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Relu", ["x"], ["xr"]),
        helper.make_node("Conv", ["xr", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], group=32, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c3", "w4", "b4"], ["c4"]),
        helper.make_node("Add", ["c4", "c2"], ["a4"]),
        helper.make_node("BatchNormalization", ["a4", "s5", "bb5", "m5", "v5"], ["bn5"]),
        helper.make_node("Tanh", ["bn5"], ["t5"]),
        helper.make_node("Conv", ["t5", "w6"], ["c6"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["t5", "w7"], ["c7"]),
        helper.make_node("Concat", ["c6", "c7"], ["cat"], axis=1),
        helper.make_node("GlobalMaxPool", ["cat"], ["y"]),
    ]  # fmt: skip
    return _model(nodes, {"x": (TensorProto.FLOAT, [2, 20, 12, 12])}, ["y", "r1"], inits, opset=13)


def _transformer_block(opset: int) -> ModelProto:
    """Self-attention with Q.K^T (MatMul of a transposed operand, scaled), residual + LayerNorm, and an MLP with
    MatMul+Add and an erf Gelu: onnxruntime fuses FusedMatMul, SkipLayerNormalization and Gelu."""
    h = 32
    inits = [
        _weight("wq", h, h), _weight("wk", h, h), _weight("w1", h, h), _weight("b1", h), _weight("w2", h, h),
        _weight("b2", h), _weight("gamma", h), _weight("beta", h), _scalar("scale", 0.125),
        _scalar("sqrt2", float(np.sqrt(2))), _scalar("one", 1.0), _scalar("half", 0.5),
    ]  # fmt: skip
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["qks"]),
        helper.make_node("Softmax", ["qks"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "x"], ["att"]),
        helper.make_node("Add", ["att", "x"], ["res"]),
    ]
    if opset >= 17:
        nodes.append(helper.make_node("LayerNormalization", ["res", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5))
    else:
        inits += [_scalar("two", 2.0), _scalar("eps", 1e-5)]
        nodes += [
            helper.make_node("ReduceMean", ["res"], ["mu"], axes=[-1]),
            helper.make_node("Sub", ["res", "mu"], ["d"]),
            helper.make_node("Pow", ["d", "two"], ["d2"]),
            helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
            helper.make_node("Add", ["var", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["sd"]),
            helper.make_node("Div", ["d", "sd"], ["nrm"]),
            helper.make_node("Mul", ["nrm", "gamma"], ["ng"]),
            helper.make_node("Add", ["ng", "beta"], ["ln"]),
        ]
    nodes += [
        helper.make_node("MatMul", ["ln", "w1"], ["h1"]),
        helper.make_node("Add", ["h1", "b1"], ["h1b"]),
        helper.make_node("Div", ["h1b", "sqrt2"], ["dv"]),
        helper.make_node("Erf", ["dv"], ["er"]),
        helper.make_node("Add", ["er", "one"], ["ep"]),
        helper.make_node("Mul", ["h1b", "ep"], ["gm"]),
        helper.make_node("Mul", ["gm", "half"], ["ge"]),
        helper.make_node("MatMul", ["ge", "w2"], ["h2"]),
        helper.make_node("Add", ["h2", "b2"], ["h2b"]),
        helper.make_node("Add", ["h2b", "ln"], ["y"]),
    ]
    return _model(nodes, {"x": (TensorProto.FLOAT, [2, 8, h])}, ["y"], inits, opset=opset)


@pytest.mark.ort
@pytest.mark.parametrize("level", LEVELS)
def test_residual_cnn_optimized_by_onnxruntime(level: str, tmp_path: Path):
    path = _optimize(_residual_cnn(), LEVELS[level], tmp_path, "cnn")
    ops = _contrib_ops(path)
    assert (MS, "FusedGemm") in ops
    if level == "extended":
        assert (MS, "FusedConv") in ops
    elif _nchwc_block() > 1:
        assert {(NCHWC, "Conv"), (NCHWC, "MaxPool"), (NCHWC, "Upsample"), (NCHWC, "ReorderOutput")} <= ops
    real = _assert_like_onnxruntime(path)
    assert real["y"] == ((2, 10), TensorProto.FLOAT) and real["nhwc"][0] == (2, 8, 8, 48)


@pytest.mark.ort
@pytest.mark.parametrize("level", LEVELS)
def test_unaligned_channels_are_padded_like_onnxruntime(level: str, tmp_path: Path):
    path = _optimize(_padded_cnn(), LEVELS[level], tmp_path, "padded")
    if level == "all" and _nchwc_block() > 1:
        assert {(NCHWC, "ReorderInput"), (NCHWC, "Conv"), (NCHWC, "GlobalMaxPool")} <= _contrib_ops(path)
    _assert_like_onnxruntime(path)


@pytest.mark.ort
@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("level", LEVELS)
def test_transformer_block_optimized_by_onnxruntime(level: str, opset: int, tmp_path: Path):
    path = _optimize(_transformer_block(opset), LEVELS[level], tmp_path, "block")
    assert {(MS, "FusedMatMul"), (MS, "SkipLayerNormalization"), (MS, "Gelu")} <= _contrib_ops(path)
    _assert_like_onnxruntime(path)


@pytest.mark.ort
@pytest.mark.parametrize("level", LEVELS)
def test_quantized_cnn_optimized_by_onnxruntime(level: str, tmp_path: Path):
    quantization = pytest.importorskip("onnxruntime.quantization")
    inits = [_weight("w1", 16, 3, 3, 3), _weight("b1", 16), _weight("w2", 16, 16, 3, 3), _weight("b2", 16),
             _weight("w3", 16, 16, 1, 1), _weight("wm", 16, 10), _weight("bm", 10)]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p1"], ["a2"]),
        helper.make_node("Sigmoid", ["a2"], ["s2"]),
        helper.make_node("Mul", ["s2", "a2"], ["m2"]),
        helper.make_node("AveragePool", ["m2"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["ap", "w3"], ["c3"]),
        helper.make_node("LeakyRelu", ["c3"], ["lr"], alpha=0.1),
        helper.make_node("Concat", ["lr", "ap"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["lr"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "wm"], ["mm"]),
        helper.make_node("Add", ["mm", "bm"], ["y"]),
    ]
    float_model = _model(nodes, {"x": (TensorProto.FLOAT, [1, 3, 16, 16])}, ["y", "cat"], inits, opset=13)
    onnx.save(float_model, str(tmp_path / "float.onnx"))

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"x": RNG.random((1, 3, 16, 16), dtype=F32)} for _ in range(2)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    quantization.quantize_static(
        str(tmp_path / "float.onnx"), str(tmp_path / "quant.onnx"), Reader(),
        quant_format=quantization.QuantFormat.QOperator,
        activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8,
    )  # fmt: skip
    path = _optimize(onnx.load(str(tmp_path / "quant.onnx")), LEVELS[level], tmp_path, "quant")
    ops = _contrib_ops(path)
    assert {(MS, "QLinearAdd"), (MS, "QLinearSigmoid"), (MS, "QLinearConcat"), (MS, "QLinearGlobalAveragePool")} <= ops
    if level == "all":
        assert {(MS, "QLinearConv"), (MS, "NhwcMaxPool"), (MS, "QLinearAveragePool")} <= ops
    _assert_like_onnxruntime(path)


# -------------------------------------------------------------------------------------------------------------
# One rule at a time


@dataclass
class Case:
    """A single-node model: inputs are (name, array) with None for an omitted input; ``constant`` names the inputs
    that are initializers. ``expected`` (output shapes and dtypes) is given only for ops the CPU cannot run."""

    domain: str
    op_type: str
    inputs: list[tuple[str, np.ndarray | None]]
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    constant: tuple[str, ...] = ()
    opset: int = 17
    expected: list[tuple[tuple[int, ...], int]] | None = None
    after: list[onnx.NodeProto] = field(default_factory=list)  # nodes reading the op's outputs
    weights: dict[str, np.ndarray] = field(default_factory=dict)  # initializers that only ``after`` reads


def _f(*shape: int) -> np.ndarray:
    return RNG.random(shape).astype(F32)


def _u8(*shape: int) -> np.ndarray:
    return RNG.integers(0, 255, shape).astype(U8)


_SCALE, _ZP = np.array(0.1, F32), np.array(3, U8)


def _q(name: str) -> list[tuple[str, np.ndarray]]:
    return [(f"{name}_scale", _SCALE), (f"{name}_zp", _ZP)]


def _qconst(*names: str) -> tuple[str, ...]:
    return tuple(f"{n}_{part}" for n in names for part in ("scale", "zp"))


def _matmul_operand(shape: Sequence[int], trans: int, batch: int) -> tuple[int, ...]:
    """The raw operand shape that FusedMatMul's flags turn into ``shape`` = [batch..., rows, cols]: transBatch
    reads rows from axis 0 and the batch from axes 1..-2, trans swaps rows and cols."""
    *lead, rows, cols = shape
    if batch:
        return (cols, *lead, rows) if trans else (rows, *lead, cols)
    return (*lead, cols, rows) if trans else tuple(shape)


def _fused_matmul_cases() -> dict[str, Case]:
    cases = {}
    for ta, tb, tba, tbb in itertools.product((0, 1), repeat=4):
        a = _matmul_operand((3, 2, 4, 5), ta, tba)
        b = _matmul_operand((3, 2, 5, 6), tb, tbb)
        attrs = dict(transA=ta, transB=tb, transBatchA=tba, transBatchB=tbb, alpha=0.5)
        cases[f"FusedMatMul-{ta}{tb}{tba}{tbb}"] = Case(MS, "FusedMatMul", [("a", _f(*a)), ("b", _f(*b))], attrs)
    cases["FusedMatMul-broadcast"] = Case(MS, "FusedMatMul", [("a", _f(4, 5)), ("b", _f(2, 6, 5))], dict(transB=1))
    cases["FusedMatMul-vector"] = Case(MS, "FusedMatMul", [("a", _f(5)), ("b", _f(6, 5))], dict(transA=1, transB=1))
    cases["FusedMatMul-opset9"] = Case(
        MS, "FusedMatMul", [("a", _f(2, 5, 4)), ("b", _f(5, 6))], dict(transA=1), opset=9
    )
    cases["TransposeMatMul"] = Case(MS, "TransposeMatMul", [("a", _f(5, 4)), ("b", _f(6, 5))], dict(transA=1, transB=1))
    return cases


def _reorder_cases() -> dict[str, Case]:
    """ReorderInput pads the channels to the block size of the CPU; the NCHWc Conv that reads it has a weight
    with that many input channels (onnxruntime builds it so), which the stand-in reads. ReorderOutput drops the
    padding again: its input holds 20 channels padded to a whole number of blocks (24 with blocks of 8, 32 with
    blocks of 16)."""
    block = _nchwc_block()
    if block <= 1:
        return {}
    conv = [helper.make_node("Conv", ["y0", "w"], ["conv"], domain=NCHWC)]
    padded = -(-20 // block) * block
    weights = {"w": _f(16, padded, 1, 1)}
    return {
        "ReorderOutput": Case(NCHWC, "ReorderOutput", [("x", _f(1, padded, 5, 6))], dict(channels=20)),
        "ReorderOutput-channels-last": Case(
            NCHWC, "ReorderOutput", [("x", _f(1, padded, 5, 6))], dict(channels=20, channels_last=1)
        ),
        "ReorderInput-aligned": Case(NCHWC, "ReorderInput", [("x", _f(1, 2 * block, 5, 5))]),
        "ReorderInput-padded": Case(NCHWC, "ReorderInput", [("x", _f(1, 20, 5, 5))], after=conv, weights=weights),
        "ReorderInput-channels-last": Case(
            NCHWC, "ReorderInput", [("x", _f(1, 5, 6, 20))], dict(channels_last=1), after=conv, weights=weights
        ),
    }


_I8_ZERO, _I8_ONE = np.array(0, I8), np.array(1, I8)

CASES: dict[str, Case] = {
    # NCHWc
    "nchwc-Conv": Case(
        NCHWC,
        "Conv",
        [("x", _f(1, 16, 8, 8)), ("w", _f(32, 16, 3, 3)), ("b", _f(32)), ("sum", _f(1, 32, 8, 8))],
        dict(pads=[1, 1, 1, 1], activation="Relu"),
        constant=("w", "b"),
    ),
    "nchwc-Conv-nchw-input": Case(
        NCHWC, "Conv", [("x", _f(1, 3, 9, 9)), ("w", _f(16, 3, 3, 3))], dict(strides=[2, 2]), constant=("w",)
    ),
    "nchwc-MaxPool": Case(
        NCHWC, "MaxPool", [("x", _f(1, 16, 7, 6))], dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    ),
    "nchwc-AveragePool": Case(
        NCHWC,
        "AveragePool",
        [("x", _f(1, 16, 8, 8))],
        dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
    ),
    "nchwc-GlobalMaxPool": Case(NCHWC, "GlobalMaxPool", [("x", _f(1, 16, 5, 6))]),
    "nchwc-GlobalAveragePool": Case(NCHWC, "GlobalAveragePool", [("x", _f(1, 16, 5, 6))]),
    "nchwc-Upsample": Case(NCHWC, "Upsample", [("x", _f(1, 16, 5, 6))], dict(scales=[1, 1, 2, 3])),
    "nchwc-Upsample-opset9": Case(NCHWC, "Upsample", [("x", _f(1, 16, 5, 6))], dict(scales=[1, 1, 2, 3]), opset=9),
    # Fused float ops
    "FusedConv": Case(
        MS,
        "FusedConv",
        [("x", _f(1, 4, 8, 8)), ("w", _f(8, 4, 3, 3)), ("b", _f(8)), ("z", _f(1, 8, 4, 4))],
        dict(strides=[2, 2], pads=[1, 1, 1, 1], activation="LeakyRelu", activation_params=[0.1]),
        constant=("w", "b"),
    ),
    "FusedGemm": Case(
        MS, "FusedGemm", [("a", _f(3, 4)), ("b", _f(5, 4)), ("c", _f(5))], dict(transB=1, activation="Relu")
    ),
    "FusedGemm-no-C-opset9": Case(
        MS, "FusedGemm", [("a", _f(4, 3)), ("b", _f(4, 5))], dict(transA=1, activation="Relu"), opset=9
    ),
    **_fused_matmul_cases(),
    "NhwcMaxPool": Case(MS, "NhwcMaxPool", [("x", _u8(1, 7, 6, 5))], dict(kernel_shape=[3, 3], strides=[2, 2])),
    # Quantized ops
    "QLinearAdd": Case(
        MS,
        "QLinearAdd",
        [("a", _u8(2, 3, 4)), *_q("a"), ("b", _u8(4)), *_q("b"), *_q("c")],
        constant=_qconst("a", "b", "c"),
    ),
    "QLinearMul": Case(
        MS,
        "QLinearMul",
        [("a", _u8(2, 1, 4)), *_q("a"), ("b", _u8(3, 1)), *_q("b"), *_q("c")],
        constant=_qconst("a", "b", "c"),
    ),
    "QLinearSigmoid": Case(MS, "QLinearSigmoid", [("x", _u8(2, 3)), *_q("x"), *_q("y")], constant=_qconst("x", "y")),
    "QLinearLeakyRelu": Case(
        MS, "QLinearLeakyRelu", [("x", _u8(2, 3)), *_q("x"), *_q("y")], dict(alpha=0.2), constant=_qconst("x", "y")
    ),
    "QLinearSoftmax": Case(
        MS, "QLinearSoftmax", [("x", _u8(2, 3, 4)), *_q("x"), *_q("y")], dict(opset=13), constant=_qconst("x", "y")
    ),
    "QLinearAveragePool": Case(
        MS,
        "QLinearAveragePool",
        [("x", _u8(1, 16, 7, 6)), *_q("x"), *_q("y")],
        dict(kernel_shape=[3, 3], strides=[2, 2]),
        constant=_qconst("x", "y"),
    ),
    "QLinearAveragePool-channels-last": Case(
        MS,
        "QLinearAveragePool",
        [("x", _u8(1, 7, 6, 16)), *_q("x"), *_q("y")],
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], channels_last=1),
        constant=_qconst("x", "y"),
    ),
    "QLinearGlobalAveragePool": Case(
        MS, "QLinearGlobalAveragePool", [("x", _u8(1, 16, 5, 6)), *_q("x"), *_q("y")], constant=_qconst("x", "y")
    ),
    "QLinearGlobalAveragePool-channels-last": Case(
        MS,
        "QLinearGlobalAveragePool",
        [("x", _u8(1, 5, 6, 16)), *_q("x"), *_q("y")],
        dict(channels_last=1),
        constant=_qconst("x", "y"),
    ),
    "QLinearConv-channels-last": Case(
        MS,
        "QLinearConv",
        [
            ("x", _u8(1, 7, 6, 16)),
            *_q("x"),
            ("w", np.zeros((8, 16, 3, 3), I8)),
            ("w_scale", _SCALE),
            ("w_zp", _I8_ZERO),
            *_q("y"),
            ("bias", np.zeros(8, np.int32)),
        ],
        dict(channels_last=1, pads=[1, 1, 1, 1], strides=[1, 2]),
        constant=("w", "w_scale", "w_zp", "bias") + _qconst("x", "y"),
    ),
    "QLinearConcat": Case(
        MS,
        "QLinearConcat",
        [*_q("y"), ("a", _u8(1, 3, 4)), *_q("a"), ("b", _u8(1, 5, 4)), *_q("b")],
        dict(axis=1),
        constant=_qconst("y", "a", "b"),
    ),
    "QLinearWhere": Case(
        MS,
        "QLinearWhere",
        [("cond", np.ones((1, 4), bool)), ("x", _u8(3, 1)), *_q("x"), ("y", _u8(3, 4)), *_q("y"), *_q("z")],
        constant=_qconst("x", "y", "z"),
    ),
    "QGemm-float": Case(
        MS,
        "QGemm",
        [("a", _u8(3, 4)), *_q("a"), ("b", np.zeros((5, 4), U8)), *_q("b")],
        dict(transB=1),
        constant=("b",) + _qconst("a", "b"),
    ),
    "QGemm-int8": Case(
        MS,
        "QGemm",
        [
            ("a", np.zeros((4, 3), I8)),
            ("a_scale", _SCALE),
            ("a_zp", _I8_ZERO),
            ("b", np.zeros((4, 5), I8)),
            ("b_scale", _SCALE),
            ("b_zp", _I8_ZERO),
            ("c", None),
            ("y_scale", _SCALE),
            ("y_zp", _I8_ONE),
        ],
        dict(transA=1),
        constant=("a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"),
    ),
    "MatMulIntegerToFloat": Case(
        MS,
        "MatMulIntegerToFloat",
        [("a", _u8(2, 3, 4)), ("b", np.zeros((4, 5), I8)), ("a_scale", _SCALE), ("b_scale", _SCALE)],
        constant=("b", "a_scale", "b_scale"),
    ),
    "DynamicQuantizeMatMul": Case(
        MS,
        "DynamicQuantizeMatMul",
        [("a", _f(2, 3, 4)), ("b", np.zeros((4, 5), I8)), ("b_scale", _SCALE)],
        constant=("b", "b_scale"),
    ),
    "MatMulNBits": Case(
        MS,
        "MatMulNBits",
        [("a", _f(2, 3, 32)), ("b", np.zeros((5, 1, 16), U8)), ("scales", _f(5))],
        dict(K=32, N=5, block_size=32, bits=4),
        constant=("b", "scales"),
    ),
    "MatMulBnb4": Case(
        MS,
        "MatMulBnb4",
        [("a", _f(3, 64)), ("b", np.zeros((160,), U8)), ("absmax", _f(5))],
        dict(K=64, N=5, block_size=64, quant_type=1),
        constant=("b", "absmax"),
    ),
    "QuantizeLinear": Case(MS, "QuantizeLinear", [("x", _f(2, 3)), ("s", _SCALE), ("z", _I8_ONE)], constant=("s", "z")),
    "DequantizeLinear": Case(
        MS, "DequantizeLinear", [("x", np.zeros((2, 3), I8)), ("s", _SCALE), ("z", _I8_ONE)], constant=("s", "z")
    ),
    # Transformer fusions
    "Gelu": Case(MS, "Gelu", [("x", _f(2, 3, 4))]),
    "FastGelu": Case(MS, "FastGelu", [("x", _f(2, 3, 4)), ("bias", _f(4))]),
    "QuickGelu": Case(MS, "QuickGelu", [("x", _f(2, 3, 4))], dict(alpha=1.5)),
    "BiasGelu": Case(MS, "BiasGelu", [("x", _f(2, 3, 4)), ("bias", _f(4))]),
    "BiasAdd": Case(
        MS,
        "BiasAdd",
        [("x", _f(2, 3, 4)), ("bias", _f(4)), ("skip", _f(2, 3, 4))],
        expected=[((2, 3, 4), TensorProto.FLOAT)],  # CUDA-only op: its schema says Y is shaped like X
    ),
    "SkipLayerNormalization": Case(
        MS,
        "SkipLayerNormalization",
        [("x", _f(2, 3, 8)), ("skip", _f(2, 3, 8)), ("gamma", _f(8)), ("beta", _f(8)), ("bias", _f(8))],
        outputs=4,
    ),
    "SkipLayerNormalization-broadcast-skip": Case(
        MS, "SkipLayerNormalization", [("x", _f(2, 3, 8)), ("skip", _f(3, 8)), ("gamma", _f(8))]
    ),
    "SkipSimplifiedLayerNormalization": Case(
        MS,
        "SkipSimplifiedLayerNormalization",
        [("x", _f(2, 3, 8)), ("skip", _f(2, 3, 8)), ("gamma", _f(8))],
        outputs=4,
    ),
    "LayerNormalization-opset13": Case(
        "",
        "LayerNormalization",
        [("x", _f(2, 3, 8)), ("g", _f(3, 8)), ("b", _f(3, 8))],
        dict(axis=1),
        outputs=3,
        opset=13,
    ),
    "SimplifiedLayerNormalization": Case(
        "", "SimplifiedLayerNormalization", [("x", _f(2, 3, 8)), ("g", _f(8))], outputs=2
    ),
}


def _case_model(case: Case) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """The case's model (outputs y0, y1, ..., then those of ``after``) and the feeds for its runtime inputs."""
    given = [(n, a) for n, a in case.inputs if a is not None]
    inits = [numpy_helper.from_array(a, n) for n, a in given if n in case.constant]
    inits += [numpy_helper.from_array(a, n) for n, a in case.weights.items()]
    feeds = {n: a for n, a in given if n not in case.constant}
    inputs = {n: (helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()}
    outputs = [f"y{i}" for i in range(case.outputs)]
    names = [n if a is not None else "" for n, a in case.inputs]
    nodes = [helper.make_node(case.op_type, names, outputs, domain=case.domain, **case.attrs), *case.after]
    return _model(nodes, inputs, outputs + [o for n in case.after for o in n.output], inits, opset=case.opset), feeds


def _standin_types(model: ModelProto) -> dict[str, tuple[tuple[int, ...] | None, int]]:
    """Shapes and dtypes that onnx's inference gives the stand-in model's tensors (one pass, no symbolic inference)."""
    standin = standin_model(model)
    inferred = onnx.shape_inference.infer_shapes(standin, check_type=False, strict_mode=False, data_prop=True)
    out = {}
    for vi in itertools.chain(inferred.graph.value_info, inferred.graph.output):
        tt = vi.type.tensor_type
        known = tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)
        out[vi.name] = (tuple(d.dim_value for d in tt.shape.dim) if known else None, tt.elem_type)
    return out


CASES.update(_reorder_cases())


@pytest.mark.ort
@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_matches_onnxruntime(name: str):
    case = CASES[name]
    model, feeds = _case_model(case)
    assert needs_standins(model)
    if case.expected is not None:
        real = dict(zip([f"y{i}" for i in range(case.outputs)], case.expected))
    else:
        real = _run_all(model, feeds)
    types = _standin_types(model)
    for output, expected in real.items():
        assert types.get(output) == expected, (output, types.get(output), expected)


def _behind_unknown_ranks(model: ModelProto) -> ModelProto:
    """The model with each runtime input first passed through a com.microsoft Gelu (itself a stand-in): the op's
    inputs then have no known rank when the stand-in is built, so its rank-free form is what gets inferred."""
    model = ModelProto.FromString(model.SerializeToString())
    gelus = []
    for vi in model.graph.input:
        gelus.append(helper.make_node("Gelu", [f"{vi.name}_raw"], [vi.name], domain=MS))
        vi.name = f"{vi.name}_raw"
    nodes = gelus + list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


_LAYOUT_CASES = [
    n for n in CASES if n.startswith(("FusedMatMul-", "TransposeMatMul", "ReorderInput-")) or "channels-last" in n
]


@pytest.mark.ort
@pytest.mark.parametrize("name", [n for n in _LAYOUT_CASES if CASES[n].opset >= 14])
def test_layout_rules_hold_when_the_input_rank_is_unknown(name: str):
    case = CASES[name]
    model, feeds = _case_model(case)
    real = _run_all(model, feeds)
    types = _standin_types(_behind_unknown_ranks(model))
    for output, expected in real.items():
        assert types.get(output) == expected, (output, types.get(output), expected)


@pytest.mark.ort
def test_ops_only_symbolic_inference_knows_are_inferred_after_the_stand_ins():
    pytest.importorskip("sympy")
    nodes = [
        helper.make_node("Attention", ["x", "wa", "ba"], ["a"], domain=MS, num_heads=4),
        helper.make_node("SkipLayerNormalization", ["a", "x", "g", "b"], ["ln"], domain=MS),
        helper.make_node("FusedMatMul", ["ln", "w"], ["y"], domain=MS, transB=1),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    inits = [_weight("wa", 32, 96), _weight("ba", 96), _weight("g", 32), _weight("b", 32), _weight("w", 16, 32)]
    model = _model(nodes, {"x": (TensorProto.FLOAT, [2, 8, 32])}, ["z"], inits, opset=13)
    real = _run_all(model)
    graph = load_graph(model)
    assert {name: (graph.tensors[name].shape, graph.tensors[name].dtype) for name in real} == real
    assert not graph.warnings


def test_every_rule_in_the_table_is_exercised():
    covered = {(c.domain, c.op_type) for c in CASES.values()}
    missing = set(STANDINS) - covered - {(MS, "FusedMatMulActivation")}  # no CPU kernel; same builder as FusedMatMul
    if _nchwc_block() <= 1:  # a CPU without NCHWc kernels
        missing -= {(NCHWC, "ReorderInput")}
    assert not missing


# -------------------------------------------------------------------------------------------------------------
# The stand-in model itself


def _gelu_then_matmul(opset: int) -> ModelProto:
    """Gelu feeding a transposed FusedMatMul operand: the operand's rank is unknown when the stand-in is built."""
    nodes = [
        helper.make_node("Gelu", ["x"], ["g"], domain=MS),
        helper.make_node("FusedMatMul", ["x", "g"], ["y"], domain=MS, transB=1),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    return _model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 8, 5])}, ["z"], opset=opset)


def test_the_callers_model_is_never_modified_and_names_are_kept():
    model = _gelu_then_matmul(17)
    before = model.SerializeToString()
    standin = standin_model(model)
    assert model.SerializeToString() == before
    assert {n.domain for n in standin.graph.node} == {""}
    produced = {o for n in standin.graph.node for o in n.output}
    assert {"g", "y", "z"} <= produced
    assert len(produced) == len({o for n in standin.graph.node for o in n.output if o})  # each tensor produced once


def test_an_operand_of_unknown_rank_is_reordered_by_a_reshape_that_onnx_propagates():
    standin = standin_model(_gelu_then_matmul(17))
    assert "Reshape" in {n.op_type for n in standin.graph.node}
    assert _standin_types(_gelu_then_matmul(17))["z"] == ((2, 3, 8, 8), TensorProto.FLOAT)


def test_before_opset_14_more_passes_give_the_reshaped_operand_a_transpose():
    # Before opset 14 onnx does not propagate the Reshape that stands in for the transposed operand of unknown
    # rank. The stand-in step's second pass knows the rank and stands in a Transpose: no step after it is needed.
    model = _gelu_then_matmul(13)
    inferred = infer(ModelProto.FromString(model.SerializeToString()), read_graph(model.graph))
    assert inferred.steps == ("stand-ins",)
    assert inferred.types["y"].shape == (2, 3, 8, 8)
    assert [n.op_type for n in inferred.model.model.graph.node] == ["Gelu", "FusedMatMul", "Relu"]  # the real ops
    assert inferred.warnings == []
    assert load_graph(model).tensors["z"].shape == (2, 3, 8, 8)


def test_ops_without_a_rule_and_standard_ops_are_left_alone():
    attention = helper.make_node("Attention", ["x", "w", "b"], ["a"], domain=MS, num_heads=2)
    norm = helper.make_node("LayerNormalization", ["x", "g"], ["n"], axis=-1)
    model = _model([attention, norm], {"x": (TensorProto.FLOAT, [1, 4, 8])}, ["a", "n"],
                   [_weight("w", 8, 24), _weight("b", 24), _weight("g", 8)])  # fmt: skip
    assert not needs_standins(model)
    standin = standin_model(model)
    assert [(n.domain, n.op_type) for n in standin.graph.node] == [(MS, "Attention"), ("", "LayerNormalization")]


def test_ops_inside_subgraphs_get_stand_ins_and_their_shapes():
    def branch(name: str) -> onnx.GraphProto:
        conv = helper.make_node("FusedConv", ["x", "w"], [f"{name}_c"], domain=MS, pads=[2, 0, 0, 0], activation="Relu")
        relu = helper.make_node("Relu", [f"{name}_c"], [f"{name}_out"])
        return helper.make_graph([conv, relu], name, [], [onnx.ValueInfoProto(name=f"{name}_out")])

    cond = helper.make_node("If", ["flag"], ["y"], then_branch=branch("then"), else_branch=branch("else"))
    model = _model(
        [cond],
        {"x": (TensorProto.FLOAT, [1, 4, 6, 6]), "flag": (TensorProto.BOOL, [])},
        ["y"],
        [_weight("w", 8, 4, 3, 3)],
    )
    graph = load_graph(model)
    assert graph.tensors["y"].shape == (1, 8, 6, 4)
    inner = graph.nodes[0].subgraphs["then_branch"]
    assert inner.tensors["then_c"].shape == (1, 8, 6, 4)
