"""Llama-style decoders in the layout Hugging Face optimum exports, built in code at any size.

The graph is one forward step of the decoder as ``optimum-cli export onnx --task text-generation-with-past``
writes it for Llama (optimum's TextDecoderWithPositionIdsOnnxConfig; the attention decomposed into standard ops):

- inputs ``input_ids`` and ``position_ids`` ``[batch_size, sequence_length]``, ``attention_mask``
  ``[batch_size, past_sequence_length + sequence_length]`` (int64; optimum's name for the total length) and, per
  layer, ``past_key_values.{i}.key`` / ``.value`` ``[batch_size, kv_heads, past_sequence_length, head_dim]``;
  outputs ``logits`` ``[batch_size, sequence_length, vocab]`` and ``present.{i}.key`` / ``.value`` (the past
  concatenated with the new rows along the sequence axis);
- computed once for every layer: the embedding (a Gather), the rotary cos and sin ``[batch, 1, sequence, head]``
  from ``position_ids`` and the inverse frequencies (a Constant: fixed by the config, not learned), and the
  additive mask ``[batch, 1, sequence, total]``: 0 where a query may attend a key (the key is not after it in the
  cache and not padding), the dtype's lowest value elsewhere, built from the shapes and values of the inputs;
- per layer, as transformers' LlamaDecoderLayer computes it: RMSNorm in fp32 (Pow, ReduceMean, Add eps, Sqrt,
  Div, Mul; Casts around it for fp16), the Q, K and V projections reshaped and transposed to heads, rotary
  embedding (``x * cos + rotate_half(x) * sin``, rotate_half a Slice, Neg and Concat), the Concat of past and
  new keys and values, GQA by repeat_kv (Unsqueeze, Expand, Reshape), ``Q K^T``, the scale, the mask, Softmax in
  fp32, ``P V``, the output projection and the residual Add; a second RMSNorm, the SwiGLU MLP
  (``down(gate * Sigmoid(gate) * up)``) and its residual Add; then a final RMSNorm and the LM head.

Weights are MatMul ``[in, out]`` in fp16 or fp32, named after the model's state_dict; activations and the KV cache
are in the same dtype. The rotary base is 10000 for every shape: the values do not change the graph's costs.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import onnx
from onnx import TensorProto, helper

from ._builder import GraphBuilder
from .decoder import DECODERS, DecoderShape

__all__ = ["HF_QUANTS", "TOTAL_LENGTH", "hf_decoder"]

HFQuant = Literal["fp16", "fp32"]
HF_QUANTS: tuple[HFQuant, ...] = ("fp16", "fp32")
#: optimum's name for the total length: attention_mask's dim 1 and the present caches' dim 2.
TOTAL_LENGTH = "past_sequence_length + sequence_length"

_RMS_EPS = 1e-5
_ROPE_THETA = 10000.0
_INT64_MAX = np.iinfo(np.int64).max


class _HFDecoder:
    """Builds one decoder graph layer by layer, in the ops the Hugging Face model exports to."""

    def __init__(self, b: GraphBuilder, shape: DecoderShape, quant: HFQuant) -> None:
        self.b, self.shape = b, shape
        self.io = TensorProto.FLOAT16 if quant == "fp16" else TensorProto.FLOAT
        self.np_io = helper.tensor_dtype_to_np_dtype(self.io)

    # -- small pieces -----------------------------------------------------------------------------------------

    def scalar(self, value: float, name: str) -> str:
        """A constant scalar in the activations' dtype."""
        return self.b.const(np.array(value, dtype=self.np_io), name)

    def cast(self, x: str, to: int, name: str) -> str:
        """x (in fp32 or the activations' dtype) cast to ``to``: an fp32 model has no casts, x is returned."""
        return x if self.io == TensorProto.FLOAT else self.b.node("Cast", [x], name, to=to)

    def linear(self, x: str, name: str, fin: int, fout: int, *, bias: bool = False, out: str = "") -> str:
        """nn.Linear as exported: MatMul with the ``[in, out]`` weight (+ the bias); the product named ``out``
        where given."""
        b = self.b
        w = b.add_weight(f"{name}.weight", [fin, fout], fan_in=fin, dtype=self.io)
        y = b.node("MatMul", [x, w], f"{name}.matmul", outputs=[out] if out and not bias else 1)
        if bias:
            bias_weight = b.add_weight(f"{name}.bias", [fout], init="zeros", dtype=self.io)
            y = b.node("Add", [y, bias_weight], f"{name}.add", outputs=[out] if out else 1)
        return y

    def rms_norm(self, x: str, name: str) -> str:
        """LlamaRMSNorm: ``weight * (x / sqrt(mean(x^2) + eps))``, the statistics in fp32."""
        b = self.b
        x32 = self.cast(x, TensorProto.FLOAT, f"{name}.cast")
        square = b.node("Pow", [x32, b.const(2.0, "two")], f"{name}.pow")
        mean = b.node("ReduceMean", [square], f"{name}.mean", axes=[-1], keepdims=1)
        root = b.node("Sqrt", [b.node("Add", [mean, b.const(_RMS_EPS, "rms_eps")], f"{name}.add_eps")], f"{name}.sqrt")
        inverse = b.node("Div", [b.const(1.0, "one.f32"), root], f"{name}.rsqrt")
        normed = self.cast(b.node("Mul", [x32, inverse], f"{name}.normalize"), self.io, f"{name}.cast_back")
        weight = b.add_weight(f"{name}.weight", [self.shape.hidden], init="ones", dtype=self.io)
        return b.node("Mul", [weight, normed], f"{name}.scale")

    # -- computed once ----------------------------------------------------------------------------------------

    def rotary(self) -> tuple[str, str]:
        """cos and sin ``[batch, 1, sequence, head]`` of ``position_ids * inv_freq`` concatenated with itself, as
        transformers' LlamaRotaryEmbedding computes them (in fp32)."""
        b, head = self.b, self.shape.head
        inv_freq = 1.0 / _ROPE_THETA ** (np.arange(0, head, 2, dtype=np.float32) / head)
        positions = b.node("Cast", ["position_ids"], "rotary.positions", to=TensorProto.FLOAT)
        positions = b.node("Unsqueeze", [positions, b.const([2], "axes.2")], "rotary.positions.unsqueeze")
        freqs = b.node("Mul", [positions, b.const(inv_freq.astype(np.float32), "inv_freq")], "rotary.freqs")
        emb = b.node("Concat", [freqs, freqs], "rotary.emb", axis=-1)
        tables = []
        for which in ("Cos", "Sin"):
            value = self.cast(b.node(which, [emb], f"rotary.{which.lower()}"), self.io, f"rotary.{which.lower()}.cast")
            tables.append(b.node("Unsqueeze", [value, b.const([1], "axes.1")], f"rotary.{which.lower()}.heads"))
        return tables[0], tables[1]

    def causal_mask(self) -> str:
        """The additive mask ``[batch, 1, sequence, total]``: query i (at cache row past + i) may attend key j
        where ``j <= past + i`` and ``attention_mask[:, j]`` is set."""
        b = self.b
        total = b.node("Gather", [b.node("Shape", ["attention_mask"], "mask.shape"), b.const(1, "dim.1")], "mask.total")
        sequence = b.node("Gather", [b.node("Shape", ["input_ids"], "ids.shape"), b.const(1, "dim.1")], "ids.sequence")
        past = b.node("Sub", [total, sequence], "mask.past")
        step = b.const(1, "dim.1")
        keys = b.node("Range", [b.const(0, "dim.0"), total, step], "mask.key_positions")
        queries = b.node("Range", [past, total, step], "mask.query_positions")
        queries = b.node("Unsqueeze", [queries, b.const([1], "axes.1")], "mask.query_column")
        causal = b.node("LessOrEqual", [keys, queries], "mask.causal")
        padding = b.node("Cast", ["attention_mask"], "mask.padding", to=TensorProto.BOOL)
        padding = b.node("Unsqueeze", [padding, b.const([1, 2], "axes.1_2")], "mask.padding.rows")
        allowed = b.node("And", [causal, padding], "mask.allowed")
        lowest = float(np.finfo(self.np_io).min)
        return b.node("Where", [allowed, self.scalar(0.0, "mask.zero"), self.scalar(lowest, "mask.lowest")], "mask")

    # -- one layer --------------------------------------------------------------------------------------------

    def heads(self, x: str, name: str, count: int) -> str:
        """``[batch, sequence, count * head]`` viewed as ``[batch, count, sequence, head]``."""
        b = self.b
        split = b.node("Reshape", [x, b.const([0, 0, -1, self.shape.head], "shape.heads")], f"{name}.view")
        return b.node("Transpose", [split], f"{name}.transpose", perm=[0, 2, 1, 3])

    def rotate(self, x: str, cos: str, sin: str, name: str) -> str:
        """``x * cos + rotate_half(x) * sin``, rotate_half(x) being ``concat(-x2, x1)`` of x's two halves."""
        b, half = self.b, self.shape.head // 2
        axes = b.const([-1], "axes.last")
        first = b.node("Slice", [x, b.const([0], "dim.0s"), b.const([half], "rotary.half"), axes], f"{name}.x1")
        second = b.node("Slice", [x, b.const([half], "rotary.half"), b.const([_INT64_MAX], "end"), axes], f"{name}.x2")
        rotated = b.node("Concat", [b.node("Neg", [second], f"{name}.neg"), first], f"{name}.rotate_half", axis=-1)
        return b.node(
            "Add",
            [b.node("Mul", [x, cos], f"{name}.cos"), b.node("Mul", [rotated, sin], f"{name}.sin")],
            f"{name}.rotary",
        )

    def repeat_kv(self, x: str, name: str) -> str:
        """repeat_kv: each of the KV heads ``[batch, kv_heads, total, head]`` repeated for the query heads that
        share it, as ``[batch, heads, total, head]``; x itself where every head has its own."""
        s, b = self.shape, self.b
        if s.heads == s.kv_heads:
            return x
        repeats = b.const([1, 1, s.heads // s.kv_heads, 1, 1], "shape.repeat_kv")
        unsqueezed = b.node("Unsqueeze", [x, b.const([2], "axes.2")], f"{name}.unsqueeze")
        expanded = b.node("Expand", [unsqueezed, repeats], f"{name}.expand")
        target = b.const([0, s.heads, -1, s.head], "shape.repeated")
        return b.node("Reshape", [expanded, target], f"{name}.reshape")

    def attention(self, x: str, p: str, layer: int, rotary: tuple[str, str], mask: str) -> str:
        """LlamaAttention with a past: the new keys and values appended to the cache, eager attention over it."""
        s, b = self.shape, self.b
        q = self.heads(self.linear(x, f"{p}.q_proj", s.hidden, s.heads * s.head, bias=s.qkv_bias), f"{p}.q", s.heads)
        k = self.heads(
            self.linear(x, f"{p}.k_proj", s.hidden, s.kv_heads * s.head, bias=s.qkv_bias), f"{p}.k", s.kv_heads
        )
        v = self.heads(
            self.linear(x, f"{p}.v_proj", s.hidden, s.kv_heads * s.head, bias=s.qkv_bias), f"{p}.v", s.kv_heads
        )
        q, k = self.rotate(q, *rotary, f"{p}.q"), self.rotate(k, *rotary, f"{p}.k")
        keys, values = (
            b.node(
                "Concat",
                [f"past_key_values.{layer}.{part}", new],
                f"{p}.{part}.cat",
                outputs=[f"present.{layer}.{part}"],
                axis=-2,
            )
            for part, new in (("key", k), ("value", v))
        )
        keys_t = b.node("Transpose", [self.repeat_kv(keys, f"{p}.repeat_k")], f"{p}.k.t", perm=[0, 1, 3, 2])
        scores = b.node(
            "Mul", [b.node("MatMul", [q, keys_t], f"{p}.qk"), self.scalar(s.head**-0.5, "attn.scale")], f"{p}.scaled"
        )
        scores = self.cast(b.node("Add", [scores, mask], f"{p}.masked"), TensorProto.FLOAT, f"{p}.scores.cast")
        probs = self.cast(b.node("Softmax", [scores], f"{p}.softmax", axis=-1), self.io, f"{p}.probs.cast")
        out = b.node("MatMul", [probs, self.repeat_kv(values, f"{p}.repeat_v")], f"{p}.pv")
        out = b.node("Transpose", [out], f"{p}.out.transpose", perm=[0, 2, 1, 3])
        out = b.node("Reshape", [out, b.const([0, 0, -1], "shape.merge_heads")], f"{p}.out.view")
        return self.linear(out, f"{p}.o_proj", s.heads * s.head, s.hidden)

    def mlp(self, x: str, p: str) -> str:
        """LlamaMLP: ``down(silu(gate(x)) * up(x))``, SiLU exported as ``x * Sigmoid(x)``."""
        s, b = self.shape, self.b
        gate = self.linear(x, f"{p}.gate_proj", s.hidden, s.intermediate)
        up = self.linear(x, f"{p}.up_proj", s.hidden, s.intermediate)
        act = b.node("Mul", [gate, b.node("Sigmoid", [gate], f"{p}.act.sigmoid")], f"{p}.act.mul")
        return self.linear(b.node("Mul", [act, up], f"{p}.act.up"), f"{p}.down_proj", s.intermediate, s.hidden)

    def build(self) -> None:
        s, b = self.shape, self.b
        embed = b.add_weight("model.embed_tokens.weight", [s.vocab, s.hidden], init="normal", std=0.02, dtype=self.io)
        x = b.node("Gather", [embed, "input_ids"], "model.embed_tokens")
        rotary, mask = self.rotary(), self.causal_mask()
        for i in range(s.layers):
            p = f"model.layers.{i}"
            y = self.attention(self.rms_norm(x, f"{p}.input_layernorm"), f"{p}.self_attn", i, rotary, mask)
            x = b.node("Add", [x, y], f"{p}.attn.residual")
            y = self.mlp(self.rms_norm(x, f"{p}.post_attention_layernorm"), f"{p}.mlp")
            x = b.node("Add", [x, y], f"{p}.mlp.residual")
        self.linear(self.rms_norm(x, "model.norm"), "lm_head", s.hidden, s.vocab, out="logits")


def hf_decoder(name: str = "tiny-decoder", *, quant: HFQuant = "fp16", weights: bool = True) -> onnx.ModelProto:
    """The decoder ``name`` (a key of :data:`DECODERS`) as optimum exports it, with ``quant`` weights and
    activations; ``weights=False`` leaves every initializer as dims and dtype pointing at external data that does
    not exist."""
    if name not in DECODERS:
        raise KeyError(f"unknown decoder {name!r}; known: {', '.join(sorted(DECODERS))}")
    if quant not in HF_QUANTS:
        raise ValueError(f"quant must be one of {', '.join(HF_QUANTS)}, got {quant!r}")
    shape = DECODERS[name]
    doc = f"{name} decoder step in Hugging Face optimum's layout (attention in standard ops), {quant} weights"
    b = GraphBuilder(f"{name}-hf-{quant}", seed=56, weights=weights, doc=doc)
    decoder = _HFDecoder(b, shape, quant)
    decoder.build()
    io = decoder.io
    tokens: list[int | str] = ["batch_size", "sequence_length"]
    past: list[int | str] = ["batch_size", shape.kv_heads, "past_sequence_length", shape.head]
    present: list[int | str] = ["batch_size", shape.kv_heads, TOTAL_LENGTH, shape.head]
    inputs: list[tuple[str, list[int | str], int]] = [
        ("input_ids", tokens, TensorProto.INT64),
        ("attention_mask", ["batch_size", TOTAL_LENGTH], TensorProto.INT64),
        ("position_ids", tokens, TensorProto.INT64),
    ]
    outputs: list[tuple[str, list[int | str], int]] = [("logits", [*tokens, shape.vocab], io)]
    for i in range(shape.layers):
        for part in ("key", "value"):
            inputs.append((f"past_key_values.{i}.{part}", past, io))
            outputs.append((f"present.{i}.{part}", present, io))
    return b.model(inputs, outputs)
