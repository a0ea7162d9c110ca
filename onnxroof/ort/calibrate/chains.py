"""The calibration's chain benchmarks: ``n`` nodes of one op in a row, each reading the one before (and shared
operands), built at two lengths so that the difference of their run times is one node's. Each builder takes a
``Rand`` and the chain length ``n`` first and returns (model, feeds), as the builders of ``graphs`` do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from onnxroof.ort.calibrate.graphs import FLOAT, Built, Rand, build_model
from onnxroof.predict.op_classes import POW_BY_MULTIPLYING

__all__ = [
    "activation_chain",
    "add_chain",
    "batchnorm_chain",
    "clip_chain",
    "instancenorm_chain",
    "layernorm_chain",
    "lrn_chain",
    "matmul_chain",
    "neg_reshape_chain",
    "per_channel_chain",
    "pow_chain",
    "skip_layernorm_chain",
    "softmax_chain",
    "stream_chain",
    "vector_conv_chain",
]

# What a roofline chain hands back to the host: the first elements of its last tensor.
_RETURNED = 16


def _chain(
    op: str,
    shape: Sequence[int],
    n: int,
    rand: Rand,
    *,
    domain: str = "",
    extra: Sequence[str] = (),
    inits: Mapping[str, np.ndarray] | None = None,
    feeds_extra: Mapping[str, np.ndarray] | None = None,
    **attrs: Any,
) -> Built:
    """x -> op -> op -> ... (n nodes), each also reading the shared ``extra`` inputs (initializers or inputs)."""
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [prev, *extra], [out], name=f"{op}_{i}", domain=domain, **attrs))
        prev = out
    inputs = {"x": (tuple(shape), FLOAT)}
    feeds = {"x": rand.f(*shape)}
    for name, value in (feeds_extra or {}).items():
        inputs[name] = (value.shape, FLOAT)
        feeds[name] = value
    return build_model(nodes, inputs, ["y"], inits or {}), feeds


# Activations that halve a small input (x * Phi(x), x * sigmoid(x)): along a chain of them a small value decays
# into the subnormal range, where the arithmetic runs many times slower than on normal floats. From 12 up they keep
# all but a few millionths of their input (x * sigmoid(x) at 4 still loses 2% a node, enough to reach the subnormal
# range along a chain of a few hundred), so a chain fed with inputs from 12 up keeps its values normal however long
# a fast machine makes it; their kernels take as long on such values as on a network's.
_HALVING_ACTIVATIONS = frozenset({"Gelu", "FastGelu", "QuickGelu", "Swish"})


def activation_chain(rand: Rand, n: int, op: str, shape: Sequence[int], domain: str = "", alpha: Any = None) -> Built:
    """``n`` of a one-input op (Neg, Relu, Sigmoid, Tanh, Erf, com.microsoft's Gelu and QuickGelu), its ``alpha``
    set where given."""
    attrs: dict[str, Any] = {} if alpha is None else {"alpha": float(alpha)}
    model, feeds = _chain(op, shape, n, rand, domain=domain, **attrs)
    if op in _HALVING_ACTIVATIONS:
        feeds = {"x": (rand.positive(*shape) + 11.5).astype(np.float32)}
    return model, feeds


def softmax_chain(rand: Rand, n: int, shape: Sequence[int]) -> Built:
    """``n`` Softmax over the last axis."""
    return _chain("Softmax", shape, n, rand, axis=-1)


def lrn_chain(rand: Rand, n: int, c: int, hw: int) -> Built:
    """``n`` LRN of AlexNet's settings (size 5) on 1 x c x hw x hw."""
    return _chain("LRN", (1, c, hw, hw), n, rand, size=5, alpha=1e-4, beta=0.75, bias=1.0)


def vector_conv_chain(rand: Rand, n: int, c: int, squeezed: int) -> Built:
    """``n`` 1x1 convolutions on a 1x1 map alternating ``c`` -> ``squeezed`` and back (a squeeze-and-excitation
    block's two products, each with a bias), every one with a weight of its own: as in a network, the weights
    stream in from memory, where one product repeated would find its weight in cache."""
    nodes, inits, prev = [], {}, "x"
    for i in range(n):
        cin, cout = (c, squeezed) if i % 2 == 0 else (squeezed, c)
        out = "y" if i == n - 1 else f"t{i}"
        inits[f"w{i}"], inits[f"b{i}"] = rand.f(cout, cin, 1, 1), rand.f(cout)
        nodes.append(helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [out], name=f"Conv_{i}", kernel_shape=[1, 1]))
        prev = out
    return build_model(nodes, {"x": ((1, c, 1, 1), FLOAT)}, ["y"], inits), {"x": rand.f(1, c, 1, 1)}


