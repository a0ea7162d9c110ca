"""Facts about this host that a calibration reads and records: the CPU model, the data cache levels the OS
reports, the CPU time of its cores (read from /proc by onnxroof.ort.proc), the GPU the NVIDIA driver reports, and
where calibrated profiles are cached."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from onnxroof.devices import Device, load_device
from onnxroof.errors import UserError
from onnxroof.ort import sessions
from onnxroof.ort.proc import cpu_fields, cpu_ticks
from onnxroof.predict.profiles import ONNXRUNTIME
from onnxroof.units import kernel_bytes

__all__ = [
    "DEFAULT_CACHES",
    "CoreLimits",
    "CpuIdentity",
    "Gpu",
    "ReportedCache",
    "cache_dir",
    "cache_levels",
    "cache_lock",
    "cache_path",
    "cached_profile",
    "core_limits",
    "count_cpus",
    "cpu_identity",
    "cpu_model",
    "cpu_times",
    "host_key",
    "lscpu_caches",
    "nvidia_gpu",
    "ort_version",
    "parse_lscpu",
    "parse_nvidia_smi",
    "sysfs_caches",
    "vector_extension",
]


@dataclass(frozen=True)
class CpuIdentity:
    """What tells one CPU from another: its model name, its family and model numbers (x86; None elsewhere) and its
    widest vector extension ('' where the flags name none).

    A virtual machine's CPU often reports a name shared by several generations ("AMD EPYC" for Zen 3 with AVX2
    and Zen 4 with AVX-512), so the name alone does not tell two machines whose ceilings differ apart; the
    family, model and vector extension do."""

    name: str
    family: str | None = None
    model: str | None = None
    extension: str = ""

    def describe(self) -> str:
        """'AMD EPYC (family 25 model 1, AVX2)'; the name alone where nothing else is known."""
        parts = [f"family {self.family} model {self.model}"] if self.family is not None else []
        parts += [self.extension] if self.extension else []
        return f"{self.name} ({', '.join(parts)})" if parts else self.name

    def slug(self) -> str:
        """A file-name-safe lower-case form: 'amd-epyc-f25m1-avx2'."""
        name = re.sub(r"\((r|tm|c)\)", "", self.name.lower())
        parts = [re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:48] or "cpu"]
        parts += [f"f{self.family}m{self.model}"] if self.family is not None else []
        parts += [re.sub(r"[^a-z0-9]+", "-", self.extension.lower()).strip("-")] if self.extension else []
        return "-".join(parts)


def cpu_identity(cpuinfo: str | None = None) -> CpuIdentity:
    """This CPU's identity from ``cpuinfo``, the text of /proc/cpuinfo (read when not given; the platform module
    names the CPU where it says nothing): the first processor's fields."""
    fields = cpu_fields(cpuinfo)
    name = next((fields[k] for k in ("model name", "hardware", "cpu model") if fields.get(k)), "")
    name = re.sub(r"\s+", " ", name) or platform.processor().strip() or platform.machine().strip() or "unknown CPU"
    family, model = fields.get("cpu family", ""), fields.get("model", "")
    numbered = family.isdigit() and model.isdigit()
    extension = vector_extension(set((fields.get("flags") or fields.get("features") or "").split()))
    return CpuIdentity(name, family if numbered else None, model if numbered else None, extension)


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name with its family, model and widest vector extension (CpuIdentity.describe)."""
    return cpu_identity(cpuinfo).describe()


#: Vector extensions by the /proc/cpuinfo flag that announces them, widest first.
_VECTOR_EXTENSIONS = (
    ("amx_tile", "AVX-512, AMX"),
    ("avx512f", "AVX-512"),
    ("avx2", "AVX2"),
    ("avx", "AVX"),
    ("sve", "SVE"),
    ("asimd", "NEON"),
)


def vector_extension(flags: set[str]) -> str:
    """The widest vector extension among a CPU's flags ("AVX-512, AMX", "AVX-512", "AVX2", ...), or ''."""
    return next((label for flag, label in _VECTOR_EXTENSIONS if flag in flags), "")


#: Bytes of the widest vector register by the /proc/cpuinfo flag that announces it, widest first (SVE's width is the
#: implementation's: 512 bits, the widest any shipping core has).
_VECTOR_BYTES = (("avx512f", 64), ("sve", 64), ("avx", 32), ("sse2", 16), ("asimd", 16))
LOADS, STORES = 3, 2  # memory accesses a core issues a cycle at most: the most any current x86 or Arm core has
FMA_UNITS = 4  # fused multiply-add pipes a core has at most (Apple's 4 x 128 bit; x86 cores have 2)
BOOST = 2.0  # the headroom over a clock the OS reports as the current one only (a VM's nominal clock)


