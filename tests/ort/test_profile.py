"""Per-node profiles: kernels mapped back through onnxruntime's fusions, removals, folding and NCHWc layout."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxroof.ort.sessions
from onnxroof.errors import UserError
from onnxroof.load import load_graph
from onnxroof.ort.mapping import MERGED, REMOVED, name_candidates, tensor_candidate
from onnxroof.ort.profile import FLOOR_S, NodeProfile, profile_nodes, split_runs
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.ort.sessions import runnable_model
from tests.helpers import IR_VERSION, LIGHT_DIR, cuda_works

FAST = {"runs": 3, "warmup": 1}
_rng = np.random.default_rng(0)


def _weight(name: str, shape: tuple[int, ...]) -> TensorProto:
    return numpy_helper.from_array(_rng.standard_normal(shape).astype(np.float32), name)


def _model(
    nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: dict[str, list[int]], inits: list[TensorProto]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def _conv_block(named: bool = True) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> Add(x) -> Identity -> Relu, on 16 channels (NCHWc-friendly)."""

    def name(n: str) -> str:
        return n if named else ""

    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name=name("conv"), pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["bn"], name=name("bn")),
        helper.make_node("Relu", ["bn"], ["r"], name=name("relu")),
        helper.make_node("Add", ["r", "x"], ["a"], name=name("add")),
        helper.make_node("Identity", ["a"], ["i"], name=name("ident")),
        helper.make_node("Relu", ["i"], ["y"], name=name("relu2")),
    ]
    inits = [_weight("w", (16, 16, 3, 3)), _weight("b", (16,))]
    inits += [_weight(name, (16,)) for name in ("s", "bb", "m")]
    inits.append(numpy_helper.from_array(np.full(16, 2.0, np.float32), "v"))
    return _model(nodes, {"x": [1, 16, 8, 8]}, {"y": [1, 16, 8, 8]}, inits)


def _gemm_chain() -> onnx.ModelProto:
    """Gemm -> Relu (FusedGemm), MatMul -> Add (Gemm), Dropout at the end (kept: it writes the graph output)."""
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="gemm", transB=1),
        helper.make_node("Relu", ["g"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "b2"], ["a"], name="add"),
        helper.make_node("Dropout", ["a"], ["y"], name="drop"),
    ]
    inits = [_weight("w", (32, 32)), _weight("b", (32,)), _weight("w2", (32, 16)), _weight("b2", (16,))]
    return _model(nodes, {"x": [4, 32]}, {"y": [4, 16]}, inits)


def _engine_node_of(profile: NodeProfile, original: str) -> Any:
    return next(n for n in profile.nodes if n.name == profile.mapping[original])


def _check_complete(profile: NodeProfile, model: onnx.ModelProto) -> None:
    """Every runtime node of the analysis is mapped or explained, exactly once; every timed kernel is mapped or
    engine-only; the mapping and the covers agree."""
    graph = load_graph(model)
    unmapped = {u.name: u.reason for u in profile.unmapped}
    for node in graph.nodes:
        if not node.folded:
            assert (node.name in profile.mapping) != (node.name in unmapped), node.name
    engine_names = [n.name for n in profile.nodes]
    assert len(set(engine_names)) == len(engine_names)
    for node in profile.nodes:
        if node.median_s is not None:
            assert node.engine_only != bool(node.covers), node.name
            # The fast estimate averages the fastest runs: never above the median of the same runs.
            assert node.fast_s is not None and 0 < node.fast_s <= node.median_s
        assert node.floor_dominated == (node.median_s is not None and node.median_s < FLOOR_S)
        for original in node.covers:
            assert profile.mapping[original] == node.name
    assert sorted(profile.mapping) == sorted(c for n in profile.nodes for c in n.covers)


# -------------------------------------------------------------------------------------------------------------
# Fusions and removals


