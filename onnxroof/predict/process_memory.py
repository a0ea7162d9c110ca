"""The process's peak on an engine: what a session holds per weight byte, and what its runs add per live byte.

A weight is held at a cost that depends on the op that reads it (onnxruntime reorders convolution weights to its
NCHWc layout and prepacks Gemm and MatMul weights for MLAS) and on its size. onnxruntime frees the stored copy
of a weight it has prepacked; whether the process gives those pages back depends on the C allocator. glibc
serves a block of at least its mmap threshold with its own mapping and unmaps it on free; the threshold starts
at 128 KiB and rises to the size of each mapped block freed, up to 32 MiB on 64-bit hosts. So once a few
weights have been freed, weights below 32 MiB come from the heap and their freed copies stay resident, while a
weight of 32 MiB or more is always mapped and its freed copy leaves the process: such a weight ("large") is
held about once, whatever op reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onnxroof.devices import Sourced
from onnxroof.ir import Graph, Node
from onnxroof.predict.analysis import check_precision
from onnxroof.predict.memory import VIEW_OPS, MemoryEstimate, node_reads, tensor_bytes

__all__ = [
    "LARGE_WEIGHT_BYTES",
    "WEIGHT_KINDS",
    "SessionMemoryFactors",
    "process_peak_bytes",
    "weight_kind",
    "weights_by_kind",
]

# glibc's largest mmap threshold on 64-bit hosts (DEFAULT_MMAP_THRESHOLD_MAX): a block this large is always mapped.
LARGE_WEIGHT_BYTES = 32 * 1024 * 1024

# The kinds of weight an engine holds at different costs: by the op that reads them ("other": held as stored),
# or "large" for a weight of at least LARGE_WEIGHT_BYTES.
WEIGHT_KINDS: tuple[str, ...] = ("conv", "gemm", "matmul", "large", "other")
_KIND_OF_OP: Mapping[str, str] = {
    "Conv": "conv",  # the ONNX op and onnxruntime's NCHWc Conv (domain com.microsoft.nchwc) alike
    "FusedConv": "conv",
    "Gemm": "gemm",
    "FusedGemm": "gemm",
    "MatMul": "matmul",
    "FusedMatMul": "matmul",
}
_FACTORS = ("constant", "conv", "gemm", "matmul", "large", "activation")


def weight_kind(node: Node) -> str:
    """The kind of the weights ``node`` reads by its op: conv, gemm or matmul, else other."""
    return _KIND_OF_OP.get(node.op_type, "other")


def weights_by_kind(
    graph: Graph, *, precision: str | None = None, large_bytes: int = LARGE_WEIGHT_BYTES
) -> dict[str, int]:
    """The bytes of the weights runtime nodes read, by kind (every kind of WEIGHT_KINDS, 0 where none): a weight
    of at least ``large_bytes`` bytes (at ``precision``) is "large"; any other is of the kind of its first
    runtime reader in stored order. Each weight is counted once, so that the values sum to estimate_memory's
    ``weights_bytes``. A view of a weight (a Reshape of it, say) passes its reader's kind on to the weight.
    Weights of unknown shape count 0 bytes."""
    check_precision(precision)
    views: dict[str, str] = {}  # a weight view's name -> the weight it shows
    kinds: dict[str, str] = {}
    for node in graph.nodes:
        if node.folded:
            continue
        if node.op_type in VIEW_OPS and node.inputs and node.outputs and node.outputs[0]:
            source = node.inputs[0]
            t = graph.tensors.get(source)
            if source in views or (t is not None and t.is_weight):
                views[node.outputs[0]] = views.get(source, source)
                continue
        for name in node_reads(node):
            root = views.get(name, name)
            t = graph.tensors.get(root)
            if t is not None and t.is_weight and root not in kinds:
                kinds[root] = weight_kind(node)
    # A weight only views read is of the kind "other" (the views' readers gave it theirs when they ran).
    for root in views.values():
        t = graph.tensors.get(root)
        if t is not None and t.is_weight and root not in kinds:
            kinds[root] = "other"
    totals = dict.fromkeys(WEIGHT_KINDS, 0)
    for name, kind in kinds.items():
        t = graph.tensor(name)
        n = (None if t is None else tensor_bytes(t, precision)) or 0
        totals["large" if n >= large_bytes else kind] += n
    return totals


@dataclass(frozen=True)
class SessionMemoryFactors:
    """What an engine's process holds for a model, as calibrated on one host: ``constant`` bytes for any
    session, bytes held per byte of weight of each kind (``conv``, ``gemm``, ``matmul`` for weights below
    LARGE_WEIGHT_BYTES, ``large`` for those of at least that; other weights are held as stored, 1 byte per byte)
    and bytes the runs add per byte of the estimate's peak of the live buffers the engine allocates
    (``activation``: the arena's chunks, padding and reorder buffers). Each value with its source."""

    constant: Sourced
    conv: Sourced
    gemm: Sourced
    matmul: Sourced
    large: Sourced
    activation: Sourced

    def weight_factor(self, kind: str) -> float:
        """Bytes held per weight byte of ``kind`` (one of WEIGHT_KINDS)."""
        if kind == "other":
            return 1.0
        if kind not in WEIGHT_KINDS:
            raise ValueError(f"unknown weight kind {kind!r}")
        return float(getattr(self, kind).value)

    def to_dict(self) -> dict[str, Any]:
        """Every factor as {"value": ..., "source": ...}, by field name."""
        items = {name: getattr(self, name) for name in _FACTORS}
        return {name: {"value": item.value, "source": item.source} for name, item in items.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionMemoryFactors:
        """The inverse of to_dict; a ValueError for a missing field, a value that is not a finite number >= 0
        or an empty source."""
        items: dict[str, Sourced] = {}
        for name in _FACTORS:
            entry = data.get(name)
            if not isinstance(entry, Mapping):
                raise ValueError(f"memory factor {name!r} is missing")
            value, source = entry.get("value"), entry.get("source")
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"memory factor {name!r} needs a finite value >= 0, got {value!r}")
            if not isinstance(source, str) or not source.strip():
                raise ValueError(f"memory factor {name!r} needs a source")
            items[name] = Sourced(float(value), source)
        return cls(**items)


def process_peak_bytes(estimate: MemoryEstimate, weights: Mapping[str, int], factors: SessionMemoryFactors) -> int:
    """The peak resident memory a process running the graph adds, as the engine the factors were calibrated on
    holds it: constant + the sum over weight kinds of ``weights[kind]`` (weights_by_kind of the graph the
    estimate is of) times the kind's factor + the activation factor times the estimate's peak of the live buffers
    the engine allocates (``peak_allocated_bytes``: the graph inputs are the caller's, allocated before the
    process's figure is taken), rounded to whole bytes. A ValueError for an unknown kind."""
    held = sum(factors.weight_factor(kind) * n for kind, n in weights.items())
    return round(factors.constant.value + held + factors.activation.value * estimate.peak_allocated_bytes)
