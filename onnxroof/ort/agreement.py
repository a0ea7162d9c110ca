"""How well predictions agree with measurements: ratios, errors and rank correlation, as pure functions.

Kept apart from the measuring so that the statistics are tested on exact numbers, with no onnxruntime involved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks with ties given the mean of the ranks they span (the convention Spearman's rho needs)."""
    data = np.asarray(values, dtype=float)
    order = np.argsort(data, kind="mergesort")
    ranked = np.empty(len(data), dtype=float)
    sorted_values = data[order]
    start = 0
    while start < len(data):
        end = start
        while end + 1 < len(data) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranked[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranked


def spearman(predicted: Sequence[float], measured: Sequence[float]) -> float | None:
    """Spearman's rank correlation: Pearson's correlation of the ranks (None for fewer than 3 pairs or a
    constant side, where it is undefined)."""
    if len(predicted) != len(measured):
        raise ValueError("predicted and measured differ in length")
    if len(predicted) < 3:
        return None
    a, b = ranks(predicted), ranks(measured)
    a, b = a - a.mean(), b - b.mean()
    denominator = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denominator) if denominator else None


def relative_error(predicted: float, measured: float) -> float:
    """Signed error of a prediction relative to the measurement: +0.25 means predicted 25% too long."""
    return (predicted - measured) / measured


@dataclass(frozen=True)
class Agreement:
    """Per-kernel agreement over a model: rank correlation, median and spread of the absolute relative error."""

    count: int
    spearman: float | None
    median_abs_error: float | None
    p90_abs_error: float | None
    within_25_percent: float | None  # share of kernels predicted within 25% of their measured time

    def to_dict(self) -> dict[str, float | int | None]:
        return dict(self.__dict__)


def agreement(predicted: Sequence[float], measured: Sequence[float]) -> Agreement:
    """Agreement of paired per-kernel times; pairs whose measured time is not positive are skipped."""
    pairs = [(p, m) for p, m in zip(predicted, measured) if m > 0]
    if not pairs:
        return Agreement(0, None, None, None, None)
    errors = np.abs([relative_error(p, m) for p, m in pairs])
    return Agreement(
        count=len(pairs),
        spearman=spearman([p for p, _ in pairs], [m for _, m in pairs]),
        median_abs_error=float(np.median(errors)),
        p90_abs_error=float(np.percentile(errors, 90)),
        within_25_percent=float(np.mean(errors <= 0.25)),
    )
