"""The cost registry: one registration per op declares its cost function and its engine class, the family modules
are found without a hand-kept list, and no family imports another."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from onnxroof.costs import OTHER, SHAPE, Cost, compute_cost, engine_class, lookup, register, registered_ops
from onnxroof.devices import OP_CLASSES
from tests.helpers import INT8, T, W, cost_of, make_node

ROOT = Path(__file__).resolve().parents[2]
COSTS = ROOT / "onnxroof" / "costs"
HELPERS = "common"  # the one module of the package that holds shared helpers and registers nothing
FAMILIES = sorted(p.stem for p in COSTS.glob("*.py") if p.stem not in ("__init__", HELPERS))


def split(op: str) -> tuple[str, str]:
    """'Conv' -> ('', 'Conv'); 'com.microsoft::Gelu' -> ('com.microsoft', 'Gelu')."""
    domain, _, op_type = op.rpartition("::")
    return domain, op_type


# ---------------------------------------------------------------------------------------------------------
# Registration.


def test_every_registered_op_declares_a_device_class_or_shape_or_other():
    declared = {op: engine_class(*split(op)) for op in registered_ops()}
    assert {op: cls for op, cls in declared.items() if cls not in {*OP_CLASSES, SHAPE, OTHER}} == {}


def test_the_low_precision_kernels_register_their_own_classes():
    # what onnxruntime's CPU provider runs for fp16 and int8 models: each has a class its calibration measures
    assert {
        op: engine_class(*split(op))
        for op in (
            "Cast",
            "CastLike",
            "DynamicQuantizeLinear",
            "ConvInteger",
            "QLinearConv",
            "com.microsoft::QLinearConv",
            "com.ms.internal.nhwc::QLinearConv",
            "com.microsoft::NhwcMaxPool",
        )
    } == {
        "Cast": "elementwise",
        "CastLike": "elementwise",
        "DynamicQuantizeLinear": "quantize",
        "ConvInteger": "conv_integer",
        "QLinearConv": "qconv",
        "com.microsoft::QLinearConv": "qconv",
        "com.ms.internal.nhwc::QLinearConv": "qconv",
        "com.microsoft::NhwcMaxPool": "pool",
    }


def test_a_registration_without_an_engine_class_is_an_error():
    with pytest.raises(TypeError, match="engine"):
        register("onnxroof.test::NoClass")
    assert lookup("onnxroof.test", "NoClass") is None


def test_an_unknown_engine_class_is_an_error():
    with pytest.raises(ValueError, match="'conv3x3'"):
        register("onnxroof.test::Unknown", engine="conv3x3")
    assert lookup("onnxroof.test", "Unknown") is None


def test_a_second_registration_of_an_op_is_an_error():
    relu = make_node("Relu", [T([2, 3, 4])], [T([2, 3, 4])])
    assert cost_of(relu).flops == 24  # max(x, 0): 1 FLOP per element * 24; this also loads the families
    with pytest.raises(ValueError, match="registered twice"):
        register("Relu", engine="elementwise")(lambda node: Cost(flops=-1.0))
    assert cost_of(relu).flops == 24  # the first registration stands
    assert engine_class("", "Relu") == "elementwise"


def test_an_op_without_a_cost_function_has_no_class_and_is_charged_its_bytes():
    # QAttention has no cost function: no FLOPs, its known tensors' bytes, one kernel, params of its weights.
    # input [1, 8, 16] float = 512 B, weight [16, 48] int8 = 768 B; output [1, 8, 16] float = 512 B.
    node = make_node("QAttention", [T([1, 8, 16]), W([16, 48], INT8)], [T([1, 8, 16])], domain="com.microsoft")
    cost, covered = compute_cost(node)
    assert not covered and engine_class("com.microsoft", "QAttention") is None
    assert (cost.flops, cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (0, 1280, 512, 768, 1)


# ---------------------------------------------------------------------------------------------------------
# Discovery.


def test_the_family_modules_are_found_without_a_list(tmp_path: Path):
    """A module added to the package registers its ops on the first lookup, and nothing is imported before it."""
    (tmp_path / "probe_family.py").write_text(
        "from onnxroof.costs import OTHER, Cost, register\n\n\n"
        '@register("onnxroof.test::Probe", engine=OTHER)\n'
        "def probe(node):\n"
        "    return Cost(flops=1.0)\n"
    )
    code = textwrap.dedent(
        """
        import sys
        import onnxroof.costs as costs

        loaded = lambda: sorted(m.rpartition(".")[2] for m in sys.modules if m.startswith("onnxroof.costs."))
        assert loaded() == [], loaded()
        costs.__path__.append(sys.argv[1])
        assert costs.lookup("onnxroof.test", "Probe") is not None
        print(" ".join(loaded()))
        """
    )
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == sorted([*FAMILIES, HELPERS, "probe_family"])


def test_every_family_module_registers_ops():
    modules = {lookup(*split(op)).__module__.rpartition(".")[2] for op in registered_ops()}
    assert modules == set(FAMILIES)


def test_no_family_module_imports_another():
    """A family takes what it shares with others from costs/__init__ and costs/common, so that each reads alone."""
    reaching = []
    for name in [*FAMILIES, HELPERS]:
        tree = ast.parse((COSTS / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("onnxroof.costs."):
                if node.module != f"onnxroof.costs.{HELPERS}" or name == HELPERS:
                    reaching.append(f"{name}: from {node.module}")
            elif isinstance(node, ast.ImportFrom) and node.module == "onnxroof.costs":
                reaching += [f"{name}: from onnxroof.costs import {a.name}" for a in node.names if a.name in FAMILIES]
    assert reaching == []
