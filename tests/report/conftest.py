"""Fixtures of the renderers' tests."""

from __future__ import annotations

import pytest

from tests.helpers import CONV, calibrated_host


@pytest.fixture
def measured_on_test_host(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """--measure's validation made on the hand-made calibrated host (no calibration run, a few quick runs): the
    devices the command asked validate for are appended to the returned list."""
    from onnxroof.ort import validate as validate_module

    real = validate_module.validate
    asked: list[object] = []

    def on_test_host(model, device, session, **kwargs):
        asked.append(device)
        return real(model, calibrated_host({"conv": CONV}), session, repeat=3, runs=3, spread_s=0.0)

    monkeypatch.setattr(validate_module, "validate", on_test_host)
    return asked
