"""The training-step estimate: optimizer state, mixed precision, activations kept, step FLOPs."""

from __future__ import annotations

import pytest

from onnxroof.devices.resolve import resolve_device
from onnxroof.errors import UserError
from onnxroof.load import load_graph
from onnxroof.predict.training import estimate_training

DEVICE = "v100-sxm2"
# torchvision ResNet-50's parameter count (the zoo's docstring and torchvision agree): scale and bias of every
# BatchNorm included, its running mean and variance (buffers) not.
RESNET50_PARAMS = 25_557_032


def _resnet50_bn_channels() -> int:
    """Channels of every BatchNorm of ResNet-50: the stem's 64, per bottleneck w + w + 4w, and a 4w downsample
    in each stage's first block (stage widths w = 64, 128, 256, 512, blocks 3, 4, 6, 3)."""
    total = 64
    for w, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3)):
        total += blocks * 6 * w + 4 * w
    return total  # 64 + 1408 + 3584 + 10240 + 11264 = 26560


def _resnet50_activations() -> int:
    """Elements of every activation of ResNet-50 at batch 1, 224x224: the input, each node's output, Flatten's
    view excepted."""
    total = 3 * 224 * 224  # the input
    total += 3 * 64 * 112 * 112  # conv1, bn1, relu
    total += 64 * 56 * 56  # maxpool
    size = 56
    for stage, (w, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            out = size // stride
            total += 3 * w * size * size  # conv1 (1x1), bn1, relu1 at the block's input size
            total += 3 * w * out * out  # conv2 (3x3, the stride), bn2, relu2
            total += 2 * 4 * w * out * out  # conv3, bn3
            if i == 0:
                total += 2 * 4 * w * out * out  # downsample conv, bn
            total += 2 * 4 * w * out * out  # add, relu3
            size = out
    total += 2048 + 1000  # avgpool, fc
    return total


@pytest.fixture(scope="module")
def resnet50():
    return load_graph("zoo:resnet50")


@pytest.fixture(scope="module")
def device():
    return resolve_device(DEVICE)


def test_resnet50_memory_with_adam(resnet50, device):
    est = estimate_training(resnet50, device, optimizer="adam")
    m = est.memory
    assert est.params == RESNET50_PARAMS
    # weights: every parameter and the BN running statistics (2 per BN channel), fp32
    assert m.weights == 4 * (RESNET50_PARAMS + 2 * _resnet50_bn_channels())
    assert m.gradients == 4 * RESNET50_PARAMS
    assert m.optimizer_state == 2 * 4 * RESNET50_PARAMS  # Adam's two moments
    assert m.master_weights == 0
    assert m.activations == 4 * _resnet50_activations()
    # = weights*4 (params, grads, 2 moments) + the buffers + activations
    assert m.total == 4 * 4 * RESNET50_PARAMS + 4 * 2 * 26560 + 4 * _resnet50_activations()


@pytest.mark.parametrize(("optimizer", "copies"), [("sgd", 0), ("momentum", 1), ("adam", 2)])
def test_optimizer_state(resnet50, device, optimizer, copies):
    est = estimate_training(resnet50, device, optimizer=optimizer)
    assert est.memory.optimizer_state == copies * 4 * RESNET50_PARAMS


def test_mixed_precision_keeps_fp32_master_weights_and_state(resnet50, device):
    est = estimate_training(resnet50, device, optimizer="adam", mixed_precision=True)
    m = est.memory
    assert est.precision == "fp16"
    assert m.gradients == 2 * RESNET50_PARAMS  # fp16 gradients
    assert m.master_weights == 4 * RESNET50_PARAMS  # fp32 master copy
    assert m.optimizer_state == 2 * 4 * RESNET50_PARAMS  # fp32 moments
    # 2 (fp16 weight) + 2 (fp16 grad) + 4 (master) + 8 (moments) = 16 bytes per trained parameter
    assert m.gradients * 2 + m.master_weights + m.optimizer_state == 16 * RESNET50_PARAMS
    assert m.activations == 2 * _resnet50_activations()  # fp16 activations


def test_conv_net_step_is_about_three_forwards(resnet50, device):
    # Convs dominate: each backward is 2 x its forward (dX + dW), so forward + backward is about 3 x forward.
    est = estimate_training(resnet50, device, optimizer="sgd")
    assert est.backward_flops / est.forward_flops == pytest.approx(2.0, rel=0.03)
    assert est.step_flops / est.forward_flops == pytest.approx(3.0, rel=0.03)
    conv = next(r for r in est.ratios if r.op_type == "Conv")
    assert conv.ratio == pytest.approx(2.0)  # no conv has a bias: exactly 2
    assert est.step_time_s > est.forward_time_s + est.backward_time_s > 0


def test_optimizer_update_is_a_pass_over_the_parameters(resnet50, device):
    # Adam reads weights, grads, m, v (4 x 4 B) and writes weights, m, v (3 x 4 B) per parameter: 28 B; 12 FLOPs.
    est = estimate_training(resnet50, device, optimizer="adam")
    assert est.optimizer_cost.bytes == 28 * RESNET50_PARAMS
    assert est.optimizer_cost.flops == 12 * RESNET50_PARAMS
    assert est.optimizer_time_s == pytest.approx(est.optimizer_cost.bytes / device.memory_bandwidth.value)


def test_to_dict_and_unknown_optimizer(resnet50, device):
    d = estimate_training(resnet50, device).to_dict()
    assert d["paper_004_latency_ratios"] == {"AlexNet": 2.00, "ResNet18": 2.02}
    assert d["memory"]["total"] > 0 and d["layers"]
    with pytest.raises(UserError):
        estimate_training(resnet50, device, optimizer="lion")
