"""ResNet-18, ResNet-34 and ResNet-50 as defined by torchvision (``torchvision.models.resnet``).

The stem is a 7x7/2 conv (pad 3) + BatchNorm + ReLU + 3x3/2 MaxPool (pad 1); four stages of BasicBlocks
(ResNet-18/34: two 3x3 convs) or Bottlenecks (ResNet-50: 1x1, 3x3, 1x1 with 4x expansion and the stride on the
3x3 conv, i.e. "ResNet v1.5"); convs carry no bias and are each followed by a separate BatchNormalization node;
a 1x1 conv + BatchNorm downsample path where the stride or width changes; then GlobalAveragePool, Flatten and a
1000-way Gemm. Parameter names follow torchvision's ``state_dict``. Parameter counts match torchvision:
11,689,512 / 21,797,672 / 25,557,032 (BatchNorm running statistics are buffers and not counted there).
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

__all__ = ["resnet18", "resnet34", "resnet50"]

_STAGES: dict[str, tuple[str, tuple[int, int, int, int]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
}
_SEEDS = {"resnet18": 18, "resnet34": 34, "resnet50": 50}


def _basic(b: GraphBuilder, x: str, p: str, cin: int, planes: int, stride: int) -> tuple[str, int]:
    y = b.conv(x, f"{p}.conv1", cin, planes, 3, stride=stride, pad=1, bias=False)
    y = b.relu(b.bn(y, f"{p}.bn1", planes), f"{p}.relu1")
    y = b.conv(y, f"{p}.conv2", planes, planes, 3, pad=1, bias=False)
    y = b.bn(y, f"{p}.bn2", planes)
    identity = x
    if stride != 1 or cin != planes:
        identity = b.conv(x, f"{p}.downsample.0", cin, planes, 1, stride=stride, bias=False)
        identity = b.bn(identity, f"{p}.downsample.1", planes)
    y = b.node("Add", [y, identity], f"{p}.add")
    return b.relu(y, f"{p}.relu2"), planes


def _bottleneck(b: GraphBuilder, x: str, p: str, cin: int, planes: int, stride: int) -> tuple[str, int]:
    width, cout = planes, planes * 4
    y = b.conv(x, f"{p}.conv1", cin, width, 1, bias=False)
    y = b.relu(b.bn(y, f"{p}.bn1", width), f"{p}.relu1")
    y = b.conv(y, f"{p}.conv2", width, width, 3, stride=stride, pad=1, bias=False)
    y = b.relu(b.bn(y, f"{p}.bn2", width), f"{p}.relu2")
    y = b.conv(y, f"{p}.conv3", width, cout, 1, bias=False)
    y = b.bn(y, f"{p}.bn3", cout)
    identity = x
    if stride != 1 or cin != cout:
        identity = b.conv(x, f"{p}.downsample.0", cin, cout, 1, stride=stride, bias=False)
        identity = b.bn(identity, f"{p}.downsample.1", cout)
    y = b.node("Add", [y, identity], f"{p}.add")
    return b.relu(y, f"{p}.relu3"), cout


def _resnet(name: str, batch: int, size: int, weights: bool) -> onnx.ModelProto:
    kind, layers = _STAGES[name]
    b = GraphBuilder(name, seed=_SEEDS[name], weights=weights, doc=f"torchvision {name}, input {size}x{size}")
    x = b.conv("input", "conv1", 3, 64, 7, stride=2, pad=3, bias=False)
    x = b.relu(b.bn(x, "bn1", 64), "relu")
    x = b.maxpool(x, "maxpool", 3, 2, 1)
    block = _basic if kind == "basic" else _bottleneck
    cin = 64
    for stage, (planes, count) in enumerate(zip((64, 128, 256, 512), layers), start=1):
        for i in range(count):
            stride = 2 if (i == 0 and stage > 1) else 1
            x, cin = block(b, x, f"layer{stage}.{i}", cin, planes, stride)
    x = b.flatten(b.global_avgpool(x, "avgpool"), "flatten")
    b.gemm(x, "fc", cin, 1000, out="output")
    return b.model([("input", (batch, 3, size, size))], [("output", (batch, 1000))])


def resnet18(batch: int = 1, size: int = 224, *, weights: bool = True) -> onnx.ModelProto:
    """torchvision ResNet-18 (BasicBlock x [2, 2, 2, 2])."""
    return _resnet("resnet18", batch, size, weights)


def resnet34(batch: int = 1, size: int = 224, *, weights: bool = True) -> onnx.ModelProto:
    """torchvision ResNet-34 (BasicBlock x [3, 4, 6, 3])."""
    return _resnet("resnet34", batch, size, weights)


def resnet50(batch: int = 1, size: int = 224, *, weights: bool = True) -> onnx.ModelProto:
    """torchvision ResNet-50 (Bottleneck x [3, 4, 6, 3], stride on the 3x3 conv)."""
    return _resnet("resnet50", batch, size, weights)
