"""The factor network the calibration reads the network factor on: a small model's mix of kernels."""

from __future__ import annotations

import onnx
import onnxruntime
import pytest

from onnxroof.api import analyze
from onnxroof.ort.calibrate.network import IMAGE, TOKENS, factor_network
from tests.helpers import calibrated_host


@pytest.mark.ort
def test_the_factor_network_is_a_valid_model_fed_at_its_inputs_shapes_with_a_classifier_and_an_encoder_output():
    model, feeds = factor_network()
    onnx.checker.check_model(model, full_check=True)
    declared = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in model.graph.output}
    assert declared == {"logits": (1, 1000), "mlp_res": TOKENS}
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    assert [o.shape for o in outputs] == [(1, 1000), TOKENS]
    assert {name: array.shape for name, array in feeds.items()} == {"image": IMAGE, "tokens": TOKENS}


def test_the_encoder_layers_products_count_their_closed_form_flops():
    # 128 tokens of width 384, 6 heads of 64: the q, k, v and output projections are 128x384 by 384x384, the MLP's
    # 128x384 by 384x1536 and 128x1536 by 1536x384, the scores 6 of 128x64 by 64x128 and the context 6 of 128x128
    # by 128x64; a product of m x k by k x n is 2mkn FLOPs.
    tokens, width, heads, head = 128, 384, 6, 64
    projections = 4 * 2 * tokens * width * width + 2 * 2 * tokens * width * 4 * width
    expected = projections + 2 * heads * 2 * tokens * head * tokens
    exported = analyze(factor_network()[0], calibrated_host(), as_exported=True)
    assert sum(n.cost.flops for n in exported.nodes if n.op_type == "MatMul") == expected


@pytest.mark.ort
def test_onnxruntime_runs_the_factor_network_as_a_mix_of_the_kernel_classes_models_spend_time_in():
    # Dense, depthwise and pointwise convolutions, pools, products by weights and of two activations, a Softmax,
    # layer norms, activations and elementwise kernels: no one class holds the network's time, so that no one
    # kernel's misfit to its class ceiling sets the factor.
    analysis = analyze(factor_network()[0], calibrated_host())
    classes = {n.engine.op_class for n in analysis.nodes if n.engine is not None}
    assert {"conv", "conv1x1", "depthwise", "pool", "global_pool", "gemm", "matmul", "softmax", "layernorm"} <= classes
    assert {"elementwise", "activation_gelu", "movement"} <= classes
