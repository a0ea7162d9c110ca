"""Progress: the library reports through callbacks, counts rising to their total; the command line draws them on a
terminal's stderr and prints nothing there otherwise."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from onnxroof.cli import progress as progress_module
from onnxroof.cli.progress import CALIBRATING, Progress

ROOT = Path(__file__).resolve().parents[1]
MODEL = "zoo:unet?size=32"


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _rising_to_the_total(calls: list[tuple[int, int]]) -> None:
    """Counts that never fall, one total throughout, the last call at it."""
    assert calls, "no progress reported"
    dones, totals = [d for d, _ in calls], {t for _, t in calls}
    assert len(totals) == 1 and dones == sorted(dones) and dones[-1] == calls[-1][1]


def test_analysis_counts_its_nodes():
    import onnxroof

    calls: list[tuple[int, int]] = []
    analysis = onnxroof.analyze(MODEL, device="t4", progress=lambda d, t: calls.append((d, t)))
    _rising_to_the_total(calls)
    assert 0 < calls[-1][1] <= len(analysis.nodes)  # the nodes costed at run time (a weight's are folded)


def test_a_sweep_counts_its_analyses():
    from onnxroof.whatif.sweep import sweep

    calls: list[tuple[int, int]] = []
    sweep(MODEL, ["t4", "v100-sxm2"], batches=[1, 2], progress=lambda d, t: calls.append((d, t)))
    _rising_to_the_total(calls)
    assert calls[-1] == (4, 4)  # 2 batches x 2 devices


def test_a_ranking_counts_its_devices():
    from onnxroof.whatif.fit import rank_devices

    calls: list[tuple[int, int]] = []
    rank_devices(MODEL, ["t4", "v100-sxm2", "mx230"], latency_budget=1.0, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_the_largest_batch_search_counts_its_fits():
    from onnxroof.whatif.fit import SEARCH_FITS, fit, max_batch

    calls: list[tuple[int, int]] = []
    budget = (fit(MODEL, "t4", batch=5).memory_bytes + fit(MODEL, "t4", batch=6).memory_bytes) / 2
    found = max_batch(MODEL, "t4", memory_budget=budget, progress=lambda d, t: calls.append((d, t)))
    assert found.batch == 5
    _rising_to_the_total(calls)
    # Batches 1, 2, 4, 8 (the first to fail), then 6 and 5 between 4 and 8: six fits, then the end.
    assert calls == [(n, SEARCH_FITS) for n in range(1, 7)] + [(SEARCH_FITS, SEARCH_FITS)]


@pytest.mark.ort
def test_an_int8_rewrite_names_its_steps():
    from onnxroof.whatif.rewrite import RewriteRequest, rewrite

    steps: list[str] = []
    rewrite("zoo:conv2d_kernel", RewriteRequest(int8="dynamic"), compare_outputs=False, progress=steps.append)
    assert [s.split(":")[0] for s in steps] == ["int8", "int8"]
    assert "preprocessing" in steps[0] and "quantizing" in steps[1]


def test_a_bar_is_drawn_on_a_terminal_and_cleared(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(progress_module, "DELAY_S", 0)
    monkeypatch.setattr(progress_module, "REDRAW_S", 0)
    stream = Terminal()
    shown = Progress("sweeping", "analyses", stream=stream)
    shown.stage("reading the model")
    for done in range(1, 4):
        shown(done, 3)
    shown.close()
    text = stream.getvalue()
    assert "sweeping: reading the model" in text and "3/3 analyses" in text
    assert text.endswith("\r") or text.rstrip(" ").endswith("\r")  # the line is cleared: nothing is left on it


def test_an_implicit_calibration_says_so_once_then_counts(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(progress_module, "DELAY_S", 0)
    monkeypatch.setattr(progress_module, "REDRAW_S", 0)
    stream = Terminal()
    shown = Progress("analyzing", stream=stream)
    shown.stage("loading")
    for done in range(1, 5):
        shown.calibrating(done, 4)
    shown.close()
    text = stream.getvalue()
    assert text.count(CALIBRATING + "\n") == 1 and "4/4 benchmarks" in text


def test_nothing_is_drawn_where_stderr_is_no_terminal():
    stream = io.StringIO()
    quiet = Progress("sweeping", "analyses", stream=stream)
    quiet.stage("reading")
    quiet(1, 1)
    quiet.calibrating(1, 1)
    quiet.close()
    assert stream.getvalue() == ""


@pytest.mark.ort
@pytest.mark.parametrize(
    "args",
    [
        ["analyze", MODEL],
        ["sweep", MODEL, "--batch", "1,2", "-d", "t4,v100-sxm2"],
        ["fit", MODEL, "-d", "t4", "--max-batch", "--memory-budget", "200MB"],
        ["fit", MODEL, "-d", "t4,v100-sxm2", "--latency-budget", "1s"],
        ["compare", MODEL, MODEL],
        ["rewrite", "zoo:conv2d_kernel", "--int8", "dynamic", "-o", "{tmp}/q.onnx", "--no-compare"],
    ],
)
def test_a_command_prints_nothing_on_stderr_when_it_is_no_terminal(args: list[str], tmp_path: Path):
    # In a process of its own, so that it also shows that the bar's library is not even imported.
    code = (
        "import sys; from onnxroof.cli import main; code = main(sys.argv[1:]); "
        "sys.stdout.write('tqdm imported' if 'tqdm' in sys.modules else ''); sys.exit(code)"
    )
    command = [sys.executable, "-c", code, *(a.format(tmp=tmp_path) for a in args)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and "tqdm imported" not in result.stdout


@pytest.mark.ort
@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "zoo:conv2d_kernel", "-d", "host"],
        ["sweep", "zoo:conv2d_kernel", "-d", "host"],
        ["fit", "zoo:conv2d_kernel", "-d", "host", "--training"],
        ["explore", "zoo:conv2d_kernel", "-d", "host", "--only", "fp16"],
    ],
)
def test_a_first_host_command_says_it_calibrates(args: list[str], tmp_path: Path, monkeypatch, capsys):
    from dataclasses import replace

    from onnxroof.cli import main
    from onnxroof.ort import calibrate
    from onnxroof.ort.calibrate import run
    from tests.helpers import calibrated_host

    host = calibrated_host()
    assert host.calibration is not None
    measured = replace(host, calibration=replace(host.calibration, suite=calibrate.SUITE))

    def fake_calibrate(threads: int = 1, provider: str = "cpu", budget_s: float = 120.0, progress=None, **_):
        for done in range(1, 4):
            progress(done, 3)
        return measured

    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path))  # no profile cached: the first use calibrates
    monkeypatch.setattr(run, "calibrate", fake_calibrate)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(args) == 0
    capsys.readouterr()
    assert terminal.getvalue().count(CALIBRATING) == 1
