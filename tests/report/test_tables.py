"""The terminal tables: as wide as their width (whole when piped), names whole or cut in the middle, a shape column,
numbers in engineering units, the headline's terms labelled, one error in validate's headline with counts that
agree, and totals that leave nodes out marked wherever they are shown."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.ort.agreement import agreement
from onnxroof.ort.measure import Measurement
from onnxroof.ort.profile import NodeProfile
from onnxroof.ort.validate import KernelComparison, Validation, scored
from onnxroof.report.analysis import render
from onnxroof.report.calibration import calibration_table
from onnxroof.report.compare import render_compare
from onnxroof.report.fit import render_ranking, summary
from onnxroof.report.format import ELLIPSIS, seconds
from onnxroof.report.sweep import render_sweep
from onnxroof.report.validation import validation_table
from onnxroof.whatif.compare import Comparison, DeviceSpeedup, Side
from onnxroof.whatif.fit import Check, DeviceFit, Fit, MaxBatch
from onnxroof.whatif.sweep import Sweep, SweepRow
from tests.conftest import ROOT
from tests.helpers import calibrated_host

CONV1, CONV2 = "/encoder/layer1/layer1.0/conv1/Conv", "/encoder/layer1/layer1.0/conv2/Conv"


def legacy_names() -> onnx.ModelProto:
    """Two 3x3 convolutions on [1, 3, 8, 8] named as a legacy torch export names them, alike but for one digit."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name=CONV1, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r"], name="/encoder/layer1/layer1.0/relu/Relu"),
        helper.make_node("Conv", ["r", "w2"], ["y"], name=CONV2, pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "legacy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def node_rows(text: str) -> dict[str, str]:
    """The table's rows by the op of their node (the Convs by index: 0 and 2)."""
    table = text.split("graph order\n")[1].split("\n\n")[0].splitlines()[1:]
    return {line.split()[0]: line for line in table}


def test_a_wide_terminal_shows_names_whole_and_piped_output_cuts_nothing():
    a = analyze(legacy_names(), device="v100-sxm2")
    for width in (200, None):
        text = render(a, "table", top=0, width=width)
        assert CONV1 in text and CONV2 in text and ELLIPSIS not in text
    long = replace(a, nodes=(a.nodes[0]._replace(name="/" + "block/" * 20 + "conv"), *a.nodes[1:]))
    assert "/" + "block/" * 20 + "conv" in render(long, "table", top=0)  # 125 characters: no 100-column limit


def test_a_narrow_terminal_cuts_names_in_the_middle_and_tells_conv1_from_conv2():
    text = render(analyze(legacy_names(), device="v100-sxm2"), "table", top=0, width=80)
    assert max(map(len, text.splitlines())) <= 80
    rows = node_rows(text)
    first, second = rows["0"].split()[1], rows["2"].split()[1]
    assert ELLIPSIS in first and first.startswith("/enc") and first.endswith("conv1/Conv")
    assert second.endswith("conv2/Conv") and first != second


def test_rows_show_the_output_shape_and_flops_in_engineering_units():
    rows = node_rows(render(analyze(legacy_names(), device="v100-sxm2"), "table", top=0))
    # conv1: 2 * 1*4*8*8 outputs * 3*3*3 = 13824 FLOPs; conv2: 2 * 1*4*8*8 * 4*3*3 = 18432; the Relu: 256.
    assert " 1x4x8x8 " in rows["0"] and " 13.8 k " in rows["0"]
    assert " 18.4 k " in rows["2"] and " 256 " in rows["1"]
    assert "0.000" not in "".join(rows.values())


def test_the_headline_labels_its_terms_as_summed_per_node_maxima():
    gpu = render(analyze(legacy_names(), device="v100-sxm2"), "table")
    assert "the sum of each node's largest term over 3 nodes" in gpu
    assert "terms summed over the nodes: compute " in gpu and " = compute" not in gpu and " | " not in gpu
    cpu = render(analyze(legacy_names(), device="colab-xeon-1core"), "table")  # a serial executor
    assert "the sum of each node's max(compute, memory) + overhead over 3 nodes" in cpu


def test_analyze_piped_ignores_the_terminal_width(tmp_path: Path):
    path = tmp_path / "legacy.onnx"
    onnx.save(legacy_names(), str(path))
    env = {"COLUMNS": "40", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "onnxroof", "analyze", str(path), "--top", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert CONV1 in done.stdout and CONV2 in done.stdout and ELLIPSIS not in done.stdout


# ------------------------------------------------------------------------------------------------- validate


def kernel(name: str, measured: float, *, shape_only: bool = False, why: str = "plain roofline") -> KernelComparison:
    return KernelComparison(
        name, "Conv", (name,), measured * 1.1, measured, 1e6, 1e4, "compute", why, False, False, shape_only
    )


def validation(kernels: list[KernelComparison], speed: float | None = None) -> Validation:
    a = analyze(legacy_names(), device=calibrated_host(), as_exported=True)
    m = Measurement(
        "legacy", "CPUExecutionProvider", "cpu", 1, "all", 3, 30, 20, 2e-3, 1.9e-3, 2.5e-3, 2.2e-3, 1.9e-3, ()
    )
    p = NodeProfile("legacy", "CPUExecutionProvider", "cpu", 1, "all", 3, 1, 2e-3, (), (), {}, onnx.ModelProto())
    counted = scored(kernels, engine_graph=False)
    stats = agreement([k.predicted_time_s for k in counted], [k.measured_time_s for k in counted])
    return Validation(a, m, p, tuple(kernels), stats, (), speed)


def test_validate_counts_the_rows_it_leaves_out_of_the_kernels_it_compared():
    # Five compared kernels and two shape-only ones, which are timed but never compared; two rows shown.
    kernels = [kernel(f"conv{i}", 1e-3 / (i + 1)) for i in range(5)]
    kernels += [kernel("reshape", 5e-5, shape_only=True), kernel("flatten", 4e-5, shape_only=True)]
    text = validation_table(validation(kernels), top=2)
    assert "kernels: 5 compared" in text
    assert "... 3 more" in text  # 5 compared, 2 shown
    assert "2 more kernel(s) timed, not compared: 2 shape-only" in text
    rows = [line.split()[0] for line in text.splitlines() if line.startswith("  conv") or "reshape " in line]
    assert rows == ["conv0", "conv1"]


def test_validate_prints_one_headline_error_and_explains_the_unscaled_prediction():
    v = validation([kernel("conv", 1e-3)], speed=0.5)
    text = validation_table(v)
    # The model's prediction at the machine's speed while timed is the calibrated one over 0.5: twice as long.
    assert v.predicted_at_speed_s == pytest.approx(2 * v.predicted_time_s)
    assert len(re.findall(r"error [+-]\d", text)) == 1
    assert f"error {v.model_error:+.1%}" in text
    assert "the machine ran at 0.50x its calibrated speed while timed" in text
    unscaled = f"Unscaled, the calibrated prediction is {seconds(v.predicted_time_s)} ({v.uncorrected_error:+.1%} "
    assert unscaled in " ".join(text.split())


def test_validate_reasons_are_wrapped_not_cut():
    why = "a reason long enough to pass any narrow terminal, " * 3
    text = validation_table(validation([kernel("conv", 1e-3, why=why.strip())]), width=80)
    assert max(map(len, text.splitlines())) <= 80
    assert " ".join(text.split()).count(" ".join(why.split())) == 1


# ----------------------------------------------------------------------- prose, compare, sweep and fit


def test_calibrations_last_line_is_wrapped_whole():
    where = Path("/home/someone/.cache/onnxroof/a-long-cpu-name-and-onnxruntime-version-threads1.toml")
    text = calibration_table(calibrated_host(), cached_at=where, width=60)
    assert f"saved as {where}: '--device host' uses it" in " ".join(text.split())
    assert ELLIPSIS not in text and "~" not in text


def side(name: str, uncounted: int = 0) -> Side:
    return Side(name, 2e9, 1e8, 1000, 10, 20.0, uncounted)


def test_compare_marks_a_side_whose_totals_leave_nodes_out():
    speedup = DeviceSpeedup("v100-sxm2", "as-exported", 1e-3, 5e-4, "compute", "memory")
    c = Comparison(side("a.onnx"), side("b.onnx", uncounted=2), (speedup,), ())
    text = render_compare(c)
    assert "INCOMPLETE: B's totals are lower bounds, 2 node(s) not counted in full" in text
    assert "INCOMPLETE: A" not in text
    data = json.loads(render_compare(c, "json"))
    assert (data["a"]["complete"], data["b"]["complete"], data["b"]["uncounted"]) == (True, False, 2)


def sweep_row(uncounted: int = 0) -> SweepRow:
    # batch 4 in 296 us: 4 / 296e-6 = 13513.5 samples/s, which reads 13.5 k (never 1.351e+04)
    return SweepRow(
        4, "224x224", "stored", "stored", "v100-sxm2", "as-exported", 296e-6, 3.6e9, 1e8, 36.0, "compute", uncounted
    )


def test_sweep_marks_incomplete_rows_and_writes_throughput_in_engineering_units():
    s = Sweep("m.onnx", (sweep_row(), sweep_row(uncounted=3)))
    text = render_sweep(s)
    assert "13.5 k" in text and "e+0" not in text
    rows = [line for line in text.splitlines() if "v100-sxm2" in line]
    assert "*" not in rows[0] and "3.60 G *" in rows[1]
    assert "INCOMPLETE: up to 3 node(s) not counted in full" in text
    table = list(csv.DictReader(io.StringIO(render_sweep(s, "csv"))))
    assert [(r["complete"], r["uncounted"]) for r in table] == [("True", "0"), ("False", "3")]


def fit(uncounted: int = 0) -> Fit:
    checks = (Check("latency", 296e-6, 1e-3, "s"), Check("memory", 2e8, 16e9, "B"))
    return Fit("m.onnx", "v100-sxm2", 4, "as-typed", "as-exported", 296e-6, 2e8, checks, uncounted=uncounted)


def test_fit_says_when_its_latency_is_a_lower_bound():
    assert "lower bound" not in summary(fit())
    line = summary(fit(uncounted=2))
    assert line.startswith("PASS") and "latency 296 us <= 1.00 ms (INCOMPLETE, a lower bound: 2 node(s)" in line
    assert json.loads(json.dumps(fit(uncounted=2).to_dict()))["complete"] is False
    ranked = [DeviceFit(fit(uncounted=2), MaxBatch(4, "latency", fit(uncounted=2), None))]
    text = render_ranking(ranked)
    assert "296 us *" in text and "13.5 k" in text and "lower bound" in text


def test_complete_totals_carry_no_incomplete_marker():
    assert "INCOMPLETE" not in render_sweep(Sweep("m.onnx", (sweep_row(),)))
    assert "INCOMPLETE" not in render_ranking([DeviceFit(fit(), MaxBatch(4, "latency", fit(), None))])
    assert "INCOMPLETE" not in render_compare(Comparison(side("a"), side("b"), (), ()))


def test_the_headline_names_the_kernel_latency_and_overlap_an_engine_charges():
    """A GPU engine adds each kernel's latency to its work (A100: 2.62 us back to back, gpu-small-kernels) under
    'serial'; the plain roofline shows the datasheet's launch overhead under the device's 'max'."""
    on_engine = render(analyze(legacy_names(), device="a100-sxm4-80gb", engine="tensorrt"), "table", top=1)
    assert "kernel latency 2.62 us (serial overlap)" in on_engine
    plain = render(analyze(legacy_names(), device="a100-sxm4-80gb"), "table", top=1)
    assert "launch 4.20 us (max overlap)" in plain
