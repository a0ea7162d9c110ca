"""ViT-B/16 as defined by torchvision (``torchvision.models.vit_b_16``).

Patch embedding: Conv 768@16x16/16 with bias, reshaped and transposed to ``[batch, tokens, 768]``; a learned
class token ``[1, 1, 768]`` expanded over the batch and concatenated in front; a learned position embedding
``[1, (size/16)^2 + 1, 768]`` added. Twelve pre-norm encoder layers, each: LayerNormalization; fused Q/K/V
projection (MatMul with ``[768, 2304]`` + bias Add, Split in three); 12 heads of 64 (Reshape, Transpose);
scores MatMul, scale Mul by 1/sqrt(64), Softmax, context MatMul; output projection MatMul + Add; residual Add;
LayerNormalization; MLP MatMul 768->3072 + Add, exact GELU as its erf decomposition
(Div by sqrt(2), Erf, Add 1, Mul x, Mul 0.5), MatMul 3072->768 + Add; residual Add. Then a final
LayerNormalization, the class token taken with Gather (index 0 on axis 1), and a 1000-way Gemm head. LayerNorm
epsilon is 1e-6 as in torchvision; Dropout is left out. MatMul weights are stored ``[in, out]``; names follow
torchvision's ``state_dict``. At 224x224 the parameter count matches torchvision's 86,567,656.
"""

from __future__ import annotations

import math

import onnx

from ._builder import GraphBuilder

__all__ = ["vit_b_16"]

_PATCH = 16
_DIM = 768
_HEADS = 12
_LAYERS = 12
_MLP = 3072


def _gelu(b: GraphBuilder, x: str, p: str) -> str:
    """Exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))), as torch.onnx exports it."""
    y = b.node("Div", [x, b.const(math.sqrt(2.0), "gelu.sqrt2")], f"{p}.div")
    y = b.node("Erf", [y], f"{p}.erf")
    y = b.node("Add", [y, b.const(1.0, "gelu.one")], f"{p}.add")
    y = b.node("Mul", [x, y], f"{p}.mul")
    return b.node("Mul", [y, b.const(0.5, "gelu.half")], f"{p}.mul_half")


def _attention(b: GraphBuilder, x: str, p: str, batch: int, tokens: int) -> str:
    head_dim = _DIM // _HEADS
    qkv = b.linear(x, f"{p}.in_proj", _DIM, 3 * _DIM, weight_name=f"{p}.in_proj")
    q, k, v = b.node_outputs("Split", [qkv], f"{p}.split", outputs=[f"{p}.q", f"{p}.k", f"{p}.v"], axis=-1)
    heads_shape = b.const([batch, tokens, _HEADS, head_dim], "shape.heads")
    q = b.node("Transpose", [b.node("Reshape", [q, heads_shape], f"{p}.q_heads")], f"{p}.q_t", perm=[0, 2, 1, 3])
    k = b.node("Transpose", [b.node("Reshape", [k, heads_shape], f"{p}.k_heads")], f"{p}.k_t", perm=[0, 2, 3, 1])
    v = b.node("Transpose", [b.node("Reshape", [v, heads_shape], f"{p}.v_heads")], f"{p}.v_t", perm=[0, 2, 1, 3])
    scores = b.node("MatMul", [q, k], f"{p}.scores")
    scores = b.node("Mul", [scores, b.const(1.0 / math.sqrt(head_dim), "attn.scale")], f"{p}.scale")
    attn = b.node("Softmax", [scores], f"{p}.softmax", axis=-1)
    ctx = b.node("MatMul", [attn, v], f"{p}.context")
    ctx = b.node("Transpose", [ctx], f"{p}.context_t", perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, b.const([batch, tokens, _DIM], "shape.tokens")], f"{p}.merge_heads")
    return b.linear(ctx, f"{p}.out_proj", _DIM, _DIM)


def _encoder_layer(b: GraphBuilder, x: str, p: str, batch: int, tokens: int) -> str:
    y = b.layernorm(x, f"{p}.ln_1", _DIM)
    y = _attention(b, y, f"{p}.self_attention", batch, tokens)
    x = b.node("Add", [x, y], f"{p}.residual_1")
    y = b.layernorm(x, f"{p}.ln_2", _DIM)
    y = b.linear(y, f"{p}.mlp.0", _DIM, _MLP)
    y = _gelu(b, y, f"{p}.mlp.1")
    y = b.linear(y, f"{p}.mlp.3", _MLP, _DIM)
    return b.node("Add", [x, y], f"{p}.residual_2")


def vit_b_16(batch: int = 1, size: int = 224, *, weights: bool = True) -> onnx.ModelProto:
    """torchvision ViT-B/16; ``size`` must be a multiple of 16."""
    if size <= 0 or size % _PATCH:
        raise ValueError(f"vit_b_16: input size must be a positive multiple of {_PATCH}, got {size}")
    grid = size // _PATCH
    tokens = grid * grid + 1
    b = GraphBuilder("vit_b_16", seed=16_16, weights=weights, doc=f"torchvision vit_b_16, input {size}x{size}")
    x = b.conv("input", "conv_proj", 3, _DIM, _PATCH, stride=_PATCH)
    x = b.node("Reshape", [x, b.const([batch, _DIM, grid * grid], "shape.patches")], "patches")
    x = b.node("Transpose", [x], "patch_tokens", perm=[0, 2, 1])
    cls = b.add_weight("class_token", [1, 1, _DIM], init="zeros")
    cls = b.node("Expand", [cls, b.const([batch, 1, _DIM], "shape.class_token")], "class_token_expand")
    x = b.node("Concat", [cls, x], "tokens", axis=1)
    pos = b.add_weight("encoder.pos_embedding", [1, tokens, _DIM], init="normal", std=0.02)
    x = b.node("Add", [x, pos], "encoder.add_pos_embedding")
    for i in range(_LAYERS):
        x = _encoder_layer(b, x, f"encoder.layers.encoder_layer_{i}", batch, tokens)
    x = b.layernorm(x, "encoder.ln", _DIM)
    x = b.node("Gather", [x, b.const(0, "class_index")], "class_token_out", axis=1)
    b.gemm(x, "heads.head", _DIM, 1000, out="output")
    return b.model([("input", (batch, 3, size, size))], [("output", (batch, 1000))])
