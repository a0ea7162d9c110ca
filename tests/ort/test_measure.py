"""Whole-model timing: statistics, providers, inputs, absent weights, timeouts, busy-machine checks, clean exits."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import UserError
from onnxroof.ort import measure as measure_module
from onnxroof.ort.measure import (
    MIN_SAMPLE_S,
    SPREAD_BOUND,
    checked_run,
    fast_estimate,
    load_warnings,
    materialize_weight_fills,
    measure,
    runs_per_sample,
    spread_warning,
    summarize,
)
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.ort.sessions import random_feeds, runnable_model
from tests.helpers import IR_VERSION, LIGHT_DIR, cuda_works, tiny_model

FAST = {"warmup": 1, "repeat": 3}


# -------------------------------------------------------------------------------------------------------------
# Pure pieces


def test_summarize_by_hand() -> None:
    # Sorted: 1, 2, 2.5, 3, 10. The 90th percentile sits at rank 0.9 * 4 = 3.6, between 3 and 10:
    # 3 + 0.6 * (10 - 3) = 7.2 (linear interpolation, numpy's default).
    median, low, high, p90 = summarize([3.0, 1.0, 2.0, 10.0, 2.5])
    assert (low, median, high) == (1.0, 2.5, 10.0)
    assert p90 == pytest.approx(7.2)


def test_runs_per_sample_reaches_the_minimum_batch_time() -> None:
    assert runs_per_sample(1.0) == 1
    assert runs_per_sample(MIN_SAMPLE_S * 2) == 1
    k = runs_per_sample(1e-5)
    assert k * 1e-5 >= MIN_SAMPLE_S and (k - 1) * 1e-5 < MIN_SAMPLE_S
    # A run too fast for the clock to resolve is batched at least as much as a microsecond-long one.
    assert runs_per_sample(0.0) >= runs_per_sample(1e-6) > 1


def test_spread_warning_only_beyond_the_bound() -> None:
    assert spread_warning([1.0, 1.01, 1.02, 0.99, 1.0]) is None
    message = spread_warning([1.0, 1.0, 1.0, 1.0, 2.0 + SPREAD_BOUND * 4])
    assert message is not None and "spread" in message


def test_fast_estimate_is_the_mean_of_the_fastest_eighth() -> None:
    # 16 samples: the fastest eighth is the 2 smallest, 1.0 and 2.0, whose mean is 1.5.
    samples = [float(v) for v in range(16, 0, -1)]
    assert fast_estimate(samples) == 1.5
    # Fewer than 8 samples: the single fastest one.
    assert fast_estimate([3.0, 2.0, 5.0]) == 2.0
    # Noise only adds time: inflating the slow half does not move the estimate.
    assert fast_estimate([100.0] * 8 + samples[8:]) == 1.5
    with pytest.raises(ValueError):
        fast_estimate([])


def test_time_runs_sizes_the_batch_on_the_warm_runs_and_divides_each_sample_by_it() -> None:
    """A fake clock and known run times. Warm-up runs take 1, 2 and 2.5 ms. A first run pays for allocations and
    lazy initialization, so it is left out (here it is the fastest, which shows it is): the batch is sized on the
    fastest later one, 2 ms. Each sample's runs all take one time, so the sample is that time whatever the batch
    (a batch total not divided by the batch would read batch times larger)."""
    batch = math.ceil(MIN_SAMPLE_S / 0.002)
    assert batch > 1
    per_sample = [0.003, 0.001, 0.002, 0.010]
    durations = iter([0.001, 0.002, 0.0025] + [t for t in per_sample for _ in range(batch)])
    now = [0.0]

    def run_once() -> None:
        now[0] += next(durations)

    timing = measure_module.time_runs(
        run_once, warmup=3, repeat=4, batch=None, timeout_s=60, progress=None, clock=lambda: now[0]
    )
    assert (timing.warmup, timing.runs_per_sample) == (3, batch)
    assert timing.samples == pytest.approx(per_sample)
    assert next(durations, None) is None  # every run accounted for: 3 warm-up runs, 4 batches
    # Sorted 1, 2, 3, 10 ms: median (2 + 3) / 2 = 2.5 ms; p90 at rank 2.7: 3 + 0.7 * (10 - 3) = 7.9 ms; four
    # samples have a fastest eighth of one sample, the fastest.
    median, low, high, p90 = summarize(timing.samples)
    assert (median, low, high, p90) == pytest.approx((0.0025, 0.001, 0.010, 0.0079))
    assert fast_estimate(timing.samples) == pytest.approx(0.001)


def test_time_runs_spreads_samples_over_the_window_and_rewarms_after_each_idle_gap() -> None:
    """A fake clock: each run takes 0.1 s; 4 samples spread over 8 s are due at 0, 2, 4 and 6 s. After each sleep
    one untimed run warms the model again (caches and clocks went cold while idle), then the timed one follows."""
    now, starts = [0.0], []

    def run_once() -> None:
        starts.append(now[0])
        now[0] += 0.1

    def sleep(seconds: float) -> None:
        now[0] += seconds

    timing = measure_module.time_runs(
        run_once,
        warmup=0,
        repeat=4,
        batch=1,
        timeout_s=60,
        progress=None,
        spread_s=8.0,
        clock=lambda: now[0],
        sleep=sleep,
    )
    # Runs: timed at 0; slept to 2.0, warm at 2.0, timed at 2.1; slept to 4.0 (from 2.2), warm, timed at 4.1; ...
    assert starts == pytest.approx([0.0, 2.0, 2.1, 4.0, 4.1, 6.0, 6.1])
    assert timing.samples == pytest.approx([0.1] * 4)
    # Idle time: the sleeps 0.1 -> 2.0, 2.2 -> 4.0 and 4.2 -> 6.0.
    assert timing.idle_s == pytest.approx(1.9 + 1.8 + 1.8)


def test_time_runs_calls_between_after_every_sample_outside_its_timing() -> None:
    """A fake clock: each run takes 0.1 s and ``between`` (a reference kernel) 1 s. It runs once after each of the
    3 samples, and its second does not count in the sample it follows."""
    now, calls = [0.0], []

    def run_once() -> None:
        now[0] += 0.1

    def between() -> None:
        calls.append(now[0])
        now[0] += 1.0

    timing = measure_module.time_runs(
        run_once, warmup=0, repeat=3, batch=1, timeout_s=60, progress=None, clock=lambda: now[0], between=between
    )
    assert timing.samples == pytest.approx([0.1] * 3)
    assert calls == pytest.approx([0.1, 1.2, 2.3])


def test_load_warnings_do_not_count_deliberate_idling() -> None:
    # 0.5 s of CPU in a 10 s window, 9.5 s of it idle between spread samples: the run had its core throughout.
    assert (
        load_warnings(wall_s=10.0, own_cpu_s=0.5, machine_busy_s=0.5, cpus=4, threads=1, on_cpu=True, idle_s=9.5) == []
    )
    starved = load_warnings(wall_s=10.0, own_cpu_s=0.2, machine_busy_s=None, cpus=4, threads=1, on_cpu=True, idle_s=9.5)
    assert any("ran only 40%" in m for m in starved)


def test_load_warnings() -> None:
    quiet = load_warnings(wall_s=1.0, own_cpu_s=0.99, machine_busy_s=1.05, cpus=4, threads=1, on_cpu=True)
    assert quiet == []
    others = load_warnings(wall_s=1.0, own_cpu_s=1.0, machine_busy_s=3.5, cpus=4, threads=1, on_cpu=True)
    assert any("other processes" in m for m in others)
    starved = load_warnings(wall_s=1.0, own_cpu_s=0.5, machine_busy_s=None, cpus=4, threads=1, on_cpu=True)
    assert any("ran only" in m for m in starved)
    # A GPU run waits on the device: its low CPU share is no sign of load.
    assert load_warnings(wall_s=1.0, own_cpu_s=0.1, machine_busy_s=0.1, cpus=4, threads=1, on_cpu=False) == []
    # Too short a window to tell anything.
    assert load_warnings(wall_s=0.01, own_cpu_s=0.0, machine_busy_s=0.04, cpus=4, threads=1, on_cpu=True) == []


def test_materialize_weight_fills() -> None:
    shape = numpy_helper.from_array(np.array([2, 3], np.int64), "w_shape")
    fill = numpy_helper.from_array(np.array([0.5], np.float32))
    nodes = [
        helper.make_node("ConstantOfShape", ["w_shape"], ["w"], value=fill),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    assert materialize_weight_fills(model) == 1
    assert [n.op_type for n in model.graph.node] == ["MatMul"]
    w = next(t for t in model.graph.initializer if t.name == "w")
    np.testing.assert_array_equal(numpy_helper.to_array(w), np.full((2, 3), 0.5, np.float32))
    assert materialize_weight_fills(model) == 0


def test_time_runs_stops_at_the_timeout() -> None:
    """A fake clock: each run takes 1 s. With a 5.5 s timeout the warm-up run ends at 1 s and one-run samples
    end at 2, 3, 4, 5 and 6 s; the sample that would start at 6 s is past the deadline, so five are taken."""
    now = [0.0]

    def clock() -> float:
        return now[0]

    def run_once() -> None:
        now[0] += 1.0

    timing = measure_module.time_runs(
        run_once, warmup=1, repeat=50, batch=None, timeout_s=5.5, progress=None, clock=clock
    )
    assert len(timing.samples) == 5
    assert any("timeout" in w for w in timing.warnings)

    now[0] = 0.0
    with pytest.raises(UserError, match="samples fit") as info:
        measure_module.time_runs(run_once, warmup=3, repeat=50, batch=None, timeout_s=3.5, progress=None, clock=clock)
    assert "--timeout" in (info.value.hint or "")


def test_bad_settings_are_user_errors() -> None:
    """The timing's own settings; the session's are refused by its spec (test_specs.py)."""
    for kwargs in (
        {"repeat": 2},
        {"warmup": -1},
        {"batch": 0},
        {"timeout_s": 0},
        {"spread_s": -1},
        {"spread_s": 10, "timeout_s": 5},
    ):
        with pytest.raises(UserError):
            measure(tiny_model(), **kwargs)


# -------------------------------------------------------------------------------------------------------------
# Measuring real sessions


@pytest.mark.ort
def test_measurement_statistics_and_provider() -> None:
    result = measure(tiny_model(), warmup=2, repeat=5)
    assert result.fast_s == result.min_s  # 5 samples: the fastest eighth is the fastest one
    assert len(result.samples_s) == result.repeat == 5
    # The statistics are those of the samples it reports.
    assert (result.median_s, result.min_s, result.max_s, result.p90_s) == summarize(result.samples_s)
    assert result.provider == result.requested_provider == "CPUExecutionProvider"
    assert (result.threads, result.opt_level, result.warmup) == (1, "all", 2)
    # A model that runs in microseconds is timed in batches.
    assert result.runs_per_sample > 1
    data = result.to_dict()
    assert set(data) == {
        "model",
        "provider",
        "requested_provider",
        "threads",
        "opt_level",
        "warmup",
        "repeat",
        "runs_per_sample",
        "median_s",
        "min_s",
        "max_s",
        "p90_s",
        "fast_s",
        "samples_s",
        "notes",
        "warnings",
    }
    json.dumps(data)


@pytest.mark.ort
def test_fixed_batch_and_progress() -> None:
    calls: list[tuple[int, int]] = []
    result = measure(tiny_model(), warmup=0, repeat=4, batch=3, progress=lambda d, t: calls.append((d, t)))
    assert result.runs_per_sample == 3
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


@pytest.mark.ort
def test_cuda_without_a_gpu() -> None:
    if cuda_works():
        pytest.skip("a GPU is available here")
    with pytest.raises(UserError, match="CUDAExecutionProvider"):
        measure(tiny_model(), SessionSpec("cuda"), **FAST)
    result = measure(tiny_model(), SessionSpec("cuda", allow_fallback=True), **FAST)
    assert result.requested_provider == "CUDAExecutionProvider"
    assert result.provider == "CPUExecutionProvider"
    assert any("ran on CPUExecutionProvider" in w for w in result.warnings)


@pytest.mark.ort
def test_absent_external_weights_are_noted(tmp_path: Path) -> None:
    model = tiny_model()
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="w.bin", size_threshold=0)
    (tmp_path / "w.bin").unlink()
    result = measure(tmp_path / "m.onnx", **FAST)
    # The model's one initializer (b) was in the deleted file.
    assert len(model.graph.initializer) == 1
    assert "weights absent: 1 initializer(s) filled with random values of the right shapes" in result.notes


@pytest.mark.ort
def test_npz_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fed: list[Mapping[str, Any]] = []
    real = measure_module.checked_run

    def recording(session: Any, feeds: Mapping[str, Any]) -> Callable[[], None]:
        fed.append(feeds)
        return real(session, feeds)

    monkeypatch.setattr(measure_module, "checked_run", recording)
    good = tmp_path / "good.npz"
    np.savez(good, x=np.full((4, 8), 3.0, np.float32))
    measure(tiny_model(), feeds_path=good, **FAST)
    measure(tiny_model(), **FAST)
    # The session runs on the file's arrays; without a file, on random ones.
    np.testing.assert_array_equal(fed[0]["x"], np.full((4, 8), 3.0, np.float32))
    assert not np.array_equal(fed[1]["x"], fed[0]["x"])
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.ones((2, 8), np.float32))
    with pytest.raises(UserError, match="shape"):
        measure(tiny_model(), feeds_path=bad, **FAST)


@pytest.mark.ort
def test_a_run_longer_than_the_timeout() -> None:
    with pytest.raises(UserError, match="timeout") as info:
        measure(tiny_model((64, 256)), timeout_s=1e-9, **FAST)
    assert "--timeout" in (info.value.hint or "")


@pytest.mark.ort
def test_interrupt_leaves_no_files(tmp_path: Path, isolated_dirs: tuple[Path, Path]) -> None:
    work, temp = isolated_dirs
    model_path = tmp_path / "m.onnx"
    onnx.save(tiny_model(), model_path)

    def interrupt(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        measure(model_path, warmup=1, repeat=10, progress=interrupt)
    assert os.listdir(work) == [] and os.listdir(temp) == []


@pytest.mark.ort
@pytest.mark.skipif(not (LIGHT_DIR / "light_squeezenet.onnx").exists(), reason="onnx's light models are not installed")
@pytest.mark.parametrize("opt_level", ["all", "disable"])
def test_light_model(opt_level: str) -> None:
    """IR 3, initializers listed among the inputs, weights as ConstantOfShape: only the image is fed."""
    path = LIGHT_DIR / "light_squeezenet.onnx"
    graph = onnx.load(path).graph
    inits = {t.name for t in graph.initializer}
    fills = sum(1 for n in graph.node if n.op_type == "ConstantOfShape" and n.input and n.input[0] in inits)
    assert fills > 0
    result = measure(path, SessionSpec(opt_level=opt_level), **FAST)
    stored = [n for n in result.notes if "ConstantOfShape" in n]
    # At "disable" onnxruntime would refill the weights on every run: every one is stored as an initializer first.
    expected = [f"opt level disable: {fills} ConstantOfShape weight(s) stored as initializers"]
    assert [n[: len(expected[0])] for n in stored] == (expected if opt_level == "disable" else [])


@pytest.mark.ort
@pytest.mark.skipif(not (LIGHT_DIR / "light_squeezenet.onnx").exists(), reason="onnx's light models are not installed")
def test_a_loaded_runnable_model_is_measured_without_being_changed():
    """validate and measure --per-node load a model once and share it: measuring, at any level, leaves it as is."""
    from onnxroof.ort.sessions import runnable_model

    runnable = runnable_model(LIGHT_DIR / "light_squeezenet.onnx")  # ConstantOfShape weights: "disable" rewrites them
    before = runnable.model.SerializeToString()
    result = measure(runnable, SessionSpec(opt_level="disable"), warmup=0, repeat=3, batch=1)
    assert result.model == runnable.name and result.repeat == 3
    assert runnable.model.SerializeToString() == before


def _cast_model(elem_type: int) -> onnx.ModelProto:
    """y = Cast(x, float) for an input x of the given element type."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        "cast",
        [helper.make_tensor_value_info("x", elem_type, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.ort
def test_bfloat16_and_float8_inputs_are_fed_as_their_bits() -> None:
    # numpy has no bfloat16 or float8: onnxruntime rejects onnx's ml_dtypes arrays and takes an OrtValue instead
    for elem_type, name in ((TensorProto.BFLOAT16, "bfloat16"), (TensorProto.FLOAT8E4M3FN, "float8e4m3fn")):
        feed = random_feeds(runnable_model(_cast_model(elem_type)))["x"]
        assert (feed.data_type(), feed.shape()) == (f"tensor({name})", [2, 3])
        result = measure(_cast_model(elem_type), **FAST)
        assert len(result.samples_s) == result.repeat == FAST["repeat"]


def test_inputs_onnxroof_cannot_make_are_user_errors() -> None:
    with pytest.raises(UserError, match="'x' is int4, a packed sub-byte type"):
        measure(_cast_model(TensorProto.INT4), **FAST)
    sequence = helper.make_graph(
        [helper.make_node("SequenceLength", ["s"], ["n"])],
        "seq",
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
    )
    model = helper.make_model(sequence, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    with pytest.raises(UserError, match="'s' is a sequence, not a tensor"):
        measure(model, **FAST)


@pytest.mark.ort
def test_scalar_inputs_and_outputs_numpy_cannot_hold() -> None:
    # a scalar input is fed as a 0-d array (numpy arithmetic on one gives a bare scalar, which onnxruntime rejects)
    scalar = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "scalar",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    model = helper.make_model(scalar, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    feed = random_feeds(runnable_model(model))["x"]
    assert isinstance(feed, np.ndarray) and feed.shape == () and feed.dtype == np.float32
    assert len(measure(model, **FAST).samples_s) == FAST["repeat"]
    # a bfloat16 output: session.run cannot return it as an array, so the run keeps it as an OrtValue
    to_bf16 = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)],
        "to_bf16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 3])],
    )
    model = helper.make_model(to_bf16, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    assert len(measure(model, **FAST).samples_s) == FAST["repeat"]


def test_a_run_keeps_outputs_numpy_lacks_as_ort_values() -> None:
    """``checked_run`` calls ``run`` unless an output's type has no numpy dtype, then ``run_with_ort_values``."""

    class Session:
        def __init__(self, output_type: str) -> None:
            self.output_type, self.calls = output_type, []

        def get_outputs(self) -> list[SimpleNamespace]:
            return [SimpleNamespace(name="y", type=self.output_type)]

        def run(self, names: Any, feeds: Any) -> None:
            self.calls.append(("run", names))

        def run_with_ort_values(self, names: Any, feeds: Any) -> None:
            self.calls.append(("run_with_ort_values", names))

    feeds = {"x": np.ones((2, 3), np.float32)}
    for output_type, expected in (
        ("tensor(float)", ("run", None)),
        ("tensor(bfloat16)", ("run_with_ort_values", ["y"])),
        ("tensor(float8e4m3fn)", ("run_with_ort_values", ["y"])),
        ("tensor(int4)", ("run_with_ort_values", ["y"])),
    ):
        session = Session(output_type)
        checked_run(session, feeds)()
        assert session.calls == [expected], output_type


def test_parked_sessions_stop_spinning_when_a_run_returns_and_others_keep_onnxruntimes_default() -> None:
    from onnxroof.ort.sessions import session_options

    two = SessionSpec(threads=2)
    assert session_options(two, park_when_idle=True).get_session_config_entry("session.force_spinning_stop") == "1"
    with pytest.raises(RuntimeError):  # absent: onnxruntime's default, pools that keep polling between runs
        session_options(two).get_session_config_entry("session.force_spinning_stop")


@pytest.mark.ort
def test_idle_parked_sessions_take_no_cpu_time() -> None:
    """The calibration keeps dozens of sessions alive; an idle pool that kept polling for work would take cores
    from the one being timed. Parked, ten idle 2-thread sessions use (next to) no CPU time in half a second."""
    import time

    from onnxroof.ort.reference import REFERENCE_INPUT, reference_model
    from onnxroof.ort.sessions import make_session

    feeds = {"x": np.ones(REFERENCE_INPUT, dtype=np.float32)}
    sessions = [make_session(reference_model(), SessionSpec(threads=2), park_when_idle=True)[0] for _ in range(10)]
    for session in sessions:
        session.run(None, feeds)
    start = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - start < 0.05


def _relu_chain(length: int) -> onnx.ModelProto:
    """``length`` Relus one after the other over a million floats."""
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(length)]
    graph = helper.make_graph(
        nodes,
        f"relu{length}",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1000, 1000])],
        [helper.make_tensor_value_info(f"t{length}", TensorProto.FLOAT, [1000, 1000])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


@pytest.mark.ort
def test_eight_times_the_work_measures_several_times_longer_per_run() -> None:
    """Samples are per-run times, not batch totals: each batch lasts about MIN_SAMPLE_S whatever the model, so
    totals would read alike (a ratio near 1). Both models run at 1 thread with nothing folded or fused; per-run
    times give a ratio near 8 less what one run's fixed costs share, and a bound of 2 keeps a busy moment that
    slows the short chain's few samples from failing a test of what a sample is."""
    unoptimized = SessionSpec(opt_level="disable")
    one = measure(_relu_chain(1), unoptimized, warmup=2, repeat=5)
    eight = measure(_relu_chain(8), unoptimized, warmup=2, repeat=5)
    assert eight.fast_s / one.fast_s > 2


@pytest.mark.ort
def test_a_model_too_large_to_serialize_runs_from_a_file_with_external_weights(monkeypatch):
    # protobuf refuses messages of 2 GiB; the limit lowered to 1 byte sends this small model down the same path
    from onnxroof.ort import sessions
    from onnxroof.ort.sessions import make_session

    monkeypatch.setattr(sessions, "PROTO_LIMIT", 1)
    model = tiny_model((2, 3))
    made, _ = make_session(model)
    (y,) = made.run(None, {"x": np.full((2, 3), -0.5, np.float32)})
    assert np.allclose(y, 0.5)  # Relu(-0.5 + 1)
    assert all(init.data_location == TensorProto.DEFAULT for init in model.graph.initializer)  # the caller's as it was
