"""Normalization cost functions: BatchNorm, InstanceNorm, LayerNorm, GroupNorm, RMSNorm, LRN, Softmax, contrib."""

from __future__ import annotations

import pytest

from onnxroof.costs.normalization import lrn_flops_per_element
from tests.helpers import INT32, UINT8, T, W, cost_of, make_node

MS = "com.microsoft"

# BatchNorm input [1, 64, 56, 56] = 200704 elements; 200704 * 4 = 802816 bytes in float32.


def _bn_inputs(c: int) -> list:
    # X, scale, B, input_mean, input_var
    return [T([1, c, 56, 56]), W([c]), W([c]), W([c]), W([c])]


def test_batchnorm_inference() -> None:
    # folded to a per-channel scale and shift: 2 FLOPs/elem * 200704 = 401408
    # params: scale, B, mean, var = 4 * 64 = 256; read 802816 + 256 * 4 = 803840; written 802816
    c = cost_of(make_node("BatchNormalization", _bn_inputs(64), [T([1, 64, 56, 56])]))
    assert c.flops == 401408
    assert c.params == 256
    assert c.bytes_read == 803840
    assert c.bytes_written == 802816
    assert c.kernels == 1
    assert c.macs == 0


def test_batchnorm_training_mode() -> None:
    # training_mode=1: batch mean and variance, 7 FLOPs/elem (add into mean, subtract, square, add into variance,
    # mul 1/std, mul scale, add bias) * 200704 = 1404928; running mean/var outputs [64] written: 2 * 64 * 4
    c = cost_of(
        make_node(
            "BatchNormalization",
            _bn_inputs(64),
            [T([1, 64, 56, 56]), T([64]), T([64])],
            training_mode=1,
        )
    )
    assert c.flops == 1404928
    assert c.bytes_written == 802816 + 2 * 64 * 4
    assert c.params == 256


def test_batchnorm_old_opset_statistics_outputs_mean_training() -> None:
    # opset 9 style: no training_mode attribute, but mean/var/saved_mean/saved_var outputs requested -> training.
    # 7 * 200704 = 1404928; the four [64] outputs, shapes unknown, default to [C]: 4 * 64 * 4 bytes
    outs = [T([1, 64, 56, 56]), T(None), T(None), T(None), T(None)]
    c = cost_of(make_node("BatchNormalization", _bn_inputs(64), outs))
    assert c.flops == 1404928
    assert c.bytes_written == 802816 + 4 * 64 * 4


def test_instance_normalization() -> None:
    # [2,32,16,16] = 16384 elements; 7 FLOPs/elem = 114688; scale + B = 2 * 32 = 64 params
    c = cost_of(make_node("InstanceNormalization", [T([2, 32, 16, 16]), W([32]), W([32])], [T([2, 32, 16, 16])]))
    assert c.flops == 114688
    assert c.params == 64
    assert c.bytes_read == (16384 + 64) * 4


def test_layer_normalization() -> None:
    # [1,128,768] = 98304 elements; 7 FLOPs/elem = 688128; Scale + B [768] = 1536 params
    # read (98304 + 1536) * 4 = 399360; written 98304 * 4 = 393216
    c = cost_of(make_node("LayerNormalization", [T([1, 128, 768]), W([768]), W([768])], [T([1, 128, 768])], axis=-1))
    assert c.flops == 688128
    assert c.params == 1536
    assert c.bytes_read == 399360
    assert c.bytes_written == 393216
    assert c.kernels == 1


def test_layer_normalization_without_bias() -> None:
    # no B: 6 FLOPs/elem * 98304 = 589824; 768 params
    c = cost_of(make_node("LayerNormalization", [T([1, 128, 768]), W([768])], [T([1, 128, 768])]))
    assert c.flops == 589824
    assert c.params == 768


def test_layer_normalization_statistics_outputs() -> None:
    # axis=1 on [2,3,4,5] (120 elements): Mean and InvStdDev have shape [2,1,1,1] (2 floats each), computed
    # when shape inference left them unknown. Written: 120*4 + 2*4 + 2*4 = 496. FLOPs 7 * 120 = 840
    c = cost_of(
        make_node(
            "LayerNormalization",
            [T([2, 3, 4, 5]), W([3, 4, 5]), W([3, 4, 5])],
            [T([2, 3, 4, 5]), T(None), T(None)],
            axis=1,
        )
    )
    assert c.flops == 840
    assert c.bytes_written == 496
    assert c.params == 120


def test_contrib_layer_normalization_alias() -> None:
    # com.microsoft::LayerNormalization: the same 7 * 98304 = 688128
    c = cost_of(make_node("LayerNormalization", [T([1, 128, 768]), W([768]), W([768])], [T([1, 128, 768])], domain=MS))
    assert c.flops == 688128


