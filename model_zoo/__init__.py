"""A zoo of ONNX models built in code, for analysis without downloads.

Each model is generated with ``onnx.helper`` (opset 17, IR version 8) with deterministic weights, so the zoo
needs neither network access nor a deep-learning framework. The networks follow torchvision's definitions
(ResNet-18/34/50, VGG-16, AlexNet, MobileNetV2, ViT-B/16) and the papers behind onnxroof (paper 000's 2D U-Net,
paper 001's Conv2D and LSTM kernels). Every model has one graph input named ``input`` with a fixed shape and
its main output named ``output``.

Decoders are a family of their own: ``decoder_names()`` lists them and ``build_decoder(name)`` builds one, a
forward step with symbolic batch and sequence dims and a KV cache, in one of two layouts at the same shapes:
``SHAPE-QUANT`` (``llama-3-8b-int4``, ``-fp16``) in onnxruntime GenAI's layout (decoder.py, GroupQueryAttention),
``SHAPE-hf-QUANT`` (``llama-3-8b-hf-fp16``, ``-hf-fp32``) as Hugging Face optimum exports it (decoder_hf.py,
attention in standard ops).

``build(name, weights=False)`` gives the same graph with every initializer reduced to its name, dims and dtype,
pointing at external data that does not exist: enough for shape inference and cost analysis without
materialising the weights (VGG-16 alone holds 553 MB of float32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import onnx

from .alexnet import alexnet
from .decoder import DECODERS, genai_decoder
from .decoder_hf import HF_QUANTS, hf_decoder
from .kernels import conv2d_kernel, lstm_kernel
from .mobilenet import mobilenetv2
from .resnet import resnet18, resnet34, resnet50
from .unet import unet
from .vgg import vgg16
from .vit import vit_b_16

__all__ = ["build", "build_decoder", "decoder_names", "describe", "describe_decoder", "names"]

# The weight formats the zoo builds each decoder in: GenAI's layout in 4-bit blocks (CPU, fp32 activations) and
# fp16; optimum's in fp16 and fp32, as it exports them.
_DECODER_QUANTS = ("int4", "fp16")
_HF = "hf"  # the name part that marks optimum's layout: SHAPE-hf-QUANT


@dataclass(frozen=True)
class _Entry:
    builder: Callable[..., onnx.ModelProto]
    description: str


_ZOO: dict[str, _Entry] = {
    "alexnet": _Entry(alexnet, "torchvision AlexNet; batch 1, 3x224x224 input, 1000 classes, 61.1M parameters"),
    "conv2d_kernel": _Entry(
        conv2d_kernel,
        "paper 001's Conv2D kernel: one Conv 64@3x3/2 pad 1, no bias; batch 16, 64x112x112 input -> 64x56x56",
    ),
    "lstm_kernel": _Entry(
        lstm_kernel,
        "paper 001's LSTM kernel: one forward LSTM node, hidden 16; batch 16, sequence 16 (size), 32 features",
    ),
    "mobilenetv2": _Entry(
        mobilenetv2, "torchvision MobileNetV2 (width 1.0); batch 1, 3x224x224 input, 1000 classes, 3.5M parameters"
    ),
    "resnet18": _Entry(resnet18, "torchvision ResNet-18; batch 1, 3x224x224 input, 1000 classes, 11.7M parameters"),
    "resnet34": _Entry(resnet34, "torchvision ResNet-34; batch 1, 3x224x224 input, 1000 classes, 21.8M parameters"),
    "resnet50": _Entry(
        resnet50, "torchvision ResNet-50 (v1.5); batch 1, 3x224x224 input, 1000 classes, 25.6M parameters"
    ),
    "unet": _Entry(
        unet,
        "paper 000's 2D U-Net: 32 base filters, depth 4 (512-filter bottleneck), nearest upsampling, sigmoid; "
        "batch 1, 3x128x128 input, 4 classes, 7.8M parameters",
    ),
    "vgg16": _Entry(vgg16, "torchvision VGG-16 (no BN); batch 1, 3x224x224 input, 1000 classes, 138.4M parameters"),
    "vit_b_16": _Entry(
        vit_b_16,
        "torchvision ViT-B/16; batch 1, 3x224x224 input (size a multiple of 16), 197 tokens, 1000 classes, "
        "86.6M parameters",
    ),
}


def names() -> list[str]:
    """The zoo's model names, sorted."""
    return sorted(_ZOO)


