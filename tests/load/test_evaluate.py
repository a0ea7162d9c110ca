"""The values of shape arithmetic evaluated in numpy: each op as the ONNX operator definitions specify it, checked
by hand where the semantics are easy to get wrong and against onnx's reference implementation for the rest."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxroof.load.evaluate import OPS, evaluate

i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
f32 = lambda *v: np.array(v, np.float32)  # noqa: E731

# (op, inputs, attributes, opset): every op of OPS at least once, the cases onnx's reference is checked on.
CASES: list[tuple[str, list[Any], dict[str, Any], int]] = [
    ("Identity", [i64(1, 2)], {}, 17),
    ("Cast", [f32(-1.7, 2.5)], {"to": TensorProto.INT64}, 17),
    ("Cast", [i64(0, 3)], {"to": TensorProto.BOOL}, 17),
    ("Gather", [i64(1, 56, 56, 96), np.array(-1, np.int64)], {"axis": 0}, 17),
    ("Gather", [np.arange(12, dtype=np.float32).reshape(3, 4), i64(2, 0)], {"axis": 1}, 17),
    ("Concat", [i64(1), i64(8, 7)], {"axis": 0}, 17),
    ("Unsqueeze", [i64(3, 4), i64(-1, 0)], {}, 17),
    ("Squeeze", [np.zeros((1, 3, 1), np.int64), i64(-1)], {}, 17),
    ("Squeeze", [np.zeros((1, 3, 1), np.int64)], {}, 17),
    ("Slice", [np.arange(10, dtype=np.int64), i64(-3), i64(2**62), i64(0), i64(1)], {}, 17),
    ("Slice", [np.arange(10, dtype=np.int64), i64(8), i64(-(2**62)), i64(0), i64(-3)], {}, 17),
    ("Slice", [np.arange(12, dtype=np.int64).reshape(3, 4), i64(1, -1), i64(3, 0), i64(0, 1), i64(1, -1)], {}, 17),
    ("Slice", [np.arange(10, dtype=np.int64)], {"starts": [2], "ends": [5]}, 9),
    ("Reshape", [np.arange(24, dtype=np.int64).reshape(2, 3, 4), i64(0, -1)], {}, 17),
    ("Transpose", [np.arange(24, dtype=np.int64).reshape(2, 3, 4)], {"perm": [2, 0, 1]}, 17),
    ("Transpose", [np.arange(6, dtype=np.int64).reshape(2, 3)], {}, 17),
    ("ScatterND", [np.zeros((4, 4), np.int64), i64(1, 3, 0, 2).reshape(2, 2), i64(5, 7)], {}, 17),
    ("ScatterND", [np.zeros((3, 2), np.float32), i64(2, 0).reshape(2, 1), f32(1, 2, 3, 4).reshape(2, 2)], {}, 17),
    ("Expand", [f32(1.0, 2.0).reshape(2, 1), i64(2, 3)], {}, 17),
    ("Tile", [i64(1, 2).reshape(1, 2), i64(2, 2)], {}, 17),
    ("ConstantOfShape", [i64(2, 3)], {"value": np.array([7], np.int64)}, 17),
    ("Range", [i64(0)[0], i64(7)[0], i64(3)[0]], {}, 17),
    ("Range", [np.array(1.0, np.float32), np.array(0.0, np.float32), np.array(-0.25, np.float32)], {}, 17),
    ("Add", [i64(1, 2), i64(10)], {}, 17),
    ("Sub", [i64(7), i64(3, 9)], {}, 17),
    ("Mul", [f32(1.5), f32(2.0, 4.0)], {}, 17),
    ("Div", [i64(7, -7, 7, -7), i64(2, 2, -2, -2)], {}, 17),
    ("Div", [f32(1.0, -3.0), f32(4.0)], {}, 17),
    ("Mod", [i64(5, -5, 5, -5), i64(3, 3, -3, -3)], {}, 17),
    ("Mod", [i64(5, -5, 5, -5), i64(3, 3, -3, -3)], {"fmod": 1}, 17),
    ("Neg", [i64(3, -4)], {}, 17),
    ("Abs", [i64(3, -4)], {}, 17),
    ("Floor", [f32(-1.5, 1.5)], {}, 17),
    ("Ceil", [f32(-1.5, 1.5)], {}, 17),
    ("Sqrt", [f32(4.0, 2.0)], {}, 17),
    ("Max", [i64(1, 5), i64(3, 2), i64(2)], {}, 17),
    ("Min", [i64(1, 5), i64(3, 2)], {}, 17),
    ("Clip", [i64(-5, 0, 9), i64(-1), i64(4)], {}, 17),
    ("Equal", [i64(1, 2, 3), i64(2)], {}, 17),
    ("Less", [i64(1, 2, 3), i64(2)], {}, 17),
    ("Greater", [i64(1, 2, 3), i64(2)], {}, 17),
    ("LessOrEqual", [i64(1, 2, 3), i64(2)], {}, 17),
    ("GreaterOrEqual", [i64(1, 2, 3), i64(2)], {}, 17),
    ("Not", [np.array([True, False])], {}, 17),
    ("And", [np.array([True, True]), np.array([False, True])], {}, 17),
    ("Or", [np.array([True, False]), np.array([False, False])], {}, 17),
    ("Where", [np.array([[True], [False]]), f32(1.0, 2.0), f32(-100.0)], {}, 17),
    ("ReduceProd", [i64(1, 56, 56, 96), i64(0)], {"keepdims": 0}, 18),
    ("ReduceProd", [i64(2, 3)], {"keepdims": 1}, 13),
    ("ReduceSum", [np.arange(6, dtype=np.int64).reshape(2, 3), i64(-1)], {"keepdims": 0}, 13),
    ("ReduceMax", [np.arange(6, dtype=np.int64).reshape(2, 3)], {"axes": [0]}, 13),
    ("ReduceMin", [np.arange(6, dtype=np.int64).reshape(2, 3)], {}, 18),
]


def _reference(op_type: str, inputs: list[Any], attrs: dict[str, Any], opset: int) -> np.ndarray:
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op_type, names, ["out"], **attrs)
    if op_type == "ConstantOfShape":
        node = helper.make_node(op_type, names, ["out"], value=numpy_helper.from_array(attrs["value"]))
    return ReferenceEvaluator(node, opsets={"": opset}).run(None, dict(zip(names, inputs)))[0]


def test_every_op_has_a_case():
    assert {case[0] for case in CASES} == set(OPS)


@pytest.mark.parametrize(("op_type", "inputs", "attrs", "opset"), CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_an_op_gives_what_onnxs_reference_gives(op_type: str, inputs: list[Any], attrs: dict[str, Any], opset: int):
    value = evaluate(op_type, inputs, attrs, opset, limit=1000)
    expected = np.asarray(_reference(op_type, inputs, attrs, opset))
    assert value is not None
    assert value.dtype == expected.dtype and value.shape == expected.shape
    np.testing.assert_array_equal(value, expected)


def test_the_semantics_that_differ_from_pythons():
    # Integer Div truncates toward zero (7 / -2 = -3.5 -> -3), where Python's // floors (-4).
    assert evaluate("Div", [i64(7, -7), i64(-2, 2)], {}, 17, 100).tolist() == [-3, -3]
    # Mod without fmod takes the divisor's sign (-5 mod 3 = 1); with fmod, the dividend's (fmod(-5, 3) = -2).
    assert evaluate("Mod", [i64(-5), i64(3)], {}, 17, 100).tolist() == [1]
    assert evaluate("Mod", [i64(-5), i64(3)], {"fmod": 1}, 17, 100).tolist() == [-2]
    # Slice with a negative step: an end of -1 after clamping means "before the first element", not the last.
    assert evaluate("Slice", [i64(0, 1, 2, 3), i64(2), i64(-10), i64(0), i64(-1)], {}, 17, 100).tolist() == [2, 1, 0]
    # Reshape: 0 copies the input's dim, -1 takes the rest.
    assert evaluate("Reshape", [np.zeros((2, 3, 4), np.int64), i64(0, -1)], {}, 17, 100).shape == (2, 12)
    # Range: ceil((limit - start) / delta) elements: (7 - 0) / 3 -> 3 (0, 3, 6).
    assert evaluate("Range", [i64(0)[0], i64(7)[0], i64(3)[0]], {}, 17, 100).tolist() == [0, 3, 6]


def test_older_opsets_take_as_attributes_what_newer_ones_take_as_inputs():
    # Unsqueeze's axes (an input from opset 13), Clip's bounds (from 11), Slice's starts and ends (from 10).
    assert evaluate("Unsqueeze", [i64(3, 4)], {"axes": [1]}, 11, 100).shape == (2, 1)
    assert evaluate("Clip", [f32(-5.0, 0.0, 9.0)], {"min": -1.0, "max": 4.0}, 6, 100).tolist() == [-1.0, 0.0, 4.0]
    assert evaluate("Slice", [i64(0, 1, 2, 3)], {"starts": [1], "ends": [3]}, 9, 100).tolist() == [1, 2]
    assert evaluate("ReduceSum", [i64(1, 2, 3)], {"axes": [0], "keepdims": 0}, 11, 100).tolist() == 6


def test_an_output_above_the_limit_or_an_input_out_of_the_ops_domain_gives_nothing():
    # ConstantOfShape [64, 49, 49] holds 153,664 elements: not computed at a limit of 4096 (nor allocated).
    assert evaluate("ConstantOfShape", [i64(64, 49, 49)], {}, 17, limit=4096) is None
    assert evaluate("ConstantOfShape", [i64(49, 49)], {}, 17, limit=4096).shape == (49, 49)
    assert evaluate("Expand", [f32(1.0), i64(10**9)], {}, 17, limit=4096) is None
    assert evaluate("Add", [np.zeros((100, 1), np.int64), np.zeros((1, 100), np.int64)], {}, 17, limit=4096) is None
    assert evaluate("Div", [i64(1), i64(0)], {}, 17, 100) is None  # integer division by zero
    assert evaluate("Add", [i64(1), f32(1.0)], {}, 17, 100) is None  # operands of two types: not a valid node
    assert evaluate("Gather", [i64(1, 2), i64(5)], {"axis": 0}, 17, 100) is None  # an index out of range
    assert evaluate("Cast", [i64(1)], {"to": TensorProto.BFLOAT16}, 17, 100) is None  # not a numpy type
    assert evaluate("Softmax", [f32(1.0)], {}, 17, 100) is None  # not shape arithmetic
