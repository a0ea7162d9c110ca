"""The published LLM-measurement benchmark's data, conversions and counts (tools/llm_published.py is a script, loaded
from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from onnxroof.devices import catalog

_PATH = Path(__file__).resolve().parent.parent / "tools" / "llm_published.py"
_spec = importlib.util.spec_from_file_location("onnxroof_llm_published_tool", _PATH)
tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = tool  # its dataclasses look their module up there
_spec.loader.exec_module(tool)

_FIELDS = (
    "id",
    "model",
    "precision",
    "engine",
    "engine_version",
    "device",
    "metric",
    "set",
    "includes",
    "source",
    "excerpt",
)


def _row(ratio: float, outside: str = "") -> object:
    # a latency row, whose ratio is predicted over published as given
    return tool.Row("r", "llama.cpp", "rtx-4090", "llama-2-7b", "fp16", 1, 512, 1, "first_token_ms", "held-out",
                    1.0, ratio, outside=outside)  # fmt: skip


def test_every_row_is_sourced_and_names_a_catalog_device_or_says_why_not():
    rows = tool.read_rows()
    assert len({r["id"] for r in rows}) == len(rows) >= 40
    assert {r["set"] for r in rows} == set(tool.SETS)
    assert {r["engine"] for r in rows} == set(tool.PROFILES)
    for row in rows:
        assert all(str(row.get(f, "")).strip() for f in _FIELDS), row["id"]
        assert row["value"] > 0 and row["metric"] in tool.UNITS, row["id"]
        assert "@" in row["source"] or "https://" in row["source"] or "stored copy" in row["source"], row["id"]
        if tool.catalog_device(row) is None:
            assert "not in the catalog" in tool.why_skipped(row), row["id"]
    assert {*tool.DEVICES.values(), *tool.UNSTATED.values()} <= set(catalog())


def test_fp8_rows_are_recorded_and_skipped_with_the_reason():
    fp8 = [r for r in tool.read_rows() if r["precision"] == "fp8"]
    assert fp8 and all(tool.why_skipped(r).startswith("fp8:") for r in fp8)


def test_a_static_batch_throughput_is_its_tokens_over_the_prefill_and_the_steps_after_the_first_token():
    # batch 4, OSL 3: the prefill gives each sequence its first token, 2 decode steps the rest:
    # 4 * 3 / (0.1 + 2 * 0.05) = 12 / 0.2 = 60 tokens/s
    row = {"id": "r", "metric": "output_tokens_per_s", "batch": 4, "input_len": 100, "output_len": 3}
    assert tool.steps(row) == (100, 2)
    assert tool.predicted_value(row, 0.1, 0.05) == pytest.approx(60.0)


def test_the_other_metrics_read_the_prefill_or_the_decode_steps():
    row = {"id": "r", "batch": 4, "input_len": 100, "output_len": 128}
    ttft, pp, tg = (row | {"metric": m} for m in ("first_token_ms", "prompt_tokens_per_s", "decode_tokens_per_s"))
    assert tool.steps(ttft) == tool.steps(pp) == (100, 1)
    assert tool.predicted_value(ttft, 0.1, 0.05) == pytest.approx(100.0)  # 0.1 s, in ms
    assert tool.predicted_value(pp, 0.1, 0.05) == pytest.approx(4000.0)  # 4 x 100 tokens / 0.1 s
    # tg from a one-token prompt over 128 steps: 4 sequences / 0.05 s a step = 80 tokens/s
    assert tool.steps(tg) == (1, 128) and tool.predicted_value(tg, 0.1, 0.05) == pytest.approx(80.0)


def test_the_ratio_is_predicted_over_published_time():
    # a rate predicted at 60 against 120 published takes twice the time; a latency's ratio is its own
    assert tool.time_ratio("output_tokens_per_s", 60.0, 120.0) == pytest.approx(2.0)
    assert tool.time_ratio("first_token_ms", 9.0, 18.0) == pytest.approx(0.5)


def test_the_counts_take_20_percent_either_way_and_leave_out_an_unstated_gpu():
    # 1.2 and 0.84 lie within 20% (0.84 > 1 / 1.2 = 0.833); 0.8 within 2x only; 2.5 beyond 2x; 0.1 not counted
    rows = [_row(1.2), _row(0.84), _row(0.8), _row(2.5), _row(0.1, outside=tool.UNSTATED_NOTE)]
    assert tool.summary(tool.counted(rows)).startswith("2 of 4 rows within 20% (50%), 3 within 2x")
    text = tool.render(rows)
    assert "0.10  no  (not counted" in text
    assert "target: 75% of the counted rows within 20%: 50% (not met)" in text
