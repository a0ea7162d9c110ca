"""Llama-style decoders in onnxruntime GenAI's layout, built in code at any size.

The graph is one forward step of the decoder as onnxruntime-genai's model builder writes it (its builder.py):

- inputs ``input_ids`` ``[batch_size, sequence_length]`` (int64), ``attention_mask``
  ``[batch_size, total_sequence_length]`` (int64) and, per layer, ``past_key_values.{i}.key`` / ``.value``
  ``[batch_size, kv_heads, past_sequence_length, head_size]``; outputs ``logits``
  ``[batch_size, sequence_length, vocab]`` and ``present.{i}.key`` / ``.value``. The dims are symbolic: a caller
  fixes them (``onnxroof llm`` does, per phase);
- the embedding a Gather; ``seqlens_k`` (ReduceSum of the mask, minus 1, as int32) and ``total_sequence_length``
  (Shape of the mask, Gather of dim 1, Cast to int32) computed once for every attention;
- per layer: SimplifiedLayerNormalization (RMSNorm; SkipSimplifiedLayerNormalization, which also adds the
  residual, after the first), the Q, K and V projections, GroupQueryAttention with rotary embedding from
  ``cos_cache`` / ``sin_cache`` ``[max_positions, head_size / 2]``, the output projection, a
  SkipSimplifiedLayerNormalization, and the SwiGLU MLP (gate and up projections, ``Sigmoid(g) * g * up``, the
  down projection); then a final norm and the LM head.

Projections are MatMulNBits (4 bits, blocks of ``block_size`` along K, symmetric: no zero points; accuracy level
4 as the builder's CPU int4 models) with ``quant="int4"``, else MatMul with fp16 or fp32 ``[in, out]`` weights.
The activations and the KV cache are fp32 for int4 (the builder's CPU models) and fp16 otherwise.

The shapes below are those of each model's Hugging Face ``config.json`` (hidden_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, max_position_embeddings); sources in
docs/references.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import onnx
from onnx import TensorProto

from ._builder import GraphBuilder

__all__ = ["DECODERS", "QUANTS", "DecoderShape", "genai_decoder"]

MS = "com.microsoft"
Quant = Literal["int4", "fp16", "fp32"]
QUANTS: tuple[Quant, ...] = ("int4", "fp16", "fp32")


@dataclass(frozen=True)
class DecoderShape:
    """A decoder's sizes, as its config.json gives them."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int
    head_size: int = 0  # 0: hidden // heads
    qkv_bias: bool = False  # Qwen2's projections carry biases

    @property
    def head(self) -> int:
        return self.head_size or self.hidden // self.heads


DECODERS: dict[str, DecoderShape] = {
    "llama-2-7b": DecoderShape(32, 4096, 32, 32, 11008, 32000, 4096),
    "llama-3-8b": DecoderShape(32, 4096, 32, 8, 14336, 128256, 8192),
    "llama-3.2-1b": DecoderShape(16, 2048, 32, 8, 8192, 128256, 131072),
    "qwen2.5-0.5b": DecoderShape(24, 896, 14, 2, 4864, 151936, 32768, qkv_bias=True),
    "phi-3-mini": DecoderShape(32, 3072, 32, 32, 8192, 32064, 4096),
    "tinyllama-1.1b": DecoderShape(22, 2048, 32, 4, 5632, 32000, 2048),
    # Small enough for the tests to run on a CPU with random weights: 2 layers, 4 heads of 16 sharing 2 KV heads.
    "tiny-decoder": DecoderShape(2, 64, 4, 2, 128, 256, 512),
}

_RMS_EPS = 1e-5


