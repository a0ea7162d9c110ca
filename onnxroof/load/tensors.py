"""Small tensors between TensorProto and numpy, for the values loading reads (small initializers, Constant
attributes) and gives (folded shape values), without onnx.numpy_helper, whose import brings ml_dtypes.

The element types here are those numpy holds natively; any other (bfloat16, the float8 and 4-bit types,
strings) goes through onnx.numpy_helper.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxroof.protos import TensorProto

# ONNX element type -> numpy dtype, for the types numpy holds natively.
NUMPY_DTYPE: dict[int, np.dtype[Any]] = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.INT8: np.dtype(np.int8),
    TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.INT16: np.dtype(np.int16),
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.BOOL: np.dtype(np.bool_),
    TensorProto.FLOAT16: np.dtype(np.float16),
    TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.UINT32: np.dtype(np.uint32),
    TensorProto.UINT64: np.dtype(np.uint64),
}
ONNX_DTYPE = {dtype: elem_type for elem_type, dtype in NUMPY_DTYPE.items()}

# The repeated field a type's values sit in when they are not raw bytes (onnx.proto: TensorProto's data fields).
_FIELD: dict[int, str] = {
    TensorProto.FLOAT: "float_data",
    TensorProto.DOUBLE: "double_data",
    TensorProto.INT64: "int64_data",
    TensorProto.UINT32: "uint64_data",
    TensorProto.UINT64: "uint64_data",
}  # every other native type: int32_data (float16 as its bit pattern)


def to_array(t: TensorProto) -> np.ndarray:
    """The value of an inline tensor, as onnx.numpy_helper.to_array gives it."""
    dtype = NUMPY_DTYPE.get(t.data_type)
    if dtype is None:
        from onnx import numpy_helper

        return numpy_helper.to_array(t)
    dims = tuple(t.dims)
    if t.HasField("raw_data"):
        flat = np.frombuffer(t.raw_data, dtype=dtype.newbyteorder("<")).astype(dtype)
    elif t.data_type == TensorProto.FLOAT16:
        flat = np.array(t.int32_data, dtype=np.uint16).view(np.float16)
    else:
        flat = np.array(getattr(t, _FIELD.get(t.data_type, "int32_data")), dtype=dtype)
    return flat.reshape(dims)


def from_array(value: np.ndarray, name: str) -> TensorProto:
    """A TensorProto named ``name`` holding ``value`` as raw little-endian bytes; a type numpy does not hold
    natively goes through onnx.numpy_helper."""
    elem_type = ONNX_DTYPE.get(value.dtype)
    if elem_type is None:
        from onnx import numpy_helper

        return numpy_helper.from_array(value, name)
    t = TensorProto(name=name, data_type=elem_type, dims=value.shape)
    t.raw_data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
    return t
