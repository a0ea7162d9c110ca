"""A decoder's generation predicted phase by phase: the steps analyzed, the mean of the decode steps, the KV cache's
bytes, a shared buffer, and the llm command."""

from __future__ import annotations

import json

import pytest

import model_zoo
from model_zoo.decoder import DECODERS
from onnxroof import api
from onnxroof.errors import UserError
from onnxroof.load.decoder import decoder_dims
from onnxroof.whatif.decoder import decode_contexts, mean_step_time, predict_decoder
from tests.helpers import plain_ops_decoder

TINY = DECODERS["tiny-decoder"]


def _tiny(quant: str = "int4"):
    return model_zoo.build_decoder(f"tiny-decoder-{quant}", weights=False)


def test_every_decode_step_is_analyzed_up_to_the_samples_then_spaced_over_them():
    assert decode_contexts(100, 3, 9) == [100, 101, 102]
    spaced = decode_contexts(100, 1000, 9)
    assert len(spaced) == 9 and spaced[0] == 100 and spaced[-1] == 1099  # the first reads P, the last P + G - 1


def test_the_mean_of_steps_linear_in_the_context_is_their_midpoint():
    # t(c) = 1 ms + 2 us * c over the contexts 100 .. 1099: the mean is t at 100 + 999 / 2 = 599.5, exactly, from
    # the two ends alone
    steps = [(c, 1e-3 + 2e-6 * c) for c in (100, 1099)]
    assert mean_step_time(steps, 100, 1000) == pytest.approx(1e-3 + 2e-6 * 599.5)


def test_a_generation_on_the_tiny_decoder():
    p = predict_decoder(_tiny(), "a100-sxm4-80gb", prompt=4, generate=2, batch=3)
    assert p.exact and [s.context for s in p.decode] == [4, 5] and p.prefill.new_tokens == 4
    # One token's cache row for one sequence: 2 layers x (K and V) x 2 KV heads x 16 x 4 bytes (fp32) = 512 B; at
    # P + G = 6 tokens for 3 sequences: 9216 B.
    assert p.memory.kv_bytes_per_token == 2 * 2 * TINY.kv_heads * TINY.head * 4 == 512
    assert p.memory.kv_cache_bytes == 512 * 3 * 6
    assert p.memory.peak_bytes == p.memory.weights_bytes + p.memory.kv_cache_bytes + p.memory.activation_bytes
    # Each step is the analysis of the graph at that step's dims.
    dims = decoder_dims(_tiny())
    first = api.analyze(_tiny(), "a100-sxm4-80gb", dims=dims.step(3, 1, 4)).totals.prediction.predicted_time_s
    assert p.decode[0].time_s == first
    assert p.tokens_per_s == pytest.approx(3 / p.decode_mean_s)
    assert p.total_s == pytest.approx(p.prefill.time_s + 2 * p.decode_mean_s)


def test_a_shared_buffer_writes_only_the_new_rows():
    own = predict_decoder(_tiny("fp16"), "a100-sxm4-80gb", prompt=64, generate=64)
    shared = predict_decoder(_tiny("fp16"), "a100-sxm4-80gb", prompt=64, generate=64, shared_buffer=True)
    # The last step over 127 rows: with its own present it writes all 128 rows of K and V in both layers; in the
    # shared buffer the one new row. 127 rows x 2 (K, V) x 2 layers x 2 KV heads x 16 x 2 bytes fewer written.
    row = TINY.kv_heads * TINY.head * 2
    assert own.decode[-1].bytes - shared.decode[-1].bytes == 127 * 2 * TINY.layers * row


def test_bad_requests_are_refused():
    with pytest.raises(UserError, match="--generate 0"):
        predict_decoder(_tiny(), "a100-sxm4-80gb", prompt=4, generate=0)
    with pytest.raises(UserError, match="no past key/value cache"):
        predict_decoder(model_zoo.build("conv2d_kernel", weights=False), "a100-sxm4-80gb", prompt=4, generate=2)


