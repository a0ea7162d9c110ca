"""Loading: an ONNX file (or proto, or zoo:NAME) -> the analysis Graph, shapes inferred, weights identified.

The public surface of the loading stage; everything else in the package is its own business. The modules, in
the order a model goes through them: read (the model and its graph as plain values), inputs (input shapes
fixed), infer (the ordered inference steps: standins, fold, symbolic; lean gives them the model with its large
weights as typed inputs), assemble (the Graph, built once); graph (load_graph) runs them in that order.
"""

from __future__ import annotations

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
