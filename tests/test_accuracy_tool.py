"""tools/accuracy.py's wait for a drifted machine (the benchmark itself runs for minutes and is not a test)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from onnxroof import reference

_PATH = Path(__file__).resolve().parents[1] / "tools" / "accuracy.py"
_SPEC = importlib.util.spec_from_file_location("accuracy_tool", _PATH)
accuracy = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(accuracy)


class _Clock:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(accuracy, "time", SimpleNamespace(monotonic=c.monotonic, sleep=c.sleep))
    return c


def _rates(monkeypatch, rates):
    calls = iter(rates)
    monkeypatch.setattr(reference, "reference_rate", lambda threads, **kw: next(calls))


def test_settle_measures_at_once_on_a_machine_at_its_calibrated_speed(monkeypatch, clock):
    _rates(monkeypatch, [105.0])  # 5% off 100: within the 10% bound
    assert accuracy.settle(1, 100.0, 30.0) == 0.0 and clock.sleeps == []


def test_settle_waits_until_the_speed_comes_back(monkeypatch, clock):
    _rates(monkeypatch, [70.0, 125.0, 95.0])  # 30% slow, 25% fast, then within 10%
    assert accuracy.settle(1, 100.0, 60.0) == 20.0 and clock.sleeps == [10.0, 10.0]


def test_settle_gives_up_after_its_limit(monkeypatch, clock):
    _rates(monkeypatch, [50.0] * 10)
    assert accuracy.settle(1, 100.0, 25.0) == 25.0 and clock.sleeps == [10.0, 10.0, 5.0]


def test_settle_has_nothing_to_wait_for_without_a_calibrated_rate_or_a_limit(monkeypatch, clock):
    _rates(monkeypatch, [])  # never called: next() on an empty iterator would raise
    assert accuracy.settle(1, None, 30.0) == 0.0
    assert accuracy.settle(1, 100.0, 0.0) == 0.0