def test_the_llm_command_writes_json_and_refuses_a_model_without_a_cache(cli):
    result = cli("llm", "zoo:tiny-decoder-int4", "--prompt", "8", "--generate", "4", "-d", "t4", "-f", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data["decode_s"]) == {"first", "mean", "last"}
    for key in ("prefill_s", "tokens_per_s", "kv_cache_bytes", "weights_bytes", "peak_bytes"):
        assert data[key] > 0
    refused = cli("llm", "zoo:conv2d_kernel", "--prompt", "8", "--generate", "4")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "no past key/value cache" in refused.stderr and "Traceback" not in refused.stderr


def test_a_shared_buffer_is_refused_where_the_attention_reads_its_whole_past():
    with pytest.raises(UserError, match="--shared-buffer: the decoder's attention is Concat"):
        predict_decoder(plain_ops_decoder(), "a100-sxm4-80gb", prompt=4, generate=2, shared_buffer=True)


@pytest.mark.ort
def test_measure_times_the_steps_the_prediction_analyzed(monkeypatch):
    from onnxroof.ort import measure as measure_module
    from onnxroof.whatif.decoder_measure import measure_generation

    p = predict_decoder(_tiny(), "a100-sxm4-80gb", prompt=4, generate=5, batch=2, samples=2)
    asked: list[dict] = []
    real = measure_module.measure

    def recording(spec, session, **kwargs):
        asked.append(dict(spec.dims))
        return real(spec, session, **kwargs)

    monkeypatch.setattr(measure_module, "measure", recording)
    m = measure_generation("zoo:tiny-decoder-int4", p, repeat=3).measured
    assert m is not None
    # the prefill over an empty cache, then the two decode steps analyzed: contexts 4 and 4 + 5 - 1 = 8
    assert [(d["sequence_length"], d["past_sequence_length"], d["total_sequence_length"]) for d in asked] == [
        (4, 0, 4),
        (1, 4, 5),
        (1, 8, 9),
    ]
    assert all(d["batch_size"] == 2 for d in asked)
    assert [c for c, _ in m.decode] == [4, 8] and m.prefill_s > 0
    # the mean of 5 steps interpolated between contexts 4 and 8 is the midpoint of the two ends
    assert m.decode_mean_s == pytest.approx((m.decode[0][1] + m.decode[1][1]) / 2)
    assert m.tokens_per_s == pytest.approx(2 / m.decode_mean_s)


def test_measure_refuses_another_device(capsys):
    from onnxroof.cli import main

    assert (
        main(["llm", "zoo:tiny-decoder-int4", "--prompt", "4", "--generate", "2", "-d", "a100-sxm4-80gb", "--measure"])
        == 2
    )
    assert "--measure times this machine, not a100-sxm4-80gb" in capsys.readouterr().err


def test_a_context_beyond_the_rotary_tables_is_refused():
    # tiny-decoder's cos and sin caches hold its 512 max_position_embeddings
    with pytest.raises(UserError, match="a context of 513 tokens: the decoder's rotary tables hold 512 positions"):
        predict_decoder(_tiny(), "a100-sxm4-80gb", prompt=500, generate=13)


def test_the_command_predicts_on_several_devices_and_draws_them(tmp_path):
    from onnxroof.cli import main

    out, figure = tmp_path / "llm.json", tmp_path / "llm.svg"
    argv = ["llm", "zoo:tiny-decoder-fp16", "--prompt", "8", "--generate", "4", "-d", "a100-sxm4-80gb,l4"]
    assert main([*argv, "-f", "json", "-o", str(out), "--figure", str(figure)]) == 0
    data = json.loads(out.read_text())
    assert [d["device"] for d in data["devices"]] == ["a100-sxm4-80gb", "l4"]
    assert all(d["precision"] == "fp16" for d in data["devices"])
    assert figure.read_text().lstrip().startswith("<?xml")
    assert main([*argv, "--figure", str(figure)]) == 2  # an existing figure is replaced only with --force
