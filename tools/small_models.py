"""Small models that run in 0.05 to 2 ms, built with onnx.helper for tools/accuracy.py's light set: voice-activity
detectors (a convolutional front end, then an LSTM or a GRU with a state input, inside the branches of an If on the
sample rate, as silero-vad has them), a keyword spotter's plain LSTM, and tiny MLP and CNN classifiers. Their
per-run cost, control flow and recurrent steps weigh on their time as they do not on a large model's.

Each builder is deterministic (weights from a seeded generator). ``build(name, folder)`` writes NAME.onnx there
once and returns its path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
SAMPLES = 512  # a voice-activity frame: 32 ms at 16 kHz
STATE = 64  # the recurrent state's width in the voice-activity models


class _Weights:
    """Initializers of one graph from one seeded generator, named with a prefix."""

    def __init__(self, prefix: str, seed: int) -> None:
        self.prefix, self.rng, self.tensors = prefix, np.random.default_rng(seed), []  # type: ignore[var-annotated]

    def add(self, name: str, *shape: int, scale: float = 0.1) -> str:
        full = f"{self.prefix}{name}"
        values = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.tensors.append(numpy_helper.from_array(values, full))
        return full

    def ints(self, name: str, values: list[int]) -> str:
        full = f"{self.prefix}{name}"
        self.tensors.append(numpy_helper.from_array(np.array(values, np.int64), full))
        return full


def _rate_branch(prefix: str, cell: str, seed: int, stride: int) -> onnx.GraphProto:
    """One sample rate's detector: x (1, SAMPLES) -> Conv1d 1->32 (kernel 2*stride, stride ``stride``) -> Relu ->
    Conv1d 32->STATE (kernel 3, stride 2) -> Relu -> (T, 1, STATE) -> ``cell`` (LSTM or GRU, hidden STATE, from the
    state input's slices) -> its last hidden state -> Gemm STATE->1 -> Sigmoid; the new state beside it."""
    w = _Weights(prefix, seed)
    p = prefix
    gates = 4 if cell == "LSTM" else 3
    cell_inputs = [f"{p}seq", w.add("W", 1, gates * STATE, STATE), w.add("R", 1, gates * STATE, STATE), "", ""]
    nodes = [
        helper.make_node("Reshape", ["x", w.ints("as_signal", [1, 1, SAMPLES])], [f"{p}signal"]),
        helper.make_node(
            "Conv", [f"{p}signal", w.add("k1", 32, 1, 2 * stride), w.add("b1", 32)], [f"{p}c1"], strides=[stride]
        ),
        helper.make_node("Relu", [f"{p}c1"], [f"{p}r1"]),
        helper.make_node("Conv", [f"{p}r1", w.add("k2", STATE, 32, 3), w.add("b2", STATE)], [f"{p}c2"], strides=[2]),
        helper.make_node("Relu", [f"{p}c2"], [f"{p}r2"]),
        helper.make_node("Transpose", [f"{p}r2"], [f"{p}seq"], perm=[2, 0, 1]),
        helper.make_node("Gather", ["state", w.ints("first", [0])], [f"{p}h0"], axis=0),
    ]
    if cell == "LSTM":
        nodes.append(helper.make_node("Gather", ["state", w.ints("second", [1])], [f"{p}c0"], axis=0))
        nodes.append(
            helper.make_node(
                "LSTM", [*cell_inputs, f"{p}h0", f"{p}c0"], ["", f"{p}h", f"{p}c"], hidden_size=STATE, name=f"{p}lstm"
            )
        )
        nodes.append(helper.make_node("Concat", [f"{p}h", f"{p}c"], [f"{p}state"], axis=0))
    else:
        nodes.append(
            helper.make_node(
                "GRU", [*cell_inputs, f"{p}h0"], ["", f"{p}h"], hidden_size=STATE, linear_before_reset=1, name=f"{p}gru"
            )
        )
        nodes.append(helper.make_node("Concat", [f"{p}h", f"{p}h"], [f"{p}state"], axis=0))
    nodes += [
        helper.make_node("Reshape", [f"{p}h", w.ints("as_row", [1, STATE])], [f"{p}row"]),
        helper.make_node("Gemm", [f"{p}row", w.add("head", STATE, 1), w.add("head_b", 1)], [f"{p}logit"]),
        helper.make_node("Sigmoid", [f"{p}logit"], [f"{p}prob"]),
    ]
    outputs = [
        helper.make_tensor_value_info(f"{p}prob", TensorProto.FLOAT, [1, 1]),
        helper.make_tensor_value_info(f"{p}state", TensorProto.FLOAT, [2, 1, STATE]),
    ]
    return helper.make_graph(nodes, f"{p}branch", [], outputs, w.tensors)


def voice_activity(cell: str) -> onnx.ModelProto:
    """x (1, SAMPLES) float, state (2, 1, STATE) float, sr int64 scalar -> If(sr == 8000): the 8 kHz detector
    (stride 16: 31 and 15 positions, 15 recurrent steps), else the 16 kHz one (stride 8: 63 and 31 positions, 31
    steps) -> (probability, new state). Random inputs (an sr of 0) run the 16 kHz branch, the slower one, which
    the prediction of an If whose condition is not known follows."""
    graph = helper.make_graph(
        [
            helper.make_node("Equal", ["sr", "rate8k"], ["narrow"]),
            helper.make_node(
                "If",
                ["narrow"],
                ["prob", "new_state"],
                then_branch=_rate_branch("k8_", cell, 2, 16),
                else_branch=_rate_branch("k16_", cell, 1, 8),
                name="rate",
            ),
        ],
        f"vad_{cell.lower()}",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SAMPLES]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, STATE]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [
            helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1]),
            helper.make_tensor_value_info("new_state", TensorProto.FLOAT, [2, 1, STATE]),
        ],
        [numpy_helper.from_array(np.array(8000, np.int64), "rate8k")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def keyword_lstm() -> onnx.ModelProto:
    """A keyword spotter: 49 frames of 40 filterbank features (1 s) -> LSTM hidden 128 -> the last step's hidden
    state -> Gemm 128->12 -> Softmax."""
    w = _Weights("", 3)
    nodes = [
        helper.make_node(
            "LSTM", ["frames", w.add("W", 1, 512, 40), w.add("R", 1, 512, 128)], ["", "h"], hidden_size=128, name="lstm"
        ),
        helper.make_node("Reshape", ["h", w.ints("as_row", [1, 128])], ["row"]),
        helper.make_node("Gemm", ["row", w.add("head", 128, 12), w.add("head_b", 12)], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"]),
    ]
    graph = helper.make_graph(
        nodes,
        "keyword_lstm",
        [helper.make_tensor_value_info("frames", TensorProto.FLOAT, [49, 1, 40])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 12])],
        w.tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def tiny_mlp() -> onnx.ModelProto:
    """256 features -> Gemm 256->512 -> Relu -> Gemm 512->512 -> Relu -> Gemm 512->10 -> Softmax."""
    w = _Weights("", 4)
    nodes = [
        helper.make_node("Gemm", ["x", w.add("w1", 256, 512), w.add("b1", 512)], ["g1"]),
        helper.make_node("Relu", ["g1"], ["r1"]),
        helper.make_node("Gemm", ["r1", w.add("w2", 512, 512), w.add("b2", 512)], ["g2"]),
        helper.make_node("Relu", ["g2"], ["r2"]),
        helper.make_node("Gemm", ["r2", w.add("w3", 512, 10), w.add("b3", 10)], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])],
        w.tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def tiny_cnn() -> onnx.ModelProto:
    """An MNIST classifier: (1, 1, 28, 28) -> Conv 1->16 3x3 -> Relu -> MaxPool 2 -> Conv 16->32 3x3 -> Relu ->
    MaxPool 2 -> Flatten -> Gemm 800->10 -> Softmax."""
    w = _Weights("", 5)
    nodes = [
        helper.make_node("Conv", ["image", w.add("k1", 16, 1, 3, 3), w.add("b1", 16)], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", w.add("k2", 32, 16, 3, 3), w.add("b2", 32)], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["flat"]),
        helper.make_node("Gemm", ["flat", w.add("head", 800, 10), w.add("head_b", 10)], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])],
        w.tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


# name -> (builder, family as tools/accuracy.py's family lines name it)
MODELS: dict[str, tuple[Callable[[], onnx.ModelProto], str]] = {
    "vad_lstm": (lambda: voice_activity("LSTM"), "small-recurrent"),
    "vad_gru": (lambda: voice_activity("GRU"), "small-recurrent"),
    "keyword_lstm": (keyword_lstm, "small-recurrent"),
    "tiny_mlp": (tiny_mlp, "small-classifier"),
    "tiny_cnn": (tiny_cnn, "small-classifier"),
}


def build(name: str, folder: Path) -> Path:
    """NAME.onnx in ``folder``, built (and checked) the first time."""
    path = Path(folder) / f"{name}.onnx"
    if not path.exists():
        model = MODELS[name][0]()
        onnx.checker.check_model(model)
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(path))
    return path
