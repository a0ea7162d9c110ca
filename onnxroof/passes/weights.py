"""Weight values for the passes that need them, and weights that have shapes but no values.

A weight whose data is external and absent (a graph-only model, see :mod:`.model_file`) has no values; a pass
that creates weights from such a weight creates them absent too: dims and dtype, pointing at external data under
:data:`ABSENT`, a location that is never a file (onnx's own containers mark data that is not on disk with '#').
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

__all__ = ["ABSENT", "absent_tensor", "all_tensors", "has_values", "is_absent", "mark_absent", "tensor", "values"]

ABSENT = "#absent-weights"


def is_absent(proto: TensorProto) -> bool:
    """Whether ``proto``'s data is external (external data that exists is loaded when a model is read)."""
    return proto.data_location == TensorProto.EXTERNAL


def has_values(model: onnx.ModelProto) -> bool:
    """Whether every initializer of the main graph carries its values."""
    return not any(is_absent(init) for init in model.graph.initializer)


def all_tensors(model: onnx.ModelProto) -> list[TensorProto]:
    """Every tensor of the model that can hold external data: initializers and Constant values, subgraphs too."""
    found: list[TensorProto] = []

    def visit(graph: onnx.GraphProto) -> None:
        found.extend(graph.initializer)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    found.append(attr.t)
                elif attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        visit(sub)

    visit(model.graph)
    return found


def mark_absent(model: onnx.ModelProto) -> None:
    """Point every external tensor of ``model`` (in place) whose location names a file at :data:`ABSENT`: for a
    copy that onnx's checker and shape inference read, which need no weight values but look for a named file
    (relative to the working directory for a model in memory) and fail where it is missing."""
    for proto in all_tensors(model):
        if not is_absent(proto):
            continue
        for entry in proto.external_data:
            if entry.key == "location" and not entry.value.startswith("#"):
                entry.value = ABSENT


def values(proto: TensorProto) -> np.ndarray | None:
    """The values of an initializer, or None where they are absent."""
    return None if is_absent(proto) else numpy_helper.to_array(proto)


def tensor(name: str, array: np.ndarray) -> TensorProto:
    """An initializer holding ``array``."""
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def absent_tensor(name: str, dims: Sequence[int], dtype: int) -> TensorProto:
    """An initializer with ``dims`` and ``dtype`` (onnx TensorProto enum) whose values are absent."""
    proto = TensorProto(name=name, data_type=dtype, dims=list(dims))
    proto.data_location = TensorProto.EXTERNAL
    size = int(np.prod(dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(dtype).itemsize
    for key, value in (("location", ABSENT), ("offset", "0"), ("length", str(size))):
        entry = proto.external_data.add()
        entry.key, entry.value = key, value
    return proto
