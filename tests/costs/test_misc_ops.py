"""Losses, CumProd, Det, Hardmax, Bernoulli, Multinomial and BitCast against closed forms from their definitions."""

from __future__ import annotations

import pytest

from onnxroof.costs import Cost
from onnxroof.ir import UnknownShape
from tests.helpers import INT32, INT64, T, W, cost_of, make_node

DOUBLE = 11

# Loss test case: scores [N=2, C=5, d1=3], targets [2, 3]: S = 2 * 3 = 6 samples.
S = 6
X_BYTES = 2 * 5 * 3 * 4  # 120
TARGET_BYTES = S * 8  # int64 targets: 48


def nll(weight=None, loss_shape=(), **attrs):
    inputs = [T([2, 5, 3]), T([2, 3], INT64)] + ([weight] if weight is not None else [])
    return cost_of(make_node("NegativeLogLikelihoodLoss", inputs, [T(list(loss_shape))], **attrs))


def test_nll_none():
    cost = nll(loss_shape=(2, 3), reduction="none")
    assert cost.flops == S * 1  # negate the picked log-probability
    assert cost.macs == 0
    # only the S picked input elements are read (6*4 = 24 B), plus the targets; the loss [2, 3] is written
    assert (cost.bytes_read, cost.bytes_written) == (24 + TARGET_BYTES, 24)
    assert (cost.params, cost.kernels) == (0, 1)


def test_nll_sum():
    cost = nll(reduction="sum")
    assert cost.flops == S * (1 + 1)  # negate, add into the sum
    assert cost.bytes_written == 4  # a scalar


def test_nll_mean_is_the_default():
    # unweighted mean: negate, add into the sum; dividing by S once is not counted
    assert nll().flops == S * 2 == nll(reduction=b"mean").flops


def test_nll_weighted_mean():
    cost = nll(weight=W([5]))
    # negate, multiply by weight[c], add into the sum, add weight[c] into the denominator
    assert cost.flops == S * 4 == 24
    assert cost.bytes_read == 24 + TARGET_BYTES + 5 * 4
    assert cost.params == 5


def test_nll_weighted_sum_and_none():
    assert nll(weight=W([5]), reduction="sum").flops == S * 3  # negate, weight, add
    assert nll(weight=W([5]), loss_shape=(2, 3), reduction="none").flops == S * 2  # negate, weight


def test_nll_ignore_index():
    # one compare with ignore_index per sample; the mean's denominator counts the samples kept (S more adds)
    assert nll(ignore_index=1).flops == S * (1 + 1 + 1 + 1)
    assert nll(ignore_index=1, reduction="sum").flops == S * (1 + 1 + 1)
    assert nll(ignore_index=1, loss_shape=(2, 3), reduction="none").flops == S * (1 + 1)
    # weight and ignore_index together: negate, weight, compare, sum, denominator
    assert nll(weight=W([5]), ignore_index=1).flops == S * 5


def test_nll_unknown_shape_raises():
    with pytest.raises(UnknownShape):
        cost_of(make_node("NegativeLogLikelihoodLoss", [T(None), T([2, 3], INT64)], [T([])]))


def sce(weight=None, loss_shape=(), log_prob=False, **attrs):
    inputs = [T([2, 5, 3]), T([2, 3], INT64)] + ([weight] if weight is not None else [])
    outputs = [T(list(loss_shape))] + ([T([2, 5, 3])] if log_prob else [])
    return cost_of(make_node("SoftmaxCrossEntropyLoss", inputs, outputs, **attrs))


def test_sce_mean():
    cost = sce()
    log_softmax = 5 * 30  # max, subtract, exp, add into the sum, subtract log-sum over all 2*5*3 = 30 scores
    assert cost.flops == log_softmax + S * 2 == 162  # then negate and add into the sum per sample
    # the whole scores tensor is read, plus the targets; a scalar written
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (X_BYTES + TARGET_BYTES, 4, 0, 1)


def test_sce_reductions_weights_and_ignore_index():
    assert sce(loss_shape=(2, 3), reduction="none").flops == 150 + S * 1
    assert sce(reduction="sum").flops == 150 + S * 2
    weighted = sce(weight=W([5]))
    assert weighted.flops == 150 + S * 4  # negate, weight, sum, denominator
    assert (weighted.bytes_read, weighted.params) == (X_BYTES + TARGET_BYTES + 20, 5)
    assert sce(ignore_index=-1, reduction="sum").flops == 150 + S * 3  # negate, compare, sum


