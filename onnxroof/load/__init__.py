"""Loading: an ONNX file (or proto, or zoo:NAME) -> the analysis Graph, shapes inferred, weights identified.

The public surface of the loading stage; everything else in the package is its own business. The modules, in
the order a model goes through them: source (what a model source names, checked before anything is read), read
(the model and its graph as plain values), inputs (input shapes fixed), infer (the ordered inference steps:
standins, fold, symbolic; lean gives them the model with its large weights as typed inputs), assemble (the
Graph, built once); graph (load_graph) runs them in that order.

The names below are resolved on first use, so that importing a light module of the package (source) imports
neither numpy nor onnx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnxroof.load.assemble import NON_DETERMINISTIC, graph_nodes
    from onnxroof.load.graph import MIN_IR_VERSION, MIN_OPSET, load_graph
    from onnxroof.load.inputs import fix_inputs, parse_shape, runtime_inputs
    from onnxroof.load.read import STRIPPED, read_model

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

_MODULE = {
    "NON_DETERMINISTIC": "assemble",
    "graph_nodes": "assemble",
    "MIN_IR_VERSION": "graph",
    "MIN_OPSET": "graph",
    "load_graph": "graph",
    "fix_inputs": "inputs",
    "parse_shape": "inputs",
    "runtime_inputs": "inputs",
    "STRIPPED": "read",
    "read_model": "read",
}


def __getattr__(name: str) -> Any:
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