@pytest.mark.ort
@pytest.mark.parametrize("opt_level", ["extended", "all"])
def test_conv_bn_relu_is_one_engine_node(opt_level: str) -> None:
    model = _conv_block()
    profile = profile_nodes(runnable_model(model), SessionSpec(opt_level=opt_level), **FAST)
    fused = _engine_node_of(profile, "conv")
    assert set(fused.covers) == {"conv", "bn", "relu"}
    # A kernel runs inside its model run, so its median over the profiled runs is at most the runs' median.
    assert fused.median_s is not None and fused.median_s <= profile.run_median_s
    assert profile.runs == FAST["runs"]
    expected = {"extended": ("com.microsoft", "FusedConv"), "all": ("com.microsoft.nchwc", "Conv")}[opt_level]
    assert (fused.domain, fused.op_type) == expected
    assert {u.name: u.reason for u in profile.unmapped} == {"ident": REMOVED}
    _check_complete(profile, model)


@pytest.mark.ort
def test_add_and_relu_fuse_into_an_nchwc_conv() -> None:
    """Conv+BN and a second Conv meet in Add -> Relu: at "all" the sum and the activation join one NCHWc Conv,
    which is named after the BatchNormalization's output and writes none of the original tensors."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["b1"], name="bn1"),
        helper.make_node("Conv", ["x", "w2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["b1", "c2"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu"),
    ]
    inits = [_weight("w1", (16, 16, 3, 3)), _weight("w2", (16, 16, 1, 1))]
    inits += [_weight(name, (16,)) for name in ("s", "bb", "m")]
    inits.append(numpy_helper.from_array(np.full(16, 2.0, np.float32), "v"))
    model = _model(nodes, {"x": [1, 16, 8, 8]}, {"y": [1, 16, 8, 8]}, inits)
    profile = profile_nodes(runnable_model(model), SessionSpec(opt_level="all"), **FAST)
    fused = _engine_node_of(profile, "add")
    assert (fused.domain, fused.op_type) == ("com.microsoft.nchwc", "Conv")
    assert set(fused.covers) == {"conv1", "bn1", "add", "relu"}
    assert _engine_node_of(profile, "conv2").covers == ("conv2",)
    _check_complete(profile, model)


@pytest.mark.ort
def test_nchwc_reorders_are_engine_only_with_their_time() -> None:
    profile = profile_nodes(runnable_model(_conv_block()), SessionSpec(opt_level="all"), **FAST)
    reorders = [n for n in profile.nodes if n.op_type in ("ReorderInput", "ReorderOutput")]
    assert reorders
    assert all(n.engine_only and not n.covers and n.median_s is not None for n in reorders)


@pytest.mark.ort
def test_disable_keeps_every_node() -> None:
    profile = profile_nodes(runnable_model(_conv_block()), SessionSpec(opt_level="disable"), **FAST)
    assert profile.unmapped == ()
    assert all(len(n.covers) == 1 and n.name == n.covers[0] for n in profile.nodes)


@pytest.mark.ort
def test_gemm_relu_and_matmul_add() -> None:
    model = _gemm_chain()
    profile = profile_nodes(runnable_model(model), SessionSpec(opt_level="all"), **FAST)
    fused_gemm = _engine_node_of(profile, "gemm")
    assert fused_gemm.op_type == "FusedGemm" and set(fused_gemm.covers) == {"gemm", "relu"}
    matmul_add = _engine_node_of(profile, "mm")
    assert matmul_add.op_type == "Gemm" and set(matmul_add.covers) == {"mm", "add"}
    assert profile.mapping["drop"] == "drop"
    _check_complete(profile, model)


@pytest.mark.ort
def test_unnamed_nodes_use_the_analysis_names() -> None:
    model = _conv_block(named=False)
    profile = profile_nodes(runnable_model(model), SessionSpec(opt_level="all"), **FAST)
    assert set(_engine_node_of(profile, "Conv_0").covers) == {"Conv_0", "BatchNormalization_1", "Relu_2"}
    assert {u.name for u in profile.unmapped} == {"Identity_4"}
    _check_complete(profile, model)


@pytest.mark.ort
def test_the_callers_model_is_left_as_it_was() -> None:
    runnable = runnable_model(_conv_block(named=False))
    before = runnable.model.SerializeToString()
    profile_nodes(runnable, SessionSpec(opt_level="disable"), **FAST)
    profile_nodes(runnable, SessionSpec(opt_level="all"), **FAST)
    assert runnable.model.SerializeToString() == before


@pytest.mark.ort
def test_engine_model_is_the_profiled_graph() -> None:
    """Analyzing the engine model names its nodes exactly as the profile does."""
    profile = profile_nodes(runnable_model(_conv_block(named=False)), SessionSpec(opt_level="all"), **FAST)
    graph = load_graph(profile.engine_model)
    assert [n.name for n in graph.nodes if not n.folded] == [n.name for n in profile.nodes]


@pytest.mark.ort
def test_folding_and_common_subexpressions() -> None:
    """Two identical Relus merge into one; Shape of a static shape folds; neither has a kernel."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ra"),
        helper.make_node("Relu", ["x"], ["b"], name="rb"),
        helper.make_node("Add", ["a", "b"], ["c"], name="add"),
        helper.make_node("Shape", ["c"], ["s"], name="shape"),
        helper.make_node("Reshape", ["c", "s"], ["y"], name="reshape"),
    ]
    model = _model(nodes, {"x": [2, 8]}, {"y": [2, 8]}, [])
    profile = profile_nodes(runnable_model(model), SessionSpec(opt_level="basic"), **FAST)
    reasons = {u.name: u.reason for u in profile.unmapped}
    assert set(reasons) == {"shape", "ra"} or set(reasons) == {"shape", "rb"}
    assert reasons["shape"].startswith("folded")
    assert MERGED in reasons.values()
    _check_complete(profile, model)


