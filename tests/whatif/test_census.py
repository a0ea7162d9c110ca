"""census: a row per model x device x batch x precision with closed-form numbers, failures as error rows, tasks
planned per model and batch, resumed per row, and the same rows from a process pool as in-process."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from onnxroof.api import get_device
from onnxroof.whatif.census import (
    FIELDS,
    Task,
    census,
    ordered,
    plan,
    planned_keys,
    resume,
    row_key,
    run_task,
    timed_task,
)
from onnxroof.whatif.executors import Done, InProcess, ProcessPool, local_executor
from tests.helpers import matmul_model, tiny_model

V100 = get_device("v100-sxm2")
NO_CAPACITY = get_device("colab-xeon-1core")  # the catalog device that lists no memory capacity


class Recording:
    """An executor that runs in-process and records every task it is given."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def run(self, fn: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Done[Any, Any]]:
        self.tasks += tasks
        yield from InProcess().run(fn, tasks)


def rows_of(tasks: list[Task], executor: Any = None) -> list[dict[str, Any]]:
    return [row for rows in census(tasks, executor or InProcess()) for row in rows]


def test_a_row_per_model_device_batch_and_precision(tmp_path: Path) -> None:
    models = [matmul_model(tmp_path / "a.onnx"), matmul_model(tmp_path / "b.onnx")]
    tasks = plan(models, [V100, NO_CAPACITY], [1, 4], ["fp32", "fp16"])
    assert len(tasks) == 2 * 2  # one task per model and batch
    rows = rows_of(tasks)
    assert len(rows) == 2 * 2 * 2 * 2
    assert {row_key(r) for r in rows} == {
        (m, d, "roofline", b, p) for m in models for d in ("v100-sxm2", "colab-xeon-1core") for b in (1, 4)
        for p in ("fp32", "fp16")
    }  # fmt: skip
    assert all(set(r) == set(FIELDS) and r["error"] is None for r in rows)


def test_the_numbers_are_the_matmuls(tmp_path: Path) -> None:
    (row,) = rows_of(plan([matmul_model(tmp_path / "mm.onnx")], [V100], [4]))
    # [4, 64] x [64, 32]: MACs = 4*64*32 = 8192, FLOPs = 2*MACs = 16384; params = 64*32 = 2048
    assert (row["macs"], row["flops"], row["params"], row["analyzed_batch"]) == (8192, 16384, 2048, 4)
    # bytes: x 4*64*4 = 1024 read, W 64*32*4 = 8192 read, y 4*32*4 = 512 written
    assert row["bytes_moved"] == 1024 + 8192 + 512
    assert row["intensity"] == pytest.approx(16384 / 9728)
    # memory: the weight 8192 + x and y, both live at the one step, 1024 + 512
    assert row["peak_memory_bytes"] == 8192 + 1024 + 512
    # paper 004's footprint: weights + inputs + every tensor a node writes, none reused: 8192 + 1024 + 512
    assert row["footprint_bytes"] == 8192 + 1024 + 512
    assert row["memory_capacity_bytes"] == V100.memory_capacity.value and row["fits"] is True
    assert row["throughput_per_s"] == pytest.approx(4 / row["predicted_time_s"])
    assert (row["precision"], row["batch"], row["uncounted"]) == ("stored", 4, 0)


def test_the_footprint_counts_every_tensor_and_the_peak_only_those_live(tmp_path: Path) -> None:
    path = tmp_path / "chain.onnx"
    onnx.save(tiny_model((4, 8)), str(path))  # y = Relu(x + b): x, s and y of 4*8 floats (128 B), b of 8 (32 B)
    (row,) = rows_of(plan([str(path)], [V100], []))
    assert row["footprint_bytes"] == 32 + 128 + 128 + 128  # b + x + s + y, paper 004's sum
    assert row["peak_memory_bytes"] == 32 + 128 + 128  # b + the two tensors live at either node


def test_fp16_halves_the_bytes_and_a_device_without_capacity_leaves_fits_empty(tmp_path: Path) -> None:
    fp32, fp16 = rows_of(plan([matmul_model(tmp_path / "mm.onnx")], [NO_CAPACITY], [], ["fp32", "fp16"]))
    assert fp16["bytes_moved"] == fp32["bytes_moved"] / 2 == (256 + 8192 + 128) / 2  # every tensor is float
    assert fp32["batch"] is None and fp32["analyzed_batch"] == 1  # the model's own batch
    assert fp32["fits"] is None and fp32["memory_capacity_bytes"] is None


