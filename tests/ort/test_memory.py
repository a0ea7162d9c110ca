"""Peak memory of a model run in a fresh process: the figures against buffers of known sizes, errors, clean exits,
and the measure command's --memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import UserError
from onnxroof.ort.memory import PeakMemory, max_rss, measure_peak_memory, read_status
from onnxroof.report.memory import memory_table

MIB = 2**20
OUTPUT = 64 * MIB  # the MatMul model's output: 4096 x 4096 float32
WEIGHT = 32 * MIB  # the Add model's weight: 2048 x 4096 float32


def _save(nodes: list, inputs: list, outputs: list, inits: list, path: Path) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


@pytest.fixture
def big_output(tmp_path: Path) -> Path:
    """A MatMul of two small inputs (4096x16 and 16x4096, 256 KiB each) whose output is 64 MiB."""
    return _save(
        [helper.make_node("MatMul", ["a", "b"], ["y"])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [4096, 16]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [16, 4096]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096, 4096])],
        [],
        tmp_path / "matmul.onnx",
    )


@pytest.fixture
def big_weight(tmp_path: Path) -> Path:
    """An Add of a one-element input to a 32 MiB weight (output 32 MiB too)."""
    weight = numpy_helper.from_array(np.ones((2048, 4096), np.float32), "w")
    return _save(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 4096])],
        [weight],
        tmp_path / "add.onnx",
    )


# -------------------------------------------------------------------------------------------------------------
# Reading the resident set


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status is Linux's")
def test_status_reads_the_resident_set_and_its_peak() -> None:
    status = read_status()
    assert status is not None
    rss, hwm = status
    # The peak shown is the larger of the recorded peak and the current set, read together: never below it.
    assert 0 < rss <= hwm
    assert max_rss() > 0


# -------------------------------------------------------------------------------------------------------------
# The figures


def _in_band(figure: int, buffer: int) -> bool:
    """Whether a figure holds a buffer that must be resident at once and not much else.

    The lower bound is the buffer itself less 10%: a buffer written in full is resident in full, and the kernel's
    per-CPU resident-set counters may lag by a few MiB. The upper bound, four times the buffer, leaves room for
    what legitimately comes with it (onnxruntime's thread pool and kernel tables, about 10 MiB; the arena rounding
    a block up to a power of two; a copy of an output on its way to Python) but not for the caller's memory or
    the outputs of several runs kept alive, which are the mistakes a fresh process is there to avoid."""
    return 0.9 * buffer <= figure < 4 * buffer


@pytest.mark.ort
@pytest.mark.parametrize("planner", [True, False], ids=["arena-and-pattern", "neither"])
def test_a_run_needing_a_64_mib_output_peaks_at_about_that(big_output: Path, planner: bool) -> None:
    result = measure_peak_memory(big_output, arena=planner, pattern=planner, runs=2)
    assert isinstance(result, PeakMemory)
    assert (result.arena, result.pattern, result.runs) == (planner, planner, 2)
    # The output is allocated by the run, whichever allocator serves it: the run adds it, and so does the peak.
    assert _in_band(result.run_added_bytes, OUTPUT), result
    assert _in_band(result.peak_added_bytes, OUTPUT), result
    # The session holds no weights: making it costs far less than running it.
    assert result.session_bytes < OUTPUT / 2, result
    # The process's peak is the session's creation's or the runs' on top of what the session holds, whichever is
    # higher.
    assert result.peak_added_bytes == max(result.session_bytes, result.held_bytes + result.run_added_bytes)
    if sys.platform.startswith("linux"):
        assert result.source == "VmHWM"
    assert result.peak_reset or result.notes  # a peak that also covers the session's creation says so


@pytest.mark.ort
def test_the_weights_are_the_sessions(big_weight: Path) -> None:
    result = measure_peak_memory(big_weight)
    # The session holds the 32 MiB weight once made; the run adds the 32 MiB output on top of it.
    assert _in_band(result.session_bytes, WEIGHT), result
    assert _in_band(result.run_added_bytes, WEIGHT), result
    assert result.peak_added_bytes >= 0.9 * (WEIGHT + WEIGHT), result


@pytest.mark.ort
def test_to_dict_has_the_fields_and_the_differences(big_weight: Path) -> None:
    data = measure_peak_memory(big_weight, arena=False, pattern=False, runs=1).to_dict()
    json.dumps(data)
    for key in ("baseline_bytes", "session_rss_bytes", "peak_rss_bytes", "session_bytes", "peak_added_bytes"):
        assert isinstance(data[key], int)
    assert data["run_added_bytes"] == max(data["run_peak_rss_bytes"] - data["held_rss_bytes"], 0)
    assert data["held_bytes"] == data["held_rss_bytes"] - data["baseline_bytes"]
    assert (data["arena"], data["pattern"], data["runs"]) == (False, False, 1)
    assert data["source"] in ("VmHWM", "ru_maxrss")


FOLDED = 40  # weights of 4 MiB each that onnxruntime folds away while making the session
ACTIVATION = 16 * MIB  # each of the two activations that are live at once in that model's run


@pytest.fixture
def freed_at_creation(tmp_path: Path) -> Path:
    """x (1,) -> Expand to 4 Mi floats (16 MiB) -> Neg (16 MiB) -> ReduceSum, plus FOLDED weights of 1024 x 1024
    floats, each reduced to a scalar that onnxruntime's constant folding computes while making the session: their
    160 MiB are allocated and freed then, and the C library keeps them for the next allocations. Neg reads the
    expanded tensor while writing its own: both activations, 32 MiB, are resident at once in the run."""
    nodes = [
        helper.make_node("Expand", ["x", "shape"], ["big"]),
        helper.make_node("Neg", ["big"], ["neg"]),
        helper.make_node("ReduceSum", ["neg"], ["s0"], keepdims=0),
    ]
    inits = [numpy_helper.from_array(np.array([ACTIVATION // 4], np.int64), "shape")]
    for i in range(FOLDED):
        inits.append(numpy_helper.from_array(np.full((1024, 1024), i, np.float32), f"w{i}"))
        nodes.append(helper.make_node("ReduceSum", [f"w{i}"], [f"r{i}"], keepdims=0))
        nodes.append(helper.make_node("Add", [f"s{i}", f"r{i}"], [f"s{i + 1}"]))
    return _save(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(f"s{FOLDED}", TensorProto.FLOAT, [])],
        inits,
        tmp_path / "folded.onnx",
    )


@pytest.mark.ort
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim and VmHWM are glibc's and Linux's")
def test_the_runs_add_their_activations_though_the_session_freed_more(freed_at_creation: Path) -> None:
    # Without the freed memory returned to the OS before the peak is reset, the run's 32 MiB fit in the 160 MiB the
    # session's creation freed: the resident set does not grow, and the runs seemed to add nothing.
    result = measure_peak_memory(freed_at_creation, runs=2)
    assert result.run_added_bytes >= 0.9 * 2 * ACTIVATION, result
    # What the session holds is far less than what making it took: the folded weights are gone.
    assert result.held_bytes < result.session_bytes - FOLDED * 4 * MIB / 2, result


# -------------------------------------------------------------------------------------------------------------
# Errors and clean exits


@pytest.mark.ort
def test_the_child_leaves_no_file_behind(big_weight: Path, isolated_dirs: tuple[Path, Path]) -> None:
    work, temp = isolated_dirs
    measure_peak_memory(big_weight, runs=1)
    assert list(temp.iterdir()) == [] and list(work.iterdir()) == []


@pytest.mark.ort
def test_a_failure_in_the_child_is_a_user_error_with_its_last_line(
    tmp_path: Path, isolated_dirs: tuple[Path, Path]
) -> None:
    # A model onnx accepts and onnxroof loads, but onnxruntime cannot: its op is in a domain nobody implements.
    path = _save(
        [helper.make_node("Nothing", ["x"], ["y"], domain="org.nowhere")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [],
        tmp_path / "unknown.onnx",
    )
    with pytest.raises(UserError, match="memory measurement failed: onnxruntime cannot load the model") as info:
        measure_peak_memory(path, runs=1)
    assert "\n" not in str(info.value)
    assert list(isolated_dirs[1].iterdir()) == []


def test_bad_input_is_a_user_error_before_any_process(tmp_path: Path) -> None:
    with pytest.raises(UserError):
        measure_peak_memory(tmp_path / "missing.onnx")
    with pytest.raises(UserError, match="at least one run"):
        measure_peak_memory(tmp_path / "missing.onnx", runs=0)
    with pytest.raises(UserError, match="threads"):
        measure_peak_memory(tmp_path / "missing.onnx", threads=0)


def test_the_table_says_what_the_peak_covers_and_each_note_once() -> None:
    def made(arena: bool, reset: bool) -> PeakMemory:
        return PeakMemory(
            "m.onnx", arena, arena, 1, "all", 3, 100 * MIB, 110 * MIB, 174 * MIB, "VmHWM", reset, ("a note",)
        )

    text = memory_table([made(True, True), made(False, False)])
    assert "10.0 MiB" in text and "64.0 MiB" in text and "74.0 MiB" in text and "174.0 MiB" in text
    assert "VmHWM over the runs alone" in text
    assert "VmHWM over the session's creation and the runs" in text
    assert text.count("a note") == 1


# -------------------------------------------------------------------------------------------------------------
# onnxroof measure --memory

QUICK = ("--repeat", "3", "--warmup", "0")


@pytest.mark.ort
def test_measure_memory_prints_both_configurations(cli, big_weight: Path) -> None:
    done = cli("measure", str(big_weight), "--memory", *QUICK)
    assert done.returncode == 0, done.stderr
    assert "median" in done.stdout  # the timing is still there; the memory table follows it
    assert "arena + pattern (default)" in done.stdout and "no arena, no pattern" in done.stdout
    assert "MiB" in done.stdout


@pytest.mark.ort
def test_measure_memory_json_has_the_memory_object(cli, big_weight: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = cli("measure", str(big_weight), "--memory", *QUICK, "--format", "json", "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert "median_s" in data
    memory = data["memory"]
    assert set(memory) == {"default", "no_arena_no_pattern"}
    assert (memory["default"]["arena"], memory["default"]["pattern"]) == (True, True)
    assert (memory["no_arena_no_pattern"]["arena"], memory["no_arena_no_pattern"]["pattern"]) == (False, False)
    for figures in memory.values():
        assert _in_band(figures["session_bytes"], WEIGHT), figures


@pytest.mark.ort
def test_measure_without_memory_has_no_memory_object(cli, big_weight: Path) -> None:
    done = cli("measure", str(big_weight), *QUICK, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "memory" not in json.loads(done.stdout)


def test_measure_memory_on_a_missing_file_is_one_line(cli, tmp_path: Path) -> None:
    done = cli("measure", str(tmp_path / "missing.onnx"), "--memory")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
