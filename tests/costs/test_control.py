"""If, Loop and Scan costs: subgraph costs (from a stand-in coster) times how often they run."""

from __future__ import annotations

import pytest

from onnxroof.costs import Cost
from onnxroof.costs.common import UNKNOWN_TRIPS_NOTE
from onnxroof.ir import UnknownShape
from tests.helpers import BOOL, INT64, T, cost_of, make_node

BODY = Cost(flops=50, macs=20, bytes_read=8, bytes_written=4, params=7, kernels=3)


def coster(costs: dict[str, Cost]):
    """A stand-in for the graph coster: the Cost of the subgraph held in each attribute."""
    return lambda attr: costs[attr]


def if_node(then: Cost, other: Cost, constants=None):
    return make_node(
        "If",
        [T([], BOOL)],
        [T([4])],
        constants=constants,
        cost_subgraph=coster({"then_branch": then, "else_branch": other}),
        then_branch="then_branch",
        else_branch="else_branch",
    )


def test_if_takes_the_costlier_branch_by_flops():
    cheap, costly = Cost(flops=100, bytes_read=10, kernels=2), Cost(flops=300, bytes_read=5, kernels=3)
    cost = cost_of(if_node(cheap, costly))
    assert (cost.flops, cost.bytes_read, cost.kernels) == (300, 5, 3)
    assert "else_branch" in cost.note and "costlier" in cost.note
    cost = cost_of(if_node(costly, cheap))
    assert cost.flops == 300 and "then_branch" in cost.note


def test_if_breaks_a_flops_tie_by_bytes():
    light, heavy = Cost(flops=100, bytes_read=10), Cost(flops=100, bytes_read=10, bytes_written=90)
    assert cost_of(if_node(light, heavy)).bytes == 100


def test_if_with_a_constant_condition_takes_that_branch():
    cheap, costly = Cost(flops=100), Cost(flops=300)
    cost = cost_of(if_node(cheap, costly, constants={0: True}))
    assert cost.flops == 100 and "then_branch" in cost.note


def test_if_without_a_subgraph_coster_is_an_error_not_free():
    with pytest.raises(UnknownShape):
        cost_of(make_node("If", [T([], BOOL)], [T([4])]))


def loop_node(m, cond, constants):
    return make_node(
        "Loop",
        [m, cond, T([4])],
        [T([4])],
        constants=constants,
        cost_subgraph=coster({"body": BODY}),
        body="body",
    )


def test_loop_with_a_known_trip_count_multiplies_the_body():
    cost = cost_of(loop_node(T([], INT64), T([], BOOL), {0: 10, 1: True}))
    # 10 trips: FLOPs 10*50, MACs 10*20, bytes 10*(8+4), kernels 10*3; params once (the same weights each trip)
    assert (cost.flops, cost.macs, cost.bytes, cost.kernels, cost.params) == (500, 200, 120, 30, 7)
    assert cost.note == ""


def test_loop_without_a_condition_input_runs_exactly_m_times():
    cost = cost_of(loop_node(T([], INT64), None, {0: 4}))
    assert (cost.flops, cost.note) == (4 * 50, "")


def test_loop_with_unknown_trip_count_counts_one_iteration_and_says_so():
    cost = cost_of(loop_node(T([], INT64), T([], BOOL), {1: True}))
    assert (cost.flops, cost.kernels) == (50, 3)
    assert UNKNOWN_TRIPS_NOTE in cost.note
    assert UNKNOWN_TRIPS_NOTE == "trip count unknown: one iteration counted"
    # M omitted entirely: a while loop
    assert UNKNOWN_TRIPS_NOTE in cost_of(loop_node(None, T([], BOOL), {})).note


def test_loop_with_a_runtime_condition_notes_m_is_an_upper_bound():
    cost = cost_of(loop_node(T([], INT64), T([], BOOL), {0: 6}))
    assert cost.flops == 6 * 50
    assert "upper bound" in cost.note


def test_loop_with_a_constant_false_condition_runs_no_iteration():
    cost = cost_of(loop_node(T([], INT64), T([], BOOL), {0: 6, 1: False}))
    assert (cost.flops, cost.kernels) == (0, 0)


def scan_node(inputs, **attrs):
    return make_node("Scan", inputs, [T([2])], cost_subgraph=coster({"body": BODY}), body="body", **attrs)


def test_scan_runs_the_body_once_per_element_of_the_scan_axis():
    # one state [2] and one scan input [7, 3]: 7 iterations along axis 0
    cost = cost_of(scan_node([T([2]), T([7, 3])], num_scan_inputs=1))
    assert (cost.flops, cost.kernels) == (7 * 50, 7 * 3)


def test_scan_input_axes_pick_the_scan_axis():
    assert cost_of(scan_node([T([2]), T([3, 5])], num_scan_inputs=1, scan_input_axes=[1])).flops == 5 * 50
    assert cost_of(scan_node([T([2]), T([3, 9])], num_scan_inputs=1, scan_input_axes=[-1])).flops == 9 * 50
    # two scan inputs: the first one ([6, 2], not the state [2]) sets the length
    assert cost_of(scan_node([T([2]), T([6, 2]), T([6])], num_scan_inputs=2)).flops == 6 * 50


def test_scan_with_unknown_length_counts_one_iteration_and_says_so():
    cost = cost_of(scan_node([T([2]), T(None)], num_scan_inputs=1))
    assert cost.flops == 50 and UNKNOWN_TRIPS_NOTE in cost.note
