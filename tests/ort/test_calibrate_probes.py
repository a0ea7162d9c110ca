"""The calibration as a fold over probes: probes read in their declared order, a probe added to the list is set
up, timed in every pass in its place and read into the device; and a quick calibration on fake timings, whose
figures follow in closed form from the timings (every job runs its real sessions or none, but the times it reads
are the ones below)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from onnxroof.devices import Device, Sourced, load_device
from onnxroof.ort import calibrate
from onnxroof.ort.calibrate import jobs, probes, run
from onnxroof.ort.calibrate.jobs import Flush, Job
from onnxroof.ort.calibrate.probes import Reading, Run, Setting
from onnxroof.ort.calibrate.suite import QUICK
from onnxroof.ort.reference import ReferenceSampler, reference_model

# ------------------------------------------------------------------------------------------------ fake probes


@dataclass
class FakeJob:
    """A job whose every timed run takes ``seconds``; it logs each pass it runs in."""

    name: str
    seconds: float
    log: list[str]
    times: list[float] = field(default_factory=list)

    def run_pass(self, reps: int, flush: Flush) -> None:
        self.log.append(self.name)
        self.times += [self.seconds] * reps


class FakeProbe:
    """A probe of one FakeJob that reads the sum of its timings into ``memory_capacity``, and logs its set-up and
    its reading."""

    def __init__(self, name: str, log: list[str], after: tuple[str, ...] = (), seconds: float = 1e-3) -> None:
        self.name, self.after, self.log, self.seconds = name, after, log, seconds
        self.job: FakeJob | None = None

    def steps(self, setting: Setting) -> int:
        return 1

    def set_up(self, setting: Setting) -> Sequence[Job]:
        self.log.append(f"set up {self.name}")
        self.job = FakeJob(self.name, self.seconds, self.log)
        setting.advance(1)
        return [self.job]

    def read(self, device: Device, reading: Reading) -> Device:
        self.log.append(f"read {self.name}")
        assert self.job is not None
        total = sum(self.job.times)
        return replace(
            device, memory_capacity=Sourced(total, f"fake: {self.name}", reading.inputs(runs=len(self.job.times)))
        )


def _reading(passes: int = 2) -> Reading:
    return Reading(Run(1, "cpu", 10.0, time.perf_counter(), None, 0.0), QUICK, passes)


def test_probes_read_after_the_probes_they_name_and_in_list_order_otherwise():
    log: list[str] = []
    # c reads after a; a after b: b, a, c. d names none and reads in its list place among those ready.
    listed = [FakeProbe("c", log, ("a",)), FakeProbe("a", log, ("b",)), FakeProbe("d", log), FakeProbe("b", log)]
    assert [p.name for p in probes.read_order(listed)] == ["d", "b", "a", "c"]
    for p in listed:
        p.job = FakeJob(p.name, 1e-3, log)
    device = probes.fold(listed, load_device("v100-sxm2"), _reading())
    assert log == ["read d", "read b", "read a", "read c"]
    assert device.memory_capacity is not None and device.memory_capacity.source == "fake: c"  # the last read


@pytest.mark.parametrize(
    ("listed", "says"),
    [
        ([("a", ("z",))], r"probe 'a' reads after \['z'\], which no probe is"),
        ([("a", ("b",)), ("b", ("a",))], r"probes \['a', 'b'\] each read after another of them"),
        ([("a", ()), ("a", ())], "two probes share a name"),
    ],
)
def test_a_read_order_that_cannot_hold_is_refused(listed: list[tuple[str, tuple[str, ...]]], says: str):
    with pytest.raises(ValueError, match=says):
        probes.read_order([FakeProbe(name, [], after) for name, after in listed])


def test_the_host_probes_read_every_figure_before_what_is_read_against_it():
    order = [p.name for p in probes.read_order(run.host_probes())]
    # the ceilings are read on the device every bare figure makes, and before anything that is read against them
    for bare in ("limits", "overheads", "dram", "caches", "classes", "fp32_peak", "low_precision"):
        assert order.index(bare) < order.index("ceilings"), bare
    assert order.index("ceilings") < order.index("record") < order.index("dram_overlap")
    assert order[-1] == "network_factor"  # predicted on every other figure


@pytest.mark.ort
def test_a_probe_added_to_the_host_list_is_set_up_timed_in_every_pass_and_read(monkeypatch: pytest.MonkeyPatch):
    log: list[str] = []
    first, last = FakeProbe("first", log), FakeProbe("last", log, ("network_factor",), seconds=2e-3)
    monkeypatch.setattr(run, "host_probes", lambda real=run.host_probes: [first, *real(), last])
    calls: list[tuple[int, int]] = []
    device = calibrate.calibrate(threads=1, budget_s=5.0, quick=True, progress=lambda d, t: calls.append((d, t)))
    # set up once each, first before last; each pass times first's job before every host job and last's after
    assert [x for x in log if x.startswith("set up")] == ["set up first", "set up last"]
    assert [x for x in log if not x.startswith(("set up", "read"))] == ["first", "last"] * QUICK.passes
    assert log.index("set up last") < log.index("first")  # every job is set up before the first pass
    # read after the network factor, the last host figure: its reading is the device's, over QUICK.reps runs a pass
    assert log[-1] == "read last" and device.network_factor is not None
    assert device.memory_capacity == Sourced(
        2e-3 * QUICK.reps * QUICK.passes,
        "fake: last",
        {"runs": QUICK.reps * QUICK.passes, "threads": 1, "passes": QUICK.passes},
    )
    # its set-up step counts in the progress: the host's steps, 2 more, and the passes
    total = len(QUICK.benches) + len(calibrate.cache_levels()) + 10 + 2 + QUICK.passes
    assert {t for _, t in calls} == {total} and calls[-1] == (total, total)


# ------------------------------------------------------------------------------------------------ fake timings

RUN_S = 10e-6  # every chain's run: this plus its nodes
NODE_S = {  # seconds per chain node, by the chain's label; every other chain's node takes OTHER_NODE_S
    "chains of Neg on 16 floats": 3e-6,
    "chains of Neg + Reshape on 16 floats": 3.5e-6,
    "chains of If, each a branch of one Neg on 16 floats": 5e-6,
    "a one-node graph": 3e-6,
}
OTHER_NODE_S = 4e-6
PROFILER_S = 10e-6  # each node of "64 Neg on 16 floats": what the profiler adds per node
DRAM_S = 2e-3  # the DRAM benchmark's matrix-vector product
WARM_S, COLD_S = 500e-6, 600e-6  # the weight-wait pair's convolution, warm and cold
KERNEL_S = 200e-6  # every other profiled node, the Relu and the Clip twin of an epilogue pair alike
REFERENCE_NODE_S = 1e-4  # a reference-timed graph's run: this per node of the graph


def _fake_kernel_s(label: str) -> float:
    if label == "64 Neg on 16 floats":
        return PROFILER_S
    if "streaming a" in label:
        return DRAM_S
    if label.endswith(" warm"):
        return WARM_S
    if label.endswith(" cold"):
        return COLD_S
    return KERNEL_S


@pytest.fixture(scope="module")
def faked() -> Device:
    """A quick calibration, one thread, on the fake timings above (loops, timed back to back, keep their own)."""
    real_kernel_times = jobs.Profiled.kernel_times

    def kernel_times(self: jobs.Profiled) -> dict[str, list[float]]:
        return {name: [_fake_kernel_s(self.label)] * len(ts) for name, ts in real_kernel_times(self).items()}

    def chain_pass(self: jobs.Chain, reps: int, flush: Flush) -> None:
        per_node = NODE_S.get(self.label, OTHER_NODE_S)
        self.t_lo += [RUN_S + self.lo * per_node] * reps
        self.t_hi += [RUN_S + self.hi * per_node] * reps

    def sample(self: ReferenceSampler, reps: int = 1) -> None:
        self.samples += [REFERENCE_NODE_S * len(self.model.graph.node)] * reps

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jobs.Profiled, "kernel_times", kernel_times)
        patch.setattr(jobs.Chain, "run_pass", chain_pass)
        patch.setattr(ReferenceSampler, "sample", sample)
        return calibrate.calibrate(threads=1, budget_s=5.0, quick=True)


def test_the_overheads_are_the_chains_slopes(faked: Device):
    # per node: (RUN_S + hi x 3 us - (RUN_S + lo x 3 us)) / (hi - lo) = 3 us
    assert faked.launch_overhead.value == pytest.approx(3e-6, rel=1e-9)
    lo, hi = QUICK.overhead_lengths
    inputs = faked.launch_overhead.inputs
    assert (inputs["chain_lo"], inputs["chain_hi"]) == (lo, hi)
    assert inputs["lo_run_s"] == pytest.approx(RUN_S + lo * 3e-6) and inputs["hi_run_s"] == pytest.approx(
        RUN_S + hi * 3e-6
    )
    # a Reshape adds 3.5 - 3 = 0.5 us; an If 5 - 3 = 2 us; a run of one node 10 + 3 us less the node's 3 us: 10 us
    assert (
        inputs["reshape_s"] == pytest.approx(0.5e-6)
        and "a Reshape between them adds 0.50 us" in faked.launch_overhead.source
    )
    assert faked.branch_overhead is not None and faked.branch_overhead.value == pytest.approx(2e-6)
    assert faked.run_overhead is not None and faked.run_overhead.value == pytest.approx(RUN_S)
    assert inputs["passes"] == QUICK.passes and inputs["threads"] == 1


def test_dram_is_the_streamed_bytes_over_the_kernel_time_net_of_the_profiler(faked: Device):
    inputs = faked.memory_bandwidth.inputs
    # the operand the quick suite sizes from the last level, and the 1 x K vector and 1 x N result beside it
    nbytes = QUICK.dram_bytes(calibrate.cache_levels())
    assert nbytes < inputs["bytes"] < 1.01 * nbytes
    assert (inputs["kernel_s"], inputs["profiler_s"]) == (pytest.approx(DRAM_S), pytest.approx(PROFILER_S))
    assert faked.memory_bandwidth.value == pytest.approx(inputs["bytes"] / (DRAM_S - PROFILER_S))
    assert faked.calibration is not None and faked.calibration.profiler_overhead == pytest.approx(PROFILER_S)


def test_the_conv_weight_wait_is_the_cold_runs_extra_time_less_its_output_over_its_weights(faked: Device):
    # The quick suite's pair: a 160 -> 960 1x1 on 7x7: 4 * (160 * 960 + 960) B of weights and bias, a
    # 4 * 960 * 49 B output. The cold run takes COLD_S - WARM_S = 100 us longer (the profiler's cost cancels);
    # the output's write-allocate reads its bytes at DRAM's rate first.
    wait = faked.conv_weight_wait
    assert wait is not None
    weights, output, dram = 4 * (160 * 960 + 960), 4 * 960 * 49, faked.memory_bandwidth.value
    share = ((COLD_S - WARM_S) - output / dram) * dram / weights
    assert wait.points == ((weights, pytest.approx(share, rel=5e-3)),)  # 3 figures kept


def test_the_reference_time_is_the_fast_estimate_of_its_runs(faked: Device):
    assert faked.calibration is not None
    assert faked.calibration.reference_time_s == pytest.approx(REFERENCE_NODE_S * len(reference_model().graph.node))


def test_a_class_the_fake_timings_leave_unread_is_named_in_the_warnings(faked: Device):
    # The Clip twin of every epilogue pair takes no longer than its Relu twin: no epilogue sample, no ceiling. Every
    # other class the quick suite measures has its samples: each fake kernel outlasts the profiler's cost per node
    # and MIN_PROFILED_S, each chain's node the executor's.
    assert faked.calibration is not None
    assert sorted(QUICK.measures - set(faked.ceilings)) == ["epilogue"]
    named = [w for w in faked.calibration.warnings if w.startswith("no ceiling read for ")]
    assert len(named) == 1 and named[0].startswith("no ceiling read for epilogue: ")


def test_the_faked_device_file_round_trips_with_its_inputs(faked: Device, tmp_path: Path):
    path = tmp_path / "faked.toml"
    path.write_text(faked.to_toml(), encoding="utf-8")
    assert load_device(path) == faked
    assert "inputs = { chain_lo = " in faked.to_toml()


def test_a_gqa_decode_step_s_ceiling_is_its_heads_products_over_its_kernel_time(faked: Device):
    # The quick suite's decode step, 8 heads over 2 key/value heads of 64 and one token over 256 rows: 2 * 2*8*257*64
    # FLOPs of products, 6 per score of 8 x 257 and 3 per rotated element of 10 heads of 64: 540,592, 67,574 a head.
    # Its heads share their caches: a compute point, its arithmetic at the fp32 peak over its kernel's time (the
    # fake kernel less the profiler's cost).
    flops = 2 * 2 * 8 * 257 * 64 + 6 * 8 * 257 + 3 * 10 * 64
    assert flops == 540_592
    peak = faked.peak_flops["fp32"].value
    decode = faked.ceilings["attention_decode"]
    assert decode.compute == ((float(f"{flops / 8:.4g}"), float(f"{flops / peak / (KERNEL_S - PROFILER_S):.4g}")),)
    # The prefill of 32 tokens over no past: 2 * 2*8*32*32*64 + 6 * 8*32*32 + 3 * 10*32*64 = 2,208,768 FLOPs.
    flops = 2 * 2 * 8 * 32 * 32 * 64 + 6 * 8 * 32 * 32 + 3 * 10 * 32 * 64
    prefill = faked.ceilings["attention"]
    assert prefill.compute == ((float(f"{flops / 8:.4g}"), float(f"{flops / peak / (KERNEL_S - PROFILER_S):.4g}")),)
    # Every MatMulNBits class the quick suite times has its ceiling.
    assert {"gemv_nbits", "gemm_nbits", "gemv_nbits_int8", "gemm_nbits_int8"} <= set(faked.ceilings)
