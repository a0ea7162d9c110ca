"""Small builders shared by the tests: tensors and node views for cost functions, tiny ONNX models and their
FLOPs, a hand-made calibrated host, and where onnx's bundled light models are."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxroof.costs import Cost, NodeView
from onnxroof.devices import CacheLevel, Calibration, Ceiling, Device, FrozenMap, Peak, Sourced
from onnxroof.ir import Graph, Tensor
from onnxroof.load import load_graph

FLOAT = TensorProto.FLOAT
FLOAT16 = TensorProto.FLOAT16
INT8 = TensorProto.INT8
UINT8 = TensorProto.UINT8
INT32 = TensorProto.INT32
INT64 = TensorProto.INT64
BOOL = TensorProto.BOOL

# onnx's bundled "light" models (real architectures, weights as ConstantOfShape), where the onnx package has them.
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
IR_VERSION = 8  # what onnxruntime loads; onnx's own default can be newer than the installed onnxruntime reads


def T(shape: Sequence[int] | None, dtype: int = FLOAT, weight: bool = False, name: str | None = None) -> Tensor:
    """A tensor spec; the name is filled in by make_node when not given."""
    return Tensor(name or "", dtype, None if shape is None else tuple(shape), weight)


def W(shape: Sequence[int], dtype: int = FLOAT, name: str | None = None) -> Tensor:
    """A weight tensor spec."""
    return T(shape, dtype, True, name)


def make_node(
    op_type: str,
    inputs: Sequence[Tensor | None],
    outputs: Sequence[Tensor | None],
    *,
    domain: str = "",
    constants: dict[int, Any] | None = None,
    cost_subgraph=None,
    **attrs: Any,
) -> NodeView:
    """A NodeView with unnamed tensors named in0, in1, ..., out0, ... so that distinct specs stay distinct."""
    named_in = tuple(
        None if t is None else (t if t.name else Tensor(f"in{i}", t.dtype, t.shape, t.is_weight))
        for i, t in enumerate(inputs)
    )
    named_out = tuple(
        None if t is None else (t if t.name else Tensor(f"out{i}", t.dtype, t.shape, t.is_weight))
        for i, t in enumerate(outputs)
    )
    consts = {i: np.asarray(v) for i, v in (constants or {}).items()}
    return NodeView(f"{op_type}_0", op_type, domain, named_in, named_out, attrs, consts, cost_subgraph)


def cost_of(node: NodeView) -> Cost:
    """The registered cost of a node; fails the test when the op has no cost function."""
    from onnxroof.costs import lookup

    fn = lookup(node.domain, node.op_type)
    assert fn is not None, f"no cost function for {node.domain}::{node.op_type}"
    return fn(node)


def loaded_graph(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    inits: Sequence[onnx.TensorProto] = (),
    opset: int = 13,
) -> Graph:
    """A graph of ``nodes`` built as an ONNX model of the default domain at ``opset`` and loaded as onnxroof
    loads a user's file."""
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return load_graph(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION))


def calibrated_host(ceilings: dict[str, Ceiling] | None = None, threads: int = 1) -> Device:
    """A hand-made calibrated host: 100 GFLOP/s fp32, L1 32 KiB at 100 GB/s, L2 1 MiB at 50 GB/s, DRAM 10 GB/s,
    1 us per node, 5 us per run."""
    return Device(
        key="test-host",
        name="test host",
        kind="cpu",
        overlap="serial",
        peak_flops=FrozenMap({"fp32": Peak(100e9, True, "calibrated: test")}),
        memory_bandwidth=Sourced(10e9, "calibrated: test"),
        memory_capacity=None,
        launch_overhead=Sourced(1e-6, "calibrated: test"),
        caches=(
            CacheLevel("L1d", 32 * 1024, 100e9, "calibrated: test", "per-core"),
            CacheLevel("L2", 1024 * 1024, 50e9, "calibrated: test", "per-core"),
            CacheLevel("L3", 8 * 1024 * 1024, None, "os: no bandwidth measured", "shared"),
        ),
        engine="onnxruntime",
        run_overhead=Sourced(5e-6, "calibrated: test"),
        ceilings=FrozenMap(ceilings or {}),
        calibration=Calibration("cpu", threads, "1.0", "test cpu", "2025-01-01", 1.0),
    )


