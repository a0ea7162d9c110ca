"""The 2D U-Net of the U-Net roofline study (paper 000, sections 3-4), built from the paper's description.

32 base filters, a 128x128 input with 3 channels and 4 output classes by default. The encoder has ``depth``
levels (32, 64, 128, 256 filters); each level is a block of two 3x3 'same' convs (pad 1, with bias) each
followed by ReLU, and a 2x2/2 MaxPool halves the spatial size before the next level while the filters double.
The bottleneck block has 512 filters. Each decoder level upsamples by 2 with a nearest Resize, concatenates
the skip connection of the matching encoder level, and applies a block whose filters halve. A final 1x1 conv
maps the base filters to the classes, followed by Sigmoid.

With the defaults the model has sum over convs of (k*k*cin*cout + cout) = 7,846,756 parameters.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

__all__ = ["unet"]


def _block(b: GraphBuilder, x: str, p: str, cin: int, cout: int) -> str:
    """Two 3x3 'same' convs, each followed by ReLU."""
    x = b.relu(b.conv(x, f"{p}.conv1", cin, cout, 3, pad=1), f"{p}.relu1")
    return b.relu(b.conv(x, f"{p}.conv2", cout, cout, 3, pad=1), f"{p}.relu2")


def unet(
    batch: int = 1,
    size: int = 128,
    *,
    base_filters: int = 32,
    classes: int = 4,
    in_channels: int = 3,
    depth: int = 4,
    weights: bool = True,
) -> onnx.ModelProto:
    """Paper 000's 2D U-Net; ``size`` must be divisible by ``2**depth``."""
    if depth < 1:
        raise ValueError(f"unet: depth must be at least 1, got {depth}")
    if size <= 0 or size % (2**depth):
        raise ValueError(f"unet: input size must be a positive multiple of 2**depth = {2**depth}, got {size}")
    b = GraphBuilder(
        "unet",
        seed=0,
        weights=weights,
        doc=f"2D U-Net (paper 000): {base_filters} base filters, depth {depth}, input {in_channels}x{size}x{size}, "
        f"{classes} classes",
    )
    skips: list[tuple[str, int]] = []
    x, cin = "input", in_channels
    for level in range(depth):
        cout = base_filters * 2**level
        x = _block(b, x, f"encoder{level}", cin, cout)
        skips.append((x, cout))
        x = b.maxpool(x, f"encoder{level}.pool", 2, 2)
        cin = cout
    bottleneck = base_filters * 2**depth
    x = _block(b, x, "bottleneck", cin, bottleneck)
    cin = bottleneck
    for level in reversed(range(depth)):
        skip, skip_channels = skips[level]
        x = b.upsample_nearest(x, f"decoder{level}.upsample", 2)
        x = b.node("Concat", [x, skip], f"decoder{level}.concat", axis=1)
        x = _block(b, x, f"decoder{level}", cin + skip_channels, skip_channels)
        cin = skip_channels
    x = b.conv(x, "head", cin, classes, 1)
    b.node("Sigmoid", [x], "sigmoid", outputs=["output"])
    return b.model([("input", (batch, in_channels, size, size))], [("output", (batch, classes, size, size))])
