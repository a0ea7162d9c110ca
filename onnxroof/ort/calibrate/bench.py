"""What a calibration benchmark is (:class:`Bench`: how it is timed, its graph, the nodes it keeps) and what a
suite of them is (:class:`Suite`: the benchmarks and how much and how long each is timed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onnxroof.ort.calibrate import graphs
from onnxroof.ort.calibrate.graphs import Built, Rand
from onnxroof.ort.calibrate.host import ReportedCache
from onnxroof.ort.proc import memory_available
from onnxroof.predict.engine import COLD_WEIGHTS

__all__ = ["Bench", "MiB", "Suite"]

MiB = 2**20


@dataclass(frozen=True)
class Bench:
    """One micro-benchmark: how it is timed (``kind``), what it measures (``label``), its graph (``graph`` called
    with a Rand, then ``args``) and which of its nodes give samples.

    ``kind`` is "profile" (onnxruntime's profiler times each node), "chain" (the wall clock times chains of the
    node at two lengths; ``graph`` takes the length after the Rand), "epilogue" (a convolution profiled with
    Relu and with Clip; ``graph`` takes the activation as a keyword) or "wait" (a convolution profiled with its
    weights cold and warm: what their read adds to it). ``harvest`` names the op classes whose
    nodes are kept (None: every node measured); ``cold`` reads the weights cold (None: when they are large).
    ``tail`` puts a Neg after the outputs, so that the measured node writes an intermediate tensor.
    """

    kind: str
    label: str
    graph: Callable[..., Built]
    args: tuple[Any, ...] = ()
    harvest: frozenset[str] | None = None
    cold: bool | None = None
    tail: bool = True

    def build(self, rand: Rand, *lead: Any, **options: Any) -> Built:
        """The graph and its feeds: ``graph(rand, *lead, *args, **options)``, tailed when ``tail``."""
        built = self.graph(rand, *lead, *self.args, **options)
        return graphs.tailed(built) if self.tail else built


@dataclass(frozen=True)
class Suite:
    """A benchmark suite and how it is timed.

    ``benches`` are the op-class benchmarks, ``peaks`` the fp32 peak benchmarks and ``batched_conv`` the
    convolution whose data is larger than any cache (dram_overlap, reorders at DRAM sizes). ``measures`` are the
    classes whose ceilings the suite sets on any host (a kernel shorter than the profiler resolves gives none).
    Every benchmark is timed ``reps`` runs a pass, in at most ``passes`` passes. A chain is sized so that its
    longer chain runs ``chain_target_s``; the per-node overhead is timed on chains ``overhead_lengths`` long. A
    cold benchmark reads ``flush_bytes`` before each timed run. ``matrix_size`` is n of the n x n x n int8 and
    fp16 matrix products. A cache level's working set is at most ``level_cap`` bytes; a shared level is timed
    again at ``probe_factors`` times its working set. The DRAM benchmark streams twice the last cache level,
    within ``dram_bounds`` and at most ``dram_memory_share`` of the available memory (None: no such bound). The
    weights' reuse between back-to-back runs is timed on models whose weights total ``reuse_fractions`` of the last
    cache level's reported size. ``masked_attention`` sizes the block on which subnormal floats' costs are timed
    (map size, window, heads, d of ``graphs.masked_attention``; None: not timed).
    """

    benches: tuple[Bench, ...]
    peaks: tuple[Bench, ...]
    batched_conv: Bench | None
    measures: frozenset[str]
    passes: int
    reps: int
    chain_target_s: float
    overhead_lengths: tuple[int, int]
    flush_bytes: int
    matrix_size: int
    level_cap: int | None
    probe_factors: tuple[int, ...]
    dram_bounds: tuple[int, int]
    dram_memory_share: float | None
    reuse_fractions: tuple[float, ...]
    masked_attention: tuple[int, int, int, int] | None = None

    def level_bytes(self, cache: ReportedCache, threads: int) -> int:
        """Working set of the bandwidth benchmark for a cache level: half of L1/L2 (over the threads' cores when
        per-core), a quarter of the last level up to 32 MiB."""
        capacity = cache.size * (threads if cache.scope == "per-core" else 1)
        target = capacity // 2 if cache.level in ("L1d", "L2") else min(capacity // 4, 32 * MiB)
        return int(min(target, self.level_cap) if self.level_cap is not None else target)

    def dram_bytes(self, caches: Sequence[ReportedCache]) -> int:
        """Size of the DRAM benchmark's streamed operand (see the class)."""
        last = _last_level_size(caches)
        lo, hi = self.dram_bounds
        size = min(max(2 * last, lo), hi)
        if self.dram_memory_share is None:
            return int(size)
        available = memory_available()
        return int(min(size, int(available * self.dram_memory_share)) if available else size)

    def reuse_bytes(self, caches: Sequence[ReportedCache]) -> list[int]:
        """Weights of the weight-reuse benchmarks, four products each: ``reuse_fractions`` of the last cache level's
        reported size, at least ``COLD_WEIGHTS`` (the products are one-row ones, class gemv, whose weights count as
        read cold at any size, as their ceiling has them), each size once, smallest first."""
        last = _last_level_size(caches)
        return sorted({max(int(fraction * last), COLD_WEIGHTS) for fraction in self.reuse_fractions})


def _last_level_size(caches: Sequence[ReportedCache]) -> int:
    """The last cache level's reported size; 8 MiB where none is reported."""
    return caches[-1].size if caches else 8 * MiB