def host_file(folder: Path, key: str, cpu: str | None = None) -> str:
    """A host device file, as `onnxroof calibrate -o FILE` writes one: the hand-made calibrated host as ``key``,
    calibrated on ``cpu`` (None: this machine's CPU, as a calibration here names it)."""
    from dataclasses import replace

    from onnxroof.devices import save_device
    from onnxroof.ort.calibrate import cpu_model

    device = calibrated_host()
    assert device.calibration is not None
    calibration = replace(device.calibration, cpu=cpu or cpu_model())
    path = folder / f"{key}.toml"
    save_device(replace(device, key=key, calibration=calibration), path)
    return str(path)


# Ceilings of a conv and an elementwise class, for the hand-made host above.
CONV = Ceiling(compute=((1e6, 0.5), (1e8, 0.9)), memory=(), source="calibrated: test conv")
ELEMENTWISE = Ceiling(compute=(), memory=((1e4, 0.5), (1e6, 1.0)), source="calibrated: test elementwise")


def gqa(heads: int, kv_heads: int, past: int, new: int = 1, head: int = 64) -> NodeView:
    """A com.microsoft GroupQueryAttention of ``heads`` query heads of ``head`` over ``kv_heads`` key/value heads:
    ``new`` tokens over a past of ``past`` rows, its present a tensor of its own (``past + new`` rows), its total
    length a known constant, no rotary embedding."""
    total = past + new
    kv = [T((1, kv_heads, past, head))] * 2
    return make_node(
        "GroupQueryAttention",
        [T((1, new, heads * head)), T((1, new, kv_heads * head)), T((1, new, kv_heads * head)), *kv, T((1,), INT32)]
        + [T((), INT32)],
        [T((1, new, heads * head)), T((1, kv_heads, total, head)), T((1, kv_heads, total, head))],
        domain="com.microsoft",
        constants={6: total},
        num_heads=heads,
        kv_num_heads=kv_heads,
    )


def nbits(rows: int, k: int, n: int, level: int) -> NodeView:
    """A com.microsoft MatMulNBits of ``rows`` rows by a ``k x n`` weight packed in 4 bits in blocks of 32 along K
    (uint8 ``[n, k / 32, 16]``), fp32 scales, no zero points, at accuracy_level ``level``."""
    blocks = k // 32
    return make_node(
        "MatMulNBits",
        [T((1, rows, k)), W((n, blocks, 16), UINT8), W((n * blocks,))],
        [T((1, rows, n))],
        domain="com.microsoft",
        K=k,
        N=n,
        bits=4,
        block_size=32,
        accuracy_level=level,
    )


