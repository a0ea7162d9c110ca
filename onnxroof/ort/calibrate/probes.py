"""A calibration as a fold over probes. A probe declares its timing jobs (set up once, timed in every pass) and how
it reads their timings into fields of the device it is given; the probes it reads after are named in its
``after``. The run sets up every probe's jobs in the probes' order, times them in passes in that same order (a
pass's order decides what each job finds in the caches), then reads the probes one after the other, each once
every probe it names has been read, in the probes' order otherwise (:func:`read_order`).

The host's probes are in ``host_probes`` and ``class_probes``, listed in timing order by ``run.host_probes``: a new
calibrated figure is one probe there and its place in that list."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from onnxroof.devices import Device, FrozenMap
from onnxroof.ort.calibrate.bench import Suite
from onnxroof.ort.calibrate.graphs import Rand
from onnxroof.ort.calibrate.host import ReportedCache, ort_version
from onnxroof.ort.calibrate.jobs import Job, Runner

__all__ = ["Probe", "Reading", "Run", "Setting", "fold", "read_order", "set_up"]


@dataclass(frozen=True)
class Run:
    """What one calibration was asked for, and when it started (``time.perf_counter()`` and /proc/stat's
    ticks)."""

    threads: int
    provider: str
    budget_s: float
    start: float
    cpu_start: tuple[int, int, int] | None
    own_cpu_start: float  # time.process_time(): this process's CPU time, every thread's


@dataclass(frozen=True)
class Setting:
    """What a probe sets its jobs up with: the suite, the caches the OS reports, the runner that creates the
    sessions, one Rand the op-class benchmarks' graphs come from in set-up order (so that a suite builds the same
    graphs every time), and ``advance(n)``, which reports n set-up steps done."""

    suite: Suite
    caches: Sequence[ReportedCache]
    runner: Runner
    rand: Rand
    advance: Callable[[int], None]


@dataclass(frozen=True)
class Reading:
    """What a probe reads its jobs with besides the device: the run, the suite and how many passes timed them."""

    run: Run
    suite: Suite
    passes: int

    @property
    def how(self) -> str:
        """How every calibrated figure was measured, the end of its source."""
        return (
            f"onnxruntime {ort_version()} {self.run.provider} provider, {self.run.threads} thread(s), "
            f"fastest eighth of {self.passes} passes"
        )

    def inputs(self, **measured: float) -> FrozenMap:
        """A calibrated figure's ``inputs`` (see devices.Sourced): ``measured`` and the threads and passes it was
        timed at."""
        return FrozenMap({**measured, "threads": self.run.threads, "passes": self.passes})

    def now(self) -> str:
        """The time of the reading, to the second, in UTC."""
        return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()

    def elapsed_s(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.run.start


class Probe(Protocol):
    """One calibrated figure or a few read together: its ``name``, the probes whose readings it reads after
    (``after``), its jobs and its reading."""

    name: str
    after: tuple[str, ...]

    def steps(self, setting: Setting) -> int:
        """How many set-up steps its ``set_up`` reports (``setting.advance``), for the run's progress."""
        ...

    def set_up(self, setting: Setting) -> Sequence[Job]:
        """Its jobs, created once for the whole calibration, in the order each pass times them."""
        ...

    def read(self, device: Device, reading: Reading) -> Device:
        """``device`` with the fields this probe measures, read from its jobs' timings once the passes are over."""
        ...


def set_up(probes: Sequence[Probe], setting: Setting) -> list[Job]:
    """Every probe's jobs, set up in the probes' order: the order every pass times them in."""
    return [job for probe in probes for job in probe.set_up(setting)]


def read_order(probes: Sequence[Probe]) -> list[Probe]:
    """The probes in the order they read: each after every probe its ``after`` names, in the probes' own order
    otherwise. A ValueError for a name no probe has, two probes of one name, or probes that wait on each other."""
    names = [p.name for p in probes]
    if len(set(names)) != len(names):
        raise ValueError(f"two probes share a name: {names}")
    for p in probes:
        unknown = sorted(set(p.after) - set(names))
        if unknown:
            raise ValueError(f"probe {p.name!r} reads after {unknown}, which no probe is")
    done: set[str] = set()
    order: list[Probe] = []
    while len(order) < len(probes):
        ready = next((p for p in probes if p.name not in done and done.issuperset(p.after)), None)
        if ready is None:
            waiting = [p.name for p in probes if p.name not in done]
            raise ValueError(f"probes {waiting} each read after another of them")
        order.append(ready)
        done.add(ready.name)
    return order


def fold(probes: Sequence[Probe], device: Device, reading: Reading) -> Device:
    """``device`` as every probe reads its jobs into it, in :func:`read_order`."""
    for probe in read_order(probes):
        device = probe.read(device, reading)
    return device