def test_group_normalization() -> None:
    # [2,64,8,8] = 8192 elements, 8 groups; 7 FLOPs/elem = 57344; scale + bias [64] = 128 params
    c = cost_of(make_node("GroupNormalization", [T([2, 64, 8, 8]), W([64]), W([64])], [T([2, 64, 8, 8])], num_groups=8))
    assert c.flops == 57344
    assert c.params == 128


def test_lrn_formula() -> None:
    # size multiplies (squares) + size-1 adds + mul alpha/size + add bias + pow + divide = 2*size + 3
    assert lrn_flops_per_element(5) == 5 + 4 + 1 + 1 + 1 + 1 == 13
    assert lrn_flops_per_element(3) == 9
    assert lrn_flops_per_element(1) == 5


def test_lrn_size5_alexnet() -> None:
    # AlexNet LRN on [1,96,55,55] = 290400 elements, size 5: 13 FLOPs/elem = 3775200
    c = cost_of(make_node("LRN", [T([1, 96, 55, 55])], [T([1, 96, 55, 55])], size=5, alpha=1e-4, beta=0.75, bias=1.0))
    assert c.flops == 3775200
    assert c.bytes_read == 290400 * 4
    assert c.bytes_written == 290400 * 4
    assert c.params == 0


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax(op: str) -> None:
    # [2,4,16,16] = 2048 elements. Softmax: max, subtract, exp, sum, divide = 5/elem = 10240.
    # LogSoftmax: max, subtract, exp, sum, subtract log (log per row not counted) = 5/elem = 10240.
    c = cost_of(make_node(op, [T([2, 4, 16, 16])], [T([2, 4, 16, 16])], axis=-1))
    assert c.flops == 10240
    assert c.bytes_read == 8192
    assert c.bytes_written == 8192


def test_mean_variance_normalization() -> None:
    # square, add into sum x, add into sum x^2, subtract mean, divide = 5/elem * [1,3,8,8] 192 = 960
    c = cost_of(make_node("MeanVarianceNormalization", [T([1, 3, 8, 8])], [T([1, 3, 8, 8])]))
    assert c.flops == 960


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p: int) -> None:
    # |x| or x^2, add into the norm, divide = 3/elem * [4, 256] 1024 = 3072
    c = cost_of(make_node("LpNormalization", [T([4, 256])], [T([4, 256])], axis=-1, p=p))
    assert c.flops == 3072


# ---------------------------------------------------------------------------------------------------------
# RMS norm and onnxruntime's fused norms.

N_BERT = 2 * 128 * 768  # 196608


def _skip_ln_inputs(beta: bool, bias: bool) -> list:
    # input, skip, gamma, beta?, bias?
    return [T([2, 128, 768]), T([2, 128, 768]), W([768]), W([768]) if beta else None, W([768]) if bias else None]


def test_skip_layer_normalization() -> None:
    # input + skip + bias (2 adds) + LayerNorm (7) = 9/elem * 196608 = 1769472
    # params gamma, beta, bias = 3 * 768 = 2304; read (2 * 196608 + 2304) * 4 = 1582080; written 196608 * 4
    c = cost_of(make_node("SkipLayerNormalization", _skip_ln_inputs(True, True), [T([2, 128, 768])], domain=MS))
    assert c.flops == 1769472
    assert c.params == 2304
    assert c.bytes_read == 1582080
    assert c.bytes_written == 786432
    assert c.kernels == 1


def test_skip_layer_normalization_variants() -> None:
    # no bias: 1 add + 7 = 8/elem; no bias, no beta: 1 + 6 = 7/elem
    no_bias = cost_of(make_node("SkipLayerNormalization", _skip_ln_inputs(True, False), [T([2, 128, 768])], domain=MS))
    assert no_bias.flops == 8 * N_BERT
    bare = cost_of(make_node("SkipLayerNormalization", _skip_ln_inputs(False, False), [T([2, 128, 768])], domain=MS))
    assert bare.flops == 7 * N_BERT
    assert bare.params == 768


def test_skip_layer_normalization_sum_output() -> None:
    # outputs: output, (mean, inv_std_var omitted), input_skip_bias_sum [2,128,768] with unknown shape:
    # written 2 * 196608 * 4 = 1572864
    outs = [T([2, 128, 768]), None, None, T(None)]
    c = cost_of(make_node("SkipLayerNormalization", _skip_ln_inputs(True, True), outs, domain=MS))
    assert c.bytes_written == 1572864


def test_skip_simplified_layer_normalization() -> None:
    # input + skip (1) + RMS norm (4) = 5/elem; with bias 6/elem
    ins = [T([2, 128, 768]), T([2, 128, 768]), W([768])]
    c = cost_of(make_node("SkipSimplifiedLayerNormalization", ins, [T([2, 128, 768])], domain=MS))
    assert c.flops == 5 * N_BERT
    assert c.params == 768
    biased = cost_of(make_node("SkipSimplifiedLayerNormalization", [*ins, W([768])], [T([2, 128, 768])], domain=MS))
    assert biased.flops == 6 * N_BERT


