"""An all-reduce's time by NCCL's ring cost model (src/graph/tuning.cc): latency + bytes / bandwidth, the fastest
protocol."""

from __future__ import annotations

import pytest

from onnxroof.predict.collectives import Link, all_reduce_time

US = 1e-6


def test_a_small_all_reduce_over_nvlink_takes_the_ll_protocol():
    # 8 KiB over 2 GPUs, 300 GB/s each way: 2 (2 - 1) = 2 steps.
    # LL: 3.6 us + 2 x 0.47 us, at 300 GB/s x 1/4 x 2/2 = 75 GB/s: 4.54 us + 8192 / 75e9 s
    # Simple: 8.4 us + 2 x 3.4 us, at 300 GB/s: 15.2 us + 8192 / 300e9 s, slower
    ll = 4.54 * US + 8192 / 75e9
    assert all_reduce_time(8192, 2, Link("nvlink", 300e9)) == pytest.approx(ll)


def test_a_large_all_reduce_over_pcie_takes_the_simple_protocol():
    # 64 MiB over 8 GPUs, 32 GB/s each way: 14 steps.
    # Simple: 8.4 us + 14 x 5.7 us = 88.2 us, at 32 GB/s x 8/14; LL at a quarter of that bandwidth is slower
    nbytes = 64 * 2**20
    simple = 88.2 * US + nbytes / (32e9 * 8 / 14)
    assert all_reduce_time(nbytes, 8, Link("pcie", 32e9)) == pytest.approx(simple)


def test_one_gpu_has_nothing_to_reduce():
    assert all_reduce_time(1e6, 1, Link("nvlink", 300e9)) == 0.0
