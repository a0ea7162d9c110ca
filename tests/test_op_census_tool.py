"""The op-type census's counting (tools/op_census.py is a script, loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "tools" / "op_census.py"
_spec = importlib.util.spec_from_file_location("onnxroof_op_census_tool", _PATH)
census_tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = census_tool  # its dataclasses look their module up there
_spec.loader.exec_module(census_tool)


def test_a_node_is_costed_under_its_own_ceiling_another_class_s_or_none():
    assert census_tool.costed_as("conv", "conv") == "own"
    assert census_tool.costed_as("conv1x1", "conv") == "via conv"
    assert census_tool.costed_as("other", None) == "plain roofline"
    assert census_tool.costed_as("shape", None) == "shape-only"


def test_op_types_are_counted_per_model_and_node_with_their_share_of_the_predicted_time():
    census: dict = {}
    census_tool.add_model(
        census,
        "a",
        [
            ("ai.onnx::Conv", "conv", "conv", True, 3.0),
            ("ai.onnx::Conv", "conv1x1", "conv", True, 1.0),
            ("com.microsoft::Attention", "other", None, False, 4.0),
        ],
    )
    census_tool.add_model(census, "b", [("ai.onnx::Conv", "conv", "conv", True, 1.0)])
    conv = census["ai.onnx::Conv"]
    assert conv.models == {"a", "b"} and conv.nodes == 3
    assert conv.classes == {"conv": 2, "conv1x1": 1}
    assert conv.costed == {"own": 2, "via conv": 1}
    # Half of model a's predicted time (4 of 8), all of model b's.
    assert conv.shares == pytest.approx({"a": 0.5, "b": 1.0})
    attention = census["com.microsoft::Attention"]
    assert attention.unsupported == 1 and attention.costed == {"plain roofline": 1}
    lines = census_tool.census_lines(census, models=2)
    # Largest share over both models first: Conv (1.5 / 2 = 75%), then Attention (0.5 / 2 = 25%, 50% where it is).
    assert lines[2].startswith("ai.onnx::Conv") and "75.0%" in lines[2]
    assert lines[3].startswith("com.microsoft::Attention")
    assert "25.0%" in lines[3] and "50.0%" in lines[3] and lines[3].endswith("no cost function")
