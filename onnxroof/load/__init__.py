"""Loading: an ONNX file (or proto, or zoo:NAME) -> the analysis Graph, shapes inferred, weights identified.

The public surface of the loading stage; everything else in the package is its own business.
"""

from __future__ import annotations

from onnxroof.load.graph import (
    MIN_IR_VERSION,
    MIN_OPSET,
    NON_DETERMINISTIC,
    fix_inputs,
    graph_nodes,
    load_graph,
    parse_shape,
    read_model,
    runtime_inputs,
)
from onnxroof.load.infer import STRIPPED

__all__ = [
    "MIN_IR_VERSION",
    "MIN_OPSET",
    "NON_DETERMINISTIC",
    "STRIPPED",
    "fix_inputs",
    "graph_nodes",
    "load_graph",
    "parse_shape",
    "read_model",
    "runtime_inputs",
]
