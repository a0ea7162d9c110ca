"""A model onnxruntime runs but refuses to load once its input shapes are written in (silero-vad's): an LSTM in
each branch of an If on the sample rate, behind a branch-local If whose branch not taken cannot hold for those
shapes. Measuring and analyzing on a calibrated host load it with its inputs left open, and a run gives the
shapes inside its branches."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.load.model_spec import ModelSpec
from onnxroof.ort.relax import declare_inputs, open_inputs, refused_by_inference
from onnxroof.ort.sessions import make_session, runnable_model
from tests.helpers import IR_VERSION, calibrated_host

pytestmark = pytest.mark.ort

H = 16  # the LSTM's hidden size
FRAMES = 4  # x (1, 512) reshaped to (1, 128, 4): 4 time steps of 128 features


def rate_branch(tag: str) -> onnx.GraphProto:
    """x (1, 512) -> Reshape (1, 128, T) -> If(T == 1): Squeeze axis 2 (declared (d, 128)), else Identity
    (declared (d, 128, t)) -> Transpose (T, 1, 128) -> LSTM of hidden H from the state's first slice -> Y (T, 1, 1, H)
    -> ReduceMean. With x's shape fixed, onnxruntime's load infers the Squeeze branch too and refuses it: axis 2 is
    4, not 1. At run time T is 4 and the Identity runs. The branch's outputs declare no shape."""
    rng = np.random.default_rng(len(tag))
    squeeze = helper.make_graph(
        [
            helper.make_node("Constant", [], [f"{tag}_axis"], value=numpy_helper.from_array(np.array([2], np.int64))),
            helper.make_node("Squeeze", [f"{tag}_x3", f"{tag}_axis"], [f"{tag}_sq"]),
        ],
        f"{tag}_squeeze",
        [],
        [helper.make_tensor_value_info(f"{tag}_sq", TensorProto.FLOAT, ["d", 128])],
    )
    keep = helper.make_graph(
        [helper.make_node("Identity", [f"{tag}_x3"], [f"{tag}_id"])],
        f"{tag}_keep",
        [],
        [helper.make_tensor_value_info(f"{tag}_id", TensorProto.FLOAT, ["d", 128, "t"])],
    )
    nodes = [
        helper.make_node("Reshape", ["x", f"{tag}_shape"], [f"{tag}_x3"]),
        helper.make_node("Shape", [f"{tag}_x3"], [f"{tag}_s"]),
        helper.make_node("Gather", [f"{tag}_s", f"{tag}_two"], [f"{tag}_t"], axis=0),
        helper.make_node("Equal", [f"{tag}_t", f"{tag}_one"], [f"{tag}_single"]),
        helper.make_node("If", [f"{tag}_single"], [f"{tag}_x2"], then_branch=squeeze, else_branch=keep),
        helper.make_node("Transpose", [f"{tag}_x2"], [f"{tag}_seq"], perm=[2, 0, 1]),
        helper.make_node("Gather", ["state", f"{tag}_zero"], [f"{tag}_h0"], axis=0),
        helper.make_node("Unsqueeze", [f"{tag}_h0", f"{tag}_axes"], [f"{tag}_h0u"]),
        helper.make_node(
            "LSTM", [f"{tag}_seq", f"{tag}_W", f"{tag}_R", "", "", f"{tag}_h0u"], [f"{tag}_Y"], hidden_size=H
        ),
        helper.make_node("ReduceMean", [f"{tag}_Y"], [f"{tag}_out"], keepdims=0),
    ]
    weights = [
        numpy_helper.from_array((rng.standard_normal((1, 4 * H, 128)) * 0.05).astype(np.float32), f"{tag}_W"),
        numpy_helper.from_array((rng.standard_normal((1, 4 * H, H)) * 0.05).astype(np.float32), f"{tag}_R"),
        numpy_helper.from_array(np.array([1, 128, -1], np.int64), f"{tag}_shape"),
        numpy_helper.from_array(np.array(0, np.int64), f"{tag}_zero"),
        numpy_helper.from_array(np.array(1, np.int64), f"{tag}_one"),
        numpy_helper.from_array(np.array(2, np.int64), f"{tag}_two"),
        numpy_helper.from_array(np.array([0], np.int64), f"{tag}_axes"),
    ]
    return helper.make_graph(
        nodes, tag, [], [helper.make_tensor_value_info(f"{tag}_out", TensorProto.FLOAT, None)], weights
    )


def voice_activity_model() -> onnx.ModelProto:
    """x (b, t) float, state (2, b, H), sr int64 scalar -> If(sr == 16000) over two rate_branch()es -> out."""
    graph = helper.make_graph(
        [
            helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
            helper.make_node(
                "If", ["is16k"], ["out"], then_branch=rate_branch("then"), else_branch=rate_branch("else"), name="If_0"
            ),
        ],
        "vad",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t"]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "b", H]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(16000, np.int64), "sr16k")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


SHAPES = {"x": (1, 512), "state": (2, 1, H)}


def test_onnxruntime_itself_refuses_the_model_with_its_shapes_written_in():
    from onnxroof.ort.sessions import ort

    fixed = runnable_model(ModelSpec(voice_activity_model(), SHAPES)).model
    with pytest.raises(Exception) as info:
        ort().InferenceSession(fixed.SerializeToString(), providers=["CPUExecutionProvider"])
    assert refused_by_inference(info.value)
    opened = open_inputs(fixed)
    assert opened is not None
    assert [len(vi.type.tensor_type.shape.dim) for vi in opened.graph.input] == [2, 3, 0]  # ranks kept
    assert all(not d.HasField("dim_value") for vi in opened.graph.input for d in vi.type.tensor_type.shape.dim)
    declare_inputs(opened, {"x": ((1, 512), TensorProto.FLOAT)})
    assert [d.dim_value for d in opened.graph.input[0].type.tensor_type.shape.dim] == [1, 512]


def test_a_session_loads_it_with_its_inputs_left_open_and_runs_the_fixed_shapes():
    fixed = runnable_model(ModelSpec(voice_activity_model(), SHAPES)).model
    session, _ = make_session(fixed)
    feeds = {"x": np.ones((1, 512), np.float32), "state": np.zeros((2, 1, H), np.float32), "sr": np.array(16000)}
    (out,) = session.run(None, feeds)
    assert out.shape == ()


def test_analyze_on_a_calibrated_host_counts_the_lstms_inside_the_branches():
    analysis = analyze(voice_activity_model(), calibrated_host(), inputs=SHAPES)
    by_op = {n.op_type: n for n in analysis.nodes}
    # The If costs its costlier branch; both branches hold one LSTM of hidden 16 over 4 steps of 128 features:
    # 4 gates * H * (I + H) MACs a step = 4 * 16 * (128 + 16) = 9216, times 4 steps = 36864 (the other nodes
    # compute no matrix product).
    assert by_op["If"].cost.macs == 36864
    assert analysis.unsupported == ()
