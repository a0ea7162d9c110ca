"""The ablation benchmark's variants and scores (tools/ablation.py is a script, loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from onnxroof.devices import Ceiling
from onnxroof.predict.analysis import analyze_graph
from tests.helpers import calibrated_host, loaded_graph

_PATH = Path(__file__).resolve().parent.parent / "tools" / "ablation.py"
_spec = importlib.util.spec_from_file_location("onnxroof_ablation_tool", _PATH)
ablation = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ablation  # its dataclasses look their module up there
_spec.loader.exec_module(ablation)


def _relu_graph():
    return loaded_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 768])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 768])],
    )


def test_the_variants_are_the_full_prediction_then_each_term_then_each_class_folded():
    half = Ceiling(compute=((1e6, 0.5),), memory=(), source="calibrated: test")
    host = calibrated_host({"conv": half, "gemm": half})
    variants = ablation.variants(host)
    labels = [v.label for v in variants]
    terms = [f"term {t}" for t in variants[0].profile.terms]
    classes = [f"class {c}" for c in sorted(host.ceilings)]
    assert labels == [ablation.FULL, *terms, *classes]
    assert classes == ["class conv", "class gemm"]
    folded = variants[len(terms) + 1]  # conv's ceiling off: its nodes read their fallback's
    assert set(folded.device.ceilings) == {"gemm"} and folded.profile is variants[0].profile


def test_a_term_no_node_charges_cannot_change_a_prediction_and_one_that_does_can():
    host = calibrated_host()
    full = analyze_graph(_relu_graph(), host, engine=True)
    by_label = {v.label: v for v in ablation.variants(host)}
    assert ablation.touches(by_label["term dispatch"], full)  # every node pays its dispatch
    assert not ablation.touches(by_label["term bias_pass"], full)  # a Relu has no C to pass over
    assert not ablation.touches(by_label[ablation.FULL], full)  # the full prediction is the one it is compared with


def test_scores_are_the_mean_absolute_error_the_models_within_10pct_and_those_changed():
    graph = _relu_graph()
    models = [
        ablation.Model("a", "f", 1.0, graph),
        ablation.Model("b", "f", 2.0, graph),
        ablation.Model("c", "g", 4.0, graph),
    ]
    full = {"a": 1.05, "b": 2.0, "c": 4.0}
    times = {"a": 1.05, "b": 2.5, "c": 4.0}
    scores = ablation.scores(models, times, full)
    # |errors|: a 0.05, b 0.25, c 0.0; within 10%: a and c; changed from the full prediction: b only
    assert scores["f"] == (pytest.approx(0.15), 1, 2, 1)
    assert scores["g"] == (0.0, 1, 1, 0)
    assert scores["all"] == (pytest.approx(0.1), 2, 3, 1)
