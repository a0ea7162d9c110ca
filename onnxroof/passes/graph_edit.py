"""What the onnx-graphsurgeon passes share: fresh names for what they add, and exporting the edited graph as a
model that keeps the original's IR version, opsets and metadata."""

from __future__ import annotations

import onnx_graphsurgeon as gs
from onnx import ModelProto

__all__ = ["Names", "export_like"]


class Names:
    """Fresh node and tensor names: the wanted one where it is free, else with _1, _2, ... appended."""

    def __init__(self, graph: gs.Graph) -> None:
        self.used = {node.name for node in graph.nodes} | set(graph.tensors())

    def fresh(self, wanted: str) -> str:
        candidate, n = wanted, 0
        while candidate in self.used:
            n += 1
            candidate = f"{wanted}_{n}"
        self.used.add(candidate)
        return candidate


def export_like(graph: gs.Graph, original: ModelProto) -> ModelProto:
    """``graph`` cleaned up, sorted and exported, with ``original``'s IR version, opsets and model metadata."""
    out = gs.export_onnx(graph.cleanup().toposort())
    out.ir_version = original.ir_version
    del out.opset_import[:]
    out.opset_import.extend(original.opset_import)
    for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        setattr(out, field, getattr(original, field))
    del out.metadata_props[:]
    out.metadata_props.extend(original.metadata_props)
    return out
