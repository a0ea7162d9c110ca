"""Annotations: an analysis written into the model it describes, as node and model ``metadata_props``.

Netron, the viewer ONNX files are opened in, shows a node's ``metadata_props`` when the node is selected and the
model's when nothing is; Model Explorer's ONNX adapter shows them too. Every key is namespaced ``onnxroof.`` and
every value is a readable string with its unit ("1.23 GFLOP", "4.5 MB", "12.3 FLOP/B", "memory", "0.123 ms").
Nothing else of the model changes: same graph, same weights, same outputs.

The analysis must be of the graph as exported (on a calibrated host: ``onnxroof.analyze(..., as_exported=True)``):
the nodes of onnxruntime's optimized graph (fused convolutions, NCHWc layouts) do not exist in the file.
Sources: [netron] and [model-explorer] in docs/references.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from onnx import AttributeProto, GraphProto, ModelProto, NodeProto

from onnxroof.errors import UserError
from onnxroof.predict.analysis import Analysis, NodeResult
from onnxroof.report.format import seconds, si, wrap

__all__ = [
    "PREFIX",
    "Annotated",
    "annotate",
    "loader_names",
    "match_nodes",
    "node_values",
    "render_annotation",
    "summary_values",
]

PREFIX = "onnxroof."  # every key this module writes starts with it; re-annotating replaces exactly these keys

FOLDED_NOTE = "computed from weights and static shapes only: folded once at load time, no per-run cost"


@dataclass(frozen=True)
class Annotated:
    """An annotated copy of a model and what was matched.

    ``results`` follows ``model.graph.node``: each top-level node's analysis result, or None for a node folded at
    load time (computed from weights only). ``in_subgraphs`` counts the nodes inside If/Loop/Scan bodies: they
    get no values of their own, their cost is the enclosing node's.
    """

    model: ModelProto
    results: tuple[NodeResult | None, ...]
    in_subgraphs: int

    @property
    def annotated(self) -> int:
        return sum(r is not None for r in self.results)

    @property
    def folded(self) -> int:
        return sum(r is None for r in self.results)


def loader_names(graph: GraphProto) -> list[str]:
    """The names the loader gives a graph's nodes, in order: a node's own name, or "<op_type>_<index>" for one
    without (onnxroof.load.read names unnamed nodes so)."""
    return [node.name or f"{node.op_type}_{index}" for index, node in enumerate(graph.node)]


def match_nodes(graph: GraphProto, analysis: Analysis) -> list[NodeResult | None]:
    """Each top-level node's result in ``analysis``, or None for a node the analysis folded.

    The analysis lists the graph's runtime nodes in graph order, named as :func:`loader_names` names them, and
    leaves out the folded ones. The two lists are merged in order: a node takes the next result when its loader
    name and op type are that result's, else it was folded. Matching by position and name together gives the
    right node even where names repeat or are generated. Every result must find its node and the nodes left
    without one must be as many as the analysis folded: an analysis of another graph (or of onnxruntime's
    optimized graph) is refused.
    """
    if analysis.graph != "as-exported":
        raise UserError(
            f"the analysis is of the {analysis.graph} graph, whose nodes are not the file's",
            "analyze the graph as exported (onnxroof.analyze(..., as_exported=True), or --as-exported)",
        )
    results: list[NodeResult | None] = []
    pending = iter(analysis.nodes)
    current = next(pending, None)
    for name, node in zip(loader_names(graph), graph.node):
        if current is not None and current.name == name and current.op_type == node.op_type:
            results.append(current)
            current = next(pending, None)
        else:
            results.append(None)
    if current is not None:
        raise UserError(
            f"the analysis' node {current.name!r} ({current.op_type}) is not among the model's nodes in order",
            "annotate the model with an analysis of the same model",
        )
    unmatched = results.count(None)
    if unmatched != analysis.folded_nodes:
        raise UserError(
            f"{unmatched} of the model's {len(results)} nodes have no result where the analysis folded "
            f"{analysis.folded_nodes}: it is the analysis of another model",
            "annotate the model with an analysis of the same model",
        )
    return results


def node_values(result: NodeResult, analysis: Analysis) -> dict[str, str]:
    """The values written into one node's metadata_props, readable strings with units."""
    c, p = result.cost, result.prediction
    moved = c.bytes_read + c.bytes_written
    total_time = analysis.totals.predicted_time_s
    values = {
        "flops": si(c.flops, "FLOP"),
        "macs": si(c.macs, "MAC"),
        "bytes": si(moved, "B"),
        "bytes_read": si(c.bytes_read, "B"),
        "bytes_written": si(c.bytes_written, "B"),
        "params": si(c.params),
        "intensity": f"{c.arithmetic_intensity:.3g} FLOP/B",
        "bound": p.bound,
        "predicted_time": seconds(p.predicted_time_s),
        "compute_time": seconds(p.compute_time_s),
        "memory_time": seconds(p.memory_time_s),
        "overhead_time": seconds(p.overhead_time_s),
        "time_share": f"{100 * p.predicted_time_s / total_time:.3g}%" if total_time else "0%",
        "precision": p.precision,
        "device": analysis.device.key,
    }
    if c.note:
        values["note"] = c.note
    if not result.supported:
        values["supported"] = "no: charged its tensor bytes only"
    return {PREFIX + key: value for key, value in values.items()}


