"""fit: budgets parsed, each check passing just under its budget and failing just over it, the largest batch found
by the search, devices ranked, and the command's exit codes (0 all pass, 1 a miss, 2 bad input)."""

from __future__ import annotations

import json

import pytest

from onnxroof.units import parse_bytes, parse_seconds
from onnxroof.whatif.fit import Training, fit, max_batch, rank_devices

MODEL = "zoo:unet?size=32"


def test_checks_pass_just_under_and_fail_just_over_their_budgets() -> None:
    plain = fit(MODEL, "t4")
    latency, memory = plain.latency_s, plain.memory_bytes
    assert plain.passed  # 16 GB and no latency budget
    assert fit(MODEL, "t4", latency_budget=latency * 1.001, memory_budget=memory * 1.001).passed
    over_latency = fit(MODEL, "t4", latency_budget=latency * 0.999)
    assert not over_latency.passed
    assert [c.name for c in over_latency.checks if not c.passed] == ["latency"]
    over_memory = fit(MODEL, "t4", memory_budget=memory * 0.999)
    assert [c.name for c in over_memory.checks if not c.passed] == ["memory"]


def test_the_memory_budget_defaults_to_the_device_capacity() -> None:
    (memory,) = [c for c in fit(MODEL, "t4").checks if c.name == "memory"]
    assert memory.budget == 16e9  # the T4's 16 GB


def test_max_batch_is_the_last_batch_within_the_budget() -> None:
    at5, at6 = fit(MODEL, "t4", batch=5), fit(MODEL, "t4", batch=6)
    assert at5.memory_bytes < at6.memory_bytes  # memory grows with the batch
    budget = (at5.memory_bytes + at6.memory_bytes) / 2
    found = max_batch(MODEL, "t4", memory_budget=budget)
    assert found.batch == 5 and found.stopped_by == "memory budget"
    assert found.first_failing is not None and found.first_failing.batch == 6


def test_max_batch_is_zero_when_batch_one_does_not_fit() -> None:
    found = max_batch(MODEL, "t4", memory_budget=1000.0)
    assert found.batch == 0 and found.best is None


def test_devices_are_ranked_fitting_first_then_by_latency() -> None:
    ranked = rank_devices(MODEL, ["mx230", "h100-sxm", "t4"], latency_budget=1.0)
    latencies = [d.fit.latency_s for d in ranked if d.fit.passed]
    assert latencies == sorted(latencies)
    assert ranked[0].fit.device == "h100-sxm"
    for d in ranked:
        assert d.largest.batch >= 1 and d.throughput == pytest.approx(d.largest.batch / d.largest.best.latency_s)


def test_command_exit_codes(cli) -> None:
    passing = cli("fit", MODEL, "-d", "t4", "--latency-budget", "10s")
    assert passing.returncode == 0 and passing.stdout.startswith("PASS"), passing.stderr
    failing = cli("fit", MODEL, "-d", "t4", "--latency-budget", "1ns")
    assert failing.returncode == 1 and failing.stdout.startswith("FAIL")
    bad_options = (
        ["-d", "no-such-gpu"],
        ["--latency-budget", "soon"],
        ["--latency-budget", "10"],  # no unit: 10 s or 10 ms?
        ["--memory-budget", "lots"],
        ["--memory-budget", "4G"],  # GB or GiB?
        ["--batch", "0"],
    )
    for bad in bad_options:
        run = cli("fit", MODEL, *bad)
        assert run.returncode == 2 and "Traceback" not in run.stderr, bad
        assert len(run.stderr.strip().splitlines()) == 1


