"""Per-node values in the node-data format of Google's Model Explorer, which colours a graph by a value.

The format is what Model Explorer's node data builder writes (``model_explorer.node_data_builder``): a JSON object
from graph id to that graph's data, ``{"results": {node id: {"value": number}}, "gradient": [...]}`` or with
``"thresholds"`` instead of a gradient. A gradient's stops run from 0 (the smallest value in ``results``) to 1
(the largest); a threshold colours the values up to its own and above the previous one.

Node ids are the ones Model Explorer's ONNX adapter (model-explorer-onnx) gives: it runs onnx-ir's NameFixPass
first, which keeps a node's name where it is unique in its graph, and names the rest from a preferred name (the
node's own, or "node" for one without) made unique with a counter shared by the whole model: "node", "node_1",
"node_2", ... in the order it walks the nodes (each node, then its subgraphs). The main graph's id is its name
(``<main>`` without one). Sources: [model-explorer] in docs/references.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from onnx import AttributeProto, GraphProto, ModelProto

from onnxroof.predict.analysis import NodeResult
from onnxroof.predict.roofline import BOUNDS, NO_BOUND

__all__ = ["BOUND_CODES", "VALUES", "explorer_graph_id", "explorer_node_ids", "node_data", "node_data_json"]

# The numbers a bound is written as (Model Explorer's values are numbers), each coloured by a threshold; 0 is a
# node that costs nothing at run time (a shape-only op).
BOUND_CODES: dict[str, int] = {NO_BOUND: 0, **{bound: index + 1 for index, bound in enumerate(BOUNDS)}}
_BOUND_COLOURS = {NO_BOUND: "#eeeeee", "compute": "#d62728", "memory": "#1f77b4", "overhead": "#9467bd"}

# A yellow-to-red gradient (ColorBrewer's YlOrRd): the largest values are the hottest.
_HEAT = ({"stop": 0, "bgColor": "#ffffcc"}, {"stop": 0.5, "bgColor": "#fd8d3c"}, {"stop": 1, "bgColor": "#bd0026"})

# What --model-explorer-value picks: the value of a node, and its unit in words.
VALUES: dict[str, tuple[Callable[[NodeResult], float], str]] = {
    "time": (lambda r: r.prediction.predicted_time_s * 1e6, "predicted time in microseconds"),
    "bound": (lambda r: BOUND_CODES.get(r.prediction.bound, 0), "bound: 0 none, 1 compute, 2 memory, 3 overhead"),
    "intensity": (lambda r: r.cost.arithmetic_intensity, "arithmetic intensity in FLOP/B"),
    "flops": (lambda r: r.cost.flops, "FLOPs"),
}


def explorer_graph_id(graph: GraphProto) -> str:
    """The id Model Explorer's ONNX adapter gives the main graph: its name, "<main>" when it has none."""
    return graph.name if graph.HasField("name") else "<main>"


def explorer_node_ids(graph: GraphProto) -> list[str]:
    """The ids Model Explorer's ONNX adapter gives a graph's top-level nodes, in order (see the module docstring).
    Subgraphs are walked too: their unnamed nodes advance the shared counter."""
    counter: Counter[str] = Counter()

    def unique(preferred: str, used: set[str]) -> str:
        name = preferred
        while name in used:
            counter[preferred] += 1
            name = f"{preferred}_{counter[preferred]}"
        used.add(name)
        return name

    def visit(g: GraphProto, ids: list[str] | None) -> None:
        used: set[str] = set()  # names are unique within one graph
        for node in g.node:
            name = unique(node.name or "node", used)
            if ids is not None:
                ids.append(name)
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    visit(attr.g, None)
                elif attr.type == AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        visit(sub, None)

    top: list[str] = []
    visit(graph, top)
    return top


def node_data(model: ModelProto, results: Sequence[NodeResult | None], value: str = "time") -> dict[str, Any]:
    """Model Explorer node data for the main graph: each analyzed node's ``value`` (a key of VALUES) by node id,
    coloured by a yellow-to-red gradient, or for ``bound`` by one colour per bound. ``results`` follows
    ``model.graph.node`` (None for a node without values, as annotate.Annotated.results has it)."""
    if value not in VALUES:
        raise ValueError(f"unknown node value {value!r}: one of {', '.join(VALUES)}")
    read, _ = VALUES[value]
    ids = explorer_node_ids(model.graph)
    data: dict[str, Any] = {
        "results": {node_id: {"value": read(r)} for node_id, r in zip(ids, results) if r is not None},
    }
    if value == "bound":
        data["thresholds"] = [{"value": code, "bgColor": _BOUND_COLOURS[b]} for b, code in BOUND_CODES.items()]
    else:
        data["gradient"] = [dict(stop) for stop in _HEAT]
    return {explorer_graph_id(model.graph): data}


def node_data_json(model: ModelProto, results: Sequence[NodeResult | None], value: str = "time") -> str:
    """:func:`node_data` as the JSON text Model Explorer loads."""
    return json.dumps(node_data(model, results, value), indent=2) + "\n"
