"""The zoo's decoders in onnxruntime GenAI's layout and in Hugging Face optimum's: their parameters against the
published counts, what the analysis reads of their cache, and a prefill and a decode step in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import model_zoo
from model_zoo.decoder import DECODERS, genai_decoder
from model_zoo.decoder_hf import TOTAL_LENGTH, hf_decoder
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
# Hugging Face's parameter count of Llama-2-7b-hf (6,738,415,616): embed_tokens 32000 x 4096, 32 layers of (q, k, v,
# o 4096 x 4096 each, 32 KV heads; gate, up, down 4096 x 11008; two norms of 4096), the final norm and lm_head
# 4096 x 32000: 2 * 131,072,000 + 32 * (67,108,864 + 135,266,304 + 8,192) + 4,096 = 6,738,415,616.
LLAMA_2_7B_PARAMS = 6_738_415_616
DECODE = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 16, "total_sequence_length": 17}


def _params(name: str, quant: str) -> int:
    graph = load_graph(genai_decoder(name, quant=quant, weights=False), dims=DECODE)
    return analyze_graph(graph, load_device("a100-sxm4-80gb")).totals.params


def test_llama_3_8b_fp16_has_the_published_parameter_count():
    assert _params("llama-3-8b", "fp16") == LLAMA_3_8B_PARAMS + ROTARY_CACHES + 1


def test_llama_2_7b_fp16_has_the_published_parameter_count():
    # with GenAI's rotary caches, 4096 positions x 64 each, and the constant total_sequence_length
    assert _params("llama-2-7b", "fp16") == LLAMA_2_7B_PARAMS + 2 * 4096 * 64 + 1


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


# -- optimum's layout ---------------------------------------------------------------------------------------------

# The HF layout computes cos and sin from position_ids, so it holds no rotary tables; the analysis counts its float
# Constants as parameters: the inverse frequencies inv_freq, head_dim / 2 = 128 / 2 = 64 of them, and six scalars
# (RMSNorm's exponent 2, its eps and the 1 it divides, the attention scale, the mask's 0 and its lowest value).
HF_CONSTANTS = 64 + 6
HF_DECODE = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 16, TOTAL_LENGTH: 17}


@pytest.mark.parametrize("quant", ["fp16", "fp32"])
def test_llama_3_8b_hf_has_the_published_parameter_count(quant: str):
    graph = load_graph(hf_decoder("llama-3-8b", quant=quant, weights=False), dims=HF_DECODE)
    params = analyze_graph(graph, load_device("a100-sxm4-80gb")).totals.params
    assert params == LLAMA_3_8B_PARAMS + HF_CONSTANTS


def test_hf_layout_has_optimums_inputs_and_outputs_in_standard_ops():
    model = model_zoo.build_decoder("llama-3-8b-hf-fp16", weights=False)
    onnx.checker.check_model(model)
    shape = DECODERS["llama-3-8b"]

    def dims(info: onnx.ValueInfoProto) -> list[int | str]:
        return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]

    inputs = {i.name: (dims(i), i.type.tensor_type.elem_type) for i in model.graph.input}
    tokens = ["batch_size", "sequence_length"]
    assert list(inputs)[:3] == ["input_ids", "attention_mask", "position_ids"]
    assert inputs["input_ids"] == inputs["position_ids"] == (tokens, TensorProto.INT64)
    assert inputs["attention_mask"] == (["batch_size", "past_sequence_length + sequence_length"], TensorProto.INT64)
    past = ["batch_size", shape.kv_heads, "past_sequence_length", shape.head]
    assert inputs["past_key_values.31.value"] == (past, TensorProto.FLOAT16) and len(inputs) == 3 + 2 * shape.layers
    outputs = {o.name: dims(o) for o in model.graph.output}
    assert outputs["logits"] == [*tokens, shape.vocab]
    assert outputs["present.0.key"] == ["batch_size", shape.kv_heads, TOTAL_LENGTH, shape.head]
    assert {n.domain for n in model.graph.node} == {""} and [o.version for o in model.opset_import] == [17]
    concats = [n for n in model.graph.node if n.output[0].startswith("present.")]
    assert len(concats) == 2 * shape.layers and all(n.op_type == "Concat" for n in concats)


def test_hf_names_and_unknown_ones():
    names = model_zoo.decoder_names()
    assert {"llama-3-8b-hf-fp16", "llama-3-8b-hf-fp32", "tiny-decoder-hf-fp16"} <= set(names)
    assert "optimum" in model_zoo.describe_decoder("llama-3-8b-hf-fp16")
    with pytest.raises(KeyError):
        model_zoo.build_decoder("llama-3-8b-hf-int4")
    with pytest.raises(ValueError):
        hf_decoder("tiny-decoder", quant="int4")


class _HFSession:
    """tiny-decoder-hf-QUANT in onnxruntime: one step over given tokens, mask, positions and cache."""

    def __init__(self, quant: str) -> None:
        import onnxruntime as ort

        self.shape = DECODERS["tiny-decoder"]
        model = model_zoo.build_decoder(f"tiny-decoder-hf-{quant}")
        self.session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        self.dtype = np.float16 if quant == "fp16" else np.float32

    def step(self, tokens, cache=None, mask=None, positions=None) -> tuple[np.ndarray, list[np.ndarray]]:
        """(logits, presents) of ``tokens`` after ``cache`` (none: an empty one), every row attended and the
        tokens at the positions after the cache unless ``mask`` and ``positions`` say otherwise."""
        s, new = self.shape, len(tokens)
        cache = cache or [np.zeros((1, s.kv_heads, 0, s.head), self.dtype)] * (2 * s.layers)
        past = cache[0].shape[2]
        feeds = {
            "input_ids": np.array([tokens], np.int64),
            "attention_mask": np.array([mask or [1] * (past + new)], np.int64),
            "position_ids": np.array([positions or range(past, past + new)], np.int64),
        }
        feeds |= {f"past_key_values.{i // 2}.{('key', 'value')[i % 2]}": c for i, c in enumerate(cache)}
        logits, *presents = self.session.run(None, feeds)
        return logits.astype(np.float32), presents


@pytest.mark.ort
@pytest.mark.parametrize("quant", ["fp16", "fp32"])
def test_hf_prefill_then_decode_matches_one_prefill(quant: str):
    # Prefilling t0..t4 and prefilling t0..t3 then decoding t4 over the returned cache attend the same keys and
    # values from the same positions: the last logits agree, and the earlier ones do not see the later tokens.
    hf = _HFSession(quant)
    s, tolerance = hf.shape, 2e-2 if quant == "fp16" else 1e-4
    tokens = [7, 3, 200, 41, 9]
    logits, presents = hf.step(tokens)
    assert logits.shape == (1, 5, s.vocab) and np.isfinite(logits).all() and np.abs(logits).max() > 0.1
    assert len(presents) == 2 * s.layers and presents[0].shape == (1, s.kv_heads, 5, s.head)
    after, grown = hf.step([11], presents)
    assert after.shape == (1, 1, s.vocab) and grown[-1].shape == (1, s.kv_heads, 6, s.head)
    prefix, cache = hf.step(tokens[:4])
    np.testing.assert_allclose(prefix, logits[:, :4], atol=tolerance)
    last, _ = hf.step(tokens[4:], cache)
    np.testing.assert_allclose(last[0, 0], logits[0, -1], atol=tolerance)
    assert np.abs(last[0, 0] - prefix[0, -1]).max() > 0.1  # a different token after the same prefix


@pytest.mark.ort
@pytest.mark.parametrize("quant", ["fp16", "fp32"])
def test_hf_padding_is_masked(quant: str):
    # A left-padded prompt, positions counted from its first real token as transformers' generate counts them,
    # gives the unpadded prompt's logits: no query attends the padding row, whatever it holds.
    hf = _HFSession(quant)
    tolerance = 2e-2 if quant == "fp16" else 1e-4
    alone, _ = hf.step([7, 3, 200, 41])
    padded, _ = hf.step([0, 7, 3, 200, 41], mask=[0, 1, 1, 1, 1], positions=[1, 0, 1, 2, 3])
    np.testing.assert_allclose(padded[:, 1:], alone, atol=tolerance)


@pytest.mark.ort
@pytest.mark.parametrize("quant", ["fp16", "fp32"])
def test_hf_rotary_reads_the_relative_positions(quant: str):
    # Rotary embedding makes each score depend on the distance between query and key: positions shifted by 100
    # give the same logits, positions spaced twice as far do not.
    hf = _HFSession(quant)
    tolerance = 2e-2 if quant == "fp16" else 1e-4
    tokens = [7, 3, 200, 41, 9]
    logits, _ = hf.step(tokens)
    shifted, _ = hf.step(tokens, positions=[100, 101, 102, 103, 104])
    spread, _ = hf.step(tokens, positions=[0, 2, 4, 6, 8])
    np.testing.assert_allclose(shifted, logits, atol=tolerance)
    assert np.abs(spread - logits).max() > 0.1
