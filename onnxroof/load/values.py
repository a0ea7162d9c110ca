"""Input values: ``--value sr=16000`` gives a runtime input's value, a scalar or a list.

For the analysis the value is written into the model as a constant (an initializer of that input's name, the input
left declared), so that onnx's data propagation and the folding step resolve the shapes computed from it: a
sample rate that picks a branch, a length that sizes a buffer. For a run it is the input's feed. Either way the
input's shape is the value's: the declared (or ``--input``) shape where it is static, else a scalar for one number
and a vector for a list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from onnxroof.errors import UserError
from onnxroof.load.inputs import runtime_inputs
from onnxroof.load.tensors import NUMPY_DTYPE, from_array
from onnxroof.protos import ModelProto, ValueInfoProto

__all__ = ["Value", "parse_value", "value_arrays", "write_values"]

# A value as the caller gives it: the text of --value, numbers, or an array.
Value = str | float | Sequence[float] | np.ndarray

_BOOLS = {"true": 1, "false": 0}


def parse_value(text: str) -> list[float]:
    """'16000' -> [16000], '1,2,3' -> [1, 2, 3], '0.5' -> [0.5], 'true' -> [1]; a UserError for anything else."""
    numbers: list[float] = []
    for item in text.split(","):
        word = item.strip().lower()
        try:
            numbers.append(_BOOLS[word] if word in _BOOLS else int(word) if word.lstrip("-").isdigit() else float(word))
        except ValueError:
            raise UserError(f"bad value {text!r}", "write a number (16000) or a comma-separated list (1,2,3)") from None
    return numbers


def value_arrays(
    model: ModelProto,
    values: Mapping[str, Value],
    shapes: Mapping[str, tuple[int, ...]],
    dims: Mapping[str, int],
) -> dict[str, np.ndarray]:
    """Each valued runtime input's value as an array of its element type and shape, the shape also written into
    its declaration in ``model`` (a copy of the caller's). ``shapes`` (``--input``) and ``dims`` (``--dim``) give
    the shape where the declaration leaves it open."""
    if not values:
        return {}
    runtime = {vi.name: vi for vi in runtime_inputs(model.graph)}
    arrays = {}
    for name, value in values.items():
        if name not in runtime:
            raise UserError(
                f"--value {name}: the model has no input named {name!r}",
                "its inputs: " + (", ".join(runtime) or "none"),
            )
        vi = runtime[name]
        array = _array(vi, value, shapes.get(name), dims)
        tensor = vi.type.tensor_type
        tensor.shape.SetInParent()  # a scalar's shape is present with no dims
        del tensor.shape.dim[:]
        for d in array.shape:
            tensor.shape.dim.add().dim_value = d
        arrays[name] = array
    return arrays


def write_values(model: ModelProto, arrays: Mapping[str, np.ndarray]) -> None:
    """Write each value into ``model`` as a constant of its input's name: an initializer beside the declared input,
    which onnx's inference reads as the input's value and the loader as a weight (folded, never a runtime input)."""
    for name, array in arrays.items():
        model.graph.initializer.append(from_array(array, name))


def _array(vi: ValueInfoProto, value: Value, shape: tuple[int, ...] | None, dims: Mapping[str, int]) -> np.ndarray:
    """The value of input ``vi`` at its element type, in the shape it takes (see the module docstring)."""
    if not vi.type.HasField("tensor_type"):
        raise UserError(f"--value {vi.name}: the input is not a tensor", "give values to tensor inputs only")
    elem = vi.type.tensor_type.elem_type
    dtype = NUMPY_DTYPE.get(elem)
    if dtype is None:
        raise UserError(f"--value {vi.name}: onnxroof writes numeric values only", "give a numeric input's value")
    flat = np.asarray(parse_value(value) if isinstance(value, str) else value, dtype=np.float64).ravel()
    if np.issubdtype(dtype, np.integer) and not np.array_equal(flat, np.round(flat)):
        raise UserError(f"--value {vi.name}: the input is {dtype.name}, the value is not whole", "give whole numbers")
    if shape is None and isinstance(value, np.ndarray):
        shape = tuple(value.shape)  # an array brings its shape
    target = _shape_of(vi, flat.size, shape, dims)
    if prod(target) != flat.size:
        shown = "x".join(map(str, target)) or "a scalar"
        raise UserError(
            f"--value {vi.name}: {flat.size} number(s) for an input of shape {shown} ({prod(target)} elements)",
            f"give {prod(target)} comma-separated numbers, or the shape with --input {vi.name}=...",
        )
    return flat.astype(dtype).reshape(target)


def _shape_of(
    vi: ValueInfoProto, count: int, given: tuple[int, ...] | None, dims: Mapping[str, int]
) -> tuple[int, ...]:
    """The shape a value of ``count`` numbers takes: ``given`` (--input), else the declared shape with ``dims``
    written in where every dim is then known, else a scalar (one number, no declared rank or rank 0) or a vector
    (a declared rank of at most 1)."""
    if given is not None:
        return given
    tensor = vi.type.tensor_type
    if not tensor.HasField("shape"):
        return () if count == 1 else (count,)
    declared = [d.dim_value if d.HasField("dim_value") else dims.get(d.dim_param) for d in tensor.shape.dim]
    known = [d for d in declared if d is not None]
    if len(known) == len(declared):
        return tuple(known)
    if len(declared) == 1:
        return (count,)
    raise UserError(
        f"--value {vi.name}: the input's shape has open dims, and {count} number(s) do not say which",
        f"give its shape too: --input {vi.name}=SHAPE",
    )
