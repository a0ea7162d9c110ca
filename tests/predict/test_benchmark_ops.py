"""Every op type onnxruntime runs across the benchmark set is predicted under a calibrated class, or its fallback to
the plain roofline is stated here with the reason: none falls back silently.

BENCHMARK_OPS is what ``python tools/op_census.py --set benchmark`` printed for the 44 models of
``tools/export_models.py`` (onnxruntime 1.31, CPU provider, optimization level all), as registry keys: the op type
for the standard domain, ``domain::op`` otherwise. A new census that finds another op type adds it here.
"""

from __future__ import annotations

import pytest

from onnxroof.costs import OTHER, SHAPE, engine_class
from onnxroof.ort.calibrate import COMPUTE_CLASSES, MEMORY_CLASSES
from onnxroof.predict import op_classes

BENCHMARK_OPS: tuple[str, ...] = (
    "Add", "And", "Cast", "Concat", "Conv", "ConvTranspose", "CumSum", "Div", "Equal", "Erf", "Expand", "Flatten",
    "GRU", "Gather", "GatherElements", "GatherND", "Gemm", "GlobalAveragePool", "HardSigmoid",
    "InstanceNormalization", "IsNaN", "LSTM", "LayerNormalization", "MatMul", "MaxPool", "Mul", "Neg", "Not", "Pad",
    "Pow", "Reciprocal", "ReduceMean", "Reshape", "Resize", "SimplifiedLayerNormalization", "Slice", "Softmax",
    "Split", "Sqrt", "Squeeze", "Sub", "Transpose", "Unsqueeze", "Where", "com.microsoft.nchwc::AveragePool",
    "com.microsoft.nchwc::Conv", "com.microsoft.nchwc::GlobalAveragePool", "com.microsoft.nchwc::MaxPool",
    "com.microsoft.nchwc::ReorderInput", "com.microsoft.nchwc::ReorderOutput", "com.microsoft.nchwc::Upsample",
    "com.microsoft::FastGelu", "com.microsoft::FusedConv", "com.microsoft::FusedGemm", "com.microsoft::FusedMatMul",
    "com.microsoft::Gelu", "com.microsoft::QuickGelu", "com.microsoft::SkipLayerNormalization",
)  # fmt: skip

# The op types of the set that no calibrated class covers yet. Each node of them is predicted on the plain roofline
# of the calibrated peak and DRAM bandwidth, and its engine note says so ("no ceiling (plain roofline)").
PLAIN_ROOFLINE: dict[str, str] = {
    "CumSum": "a running sum along one axis: 2 nodes in the set (GPT-2's positions), no benchmark of its own",
}


def split(op: str) -> tuple[str, str]:
    """'Conv' -> ('', 'Conv'); 'com.microsoft::Gelu' -> ('com.microsoft', 'Gelu')."""
    domain, _, op_type = op.rpartition("::")
    return domain, op_type


def calibrated_or_fallback(cls: str) -> bool:
    """Whether a class is calibrated or falls back, through CLASS_FALLBACK, to one that is."""
    seen: set[str] = set()
    while cls not in COMPUTE_CLASSES | MEMORY_CLASSES:
        if cls in seen or cls not in op_classes.CLASS_FALLBACK:
            return False
        seen.add(cls)
        cls = op_classes.CLASS_FALLBACK[cls]
    return True


@pytest.mark.parametrize("op", BENCHMARK_OPS)
def test_every_op_of_the_benchmark_set_has_a_calibrated_class_or_a_stated_fallback(op: str):
    cls = engine_class(*split(op))
    assert cls is not None, f"{op}: no cost function, so no class"
    if op in PLAIN_ROOFLINE:
        # Stated here; once the op gets a class of its own, its entry goes.
        assert cls == OTHER, f"{op} now has the class {cls}: remove it from PLAIN_ROOFLINE"
        return
    assert cls != OTHER, f"{op}: predicted on the plain roofline without a stated reason"
    refined = op_classes.REFINEMENTS[cls].classes if cls in op_classes.REFINEMENTS else frozenset({cls})
    for each in refined:
        assert each == SHAPE or calibrated_or_fallback(each), f"{op}: class {each} is neither calibrated nor falls back"


def test_every_stated_fallback_is_an_op_of_the_set():
    assert set(PLAIN_ROOFLINE) <= set(BENCHMARK_OPS)
