"""Reduction cost functions: per-input and per-output constants, axes as attribute or input, keepdims, noop."""

from __future__ import annotations

import pytest

from onnxroof.costs.reduce import reduced_shape
from onnxroof.ir import UnknownShape
from tests.helpers import INT64, UINT8, T, W, cost_of, make_node

# [4, 256] = 1024 inputs reduced over axis 1 -> 4 outputs
RED = dict(axes=[1], keepdims=0)


@pytest.mark.parametrize(
    "op, expected",
    [
        ("ReduceSum", 1024),  # 1 add per input
        ("ReduceMax", 1024),  # 1 comparison per input
        ("ReduceMin", 1024),
        ("ReduceProd", 1024),  # 1 multiply per input
        ("ReduceMean", 1024 + 4),  # add per input + divide per output = 1028
        ("ReduceL1", 2 * 1024),  # abs + add per input = 2048
        ("ReduceL2", 2 * 1024 + 4),  # square + add per input, sqrt per output = 2052
        ("ReduceSumSquare", 2 * 1024),  # square + add per input = 2048
        ("ReduceLogSum", 1024 + 4),  # add per input, log per output = 1028
        ("ReduceLogSumExp", 2 * 1024 + 4),  # exp + add per input, log per output = 2052
    ],
)
def test_reduce_constants(op: str, expected: int) -> None:
    c = cost_of(make_node(op, [T([4, 256])], [T([4])], **RED))
    assert c.flops == expected
    assert c.bytes_read == 1024 * 4
    assert c.bytes_written == 4 * 4
    assert c.params == 0
    assert c.kernels == 1
    assert c.macs == 0


def test_reduced_shape() -> None:
    assert reduced_shape([2, 3, 4], [1], keepdims=True) == (2, 1, 4)
    assert reduced_shape([2, 3, 4], [-1], keepdims=False) == (2, 3)
    assert reduced_shape([2, 3, 4], [], keepdims=True) == (1, 1, 1)  # no axes: all axes
    assert reduced_shape([2, 3, 4], [], keepdims=False) == ()
    assert reduced_shape([2, 3, 4], [], keepdims=True, noop_with_empty_axes=True) == (2, 3, 4)


def test_reduce_sum_axes_attribute_keepdims() -> None:
    # [2,3,4] over axis 1, keepdims=1 -> [2,1,4] = 8 outputs (shape unknown, computed): 24 adds; written 8 * 4
    c = cost_of(make_node("ReduceSum", [T([2, 3, 4])], [T(None)], axes=[1], keepdims=1))
    assert c.flops == 24
    assert c.bytes_read == 96
    assert c.bytes_written == 32


def test_reduce_mean_axes_as_input_keepdims0() -> None:
    # opset 18: axes [-1] as a constant int64 input, keepdims=0: [2,3,4] -> [2,3] = 6 outputs
    # 24 adds + 6 divides = 30. The axes tensor is metadata: not read as data, not params (int64).
    c = cost_of(make_node("ReduceMean", [T([2, 3, 4]), W([1], INT64)], [T(None)], constants={1: [-1]}, keepdims=0))
    assert c.flops == 30
    assert c.bytes_read == 96
    assert c.bytes_written == 24
    assert c.params == 0


def test_reduce_sum_axes_input_opset13() -> None:
    # ReduceSum opset 13: axes [0, 2] as input, keepdims=1: [2,3,4] -> [1,3,1] = 3 outputs; 24 adds
    c = cost_of(make_node("ReduceSum", [T([2, 3, 4]), W([2], INT64)], [T(None)], constants={1: [0, 2]}))
    assert c.flops == 24
    assert c.bytes_written == 3 * 4


def test_reduce_all_axes_default() -> None:
    # no axes at all: reduce everything, keepdims default 1 -> [1,1,1]; Mean: 24 adds + 1 divide = 25
    c = cost_of(make_node("ReduceMean", [T([2, 3, 4])], [T(None)]))
    assert c.flops == 25
    assert c.bytes_written == 4


def test_noop_with_empty_axes() -> None:
    # noop_with_empty_axes=1 and no axes: the output is the input's shape [2,3,4] = 24 elements.
    # SumSquare: (square + add) per input + 0 per output = 48; written 24 * 4 = 96
    c = cost_of(make_node("ReduceSumSquare", [T([2, 3, 4])], [T(None)], noop_with_empty_axes=1))
    assert c.flops == 48
    assert c.bytes_written == 96


def test_dynamic_axes_with_known_output() -> None:
    # axes come from a non-constant input but shape inference knew the output [4]: 1024 adds
    c = cost_of(make_node("ReduceSum", [T([4, 256]), T([1], INT64)], [T([4])], keepdims=0))
    assert c.flops == 1024
    assert c.bytes_read == 4096


def test_dynamic_axes_unknown_output_raises() -> None:
    with pytest.raises(UnknownShape):
        cost_of(make_node("ReduceSum", [T([4, 256]), T([1], INT64)], [T(None)]))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims, out_shape", [(1, [4, 1]), (0, [4])])
def test_argmax_argmin(op: str, keepdims: int, out_shape: list[int]) -> None:
    # [4,256] along axis 1: 1 comparison per input = 1024; int64 indices: 4 * 8 = 32 bytes written
    # (output shape unknown: computed, and typed int64)
    c = cost_of(make_node(op, [T([4, 256])], [T(None, 0)], axis=1, keepdims=keepdims))
    assert c.flops == 1024
    assert c.bytes_read == 4096
    assert c.bytes_written == 32
    known = cost_of(make_node(op, [T([4, 256])], [T(out_shape, INT64)], axis=1, keepdims=keepdims))
    assert known.bytes_written == 32


def test_argmax_default_axis() -> None:
    # axis defaults to 0: [4,256] -> [1,256] = 256 int64 outputs; 1024 comparisons
    c = cost_of(make_node("ArgMax", [T([4, 256])], [T(None, INT64)]))
    assert c.flops == 1024
    assert c.bytes_written == 256 * 8


def test_qlinear_reduce_mean() -> None:
    # uint8 [1,64,7,7] = 3136 over axes [2,3] keepdims 1 -> [1,64,1,1] = 64 outputs
    # 3136 adds + 64 * (divide 1 + dequant 2 + requant 2) = 3136 + 320 = 3456
    # read 3136 + 2 float scales (8) + 2 uint8 zero points (2) = 3146; written 64; params 4
    ins = [T([1, 64, 7, 7], UINT8), W([]), W([], UINT8), W([]), W([], UINT8)]
    c = cost_of(make_node("QLinearReduceMean", ins, [T(None, UINT8)], domain="com.microsoft", axes=[2, 3], keepdims=1))
    assert c.flops == 3456
    assert c.bytes_read == 3146
    assert c.bytes_written == 64
    assert c.params == 4
