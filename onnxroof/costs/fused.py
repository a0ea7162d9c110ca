"""Cost function: a fused kernel, several nodes an engine runs as one kernel (``onnxroof.predict.fusion``).

A fused kernel does the arithmetic of every node it holds, but its intermediates stay in registers or shared
memory: it reads only what comes from outside it (its inputs, weights among them) and writes only what is used
outside it (its outputs), once each, under the compulsory-traffic model. It launches one kernel.
"""

from __future__ import annotations

from onnxroof.costs import FUSED_BODY, OTHER, Cost, NodeView, register, weight_params
from onnxroof.costs.common import io_bytes, subgraph_coster

__all__ = ["fused_kernel"]


@register("onnxroof::FusedKernel", engine=OTHER)
def fused_kernel(node: NodeView) -> Cost:
    """The FLOPs and MACs of the nodes in its body; the bytes of its own inputs and outputs; one kernel."""
    body = subgraph_coster(node)(FUSED_BODY)
    read, written = io_bytes(node)
    return Cost(
        flops=body.flops,
        macs=body.macs,
        bytes_read=read,
        bytes_written=written,
        params=weight_params(node.inputs),
        kernels=1,
        note=body.note,
    )
