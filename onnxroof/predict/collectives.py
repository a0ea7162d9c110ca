"""The time of an all-reduce among GPUs, by NCCL's own cost model of its ring algorithm.

NCCL chooses an algorithm and protocol per call from a model of each one's time (src/graph/tuning.cc,
``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``): ``latency + bytes / bandwidth``. For an all-reduce of ``S``
bytes over a ring of ``n`` GPUs, one node, which takes ``2 (n - 1)`` steps:

- latency: the protocol's base latency plus ``2 (n - 1)`` times the link's per-step latency;
- bandwidth: the bus bandwidth (here the link's each-way bandwidth) times ``n / (2 (n - 1))``, the share of it an
  all-reduce's payload moves at, times 1/4 for the LL protocol (its flag words halve the payload, and it reads
  them back);
- its time: the least over the protocols.

The latencies are NCCL's (microseconds): base 3.6 (LL) and 8.4 (Simple); per step 0.47 (LL) and 3.4 (Simple) on
NVLink, 1.0 and 5.7 on PCIe. LL128, which NCCL enables on NVLink for Volta and Ampere only, is left out: for the
sizes between LL's and Simple's ranges the time is then an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROTOCOLS", "Link", "Protocol", "all_reduce_time"]

US = 1e-6


@dataclass(frozen=True)
class Protocol:
    """One of NCCL's protocols: its base latency, its per-step latency on each link kind, the share of the bus
    bandwidth its payload moves at."""

    name: str
    base_s: float
    step_s: dict[str, float]
    bandwidth_share: float


PROTOCOLS = (
    Protocol("LL", 3.6 * US, {"nvlink": 0.47 * US, "pcie": 1.0 * US}, 1 / 4),
    Protocol("Simple", 8.4 * US, {"nvlink": 3.4 * US, "pcie": 5.7 * US}, 1.0),
)


@dataclass(frozen=True)
class Link:
    """How the GPUs of a ring reach each other: 'nvlink' or 'pcie', and the bytes/s each sends each way."""

    kind: str
    bandwidth: float


def protocol_time(protocol: Protocol, nbytes: float, ranks: int, link: Link) -> float:
    """One protocol's time for an all-reduce of ``nbytes`` over ``ranks`` GPUs (NCCL's ring model)."""
    steps = 2 * (ranks - 1)
    latency = protocol.base_s + steps * protocol.step_s[link.kind]
    bandwidth = link.bandwidth * protocol.bandwidth_share * ranks / steps
    return latency + nbytes / bandwidth


def all_reduce_time(nbytes: float, ranks: int, link: Link) -> float:
    """Seconds an all-reduce of ``nbytes`` (each GPU's buffer) takes over ``ranks`` GPUs: 0 for one GPU, else the
    fastest protocol's time."""
    if ranks <= 1:
        return 0.0
    return min(protocol_time(p, nbytes, ranks, link) for p in PROTOCOLS)