@pytest.mark.ort
def test_control_flow_subgraph_kernels_are_not_counted_twice() -> None:
    def branch(op: str, out: str) -> onnx.GraphProto:
        value = helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 8])
        return helper.make_graph([helper.make_node(op, ["x"], [out])], op, [], [value])

    then_branch, else_branch = branch("Relu", "t"), branch("Neg", "e")
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="sum", keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["cond"], name="gt"),
        helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_branch, else_branch=else_branch),
    ]
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    model = _model(nodes, {"x": [2, 8]}, {"y": [2, 8]}, [zero])
    profile = profile_nodes(runnable_model(model), SessionSpec(opt_level="disable"), **FAST)
    assert [n.name for n in profile.nodes] == ["sum", "gt", "if"]
    assert all(n.median_s is not None for n in profile.nodes)


# -------------------------------------------------------------------------------------------------------------
# The JSON contract, files, interrupts


@pytest.mark.ort
def test_to_dict_is_json() -> None:
    profile = profile_nodes(runnable_model(_gemm_chain()), **FAST)
    data = profile.to_dict()
    assert set(data) >= {
        "model",
        "provider",
        "requested_provider",
        "threads",
        "opt_level",
        "runs",
        "warmup",
        "run_median_s",
        "kernel_sum_s",
        "floor_s",
        "nodes",
        "unmapped",
        "mapping",
        "notes",
        "warnings",
    }
    assert data["provider"] == "CPUExecutionProvider" and data["runs"] == FAST["runs"]
    node_keys = {
        "name",
        "op_type",
        "domain",
        "provider",
        "median_s",
        "fast_s",
        "covers",
        "engine_only",
        "floor_dominated",
    }
    assert set(data["nodes"][0]) == node_keys
    json.dumps(data)


@pytest.mark.ort
def test_no_files_are_left(isolated_dirs: tuple[Path, Path]) -> None:
    work, temp = isolated_dirs
    profile_nodes(runnable_model(_conv_block()), **FAST)
    # onnxruntime writes a trace even for a session it then fails to create.
    broken = _model([helper.make_node("NoSuchOp", ["x"], ["y"], name="bad")], {"x": [2]}, {"y": [2]}, [])
    with pytest.raises(UserError, match="cannot load"):
        profile_nodes(runnable_model(broken), **FAST)
    assert os.listdir(work) == [] and os.listdir(temp) == []


@pytest.mark.ort
def test_a_failing_run_is_a_user_error() -> None:
    """A Reshape to a fixed shape that the (fixed) input does not fit: loads, then fails when run."""
    shape = numpy_helper.from_array(np.array([3, 5], np.int64), "shape")
    reshape = helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")
    model = _model([reshape], {"x": [2, 8]}, {"y": [3, 5]}, [shape])
    with pytest.raises(UserError, match="failed while running"):
        profile_nodes(runnable_model(model), SessionSpec(opt_level="disable"), **FAST)


