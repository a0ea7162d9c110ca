"""VGG-16 (configuration "D", no batch norm) as defined by torchvision (``torchvision.models.vgg16``).

Thirteen 3x3 convs (pad 1, with bias) each followed by ReLU, in five groups separated by 2x2/2 MaxPools; then
torchvision's AdaptiveAvgPool2d(7), Flatten and the classifier Gemm 25088->4096, ReLU, Gemm 4096->4096, ReLU,
Gemm 4096->1000 (Dropout is the identity at inference and is left out). At 224x224 the adaptive pool is the
identity and is omitted; at other sizes it becomes an AveragePool (feature map a multiple of 7) or a nearest
Resize (feature map 1x1), which are exact. Parameter names follow torchvision's ``state_dict`` (``features.N``,
``classifier.N``); the parameter count matches torchvision's 138,357,544.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder, conv_out

__all__ = ["vgg16"]

# torchvision's cfg "D": output channels of each conv, "M" for a 2x2/2 max pool.
_CFG_D: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg16(batch: int = 1, size: int = 224, *, weights: bool = True) -> onnx.ModelProto:
    """torchvision VGG-16 without batch norm."""
    b = GraphBuilder("vgg16", seed=16, weights=weights, doc=f"torchvision vgg16, input {size}x{size}")
    x, cin, side, idx = "input", 3, size, 0
    for item in _CFG_D:
        if item == "M":
            x = b.maxpool(x, f"features.{idx}", 2, 2)
            side = conv_out(side, 2, 2)
            idx += 1
        else:
            cout = int(item)
            x = b.conv(x, f"features.{idx}", cin, cout, 3, pad=1)
            x = b.relu(x, f"features.{idx + 1}")
            cin, idx = cout, idx + 2
    if side < 1:
        raise ValueError(f"vgg16: input size {size} is too small for five 2x2 max pools")
    x = b.adaptive_avgpool(x, "avgpool", side, 7)
    x = b.flatten(x, "flatten")
    x = b.relu(b.gemm(x, "classifier.0", 512 * 7 * 7, 4096), "classifier.1")
    x = b.relu(b.gemm(x, "classifier.3", 4096, 4096), "classifier.4")
    b.gemm(x, "classifier.6", 4096, 1000, out="output")
    return b.model([("input", (batch, 3, size, size))], [("output", (batch, 1000))])
