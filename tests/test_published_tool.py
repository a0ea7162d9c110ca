"""The published-measurement benchmark's data and counts (tools/published.py is a script, loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "tools" / "published.py"
_spec = importlib.util.spec_from_file_location("onnxroof_published_tool", _PATH)
published = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = published  # its dataclasses look their module up there
_spec.loader.exec_module(published)

_FIELDS = ("id", "model", "input", "batch", "precision", "engine", "device", "metric", "value", "includes", "source")


def _row(ratio: float, engine: str = "tensorrt", outside: str = "") -> object:
    return published.Row("r", engine, "t4", "resnet50", 1, "fp16", "latency_ms", 1.0, ratio, "", outside)


def test_the_data_holds_40_sourced_rows_over_5_gpus_and_3_engines_and_none_from_the_reserved_sources():
    rows = published.read_rows()
    assert len(rows) >= 40
    assert len({r["device"] for r in rows}) >= 5
    assert {r["engine"] for r in rows} >= {"tensorrt", "onnxruntime-cuda", "pytorch-eager"}
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert all(row.get(f) not in (None, "") for f in _FIELDS), row["id"]
        source = row["source"].lower()
        assert "mlcommons" not in source and "mlperf" not in source, row["id"]
        assert "demo/bert" not in source, row["id"]
        assert bool(row.get("engine_release")) == bool(row.get("release_basis")), row["id"]
        assert ("onnx_opset" in row) == bool(row.get("opset_basis")), row["id"]


def test_a_row_whose_source_fixes_the_opset_is_predicted_on_that_export():
    row = {"model": "bert_large", "input": "seq=384"}
    assert published.graph_name(row) == "bert_large_qa_384"
    assert published.graph_name(row | {"onnx_opset": 13}) == "bert_large_qa_384-opset13"
    assert published.graph_name({"model": "unknown", "input": "seq=1", "onnx_opset": 13}) is None


def test_a_throughput_row_is_one_batch_over_its_rate():
    # 256 images at 1280 images/s: 0.2 s a batch
    assert published.measured_seconds({"metric": "throughput_per_s", "batch": 256, "value": 1280}) == 0.2
    assert published.measured_seconds({"metric": "latency_ms", "batch": 8, "value": 2.5}) == pytest.approx(2.5e-3)


def test_a_client_round_trip_is_printed_and_kept_out_of_the_counts():
    rows = [_row(1.0), _row(0.1, outside=published.CLIENT_ROUND_TRIP)]
    assert published.outside({"client_round_trip": True}) == published.CLIENT_ROUND_TRIP
    assert published.outside({}) == ""
    assert "1 rows:   1 within 25% (100%)" in published.summary(rows)
    text = published.render(rows)
    assert "0.10 (not counted" in text
    assert "within 25%: 100% (>= 75%), beyond 2x: 0 (0)" in text


def test_the_counts_take_25_percent_and_2x_either_way():
    # 1.25 and 0.8 lie within 25%; 0.5 within 2x only; 0.4 beyond 2x
    rows = [_row(1.25), _row(0.8), _row(0.5), _row(0.4, engine="pytorch-eager")]
    assert "4 rows:   2 within 25% ( 50%),   3 within 2x" in published.summary(rows)
    assert "within 25%: 67% (>= 75%), beyond 2x: 0 (0); all rows within 25%: 50%" in published.render(rows)
