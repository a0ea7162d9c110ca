"""A decoder step split over N GPUs by tensor parallelism, as Megatron-LM splits a transformer and TensorRT-LLM and
vLLM run it: each GPU holds 1/N of every weight matrix and of the attention heads, and the partial outputs of each
block's last product are summed by an all-reduce.

In each layer the attention's Q, K and V projections and the MLP's gate and up projections are split by their
output columns, the attention by heads, and the output and down projections (the *row-parallel* products) by
their input rows; each row-parallel product's output, ``[batch, tokens, hidden]``, is all-reduced over the N GPUs
(two per layer). What stays whole on every GPU is the residual stream: the embedding, the norms and the residual
adds, each node whose output is ``hidden`` wide. So, per GPU:

- a split node (a matrix product, an attention, or a node whose output is not ``hidden`` wide) runs 1/N of its
  work: its compute and memory terms divided by N, its launch overhead whole (its time scaled by the ratio of the
  device's combination of those terms to the whole node's);
- every other node runs whole;
- each all-reduce takes NCCL's ring time over the device's GPU-to-GPU link (onnxroof.predict.collectives);
- the weights of the products are 1/N, the others whole; the KV cache holds ``ceil(kv_heads / N)`` of the
  ``kv_heads`` heads (more GPUs than KV heads replicate them).

A row-parallel product is found by what it feeds: through reshapes, casts and a bias add, a residual add (an Add,
or onnxruntime's SkipLayerNormalization / SkipSimplifiedLayerNormalization) whose other operand was computed
before it. The LM head is split by its vocabulary columns; the gather of its logits is not charged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from onnxroof.costs import SHAPE, engine_class
from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.ir import Tensor, op_domain
from onnxroof.predict.collectives import Link, all_reduce_time
from onnxroof.predict.results import Analysis, NodeResult
from onnxroof.predict.roofline import combine
from onnxroof.protos import ModelProto, NodeProto

__all__ = ["RowParallel", "TensorParallel", "tensor_parallel"]

_PRODUCT_CLASSES = {"gemm", "matmul"}
_PASS_THROUGH = {"Reshape", "Cast", "Transpose", "Identity", "Squeeze", "Unsqueeze"}
_RESIDUAL_NORMS = {"SkipLayerNormalization", "SkipSimplifiedLayerNormalization"}


@dataclass(frozen=True)
class RowParallel:
    """A row-parallel product: its name, its output's width and element size (bytes)."""

    name: str
    width: int
    element_bytes: float


@dataclass(frozen=True)
class TensorParallel:
    """A decoder split over ``ranks`` GPUs joined by ``link``."""

    ranks: int
    link: Link
    hidden: int
    row_parallel: tuple[RowParallel, ...]
    split_weight_bytes: float  # the products' weights, which the GPUs share

    def all_reduce_s(self, batch: int, new_tokens: int) -> float:
        """The step's all-reduces: one per row-parallel product, of its ``[batch, tokens, width]`` output."""
        return sum(
            all_reduce_time(batch * new_tokens * r.width * r.element_bytes, self.ranks, self.link)
            for r in self.row_parallel
        )

    def split(self, node: NodeResult) -> bool:
        """Whether each GPU runs 1/N of this node (see the module docstring)."""
        kind = engine_class(op_domain(node.domain), node.op_type)
        if kind in _PRODUCT_CLASSES:
            return True
        shape = node.output_shape
        return kind != SHAPE and shape is not None and len(shape) > 0 and shape[-1] != self.hidden

    def node_time(self, node: NodeResult, overlap: str) -> float:
        """One GPU's time for the node."""
        p = node.prediction
        if not self.split(node):
            return p.predicted_time_s
        whole = combine(overlap, p.compute_time_s, p.memory_time_s, p.overhead_time_s)
        share = combine(overlap, p.compute_time_s / self.ranks, p.memory_time_s / self.ranks, p.overhead_time_s)
        return p.predicted_time_s * share / whole if whole > 0 else p.predicted_time_s

    def step_time(self, analysis: Analysis, batch: int, new_tokens: int) -> tuple[float, float]:
        """(one GPU's time for the step, the all-reduces' part of it)."""
        overlap = analysis.device.overlap
        nodes = analysis.nodes
        saved = sum(n.prediction.predicted_time_s - self.node_time(n, overlap) for n in nodes)
        communication = self.all_reduce_s(batch, new_tokens)
        return analysis.totals.prediction.predicted_time_s - saved + communication, communication

    def weights_bytes(self, whole: int) -> int:
        """One GPU's weights, of ``whole`` on one GPU."""
        return math.ceil(whole - self.split_weight_bytes + self.split_weight_bytes / self.ranks)

    def kv_share(self, kv_heads: int) -> float:
        """The share of the KV cache one GPU holds."""
        return math.ceil(kv_heads / self.ranks) / kv_heads


