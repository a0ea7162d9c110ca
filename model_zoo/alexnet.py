"""AlexNet as defined by torchvision (``torchvision.models.alexnet``, the single-tower "one weird trick" form).

Features: 64@11x11/4 pad 2, ReLU, MaxPool 3/2; 192@5x5 pad 2, ReLU, MaxPool 3/2; 384, 256, 256 @3x3 pad 1 each
with ReLU; MaxPool 3/2. Then AdaptiveAvgPool2d(6) (the identity at 224x224, omitted; an exact AveragePool or
nearest Resize at other sizes), Flatten and the classifier Gemm 9216->4096, ReLU, Gemm 4096->4096, ReLU,
Gemm 4096->1000 (Dropout left out: identity at inference). All convs and Gemms carry a bias. Parameter names
follow torchvision's ``state_dict``; the parameter count matches torchvision's 61,100,840.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder, conv_out

__all__ = ["alexnet"]


def alexnet(batch: int = 1, size: int = 224, *, weights: bool = True) -> onnx.ModelProto:
    """torchvision AlexNet."""
    b = GraphBuilder("alexnet", seed=2012, weights=weights, doc=f"torchvision alexnet, input {size}x{size}")
    x = b.relu(b.conv("input", "features.0", 3, 64, 11, stride=4, pad=2), "features.1")
    x = b.maxpool(x, "features.2", 3, 2)
    side = conv_out(conv_out(size, 11, 4, 2), 3, 2)
    x = b.relu(b.conv(x, "features.3", 64, 192, 5, pad=2), "features.4")
    x = b.maxpool(x, "features.5", 3, 2)
    side = conv_out(side, 3, 2)
    x = b.relu(b.conv(x, "features.6", 192, 384, 3, pad=1), "features.7")
    x = b.relu(b.conv(x, "features.8", 384, 256, 3, pad=1), "features.9")
    x = b.relu(b.conv(x, "features.10", 256, 256, 3, pad=1), "features.11")
    x = b.maxpool(x, "features.12", 3, 2)
    side = conv_out(side, 3, 2)
    if side < 1:
        raise ValueError(f"alexnet: input size {size} is too small (the feature map vanishes)")
    x = b.adaptive_avgpool(x, "avgpool", side, 6)
    x = b.flatten(x, "flatten")
    x = b.relu(b.gemm(x, "classifier.1", 256 * 6 * 6, 4096), "classifier.2")
    x = b.relu(b.gemm(x, "classifier.4", 4096, 4096), "classifier.5")
    b.gemm(x, "classifier.6", 4096, 1000, out="output")
    return b.model([("input", (batch, 3, size, size))], [("output", (batch, 1000))])
