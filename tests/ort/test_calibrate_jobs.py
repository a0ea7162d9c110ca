"""The calibration's timing jobs on real onnxruntime sessions, with the profiler's kernel times stated by the test
where a number is checked."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from onnxroof.ort.calibrate import chains, graphs, jobs
from onnxroof.predict import engine, op_classes
from tests.helpers import record_parking


def _conv_names(job: jobs.Profiled) -> list[str]:
    return [n.name for n in job.opt.graph.node if n.op_type == "Conv"]


@pytest.mark.ort
def test_the_reference_is_timed_in_every_pass_in_samples_of_back_to_back_runs():
    job = jobs.Reference(1, "cpu")
    flush = jobs.Flush(1024)
    for _ in range(2):
        job.run_pass(3, flush)
    # Three samples a pass, each one run's share of a batch sized as validation's reference sampler sizes it.
    times = job.sampler.samples
    assert len(times) == 6 and all(t > 0 for t in times)


@pytest.mark.ort
def test_an_epilogue_pair_times_the_clip_as_the_difference_of_its_twins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    rand = graphs.Rand(0)
    pair = jobs.EpiloguePair(
        runner,
        "Conv 16->64 1x1 @28x28",
        lambda act: graphs.tailed(graphs.conv(rand, 16, 64, 28, 1, activation=act)),
    )
    # onnxruntime fused each activation into the conv: Relu inside the kernel, Clip as an epilogue
    convs = {}
    for name, job in (("relu", pair.relu), ("clip", pair.clip)):
        (node,) = [n for n in job.opt.graph.node if n.op_type == "Conv"]
        assert [a.s for a in node.attribute if a.name == "activation"] == [name.capitalize().encode()]
        convs[name] = node.name
    pair.run_pass(1, jobs.Flush(1024))  # both sessions run
    # kernel times as the profiler would report them: Relu twin 40 us, Clip twin 55 us (8 runs each)
    monkeypatch.setattr(pair.relu, "kernel_times", lambda: {convs["relu"]: [40e-6] * 8})
    monkeypatch.setattr(pair.clip, "kernel_times", lambda: {convs["clip"]: [55e-6] * 8})
    (sample,) = pair.samples(3e-6)
    assert sample.part == "epilogue" and sample.time_s == pytest.approx(15e-6)  # the profiler's cost cancels
    assert engine.epilogue_activation(sample.view) == "Clip"
    # a Clip twin no slower than the Relu one is noise: no sample rather than a time of zero or less
    monkeypatch.setattr(pair.clip, "kernel_times", lambda: {convs["clip"]: [40e-6] * 8})
    assert pair.samples(3e-6) == []


@pytest.mark.ort
def test_a_depthwise_epilogue_pair_s_relu_twin_is_a_depthwise_sample_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    rand = graphs.Rand(0)
    pair = jobs.EpiloguePair(
        runner,
        "depthwise Conv 32->32 3x3 @28x28",
        lambda act: graphs.tailed(graphs.conv(rand, 32, 32, 28, 3, group=32, activation=act)),
    )
    pair.run_pass(1, jobs.Flush(1024))
    monkeypatch.setattr(pair.relu, "kernel_times", lambda: {_conv_names(pair.relu)[0]: [40e-6] * 8})
    monkeypatch.setattr(pair.clip, "kernel_times", lambda: {_conv_names(pair.clip)[0]: [55e-6] * 8})
    node, extra = pair.samples(3e-6)
    # the Relu twin's kernel, net of the profiler's 3 us, as the depthwise class benchmarks read theirs
    assert node.part == "node" and op_classes.op_class(node.view) == "depthwise"
    assert node.time_s == pytest.approx(37e-6)
    assert extra.part == "epilogue" and extra.time_s == pytest.approx(15e-6)


@pytest.mark.ort
def test_a_profiled_job_keeps_the_harvested_nodes_long_enough_to_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    built = graphs.tailed(graphs.conv(graphs.Rand(0), 32, 32, 28, 3))
    job = jobs.Profiled(runner, "Conv 32->32 3x3 @28x28", built, frozenset({"conv"}))
    assert not job.cold  # 37 KB of weights: left hot
    (conv,) = _conv_names(job)
    tail = next(n.name for n in job.opt.graph.node if n.op_type == "Neg")
    # The conv's fastest eighth of 16 runs is 100 us, and 2 us of it the profiler's; the Neg is not harvested.
    monkeypatch.setattr(job, "kernel_times", lambda: {conv: [100e-6] * 2 + [150e-6] * 14, tail: [50e-6] * 16})
    (sample,) = job.samples(2e-6)
    assert sample.view.name == conv and sample.time_s == pytest.approx(98e-6) and sample.label == job.label
    # A kernel under MIN_PROFILED_S is too coarse for the profiler's 1 us resolution.
    monkeypatch.setattr(job, "kernel_times", lambda: {conv: [jobs.MIN_PROFILED_S / 2] * 16})
    assert job.samples(0.0) == []


@pytest.mark.ort
def test_a_global_pool_benchmark_reads_its_input_hot_in_nchwc_layout(tmp_path: Path):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    job = jobs.Profiled(
        runner,
        "GlobalAveragePool 2048 @7x7",
        graphs.global_pool(graphs.Rand(0), "GlobalAveragePool", 2048, 7, True),
        frozenset({"global_pool"}),
    )
    # The depthwise conv in front holds 2048 * 9 * 4 = 73,728 B of weights: nothing to stream through the caches
    # before the pool, and the job is not flushed cold (a dense 2048 x 2048 1x1 conv held 16 MiB).
    assert not job.cold
    pools = [n for n in job.opt.graph.node if n.op_type == "GlobalAveragePool"]
    assert len(pools) == 1 and pools[0].domain == "com.microsoft.nchwc"


@pytest.mark.ort
def test_a_cold_job_leaves_out_the_reorders_of_activations_its_flush_pushed_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    built = graphs.reorder_chain(graphs.Rand(0), 64, 28)
    hot = jobs.Profiled(runner, "reorders, hot", built, frozenset({"reorder"}), cold=False)
    cold = jobs.Profiled(runner, "reorders, cold", built, frozenset({"reorder"}), cold=True)
    for job in (hot, cold):
        reorders = [n.name for n in job.opt.graph.node if n.op_type == "ReorderInput"]
        assert reorders
        monkeypatch.setattr(job, "kernel_times", lambda names=reorders: {n: [20e-6] * 8 for n in names})
    assert len(hot.samples(0.0)) == len([n for n in hot.opt.graph.node if n.op_type == "ReorderInput"])
    assert cold.samples(0.0) == []


@pytest.mark.ort
def test_a_chain_is_one_node_s_time_from_the_slope_of_its_two_lengths(tmp_path: Path):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    rand = graphs.Rand(0)
    chain = jobs.Chain(runner, "Relu 1x64", lambda n: chains.activation_chain(rand, n, "Relu", (1, 64)), (2, 12))
    assert [n.op_type for n in chain.opt.graph.node] == ["Relu", "Relu"]
    # 10 nodes more took 50 us more: 5 us a node; 1 us of it the dispatch.
    chain.t_lo, chain.t_hi = [20e-6] * 8, [70e-6] * 8
    (sample,) = chain.samples(1e-6)
    assert sample.time_s == pytest.approx(4e-6) and sample.view.op_type == "Relu"


@pytest.mark.ort
def test_a_chain_without_lengths_is_sized_to_its_target(tmp_path: Path):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    rand = graphs.Rand(0)
    chain = jobs.Chain(runner, "Neg", lambda n: chains.activation_chain(rand, n, "Neg", (16,)), target_s=1e-9)
    assert (chain.lo, chain.hi) == (2, 6)  # at least 4 nodes more, however fast the node
    chain = jobs.Chain(runner, "Neg", lambda n: chains.activation_chain(rand, n, "Neg", (16,)), target_s=1e3)
    assert (chain.lo, chain.hi) == (2, 202)  # at most 200 nodes more


@pytest.mark.ort
def test_calibration_sessions_park_their_threads_when_a_run_returns(monkeypatch, tmp_path: Path):
    from onnxroof.ort.reference import reference_model

    seen = record_parking(monkeypatch)
    jobs.Runner(2, "cpu", str(tmp_path)).session(reference_model())
    assert seen == [True]


@pytest.mark.ort
def test_on_several_threads_a_profiled_job_opens_a_spinning_session_for_each_pass_and_closes_it(
    monkeypatch, tmp_path: Path
):
    """A parked pool wakes at each run's first parallel kernel, which a user's loop never sees; a spinning pool
    left open would take a core from the next benchmark. So each pass has its own session, its pool spinning,
    closed when the pass ends; the timed runs of every pass are read, the untimed ones left out."""
    runner = jobs.Runner(2, "cpu", str(tmp_path))
    built = graphs.tailed(graphs.conv(graphs.Rand(0), 32, 32, 28, 3))
    seen = record_parking(monkeypatch)
    job = jobs.Profiled(runner, "Conv 32->32 3x3 @28x28", built, frozenset({"conv"}))
    flush = jobs.Flush(1024)
    for _ in range(3):
        job.run_pass(2, flush)
    assert seen == [True, False, False, False]  # the first session gives the optimized graph only
    (conv,) = _conv_names(job)
    assert len(job.kernel_times()[conv]) == 3 * 2  # two timed runs in each of three passes
    start = time.process_time()
    time.sleep(0.15)
    assert time.process_time() - start < 2e-3  # no pool left spinning


@pytest.mark.ort
def test_on_one_thread_a_profiled_job_keeps_one_session(monkeypatch, tmp_path: Path):
    runner = jobs.Runner(1, "cpu", str(tmp_path))
    built = graphs.tailed(graphs.conv(graphs.Rand(0), 32, 32, 28, 3))
    seen = record_parking(monkeypatch)
    job = jobs.Profiled(runner, "Conv 32->32 3x3 @28x28", built, frozenset({"conv"}))
    for _ in range(3):
        job.run_pass(2, jobs.Flush(1024))
    assert seen == [True]
    (conv,) = _conv_names(job)
    assert len(job.kernel_times()[conv]) == 3 * 2


@pytest.mark.ort
@pytest.mark.parametrize("threads", [1, 2])
def test_a_chain_keeps_both_parked_sessions_on_any_number_of_threads(monkeypatch, tmp_path: Path, threads: int):
    """A chain's node time is the difference of two runs' times: the pool's wake-up at each run's start cancels."""
    runner = jobs.Runner(threads, "cpu", str(tmp_path))
    rand = graphs.Rand(0)
    seen = record_parking(monkeypatch)
    chain = jobs.Chain(runner, "Relu 1x64", lambda n: chains.activation_chain(rand, n, "Relu", (1, 64)), (2, 5))
    for _ in range(3):
        chain.run_pass(2, jobs.Flush(1024))
    assert seen == [True, True]
    assert len(chain.t_lo) == len(chain.t_hi) == 3 * 2


@pytest.mark.ort
@pytest.mark.parametrize(("threads", "expected"), [(1, [True]), (2, [False, False, False])])
def test_a_loop_keeps_one_parked_session_on_one_thread_and_opens_one_per_pass_on_several(
    monkeypatch, tmp_path: Path, threads: int, expected: list[bool]
):
    runner = jobs.Runner(threads, "cpu", str(tmp_path))
    seen = record_parking(monkeypatch)
    loop = jobs.Loop(runner, "Relu 1x64", chains.activation_chain(graphs.Rand(0), 3, "Relu", (1, 64)))
    for _ in range(3):
        loop.run_pass(2, jobs.Flush(1024))
    assert seen == expected
    assert len(loop.times) == 3 * 2 and loop.time_s() is not None
    start = time.process_time()
    time.sleep(0.15)
    assert time.process_time() - start < 2e-3  # no pool left spinning


class _CountingJob:
    """A job that records the reps of each pass it is asked to run."""

    def __init__(self) -> None:
        self.passes: list[int] = []

    def run_pass(self, reps: int, flush: jobs.Flush) -> None:
        self.passes.append(reps)


def test_passes_run_every_job_until_the_count_or_the_deadline_with_two_at_least():
    first, second = _CountingJob(), _CountingJob()
    steps: list[None] = []
    far = time.perf_counter() + 3600.0
    assert jobs.time_passes([first, second], 3, 5, far, jobs.Flush(4), lambda: steps.append(None)) == 5
    assert first.passes == second.passes == [3] * 5 and len(steps) == 5
    # A deadline already past still gets two passes, then stops.
    late = _CountingJob()
    assert jobs.time_passes([late], 2, 5, time.perf_counter() - 1.0, jobs.Flush(4), lambda: None) == 2
    assert late.passes == [2, 2]