@pytest.mark.ort
def test_interrupt_leaves_no_files(isolated_dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    work, temp = isolated_dirs
    real_make_session = onnxroof.ort.sessions.make_session

    class Interrupting:
        """A session that is interrupted on its third run."""

        def __init__(self, session: Any) -> None:
            self.session, self.calls = session, 0

        def run(self, *args: Any) -> Any:
            self.calls += 1
            if self.calls == 3:
                raise KeyboardInterrupt
            return self.session.run(*args)

        def get_outputs(self) -> Any:
            return self.session.get_outputs()

        def end_profiling(self) -> str:
            return self.session.end_profiling()

    def make_session(*args: Any, **kwargs: Any) -> tuple[Any, str]:
        session, provider = real_make_session(*args, **kwargs)
        return Interrupting(session), provider

    monkeypatch.setattr(onnxroof.ort.sessions, "make_session", make_session)
    with pytest.raises(KeyboardInterrupt):
        profile_nodes(runnable_model(_conv_block()), runs=10, warmup=1)
    assert os.listdir(work) == [] and os.listdir(temp) == []


@pytest.mark.ort
def test_cuda_fallback_is_reported() -> None:
    if cuda_works():
        pytest.skip("a GPU is available here")
    profile = profile_nodes(runnable_model(_gemm_chain()), SessionSpec("cuda", allow_fallback=True), **FAST)
    assert (profile.requested_provider, profile.provider) == ("CUDAExecutionProvider", "CPUExecutionProvider")


# -------------------------------------------------------------------------------------------------------------
# The trace and names (pure)


def test_split_runs_drops_warmup_and_subgraph_kernels() -> None:
    def kernel(name: str, ts: int, dur: int) -> dict[str, Any]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "args": {"op_name": "X"}}

    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 50},
        kernel("a", 1, 10),
        {"cat": "Session", "name": "model_run", "ts": 100, "dur": 50},
        kernel("a", 101, 10),
        kernel("if", 112, 20),
        kernel("inner", 115, 5),  # runs inside "if"
        kernel("b", 133, 3),
        {"cat": "Node", "name": "b_fence_before", "ts": 132, "dur": 0},
    ]
    runs, times = split_runs(events, 1)
    assert [[e["name"] for e in run] for run in runs] == [["a_kernel_time", "if_kernel_time", "b_kernel_time"]]
    assert times == pytest.approx([50e-6])


def test_derived_names() -> None:
    assert "gemm" in list(name_candidates("fused gemm"))
    assert "mm" in list(name_candidates("mm/MatMulAddFusion_token_3"))
    assert list(name_candidates("/layer1/conv/Conv")) == ["/layer1/conv/Conv"]
    assert tensor_candidate("r1_nchwc") == "r1"
    assert tensor_candidate("r8_bn_nchwc_token_12") == "r8"
    assert tensor_candidate("conv") is None


# -------------------------------------------------------------------------------------------------------------
# onnx's bundled light models


@pytest.mark.ort
@pytest.mark.skipif(not (LIGHT_DIR / "light_squeezenet.onnx").exists(), reason="onnx's light models are not installed")
@pytest.mark.parametrize("opt_level", ["all", "disable"])
def test_light_model_is_fully_mapped(opt_level: str) -> None:
    runnable = runnable_model(LIGHT_DIR / "light_squeezenet.onnx")
    profile = profile_nodes(runnable, SessionSpec(opt_level=opt_level), runs=2, warmup=1)
    _check_complete(profile, runnable.model)
    graph = load_graph(runnable.model)
    runtime = [n for n in graph.nodes if not n.folded]
    assert len(profile.mapping) >= len(runtime) - 1  # its one Dropout is removed by the optimizer
    if opt_level == "all":
        assert any(len(n.covers) == 2 for n in profile.nodes)  # Conv+Relu as one NCHWc kernel
    else:  # the weights, stored as ConstantOfShape, are never timed
        assert all(n.op_type != "ConstantOfShape" for n in profile.nodes)
        assert any("ConstantOfShape" in note for note in profile.notes)
