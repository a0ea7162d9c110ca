"""onnxruntime's symbolic shape inference stays quiet: what it logs becomes at most one warning of the graph."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.load import load_graph
from onnxroof.load.symbolic import LOGGER, captured_warnings, summary

pytest.importorskip("sympy")


def _slice_to_an_unknown_length() -> onnx.ModelProto:
    """NonZero of x sliced to the count of NonZero of y: two data-dependent lengths that symbolic inference
    cannot compare, so it assumes the Slice end equal to the dim (and logs that it did)."""
    one, two, zero = (
        numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("one", 1), ("two", 2), ("zero", 0))
    )
    nodes = [
        helper.make_node("NonZero", ["x"], ["nx"]),
        helper.make_node("NonZero", ["y"], ["ny"]),
        helper.make_node("Shape", ["ny"], ["sy"]),
        helper.make_node("Slice", ["sy", "one", "two"], ["end"]),
        helper.make_node("Slice", ["nx", "zero", "end", "one"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "nonzero",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.INT64, None)],
        [one, two, zero],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_what_symbolic_inference_logs_never_reaches_the_terminal_and_becomes_one_warning(
    capfd: pytest.CaptureFixture[str],
):
    graph = load_graph(_slice_to_an_unknown_length())
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert graph.warnings == (
        "symbolic shape inference assumed 1 pair of dims equal that it could not compare; "
        "the shapes it gave rest on that",
    )
    assert graph.tensors["nx"].dtype == TensorProto.INT64


def test_a_symbolic_inference_that_says_nothing_gives_no_warning(capfd: pytest.CaptureFixture[str]):
    # onnx does not know the com.microsoft Attention op; symbolic inference does, and has nothing to say.
    nodes = [helper.make_node("Attention", ["x", "w", "b"], ["y"], domain="com.microsoft", num_heads=2)]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.ones((8, 24), np.float32), "w"),
            numpy_helper.from_array(np.ones(24, np.float32), "b"),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    loaded = load_graph(model)
    assert loaded.tensors["y"].shape == (1, 4, 8)
    assert loaded.warnings == ()
    assert capfd.readouterr() == ("", "")


def test_the_summary_counts_each_assumed_pair_once_and_names_the_first_other_warning():
    messages = [
        "Unable to determine if a <= b, treat as equal",
        "Cannot determine if c < 0",
        "Unable to determine if a <= b, treat as equal",
        "Unable to determine if d <= e, treat as equal",
        "unsupported broadcast between f g",
    ]
    assert summary(messages) == (
        "symbolic shape inference assumed 2 pairs of dims equal that it could not compare and warned 2 times "
        "(first: Cannot determine if c < 0); the shapes it gave rest on that"
    )
    assert summary(["Cannot determine if c < 0\nmore"]) == (
        "symbolic shape inference warned 1 time (first: Cannot determine if c < 0); the shapes it gave rest on that"
    )


def test_capture_keeps_warnings_from_every_handler_and_gives_the_logger_back(caplog: pytest.LogCaptureFixture):
    logger = logging.getLogger(LOGGER)
    handlers, propagate = list(logger.handlers), logger.propagate
    with caplog.at_level(logging.DEBUG), pytest.raises(RuntimeError), captured_warnings(LOGGER) as said:
        logger.debug("not a warning")
        logger.warning("a %s", "warning")
        logger.error("an error with a bad format %d", "text")
        raise RuntimeError("the block fails")
    assert said == ["a warning", "an error with a bad format %d"]
    assert caplog.records == []  # the root logger's handlers saw nothing
    assert (logger.handlers, logger.propagate) == (handlers, propagate)
    logger.warning("after")
    assert [r.getMessage() for r in caplog.records] == ["after"]