def summary_values(analysis: Analysis, annotated: int, folded: int, in_subgraphs: int) -> dict[str, str]:
    """The model-level values: device, precision, totals, predicted time and its split by bound, the nodes that
    carry values and why the others do not. No dates: the same model and device give the same file."""
    from onnxroof import __version__

    t, p, d = analysis.totals, analysis.totals.prediction, analysis.device
    total = p.predicted_time_s
    share = {bound: 100 * time / total if total else 0.0 for bound, time in t.time_by_bound.items()}
    by_bound = ", ".join(f"{bound} {seconds(time)} ({share[bound]:.3g}%)" for bound, time in t.time_by_bound.items())
    precision = analysis.precision if analysis.precision != "as-typed" else f"as typed (mostly {p.precision})"
    nodes = [f"{annotated} annotated"]
    if folded:
        nodes.append(f"{folded} without values: {FOLDED_NOTE}")
    if in_subgraphs:
        nodes.append(f"{in_subgraphs} inside If/Loop/Scan bodies without values: costed in the enclosing node")
    values = {
        "version": f"onnxroof {__version__}",
        "device": f"{d.name} [{d.key}]",
        "device_roof": f"{si(p.peak_flops_s, 'FLOP/s')} {p.precision}, {si(p.bandwidth_bytes_s, 'B/s')}, "
        f"ridge {p.ridge_point:.3g} FLOP/B",
        "precision": precision,
        "graph": analysis.graph,
        "flops": si(t.flops, "FLOP"),
        "macs": si(t.macs, "MAC"),
        "bytes": si(t.bytes_read + t.bytes_written, "B"),
        "params": si(t.params),
        "intensity": f"{t.arithmetic_intensity:.3g} FLOP/B",
        "predicted_time": seconds(total),
        "bound": p.bound,
        "time_by_bound": by_bound,
        "nodes": "; ".join(nodes),
    }
    if analysis.unsupported:
        values["unsupported"] = "; ".join(
            f"{u.count} {u.domain + '::' if u.domain else ''}{u.op_type}: {u.reason}" for u in analysis.unsupported
        )
    return {PREFIX + key: value for key, value in values.items()}


def annotate(model: ModelProto, analysis: Analysis) -> Annotated:
    """A copy of ``model`` with each analyzed node's costs and prediction in its metadata_props and a summary in
    the model's. ``model`` is not modified. Keys already starting with ``onnxroof.`` (an earlier annotation) are
    replaced, on every node and the model; every other metadata entry is kept as it is.
    """
    results = match_nodes(model.graph, analysis)
    copy = ModelProto()
    copy.CopyFrom(model)
    in_subgraphs = 0
    for node, result in zip(copy.graph.node, results):
        for inner in _subgraph_nodes(node):
            _set_props(inner.metadata_props, {})
            in_subgraphs += 1
        values = {PREFIX + "folded": FOLDED_NOTE} if result is None else node_values(result, analysis)
        _set_props(node.metadata_props, values)
    folded = sum(r is None for r in results)
    _set_props(copy.metadata_props, summary_values(analysis, len(results) - folded, folded, in_subgraphs))
    return Annotated(copy, tuple(results), in_subgraphs)


def _set_props(props: Any, values: dict[str, str]) -> None:
    """Replace the entries of ``props`` (a repeated StringStringEntryProto field) whose key starts with PREFIX by
    ``values``, keeping every other entry in its order."""
    kept = [(e.key, e.value) for e in props if not e.key.startswith(PREFIX)]
    del props[:]
    for key, value in [*kept, *values.items()]:
        props.add(key=key, value=value)


def _subgraph_nodes(node: NodeProto) -> Iterator[NodeProto]:
    """Every node inside a node's subgraphs (If branches, Loop and Scan bodies), at every depth."""
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs)
        for graph in graphs:
            for inner in graph.node:
                yield inner
                yield from _subgraph_nodes(inner)


def render_annotation(
    done: Annotated, written: Sequence[str], fmt: str = "table", *, graph_only: bool = False, width: int | None = None
) -> str:
    """What ``onnxroof annotate`` did, short: the model summary it wrote and the files, as text (wrapped within
    ``width`` columns, None: no limit) or JSON."""
    summary = {e.key[len(PREFIX) :]: e.value for e in done.model.metadata_props if e.key.startswith(PREFIX)}
    if fmt == "json":
        data = {
            "annotated_nodes": done.annotated,
            "folded_nodes": done.folded,
            "subgraph_nodes": done.in_subgraphs,
            "graph_only": graph_only,
            "summary": summary,
            "written": list(written),
        }
        return json.dumps(data, indent=2) + "\n"
    lines = [
        f"{summary['device']}, precision {summary['precision']}: predicted {summary['predicted_time']}, "
        f"{summary['bound']}-bound",
        f"  {summary['flops']}, {summary['bytes']} moved, {summary['intensity']}",
        f"  time by bound: {summary['time_by_bound']}",
        f"  nodes: {summary['nodes']}",
    ]
    if graph_only:
        lines.append("  the weights are absent: the annotated model is graph-only, as its source is")
    text = [part for line in lines for part in wrap(line, width)]
    return "\n".join([*text, "wrote " + ", ".join(written)]) + "\n"  # paths are never broken