def test_a_failing_model_is_an_error_row_and_the_census_goes_on(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\x01 not a model")
    good = matmul_model(tmp_path / "good.onnx")
    contradicting = matmul_model(tmp_path / "bad.onnx", inner=63)
    rows = rows_of(plan([str(garbage), contradicting, good], [V100, NO_CAPACITY]))
    errors = {r["model"]: r["error"] for r in rows if r["error"]}
    assert set(errors) == {str(garbage), contradicting}
    assert "is not a readable ONNX model" in errors[str(garbage)]
    assert "inner dims 64 and 63 differ" in errors[contradicting]
    assert all("\n" not in e for e in errors.values())
    assert [r["flops"] for r in rows if r["model"] == good] == [4096, 4096]  # 2*1*64*32 on each device
    failed = [r for r in rows if r["error"]]
    assert all(r["flops"] is None and r["device"] for r in failed) and len(failed) == 4


def test_a_batch_the_model_cannot_take_fails_that_batch_only(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "scalar",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    path = tmp_path / "scalar.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    refused, own = rows_of(plan([str(path)], [V100], [2, None]))
    assert "no batch dim" in refused["error"] and own["error"] is None and own["flops"] == 1  # one Relu element


def test_resume_plans_only_the_rows_the_file_lacks(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    first = rows_of(plan([model], [V100], [1, 2]))
    first[1]["error"] = "the machine ran out of memory"  # a failed row is tried again
    planned = planned_keys([model], [V100, NO_CAPACITY], [1, 2], [])
    kept, done = resume(first, set(planned))
    assert done == {row_key(first[0])} and kept == [first[0]]
    recording = Recording()
    new = rows_of(plan([model], [V100, NO_CAPACITY], [1, 2], [], done), recording)
    asked = [key for task in recording.tasks for key in task.row_keys()]
    assert sorted(asked, key=str) == sorted(set(planned) - done, key=str)
    assert [row_key(r) for r in ordered(kept + new, planned)] == planned


def test_a_task_with_nothing_left_is_not_made(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "mm.onnx")
    assert plan([model], [V100], [1], [], set(planned_keys([model], [V100], [1], []))) == []


def test_rows_of_other_keys_stay_after_the_planned_ones() -> None:
    other = {"model": "old.onnx", "device": "t4", "engine": "roofline", "batch": None, "precision": "stored"}
    mine = {"model": "m.onnx", "device": "t4", "engine": "roofline", "batch": None, "precision": "stored"}
    assert ordered([other, mine], [row_key(mine)]) == [mine, other]


def test_a_process_pool_gives_the_rows_of_the_process(tmp_path: Path) -> None:
    models = [matmul_model(tmp_path / f"m{i}.onnx") for i in range(3)]
    tasks = plan(models, [V100, NO_CAPACITY], [1, 2], ["fp16"])
    planned = planned_keys(models, [V100, NO_CAPACITY], [1, 2], ["fp16"])
    pooled = ordered(rows_of(tasks, ProcessPool(2)), planned)
    assert pooled == ordered(rows_of(tasks), planned)


def test_a_timed_task_gives_the_task_s_rows_and_the_seconds_it_took(tmp_path: Path) -> None:
    task = plan([matmul_model(tmp_path / "mm.onnx")], [V100, NO_CAPACITY], [1, 2])[0]
    rows, seconds = timed_task(task)
    assert rows == run_task(task) and seconds > 0


def test_local_executor_runs_in_process_for_one_job_and_refuses_none() -> None:
    assert isinstance(local_executor(1), InProcess) and isinstance(local_executor(3), ProcessPool)
    from onnxroof.errors import UserError

    with pytest.raises(UserError, match="--jobs 0"):
        local_executor(0)


def test_a_task_that_raises_becomes_error_rows(tmp_path: Path) -> None:
    task = plan([matmul_model(tmp_path / "mm.onnx")], [V100, NO_CAPACITY])[0]

    class Failing:
        def run(self, fn: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Done[Any, Any]]:
            yield from (Done(t, None, RuntimeError("worker died\nmore")) for t in tasks)

    rows = rows_of([task], Failing())
    assert [r["error"] for r in rows] == ["RuntimeError: worker died"] * 2


def test_a_row_is_the_sweeps_prediction_with_the_fits_memory() -> None:
    from onnxroof.whatif.fit import fit
    from onnxroof.whatif.sweep import sweep

    (row,) = rows_of(plan(["zoo:unet?size=32"], [V100], [2], ["fp16"]))
    (swept,) = sweep("zoo:unet?size=32", ["v100-sxm2"], batches=[2], precisions=["fp16"]).rows
    fitted = fit("zoo:unet?size=32", "v100-sxm2", batch=2, precision="fp16")
    assert (row["flops"], row["bytes_moved"], row["predicted_time_s"], row["bound"]) == (
        swept.flops,
        swept.bytes_moved,
        swept.predicted_time_s,
        swept.bound,
    )
    assert (row["peak_memory_bytes"], row["fits"]) == (fitted.memory_bytes, fitted.passed)
