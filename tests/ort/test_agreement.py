"""Agreement statistics on exact numbers."""

from __future__ import annotations

import pytest

from onnxroof.ort.agreement import agreement, ranks, relative_error, spearman


def test_ranks_average_ties():
    # sorted: 10 (rank 1), 20, 20 (ranks 2 and 3 -> 2.5 each), 40 (rank 4)
    assert list(ranks([20, 10, 40, 20])) == [2.5, 1.0, 4.0, 2.5]


def test_spearman_of_monotone_and_reversed_orders():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 1000]) == pytest.approx(1.0)  # any increasing map: rho = 1
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def test_spearman_textbook_value():
    # Ranks x: 1 2 3 4 5, y: 2 1 4 3 5; d = -1 1 -1 1 0, sum d^2 = 4; rho = 1 - 6*4/(5*(25-1)) = 1 - 24/120 = 0.8
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)


def test_spearman_undefined_cases():
    assert spearman([1, 2], [1, 2]) is None
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def test_relative_error_sign():
    assert relative_error(1.25, 1.0) == pytest.approx(0.25)
    assert relative_error(0.5, 1.0) == pytest.approx(-0.5)


def test_agreement_summary():
    # errors: |1.1-1|/1 = 0.1, |3-2|/2 = 0.5, |2.7-3|/3 = 0.1, |4-4| = 0; median of (0, 0.1, 0.1, 0.5) = 0.1
    a = agreement([1.1, 3.0, 2.7, 4.0], [1.0, 2.0, 3.0, 4.0])
    assert a.count == 4
    assert a.median_abs_error == pytest.approx(0.1)
    assert a.within_25_percent == pytest.approx(0.75)
    # predicted ranks 1 3 2 4 vs measured 1 2 3 4: sum d^2 = 2, rho = 1 - 6*2/(4*15) = 0.8
    assert a.spearman == pytest.approx(0.8)


def test_agreement_skips_unmeasured_pairs():
    a = agreement([1.0, 2.0], [0.0, 2.0])
    assert a.count == 1 and a.median_abs_error == 0.0 and a.spearman is None
