"""Shape arithmetic on static shapes: folded at load time as an engine's constant folding folds it (costing nothing
however large its outputs), and followed through by inference across the blocks of a network without the
symbolic step or a run."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.devices import load_device
from onnxroof.load import load_graph
from onnxroof.load.fold import FOLD_LIMIT
from onnxroof.load.infer import infer
from onnxroof.load.read import read_graph
from onnxroof.predict.analysis import analyze_graph
from tests.helpers import IR_VERSION

_BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench_analyze.py"
_spec = importlib.util.spec_from_file_location("onnxroof_bench_analyze", _BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _mask_model(size: int) -> onnx.ModelProto:
    """y = x + mask, x [1, 3, S, S] a runtime input and mask [S, S] computed from Shape(x) only: S = Shape(x)[2];
    r = Range(0, S, 1); eye = Equal(Unsqueeze(r, 1), Unsqueeze(r, 0)); zeros = ConstantOfShape([S, S]);
    low = Expand(-100, Shape(zeros)); mask = Where(eye, Tile(zeros, [1, 1]), low): 0 on the diagonal, -100 off it,
    the pattern a legacy export writes for an attention mask."""
    ints = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["two"], value=ints("two", 2)),
        helper.make_node("Gather", ["s", "two"], ["n"], axis=0),
        helper.make_node("Constant", [], ["zero"], value=ints("zero", 0)),
        helper.make_node("Constant", [], ["one"], value=ints("one", 1)),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Constant", [], ["ax0"], value=ints("ax0", [0])),
        helper.make_node("Constant", [], ["ax1"], value=ints("ax1", [1])),
        helper.make_node("Unsqueeze", ["r", "ax1"], ["col"]),
        helper.make_node("Unsqueeze", ["r", "ax0"], ["row"]),
        helper.make_node("Equal", ["col", "row"], ["eye"]),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "n1"], ["square"], axis=0),
        helper.make_node(
            "ConstantOfShape", ["square"], ["zeros"], value=numpy_helper.from_array(np.zeros(1, np.float32))
        ),
        helper.make_node("Constant", [], ["minus"], value=numpy_helper.from_array(np.array(-100.0, np.float32))),
        helper.make_node("Shape", ["zeros"], ["zeros_shape"]),
        helper.make_node("Expand", ["minus", "zeros_shape"], ["low"]),
        helper.make_node("Constant", [], ["reps"], value=ints("reps", [1, 1])),
        helper.make_node("Tile", ["zeros", "reps"], ["tiled"]),
        helper.make_node("Where", ["eye", "tiled", "low"], ["mask"]),
        helper.make_node("Add", ["x", "mask"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "mask",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, size, size])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


@pytest.mark.parametrize("size", [4, 128])
def test_shape_arithmetic_on_static_shapes_folds_and_the_real_op_keeps_its_cost(size: int):
    # S = 4: the mask's 16 values are computed; S = 128: its 16,384 are more than folding materializes, and it
    # folds all the same, since folding follows from the inputs being constant, not from the values being known.
    assert (size * size <= FOLD_LIMIT) == (size == 4)
    graph = load_graph(_mask_model(size))
    runtime = [n.name for n in graph.nodes if not n.folded]
    assert runtime == ["add"]
    assert graph.tensors["mask"].shape == (size, size) and graph.tensors["mask"].is_weight
    analysis = analyze_graph(graph, load_device("v100-sxm2"))
    assert analysis.folded_nodes == len(graph.nodes) - 1 == 20
    (add,) = analysis.nodes
    elements = 3 * size * size  # the output [1, 3, S, S]
    # Add: one FLOP per output element; reads x (3 S^2 floats) and the mask (S^2 floats, a constant now), writes
    # y (3 S^2 floats); one kernel; params: the mask's S^2 elements (a float constant the node reads).
    assert add.cost.flops == elements
    assert add.cost.bytes_read == 4 * elements + 4 * size * size
    assert add.cost.bytes_written == 4 * elements
    assert add.cost.kernels == 1
    assert add.cost.params == size * size
    # The totals are the Add's alone: the 20 folded nodes cost 0 FLOPs, 0 bytes and 0 kernels.
    totals = analysis.totals
    assert (totals.flops, totals.kernels) == (elements, 1)
    assert totals.bytes_read + totals.bytes_written == add.cost.bytes_read + add.cost.bytes_written


def test_a_shape_folds_only_where_it_is_static():
    # Shape(x) of a dynamic x is only known when the model runs: it and what it feeds stay runtime nodes.
    model = _mask_model(4)
    model.graph.input[0].type.tensor_type.shape.dim[3].dim_param = "w"
    model.graph.output[0].type.tensor_type.ClearField("shape")
    graph = load_graph(model, dims={"w": 4})  # the dim is fixed: a static shape again, and it folds
    assert [n.name for n in graph.nodes if not n.folded] == ["add"]
    unknown = onnx.ModelProto()
    unknown.CopyFrom(model)
    unknown.graph.node.insert(0, helper.make_node("NonZero", ["x"], ["nz"]))  # data-dependent shape
    unknown.graph.node[1].input[0] = "nz"  # s = Shape(NonZero(x)): not known at load time
    graph = load_graph(unknown, dims={"w": 4})
    assert graph.tensors["nz"].shape is None
    assert {"NonZero", "Shape", "Gather", "Range"} <= {n.op_type for n in graph.nodes if not n.folded}


def test_a_legacy_swin_graph_is_inferred_without_the_symbolic_step_and_its_shape_arithmetic_folds():
    # Two window blocks of bench_analyze's legacy Swin export, the second shifted: each block's pads are computed
    # with Mod, which onnx's data propagation does not follow, so the second block's shapes depend on the first
    # block's folded values. The folding step follows them through in one walk: no node output is left unknown,
    # neither symbolic inference nor a run is needed, and only the network's real ops run.
    model = bench.swin_like_model(blocks=2)
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    inferred = infer(copy, read_graph(copy.graph))
    assert inferred.steps == ("onnx with data propagation", "shape arithmetic")
    graph = load_graph(model)
    assert [n.name for n in graph.nodes if any(graph.tensor(o).shape is None for o in n.outputs)] == []
    assert graph.tensors[graph.outputs[0]].shape == (1, 56, 56, 96)
    runtime = Counter(n.op_type for n in graph.nodes if not n.folded)
    # Per block: the Pad; QKV, the head split and the merge (Reshape, Transpose, Gather of q, k, v); the scale;
    # the bias add; softmax; two products and two dense layers; the shifted block's roll (Slice, Concat) and its
    # mask add. The mask itself and every shape are folded.
    assert set(runtime) == {"Pad", "Reshape", "Transpose", "MatMul", "Add", "Gather", "Mul", "Softmax"} | {
        "Slice",
        "Concat",
    }
    assert runtime["Add"] == 2 * 3 + 1  # qkv bias, position bias, dense bias; the shifted block's mask
    assert runtime["Gather"] == 2 * 3  # q, k, v (the bias table's Gather reads weights: folded)
    assert runtime["Slice"] == 4 and runtime["Concat"] == 2  # the two rolls of the shifted block
    folded = Counter(n.op_type for n in graph.nodes if n.folded)
    assert {"Range", "ConstantOfShape", "Where", "Equal", "Expand", "Tile", "Mod", "Shape"} <= set(folded)


def test_the_values_of_small_folded_nodes_are_constants_of_the_graph():
    # S = Shape(x)[2] = 4, and the 4 x 4 mask computed from it (0 on the diagonal, -100 off it) are known at load
    # time: a cost function reading them as inputs sees their values.
    graph = load_graph(_mask_model(4))
    assert int(graph.constants["n"]) == 4
    expected = np.where(np.eye(4, dtype=bool), 0.0, -100.0)
    np.testing.assert_array_equal(graph.constants["mask"], expected)
    # At S = 128 the mask's 16,384 values are more than folding materializes: only its size is known
    large = load_graph(_mask_model(128))
    assert int(large.constants["n"]) == 128 and "mask" not in large.constants
