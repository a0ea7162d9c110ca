"""The what-if precisions an analysis can store and compute tensors at, and the element type each stores
floating-point tensors in."""

from __future__ import annotations

from onnxroof.devices import PRECISIONS
from onnxroof.errors import UserError
from onnxroof.protos import TensorProto

__all__ = ["PRECISION_DTYPE", "check_precision"]

# Element type a "what if" precision stores floating-point tensors in (paper 000's 8/16/32/64-bit study).
PRECISION_DTYPE: dict[str, int] = {
    "fp64": TensorProto.DOUBLE,
    "fp32": TensorProto.FLOAT,
    "tf32": TensorProto.FLOAT,  # TF32 computes at reduced precision but stores 32-bit floats
    "fp16": TensorProto.FLOAT16,
    "bf16": TensorProto.BFLOAT16,
    "fp8": getattr(TensorProto, "FLOAT8E4M3FN", TensorProto.INT8),
    "int8": TensorProto.INT8,
}


def check_precision(precision: str | None) -> None:
    """A UserError for a what-if precision onnxroof does not know (None, the tensors' own types, is fine)."""
    if precision is not None and precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}", "choose one of " + ", ".join(PRECISIONS))