def batchnorm_chain(rand: Rand, n: int, c: int, hw: int) -> Built:
    """``n`` BatchNormalization on 1 x c x hw x hw, in plain layout (no convolution in front)."""
    weights = {"s": rand.positive(c), "b": rand.f(c), "m": rand.f(c), "v": rand.positive(c)}
    return _chain("BatchNormalization", (1, c, hw, hw), n, rand, extra=["s", "b", "m", "v"], inits=weights)


def layernorm_chain(rand: Rand, n: int, tokens: int, dim: int) -> Built:
    """``n`` LayerNormalization over the last axis of 1 x tokens x dim."""
    weights = {"g": rand.positive(dim), "bt": rand.f(dim)}
    return _chain("LayerNormalization", (1, tokens, dim), n, rand, extra=["g", "bt"], inits=weights, axis=-1)


def skip_layernorm_chain(rand: Rand, n: int, tokens: int, dim: int) -> Built:
    """``n`` of onnxruntime's SkipLayerNormalization over 1 x tokens x dim, each adding the same second input (the
    residual) before normalizing the last axis: the kernel onnxruntime fuses from a transformer's Add and
    LayerNormalization."""
    weights = {"g": rand.positive(dim), "bt": rand.f(dim)}
    return _chain(
        "SkipLayerNormalization",
        (1, tokens, dim),
        n,
        rand,
        domain="com.microsoft",
        extra=["s", "g", "bt"],
        inits=weights,
        feeds_extra={"s": rand.f(1, tokens, dim)},
        epsilon=1e-5,
    )


def instancenorm_chain(rand: Rand, n: int, c: int, hw: int) -> Built:
    """``n`` InstanceNormalization on 1 x c x hw x hw."""
    weights = {"s": rand.positive(c), "b": rand.f(c)}
    return _chain("InstanceNormalization", (1, c, hw, hw), n, rand, extra=["s", "b"], inits=weights)


def add_chain(rand: Rand, n: int, shape: Sequence[int]) -> Built:
    """``n`` Add of the running tensor and a second graph input of the same shape (a residual connection)."""
    other = rand.f(*shape)
    return _chain("Add", shape, n, rand, extra=["o"], feeds_extra={"o": other})


def per_channel_chain(rand: Rand, n: int, op: str, shape: Sequence[int]) -> Built:
    """``n`` of a binary op (Mul, Add) with a C x 1 x 1 weight broadcast over an NCHW tensor. A Mul's weights are
    1 and -1: multiplied by the same scale node after node, a channel's values would shrink into subnormal floats
    (where the arithmetic runs many times slower than on normal ones) or grow to infinity, where a network's
    per-channel scales (a squeeze-and-excitation block's) leave its activations in range."""
    c = rand.f(shape[1], 1, 1)
    if op == "Mul":
        c = np.where(c < 0, -1.0, 1.0).astype(np.float32)
    return _chain(op, shape, n, rand, extra=["c"], inits={"c": c})


def pow_chain(rand: Rand, n: int, shape: Sequence[int], exponent: float) -> Built:
    """``n`` Pow by a constant scalar ``exponent``. By an exponent onnxruntime computes by multiplying
    (``op_classes.POW_BY_MULTIPLYING``) the input is all ones, which every power leaves at one; by another the
    nodes alternate it with its reciprocal on inputs of 2 and more, so the values neither overflow nor reach the C
    library's fast path for a base of one."""
    multiplied = exponent in POW_BY_MULTIPLYING
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        power = "e" if multiplied or i % 2 == 0 else "r"
        nodes.append(helper.make_node("Pow", [prev, power], [out], name=f"Pow_{i}"))
        prev = out
    inits = {"e": np.array(exponent, np.float32), "r": np.array(1.0 / exponent, np.float32)}
    x = np.ones(tuple(shape), np.float32) if multiplied else (rand.positive(*shape) + 1.5).astype(np.float32)
    return build_model(nodes, {"x": (tuple(shape), FLOAT)}, ["y"], inits), {"x": x}


