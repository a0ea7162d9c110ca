"""Small builders shared by the tests: tensors and node views for cost functions, and tiny ONNX models."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from onnx import TensorProto

from onnxroof.costs import Cost, NodeView, Tensor

FLOAT = TensorProto.FLOAT
FLOAT16 = TensorProto.FLOAT16
INT8 = TensorProto.INT8
UINT8 = TensorProto.UINT8
INT32 = TensorProto.INT32
INT64 = TensorProto.INT64
BOOL = TensorProto.BOOL


def T(shape: Sequence[int] | None, dtype: int = FLOAT, weight: bool = False, name: str | None = None) -> Tensor:
    """A tensor spec; the name is filled in by make_node when not given."""
    return Tensor(name or "", dtype, None if shape is None else tuple(shape), weight)


def W(shape: Sequence[int], dtype: int = FLOAT, name: str | None = None) -> Tensor:
    """A weight tensor spec."""
    return T(shape, dtype, True, name)


def make_node(
    op_type: str,
    inputs: Sequence[Tensor | None],
    outputs: Sequence[Tensor | None],
    *,
    domain: str = "",
    constants: dict[int, Any] | None = None,
    cost_subgraph=None,
    **attrs: Any,
) -> NodeView:
    """A NodeView with unnamed tensors named in0, in1, ..., out0, ... so that distinct specs stay distinct."""
    named_in = tuple(
        None if t is None else (t if t.name else Tensor(f"in{i}", t.dtype, t.shape, t.is_weight))
        for i, t in enumerate(inputs)
    )
    named_out = tuple(
        None if t is None else (t if t.name else Tensor(f"out{i}", t.dtype, t.shape, t.is_weight))
        for i, t in enumerate(outputs)
    )
    consts = {i: np.asarray(v) for i, v in (constants or {}).items()}
    return NodeView(f"{op_type}_0", op_type, domain, named_in, named_out, attrs, consts, cost_subgraph)


def cost_of(node: NodeView) -> Cost:
    """The registered cost of a node; fails the test when the op has no cost function."""
    from onnxroof.costs import lookup

    fn = lookup(node.domain, node.op_type)
    assert fn is not None, f"no cost function for {node.domain}::{node.op_type}"
    return fn(node)


def record_parking(monkeypatch: Any) -> list[bool]:
    """Record, per session made through runtime.make_session, whether it asked for its thread pool to park when a
    run returns; the sessions are still made."""
    from onnxroof import runtime

    seen: list[bool] = []
    real = runtime.make_session

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("park_when_idle", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(runtime, "make_session", recording)
    return seen
