"""Work on subnormal floats: an attention mask's large negative scores, and the products that read what they leave.

Swin's shifted windows add a mask of -100 to the scores of the positions that come from another region before
their Softmax. ``exp`` of a score that far below the row's maximum falls under the smallest normal float32
(2^-126, ``exp(-87.34)``): computing it, the CPU's vector units take a slow path for every such element, and where
it lands above the smallest subnormal (2^-149, ``exp(-103.28)``) the Softmax writes a subnormal probability. The
product of those probabilities with the values (attention's second MatMul) then multiplies subnormal operands,
each of its multiply-adds on the slow path too. On a CPU that handles subnormals in hardware at full speed neither
costs anything; on one that assists them in microcode a masked Swin block's Softmax and MatMul take many times
their time on normal floats, whatever their FLOPs.

The counts come from the graph alone: the mask is a constant added to the scores (through reshapes) and its
values decide, element by element, where ``exp`` underflows. The time per element is the device's: its
``softmax_underflow`` (seconds per Softmax element whose exp underflows) and ``subnormal_product`` (seconds per
multiply-add with a subnormal operand), calibrated on a masked attention block against the same block unmasked.
A score's distance below its row's maximum is the mask's value plus the scores' own spread, which is small against
these bounds in a trained or random network alike; the counts take the mask's value alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from onnxroof.devices import Device
from onnxroof.ir import Graph, Node
from onnxroof.predict.memory import VIEW_OPS

__all__ = [
    "EXP_NORMAL_FLOOR",
    "EXP_SUBNORMAL_FLOOR",
    "SubnormalWork",
    "mask_candidates",
    "subnormal_time",
    "subnormal_work",
]

# exp(x) is a normal float32 for x >= ln(2^-126) and a subnormal one down to ln(2^-149), below which it rounds to 0.
EXP_NORMAL_FLOOR = math.log(2.0**-126)  # -87.3365...
EXP_SUBNORMAL_FLOOR = math.log(2.0**-149)  # -103.2789...

_PRODUCTS = frozenset({"MatMul", "FusedMatMul"})


@dataclass(frozen=True)
class SubnormalWork:
    """A node's work on the slow path: ``underflows``, the Softmax elements whose exp falls below the normal
    range, and ``products``, the multiply-adds of a matrix product with a subnormal operand."""

    underflows: int = 0
    products: int = 0


def _producers(graph: Graph) -> dict[str, Node]:
    return {out: node for node in graph.nodes if not node.folded for out in node.outputs}


def _before_views(name: str, producers: Mapping[str, Node]) -> str:
    """The tensor ``name`` is a view of (``memory.VIEW_OPS``: a reshape passes its elements on unchanged)."""
    while (node := producers.get(name)) is not None and node.op_type in VIEW_OPS and node.domain == "" and node.inputs:
        name = node.inputs[0]
    return name


def _mask_adds(graph: Graph, softmax: Node, producers: Mapping[str, Node]) -> list[tuple[str, str]]:
    """(constant operand, Add output) of each Add with a constant operand on the Softmax's input, walking back
    through reshapes and such Adds (a relative position bias, then the mask) to whatever computed the scores."""
    found = []
    name = _before_views(softmax.inputs[0], producers) if softmax.inputs else ""
    while (node := producers.get(name)) is not None and node.op_type == "Add" and node.domain == "":
        constant = [i for i in node.inputs if _is_weight(graph, i)]
        if len(node.inputs) != 2 or len(constant) != 1:
            break
        found.append((constant[0], node.outputs[0]))
        name = _before_views(node.inputs[1] if node.inputs[0] == constant[0] else node.inputs[0], producers)
    return found


def _is_weight(graph: Graph, name: str) -> bool:
    tensor = graph.tensor(name)
    return tensor is not None and tensor.is_weight


def _softmaxes(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if not n.folded and n.op_type == "Softmax" and n.domain == ""]


def mask_candidates(graph: Graph) -> set[str]:
    """The constants added to a Softmax's input whose values the graph lacks (large initializers are loaded
    without them): what a caller holding the weights fills into ``graph.constants`` for :func:`subnormal_work`."""
    producers = _producers(graph)
    return {
        name
        for softmax in _softmaxes(graph)
        for name, _ in _mask_adds(graph, softmax, producers)
        if name not in graph.constants
    }


def _counts(mask: np.ndarray, out_elements: int) -> tuple[int, int]:
    """(elements whose exp underflows, of which subnormal) of an Add's ``out_elements`` outputs, the constant
    ``mask`` broadcast over them (each of its values repeats ``out_elements / mask.size`` times)."""
    values = np.asarray(mask)
    if values.size == 0 or out_elements % values.size:
        return 0, 0
    repeat = out_elements // values.size
    below = values < EXP_NORMAL_FLOOR
    subnormal = below & (values >= EXP_SUBNORMAL_FLOOR)
    return int(below.sum()) * repeat, int(subnormal.sum()) * repeat


def subnormal_work(graph: Graph) -> dict[str, SubnormalWork]:
    """Per node with any, its work on subnormal floats: each Softmax whose input carries a constant mask with
    values below ``EXP_NORMAL_FLOOR`` (its underflowing elements), and each MatMul whose first operand is such a
    Softmax's output through reshapes (its subnormal elements times the columns each one multiplies). A mask
    whose values the graph lacks counts nothing (see :func:`mask_candidates`)."""
    producers = _producers(graph)
    work: dict[str, SubnormalWork] = {}
    subnormal_outputs: dict[str, int] = {}
    for softmax in _softmaxes(graph):
        underflows = subnormal = 0
        for name, out in _mask_adds(graph, softmax, producers):
            values, added = graph.constants.get(name), graph.tensor(out)
            shape = added.shape if added is not None else None
            if values is None or shape is None:
                continue
            below, sub = _counts(values, math.prod(shape))
            underflows, subnormal = max(underflows, below), max(subnormal, sub)
        if underflows:
            work[softmax.name] = SubnormalWork(underflows=underflows)
        if subnormal:
            subnormal_outputs[softmax.outputs[0]] = subnormal
    if not subnormal_outputs:
        return work
    for node in graph.nodes:
        if node.folded or node.op_type not in _PRODUCTS or len(node.inputs) < 2:
            continue
        name = _before_views(node.inputs[0], producers)
        b = graph.tensor(node.inputs[1])
        if name in subnormal_outputs and b is not None and b.shape is not None and len(b.shape) >= 2:
            columns = b.shape[-2] if node.attrs.get("transB") else b.shape[-1]
            work[node.name] = SubnormalWork(products=subnormal_outputs[name] * int(columns))
    return work


def subnormal_time(device: Device, work: SubnormalWork | None) -> float:
    """Seconds a node's subnormal work adds on ``device``: its underflowing Softmax elements at the device's
    ``softmax_underflow`` and its subnormal multiply-adds at its ``subnormal_product`` (0 without them)."""
    if work is None:
        return 0.0
    underflow = device.softmax_underflow.value if device.softmax_underflow is not None else 0.0
    product = device.subnormal_product.value if device.subnormal_product is not None else 0.0
    return work.underflows * underflow + work.products * product