def _link(device: Device) -> Link:
    gpu = device.gpu
    if gpu is not None and gpu.nvlink_bandwidth is not None:
        return Link("nvlink", gpu.nvlink_bandwidth.value)
    if gpu is not None and gpu.pcie_bandwidth is not None:
        return Link("pcie", gpu.pcie_bandwidth.value)
    raise UserError(
        f"--tensor-parallel: {device.key} lists no GPU-to-GPU link (nvlink_bandwidth or pcie_bandwidth)",
        "choose a GPU of the catalog (onnxroof devices), or add the link's figure to your device file",
    )


def _products(model: ModelProto, weights: dict[str, Tensor]) -> Iterator[tuple[int, NodeProto]]:
    for index, node in enumerate(model.graph.node):
        if engine_class(op_domain(node.domain), node.op_type) == "gemm" and any(n in weights for n in node.input):
            yield index, node


def _width_and_size(node: NodeProto, weights: dict[str, Tensor]) -> tuple[int, float]:
    """A weight product's output width and element size: MatMulNBits' N and its scales' type (A's), else the
    weight's last dim (first with Gemm's transB) and type (A's, as MatMul and Gemm require)."""
    attrs = {a.name: a for a in node.attribute}
    if node.op_type == "MatMulNBits":
        return int(attrs["N"].i), weights[node.input[2]].itemsize
    weight = weights[node.input[1]]
    shape = weight.need_shape()
    transposed = node.op_type == "Gemm" and "transB" in attrs and attrs["transB"].i
    return int(shape[0] if transposed else shape[-1]), weight.itemsize


@dataclass(frozen=True)
class _Wiring:
    """Who reads each tensor, where each is made (node index; -1 for graph inputs), which are constants."""

    consumers: dict[str, list[NodeProto]]
    made_at: dict[str, int]
    constants: set[str]

    @classmethod
    def of(cls, model: ModelProto, weights: dict[str, Tensor]) -> _Wiring:
        consumers: dict[str, list[NodeProto]] = {}
        for node in model.graph.node:
            for name in node.input:
                consumers.setdefault(name, []).append(node)
        made_at = {out: i for i, node in enumerate(model.graph.node) for out in node.output}
        constants = set(weights) | {out for n in model.graph.node if n.op_type == "Constant" for out in n.output}
        return cls(consumers, made_at, constants)


def _feeds_residual(node: NodeProto, index: int, wiring: _Wiring) -> bool:
    """Whether the product ``node`` (at ``index``) reaches, through pass-through ops and a bias add, a residual add
    whose other operand was computed before it."""
    constants = wiring.constants
    stack = list(node.output)
    while stack:
        tensor = stack.pop()
        for reader in wiring.consumers.get(tensor, []):
            others = [n for n in reader.input if n and n != tensor]
            if reader.op_type in _PASS_THROUGH or (reader.op_type == "Add" and all(n in constants for n in others)):
                stack.extend(reader.output)
            elif reader.op_type == "Add" or reader.op_type in _RESIDUAL_NORMS:
                operands = [n for n in others if n not in constants]
                if operands and wiring.made_at.get(operands[0], -1) < index:
                    return True
    return False


def tensor_parallel(model: ModelProto, device: Device, ranks: int) -> TensorParallel:
    """The split of ``model`` over ``ranks`` GPUs of ``device``, or a UserError where it has no row-parallel
    products or the device no GPU-to-GPU link."""
    if ranks < 1:
        raise UserError(f"--tensor-parallel {ranks}: at least 1 GPU", "e.g. --tensor-parallel 2")
    link = _link(device)
    weights = {t.name: Tensor(t.name, t.data_type, tuple(t.dims)) for t in model.graph.initializer}
    wiring = _Wiring.of(model, weights)
    products = list(_products(model, weights))
    rows = tuple(
        RowParallel(node.name, *_width_and_size(node, weights))
        for index, node in products
        if _feeds_residual(node, index, wiring)
    )
    if not rows:
        raise UserError(
            "--tensor-parallel: no row-parallel product found (a weight product feeding a residual add)",
            "tensor parallelism splits transformer blocks; drop --tensor-parallel for this model",
        )
    split = {n for _, node in products for n in node.input if n in weights}
    split_bytes = sum(weights[n].nbytes for n in split)
    return TensorParallel(ranks, link, rows[0].width, rows, split_bytes)
