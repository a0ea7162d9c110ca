"""The compare, sweep and explore commands as a user runs them: output formats, and bad input as one line with a
hint and exit code 2."""

from __future__ import annotations

import csv
import io
import json

import pytest


def test_sweep_csv_has_a_row_per_combination(cli) -> None:
    run = cli("sweep", "zoo:unet?size=32", "--batch", "1,2", "--precision", "fp32,int8", "-d", "mx230", "-f", "csv")
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert [(r["batch"], r["precision"], r["kind"]) for r in rows] == [
        ("1", "fp32", "what-if"),
        ("1", "int8", "what-if"),
        ("2", "fp32", "what-if"),
        ("2", "int8", "what-if"),
    ]


def test_compare_json_lists_devices_and_layers(cli) -> None:
    run = cli("compare", "zoo:unet?size=32", "zoo:unet?size=32&batch=2", "-d", "mx230,gtx940mx", "-f", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [d["device"] for d in report["devices"]] == ["mx230", "gtx940mx"]
    assert all(layer["matched_by"] == "name" for layer in report["layers"])
    assert report["measured"] is None


def test_explore_table_names_what_does_not_apply(cli) -> None:
    run = cli("explore", "zoo:resnet18?size=32", "-d", "v100-sxm2", "--only", "lwu,separable")
    assert run.returncode == 0, run.stderr
    assert "separable" in run.stdout and "does not apply:" in run.stdout and "lwu" in run.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sweep", "zoo:unet?size=32", "--batch", "0"], "positive integers"),
        (["sweep", "zoo:unet?size=32", "--input-size", "12xq"], "expected HxW"),
        (["sweep", "zoo:unet?size=32", "--rewrite", "fp12"], "unknown rewrite"),
        (["compare", "zoo:unet?size=32", "missing.onnx"], "no such file"),
        (["explore", "zoo:unet?size=32", "--only", "winograd"], "unknown rewrite"),
        (["explore", "zoo:unet?size=32", "-d", "no-such-gpu"], "unknown device"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args: list[str], message: str) -> None:
    run = cli(*args)
    assert run.returncode == 2, run.stdout + run.stderr
    assert message in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