@dataclass(frozen=True)
class CoreLimits:
    """What ``threads`` cores can do at most, from the CPU's widest vector (bytes) and its clock (Hz, with its
    provenance): ``bandwidth``, bytes/s they load and store at LOADS + STORES accesses of the vector a cycle, and
    ``flops``, fp32 FLOP/s at FMA_UNITS fused multiply-adds of the vector a cycle. Upper bounds that no real core
    reaches: a calibrated bandwidth or peak above them is a benchmark's error (a kernel too short to time against its
    dispatch), not the machine."""

    threads: int
    vector_bytes: int
    clock_hz: float
    clock_source: str

    @property
    def bandwidth(self) -> float:
        return self.threads * self.clock_hz * (LOADS + STORES) * self.vector_bytes

    @property
    def flops(self) -> float:
        return self.threads * self.clock_hz * FMA_UNITS * (self.vector_bytes / 4) * 2

    def derivation(self, what: str) -> str:
        """'derived: 1 core(s) x 5.19 GHz (...) x 5 accesses x 64 B' and the like, for ``what`` (bandwidth or
        flops)."""
        cores = f"{self.threads} core(s) x {self.clock_hz / 1e9:.3g} GHz ({self.clock_source})"
        if what == "bandwidth":
            return (
                f"derived: {cores} x {LOADS + STORES} accesses a cycle ({LOADS} loads, {STORES} stores) x "
                f"{self.vector_bytes} B vectors"
            )
        return f"derived: {cores} x {FMA_UNITS} FMA units x {self.vector_bytes // 4} fp32 lanes x 2 FLOP"


def core_limits(threads: int, cpuinfo: str | None = None, max_khz: str | None = None) -> CoreLimits:
    """The limits of ``threads`` of this CPU's cores, from ``cpuinfo`` (the text of /proc/cpuinfo: its flags and
    "cpu MHz") and ``max_khz`` (cpufreq's cpuinfo_max_freq, in kHz; both read when not given): the clock is the
    maximum cpufreq reports, else BOOST times the reported current clock (a virtual machine reports its host's
    nominal clock, which a boost exceeds), else 5 GHz; the vector is the widest the flags announce (16 bytes where
    they name none)."""
    fields = cpu_fields(cpuinfo)
    if max_khz is None:
        max_khz = ""
        with contextlib.suppress(OSError):
            max_khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    vector = next((size for flag, size in _VECTOR_BYTES if flag in flags), 16)
    with contextlib.suppress(ValueError):
        if float(max_khz) > 0:
            return CoreLimits(threads, vector, float(max_khz) * 1e3, "cpufreq's cpuinfo_max_freq")
    with contextlib.suppress(ValueError):
        mhz = float(fields.get("cpu mhz", ""))
        if mhz > 0:
            return CoreLimits(
                threads, vector, BOOST * mhz * 1e6, f"{BOOST:g} x the {mhz:.0f} MHz /proc/cpuinfo reports"
            )
    return CoreLimits(threads, vector, 5e9, "assumed: no clock reported")


def ort_version() -> str:
    """The installed onnxruntime's version string."""
    return str(sessions.ort().__version__)


def host_key(threads: int = 1, provider: str = "cpu") -> str:
    """The key of this host's calibrated profile: CPU model, onnxruntime version, provider and thread count."""
    return f"host-{cpu_identity().slug()}-ort{ort_version()}-{provider.lower()}-t{threads}"


