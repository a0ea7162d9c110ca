"""The zoo's decoders in onnxruntime GenAI's layout: their parameters against the published counts, what the
analysis reads of their cache, and a prefill and a decode step in onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import model_zoo
from model_zoo.decoder import DECODERS, genai_decoder
from onnxroof.devices import load_device
from onnxroof.load import load_graph
from onnxroof.predict.analysis import analyze_graph

# Hugging Face's parameter count of Meta-Llama-3-8B (its model card: 8.03B): embed_tokens 128256 x 4096,
# 32 layers of (q, o 4096 x 4096; k, v 4096 x 1024; gate, up, down 4096 x 14336; two norms of 4096), the final
# norm and lm_head 4096 x 128256:
# 2 * 525,336,576 + 32 * (33,554,432 + 8,388,608 + 176,160,768 + 8,192) + 4,096 = 8,030,261,248.
LLAMA_3_8B_PARAMS = 8_030_261_248
# The GenAI layout adds the rotary caches cos_cache and sin_cache, 8192 positions x 64 each, and the
# total_sequence_length it computes from the mask's shape (1 element, a constant once the shape is fixed).
ROTARY_CACHES = 2 * 8192 * 64
DECODE = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 16, "total_sequence_length": 17}


def _params(name: str, quant: str) -> int:
    graph = load_graph(genai_decoder(name, quant=quant, weights=False), dims=DECODE)
    return analyze_graph(graph, load_device("a100-sxm4-80gb")).totals.params


def test_llama_3_8b_fp16_has_the_published_parameter_count():
    assert _params("llama-3-8b", "fp16") == LLAMA_3_8B_PARAMS + ROTARY_CACHES + 1


def test_int4_params_count_weights_not_packed_bytes():
    # Each 4-bit projection of N outputs over K inputs stores N * K / 32 block scales beside its N * K weights:
    # per layer q, o 4096 * 128; k, v 1024 * 128; gate, up 14336 * 128; down 4096 * 448 = 6,815,744; lm_head
    # 128256 * 128 = 16,416,768.
    scales = 32 * 6_815_744 + 16_416_768
    assert _params("llama-3-8b", "int4") == LLAMA_3_8B_PARAMS + scales + ROTARY_CACHES + 1


def test_decode_step_reads_the_valid_rows_of_a_shared_cache():
    # A 64-row buffer shared by past and present, 16 rows valid, one new token: every GroupQueryAttention reads
    # its 16 past rows of K and V and writes the one new row of each, whatever the buffer's length.
    shape = DECODERS["tiny-decoder"]
    dims = {**DECODE, "past_sequence_length": 64}
    graph = load_graph(genai_decoder("tiny-decoder", quant="int4", weights=False), dims=dims)
    attention = [
        n for n in analyze_graph(graph, load_device("a100-sxm4-80gb")).nodes if n.op_type == "GroupQueryAttention"
    ]
    assert len(attention) == shape.layers
    row = shape.kv_heads * shape.head * 4  # one fp32 row of one cache: 2 heads x 16 x 4 bytes = 128
    hidden = shape.heads * shape.head * 4  # one token's query or output: 256 bytes
    new = hidden + 2 * row + 4 + 4  # query, key, value, seqlens_k, total_sequence_length
    rotary = 2 * (shape.head // 2) * 4  # one position's row of cos_cache and of sin_cache
    for node in attention:
        assert node.cost.bytes_read == new + 2 * 16 * row + rotary
        assert node.cost.bytes_written == hidden + 2 * 1 * row
        assert node.cost.macs == 2 * shape.heads * 17 * shape.head


def test_decoder_names_and_unknown_ones():
    assert "llama-3-8b-int4" in model_zoo.decoder_names()
    with pytest.raises(KeyError):
        model_zoo.build_decoder("llama-3-8b-int3")
    with pytest.raises(ValueError):
        genai_decoder("tiny-decoder", block_size=24)


@pytest.mark.ort
@pytest.mark.parametrize("quant", ["int4", "fp16"])
def test_prefill_then_decode_runs_in_onnxruntime(quant: str):
    import onnxruntime as ort

    shape = DECODERS["tiny-decoder"]
    session = ort.InferenceSession(
        model_zoo.build_decoder(f"tiny-decoder-{quant}").SerializeToString(), providers=["CPUExecutionProvider"]
    )
    dtype = np.float32 if quant == "int4" else np.float16
    prompt = 8
    empty = np.zeros((1, shape.kv_heads, 0, shape.head), dtype)
    feeds = {"input_ids": np.arange(prompt, dtype=np.int64)[None], "attention_mask": np.ones((1, prompt), np.int64)}
    feeds |= {f"past_key_values.{i}.{part}": empty for i in range(shape.layers) for part in ("key", "value")}
    logits, *present = session.run(None, feeds)
    assert logits.shape == (1, prompt, shape.vocab) and np.isfinite(logits).all()
    assert present[0].shape == (1, shape.kv_heads, prompt, shape.head)
    step = {"input_ids": np.array([[3]], np.int64), "attention_mask": np.ones((1, prompt + 1), np.int64)}
    step |= {f"past_key_values.{i // 2}.{('key', 'value')[i % 2]}": p for i, p in enumerate(present)}
    logits, *present = session.run(None, step)
    assert logits.shape == (1, 1, shape.vocab) and present[0].shape == (1, shape.kv_heads, prompt + 1, shape.head)
