"""Small tensors between TensorProto and numpy without onnx.numpy_helper: read and written as numpy_helper reads
them, in raw bytes and in the typed fields an exporter may write instead."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper, numpy_helper

from onnxroof.load.tensors import from_array, to_array

i64 = lambda *v: np.array(v, np.int64)  # noqa: E731


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16])
@pytest.mark.parametrize("raw", [True, False])
def test_small_tensors_read_as_numpy_helper_reads_them(dtype: Any, raw: bool):
    value = np.array([[1, 2, 3], [4, 5, 127]], dtype=dtype)
    stored = numpy_helper.from_array(value, "t")
    if not raw:  # the typed fields an exporter may write instead of raw bytes
        elem_type = stored.data_type
        stored = helper.make_tensor("t", elem_type, value.shape, value.reshape(-1).tolist())
    np.testing.assert_array_equal(to_array(stored), numpy_helper.to_array(stored))
    assert to_array(stored).dtype == numpy_helper.to_array(stored).dtype


@pytest.mark.parametrize(
    "value",
    [
        i64(1, -2, 2**40),
        np.array([True, False]),
        np.array([7, 8], np.int32),
        np.array([3, 4], np.uint64),
        np.array([1.5], np.float32),
    ],
)
def test_small_tensors_written_read_back_and_as_numpy_helper_reads_them(value: np.ndarray):
    tensor = from_array(value, "v")
    np.testing.assert_array_equal(numpy_helper.to_array(tensor), value)
    assert to_array(tensor).dtype == value.dtype and to_array(tensor).tolist() == value.tolist()