def cache_dir() -> Path:
    """Where calibrated profiles are kept: $ONNXROOF_CACHE_DIR, else $XDG_CACHE_HOME/onnxroof, else
    ~/.cache/onnxroof."""
    if os.environ.get("ONNXROOF_CACHE_DIR"):
        return Path(os.environ["ONNXROOF_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "onnxroof"
    return Path.home() / ".cache" / "onnxroof"


def cache_path(threads: int = 1, provider: str = "cpu") -> Path:
    """The file this host's calibrated profile for (threads, provider) is cached in."""
    return cache_dir() / f"{host_key(threads, provider)}.toml"


def cached_profile(path: Path, suite: int) -> Device | None:
    """The profile cached at ``path`` if it reads as an onnxruntime profile measured by benchmark suite ``suite``
    or a later one; None where there is no file, it does not read (one beyond its cores' limits does not) or an
    older suite measured it."""
    if not path.exists():
        return None
    try:
        device = load_device(path)
    except UserError:
        return None
    if device.engine == ONNXRUNTIME and device.calibration is not None and device.calibration.suite >= suite:
        return device
    return None


@contextlib.contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """Hold the lock of the cached file ``path`` (an exclusive ``flock`` on ``path.lock`` beside it, its folder
    made if need be) while the block runs: two processes that would calibrate the same key take turns, the second
    finding the first one's profile, rather than each measuring while the other loads the machine and then
    replacing the other's file. Where the platform has no flock (Windows) the block runs unlocked; each file is
    still replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True)
class ReportedCache:
    """A data cache level as the OS reports it: name ('L1d', 'L2', ...), size in bytes, scope ('per-core' or
    'shared'), and where the size was read."""

    level: str
    size: int
    scope: str
    source: str


def count_cpus(cpu_list: str) -> int:
    """How many CPUs a sysfs list such as '0-1' or '0,32' names."""
    count = 0
    for part in cpu_list.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            count += int(hi) - int(lo) + 1
        elif part.strip():
            count += 1
    return count


def sysfs_caches(root: Path) -> list[ReportedCache]:
    """Data and unified caches of one CPU from its sysfs cache folder (``root``: .../cpuN/cache), one per level,
    smallest first: L1 and L2 per-core, a higher level per-core when only that CPU shares it, else shared."""
    found: dict[int, ReportedCache] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = kernel_bytes((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip() if (index / "shared_cpu_list").exists() else ""
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or not size:
            continue
        scope = "per-core" if level <= 2 or (shared and count_cpus(shared) <= 1) else "shared"
        name = "L1d" if level == 1 else f"L{level}"
        found[level] = ReportedCache(name, size, scope, f"os: {index}/size = {size // 1024} KiB")
    return [found[level] for level in sorted(found)]


def lscpu_caches() -> list[ReportedCache]:
    """The cache levels ``lscpu -B`` reports (see parse_lscpu); none where it cannot run."""
    try:
        out = subprocess.run(["lscpu", "-B"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_lscpu(out)


def parse_lscpu(out: str) -> list[ReportedCache]:
    """The L1d, L2 and L3 lines of ``lscpu -B`` output as cache levels of one instance each (the total over the
    instances it names); L3 counted as shared."""
    caches = []
    for line in out.splitlines():
        m = re.match(r"\s*(L1d|L2|L3) cache:\s*(\d+)(?:\s*\((\d+) instances?\))?", line)
        if m:
            total, instances = int(m.group(2)), int(m.group(3) or 1)
            scope = "shared" if m.group(1) == "L3" else "per-core"
            caches.append(ReportedCache(m.group(1), total // instances, scope, f"os: lscpu -B: {line.strip()}"))
    return caches


# What a calibration assumes where the OS reports no cache at all: typical sizes of a current x86 server core.
DEFAULT_CACHES = (
    ReportedCache("L1d", 32 * 1024, "per-core", "assumed: typical 32 KiB L1 data cache (the OS reported none)"),
    ReportedCache("L2", 1024 * 1024, "per-core", "assumed: typical 1 MiB L2 cache (the OS reported none)"),
    ReportedCache("L3", 8 * 1024 * 1024, "shared", "assumed: typical 8 MiB L3 cache (the OS reported none)"),
)


def cache_levels() -> tuple[ReportedCache, ...]:
    """This CPU's data cache levels, smallest first: from sysfs, else lscpu, else DEFAULT_CACHES."""
    caches = sysfs_caches(Path("/sys/devices/system/cpu/cpu0/cache")) or lscpu_caches()
    return tuple(caches) if caches else DEFAULT_CACHES


def cpu_times() -> tuple[int, int, int] | None:
    """(all, stolen, busy) CPU time ticks of all the machine's cores (see proc.CpuTicks); None where /proc/stat
    cannot be read."""
    ticks = cpu_ticks()
    return None if ticks is None else (ticks.total, ticks.stolen, ticks.busy)


@dataclass(frozen=True)
class Gpu:
    """The GPU the NVIDIA driver reports: its name and memory in bytes."""

    name: str
    memory_bytes: int


def parse_nvidia_smi(out: str) -> Gpu | None:
    """The first GPU of ``nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits`` (memory in
    MiB), None where the text holds none."""
    for line in out.splitlines():
        name, _, memory = line.rpartition(",")
        with contextlib.suppress(ValueError):
            if name.strip():
                return Gpu(name.strip(), int(float(memory.strip()) * 2**20))
    return None


def nvidia_gpu() -> Gpu | None:
    """This host's first NVIDIA GPU as ``nvidia-smi`` reports it; None without the driver's tool."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        return parse_nvidia_smi(out)
    return None
