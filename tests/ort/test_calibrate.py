"""Host calibration: a quick calibration yields a valid, sourced, round-tripping device; the profile is cached."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxroof import atomic
from onnxroof.costs import Cost
from onnxroof.devices import CEILING_NAMES, Device, load_device
from onnxroof.errors import UserError
from onnxroof.ort import calibrate
from onnxroof.predict import engine
from tests.helpers import T, W, make_node, record_parking


@pytest.fixture(scope="module")
def progress_calls() -> list[tuple[int, int]]:
    return []


@pytest.fixture(scope="module")
def quick(progress_calls: list[tuple[int, int]]) -> Device:
    return calibrate.calibrate(threads=1, budget_s=5.0, quick=True, progress=lambda d, t: progress_calls.append((d, t)))


def test_quick_calibration_describes_an_onnxruntime_host(quick: Device):
    assert quick.engine == "onnxruntime"
    assert quick.kind == "cpu" and quick.overlap == "serial"
    assert quick.key == calibrate.host_key(1, "cpu")
    assert quick.calibration is not None
    assert quick.calibration.provider == "cpu" and quick.calibration.threads == 1
    from onnxroof.ort.sessions import ort

    assert quick.calibration.onnxruntime == ort().__version__
    assert quick.calibration.cpu == calibrate.cpu_model()
    assert quick.calibration.duration_s > 0
    assert quick.calibration.profiler_overhead is not None and quick.calibration.profiler_overhead >= 0
    # The reference block's time is recorded for drift checks. Its convolutions are 2*64*32*9*56^2 (3x3, 32 to 64
    # channels at 56x56) + 2*64*9*56^2 (depthwise) + 2*64*64*56^2 (1x1) + 2*128*64*9*28^2 (3x3 at 28x28) FLOPs,
    # about 2.6e8: at the measured fp32 peak the block takes no less than half of that time and no more than 50x.
    flops = 2 * 64 * 32 * 9 * 56**2 + 2 * 64 * 9 * 56**2 + 2 * 64 * 64 * 56**2 + 2 * 128 * 64 * 9 * 28**2
    at_peak = flops / quick.peak_flops["fp32"].value
    reference = quick.calibration.reference_time_s
    assert reference is not None and 0.5 * at_peak < reference < 50 * at_peak
    # The network factor makes the profile predict the block at the time it measured (to the factor's 3 digits).
    from onnxroof.api import analyze
    from onnxroof.ort.reference import reference_model

    assert quick.network_factor is not None and quick.network_factor.source.startswith("calibrated: the reference")
    assert analyze(reference_model(), quick).totals.predicted_time_s == pytest.approx(reference, rel=0.01)


def test_the_reference_is_timed_in_every_pass_in_samples_of_back_to_back_runs():
    job = calibrate._Reference(1, "cpu")
    flush = calibrate._Flush(1024)
    for _ in range(2):
        job.run_pass(3, flush)
    # Three samples a pass, each one run's share of a batch sized as validation's reference sampler sizes it (a
    # 256^3 MatMul runs well under MIN_SAMPLE_S, so a batch holds several runs).
    times = job.sampler.samples
    assert len(times) == 6 and all(t > 0 for t in times)
    assert job.sampler.batch > 1


def test_every_number_is_positive_and_says_it_was_calibrated(quick: Device):
    assert "fp32" in quick.peak_flops
    for peak in quick.peak_flops.values():
        assert peak.value > 0 and peak.dense and peak.source.startswith("calibrated: ")
    for item in (quick.memory_bandwidth, quick.launch_overhead, quick.run_overhead):
        assert item is not None and item.source.startswith("calibrated: ")
    assert quick.memory_bandwidth.value > 0 and quick.launch_overhead.value > 0 and quick.run_overhead.value >= 0
    assert quick.caches
    for cache in quick.caches:
        assert cache.size > 0 and cache.bandwidth is not None and cache.bandwidth > 0
        assert cache.source.startswith("calibrated: ")
    assert quick.ceilings
    for name, ceiling in quick.ceilings.items():
        assert name in CEILING_NAMES
        assert ceiling.source.startswith("calibrated: ")
        assert ceiling.compute or ceiling.memory
        assert all(w > 0 and e > 0 for w, e in ceiling.compute + ceiling.memory)
        # each class is calibrated on the term that bounds it
        assert bool(ceiling.compute) == (name in calibrate.COMPUTE_CLASSES)


def test_quick_calibration_covers_the_main_classes(quick: Device):
    for name in (
        "conv",
        "depthwise",
        "gemm",
        "pool",
        "elementwise",
        "lrn",
        "softmax",
        "layernorm",
        "movement",
        "epilogue",
    ):
        assert name in quick.ceilings, name


def test_calibrated_device_round_trips(quick: Device, tmp_path: Path):
    path = tmp_path / "host.toml"
    path.write_text(quick.to_toml(), encoding="utf-8")
    assert load_device(path) == quick


def test_progress_is_reported_up_to_the_total(quick: Device, progress_calls: list[tuple[int, int]]):
    assert progress_calls
    dones = [d for d, _ in progress_calls]
    assert dones == sorted(dones)
    assert progress_calls[-1][0] == progress_calls[-1][1]


def test_calibrated_device_predicts(quick: Device):
    view = make_node(
        "Conv",
        [T((1, 64, 28, 28)), W((64, 64, 3, 3)), W((64,))],
        [T((1, 64, 28, 28))],
        domain="com.microsoft.nchwc",
        kernel_shape=[3, 3],
    )
    pred, note = engine.predict_engine(
        view, Cost(flops=5.8e7, bytes_read=350e3, bytes_written=200e3, kernels=1), "fp32", quick
    )
    assert note.ceiling is not None
    assert pred.predicted_time_s > quick.launch_overhead.value


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="cannot calibrate"):
        calibrate.calibrate(provider="cuda", quick=True)
    with pytest.raises(UserError, match="threads"):
        calibrate.calibrate(threads=0, quick=True)
    with pytest.raises(UserError, match="budget"):
        calibrate.calibrate(budget_s=0, quick=True)


# ------------------------------------------------------------------------------------------------ the cache


def test_cache_location_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert calibrate.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("ONNXROOF_CACHE_DIR")
    assert calibrate.cache_dir() == tmp_path / "xdg" / "onnxroof"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert calibrate.cache_dir() == Path.home() / ".cache" / "onnxroof"


def test_host_key_names_cpu_onnxruntime_provider_and_threads():
    from onnxroof.ort.sessions import ort

    key = calibrate.host_key(4, "cpu")
    assert key.startswith("host-") and key.endswith(f"-ort{ort().__version__}-cpu-t4")
    assert all(ch.isalnum() or ch in "-." for ch in key)
    assert calibrate.cache_path(4, "cpu").name == f"{key}.toml"


def test_host_device_calibrates_once_then_reuses_the_cache(
    quick: Device, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path))
    calls: list[int] = []
    writes: list[Path] = []

    def fake_calibrate(threads: int = 1, provider: str = "cpu", budget_s: float = 120.0, progress=None, **_) -> Device:
        calls.append(threads)
        return quick

    real_write = atomic.write_text

    def spy_write(path, text):
        writes.append(Path(path))
        real_write(path, text)

    monkeypatch.setattr(calibrate, "calibrate", fake_calibrate)
    monkeypatch.setattr(atomic, "write_text", spy_write)

    first = calibrate.host_device()
    path = calibrate.cache_path(1, "cpu")
    assert first == quick and calls == [1]
    assert writes == [path] and path.parent == tmp_path and path.exists()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind

    assert calibrate.host_device() == quick
    assert calls == [1]  # read back from the cache, not calibrated again

    calibrate.host_device(recalibrate=True)
    assert calls == [1, 1]

    path.write_text("not = [valid", encoding="utf-8")  # a damaged cache file is replaced
    assert calibrate.host_device() == quick
    assert calls == [1, 1, 1]

    # a profile measured by an older benchmark suite (no 'suite' field: suite 1) lacks what this one measures
    older = path.read_text(encoding="utf-8").replace(f"suite = {calibrate.SUITE}\n", "")
    assert older != path.read_text(encoding="utf-8")
    path.write_text(older, encoding="utf-8")
    assert calibrate.host_device() == quick
    assert calls == [1, 1, 1, 1]
    assert calibrate.host_device() == quick and calls == [1, 1, 1, 1]  # and the new one is kept


def test_a_profile_records_the_suite_that_measured_it(quick: Device):
    assert quick.calibration is not None and quick.calibration.suite == calibrate.SUITE
    assert f"suite = {calibrate.SUITE}" in quick.to_toml()


# ------------------------------------------------------------------------------------------------ helpers


def test_cache_levels_come_from_the_os_or_defaults():
    levels = calibrate.cache_levels()
    assert levels
    sizes = [c.size for c in levels]
    assert sizes == sorted(sizes) and all(s > 0 for s in sizes)
    assert all(c.scope in ("per-core", "shared") for c in levels)


def test_size_and_cpu_list_parsing():
    assert calibrate._parse_size("48K") == 48 * 1024
    assert calibrate._parse_size("2048K\n") == 2 * 1024 * 1024
    assert calibrate._parse_size("300M") == 300 * 1024 * 1024
    assert calibrate._parse_size("weird") is None
    assert calibrate._count_cpus("0-1") == 2
    assert calibrate._count_cpus("0,32") == 2
    assert calibrate._count_cpus("3") == 1


def test_a_shared_cache_serves_only_the_working_sets_at_which_its_bandwidth_holds():
    mib = 2**20
    nominal = 300 * mib  # what a virtual machine reports: the host's whole last-level cache
    # Measured at 32 MiB: 20 GB/s. At 64 MiB 16 GB/s is 80% of it (holds, >= 75%); at 128 MiB 10 GB/s is 50%
    # (falls): the level serves up to 64 MiB, and larger working sets go to DRAM.
    size, note = calibrate.effective_size(nominal, 32 * mib, 20e9, [(128 * mib, 10e9), (64 * mib, 16e9)])
    assert size == 64 * mib
    assert "serves up to 64 MiB" in note and "at 128 MiB" in note and "50%" in note
    # Falling at the first probe leaves only the working set the level was measured on.
    assert calibrate.effective_size(nominal, 32 * mib, 20e9, [(64 * mib, 14e9)])[0] == 32 * mib
    # Every probe holding (a real last-level cache of that size): the reported size stands, with no note.
    assert calibrate.effective_size(nominal, 32 * mib, 20e9, [(64 * mib, 19e9), (128 * mib, 15e9)]) == (nominal, "")
    assert calibrate.effective_size(nominal, 32 * mib, 20e9, []) == (nominal, "")


def test_binning_merges_close_work_sizes():
    points = [(1e6, 0.5), (1.2e6, 0.7), (1.1e6, 0.6), (1e8, 0.9)]
    # Within 1.6x of 1e6: one point at the geometric mean (1e6 * 1.1e6 * 1.2e6) ** (1/3) = 1.0969e6, median 0.6.
    assert calibrate._bin(points, least=1) == ((1.097e6, 0.6), (1e8, 0.9))


def test_binning_never_lets_fewer_than_three_kernels_set_a_point():
    # Two kernels at 1e6 and 1.1e6 are short of three: the next one joins them, however far its work is, and the
    # median of (0.9, 0.95, 0.5) ignores the slow outlier. The next two (1e9, 1.2e9) are short of three at the
    # end: they join the group before them.
    points = [(1e6, 0.9), (1.1e6, 0.95), (1e7, 0.5), (1e8, 0.8), (1.1e8, 0.85), (1.2e8, 0.82), (1e9, 0.9), (1.2e9, 0.6)]
    (w1, e1), (w2, e2) = calibrate._bin(points)
    assert e1 == 0.9 and w1 == pytest.approx((1e6 * 1.1e6 * 1e7) ** (1 / 3), rel=1e-3)
    # Median of (0.8, 0.85, 0.82, 0.9, 0.6) is 0.82; work the geometric mean of the five.
    assert e2 == 0.82 and w2 == pytest.approx((1e8 * 1.1e8 * 1.2e8 * 1e9 * 1.2e9) ** (1 / 5), rel=1e-3)
    # A class with fewer kernels than that gets a single point, their median.
    assert calibrate._bin([(1e6, 0.4), (1e9, 0.8)]) == ((3.162e7, 0.6),)


def test_warnings_name_a_busy_machine():
    assert calibrate._warnings([0.01, 0.02, 0.03], 10.0, 120.0, 0.0) == []
    busy = calibrate._warnings([0.5, 0.6, 0.4], 10.0, 120.0, 0.3)
    assert any("hypervisor took 30%" in w for w in busy)
    assert any("machine was busy" in w for w in busy)
    assert any("over its 120 s budget" in w for w in calibrate._warnings([], 130.0, 120.0))


def test_the_network_factor_is_the_reference_blocks_measured_work_over_its_predicted_work():
    from dataclasses import replace

    from onnxroof.api import analyze
    from onnxroof.ort.reference import reference_model
    from tests.helpers import CONV, calibrated_host

    device = calibrated_host({"conv": CONV})
    block = analyze(reference_model(), device)
    # The fixed costs, the run overhead (5 us) and one dispatch per node (1 us each), are not the kernels' work:
    # a block measured at fixed + 1.5 x (predicted - fixed) ran its kernels 1.5 times as long as predicted.
    fixed = 5e-6 + 1e-6 * len(block.nodes)
    assert sum(n.prediction.overhead_time_s for n in block.nodes) == pytest.approx(1e-6 * len(block.nodes))
    measured = fixed + 1.5 * (block.totals.predicted_time_s - fixed)
    factor = calibrate._network_factor(device, measured, "test")
    assert factor.value == pytest.approx(1.5)
    assert factor.source.startswith("calibrated: the reference block (onnxroof.ort.reference) ran")
    # With the factor the device predicts the block at what it measured.
    scaled = analyze(reference_model(), replace(device, network_factor=factor))
    assert scaled.totals.predicted_time_s == pytest.approx(measured)


def test_dram_overlap_is_the_share_of_a_dram_conv_s_traffic_its_compute_hid():
    from dataclasses import replace

    from tests.helpers import CONV, calibrated_host, conv

    device = calibrated_host({"conv": CONV})
    view = conv(64, 64, 112, 3, out_hw=56)
    cost = Cost(flops=1e9, bytes_read=3e6, bytes_written=1e6, kernels=1)
    # compute = 1e9 / (100e9 * 0.9) = 11.111 ms at the conv ceiling; the 4 MB working set is past the test host's
    # L2, so memory = 4e6 / 10e9 = 400 us at DRAM. Measured 300 us over the compute: 1 - 300/400 = 0.25 hidden.
    measured = calibrate._Sample(view, cost, 1e9 / 90e9 + 300e-6, "a batched conv")
    hidden = calibrate._dram_overlap(measured, device, "test")
    assert hidden is not None and hidden.value == pytest.approx(0.25)
    assert hidden.source.startswith("calibrated: a batched conv ran 11.4 ms")
    # Faster than its compute alone: all hidden (1); slower than compute plus all the traffic: none hidden (0).
    assert calibrate._dram_overlap(replace(measured, time_s=0.011), device, "test").value == 1.0
    assert calibrate._dram_overlap(replace(measured, time_s=0.013), device, "test").value == 0.0
    # A conv whose data sits in a cache, or one that is memory-bound, measures nothing.
    assert (
        calibrate._dram_overlap(
            replace(measured, cost=Cost(flops=1e9, bytes_read=4e5, bytes_written=2e5)), device, "test"
        )
        is None
    )
    assert (
        calibrate._dram_overlap(
            replace(measured, cost=Cost(flops=1e6, bytes_read=3e6, bytes_written=1e6)), device, "test"
        )
        is None
    )


def test_the_epilogue_ceiling_is_the_level_bandwidth_over_the_clip_s_extra_time():
    from tests.helpers import calibrated_host

    bare = calibrated_host()
    clip = make_node(
        "Conv",
        [T((1, 64, 28, 28)), W((64, 64, 1, 1)), W((64,))],
        [T((1, 64, 28, 28))],
        domain="com.microsoft.nchwc",
        kernel_shape=[1, 1],
        activation="Clip",
        activation_params=[0.0, 6.0],
    )
    cost = Cost(flops=6.4e6, bytes_read=2.2e5, bytes_written=2e5, kernels=1)
    # The Clip pass reads and writes the 64x28x28 fp32 output: 2 * 200,704 = 401,408 B, which fits the test
    # host's L2 (1 MiB at 50 GB/s): 8.028 us at full bandwidth. Measured at 20 us over the Relu twin, the pass
    # reached 8.028 / 20 = 40.1% of it.
    extra = calibrate._Sample(clip, cost, 20e-6, "Conv 64->64 1x1 @28x28", part="epilogue")
    ceiling = calibrate._ceilings([extra], bare, 1)["epilogue"]
    assert ceiling.compute == ()
    assert ceiling.memory == ((401400.0, pytest.approx(401408 / 50e9 / 20e-6, rel=1e-3)),)  # 4 figures kept
    assert "Clip less their time with Relu" in ceiling.source and "Conv 64->64 1x1 @28x28" in ceiling.source


def test_an_epilogue_pair_times_the_clip_as_the_difference_of_its_twins(tmp_path: Path):
    runner = calibrate._Runner(1, "cpu", str(tmp_path))
    rand = calibrate._Rand(0)
    pair = calibrate._EpiloguePair(
        runner,
        "Conv 16->64 1x1 @28x28",
        lambda act: calibrate._tailed(calibrate._conv(rand, 16, 64, 28, 1, activation=act)),
    )
    # onnxruntime fused each activation into the conv: Relu inside the kernel, Clip as an epilogue
    convs = {}
    for name, job in (("relu", pair.relu), ("clip", pair.clip)):
        (node,) = [n for n in job.opt.graph.node if n.op_type == "Conv"]
        assert [a.s for a in node.attribute if a.name == "activation"] == [name.capitalize().encode()]
        convs[name] = node.name
    pair.run_pass(1, calibrate._Flush(1024))  # both sessions run
    # kernel times as the profiler would report them: Relu twin 40 us, Clip twin 55 us (8 runs each)
    pair.relu._times = {convs["relu"]: [40e-6] * 8}
    pair.clip._times = {convs["clip"]: [55e-6] * 8}
    (sample,) = pair.samples(3e-6, [])
    assert sample.part == "epilogue" and sample.time_s == pytest.approx(15e-6)  # the profiler's cost cancels
    assert engine.epilogue_activation(sample.view) == "Clip"
    # a Clip twin no slower than the Relu one is noise: no sample rather than a time of zero or less
    pair.clip._times = {convs["clip"]: [40e-6] * 8}
    assert pair.samples(3e-6, []) == []


def test_a_depthwise_epilogue_pair_s_relu_twin_is_a_depthwise_sample_too(tmp_path: Path):
    runner = calibrate._Runner(1, "cpu", str(tmp_path))
    rand = calibrate._Rand(0)
    pair = calibrate._EpiloguePair(
        runner,
        "depthwise Conv 32->32 3x3 @28x28",
        lambda act: calibrate._tailed(calibrate._conv(rand, 32, 32, 28, 3, group=32, activation=act)),
    )
    names = {job: next(n.name for n in job.opt.graph.node if n.op_type == "Conv") for job in (pair.relu, pair.clip)}
    pair.run_pass(1, calibrate._Flush(1024))
    pair.relu._times = {names[pair.relu]: [40e-6] * 8}
    pair.clip._times = {names[pair.clip]: [55e-6] * 8}
    node, extra = pair.samples(3e-6, [])
    # the Relu twin's kernel, net of the profiler's 3 us, as the depthwise class benchmarks read theirs
    assert node.part == "node" and engine.op_class(node.view) == "depthwise"
    assert node.time_s == pytest.approx(37e-6)
    assert extra.part == "epilogue" and extra.time_s == pytest.approx(15e-6)


def test_calibration_sessions_park_their_threads_when_a_run_returns(monkeypatch, tmp_path: Path):
    from onnxroof.ort.reference import reference_model

    seen = record_parking(monkeypatch)
    calibrate._Runner(2, "cpu", str(tmp_path)).session(reference_model())
    assert seen == [True]
