"""onnxroof census as a user runs it: a file that resumes (and --force that starts afresh), one that is no census,
an interrupted census that keeps its rows, the same rows from --jobs 2 as from --jobs 1, the one-line errors, and
the census figure."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from onnxroof.cli import main
from onnxroof.report.census_files import read_census
from onnxroof.whatif import census as census_module
from onnxroof.whatif.census import Task, row_key
from tests.helpers import matmul_model


@pytest.fixture
def models(tmp_path: Path) -> list[str]:
    folder = tmp_path / "models"
    folder.mkdir()
    return [matmul_model(folder / "a.onnx"), matmul_model(folder / "b.onnx")]


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The keys of every row the task function is asked for (the census runs it in-process with --jobs 1)."""
    keys: list[tuple[Any, ...]] = []
    real = census_module.run_task

    def counting(task: Task) -> list[dict[str, Any]]:
        keys.extend(task.row_keys())
        return real(task)

    monkeypatch.setattr(census_module, "run_task", counting)
    return keys


def census(*args: str) -> int:
    return main(["census", *args, "--jobs", "1"])


def test_a_rerun_resumes_and_computes_only_the_rows_it_lacks(
    models: list[str], tmp_path: Path, asked: list[tuple[Any, ...]], capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "c.csv")
    assert census(models[0], "-d", "v100-sxm2", "--batch", "1,2", "-o", out) == 0
    first = read_census(out)
    assert len(first) == 1 * 1 * 2 and len(asked) == 2
    asked.clear()
    assert census(*models, "-d", "v100-sxm2,t4", "--batch", "1,2", "-o", out) == 0
    rows = read_census(out)
    assert len(rows) == 2 * 2 * 2 and len(asked) == 8 - 2
    assert not {row_key(r) for r in first} & set(asked)  # the rows the file held were not computed again
    assert [r for r in rows if row_key(r) in {row_key(f) for f in first}] == first
    assert [(r["model"], r["batch"], r["device"]) for r in rows] == [
        (m, b, d) for m in models for b in (1, 2) for d in ("v100-sxm2", "t4")
    ]
    assert "8 rows" in capsys.readouterr().out


def test_force_starts_afresh(models: list[str], tmp_path: Path, asked: list[tuple[Any, ...]]) -> None:
    out = str(tmp_path / "c.json")
    assert census(models[0], "-d", "v100-sxm2,t4", "-o", out) == 0
    asked.clear()
    assert census(models[0], "-d", "t4", "-o", out, "--force") == 0
    assert len(asked) == 1
    assert [(r["device"], r["flops"]) for r in read_census(out)] == [("t4", 4096)]  # v100-sxm2's row is gone


def test_an_existing_file_that_is_no_census_is_refused_without_force(
    models: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine.csv"
    out.write_text("keep me\n")
    assert census(models[0], "-o", str(out)) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "is not a census output" in line and "--force" in line
    assert out.read_text() == "keep me\n"
    assert census(models[0], "-o", str(out), "--force") == 0
    assert [r["flops"] for r in read_census(out)] == [4096]


def test_an_interrupted_census_keeps_its_rows_and_the_rerun_finishes_it(
    models: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = str(tmp_path / "c.csv")
    real = census_module.run_task
    calls: list[str] = []

    def interrupted(task: Task) -> list[dict[str, Any]]:
        calls.append(task.model)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(census_module, "run_task", interrupted)
    assert census(*models, "-d", "v100-sxm2", "-o", out) == 130
    assert [r["model"] for r in read_census(out)] == models[:1]
    calls.clear()
    monkeypatch.setattr(census_module, "run_task", lambda task: calls.append(task.model) or real(task))
    assert census(*models, "-d", "v100-sxm2", "-o", out) == 0
    assert calls == models[1:] and [r["model"] for r in read_census(out)] == models


def test_two_jobs_give_the_rows_of_one(models: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["census", str(Path(models[0]).parent), "-d", "v100-sxm2,t4", "--batch", "1,4", "-p", "fp16", "-f", "json"]
    assert main([*args, "--jobs", "1"]) == 0
    one = json.loads(capsys.readouterr().out)["rows"]
    assert main([*args, "--jobs", "2"]) == 0
    two = json.loads(capsys.readouterr().out)["rows"]
    assert one == two and len(one) == 2 * 2 * 2 * 1
    # fp16 at batch 4: [4, 64] x [64, 32], 2*4*64*32 = 16384 FLOPs over (4*64 + 64*32 + 4*32) * 2 bytes = 4864
    assert {(r["flops"], r["bytes_moved"]) for r in one if r["batch"] == 4} == {(16384, 4864)}


def test_parquet_without_pyarrow_is_one_line_with_the_extra(
    models: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert census(models[0], "-o", str(tmp_path / "c.parquet")) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "pip install 'onnxroof[parquet]'" in line
    assert not (tmp_path / "c.parquet").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nothing-*.onnx"], "matches no .onnx file"),
        (["zoo:nope"], "no zoo model named 'nope'"),
        (["zoo:conv2d_kernel", "-o", "c.txt"], "names no format"),
        (["zoo:conv2d_kernel", "--jobs", "0"], "--jobs 0"),
        (["zoo:conv2d_kernel", "--force"], "there is none"),
        (["zoo:conv2d_kernel", "-o", "c.csv", "-f", "json"], "disagree"),
        (["zoo:conv2d_kernel", "--batch", "0"], "positive integers"),
        (["zoo:conv2d_kernel", "-d", "no-such-gpu"], "unknown device"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args: list[str], message: str, tmp_path: Path) -> None:
    run = cli("census", *[str(tmp_path / a) if a.startswith(("nothing", "c.")) else a for a in args])
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "hint:" in lines[0], run.stderr


def test_plot_draws_a_census_file(models: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = str(tmp_path / "c.csv")
    assert census(*models, "-d", "v100-sxm2,colab-xeon-1core", "-o", rows) == 0
    figure = tmp_path / "census.svg"
    assert main(["plot", "--kind", "census", rows, "-o", str(figure)]) == 0
    assert figure.read_text().lstrip().startswith("<?xml") and "wrote the census figure" in capsys.readouterr().out
    assert main(["plot", "--kind", "census", rows, "-d", "t4", "-o", str(figure), "--force"]) == 2
    assert "do not apply to --kind census" in capsys.readouterr().err
