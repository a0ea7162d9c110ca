"""A decoder split over GPUs: the row-parallel products and their all-reduces, the nodes each GPU runs 1/N of,
its weights and KV cache, and what is refused."""

from __future__ import annotations

import math

import pytest

import model_zoo
from onnxroof.api import analyze, get_device
from onnxroof.errors import UserError
from onnxroof.predict.collectives import Link, all_reduce_time
from onnxroof.predict.roofline import combine
from onnxroof.whatif.decoder import predict_decoder
from onnxroof.whatif.tensor_parallel import tensor_parallel

DEVICE = "a100-sxm4-80gb"  # NVLink, 300 GB/s each way
# tiny-decoder fp16: 2 layers, hidden 64, 4 heads of 16 (2 KV heads), MLP 128, vocab 256. Its products' weights,
# per layer: q 64x64, k 64x32, v 64x32, o 64x64, gate 64x128, up 64x128, down 128x64 = 36,864 elements; two layers
# and the LM head 64x256 = 90,112 elements, 180,224 bytes in fp16.
SPLIT_WEIGHT_BYTES = (2 * (4096 + 2048 + 2048 + 4096 + 8192 + 8192 + 8192) + 64 * 256) * 2


def _tiny(layout: str = "fp16"):
    return model_zoo.build_decoder(f"tiny-decoder-{layout}", weights=False)


@pytest.mark.parametrize("layout", ["fp16", "int4", "hf-fp16"])
def test_the_row_parallel_products_are_each_blocks_last(layout):
    plan = tensor_parallel(_tiny(layout), get_device(DEVICE), 2)
    names = [r.name for r in plan.row_parallel]
    assert names == [f"model.layers.{i}.{p}.matmul" for i in (0, 1) for p in ("self_attn.o_proj", "mlp.down_proj")]
    assert plan.hidden == 64 and plan.link == Link("nvlink", 300e9)


def test_the_all_reduces_of_a_step():
    plan = tensor_parallel(_tiny(), get_device(DEVICE), 4)
    # four row-parallel products, each all-reducing [batch 3, 1 token, 64] in fp16: 384 bytes over 4 GPUs
    assert plan.all_reduce_s(3, 1) == pytest.approx(4 * all_reduce_time(3 * 64 * 2, 4, Link("nvlink", 300e9)))


def test_weights_and_cache_per_gpu():
    plan = tensor_parallel(_tiny(), get_device(DEVICE), 2)
    assert plan.split_weight_bytes == SPLIT_WEIGHT_BYTES
    assert plan.weights_bytes(1_000_000) == 1_000_000 - SPLIT_WEIGHT_BYTES // 2
    assert plan.kv_share(2) == 0.5
    assert tensor_parallel(_tiny(), get_device(DEVICE), 4).kv_share(2) == 0.5  # 4 GPUs, 2 KV heads: one each


def test_each_gpu_runs_a_share_of_the_split_nodes_and_all_of_the_others():
    device = get_device(DEVICE)
    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 100, "total_sequence_length": 101}
    analysis = analyze(_tiny(), device, dims=dims)
    plan = tensor_parallel(_tiny(), device, 2)
    by_name = {n.name: n for n in analysis.nodes}
    norm = by_name["model.layers.0.input_layernorm"]
    assert not plan.split(norm) and plan.node_time(norm, device.overlap) == norm.prediction.predicted_time_s
    down = by_name["model.layers.0.mlp.down_proj.matmul"]
    p = down.prediction
    share = combine(device.overlap, p.compute_time_s / 2, p.memory_time_s / 2, p.overhead_time_s)
    whole = combine(device.overlap, p.compute_time_s, p.memory_time_s, p.overhead_time_s)
    assert plan.split(down) and plan.node_time(down, device.overlap) == pytest.approx(
        p.predicted_time_s * share / whole
    )
    time_s, communication = plan.step_time(analysis, 1, 1)
    saved = sum(n.prediction.predicted_time_s - plan.node_time(n, device.overlap) for n in analysis.nodes)
    assert communication == pytest.approx(plan.all_reduce_s(1, 1))
    assert time_s == pytest.approx(analysis.totals.prediction.predicted_time_s - saved + communication)


def test_a_generation_split_over_two_gpus():
    whole = predict_decoder(_tiny(), DEVICE, prompt=8, generate=2)
    split = predict_decoder(_tiny(), DEVICE, prompt=8, generate=2, tensor_parallel=2)
    assert split.memory.weights_bytes == math.ceil(whole.memory.weights_bytes - SPLIT_WEIGHT_BYTES / 2)
    assert split.memory.kv_bytes_per_token * 2 == whole.memory.kv_bytes_per_token
    assert all(s.all_reduce_s > 0 for s in split.decode) and split.to_dict()["tensor_parallel"] == 2


def test_what_is_refused():
    with pytest.raises(UserError, match="lists no GPU-to-GPU link"):
        tensor_parallel(_tiny(), get_device("tpu-v4"), 2)
    with pytest.raises(UserError, match="no row-parallel product"):
        tensor_parallel(model_zoo.build("resnet18", weights=False), get_device(DEVICE), 2)
    with pytest.raises(UserError, match="at least 1 GPU"):
        tensor_parallel(_tiny(), get_device(DEVICE), 0)