def test_sce_log_prob_output_adds_only_its_bytes():
    plain, with_log_prob = sce(), sce(log_prob=True)
    assert with_log_prob.flops == plain.flops
    assert with_log_prob.bytes_written == 4 + X_BYTES  # the loss scalar and log_prob [2, 5, 3]


def test_sce_unknown_loss_shape_is_computed():
    # reduction none with shape inference silent: the loss is [N, d1] = [2, 3], 24 B
    node = make_node("SoftmaxCrossEntropyLoss", [T([2, 5, 3]), T([2, 3], INT64)], [T(None)], reduction="none")
    assert cost_of(node).bytes_written == 24


# ---------------------------------------------------------------------------------------------------------


def test_cumprod():
    cost = cost_of(make_node("CumProd", [T([3, 4]), T([], INT64)], [T([3, 4])], exclusive=1, reverse=1))
    # one multiply per element, whatever exclusive and reverse are
    assert cost.flops == 12
    # x 12 floats (48 B) and the int64 axis (8 B) read; 48 B written
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (56, 48, 0, 1)
    assert cost_of(make_node("CumProd", [T([3, 4]), T([], INT64)], [T([3, 4])])) == cost


def test_det_batch_of_3x3():
    # LU of a 3x3: step 1 (2 rows below the pivot): 2 compares, 2 divides, 2x2 = 4 MACs; step 2 (1 row): 1 compare,
    # 1 divide, 1 MAC; then 2 multiplies of the diagonal: 3 + 3 + 2*5 + 2 = 18 FLOPs, 5 MACs per matrix
    cost = cost_of(make_node("Det", [T([5, 3, 3])], [T([5])]))
    assert (cost.flops, cost.macs) == (5 * 18, 5 * 5)
    # reads 5*9 floats = 180 B; writes 5 determinants = 20 B
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (180, 20, 0, 1)


def test_det_2x2_and_unknown_output():
    # 1 compare, 1 divide, 1 MAC (2 FLOPs), 1 multiply of the diagonal: 5 FLOPs; the scalar output computed
    cost = cost_of(make_node("Det", [T([2, 2])], [T(None)]))
    assert (cost.flops, cost.macs, cost.bytes_written) == (5, 1, 4)


def test_det_needs_square_matrices():
    with pytest.raises(UnknownShape):
        cost_of(make_node("Det", [T([2, 3])], [T([])]))


def test_hardmax():
    # the max along the axis: 1 comparison per element
    cost = cost_of(make_node("Hardmax", [T([3, 4, 5])], [T([3, 4, 5])], axis=0))
    assert cost.flops == 60
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (240, 240, 0, 1)


def test_bernoulli():
    # one comparison of a uniform draw with p per element; output as double (dtype 11)
    cost = cost_of(make_node("Bernoulli", [T([4, 5])], [T([4, 5], DOUBLE)], dtype=DOUBLE))
    assert cost.flops == 20
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (80, 160, 0, 1)


def test_multinomial():
    # [3, 10] logits, 4 draws per row: per row 4*10 (max, subtract, exp, add into the CDF) + per draw 1 multiply
    # and 10.bit_length() = 4 comparisons of the binary search: 40 + 4*5 = 60; 3 rows = 180
    cost = cost_of(make_node("Multinomial", [T([3, 10])], [T([3, 4], INT32)], sample_size=4))
    assert cost.flops == 180
    # reads 30 floats = 120 B; writes 3*4 int32 = 48 B
    assert (cost.bytes_read, cost.bytes_written, cost.params, cost.kernels) == (120, 48, 0, 1)


def test_multinomial_output_from_attributes():
    # output shape unknown: [batch, sample_size] = [3, 1] (default sample_size), dtype int64 (7): 3*8 = 24 B
    # per row 40 + 1 draw * (1 + 4) = 45
    cost = cost_of(make_node("Multinomial", [T([3, 10])], [T(None, 0)], dtype=INT64))
    assert (cost.flops, cost.bytes_written) == (3 * 45, 24)


def test_bitcast_is_an_alias():
    # same bits, same width, same shape: the engine relabels the buffer; nothing moves
    assert cost_of(make_node("BitCast", [T([4, 4])], [T([4, 4], INT32)], to=INT32)) == Cost()
