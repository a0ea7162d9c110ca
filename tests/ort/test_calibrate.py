"""Host calibration end to end: a quick calibration yields a device whose figures follow from its suite and whose
ceilings cover what the suite measures; the profile is cached and recalibrated when it must be."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from onnxroof import atomic
from onnxroof.api import analyze
from onnxroof.devices import Device, limit_violations, load_device
from onnxroof.devices.classes import with_trait
from onnxroof.errors import UserError
from onnxroof.ort import calibrate
from onnxroof.ort.calibrate import host_probes, run
from onnxroof.ort.calibrate.host import CoreLimits
from onnxroof.ort.calibrate.network import factor_network
from onnxroof.ort.calibrate.suite import QUICK
from onnxroof.ort.sessions import ort
from onnxroof.units import binary_bytes
from tests.helpers import calibrated_host


@dataclass
class QuickRun:
    """A quick calibration, the progress calls it made and how long the call took."""

    device: Device
    progress: list[tuple[int, int]]
    wall_s: float


@pytest.fixture(scope="module")
def quick_run() -> QuickRun:
    calls: list[tuple[int, int]] = []
    start = time.perf_counter()
    device = calibrate.calibrate(threads=1, budget_s=5.0, quick=True, progress=lambda d, t: calls.append((d, t)))
    return QuickRun(device, calls, time.perf_counter() - start)


@pytest.fixture(scope="module")
def quick(quick_run: QuickRun) -> Device:
    return quick_run.device


@pytest.mark.ort
@pytest.mark.calibrate
def test_quick_calibration_records_how_it_was_measured(quick: Device, quick_run: QuickRun):
    assert quick.engine == "onnxruntime" and quick.kind == "cpu" and quick.overlap == "serial"
    assert quick.key == calibrate.host_key(1, "cpu")
    c = quick.calibration
    assert c is not None
    assert (c.provider, c.threads, c.onnxruntime, c.cpu) == ("cpu", 1, ort().__version__, calibrate.cpu_model())
    assert c.suite == calibrate.SUITE and f"suite = {calibrate.SUITE}" in quick.to_toml()
    # The duration is the call's wall time (rounded to 0.1 s) but for what follows the record: the network
    # factor's prediction of the reference block, a small part of the run.
    assert quick_run.wall_s / 2 <= c.duration_s <= quick_run.wall_s + 0.05
    # The quick suite runs two passes whatever the budget, and every figure says it was read over them.
    assert f"fastest eighth of {QUICK.passes} passes" in quick.peak_flops["fp32"].source


@pytest.mark.ort
@pytest.mark.calibrate
def test_the_network_factor_predicts_the_factor_networks_median_run(quick: Device):
    # The reference block is timed in every pass (test_calibrate_probes reads its time on fake timings).
    assert quick.calibration is not None and quick.calibration.reference_time_s is not None
    # The factor is the median run over the prediction, the fixed costs (run overhead, every node's dispatch)
    # apart: (median - fixed) / (predicted - fixed), kept to 3 figures.
    factor = quick.network_factor
    assert factor is not None and factor.source.startswith("calibrated: the factor network")
    median, predicted, fixed = (factor.inputs[k] for k in ("median_s", "predicted_s", "fixed_s"))
    assert factor.value == pytest.approx((median - fixed) / (predicted - fixed), rel=5e-3)
    assert factor.inputs["runs"] >= QUICK.passes * QUICK.reps and "the median of" in factor.source
    # With the factor, the profile predicts the factor network at its median run (to the factor's 3 figures).
    assert analyze(factor_network()[0], quick).totals.predicted_time_s == pytest.approx(median, rel=0.01)


@pytest.mark.ort
@pytest.mark.calibrate
def test_the_weight_reuse_has_a_point_per_chain_of_the_suite(quick: Device):
    reuse = quick.weight_reuse
    assert reuse is not None and reuse.source.startswith("calibrated: chains of 4 MatMul")
    # One point per chain, at its weights (the suite's fractions of the last level) and a few vectors more; the
    # speedups at least 1 and never rising with the traffic.
    sizes = QUICK.reuse_bytes(calibrate.cache_levels())
    assert len(reuse.points) == len(sizes)
    for (traffic, _), nbytes in zip(reuse.points, sorted(sizes), strict=True):
        assert 0.9 * nbytes < traffic < 1.1 * nbytes
    speedups = [x for _, x in reuse.points]
    assert min(speedups) >= 1.0 and speedups == sorted(speedups, reverse=True)


@pytest.mark.ort
@pytest.mark.calibrate
def test_the_conv_weight_wait_has_a_point_at_the_weights_of_the_suites_convolution(quick: Device):
    # The quick suite's pair: a 160 -> 960 1x1 on 7x7, 4 * (160 * 960 + 960) = 618,240 B of weights and bias.
    wait = quick.conv_weight_wait
    assert wait is not None and wait.source.startswith("calibrated: 1 convolution(s) profiled with their weights")
    # (test_calibrate_probes reads the share on fake timings)
    ((weights, _),) = wait.points
    assert weights == 4 * (160 * 960 + 960)


@pytest.mark.ort
@pytest.mark.calibrate
def test_the_quick_suite_sets_the_ceilings_it_declares(quick: Device):
    # A class whose every sample was lost in the machine's noise (the quick suite's one fused Clip, timed by
    # difference in two passes) is named in the calibration's warnings rather than left out silently.
    assert quick.calibration is not None
    unread = sorted(QUICK.measures - set(quick.ceilings))
    named = [w.split(": ")[0] for w in quick.calibration.warnings if w.startswith("no ceiling read for ")]
    assert named == ([f"no ceiling read for {', '.join(unread)}"] if unread else [])
    for name, ceiling in quick.ceilings.items():
        assert ceiling.source.startswith("calibrated: ")
        assert all(w > 0 and e > 0 for w, e in ceiling.compute + ceiling.memory)
        # each class is calibrated on the term that bounds it; a one-row product (gemv, and by a 4-bit weight) may
        # be bound by the weight it streams, and then gives memory points only
        if name in with_trait("read_cold"):
            assert ceiling.compute or ceiling.memory
        else:
            assert bool(ceiling.compute) == (name in calibrate.COMPUTE_CLASSES), name


@pytest.mark.ort
@pytest.mark.calibrate
def test_memory_levels_follow_the_os_and_never_get_slower_towards_l1(quick: Device):
    levels = calibrate.cache_levels()
    # The quick suite probes no shared level past its working set: every size is the one the OS reports.
    assert [(c.level, c.size, c.scope) for c in quick.caches] == [(c.level, c.size, c.scope) for c in levels]
    # A smaller level's bandwidth is raised to the next one's (and the last to DRAM's) where it measured lower.
    bandwidths = [c.bandwidth for c in quick.caches] + [quick.memory_bandwidth.value]
    assert None not in bandwidths and bandwidths == sorted(bandwidths, reverse=True)
    # DRAM is read on the operand the quick suite sizes from the last level, and overheads on its chains.
    assert f"streaming a {binary_bytes(QUICK.dram_bytes(levels))} operand" in quick.memory_bandwidth.source
    lo, hi = QUICK.overhead_lengths
    assert f"chains of {lo} and {hi} Neg nodes" in quick.launch_overhead.source


@pytest.mark.ort
@pytest.mark.calibrate
def test_calibrated_device_round_trips(quick: Device, tmp_path: Path):
    path = tmp_path / "host.toml"
    path.write_text(quick.to_toml(), encoding="utf-8")
    assert load_device(path) == quick


@pytest.mark.ort
@pytest.mark.calibrate
def test_progress_counts_every_set_up_step_and_pass_up_to_the_total(quick_run: QuickRun):
    # One step per op-class benchmark, per cache level and per pass, and 10 for the others.
    total = len(QUICK.benches) + len(calibrate.cache_levels()) + 10 + QUICK.passes
    assert {t for _, t in quick_run.progress} == {total}
    dones = [d for d, _ in quick_run.progress]
    assert dones == sorted(dones) and dones[-1] == total


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="unknown execution provider"):
        calibrate.calibrate(provider="tensorrt", quick=True)
    with pytest.raises(UserError, match="threads"):
        calibrate.calibrate(threads=0, quick=True)
    with pytest.raises(UserError, match="budget"):
        calibrate.calibrate(budget_s=0, quick=True)


# ------------------------------------------------------------------------------------------------ the cache


def test_host_device_calibrates_once_then_reuses_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path))
    host = calibrated_host()
    assert host.calibration is not None
    measured = replace(host, calibration=replace(host.calibration, suite=calibrate.SUITE))
    calls: list[int] = []
    writes: list[Path] = []

    def fake_calibrate(threads: int = 1, provider: str = "cpu", budget_s: float = 120.0, progress=None, **_) -> Device:
        calls.append(threads)
        return measured

    real_write = atomic.write_text

    def spy_write(path, text):
        writes.append(Path(path))
        real_write(path, text)

    monkeypatch.setattr(run, "calibrate", fake_calibrate)
    monkeypatch.setattr(atomic, "write_text", spy_write)

    first = calibrate.host_device()
    path = calibrate.cache_path(1, "cpu")
    assert first == measured and calls == [1]
    assert writes == [path] and path.parent == tmp_path and path.exists()
    # no temporary file left behind; the key's lock file stays beside its profile
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".lock"]

    assert calibrate.host_device() == measured
    assert calls == [1]  # read back from the cache, not calibrated again

    calibrate.host_device(recalibrate=True)
    assert calls == [1, 1]

    path.write_text("not = [valid", encoding="utf-8")  # a damaged cache file is replaced
    assert calibrate.host_device() == measured
    assert calls == [1, 1, 1]

    # a profile measured by an older benchmark suite (no 'suite' field: suite 1) lacks what this one measures
    older = path.read_text(encoding="utf-8").replace(f"suite = {calibrate.SUITE}\n", "")
    assert older != path.read_text(encoding="utf-8")
    path.write_text(older, encoding="utf-8")
    assert calibrate.host_device() == measured
    assert calls == [1, 1, 1, 1]
    assert calibrate.host_device() == measured and calls == [1, 1, 1, 1]  # and the new one is kept


def test_two_calibrations_of_one_key_take_turns_and_the_second_reads_the_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    # Two threads ask for the host's profile at once; without the key's lock each calibrates (while the other
    # loads the machine) and then replaces the other's file.
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path))
    host = calibrated_host()
    assert host.calibration is not None
    measured = replace(host, calibration=replace(host.calibration, suite=calibrate.SUITE))
    started = threading.Event()
    calls: list[int] = []

    def slow_calibrate(threads: int = 1, **_: object) -> Device:
        calls.append(threads)
        started.set()
        time.sleep(0.5)  # long enough for the other thread to reach the cache while this one calibrates
        return measured

    monkeypatch.setattr(run, "calibrate", slow_calibrate)
    results: list[Device] = []
    first = threading.Thread(target=lambda: results.append(calibrate.host_device()))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.append(calibrate.host_device()))
    second.start()
    first.join(10)
    second.join(10)
    assert calls == [1]  # the second waited for the first one's profile and read it
    assert results == [measured, measured]


@pytest.fixture(scope="module")
def limited() -> Device:
    """A quick calibration on cores whose limits every measurement exceeds: 1 Hz, 4-byte vectors (20 B/s of loads
    and stores, 8 FLOP/s)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(host_probes, "core_limits", lambda threads: CoreLimits(threads, 4, 1.0, "test: 1 Hz"))
        return calibrate.calibrate(threads=1, budget_s=5.0, quick=True)