@pytest.mark.parametrize(
    "domain, op",
    [("", "RMSNormalization"), ("", "SimplifiedLayerNormalization"), (MS, "SimplifiedLayerNormalization")],
)
def test_rms_normalization(domain: str, op: str) -> None:
    # square, add into sum, mul 1/rms, mul scale = 4/elem * 196608 = 786432; scale [768] = 768 params
    c = cost_of(make_node(op, [T([2, 128, 768]), W([768])], [T([2, 128, 768])], domain=domain))
    assert c.flops == 786432
    assert c.params == 768
    assert c.bytes_read == (196608 + 768) * 4


def test_simplified_layer_norm_inv_std_output() -> None:
    # inv_std_var [2,128,1] left unknown: 256 floats written besides the output
    c = cost_of(make_node("SimplifiedLayerNormalization", [T([2, 128, 768]), W([768])], [T([2, 128, 768]), T(None)]))
    assert c.bytes_written == 196608 * 4 + 256 * 4


def test_bias_softmax() -> None:
    # softmax(data + bias): 1 + 5 = 6/elem; data [2,12,64,64] = 98304, bias [2,1,64,64] = 8192 (broadcast)
    # flops 589824; read (98304 + 8192) * 4 = 425984
    c = cost_of(make_node("BiasSoftmax", [T([2, 12, 64, 64]), T([2, 1, 64, 64])], [T([2, 12, 64, 64])], domain=MS))
    assert c.flops == 589824
    assert c.bytes_read == 425984


def test_qlinear_softmax() -> None:
    # dequant (2) + softmax (5) + requant (2) = 9/elem * [4, 256] 1024 = 9216; uint8 in and out
    ins = [T([4, 256], UINT8), W([]), W([], UINT8), W([]), W([], UINT8)]
    c = cost_of(make_node("QLinearSoftmax", ins, [T([4, 256], UINT8)], domain=MS, axis=-1))
    assert c.flops == 9216
    assert c.bytes_read == 1024 + 4 + 1 + 4 + 1
    assert c.bytes_written == 1024


def test_contrib_group_norm() -> None:
    # NHWC [2,8,8,64] = 8192: GroupNorm 7/elem; with the fused SiLU (sigmoid 4 + mul 1) 12/elem
    ins = [T([2, 8, 8, 64]), W([64]), W([64])]
    plain = cost_of(make_node("GroupNorm", ins, [T([2, 8, 8, 64])], domain=MS, groups=8, activation=0))
    assert plain.flops == 7 * 8192
    silu = cost_of(make_node("GroupNorm", ins, [T([2, 8, 8, 64])], domain=MS, groups=8, activation=1))
    assert silu.flops == 12 * 8192
    assert silu.params == 128


def test_contrib_skip_group_norm() -> None:
    # X + skip + bias (2) + GroupNorm (7) + SiLU (5) = 14/elem * 8192 = 114688; S output written too
    ins = [T([2, 8, 8, 64]), W([64]), W([64]), T([2, 8, 8, 64]), W([64])]
    c = cost_of(make_node("SkipGroupNorm", ins, [T([2, 8, 8, 64]), T(None)], domain=MS, groups=8, activation=1))
    assert c.flops == 114688
    assert c.bytes_written == 2 * 8192 * 4


def test_embed_layer_normalization() -> None:
    # B=2, S=8, H=64. word [1000,64], position [512,64], segment [2,64], gamma/beta [64], int32 ids/segments/mask.
    # FLOPs: (word + position + segment: 2 adds + LayerNorm 7) * 2*8*64 = 9 * 1024 = 9216, + 16 mask adds = 9232
    # read: ids, segment ids, mask 3 * 16 * 4 = 192; gamma + beta 128 * 4 = 512; gathered rows: word 16 * 64 * 4
    #   = 4096, position 8 * 64 * 4 = 2048, segment min(16, 2) * 64 * 4 = 512 -> 7360
    # written: output 1024 * 4 + mask_index [2] int32 2 * 4 = 4104
    # params: 1000*64 + 512*64 + 2*64 + 64 + 64 = 97024 (whole tables)
    ins = [
        T([2, 8], INT32),
        T([2, 8], INT32),
        W([1000, 64]),
        W([512, 64]),
        W([2, 64]),
        W([64]),
        W([64]),
        T([2, 8], INT32),
    ]
    c = cost_of(make_node("EmbedLayerNormalization", ins, [T([2, 8, 64]), T([2], INT32)], domain=MS))
    assert c.flops == 9232
    assert c.bytes_read == 7360
    assert c.bytes_written == 4104
    assert c.params == 97024
    assert c.kernels == 1
