"""The analysis graph: tensors with their element type, static shape and weight flag; nodes; the graph.

Loading (``onnxroof.load``) builds a Graph from an ONNX file; costing (``onnxroof.costs``) and prediction
(``onnxroof.predict``) read it. Nothing here imports another part of onnxroof.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import TYPE_CHECKING, Any, NamedTuple

from onnxroof.errors import UserError
from onnxroof.protos import TensorProto

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_DOMAINS",
    "Graph",
    "InvalidNode",
    "Node",
    "Tensor",
    "UnknownShape",
    "dtype_size",
    "format_shape",
    "op_domain",
]

# The standard operator set's two spellings of its domain.
DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})


def op_domain(domain: str) -> str:
    """'' for the standard ONNX domain however it is spelled; any other domain as it is."""
    return "" if domain in DEFAULT_DOMAINS else domain


# Element sizes in bytes per ONNX element type. Sub-byte types (int4/uint4/float4) are rounded per element to
# half a byte; strings have no fixed size and count as 0 (they never carry compute).
_DTYPE_SIZE: dict[int, float] = {
    TensorProto.FLOAT: 4,
    TensorProto.UINT8: 1,
    TensorProto.INT8: 1,
    TensorProto.UINT16: 2,
    TensorProto.INT16: 2,
    TensorProto.INT32: 4,
    TensorProto.INT64: 8,
    TensorProto.STRING: 0,
    TensorProto.BOOL: 1,
    TensorProto.FLOAT16: 2,
    TensorProto.DOUBLE: 8,
    TensorProto.UINT32: 4,
    TensorProto.UINT64: 8,
    TensorProto.COMPLEX64: 8,
    TensorProto.COMPLEX128: 16,
    TensorProto.BFLOAT16: 2,
}
for _name, _size in (
    ("FLOAT8E4M3FN", 1),
    ("FLOAT8E4M3FNUZ", 1),
    ("FLOAT8E5M2", 1),
    ("FLOAT8E5M2FNUZ", 1),
    ("FLOAT8E8M0", 1),
    ("UINT4", 0.5),
    ("INT4", 0.5),
    ("FLOAT4E2M1", 0.5),
    ("UINT2", 0.25),
    ("INT2", 0.25),
):
    if hasattr(TensorProto, _name):
        _DTYPE_SIZE[getattr(TensorProto, _name)] = _size


def dtype_size(elem_type: int) -> float:
    """Bytes per element of an ONNX element type (0 for an unknown or undefined type)."""
    return _DTYPE_SIZE.get(elem_type, 0)


class UnknownShape(Exception):
    """A cost function needed a tensor shape that shape inference could not resolve."""


class InvalidNode(Exception):
    """A node that no valid graph holds: shapes that contradict each other (operands that cannot broadcast, inputs
    of a Concat that differ off its axis) or an attribute out of its range or of the wrong kind. Unlike
    UnknownShape, the graph is wrong, not merely unresolved. The message names the shapes or the attribute; the
    analysis adds the node (``user_error``)."""

    def user_error(self, name: str, op_type: str) -> UserError:
        """The user's error this makes of node ``name``: the model is invalid as given."""
        return UserError(
            f"invalid model: node {name!r} ({op_type}): {self}",
            "the model's shapes or attributes contradict each other: "
            "check the exporter, or the shapes given with --input and --dim",
        )


def format_shape(shape: Sequence[int] | None) -> str:
    """A shape as error messages write it: [1, 4, 28, 28], [] for a scalar, ? when unknown."""
    return "?" if shape is None else "[" + ", ".join(str(int(d)) for d in shape) + "]"


class Tensor(NamedTuple):
    """A value in the graph: its name, element type, static shape (None when unknown) and whether it is a weight.

    A named tuple rather than a dataclass: immutable like one, and built by a C-level constructor with no
    Python-level __init__, which matters because a large graph builds one per tensor.
    """

    name: str
    dtype: int
    shape: tuple[int, ...] | None
    is_weight: bool = False

    @property
    def known(self) -> bool:
        return self.shape is not None

    @property
    def rank(self) -> int:
        return len(self.need_shape())

    @property
    def numel(self) -> int:
        return prod(self.need_shape())

    @property
    def itemsize(self) -> float:
        return _DTYPE_SIZE.get(self.dtype, 0)

    @property
    def nbytes(self) -> float:
        return prod(self.need_shape()) * _DTYPE_SIZE.get(self.dtype, 0)

    def need_shape(self) -> tuple[int, ...]:
        """The shape, or UnknownShape naming this tensor."""
        if self.shape is None:
            raise UnknownShape(self.name)
        return self.shape


@dataclass(slots=True)
class Node:
    """One node of the graph, with attributes as plain Python values and its subgraphs (If/Loop/Scan) loaded.

    Read-only by convention. Not a frozen dataclass: a frozen one's __init__ must set every field through
    object.__setattr__ (the dataclasses documentation notes the cost), and loading a graph of tens of thousands
    of nodes builds one per node.
    """

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    folded: bool = False
    subgraphs: Mapping[str, Graph] = field(default_factory=dict)


@dataclass(frozen=True)
class Graph:
    """A graph ready for costing: nodes in topological order and every tensor's dtype, shape and weight flag;
    ``shapes_from_run`` names the tensors whose shapes came from a run of the model rather than inference."""

    name: str
    nodes: tuple[Node, ...]
    tensors: Mapping[str, Tensor]
    constants: Mapping[str, np.ndarray]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    opset: int = 0
    ir_version: int = 0
    warnings: tuple[str, ...] = ()
    shapes_from_run: tuple[str, ...] = ()

    def tensor(self, name: str) -> Tensor | None:
        """The tensor of that name, or None for an omitted optional input ('')."""
        if not name:
            return None
        return self.tensors.get(name) or Tensor(name, TensorProto.UNDEFINED, None, False)
