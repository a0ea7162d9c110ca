"""Cost functions: loss ops (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).

Both take scores ``[N, C, d1, ..., dk]`` and integer targets ``[N, d1, ..., dk]``: S = N * d1 * ... * dk samples,
each picking the entry of its target class. Per sample: 1 FLOP to negate the picked log-probability, 1 more to
multiply it by the class weight when the optional weight input is given, and 1 comparison with ``ignore_index``
when that attribute is set (an ignored sample's loss is a select to 0, free). The reduction adds the losses: 0 for
``none``, S adds for ``sum``, and for ``mean`` (the default) S adds plus, when a weight or an ignore_index is
given, S more adds for the denominator (the sum of the samples' class weights, or the count of samples not
ignored); the final divide is O(1) and not counted.

NegativeLogLikelihoodLoss reads only the S picked elements of its input (as Gather does); SoftmaxCrossEntropyLoss
first takes a log-softmax over the C classes of every position, which reads the whole scores tensor and costs the
Softmax constant, 5 FLOPs per element (max, subtract, exp, add into the sum, subtract the log of the sum, whose
per-row log is not counted). It is computed in full whether or not the optional ``log_prob`` output is asked for
(onnxruntime's kernel writes it to a scratch buffer otherwise), so that output only adds its bytes. Targets and
weights are read once, each output written once; params are the elements of a weight tensor; each op is one
kernel.
"""

from __future__ import annotations

from math import prod

from onnxroof.costs import OTHER, Cost, NodeView, register, weight_params
from onnxroof.costs.common import SOFTMAX_FLOPS, input_bytes, output_bytes
from onnxroof.ir import UnknownShape

__all__ = ["negative_log_likelihood_loss", "sample_flops", "softmax_cross_entropy_loss"]


def _given(node: NodeView, i: int) -> bool:
    t = node.input(i)
    return t is not None and bool(t.name)


def sample_flops(samples: int, reduction: str, weighted: bool, ignore: bool) -> int:
    """FLOPs of the per-sample part of both losses: negate (1), weight multiply (1, with weights), ignore_index
    compare (1, when set), and the reduction (S adds for sum; S for mean, plus S for its denominator when weighted
    or ignoring)."""
    per_sample = 1 + int(weighted) + int(ignore)
    if reduction == "sum":
        per_sample += 1
    elif reduction == "mean":
        per_sample += 1 + int(weighted or ignore)
    return samples * per_sample


def _samples(x_shape: tuple[int, ...]) -> int:
    """S = N * d1 * ... * dk: every dim of the scores but the class dim."""
    return prod(d for i, d in enumerate(x_shape) if i != 1)


def _loss(node: NodeView, x_read: float, extra_flops: float) -> Cost:
    """The shared cost of both losses: the per-sample FLOPs plus ``extra_flops``, ``x_read`` bytes of the scores,
    the targets and weights read, the loss (and log_prob) written."""
    x = node.need_input(0)
    x_shape = x.need_shape()
    if len(x_shape) < 2:
        raise UnknownShape(f"{node.name}: input {x.name} has rank {len(x_shape)} < 2")
    samples = _samples(x_shape)
    reduction = node.text("reduction", "mean")
    flops = extra_flops + sample_flops(samples, reduction, _given(node, 2), node.attr("ignore_index") is not None)
    loss_shape = (x_shape[0], *x_shape[2:]) if reduction == "none" else ()
    return Cost(
        flops=flops,
        bytes_read=x_read + input_bytes(node.inputs[1:]),
        bytes_written=output_bytes(node, {0: loss_shape, 1: x_shape}),
        params=weight_params(node.inputs),
        kernels=1,
    )


@register("NegativeLogLikelihoodLoss", engine=OTHER)
def negative_log_likelihood_loss(node: NodeView) -> Cost:
    """NegativeLogLikelihoodLoss: ``sample_flops`` over the S = N * d1 * ... * dk samples (negate, weight,
    ignore_index compare, reduction; module docstring). Reads only the S picked log-probabilities of the input."""
    x = node.need_input(0)
    return _loss(node, _samples(x.need_shape()) * x.itemsize, 0)


@register("SoftmaxCrossEntropyLoss", engine=OTHER)
def softmax_cross_entropy_loss(node: NodeView) -> Cost:
    """SoftmaxCrossEntropyLoss: a log-softmax over the classes, 5 FLOPs per scores element, then the negative
    log-likelihood of the picked classes (``sample_flops``). Reads all scores; writes the loss and, when asked for,
    log_prob (the scores' shape)."""
    x = node.need_input(0)
    return _loss(node, x.nbytes, SOFTMAX_FLOPS * x.numel)