def load_device_text(text: str, folder: Path) -> Device:
    path = folder / "limited.toml"
    path.write_text(text, encoding="utf-8")
    return load_device(path)


@pytest.mark.ort
@pytest.mark.calibrate
def test_no_calibrated_bandwidth_or_peak_exceeds_the_cores_limits(limited: Device, tmp_path: Path):
    # 1 core x 1 Hz x 5 accesses x 4 B = 20 B/s; 1 core x 1 Hz x 4 FMA units x 1 lane x 2 FLOP = 8 FLOP/s
    assert limited.load_limit is not None and limited.load_limit.value == 20
    assert limited.flop_limit is not None and limited.flop_limit.value == 8
    assert "1 core(s) x 1e-09 GHz (test: 1 Hz) x 5 accesses a cycle" in limited.load_limit.source
    # Each level measured faster than the limit holds no measurement: it takes the next level's, and DRAM, which
    # measured faster too, is held at the limit.
    assert limited.memory_bandwidth.value == 20 and "held at the cores' limit" in limited.memory_bandwidth.source
    assert limited.memory_bandwidth.inputs["measured_bytes_s"] > 20
    assert [c.bandwidth for c in limited.caches] == [20] * len(limited.caches)
    assert all("above the cores' limit (load_limit): no measurement" in c.source for c in limited.caches)
    assert all(c.inputs["measured_bytes_s"] > 20 for c in limited.caches)
    assert limited.peak_flops["fp32"].value == 8 and "held at" in limited.peak_flops["fp32"].source
    assert limited.peak_flops["fp32"].inputs["measured_flops_s"] > 8
    assert (limited.load_limit.inputs["clock_hz"], limited.load_limit.inputs["vector_bytes"]) == (1.0, 4)
    assert limit_violations(limited) == []

    assert load_device_text(limited.to_toml(), tmp_path) == limited  # it loads: it keeps within its limits
