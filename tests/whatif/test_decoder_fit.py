"""A decoder's fit by context: the KV cache by its dtype, the checks, the longest context and the largest batch
within a budget, and what is refused."""

from __future__ import annotations

import pytest

import model_zoo
from onnxroof.api import get_device
from onnxroof.errors import UserError
from onnxroof.load.decoder import position_limit
from onnxroof.units import parse_seconds
from onnxroof.whatif.decoder_fit import DecoderBudgets, fit_decoder, largest_decoder
from onnxroof.whatif.tensor_parallel import tensor_parallel

# tiny-decoder: 2 layers, 2 KV heads of 16. A token's cache row in one sequence: 2 layers x (K and V) x 2 heads x
# 16 elements = 128 elements, 256 B in fp16, 128 B in int8, 64 B in int4.
ROW_ELEMENTS = 2 * 2 * 2 * 16
DEVICE = "a100-sxm4-80gb"


def _tiny(quant: str = "fp16"):
    return model_zoo.build_decoder(f"tiny-decoder-{quant}", weights=False)


def _fit(context: int = 100, batch: int = 3, **budgets):
    return fit_decoder(_tiny(), get_device(DEVICE), context=context, batch=batch, budgets=DecoderBudgets(**budgets))


def test_the_kv_cache_is_its_rows_at_the_dtype_asked():
    fp16, int8, int4 = (_fit(kv_dtype=d) for d in ("fp16", "int8", "int4"))
    assert fp16.memory.kv_bytes_per_token == ROW_ELEMENTS * 2
    assert int8.memory.kv_bytes_per_token == ROW_ELEMENTS
    assert int4.memory.kv_bytes_per_token == ROW_ELEMENTS // 2
    # batch 3 at 100 tokens: 300 rows; weights and activations do not depend on the cache's dtype
    assert fp16.memory.kv_cache_bytes == 300 * ROW_ELEMENTS * 2
    assert fp16.memory.peak_bytes - int8.memory.peak_bytes == 300 * ROW_ELEMENTS
    assert fp16.kv_dtype == "fp16" and fp16.time_per_token_s is not None
    assert int8.time_per_token_s is None  # another cache dtype than the graph's: memory only


def test_the_checks_are_the_time_per_token_the_first_token_and_the_memory():
    f = _fit(per_token=parse_seconds("1s"), first_token=parse_seconds("1s"))
    assert [c.name for c in f.checks] == ["time per token", "time to first token", "memory"]
    assert f.checks[-1].value == f.memory.peak_bytes and f.checks[-1].budget == 80e9  # the A100's 80 GB
    assert f.passed
    assert not _fit(per_token=parse_seconds("1ns")).passed


def test_the_longest_context_within_a_memory_budget():
    device = get_device(DEVICE)
    budget = _fit(context=300).memory.peak_bytes  # the peak grows with the context (its cache does)
    found = largest_decoder(_tiny(), device, vary="context", batch=3, budgets=DecoderBudgets(memory=budget))
    assert (found.value, found.stopped_by) == (300, "memory budget")
    assert found.first_failing is not None and found.first_failing.context == 301


def test_the_context_search_ends_at_the_rotary_tables_positions():
    assert position_limit(_tiny()) == 512  # tiny-decoder's max_position_embeddings: its cos cache's rows
    found = largest_decoder(_tiny(), get_device(DEVICE), vary="context")
    assert (found.value, found.stopped_by) == (512, "the search limit (512)")


def test_the_largest_batch_at_a_context():
    device = get_device(DEVICE)
    budget = _fit(context=64, batch=5).memory.peak_bytes
    found = largest_decoder(_tiny(), device, vary="batch", context=64, budgets=DecoderBudgets(memory=budget))
    assert (found.value, found.stopped_by) == (5, "memory budget")


def test_a_fit_split_over_gpus_is_one_gpu_s_share():
    # Two GPUs: each holds half the split weights and one of the 2 KV heads (half a cache row); its decode step is
    # its share of the split products plus their all-reduces (onnxroof.whatif.tensor_parallel).
    device = get_device(DEVICE)
    whole = fit_decoder(_tiny(), device, context=100, batch=3)
    split = fit_decoder(_tiny(), device, context=100, batch=3, tensor_parallel=2)
    plan = tensor_parallel(_tiny(), device, 2)
    assert split.memory.weights_bytes == plan.weights_bytes(whole.memory.weights_bytes)
    assert split.memory.kv_cache_bytes * 2 == whole.memory.kv_cache_bytes
    assert split.tensor_parallel == 2 and split.to_dict()["tensor_parallel"] == 2
    assert split.time_per_token_s is not None and whole.time_per_token_s is not None
    assert split.time_per_token_s != whole.time_per_token_s
    budget = whole.memory.peak_bytes  # what one device's fit at batch 3 needs: two GPUs fit more sequences
    single = largest_decoder(_tiny(), device, vary="batch", context=100, budgets=DecoderBudgets(memory=budget))
    shared = largest_decoder(
        _tiny(), device, vary="batch", context=100, budgets=DecoderBudgets(memory=budget), tensor_parallel=2
    )
    assert single.value == 3 and shared.value > single.value


def test_what_is_refused():
    device = get_device(DEVICE)
    with pytest.raises(UserError, match="--kv-dtype int8 sizes the cache's memory"):
        fit_decoder(_tiny(), device, context=8, budgets=DecoderBudgets(per_token=1.0, kv_dtype="int8"))
    with pytest.raises(UserError, match="--kv-dtype int3: unknown"):
        fit_decoder(_tiny(), device, context=8, budgets=DecoderBudgets(kv_dtype="int3"))
    with pytest.raises(UserError, match="--shared-buffer"):
        fit_decoder(_tiny("hf-fp16"), device, context=8, shared_buffer=True)
    with pytest.raises(UserError, match="--context 0"):
        fit_decoder(_tiny(), device, context=0)
    with pytest.raises(UserError, match="--context 513: the decoder's rotary tables hold 512 positions"):
        fit_decoder(_tiny(), device, context=513)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["zoo:resnet18", "--kv-dtype", "int8"], "--kv-dtype is for decoders"),
        (["zoo:tiny-decoder-fp16", "--context", "8", "--training"], "--training does not apply to a decoder fit"),
        (["zoo:tiny-decoder-fp16", "--max-context", "--max-batch"], "--max-context searches the context"),
        (["zoo:resnet18", "--tensor-parallel", "2"], "--tensor-parallel is for decoders"),
    ],
)
def test_the_command_refuses_options_of_the_other_kind(argv, message, capsys):
    from onnxroof.cli import main

    assert main(["fit", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_command_fits_a_decoder(tmp_path):
    import json

    from onnxroof.cli import main

    out = tmp_path / "fit.json"
    argv = ["fit", "zoo:tiny-decoder-fp16", "-d", DEVICE, "--context", "100", "--batch", "3", "-f", "json"]
    assert main([*argv, "--kv-dtype", "int8", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["context"] == 100 and data["kv_dtype"] == "int8"
    assert data["memory"]["kv_cache_bytes"] == 300 * ROW_ELEMENTS
    assert main([*argv, "--tensor-parallel", "2", "-o", str(out), "--force"]) == 0
    data = json.loads(out.read_text())
    assert data["tensor_parallel"] == 2 and data["memory"]["kv_cache_bytes"] == 300 * ROW_ELEMENTS  # fp16, half
