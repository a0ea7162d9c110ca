"""The census benchmark on a tiny set (tools/bench_census.py is a script, loaded from its file): every mode, a
Dask cluster it starts itself among them, gives the same rows, and the printout and the JSON hold every figure
and every target's verdict. Timings are not checked: a test's timings say nothing."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.helpers import matmul_model

_PATH = Path(__file__).resolve().parent.parent / "tools" / "bench_census.py"
_spec = importlib.util.spec_from_file_location("onnxroof_bench_census_tool", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclasses look their module up there
_spec.loader.exec_module(bench)

MODES = ["direct", "local-1", "local-2", "dask-2"]


def test_every_mode_gives_the_same_rows_and_each_target_its_verdict(tmp_path: Path, capsys) -> None:
    pytest.importorskip("distributed")
    models = [matmul_model(tmp_path / f"m{i}.onnx") for i in range(2)]
    out = tmp_path / "bench.json"
    argv = ["--models", ",".join(models), "--devices", "v100-sxm2,t4", "--batches", "1", "--precisions", "fp32"]
    argv += ["--modes", ",".join(MODES), "--client-memory", "3", "--json", str(out)]
    assert bench.main(argv) == 0
    printed = capsys.readouterr()
    saved = json.loads(out.read_text())
    # 2 models x 1 batch: 2 tasks of 2 devices x 1 precision, 4 rows in every mode.
    assert [(m["mode"], m["tasks"], m["rows"], m["errors"]) for m in saved["modes"]] == [(m, 2, 4, 0) for m in MODES]
    assert [m["workers"] for m in saved["modes"]] == [1, 1, 2, 2]
    assert saved["rows_agree"] and "rows: the same in every mode" in printed.out
    assert printed.out.startswith("census benchmark on ") and saved["cpu"] in printed.out.splitlines()[0]
    table = printed.out.splitlines()
    assert all(any(line.startswith(f"{m} ") for line in table) for m in MODES)
    # 3 model references, cycled from the 2, x 2 devices: 6 rows through the cluster.
    assert saved["client_memory"]["rows"] == 6 and saved["client_memory"]["peak_rss_bytes"] > 0
    assert "client memory: 6 rows of 3 tasks through dask-2" in printed.out
    verdicts = [t["target"].partition(":")[0] for t in saved["targets"]]
    assert verdicts[:5] == ["local-2", "dask-2", "local-1", "local-2", "dask-2"]  # speedups, then overheads
    assert verdicts[5].startswith("a census of 3 graph-only models stays under 1 GB")
    assert all(isinstance(t["met"], bool) for t in saved["targets"])
    assert printed.out.count(": met") + printed.out.count(": not met") == len(verdicts)
    assert [line.split(" (")[0] for line in printed.err.splitlines() if "round" in line] == [
        f"bench_census: {m}" for m in MODES
    ]


def test_the_overheads_are_the_workers_time_outside_the_tasks() -> None:
    # 10 tasks of 0.1 s each on 2 workers in 0.6 s: (0.6 x 2 - 1.0) / 10 = 20 ms a task, 20% of a task's 0.1 s.
    # Against a direct loop of 0.9 s: (1.2 - 0.9) / 10 = 30 ms a task, a third of its 90 ms.
    runs = [bench.Run("direct", 1, 10, 40, 0, 0.9, 0.9, "x"), bench.Run("dask-2", 2, 10, 40, 0, 0.6, 1.0, "x")]
    direct, dask = bench.figures(runs)
    assert dask["overhead_per_task_s"] == pytest.approx(0.02) and dask["overhead_share"] == pytest.approx(0.2)
    assert dask["over_direct_per_task_s"] == pytest.approx(0.03)
    assert dask["over_direct_share"] == pytest.approx(1 / 3)
    assert dask["speedup"] is None and direct["overhead_per_task_s"] == 0  # no local-1 ran
    assert bench.overhead_verdicts([dask])[0].met is False  # 20% > 10%


def test_the_model_references_repeat_to_the_count_asked() -> None:
    assert bench.cycled(["a", "b"], 5) == ["a", "b", "a", "b", "a"]
