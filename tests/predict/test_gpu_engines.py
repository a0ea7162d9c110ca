"""A GPU engine's kernel times (tiles and waves, achievable rates, L2), the host's issuing of kernels, and the
engines a user names."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.costs import Cost
from onnxroof.devices import FrozenMap, GpuFigures, Sourced, load_device
from onnxroof.devices.engines import split_engine, with_engine
from onnxroof.errors import UserError
from onnxroof.predict import gpu_times
from onnxroof.predict.analysis import analyze_graph
from onnxroof.predict.gpu_times import ProductShape, tile_efficiency
from onnxroof.predict.pipeline import streamed
from onnxroof.predict.profiles import named_profile
from tests.helpers import UINT8, T, W, loaded_graph, make_node

# ------------------------------------------------------------------------------------------------ tiles and waves


def test_a_product_that_fills_whole_waves_of_whole_tiles_wastes_nothing():
    # 108 SMs x one 128x128 tile each: rows 128 x 12 = 1536, cols 128 x 9 = 1152 -> 108 tiles, one wave.
    assert tile_efficiency(ProductShape(1, 1536, 1152, 4096), 108) == 1.0


def test_a_grid_one_tile_over_a_wave_pays_for_two_waves():
    # 109 tiles of 128x128 (rows 128 x 109) on 108 SMs: 2 waves of 108, 109 of 216 tiles useful; 256x128 tiles
    # (55 of them, the last half empty) fit in one wave: 13952 x 128 useful of 108 x 256 x 128 paid = 0.5046;
    # 128x64 tiles: 218 -> 3 waves = 324 paid, 218 useful = 0.6728; 64x64: 436 -> 5 waves = 540, 0.8074 best.
    efficiency = tile_efficiency(ProductShape(1, 128 * 109, 128, 128), 108)
    assert efficiency == pytest.approx(436 / 540)


def test_a_one_row_product_splits_its_depth_across_the_idle_sms():
    # 1 x 1000 by 2048 on 108 SMs: 64x64 tiles: 16 of them, 6 splits (108 // 16 = 6, 2048 // 256 = 8) = 96 blocks,
    # one wave; each block 64 x 64 x ceil(2048 / 6) = 342 deep: 1 x 1000 x 2048 / (108 x 64 x 64 x 342) = 0.0134.
    efficiency = tile_efficiency(ProductShape(1, 1, 1000, 2048), 108)
    assert efficiency == pytest.approx(1000 * 2048 / (108 * 64 * 64 * 342))


def test_a_product_with_one_weight_matrix_is_one_gemm_over_all_rows_of_a():
    # A [8, 1, 2048] @ W [2048, 512]: 8 rows of one GEMM (a decode step at batch 8), not 8 products of one row;
    # A [8, 16, 64] @ B [8, 64, 16] (per-batch matrices, attention's scores) stays 8 products of 16 x 16.
    weight = make_node("MatMul", [T([8, 1, 2048]), W([2048, 512])], [T([8, 1, 512])])
    shape = gpu_times.product_shape(weight)
    assert (shape.batch, shape.rows, shape.cols, shape.depth) == (1, 8, 512, 2048)
    batched = gpu_times.product_shape(make_node("MatMul", [T([8, 16, 64]), T([8, 64, 16])], [T([8, 16, 16])]))
    assert (batched.batch, batched.rows, batched.cols, batched.depth) == (8, 16, 16, 64)


def test_a_fused_4_bit_product_is_one_gemm_of_all_its_weights_columns():
    # MatMulNBitsQkv of A [4, 1, 64] by Q (64 -> 64), K and V (64 -> 16): one GEMM of 4 rows by 64 + 2*16 = 96
    # columns of depth 64, not three products (nor the 64 columns of its first output).
    inputs = [T([4, 1, 64]), None, W([64])]  # A, no skip, norm_scale
    for n in (64, 16, 16):
        inputs += [W([n, 4, 8], UINT8), W([n, 4]), None]  # packed weight, scales, no bias
    outputs = [T([4, 1, 64]), T([4, 1, 16]), T([4, 1, 16])]
    node = make_node("MatMulNBitsQkv", inputs, outputs, domain="com.microsoft", K=64, Nq=64, Nkv=16)
    shape = gpu_times.product_shape(node)
    assert (shape.batch, shape.rows, shape.cols, shape.depth) == (1, 4, 96, 64)


def test_a_product_of_fewer_than_five_rows_runs_on_the_cuda_cores():
    # TensorRT-LLM's weight-only matmul takes its CUDA-core kernel for m < 5: no tile, the CUDA cores' rate.
    device = load_device("a100-sxm4-80gb")
    four, five = ProductShape(1, 4, 4096, 4096), ProductShape(1, 5, 4096, 4096)
    assert gpu_times.product_rate(device, "fp16", four) == gpu_times.vector_rate(device)
    tiles = gpu_times.achievable_rate(device, "fp16") * tile_efficiency(five, 108)
    assert gpu_times.product_rate(device, "fp16", five) == tiles


def test_without_a_shape_or_an_sm_count_no_tile_is_charged():
    assert tile_efficiency(None, 108) == 1.0
    assert tile_efficiency(ProductShape(1, 1, 1, 1), None) == 1.0


# ------------------------------------------------------------------------------------------------ rates and L2


def _gpu(**figures) -> object:
    base = load_device("a100-sxm4-80gb")
    return dataclasses.replace(base, gpu=GpuFigures(**figures))


def test_the_achievable_rate_is_the_published_one_else_the_peak_at_the_sustained_clock():
    device = _gpu(gemm_achievable=FrozenMap({"fp16": Sourced(2.5e14, "test")}))
    assert gpu_times.achievable_rate(device, "fp16") == 2.5e14
    clocked = _gpu(boost_clock=Sourced(1.41e9, "test"), sustained_clock=Sourced(1.128e9, "test"))
    # fp32's datasheet peak at 1128 / 1410 = 0.8 of the boost clock
    assert gpu_times.achievable_rate(clocked, "fp32") == pytest.approx(0.8 * clocked.peak("fp32")[0])


def test_a_rate_held_over_minutes_comes_before_a_short_benchmarks_one():
    """A power-capped GPU (T4: 42.7 TFLOPS in 30 iterations, 24 over 100 of a 4096^3 product) runs a model at the
    rate it holds."""
    device = _gpu(
        gemm_achievable=FrozenMap({"fp16": Sourced(42.7e12, "test")}),
        gemm_sustained=FrozenMap({"fp16": Sourced(24e12, "test")}),
    )
    assert gpu_times.achievable_rate(device, "fp16") == 24e12


def test_activations_that_fit_in_l2_stream_at_its_bandwidth_and_weights_from_dram():
    device = _gpu(dram_achievable=Sourced(1.5e12, "test"), l2_bandwidth=Sourced(5e12, "test"))
    l2 = next(c.size for c in device.caches if c.level == "L2")
    small = Cost(bytes_read=2e6, bytes_written=1e6)  # 1e6 of weights, 2e6 of activations
    assert gpu_times.streamed_time(small, 1e6, device) == pytest.approx(2e6 / 5e12 + 1e6 / 1.5e12)
    big = Cost(bytes_read=l2 + 1.0, bytes_written=0.0)
    assert gpu_times.streamed_time(big, 0.0, device) == pytest.approx((l2 + 1.0) / 1.5e12)


# ------------------------------------------------------------------------------------------------ the host


def test_kernels_run_back_to_back_where_the_host_issues_them_faster():
    # host 1 us a kernel, kernels 5 us: the first starts at 1 us, the rest follow it: 1 + 3 x 5 = 16 us
    assert streamed([(1.0, 5.0)] * 3) == 16.0


def test_the_gpu_waits_for_a_host_slower_than_its_kernels():
    # host 5 us a kernel, kernels 1 us: each starts when issued: 3 x 5 + 1 = 16 us
    assert streamed([(5.0, 1.0)] * 3) == 16.0


def _relu_chain(n: int):
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"relu{i}") for i in range(n)]
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 16])  # noqa: E731
    return loaded_graph(nodes, [value("t0")], [value(f"t{n}")])


def test_an_eager_engine_is_bound_by_its_dispatch_on_tiny_kernels():
    device = with_engine(load_device("a100-sxm4-80gb"), "pytorch-eager")
    profile = named_profile(device)
    assert profile is not None and profile.host is not None
    analysis = analyze_graph(_relu_chain(10), device, engine=True)
    # each Relu's kernel is its shortest time; the host issues one every host.seconds, slower: 10 issues, then the
    # last kernel
    floor = gpu_times.shortest_kernel(device)
    assert profile.host.seconds > floor
    assert analysis.totals.predicted_time_s == pytest.approx(10 * profile.host.seconds + floor)


def test_a_kernel_holds_the_stream_for_its_latency_and_then_its_work():
    """A stream starts a kernel when the one before it ends: a Relu over 2^26 floats on an A100 under TensorRT
    reads and writes 2^28 B each, 2^29 B, more than its 40 MB L2, at the published DRAM rate (1.70e12 B/s, Azure's
    ND A100 v4 triad) and then holds the stream 2.62 us more (gpu-small-kernels' back-to-back kernels on an A100
    80GB): 2^29 / 1.70e12 + 2.62e-6 s, not the larger of the two."""
    device = with_engine(load_device("a100-sxm4-80gb"), "tensorrt")
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 2**26])  # noqa: E731
    analysis = analyze_graph(loaded_graph([node], [value("x")], [value("y")]), device, engine=True)
    assert analysis.nodes[0].prediction.predicted_time_s == pytest.approx(2**29 / 1.70e12 + 2.62e-6)


# ------------------------------------------------------------------------------------------------ engines


def test_a_device_spec_names_its_engine_after_an_at():
    assert split_engine("a100-sxm4-80gb@tensorrt") == ("a100-sxm4-80gb", "tensorrt")
    assert split_engine("my-gpu.toml") == ("my-gpu.toml", None)


def test_an_engine_that_does_not_run_on_the_device_is_refused_in_one_line():
    with pytest.raises(UserError, match="tensorrt runs on gpu devices"):
        with_engine(load_device("grace-cpu"), "tensorrt")
    with pytest.raises(UserError, match="unknown engine"):
        with_engine(load_device("t4"), "tvm")
    with pytest.raises(UserError, match="needs a calibrated profile"):
        with_engine(load_device("t4"), "onnxruntime")


def test_an_engine_release_is_named_after_a_colon_where_the_engine_s_profile_depends_on_it():
    device = with_engine(load_device("t4"), "tensorrt:8.2")
    assert (device.engine, device.engine_release) == ("tensorrt", "8.2")
    assert device.spec() == "t4@tensorrt:8.2"
    assert with_engine(device, "roofline").engine_release is None
    with pytest.raises(UserError, match=r"engine pytorch-eager takes no release '2\.1'"):
        with_engine(load_device("t4"), "pytorch-eager:2.1")
    with pytest.raises(UserError, match=r"bad release '8\.x'"):
        with_engine(load_device("t4"), "tensorrt:8.x")


def test_under_int8_tensorrt_keeps_what_is_no_product_in_fp16():
    """MatMul (x 1x64x32 by a 32x16 weight) -> Softmax under an int8 what-if. On TensorRT the product reads int8
    x and weight (2048 + 512 B) and writes fp16 for the softmax (64 x 16 x 2 = 2048 B), which reads and writes
    fp16 (2048 B each way); on the plain roofline every tensor is int8 (1024 B each way for the softmax)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y"], name="product"),
        helper.make_node("Softmax", ["y"], ["p"], name="softmax", axis=-1),
    ]
    weight = numpy_helper.from_array(np.ones((32, 16), np.float32), "w")
    value = lambda name, *shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))  # noqa: E731
    graph = loaded_graph(nodes, [value("x", 1, 64, 32)], [value("p", 1, 64, 16)], [weight])
    device = load_device("t4")
    on_trt = analyze_graph(graph, with_engine(device, "tensorrt"), precision="int8", engine=True)
    product, softmax = on_trt.nodes
    assert (product.cost.bytes_read, product.cost.bytes_written) == (2048 + 512, 2048)
    assert (softmax.cost.bytes_read, softmax.cost.bytes_written) == (2048, 2048)
    plain = analyze_graph(graph, device, precision="int8")
    assert (plain.nodes[1].cost.bytes_read, plain.nodes[1].cost.bytes_written) == (1024, 1024)


