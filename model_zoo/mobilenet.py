"""MobileNetV2 (width 1.0) as defined by torchvision (``torchvision.models.mobilenet_v2``).

Stem 32@3x3/2 conv + BatchNorm + ReLU6; seventeen inverted-residual blocks from the settings (expansion t,
channels c, repeats n, first stride s) (1,16,1,1), (6,24,2,2), (6,32,3,2), (6,64,4,2), (6,96,3,1),
(6,160,3,2), (6,320,1,1), each a 1x1 expansion conv (skipped when t == 1), a 3x3 depthwise conv carrying the
stride, and a linear 1x1 projection, with a residual Add when the stride is 1 and the width is unchanged; a
1280@1x1 conv; GlobalAveragePool, Flatten and a 1000-way Gemm (Dropout left out). Convs carry no bias and are
followed by BatchNormalization nodes; ReLU6 is opset-17 Clip with min 0 and max 6 given as inputs. Parameter
names follow torchvision's ``state_dict``; the parameter count matches torchvision's 3,504,872.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

__all__ = ["mobilenetv2"]

# (expansion t, output channels c, repeats n, first stride s), torchvision's inverted_residual_setting.
_SETTINGS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _conv_bn(
    b: GraphBuilder,
    x: str,
    p: str,
    cin: int,
    cout: int,
    kernel: int,
    *,
    stride: int = 1,
    group: int = 1,
    act: bool = True,
) -> str:
    """Conv (no bias) + BatchNorm (+ ReLU6): torchvision's Conv2dNormActivation, modules ``p.0`` and ``p.1``."""
    y = b.conv(x, f"{p}.0", cin, cout, kernel, stride=stride, pad=(kernel - 1) // 2, group=group, bias=False)
    y = b.bn(y, f"{p}.1", cout)
    return b.relu6(y, f"{p}.2") if act else y


def _inverted_residual(b: GraphBuilder, x: str, p: str, cin: int, cout: int, stride: int, t: int) -> str:
    hidden = cin * t
    y, i = x, 0
    if t != 1:
        y = _conv_bn(b, y, f"{p}.conv.{i}", cin, hidden, 1)
        i += 1
    y = _conv_bn(b, y, f"{p}.conv.{i}", hidden, hidden, 3, stride=stride, group=hidden)
    y = b.conv(y, f"{p}.conv.{i + 1}", hidden, cout, 1, bias=False)
    y = b.bn(y, f"{p}.conv.{i + 2}", cout)
    if stride == 1 and cin == cout:
        y = b.node("Add", [x, y], f"{p}.add")
    return y


def mobilenetv2(batch: int = 1, size: int = 224, *, weights: bool = True) -> onnx.ModelProto:
    """torchvision MobileNetV2, width multiplier 1.0."""
    b = GraphBuilder("mobilenetv2", seed=2, weights=weights, doc=f"torchvision mobilenet_v2, input {size}x{size}")
    x = _conv_bn(b, "input", "features.0", 3, 32, 3, stride=2)
    cin, idx = 32, 1
    for t, c, n, s in _SETTINGS:
        for i in range(n):
            x = _inverted_residual(b, x, f"features.{idx}", cin, c, s if i == 0 else 1, t)
            cin, idx = c, idx + 1
    x = _conv_bn(b, x, f"features.{idx}", cin, 1280, 1)
    x = b.flatten(b.global_avgpool(x, "avgpool"), "flatten")
    b.gemm(x, "classifier.1", 1280, 1000, out="output")
    return b.model([("input", (batch, 3, size, size))], [("output", (batch, 1000))])
