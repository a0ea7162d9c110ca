"""What an onnxruntime process holds beyond a graph's need, calibrated on this host from synthetic graphs.

``measure_peak_memory`` runs six small models built here (none from a model zoo), each in a fresh process:

- a one-Relu model: what any session adds to the process (``constant``);
- convolutions with large 3x3 weights, which onnxruntime reorders to its NCHWc layout (``conv``);
- fully connected layers of 16.8 MB weights as Gemm with transposed weights (``gemm``) and as MatMul
  (``matmul``);
- fully connected layers (Gemm) of 67.1 MB weights, above LARGE_WEIGHT_BYTES (``large``): the C allocator maps
  each such weight on its own and gives it back when onnxruntime frees it after prepacking, where the freed
  copies of smaller weights stay in the heap;
- a chain of 1x1 convolutions on a large activation (``activation``).

A weight kind's factor is the session's bytes less the constant, over the model's weight bytes. The chain's
tensors all have the same size ``S``; at each step of the chain a node's input and output are live, so the
estimate's peak of live activations is ``2 S`` in closed form, with the graph input or without it (from the
second step on two activations the engine allocates are live), and the activation factor is what the runs add
over ``2 S``. Each factor carries its source: the model, the bytes measured and the host.

The factors are cached as JSON beside this host's calibrated profile (``memory_factors_path``), one file per
thread count.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from onnxroof.atomic import write_text
from onnxroof.devices import Sourced
from onnxroof.ort.calibrate.host import cache_dir, cache_lock, cpu_model, host_key, ort_version
from onnxroof.ort.memory import measure_peak_memory
from onnxroof.passes.model_file import weight_bytes
from onnxroof.predict.process_memory import SessionMemoryFactors

__all__ = [
    "CHAIN_CHANNELS",
    "CHAIN_LAYERS",
    "CHAIN_SIDE",
    "FC_LAYERS",
    "FC_WIDTH",
    "LARGE_FC_LAYERS",
    "LARGE_FC_WIDTH",
    "MEASUREMENTS",
    "calibrate_memory",
    "chain_model",
    "conv_model",
    "empty_model",
    "fc_model",
    "host_memory_factors",
    "memory_factors_path",
]

CONV_CHANNELS, CONV_LAYERS, CONV_SIDE = 512, 6, 4  # 6 x 512x512x3x3 float weights: 56.6 MB
FC_WIDTH, FC_LAYERS = 2048, 4  # 4 x 2048x2048 float weights of 16.8 MB: 67.1 MB
LARGE_FC_WIDTH, LARGE_FC_LAYERS = 4096, 2  # 2 x 4096x4096 float weights of 67.1 MB: 134.2 MB
CHAIN_CHANNELS, CHAIN_SIDE, CHAIN_LAYERS = 64, 256, 4  # each activation 64x256x256 floats: 16.8 MB
MEASUREMENTS = 3  # fresh processes per model, their median taken: resident memory varies from process to process
_OPSET = 17


def _model(nodes: list, inputs: list, outputs: list, weights: list, name: str) -> ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    return model


def _weight(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> TensorProto:
    return numpy_helper.from_array(rng.standard_normal(shape, dtype=np.float32) * 0.01, name)


def empty_model() -> ModelProto:
    """One Relu on 16 floats: what any session costs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    return _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y], [], "memory_empty")


def conv_model() -> ModelProto:
    """CONV_LAYERS 3x3 convolutions (padding 1) of CONV_CHANNELS channels on a CONV_SIDE square: large weights,
    small activations."""
    rng = np.random.default_rng(0)
    shape = [1, CONV_CHANNELS, CONV_SIDE, CONV_SIDE]
    nodes, weights, prev = [], [], "x"
    for i in range(CONV_LAYERS):
        weights.append(_weight(f"w{i}", (CONV_CHANNELS, CONV_CHANNELS, 3, 3), rng))
        out = "y" if i == CONV_LAYERS - 1 else f"t{i}"
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [out], name=f"conv{i}", pads=[1, 1, 1, 1]))
        prev = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    return _model(nodes, [x], [y], weights, "memory_conv")


def fc_model(op: str, width: int = FC_WIDTH, layers: int = FC_LAYERS) -> ModelProto:
    """``layers`` fully connected layers of width ``width``: ``op`` "Gemm" (weights transposed, transB=1, on a
    [1, width] input) or "MatMul" (on a [1, 8, width] input)."""
    if op not in ("Gemm", "MatMul"):
        raise ValueError(f"op must be Gemm or MatMul, got {op!r}")
    rng = np.random.default_rng(1)
    shape = [1, width] if op == "Gemm" else [1, 8, width]
    nodes, weights, prev = [], [], "x"
    for i in range(layers):
        weights.append(_weight(f"w{i}", (width, width), rng))
        out = "y" if i == layers - 1 else f"t{i}"
        node = helper.make_node(op, [prev, f"w{i}"], [out], name=f"fc{i}")
        if op == "Gemm":
            node.attribute.append(helper.make_attribute("transB", 1))
        nodes.append(node)
        prev = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    suffix = "" if (width, layers) == (FC_WIDTH, FC_LAYERS) else f"_{width}x{layers}"
    return _model(nodes, [x], [y], weights, f"memory_{op.lower()}{suffix}")