def conv(
    cin: int,
    cout: int,
    hw: int,
    k: int,
    *,
    group: int = 1,
    domain: str = "com.microsoft.nchwc",
    out_hw: int | None = None,
    op: str = "Conv",
    pad: int | None = None,
    dilation: int | None = None,
) -> NodeView:
    """A convolution node (NCHWc by default): ``cin`` -> ``cout`` channels, a ``k`` x ``k`` kernel, ``hw`` x ``hw``
    input, ``out_hw`` x ``out_hw`` output (``hw`` when not given); ``pad`` on every side and ``dilation`` on both
    axes where given (no such attribute otherwise)."""
    out_hw = out_hw or hw
    window = {"pads": [pad] * 4} if pad is not None else {}
    if dilation is not None:
        window["dilations"] = [dilation] * 2
    return make_node(
        op,
        [T((1, cin, hw, hw)), W((cout, cin // group, k, k)), W((cout,))],
        [T((1, cout, out_hw, out_hw))],
        domain=domain,
        group=group,
        kernel_shape=[k, k],
        **window,
    )


def record_parking(monkeypatch: Any) -> list[bool]:
    """Record, per session made through sessions.make_session, whether it asked for its thread pool to park when a
    run returns; the sessions are still made."""
    from onnxroof.ort import sessions

    seen: list[bool] = []
    real = sessions.make_session

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("park_when_idle", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(sessions, "make_session", recording)
    return seen


def tiny_model(shape: tuple[int, ...] = (4, 8)) -> onnx.ModelProto:
    """y = Relu(x + b) on a float input of ``shape``, ``b`` an initializer of ones over the last axis."""
    b = numpy_helper.from_array(np.ones(shape[-1:], np.float32), "b")
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
        [b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def cuda_works() -> bool:
    """Whether onnxruntime really runs on a GPU here (onnxruntime-gpu lists the CUDA provider even without one)."""
    from onnxroof.errors import UserError
    from onnxroof.ort.session_spec import SessionSpec
    from onnxroof.ort.sessions import make_session

    try:
        make_session(tiny_model(), SessionSpec("cuda"))
    except UserError:
        return False
    return True


def small_conv_net(seed: int = 0, big: float | None = None) -> onnx.ModelProto:
    """Conv -> Relu -> Conv -> GlobalAveragePool -> Flatten -> Gemm on a 1x3x16x16 input, random weights; ``big``
    replaces one value of the Gemm bias."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    bias = (rng.standard_normal(4) * 0.2).astype(np.float32)
    if big is not None:
        bias[1] = big
    inits = [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 8, 3, 3), weight("b2", 8)]
    inits += [weight("wg", 4, 8), numpy_helper.from_array(bias, "bg")]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="pool"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def model_flops(model: onnx.ModelProto) -> int:
    """The FLOPs of ``model`` by onnxroof's cost functions: the analysis' total over its nodes."""
    from onnxroof.api import analyze

    return int(analyze(model).totals.flops)


def three_bound_model(relu_name: str = "relu") -> onnx.ModelProto:
    """One layer per bound on a GPU like the V100 (15.7 TFLOP/s fp32, 900 GB/s, 4.2 us per launch), no weights:

    - ``matmul``: x[1024,1024] @ y[1024,1024], 2*1024^3 = 2.15e9 FLOP -> 137 us of compute against 3 * 4 MiB =
      12.6 MB moved -> 14 us: compute-bound;
    - ``add``: m + z, 1024*1024 = 1.05e6 FLOP -> 0.07 us against 12.6 MB -> 14 us: memory-bound;
    - ``relu_name``: Relu of t[4,8], 32 FLOP and 256 B, far under one 4.2 us launch: overhead-bound.
    """
    square = [1024, 1024]
    nodes = [
        helper.make_node("MatMul", ["x", "y"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "z"], ["s"], name="add"),
        helper.make_node("Relu", ["t"], ["u"], name=relu_name),
    ]
    graph = helper.make_graph(
        nodes,
        "three_bounds",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, square) for n in ("x", "y", "z")]
        + [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, square)]
        + [helper.make_tensor_value_info("u", TensorProto.FLOAT, [4, 8])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def cuda_runs_here() -> bool:
    """Whether onnxruntime runs a graph on the CUDA provider on this machine (a GPU, its driver and the CUDA
    runtime), rather than falling back to the CPU."""
    from onnxroof.ort.calibrate import chains
    from onnxroof.ort.calibrate.graphs import Rand
    from onnxroof.ort.session_spec import SessionSpec
    from onnxroof.ort.sessions import make_session

    model, _ = chains.activation_chain(Rand(0), 1, "Neg", (16,))
    return make_session(model, SessionSpec("cuda", allow_fallback=True))[1] == "CUDAExecutionProvider"


def plain_ops_decoder(past_len="past", mask=True):
    """h = Gather(embed, input_ids); k = Reshape(h) as [b, 2, s, 4]; present = Concat(past_key, k, axis 2); the
    mask [b, total] feeds a Where on the scores. Names chosen unlike any exporter's."""
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "s"]),
        helper.make_tensor_value_info("pk", TensorProto.FLOAT, ["b", 2, past_len, 4]),
    ]
    nodes = [
        helper.make_node("Gather", ["embed", "ids"], ["h"]),
        helper.make_node("Reshape", ["h", "shape"], ["k"]),
        helper.make_node("Concat", ["pk", "k"], ["present_k"], axis=2),
        helper.make_node("MatMul", ["h", "present_k"], ["scores"]),
    ]
    if mask:
        inputs.append(helper.make_tensor_value_info("m", TensorProto.INT64, ["b", "t"]))
        nodes.append(helper.make_node("Where", ["m", "scores", "scores"], ["masked"]))
    outputs = [helper.make_tensor_value_info("present_k", TensorProto.FLOAT, ["b", 2, "t", 4])]
    return helper.make_model(
        helper.make_graph(nodes, "decoder", inputs, outputs),
        opset_imports=[helper.make_opsetid("", 23)],
        ir_version=10,
    )


def matmul_model(path: Path, inner: int = 64) -> str:
    """A model file of x [1, 64] times a weight [inner, 32]: 2*64*32 = 4096 FLOPs at batch 1 (inner 64; any other
    inner makes the shapes contradict each other)."""
    w = numpy_helper.from_array(np.ones((inner, 32), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return str(path)
