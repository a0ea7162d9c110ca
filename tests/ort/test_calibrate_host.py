"""What the calibration reads about this host: cache levels from sysfs or lscpu, sizes and CPU lists, and where
profiles are cached."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxroof.ort.calibrate import host
from onnxroof.ort.sessions import ort


def _index(root: Path, n: int, kind: str, level: int, size: str, shared: str) -> None:
    folder = root / f"index{n}"
    folder.mkdir(parents=True)
    for name, text in (("type", kind), ("level", str(level)), ("size", size), ("shared_cpu_list", shared)):
        (folder / name).write_text(text + "\n")


def test_sysfs_caches_are_the_data_levels_with_their_scope(tmp_path: Path):
    _index(tmp_path, 0, "Data", 1, "48K", "0")
    _index(tmp_path, 1, "Instruction", 1, "32K", "0")  # not a data cache
    _index(tmp_path, 2, "Unified", 2, "2048K", "0-1")  # L2 counts per core even where siblings share it
    _index(tmp_path, 3, "Unified", 3, "300M", "0-1")  # two CPUs: shared
    levels = host.sysfs_caches(tmp_path)
    assert [(c.level, c.size, c.scope) for c in levels] == [
        ("L1d", 48 * 1024, "per-core"),
        ("L2", 2 * 2**20, "per-core"),
        ("L3", 300 * 2**20, "shared"),
    ]
    assert levels[0].source == f"os: {tmp_path / 'index0'}/size = 48 KiB"


def test_a_last_level_only_one_cpu_reads_is_per_core(tmp_path: Path):
    _index(tmp_path, 0, "Unified", 3, "8M", "3")
    assert [(c.level, c.scope) for c in host.sysfs_caches(tmp_path)] == [("L3", "per-core")]


def test_lscpu_sizes_are_per_instance():
    out = "L1d cache:   65536 (2 instances)\nL1i cache:   65536 (2 instances)\nL2 cache:  2097152 (2 instances)\n"
    out += "L3 cache:   33554432 (1 instance)\n"
    assert [(c.level, c.size, c.scope) for c in host.parse_lscpu(out)] == [
        ("L1d", 32768, "per-core"),
        ("L2", 1048576, "per-core"),
        ("L3", 33554432, "shared"),
    ]


def test_without_sysfs_or_lscpu_the_typical_caches_are_assumed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(host, "sysfs_caches", lambda root: [])
    monkeypatch.setattr(host, "lscpu_caches", list)
    assert host.cache_levels() == host.DEFAULT_CACHES
    assert all(c.source.startswith("assumed: ") for c in host.DEFAULT_CACHES)


def test_cpu_list_parsing():
    assert host.count_cpus("0-1") == 2
    assert host.count_cpus("0,32") == 2
    assert host.count_cpus("0-3,8-9") == 6
    assert host.count_cpus("3") == 1


def test_cache_location_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert host.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("ONNXROOF_CACHE_DIR")
    assert host.cache_dir() == tmp_path / "xdg" / "onnxroof"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert host.cache_dir() == Path.home() / ".cache" / "onnxroof"


def test_host_key_names_cpu_onnxruntime_provider_and_threads(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(host, "cpu_identity", lambda: host.CpuIdentity("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"))
    key = host.host_key(4, "CPU")
    assert key == f"host-intel-xeon-platinum-8375c-cpu-2-90ghz-ort{ort().__version__}-cpu-t4"
    assert host.cache_path(4, "cpu").name == f"{key}.toml"


# The first processor block of /proc/cpuinfo on two virtual machines that report the same name: a Zen 3 EPYC
# (family 25 model 1, AVX2, no AVX-512) and a Zen 4 one (family 25 model 17, AVX-512).
ZEN3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
ZEN3 += "flags\t\t: fpu sse2 avx fma avx2 sha_ni\n\nprocessor\t: 1\nmodel name\t: ignored\n"
ZEN4 = ZEN3.replace("model\t\t: 1\n", "model\t\t: 17\n").replace("sha_ni", "sha_ni avx512f avx512bw")


def test_cpu_model_tells_apart_two_cpus_sold_under_one_name(monkeypatch: pytest.MonkeyPatch):
    assert host.cpu_model(ZEN3) == "AMD EPYC (family 25 model 1, AVX2)"
    assert host.cpu_model(ZEN4) == "AMD EPYC (family 25 model 17, AVX-512)"
    keys, read = [], host.cpu_identity
    for text in (ZEN3, ZEN4):
        monkeypatch.setattr(host, "cpu_identity", lambda text=text: read(text))
        keys.append(host.host_key(1, "cpu"))
    assert keys == [
        f"host-amd-epyc-f25m1-avx2-ort{ort().__version__}-cpu-t1",
        f"host-amd-epyc-f25m17-avx-512-ort{ort().__version__}-cpu-t1",
    ]


def test_vector_extension_is_the_widest_flag():
    assert host.vector_extension({"avx", "avx2", "avx512f", "amx_tile"}) == "AVX-512, AMX"
    assert host.vector_extension({"fp", "asimd"}) == "NEON"
    assert host.vector_extension({"sse2"}) == ""


def test_an_arm_cpuinfo_without_family_keeps_its_name():
    text = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU part\t: 0xd0c\n"
    text += "\nHardware\t: Neoverse-N1\n"
    assert host.cpu_model(text) == "Neoverse-N1 (NEON)"


AVX2_CPUINFO = "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2400.000\nflags\t\t: fpu sse2 avx avx2 fma\n"


def test_the_cores_limits_come_from_their_vector_width_and_clock():
    # A VM's cpuinfo: AVX2 (32-byte vectors) at a reported 2400 MHz, which a boost may double: 4.8 GHz.
    limits = host.core_limits(2, AVX2_CPUINFO, max_khz="")
    assert (limits.vector_bytes, limits.clock_hz) == (32, 4.8e9)
    # 2 cores x 4.8e9 Hz x (3 loads + 2 stores) x 32 B = 1.536e12 B/s
    assert limits.bandwidth == pytest.approx(1.536e12)
    # 2 cores x 4.8e9 Hz x 4 FMA units x 8 fp32 lanes x 2 FLOP = 6.144e11 FLOP/s
    assert limits.flops == pytest.approx(6.144e11)
    assert limits.derivation("bandwidth") == (
        "derived: 2 core(s) x 4.8 GHz (2 x the 2400 MHz /proc/cpuinfo reports) x 5 accesses a cycle (3 loads, "
        "2 stores) x 32 B vectors"
    )
    # cpufreq's maximum, where it reports one, is the clock as it is; AVX-512 vectors are 64 bytes.
    wide = host.core_limits(1, AVX2_CPUINFO.replace("avx2", "avx2 avx512f"), max_khz="3500000\n")
    assert (wide.vector_bytes, wide.clock_hz, wide.clock_source) == (64, 3.5e9, "cpufreq's cpuinfo_max_freq")
    # Nothing known: 16-byte vectors at an assumed 5 GHz.
    assert (host.core_limits(1, "", max_khz="").vector_bytes, host.core_limits(1, "", max_khz="").clock_hz) == (16, 5e9)
