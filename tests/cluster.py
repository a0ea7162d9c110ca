"""A real Dask distributed cluster for the tests: a scheduler and workers started as separate processes on
127.0.0.1, found through a scheduler file, stopped when the test ends (tools/dask_cluster.py, which
tools/bench_census.py starts as well)."""

from __future__ import annotations

from tools.dask_cluster import ROOT, START_TIMEOUT_S, Cluster, dask_cluster

__all__ = ["ROOT", "START_TIMEOUT_S", "Cluster", "dask_cluster"]