def describe(name: str) -> str:
    """One line: what the model is and its defaults. KeyError for an unknown name."""
    return f"{name}: {_entry(name).description}"


def build(
    name: str, *, batch: int | None = None, size: int | None = None, weights: bool = True, **kwargs: Any
) -> onnx.ModelProto:
    """Build zoo model ``name``.

    ``batch`` and ``size`` (the spatial side of image models, the sequence length of ``lstm_kernel``) default
    to the model's own defaults (batch 1, except 16 for paper 001's kernels). ``weights=False`` leaves every
    initializer as dims and dtype pointing at nonexistent external data. Extra keyword arguments go to the
    model's builder (for example ``base_filters``, ``classes``, ``in_channels``, ``depth`` for ``unet``).
    Raises KeyError for an unknown name, ValueError for an invalid size, TypeError for an unknown keyword.
    """
    entry = _entry(name)
    if batch is not None:
        if batch < 1:
            raise ValueError(f"{name}: batch must be positive, got {batch}")
        kwargs["batch"] = batch
    if size is not None:
        if size < 1:
            raise ValueError(f"{name}: size must be positive, got {size}")
        kwargs["size"] = size
    return entry.builder(weights=weights, **kwargs)


def _entry(name: str) -> _Entry:
    try:
        return _ZOO[name]
    except KeyError:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(names())}") from None


def _decoder_table() -> dict[str, tuple[str, str, str]]:
    """Each zoo decoder's name and its (shape, layout, weight format); the layout "" for GenAI's, "hf" for
    optimum's."""
    table = {f"{shape}-{quant}": (shape, "", quant) for shape in DECODERS for quant in _DECODER_QUANTS}
    table |= {f"{shape}-{_HF}-{quant}": (shape, _HF, quant) for shape in DECODERS for quant in HF_QUANTS}
    return table


def decoder_names() -> list[str]:
    """The zoo's decoders as ``SHAPE-QUANT`` (GenAI's layout) and ``SHAPE-hf-QUANT`` (optimum's), sorted."""
    return sorted(_decoder_table())


def _decoder_parts(name: str) -> tuple[str, str, str]:
    """A zoo decoder's shape, layout and weight format; KeyError for an unknown name."""
    try:
        return _decoder_table()[name]
    except KeyError:
        raise KeyError(f"unknown zoo decoder {name!r}; known: {', '.join(decoder_names())}") from None


def describe_decoder(name: str) -> str:
    """One line: the decoder's layout, sizes and weights. KeyError for an unknown name."""
    shape, layout, quant = _decoder_parts(name)
    d = DECODERS[shape]
    where = "Hugging Face optimum's layout (plain-op attention)" if layout == _HF else "onnxruntime GenAI's layout"
    return (
        f"{shape} decoder step in {where}, {quant} weights: {d.layers} layers, hidden {d.hidden}, {d.heads} heads "
        f"sharing {d.kv_heads} KV heads of {d.head}, MLP {d.intermediate}, vocabulary {d.vocab}"
    )


def build_decoder(name: str, *, weights: bool = True) -> onnx.ModelProto:
    """Build zoo decoder ``name`` (one of :func:`decoder_names`); KeyError for an unknown name."""
    shape, layout, quant = _decoder_parts(name)
    if layout == _HF:
        return hf_decoder(shape, quant=quant, weights=weights)  # type: ignore[arg-type]
    return genai_decoder(shape, quant=quant, weights=weights)  # type: ignore[arg-type]