def chain_model() -> ModelProto:
    """CHAIN_LAYERS 1x1 convolutions of CHAIN_CHANNELS channels on a CHAIN_SIDE square, each reading the last:
    every activation the same size S, the peak of live activations 2 S (the input's or not)."""
    rng = np.random.default_rng(2)
    shape = [1, CHAIN_CHANNELS, CHAIN_SIDE, CHAIN_SIDE]
    nodes, weights, prev = [], [], "x"
    for i in range(CHAIN_LAYERS):
        weights.append(_weight(f"w{i}", (CHAIN_CHANNELS, CHAIN_CHANNELS, 1, 1), rng))
        out = "y" if i == CHAIN_LAYERS - 1 else f"t{i}"
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [out], name=f"conv{i}"))
        prev = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    return _model(nodes, [x], [y], weights, "memory_chain")


@dataclass(frozen=True)
class _Median:
    """The medians of what the session and the runs added over several measurements of one model: the runs'
    share of the process's peak over the session as made (``peak_added_bytes - session_bytes``), which is what the
    process peak the factors predict adds to the session's figure."""

    session_bytes: int
    run_added_bytes: int


def calibrate_memory(threads: int = 1, progress: Callable[[str], None] | None = None) -> SessionMemoryFactors:
    """The factors measured on this host with onnxruntime's CPU provider, ``threads`` threads, arena and memory
    pattern on (its defaults). Each figure is the median of MEASUREMENTS fresh processes. A factor below 0 (a
    measurement within the resident set's noise) is 0."""
    host = f"{cpu_model()}, onnxruntime {ort_version()}, {threads} thread(s)"

    def measure(model: ModelProto) -> _Median:
        if progress is not None:
            progress(f"memory: {model.graph.name}")
        runs = [measure_peak_memory(model, threads=threads) for _ in range(MEASUREMENTS)]
        return _Median(
            session_bytes=int(statistics.median(r.session_bytes for r in runs)),
            run_added_bytes=int(statistics.median(r.peak_added_bytes - r.session_bytes for r in runs)),
        )

    empty = measure(empty_model())
    constant = max(empty.session_bytes, 0)
    items = {
        "constant": Sourced(
            float(constant),
            f"calibrated: a one-Relu session adds {empty.session_bytes} B (median) to the process on {host}",
        )
    }
    weight_models = (
        ("conv", conv_model()),
        ("gemm", fc_model("Gemm")),
        ("matmul", fc_model("MatMul")),
        ("large", fc_model("Gemm", LARGE_FC_WIDTH, LARGE_FC_LAYERS)),
    )
    for name, model in weight_models:
        got = measure(model)
        weight = weight_bytes(model)
        items[name] = Sourced(
            max((got.session_bytes - constant) / weight, 0.0),
            f"calibrated: {model.graph.name} ({weight} B of weights) session adds {got.session_bytes} B (median), "
            f"less the constant, per weight byte on {host}",
        )
    chain = chain_model()
    got = measure(chain)
    peak = 2 * 4 * CHAIN_CHANNELS * CHAIN_SIDE * CHAIN_SIDE
    items["activation"] = Sourced(
        max(got.run_added_bytes / peak, 0.0),
        f"calibrated: {chain.graph.name} runs add {got.run_added_bytes} B (median) over its live-activation peak "
        f"{peak} B (2 x one activation) on {host}",
    )
    return SessionMemoryFactors(**items)


def memory_factors_path(threads: int = 1) -> Path:
    """The file this host's memory factors for ``threads`` threads are cached in, beside its calibrated
    profile."""
    return cache_dir() / f"{host_key(threads, 'cpu')}-memory.json"


def host_memory_factors(
    threads: int = 1, *, recalibrate: bool = False, progress: Callable[[str], None] | None = None
) -> SessionMemoryFactors:
    """This host's cached memory factors, calibrated and cached first when none are (or ``recalibrate``). A
    cached file that does not read as factors is calibrated again."""
    path = memory_factors_path(threads)
    cached = None if recalibrate else _cached(path)
    if cached is not None:
        return cached
    with cache_lock(path):  # one process calibrates a key at a time; the next reads its factors
        cached = None if recalibrate else _cached(path)
        if cached is not None:
            return cached
        factors = calibrate_memory(threads, progress)
        write_text(path, json.dumps(factors.to_dict(), indent=2) + "\n")
        return factors


def _cached(path: Path) -> SessionMemoryFactors | None:
    """The factors cached at ``path``; None where there is no file or it does not read as factors."""
    if not path.exists():
        return None
    try:
        return SessionMemoryFactors.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except ValueError:
        return None