def clip_chain(rand: Rand, n: int, shape: Sequence[int]) -> Built:
    """``n`` Clip to [0, 6] (MobileNet's ReLU6 where no convolution precedes it)."""
    bounds = {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    return _chain("Clip", shape, n, rand, extra=["lo", "hi"], inits=bounds)


def neg_reshape_chain(rand: Rand, n: int) -> Built:
    """``n`` pairs of Neg and Reshape on 16 floats: the Reshape alternates between 4 x 4 and 16 (a shape-only node
    between two kernels)."""
    tiny = (16,)
    nodes, prev = [], "x"
    for i in range(n):
        mid, out = f"m{i}", ("y" if i == n - 1 else f"t{i}")
        nodes.append(helper.make_node("Neg", [prev], [mid], name=f"neg{i}"))
        nodes.append(helper.make_node("Reshape", [mid, "s0" if i % 2 == 0 else "s1"], [out], name=f"reshape{i}"))
        prev = out
    inits = {"s0": np.array([4, 4], np.int64), "s1": np.array([16], np.int64)}
    return build_model(nodes, {"x": (tiny, FLOAT)}, ["y"], inits), {"x": rand.f(*tiny)}


def if_chain(rand: Rand, n: int) -> Built:
    """``n`` If nodes in a row on 16 floats, each on a boolean graph input fed true, with a branch of one Neg either
    way: a chain of Neg but for the If each Neg runs in. The condition is an input, so that no optimization can
    take the branch's Neg out of its If."""
    tiny = (16,)
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        branches = {
            side: helper.make_graph(
                [helper.make_node("Neg", [prev], [f"{side}{i}"], name=f"{side}_neg{i}")],
                f"{side}{i}",
                [],
                [helper.make_tensor_value_info(f"{side}{i}", FLOAT, tiny)],
            )
            for side in ("then", "else")
        }
        nodes.append(
            helper.make_node(
                "If", ["cond"], [out], name=f"if{i}", then_branch=branches["then"], else_branch=branches["else"]
            )
        )
        prev = out
    model = build_model(nodes, {"x": (tiny, FLOAT), "cond": ((), TensorProto.BOOL)}, ["y"])
    return model, {"x": rand.f(*tiny), "cond": np.array(True)}


def _on_device(
    op: str, n: int, x: np.ndarray, shape: Sequence[int], dtype: int, weights: Mapping[str, np.ndarray]
) -> Built:
    """x -> Expand to ``shape`` -> ``op`` n times (each also reading the ``weights``, in order) -> the first
    elements of the last tensor's first row: an accelerator's run copies ``x`` and those few elements between host
    and device, not the tensors the chain streams."""
    nodes = [helper.make_node("Expand", ["x", "shape"], ["t0"], name="expand")]
    for i in range(n):
        nodes.append(helper.make_node(op, [f"t{i}", *weights], [f"t{i + 1}"], name=f"{op}_{i}"))
    nodes.append(helper.make_node("Slice", [f"t{n}", "start", "end"], ["y"], name="returned"))
    inits = {
        **weights,
        "shape": np.array(shape, np.int64),
        "start": np.zeros(len(shape), np.int64),
        "end": np.array([1] * (len(shape) - 1) + [_RETURNED], np.int64),
    }
    return build_model(nodes, {"x": (x.shape, dtype)}, ["y"], inits, output_type=dtype), {"x": x}


def stream_chain(rand: Rand, n: int, floats: int, dtype: int = FLOAT) -> Built:
    """``n`` Neg over ``floats`` elements, each reading its whole input and writing its whole output. The graph's
    input is one element, expanded on the device, and its output the first elements of the last tensor: on an
    accelerator a run copies a few bytes between host and device, not the streamed tensors."""
    x = rand.f(1).astype(helper.tensor_dtype_to_np_dtype(dtype))
    return _on_device("Neg", n, x, (floats,), dtype, {})


def hadamard(size: int) -> np.ndarray:
    """The ``size`` x ``size`` Sylvester Hadamard matrix over sqrt(size) (``size`` a power of two): orthogonal and
    symmetric, so a product by it keeps a vector's length and two products give the vector back."""
    if size < 1 or size & (size - 1):
        raise ValueError(f"a Hadamard matrix of this construction needs a power of two, got {size}")
    h = np.ones((1, 1), np.float64)
    while h.shape[0] < size:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(size)


def matmul_chain(rand: Rand, n: int, size: int, dtype: int = FLOAT) -> Built:
    """``n`` MatMul of a ``size`` x ``size`` matrix by the same ``size`` x ``size`` weight (``hadamard``: the values
    keep their magnitude along the chain, in fp16 too). The input is one row, expanded on the device to the whole
    matrix, and the output the first elements of the last product's first row, as ``stream_chain``'s are."""
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    x = rand.f(1, size).astype(np_dtype)
    return _on_device("MatMul", n, x, (size, size), dtype, {"w": hadamard(size).astype(np_dtype)})
