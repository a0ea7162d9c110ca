"""Shapes from an onnxruntime run: where shape inference leaves node outputs unknown and every input is static,
one run gives them; the nodes say so, one warning counts them; dynamic inputs never run, weights that would not
fit in memory are refused, and a run that fails leaves the inferred shapes with one warning."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxroof.ort.run_for_shapes
from onnxroof.api import analyze
from onnxroof.errors import UserError
from onnxroof.load import load_graph
from onnxroof.load.fill_from_run import ShapeRequest, ShapeRunFailed
from onnxroof.load.model_spec import ModelSpec
from onnxroof.ort.run_for_shapes import element_type, with_outputs
from onnxroof.predict.analysis import RUN_NOTE
from tests.helpers import IR_VERSION

TRIPS = 3


def stacking_loop(columns: int, after: list[onnx.NodeProto] | None = None) -> onnx.ModelProto:
    """x (1, 4) -> Loop of TRIPS iterations whose body outputs Relu(x) as a scan output -> stack (TRIPS, 1, 4)
    -> MatMul with w (4, columns) -> (TRIPS, 1, columns) -> Relu -> y.

    onnx's inference leaves a Loop's scan outputs without their first dim (the trip count is a value), and
    onnxruntime's symbolic inference fails on the body; so the stack, and every node after it, have no shape
    until the model runs."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Relu", ["x"], ["xs"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", 9, [])],
        [
            helper.make_tensor_value_info("cond_out", 9, []),
            helper.make_tensor_value_info("xs", TensorProto.FLOAT, None),
        ],
    )
    weights = np.random.default_rng(0).standard_normal((4, columns)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Loop", ["trips", ""], ["stack"], body=body, name="loop"),
            helper.make_node("MatMul", ["stack", "w"], ["mm"], name="matmul"),
            helper.make_node("Relu", ["mm"], ["y"], name="relu"),
            *(after or []),
        ],
        "stacking_loop",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info((after[-1].output[0] if after else "y"), TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(np.array(TRIPS, np.int64), "trips")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def stacking_loop_flops(columns: int) -> int:
    # Loop: its body's Relu, 1*4 = 4 FLOPs, times 3 trips = 12;
    # MatMul (3, 1, 4) x (4, n): 2 * 3*1 * 4 * n = 24n; Relu of (3, 1, n): 3n
    return 12 + 24 * columns + 3 * columns


def unknown_outputs(graph) -> list[str]:
    return [o for n in graph.nodes for o in n.outputs if o and graph.tensor(o).shape is None]


def test_inference_alone_leaves_the_stack_unknown():
    graph = load_graph(stacking_loop(8))
    assert unknown_outputs(graph) == ["stack", "mm", "y"]
    assert graph.shapes_from_run == ()


@pytest.mark.ort
def test_a_run_gives_every_shape_and_says_so():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no node is left "shape unknown": no warning per op type
        analysis = analyze(stacking_loop(8), "v100-sxm2")
    assert analysis.totals.flops == stacking_loop_flops(8)  # 12 + 192 + 24 = 228
    assert analysis.unsupported == ()
    assert [n.cost.note for n in analysis.nodes] == [RUN_NOTE] * 3
    assert [n.to_dict()["note"] for n in analysis.nodes] == [RUN_NOTE] * 3
    run_lines = [w for w in analysis.warnings if "onnxruntime run" in w]
    assert run_lines == [
        "shapes of 3 node(s) came from an onnxruntime run on random inputs, where shape inference could not infer them"
    ]
    assert not any("shape unknown" in w for w in analysis.warnings)


def test_the_run_is_asked_for_the_model_as_the_loader_was_given_it():
    seen: list[ShapeRequest] = []

    def recording(request: ShapeRequest) -> dict[str, tuple[int, tuple[int, ...]]]:
        seen.append(request)
        return {}

    model = stacking_loop(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_graph(model, inputs={"x": "1x4"}, shape_run=recording)
    (request,) = seen
    assert request.model == ModelSpec(model, {"x": (1, 4)}) and request.model.source is model
    assert request.tensors == ("stack", "mm", "y")


@pytest.mark.ort
def test_the_graph_names_the_tensors_from_the_run_with_their_shapes():
    from onnxroof.ort.run_for_shapes import shapes_from_run

    graph = load_graph(stacking_loop(8), shape_run=shapes_from_run)
    assert graph.shapes_from_run == ("stack", "mm", "y")
    assert graph.tensor("stack").shape == (TRIPS, 1, 4)
    assert graph.tensor("mm").shape == (TRIPS, 1, 8)
    assert graph.tensor("y").dtype == TensorProto.FLOAT
    assert unknown_outputs(graph) == []


@pytest.mark.ort
def test_absent_weights_run_as_random_values_of_their_shapes(tmp_path):
    # a graph-only model: w (4 x 32 floats) goes to an external file that is then removed
    path = tmp_path / "graph_only.onnx"
    onnx.save(
        stacking_loop(32),
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="graph_only.data",
        size_threshold=64,  # w (512 bytes) goes out; the trip count stays inline, as exporters keep it
    )
    os.remove(tmp_path / "graph_only.data")
    analysis = analyze(str(path), "v100-sxm2")
    assert analysis.totals.flops == stacking_loop_flops(32)  # 12 + 768 + 96 = 876
    assert analysis.unsupported == ()


def branching_model(else_nodes: list[onnx.NodeProto], else_output: str) -> onnx.ModelProto:
    """The stacking loop's stack (3, 1, 4) into an If whose condition a run computes (x is finite: true): the
    then branch multiplies it by w (4, 8) and applies Relu, the else branch is ``else_nodes``. Inference knows
    no shape inside either branch, since it does not know the stack's."""
    model = stacking_loop(8)
    graph = model.graph
    del graph.node[1:]  # the Loop stays; the branches take the MatMul and Relu over
    del graph.output[:]
    then_branch = helper.make_graph(
        [
            helper.make_node("MatMul", ["stack", "w"], ["then_mm"], name="then_matmul"),
            helper.make_node("Relu", ["then_mm"], ["then_out"], name="then_relu"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)],
    )
    else_branch = helper.make_graph(
        else_nodes, "else", [], [helper.make_tensor_value_info(else_output, TensorProto.FLOAT, None)]
    )
    graph.node.extend(
        [
            helper.make_node("ReduceMax", ["x"], ["largest"], keepdims=0, name="largest"),
            helper.make_node("IsNaN", ["largest"], ["nan"], name="isnan"),
            helper.make_node("Not", ["nan"], ["finite"], name="finite"),
            helper.make_node("If", ["finite"], ["y"], then_branch=then_branch, else_branch=else_branch, name="if"),
        ]
    )
    graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    return model


@pytest.mark.ort
def test_shapes_inside_both_branches_of_an_if_come_from_runs():
    model = branching_model([helper.make_node("Relu", ["stack"], ["else_out"], name="else_relu")], "else_out")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        analysis = analyze(model, "v100-sxm2")
    # Loop: its body's Relu of 1*4, times 3 trips = 12; If: the costlier branch, then: MatMul 2*3*1*4*8 = 192
    # + Relu of 3*1*8 = 24, so 216 (else: Relu of 3*1*4 = 12)
    by_name = {n.name: n for n in analysis.nodes}
    assert by_name["if"].cost.flops == 216
    assert by_name["loop"].cost.flops == 12
    assert analysis.unsupported == ()
    assert by_name["if"].cost.note.endswith(RUN_NOTE)
    # stack, y, then_mm, then_out, else_out: the Loop, the If and the three nodes inside its branches
    assert [w for w in analysis.warnings if "onnxruntime run" in w] == [
        "shapes of 5 node(s) came from an onnxruntime run on random inputs, where shape inference could not infer them"
    ]
    from onnxroof.ort.run_for_shapes import shapes_from_run

    graph = load_graph(model, shape_run=shapes_from_run)
    branches = {g.name: g for g in graph.nodes[-1].subgraphs.values()}
    assert branches["then"].tensor("then_mm").shape == (TRIPS, 1, 8)
    assert branches["else"].tensor("else_out").shape == (TRIPS, 1, 4)
    assert graph.tensor("y").shape == (TRIPS, 1, 8)  # the branch the run took: x is finite


@pytest.mark.ort
def test_a_branch_that_cannot_run_stays_unknown_and_is_counted():
    # the else branch reshapes the 12 elements of the stack to rows of 5: no run of it succeeds
    five = helper.make_node("Constant", [], ["five"], value=numpy_helper.from_array(np.array([-1, 5], np.int64)))
    model = branching_model([five, helper.make_node("Reshape", ["stack", "five"], ["else_out"])], "else_out")
    from onnxroof.ort.run_for_shapes import shapes_from_run

    graph = load_graph(model, shape_run=shapes_from_run)
    assert graph.tensor("y").shape == (TRIPS, 1, 8)
    assert graph.nodes[-1].subgraphs["else_branch"].tensor("else_out").shape is None
    assert graph.warnings[-1] == (
        "shapes of 4 node(s) came from an onnxruntime run on random inputs, where shape inference could not infer "
        "them; 1 node output(s) the run did not reach (a branch not taken, a failed run) stay unknown"
    )


def test_a_dynamic_input_never_runs(monkeypatch):
    def no_run(request):
        raise AssertionError("onnxruntime ran for a model with a dynamic input")

    monkeypatch.setattr(onnxroof.ort.run_for_shapes, "shapes_from_run", no_run)
    # a sequence input has no static shape: SequenceAt's output and the Relu after it stay unknown
    graph = helper.make_graph(
        [helper.make_node("SequenceAt", ["seq", "zero"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        "sequence_input",
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0, np.int64), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = analyze(model, "v100-sxm2")
    assert (
        "2 node output(s) without a shape: no onnxruntime run fills them, since input(s) 'seq' are not tensors of "
        "a static shape (--input/--dim fix a tensor's shape)"
    ) in analysis.warnings
    assert all(n.cost.note != RUN_NOTE for n in analysis.nodes)


@pytest.mark.ort
def test_weights_that_would_not_fit_are_refused(monkeypatch):
    # w is 4 x 8 floats = 128 bytes and trips 8 bytes: 136 bytes, held 4 times over = 544 > 0.8 * 400
    monkeypatch.setattr(onnxroof.ort.run_for_shapes, "available_memory", lambda: 400)
    with pytest.raises(UserError, match=r"the shapes of 3 node output\(s\) need an onnxruntime run") as err:
        analyze(stacking_loop(8), "v100-sxm2")
    assert "would not fit in the 0.0 GB of memory available" in err.value.args[0]
    # with room for them it runs: 544 <= 0.8 * 800
    monkeypatch.setattr(onnxroof.ort.run_for_shapes, "available_memory", lambda: 800)
    assert analyze(stacking_loop(8), "v100-sxm2").totals.flops == stacking_loop_flops(8)


@pytest.mark.ort
def test_a_run_that_fails_leaves_the_inferred_shapes_with_one_warning():
    # an op of a domain onnxruntime does not know: no session can be made for the model
    model = stacking_loop(8, [helper.make_node("Frobnicate", ["y"], ["z"], domain="example.custom", name="frob")])
    model.opset_import.append(helper.make_opsetid("example.custom", 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with_run = analyze(model, "v100-sxm2")
        without = analyze(load_graph(model), "v100-sxm2")
    failures = [w for w in with_run.warnings if w.startswith("onnxruntime could not run the model")]
    assert len(failures) == 1 and "Frobnicate" in failures[0]
    assert [w for w in with_run.warnings if w not in failures] == list(without.warnings)
    assert with_run.totals.flops == without.totals.flops == 12  # the Loop's body only: nothing after it is known
    assert with_run.unsupported == without.unsupported


def test_a_failure_of_the_run_function_is_a_warning(monkeypatch):
    def failing(request):
        raise ShapeRunFailed("out of luck")

    monkeypatch.setattr(onnxroof.ort.run_for_shapes, "shapes_from_run", failing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = analyze(stacking_loop(8), "v100-sxm2")
    assert (
        "onnxruntime could not run the model for the shapes inference left unknown (out of luck)" in analysis.warnings
    )
    assert analysis.totals.flops == 12


def test_outputs_are_added_typed_where_the_type_is_known():
    model = with_outputs(stacking_loop(8), ("stack", "mm", "y"), {"mm": TensorProto.FLOAT})
    added = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
    assert added == {"y": TensorProto.FLOAT, "stack": TensorProto.UNDEFINED, "mm": TensorProto.FLOAT}


def test_element_types_from_onnxruntime_names():
    assert element_type("tensor(float)") == TensorProto.FLOAT
    assert element_type("tensor(float16)") == TensorProto.FLOAT16
    assert element_type("tensor(bfloat16)") == TensorProto.BFLOAT16
    assert element_type("tensor(int64)") == TensorProto.INT64
    assert element_type("seq(tensor(float))") == TensorProto.UNDEFINED


@pytest.mark.ort
def test_the_command_line_says_it_once_and_the_json_notes_each_node(tmp_path, capsys):
    from onnxroof.cli import main

    path = tmp_path / "stacking_loop.onnx"
    onnx.save(stacking_loop(8), str(path))
    before = path.read_bytes()
    assert main(["analyze", str(path), "--format", "json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert [n["note"] for n in report["nodes"]] == [RUN_NOTE] * 3
    assert report["totals"]["flops"] == stacking_loop_flops(8)  # 228
    said = [line for line in captured.err.splitlines() if "onnxruntime run" in line]
    assert len(said) == 1 and "shapes of 3 node(s) came from an onnxruntime run" in said[0]
    assert "shape unknown" not in captured.err
    assert path.read_bytes() == before  # the user's file is never modified


def test_an_if_inlined_takes_its_branch_nodes_weights_and_outputs():
    from onnxroof.ort.branches import ELSE, THEN, Variant, ifs_reaching, inline

    bias = numpy_helper.from_array(np.ones(4, np.float32), "bias")
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["added"])],
        "then",
        [],
        [helper.make_tensor_value_info("added", TensorProto.FLOAT, None)],
        [bias],
    )
    else_branch = helper.make_graph([], "else", [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch, name="if"),
    ]
    variant = Variant(nodes, [])
    assert ifs_reaching(variant, {"added"}) == [1]
    assert ifs_reaching(variant, {"r"}) == []
    taken = inline(variant, {1: THEN})
    assert [(n.op_type, list(n.input), list(n.output)) for n in taken.nodes] == [
        ("Relu", ["x"], ["r"]),
        ("Add", ["x", "bias"], ["added"]),
        ("Identity", ["added"], ["y"]),
    ]
    assert [w.name for w in taken.weights] == ["bias"]
    # a branch that passes an outer value straight on: only the Identity is left of it
    assert [(n.op_type, list(n.input)) for n in inline(variant, {1: ELSE}).nodes[1:]] == [("Identity", ["x"])]


def test_an_output_nothing_reads_is_not_worth_a_run(monkeypatch):
    def no_run(request):
        raise AssertionError("onnxruntime ran for an output that nothing reads")

    monkeypatch.setattr(onnxroof.ort.run_for_shapes, "shapes_from_run", no_run)
    model = stacking_loop(8)
    graph = model.graph
    del graph.node[1:]  # the stack is left unread; y is Relu(x)
    graph.node.append(helper.make_node("Relu", ["x"], ["y"], name="relu"))
    analysis = analyze(model, "v100-sxm2")
    assert analysis.totals.flops == 12 + 4  # the Loop's 3 trips of Relu of 1*4, and Relu of 1*4
    assert not any("onnxruntime" in w for w in analysis.warnings)
