"""The factor network: a model-sized mix of typical layers, on which the calibration reads the network factor.

The class ceilings are read on kernels run alone; the network factor is what a whole network's run adds to the
sum of its kernels' predictions (``ceilings.network_factor``). Read on a block of a few kernels, the factor also
carries those kernels' own misfits to their class ceilings (one convolution that runs a few percent faster than
its class's median moves every prediction by that much). This network holds a few dozen kernels of the kinds
models spend their time in, in the proportions of a small model, so that such misfits average out and what
remains is what a network's run adds: a convolutional stem and two stages (dense, depthwise and pointwise
convolutions, a Clip and a SiLU, max and average pooling, a residual Add, a global pool and a classifier) and a
transformer encoder layer (layer norms, the per-head attention products, Softmax, the projections and an erf GELU
MLP).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper

from onnxroof.ort.calibrate.graphs import Built, Rand, build_model

__all__ = ["IMAGE", "TOKENS", "factor_network"]

IMAGE = (1, 3, 160, 160)  # the convolutional part's input (NCHW)
TOKENS = (1, 128, 384)  # the encoder layer's input: 128 tokens of width 384 (6 heads of 64)
_HEADS = 6
_SAME = [1, 1, 1, 1]  # a 3x3 convolution's pads that keep the height and width


class _Net:
    """A graph under construction: nodes appended in order, their weights from one Rand."""

    def __init__(self, rand: Rand) -> None:
        self.rand = rand
        self.nodes: list[NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}

    def weight(self, name: str, *shape: int) -> str:
        self.inits[name] = self.rand.f(*shape)
        return name

    def const(self, name: str, value: Any, dtype: type = np.float32) -> str:
        self.inits[name] = np.array(value, dtype=dtype)
        return name

    def node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def conv(self, x: str, name: str, cin: int, cout: int, k: int, *, stride: int = 1, group: int = 1) -> str:
        pads = _SAME if k == 3 else [0, 0, 0, 0]
        w = self.weight(f"{name}_w", cout, cin // group, k, k)
        b = self.weight(f"{name}_b", cout)
        return self.node("Conv", [x, w, b], name, pads=pads, strides=[stride, stride], group=group)

    def linear(self, x: str, name: str, k: int, n: int) -> str:
        product = self.node("MatMul", [x, self.weight(f"{name}_w", k, n)], f"{name}_mm")
        return self.node("Add", [product, self.weight(f"{name}_b", n)], name)


def _convolutional(net: _Net, x: str) -> str:
    """Stem, a mobile block, a residual stage, a bottleneck's pointwise pair and a SiLU stage, then the classifier."""
    x = net.node("Relu", [net.conv(x, "stem", 3, 32, 3, stride=2)], "stem_r")
    x = net.conv(x, "dw1", 32, 32, 3, group=32)
    x = net.node("Clip", [x, net.const("zero", 0.0), net.const("six", 6.0)], "dw1_c")
    x = net.node("Relu", [net.conv(x, "pw1", 32, 64, 1)], "pw1_r")
    x = net.node("MaxPool", [x], "pool1", kernel_shape=[3, 3], strides=[2, 2], pads=_SAME)
    y = net.node("Relu", [net.conv(x, "res_a", 64, 64, 3)], "res_a_r")
    y = net.conv(y, "res_b", 64, 64, 3)
    x = net.node("Relu", [net.node("Add", [y, x], "res_add")], "res_r")
    x = net.node("Relu", [net.conv(x, "expand", 64, 256, 1)], "expand_r")
    x = net.node("Relu", [net.conv(x, "reduce", 256, 128, 1)], "reduce_r")
    x = net.node("AveragePool", [x], "pool2", kernel_shape=[2, 2], strides=[2, 2])
    x = net.node("Relu", [net.conv(x, "stage2", 128, 128, 3)], "stage2_r")
    x = net.conv(x, "dw2", 128, 128, 3, group=128)
    x = net.node("Mul", [x, net.node("Sigmoid", [x], "dw2_s")], "dw2_silu")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "gap")], "flat")
    w, b = net.weight("fc_w", 1000, 128), net.weight("fc_b", 1000)
    return net.node("Gemm", [x, w, b], "logits", transB=1)


def _encoder_layer(net: _Net, t: str) -> str:
    """A pre-norm transformer encoder layer: attention over ``_HEADS`` heads, then an erf GELU MLP, each with its
    residual."""
    _, tokens, width = TOKENS
    head = width // _HEADS
    split = net.const("heads_shape", [1, tokens, _HEADS, head], np.int64)

    def heads(name: str, src: str, perm: list[int]) -> str:
        shaped = net.node("Reshape", [net.linear(src, name, width, width), split], f"{name}_heads")
        return net.node("Transpose", [shaped], f"{name}_t", perm=perm)

    normed = net.node("LayerNormalization", [t, net.weight("ln1_g", width), net.weight("ln1_b", width)], "ln1")
    q = heads("q", normed, [0, 2, 1, 3])
    k = heads("k", normed, [0, 2, 3, 1])
    v = heads("v", normed, [0, 2, 1, 3])
    scores = net.node("Mul", [net.node("MatMul", [q, k], "qk"), net.const("scale", head**-0.5)], "scores")
    probs = net.node("Softmax", [scores], "probs", axis=-1)
    context = net.node("Transpose", [net.node("MatMul", [probs, v], "context")], "context_t", perm=[0, 2, 1, 3])
    context = net.node("Reshape", [context, net.const("tokens_shape", list(TOKENS), np.int64)], "context_r")
    h = net.node("Add", [net.linear(context, "out", width, width), t], "attn_res")
    u = net.node("LayerNormalization", [h, net.weight("ln2_g", width), net.weight("ln2_b", width)], "ln2")
    u = net.linear(u, "fc1", width, 4 * width)
    erf = net.node("Erf", [net.node("Div", [u, net.const("sqrt2", 2**0.5)], "gelu_div")], "gelu_erf")
    gelu = net.node("Mul", [u, net.node("Add", [erf, net.const("one", 1.0)], "gelu_add")], "gelu_mul")
    gelu = net.node("Mul", [gelu, net.const("half", 0.5)], "gelu")
    return net.node("Add", [net.linear(gelu, "fc2", 4 * width, width), h], "mlp_res")


def factor_network(rand: Rand | None = None) -> Built:
    """The factor network and its feeds: two inputs (an image, ``IMAGE``, and tokens, ``TOKENS``), two outputs."""
    net = _Net(rand or Rand(0))
    logits = _convolutional(net, "image")
    encoded = _encoder_layer(net, "tokens")
    model = build_model(
        net.nodes,
        {"image": (IMAGE, TensorProto.FLOAT), "tokens": (TOKENS, TensorProto.FLOAT)},
        [logits, encoded],
        net.inits,
    )
    del model.graph.output[:]
    model.graph.output.extend(
        [
            helper.make_tensor_value_info(logits, TensorProto.FLOAT, [IMAGE[0], 1000]),
            helper.make_tensor_value_info(encoded, TensorProto.FLOAT, list(TOKENS)),
        ]
    )
    feeds = {"image": net.rand.f(*IMAGE), "tokens": net.rand.f(*TOKENS)}
    return model, feeds