def test_command_json_and_max_batch(cli) -> None:
    run = cli("fit", MODEL, "-d", "t4", "--max-batch", "--memory-budget", "200MB", "-f", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["batch"] >= 1 and report["stopped_by"] == "memory budget"
    assert report["fit"]["memory_bytes"] <= 200e6 < report["first_failing"]["memory_bytes"]


def test_a_check_is_shown_in_the_unit_its_budget_was_written_in() -> None:
    from onnxroof.report.fit import summary

    result = fit(MODEL, "t4", latency_budget=parse_seconds("2.5s"), memory_budget=parse_bytes("4GiB"))
    latency, memory = result.checks
    assert memory.budget == 4 * 2**30 == 4294967296 and memory.budget_unit == "GiB"
    assert latency.budget == 2.5 and latency.budget_unit == "s"
    line = summary(result)
    # The budgets as written, and the predicted figures in the same units beside them.
    assert "<= 4 GiB" in line and "<= 2.5 s" in line and "4.29 GB" not in line
    assert f"memory {memory.value / 2**30:.4g} GiB" in line and f"latency {latency.value:.4g} s" in line
    assert result.to_dict()["checks"][1]["budget_unit"] == "GiB"


def test_a_training_fit_checks_the_step_time_and_training_memory() -> None:
    from onnxroof.api import get_device
    from onnxroof.load import load_graph
    from onnxroof.predict.training import estimate_training

    inference = fit(MODEL, "t4")
    step = fit(MODEL, "t4", training=Training("adam"))
    assert [c.name for c in step.checks] == ["step time", "memory"]
    expected = estimate_training(load_graph(MODEL), get_device("t4"), optimizer="adam")
    assert step.memory_bytes == expected.memory.total and step.latency_s == expected.step_time_s
    # Adam holds gradients and two moments besides the weights, and every activation is kept: more than inference.
    assert step.memory_bytes > inference.memory_bytes and step.latency_s > inference.latency_s
    assert not fit(MODEL, "t4", training=Training("adam"), memory_budget=step.memory_bytes * 0.999).passed


def test_command_training(cli) -> None:
    run = cli("fit", MODEL, "-d", "t4", "--training", "--optimizer", "sgd")
    assert run.returncode == 0, run.stderr
    assert "step time" in run.stdout and "paper 004" in run.stdout


@pytest.mark.ort
def test_on_an_onnxruntime_host_memory_is_the_calibrated_process_peak(monkeypatch) -> None:
    from onnxroof.devices import Sourced
    from onnxroof.ort import memory_calibration
    from onnxroof.ort.optimized import engine_graph
    from onnxroof.predict.memory import estimate_memory
    from onnxroof.predict.process_memory import SessionMemoryFactors, process_peak_bytes, weights_by_kind
    from tests.helpers import calibrated_host

    factors = SessionMemoryFactors(
        constant=Sourced(1e6, "test"),
        conv=Sourced(3.0, "test"),
        gemm=Sourced(1.5, "test"),
        matmul=Sourced(1.7, "test"),
        large=Sourced(1.0, "test"),
        activation=Sourced(2.0, "test"),
    )
    monkeypatch.setattr(memory_calibration, "host_memory_factors", lambda threads=1: factors)
    host = calibrated_host()
    result = fit(MODEL, host)
    graph = engine_graph(MODEL, host)
    estimate = estimate_memory(graph)
    # 1 MB + 3 x the conv weights + the other weights as stored + 2 x the peak of live activations.
    assert result.memory_bytes == process_peak_bytes(estimate, weights_by_kind(graph), factors)
    assert result.memory_bytes > estimate.total_bytes
    assert any("process peak" in note for note in result.notes)


def test_a_fit_says_where_the_memory_goes() -> None:
    from onnxroof.load import load_graph
    from onnxroof.predict.memory import estimate_memory

    result = fit(MODEL, "t4", batch=2)
    assert result.memory is not None
    stored = estimate_memory(load_graph("zoo:unet?size=32&batch=2"))
    detail = result.memory
    assert detail.estimate.total_bytes == stored.total_bytes == detail.stored_peak_bytes == result.memory_bytes
    assert detail.best_peak_bytes <= detail.stored_peak_bytes  # best_order is never worse than the stored order
    assert detail.estimate.peak_node == stored.peak_node and detail.estimate.footprint_bytes >= stored.total_bytes
    assert result.to_dict()["memory"]["order"] == "stored"
