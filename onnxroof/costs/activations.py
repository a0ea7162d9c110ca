"""Per-element FLOPs of the activations fused into other ops (FusedConv, FusedGemm, NCHWc Conv, LSTM/GRU/RNN)."""

from __future__ import annotations

# FLOPs per element of the activations that onnxruntime fuses into Conv and Gemm (the ``activation`` attribute of
# FusedConv, FusedGemm and NCHWc Conv) and that recurrent ops name in their ``activations`` attribute. One FLOP per
# arithmetic step, one per transcendental, as the counting conventions say; the values agree with the standalone ops
# in the elementwise family, so fusing an activation changes the kernel count and the bytes but not the FLOPs.
ACTIVATION_FLOPS: dict[str, float] = {
    "Identity": 0,  # nothing to compute
    "Relu": 1,  # max(x, 0)
    "Tanh": 1,  # one transcendental
    "Sigmoid": 4,  # 1 / (1 + exp(-x)): neg, exp, add, div
    "LeakyRelu": 2,  # compare x < 0, mul alpha (the select is free)
    "Clip": 2,  # max(x, min), min(., max)
    "HardSigmoid": 4,  # max(0, min(1, alpha * x + beta)): mul, add, min, max
    "Gelu": 5,  # 0.5 * x * (1 + erf(x / sqrt(2))): div, erf, add, mul, mul
    "ThresholdedRelu": 1,  # compare x > alpha (the select is free)
    "Elu": 4,  # compare, exp, sub 1, mul alpha
    "Selu": 5,  # compare, exp, mul alpha, sub alpha, mul gamma
    "Softplus": 3,  # log(exp(x) + 1): exp, add, log
    "Softsign": 3,  # x / (1 + |x|): abs, add, div
    "ScaledTanh": 3,  # alpha * tanh(beta * x): mul, tanh, mul
    "ParametricSoftplus": 5,  # alpha * log(exp(beta * x) + 1): mul, exp, add, log, mul
    "Affine": 2,  # alpha * x + beta: mul, add
}


def activation_flops(name: str) -> tuple[float, str]:
    """FLOPs per element of a fused activation named by an ``activation`` attribute, and a note.

    No activation (an empty name) costs 0. An activation missing from :data:`ACTIVATION_FLOPS` is charged one FLOP
    per element, never zero, and the returned note says so.
    """
    if not name:
        return 0.0, ""
    if name in ACTIVATION_FLOPS:
        return float(ACTIVATION_FLOPS[name]), ""
    return 1.0, f"activation {name!r} has no stated cost; counted as 1 FLOP per element"