class _Decoder:
    """Builds one decoder graph layer by layer."""

    def __init__(self, b: GraphBuilder, shape: DecoderShape, quant: Quant, block_size: int) -> None:
        self.b, self.shape, self.quant, self.block_size = b, shape, quant, block_size
        self.io = TensorProto.FLOAT if quant in ("int4", "fp32") else TensorProto.FLOAT16

    def projection(self, x: str, name: str, fin: int, fout: int, *, bias: bool = False, out: str = "") -> str:
        """x @ W (+ b) for an ``[in, out]`` weight: MatMulNBits with 4-bit blocks, else MatMul; the product's
        output named ``out`` where given."""
        b, outputs = self.b, [out] if out else 1
        if self.quant == "int4":
            blocks = math.ceil(fin / self.block_size)
            packed = b.add_weight(f"{name}.qweight", [fout, blocks, self.block_size // 2], dtype=TensorProto.UINT8)
            scales = b.add_weight(f"{name}.scales", [fout * blocks], init="ones", dtype=self.io)
            inputs = [x, packed, scales]
            if bias:
                inputs += ["", "", b.add_weight(f"{name}.bias", [fout], init="zeros", dtype=self.io)]
            return b.node(
                "MatMulNBits",
                inputs,
                f"{name}.matmul",
                outputs=outputs,
                domain=MS,
                K=fin,
                N=fout,
                bits=4,
                block_size=self.block_size,
                accuracy_level=4,
            )
        w = b.add_weight(f"{name}.weight", [fin, fout], fan_in=fin, dtype=self.io)
        y = b.node("MatMul", [x, w], f"{name}.matmul", outputs=outputs)
        if bias:
            y = b.node("Add", [y, b.add_weight(f"{name}.bias", [fout], init="zeros", dtype=self.io)], f"{name}.add")
        return y

    def norm(self, x: str, name: str, residual: str | None) -> tuple[str, str]:
        """RMSNorm of x (+ residual): the normalized tensor and the residual stream it normalized."""
        b = self.b
        weight = b.add_weight(f"{name}.weight", [self.shape.hidden], init="ones", dtype=self.io)
        if residual is None:
            return b.node("SimplifiedLayerNormalization", [x, weight], name, axis=-1, epsilon=_RMS_EPS), x
        out, _, _, summed = b.node_outputs(
            "SkipSimplifiedLayerNormalization", [x, residual, weight], name, outputs=4, domain=MS, epsilon=_RMS_EPS
        )
        return out, summed

    def attention(self, x: str, p: str, layer: int, seqlens: str, total: str, rotary: tuple[str, str]) -> str:
        s, b = self.shape, self.b
        q = self.projection(x, f"{p}.q_proj", s.hidden, s.heads * s.head, bias=s.qkv_bias)
        k = self.projection(x, f"{p}.k_proj", s.hidden, s.kv_heads * s.head, bias=s.qkv_bias)
        v = self.projection(x, f"{p}.v_proj", s.hidden, s.kv_heads * s.head, bias=s.qkv_bias)
        past = [f"past_key_values.{layer}.key", f"past_key_values.{layer}.value"]
        present = [f"present.{layer}.key", f"present.{layer}.value"]
        out = b.node_outputs(
            "GroupQueryAttention",
            [q, k, v, *past, seqlens, total, *rotary],
            f"{p}.attn",
            outputs=[f"{p}.attn", *present],
            domain=MS,
            num_heads=s.heads,
            kv_num_heads=s.kv_heads,
            do_rotary=1,
            local_window_size=-1,
            scale=1.0 / math.sqrt(s.head),
        )[0]
        return self.projection(out, f"{p}.o_proj", s.heads * s.head, s.hidden)

    def mlp(self, x: str, p: str) -> str:
        s, b = self.shape, self.b
        gate = self.projection(x, f"{p}.gate_proj", s.hidden, s.intermediate)
        up = self.projection(x, f"{p}.up_proj", s.hidden, s.intermediate)
        act = b.node("Mul", [gate, b.node("Sigmoid", [gate], f"{p}.act.sigmoid")], f"{p}.act.mul")
        return self.projection(b.node("Mul", [act, up], f"{p}.act.up"), f"{p}.down_proj", s.intermediate, s.hidden)

    def mask_lengths(self) -> tuple[str, str]:
        """seqlens_k and total_sequence_length from attention_mask, as the builder computes them."""
        b = self.b
        summed = b.node("ReduceSum", ["attention_mask", b.const([1], "axes.1")], "mask.sum", keepdims=0)
        seqlens = b.node("Sub", [summed, b.const([1], "one")], "mask.seqlens")
        seqlens = b.node("Cast", [seqlens], "seqlens_k", to=TensorProto.INT32)
        dim = b.node("Gather", [b.node("Shape", ["attention_mask"], "mask.shape"), b.const(1, "dim.1")], "mask.dim")
        return seqlens, b.node("Cast", [dim], "total_sequence_length", to=TensorProto.INT32)

    def build(self) -> None:
        s, b = self.shape, self.b
        rotary = tuple(
            b.add_weight(f"{which}_cache", [s.max_positions, s.head // 2], init="ones", dtype=self.io)
            for which in ("cos", "sin")
        )
        embed = b.add_weight("model.embed_tokens.weight", [s.vocab, s.hidden], init="normal", std=0.02, dtype=self.io)
        x = b.node("Gather", [embed, "input_ids"], "model.embed_tokens")
        seqlens, total = self.mask_lengths()
        residual: str | None = None
        for i in range(s.layers):
            p = f"model.layers.{i}"
            y, residual = self.norm(x, f"{p}.input_layernorm", residual)
            y = self.attention(y, f"{p}.self_attn", i, seqlens, total, (rotary[0], rotary[1]))
            y, residual = self.norm(y, f"{p}.post_attention_layernorm", residual)
            x = self.mlp(y, f"{p}.mlp")
        y, _ = self.norm(x, "model.norm", residual)
        self.projection(y, "lm_head", s.hidden, s.vocab, out="logits")


def genai_decoder(
    name: str = "tiny-decoder", *, quant: Quant = "int4", block_size: int = 32, weights: bool = True
) -> onnx.ModelProto:
    """The decoder ``name`` (a key of :data:`DECODERS`) in onnxruntime GenAI's layout with ``quant`` weights;
    ``weights=False`` leaves every initializer as dims and dtype pointing at external data that does not exist."""
    if name not in DECODERS:
        raise KeyError(f"unknown decoder {name!r}; known: {', '.join(sorted(DECODERS))}")
    if quant not in QUANTS:
        raise ValueError(f"quant must be one of {', '.join(QUANTS)}, got {quant!r}")
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two of at least 16, got {block_size}")
    shape = DECODERS[name]
    doc = f"{name} decoder step in onnxruntime GenAI's layout, {quant} weights"
    b = GraphBuilder(f"{name}-{quant}", seed=55, weights=weights, doc=doc)
    decoder = _Decoder(b, shape, quant, block_size)
    decoder.build()
    io = decoder.io
    kv: list[int | str] = ["batch_size", shape.kv_heads, "past_sequence_length", shape.head]
    present: list[int | str] = ["batch_size", shape.kv_heads, "total_sequence_length", shape.head]
    inputs: list[tuple[str, list[int | str], int]] = [
        ("input_ids", ["batch_size", "sequence_length"], TensorProto.INT64),
        ("attention_mask", ["batch_size", "total_sequence_length"], TensorProto.INT64),
    ]
    outputs: list[tuple[str, list[int | str], int]] = [("logits", ["batch_size", "sequence_length", shape.vocab], io)]
    for i in range(shape.layers):
        for part in ("key", "value"):
            inputs.append((f"past_key_values.{i}.{part}", kv, io))
            outputs.append((f"present.{i}.{part}", present, io))
    return b.model(inputs, outputs, domains=[MS])