def test_tf32_products_follow_the_engine_and_the_device():
    """An fp32 Conv on an A100 (which has a TF32 rate) runs as TF32 under PyTorch eager (cuDNN's default) and as
    fp32 on a V100 (no TF32); an fp32 MatMul stays fp32 under PyTorch eager (its matmul default)."""
    from onnxroof.predict.engine import product_precision

    eager = named_profile(with_engine(load_device("a100-sxm4-80gb"), "pytorch-eager"))
    assert eager is not None
    assert product_precision(eager, "conv", "fp32", load_device("a100-sxm4-80gb")) == "tf32"
    assert product_precision(eager, "conv", "fp32", load_device("v100-sxm2")) == "fp32"
    assert product_precision(eager, "matmul", "fp32", load_device("a100-sxm4-80gb")) == "fp32"


def test_the_json_says_which_engine_and_what_its_time_holds():
    graph = _relu_chain(2)
    device = with_engine(load_device("a100-sxm4-80gb"), "tensorrt")
    data = analyze_graph(graph, device, engine=True).to_dict()
    assert data["device"]["engine"] == "tensorrt"
    assert "host-device copies" in data["includes"]
    assert data["fused_kernels"] == {}  # two Relus: fused by TensorRT only when its graph is built (engine_graph)


def test_an_fp32_product_runs_at_the_tf32_rate_under_tensorrt_on_an_ampere_gpu():
    """A 256 x 4096 by 4096 x 4096 fp32 MatMul under TensorRT on an A100 runs at the TF32 rate, not fp32's."""
    w = numpy_helper.from_array(np.zeros((4096, 4096), np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    value = lambda name, rows: helper.make_tensor_value_info(name, TensorProto.FLOAT, [rows, 4096])  # noqa: E731
    graph = loaded_graph([node], [value("x", 256)], [value("y", 256)], [w])
    device = with_engine(load_device("a100-sxm4-80gb"), "tensorrt")
    (result,) = analyze_graph(graph, device, engine=True).nodes
    assert result.engine is not None
    assert result.engine.terms["tensor_arithmetic"] < 2 * 256 * 4096 * 4096 / device.peak("fp32")[0]


# ------------------------------------------------------------------------------------------------ the command line


def test_analyze_on_tensorrt_lists_its_fused_kernels_with_their_nodes(capsys):
    from onnxroof.cli import main

    assert main(["analyze", "zoo:resnet18", "-d", "t4", "--engine", "tensorrt", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "engine: tensorrt: the kernels' time on the GPU" in out
    assert "Fused kernels listed above, with the graph nodes each runs:" in out
    assert "onnxroof::FusedKernel" in out


@pytest.mark.ort  # onnxruntime-cuda's graph is onnxruntime's optimizer's
def test_compare_and_sweep_name_each_engine_they_predict_for(capsys):
    from onnxroof.cli import main

    assert main(["sweep", "zoo:resnet18", "-d", "t4", "--engine", "tensorrt,pytorch-eager"]) == 0
    out = capsys.readouterr().out
    assert "t4@tensorrt" in out and "t4@pytorch-eager" in out
    main(["compare", "zoo:resnet18", "zoo:resnet34", "-d", "t4", "--engine", "tensorrt,onnxruntime-cuda"])
    out = capsys.readouterr().out
    assert "t4@tensorrt" in out and "t4@onnxruntime-cuda" in out


def test_an_engine_a_device_does_not_run_exits_2_in_one_line(capsys):
    from onnxroof.cli import main

    assert main(["analyze", "zoo:resnet18", "-d", "grace-cpu", "--engine", "tensorrt"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tensorrt runs on gpu devices" in err[0]
