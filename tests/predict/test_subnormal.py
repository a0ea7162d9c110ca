"""Masked attention on subnormal floats: which elements underflow, which products read them, and their time."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from onnx import helper, numpy_helper

from onnxroof.costs import Cost
from onnxroof.devices import Sourced
from onnxroof.load import load_graph
from onnxroof.predict import engine
from onnxroof.predict.analysis import analyze_graph
from onnxroof.predict.subnormal import (
    EXP_NORMAL_FLOOR,
    EXP_SUBNORMAL_FLOOR,
    SubnormalWork,
    mask_candidates,
    subnormal_time,
    subnormal_work,
)
from onnxroof.predict.terms import InModel
from tests.helpers import FLOAT, IR_VERSION, T, calibrated_host, make_node

# Swin's first stage at a quarter of its windows: 16 windows, 3 heads, 49 x 49 scores, 32-wide values.
WINDOWS, HEADS, N, D = 16, 3, 49, 32


def swin_attention(mask_value: float, masked: int = 8, bias: bool = True) -> tuple:
    """A shifted-window attention block as torchvision exports it: scores q @ k^T, a relative position bias added,
    a reshape to (1, windows, heads, n, n), the window mask added (``mask_value`` on the last ``masked`` columns,
    shared by the heads), a reshape back, Softmax, and the product with the values. The graph as loaded (large
    constants without their values) and the mask."""
    mask = np.zeros((1, WINDOWS, 1, N, N), np.float32)
    mask[..., N - masked :] = mask_value
    inits = {
        "mask": mask,
        "bias": np.full((1, HEADS, N, N), 0.05, np.float32),
        "split": np.array([1, WINDOWS, HEADS, N, N], np.int64),
        "merge": np.array([WINDOWS, HEADS, N, N], np.int64),
    }
    nodes = [helper.make_node("MatMul", ["q", "k"], ["scores"], name="qk")]
    scores = "scores"
    if bias:
        nodes.append(helper.make_node("Add", ["scores", "bias"], ["biased"], name="bias_add"))
        scores = "biased"
    nodes += [
        helper.make_node("Reshape", [scores, "split"], ["split_scores"], name="split_reshape"),
        helper.make_node("Add", ["split_scores", "mask"], ["masked"], name="mask_add"),
        helper.make_node("Reshape", ["masked", "merge"], ["merged"], name="merge_reshape"),
        helper.make_node("Softmax", ["merged"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"], name="context"),
    ]
    inputs = [
        helper.make_tensor_value_info("q", FLOAT, [WINDOWS, HEADS, N, D]),
        helper.make_tensor_value_info("k", FLOAT, [WINDOWS, HEADS, D, N]),
        helper.make_tensor_value_info("v", FLOAT, [WINDOWS, HEADS, N, D]),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        inputs,
        [helper.make_tensor_value_info("y", FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    return load_graph(model), mask


def with_values(graph, **values):
    return dataclasses.replace(graph, constants={**graph.constants, **values})


def test_the_bounds_are_where_float32_exp_leaves_the_normal_and_the_subnormal_range():
    # IEEE 754 binary32: the smallest normal is 2^-126, the smallest subnormal 2^-149; exp(x) crosses them at
    # x = -126 ln 2 = -87.3365 and -149 ln 2 = -103.2789.
    assert math.isclose(EXP_NORMAL_FLOOR, -87.33654475) and math.isclose(EXP_SUBNORMAL_FLOOR, -103.27892991)
    tiny = np.finfo(np.float32).tiny  # 2^-126
    assert np.exp(np.float32(EXP_NORMAL_FLOOR + 0.01)) >= tiny > np.exp(np.float32(EXP_NORMAL_FLOOR - 0.01)) > 0
    assert np.exp(np.float32(EXP_SUBNORMAL_FLOOR - 1.0)) == 0


def test_the_masks_values_are_what_the_graph_needs_filled_in():
    graph, _ = swin_attention(-100.0)
    # Both added constants have more elements than the loader keeps values of; the shape constants are kept.
    assert mask_candidates(graph) == {"mask", "bias"}
    assert subnormal_work(graph) == {}  # without the mask's values nothing is counted


def test_a_mask_of_minus_100_underflows_its_softmax_and_makes_the_products_operands_subnormal():
    graph, mask = swin_attention(-100.0)
    work = subnormal_work(with_values(graph, mask=mask, bias=np.full((1, HEADS, N, N), 0.05, np.float32)))
    # 8 of 49 columns of every window's 49 rows masked, shared by the 3 heads: 16 * 49 * 8 = 6,272 mask values
    # each added to 3 scores, 18,816 elements; exp(-100) = 3.7e-44 lies between 2^-149 and 2^-126, a subnormal.
    assert work["softmax"] == SubnormalWork(underflows=18816)
    # Each subnormal probability multiplies a row of the 32-wide values: 18,816 * 32 = 602,112 multiply-adds.
    assert work["context"] == SubnormalWork(products=602112)
    assert set(work) == {"softmax", "context"}


def test_a_mask_whose_exp_rounds_to_zero_slows_the_softmax_only():
    graph, mask = swin_attention(-1e4, masked=10)
    work = subnormal_work(with_values(graph, mask=mask))
    # 16 * 49 * 10 * 3 = 23,520 underflowing elements; exp(-1e4) is 0, not a subnormal: the product reads zeros.
    assert work == {"softmax": SubnormalWork(underflows=23520)}


def test_a_mask_within_the_normal_range_costs_nothing():
    graph, mask = swin_attention(-50.0)
    assert subnormal_work(with_values(graph, mask=mask)) == {}


def test_the_time_is_each_element_at_the_devices_calibrated_cost():
    dev = dataclasses.replace(
        calibrated_host(),
        softmax_underflow=Sourced(2e-8, "calibrated: test"),
        subnormal_product=Sourced(3e-9, "calibrated: test"),
    )
    # 1,000 underflows at 20 ns and 10,000 multiply-adds at 3 ns: 20 us + 30 us.
    assert subnormal_time(dev, SubnormalWork(1000, 10000)) == pytest.approx(50e-6)
    assert subnormal_time(calibrated_host(), SubnormalWork(1000, 10000)) == 0.0  # a device without the figures
    assert subnormal_time(dev, None) == 0.0


def test_the_engine_adds_the_slow_path_to_the_nodes_time_and_says_so():
    dev = dataclasses.replace(
        calibrated_host(),
        softmax_underflow=Sourced(2e-8, "calibrated: test"),
        network_factor=Sourced(1.5, "calibrated: test"),
    )
    view = make_node("Softmax", [T((WINDOWS, HEADS, N, N))], [T((WINDOWS, HEADS, N, N))], axis=-1)
    cost = Cost(flops=1e6, bytes_read=4e5, bytes_written=4e5, kernels=1)
    plain, _ = engine.predict_engine(view, cost, "fp32", dev)
    slowed, note = engine.predict_engine(view, cost, "fp32", dev, InModel(subnormal=SubnormalWork(underflows=18816)))
    # 18,816 elements at 20 ns, times the network factor 1.5: 564.48 us on top of the same node's time.
    assert slowed.predicted_time_s - plain.predicted_time_s == pytest.approx(1.5 * 18816 * 2e-8)
    assert note.terms["subnormal"] == pytest.approx(564.48e-6) and "564 us on subnormal floats" in note.describe()


def twin_blocks() -> tuple:
    """Two attention blocks alike but for their masks' values, side by side in one graph: ``masked_*`` adds
    ``mask`` and ``plain_*`` adds ``zeros``, both (WINDOWS, 1, N, N) and loaded without their values."""
    nodes, outputs = [], []
    for block, mask in (("masked", "mask"), ("plain", "zeros")):
        nodes += [
            helper.make_node("Add", ["scores", mask], [f"{block}_in"], name=f"{block}_add"),
            helper.make_node("Softmax", [f"{block}_in"], [f"{block}_p"], name=f"{block}_softmax", axis=-1),
            helper.make_node("MatMul", [f"{block}_p", "v"], [f"{block}_y"], name=f"{block}_context"),
        ]
        outputs.append(helper.make_tensor_value_info(f"{block}_y", FLOAT, None))
    shape = (WINDOWS, 1, N, N)
    graph = helper.make_graph(
        nodes,
        "twins",
        [
            helper.make_tensor_value_info("scores", FLOAT, [WINDOWS, HEADS, N, N]),
            helper.make_tensor_value_info("v", FLOAT, [WINDOWS, HEADS, N, D]),
        ],
        outputs,
        [numpy_helper.from_array(np.zeros(shape, np.float32), name) for name in ("mask", "zeros")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    mask = np.zeros(shape, np.float32)
    mask[..., N - 8 :] = -100.0
    return with_values(load_graph(model), mask=mask, zeros=np.zeros(shape, np.float32))


def test_a_masked_softmax_is_not_costed_as_its_unmasked_twin():
    # The analysis costs nodes with equal signatures once; the masked block's must not share the plain one's.
    dev = dataclasses.replace(
        calibrated_host(),
        softmax_underflow=Sourced(2e-8, "calibrated: test"),
        subnormal_product=Sourced(3e-9, "calibrated: test"),
    )
    times = {n.name: n.prediction.predicted_time_s for n in analyze_graph(twin_blocks(), dev, engine=True).nodes}
    # 16 * 49 * 8 * 3 = 18,816 underflows at 20 ns; times 32 columns at 3 ns in the product.
    assert times["masked_softmax"] - times["plain_softmax"] == pytest.approx(18816 * 2e-8)
    assert times["masked_context"] - times["plain_context"] == pytest.approx(18816 * 32 * 3e-9)
    assert math.isclose(times["masked_add"], times["plain_add"])


def test_the_calibration_summary_gives_the_costs_of_subnormal_floats():
    from onnxroof.report.calibration import calibration_table

    assert "subnormal floats" not in calibration_table(calibrated_host())
    dev = dataclasses.replace(
        calibrated_host(),
        softmax_underflow=Sourced(2.13e-8, "calibrated: test"),
        subnormal_product=Sourced(3.02e-9, "calibrated: test"),
    )
    line = "subnormal floats: 21.3 ns per Softmax element whose exp underflows, 3.02 ns per multiply-add on one"
    assert line in calibration_table(dev)
