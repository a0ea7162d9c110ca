"""The analysis pass end to end: totals, precision, unsupported ops, the JSON contract, and published counts."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxroof
from onnxroof.api import analyze
from onnxroof.errors import UserError
from onnxroof.predict.analysis import UnsupportedOpWarning
from onnxroof.report.analysis import render
from tests.helpers import LIGHT_DIR


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 17),)) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _shared_weight_model() -> onnx.ModelProto:
    """Two MatMuls share W[64,64]; a Relu after each."""
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "W")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("MatMul", ["b", "W"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    return _model(nodes, [_vi("x", [8, 64])], [_vi("y", None)], [w])


def test_totals_add_nodes_and_count_shared_weights_once():
    a = analyze(_shared_weight_model(), device="v100-sxm2")
    mm = [n for n in a.nodes if n.op_type == "MatMul"]
    # Each MatMul: 8*64*64 = 32768 MACs, 65536 FLOPs, reads x (8*64*4) + W (64*64*4) = 2048 + 16384 B, writes 2048 B.
    assert [n.cost.macs for n in mm] == [32768, 32768]
    assert [n.cost.bytes_read for n in mm] == [18432, 18432]
    assert [n.cost.params for n in mm] == [4096, 4096]
    # Each Relu: 512 FLOPs, 2048 B in, 2048 B out.
    assert a.totals.flops == 2 * 65536 + 2 * 512
    assert a.totals.bytes_read == 2 * 18432 + 2 * 2048
    assert a.totals.bytes_written == 4 * 2048
    assert a.totals.params == 4096  # W once, though two nodes read it
    assert a.totals.arithmetic_intensity == pytest.approx(
        a.totals.flops / (a.totals.bytes_read + a.totals.bytes_written)
    )
    assert a.totals.predicted_time_s == pytest.approx(sum(n.prediction.predicted_time_s for n in a.nodes))
    by_op = {o.op_type: o for o in a.by_op_type}
    assert by_op["MatMul"].count == 2 and by_op["MatMul"].flops == 2 * 65536


def test_precision_what_if_rescales_float_bytes_and_picks_the_peak():
    relu = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1, 1000])], [_vi("y", None)])
    as_typed = analyze(relu, device="v100-sxm2")
    assert as_typed.nodes[0].precision == "fp32"
    assert as_typed.totals.bytes_read == 4000  # 1000 floats
    for precision, size in (("fp64", 8), ("fp16", 2), ("bf16", 2), ("int8", 1)):
        a = analyze(relu, device="h100-sxm", precision=precision)
        assert a.totals.bytes_read == 1000 * size, precision
        assert a.nodes[0].precision == precision
    fp16 = analyze(relu, device="v100-sxm2", precision="fp16")
    assert fp16.nodes[0].prediction.peak_flops_s == onnxroof.load_device("v100-sxm2").peak("fp16")[0]
    with pytest.raises(UserError, match="unknown precision"):
        analyze(relu, precision="fp12")


def test_a_precision_the_device_lacks_is_named_once_with_the_peak_used_instead():
    # tpu-v4's catalog entry lists bf16 and int8 peaks only: the model's four fp32 nodes run at its bf16 peak.
    a = analyze(_shared_weight_model(), device="tpu-v4")
    assert a.warnings == ("tpu-v4 lists no fp32 peak: fp32 nodes use its bf16 peak",)
    assert {n.precision for n in a.nodes} == {"fp32"} and {n.prediction.precision for n in a.nodes} == {"bf16"}


def test_dtype_decides_precision_of_each_node():
    x = _vi("x", [1, 16], TensorProto.FLOAT16)
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", None, TensorProto.FLOAT16)])
    assert analyze(m).nodes[0].precision == "fp16"
    q = _model(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        [_vi("a", [4, 8], TensorProto.UINT8), _vi("b", [8, 2], TensorProto.INT8)],
        [_vi("y", None, TensorProto.INT32)],
    )
    assert analyze(q).nodes[0].precision == "int8"


def test_unsupported_ops_are_listed_warned_and_charged_bytes():
    nodes = [
        helper.make_node("Frobnicate", ["x"], ["f"], domain="example.custom"),
        helper.make_node("Frobnicate", ["f"], ["g"], domain="example.custom"),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    m = _model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])], opsets=(("", 17), ("example.custom", 1)))
    m.graph.value_info.extend([_vi("f", [2, 3]), _vi("g", [2, 3])])
    with pytest.warns(UnsupportedOpWarning, match="2 example.custom::Frobnicate"):
        a = analyze(m)
    assert [(u.op_type, u.domain, u.count) for u in a.unsupported] == [("Frobnicate", "example.custom", 2)]
    first = a.nodes[0]
    assert not first.supported
    assert (first.cost.bytes_read, first.cost.bytes_written, first.cost.flops) == (24, 24, 0)  # 6 floats in, 6 out
    assert "Frobnicate" in render(a, "table")
    assert json.loads(render(a, "json"))["unsupported"][0]["count"] == 2


def test_json_contract_fields():
    data = json.loads(render(analyze(_shared_weight_model(), device="t4"), "json"))
    assert {"model", "device", "precision", "totals", "nodes", "by_op_type", "unsupported"} <= set(data)
    assert {
        "flops",
        "macs",
        "bytes_read",
        "bytes_written",
        "params",
        "arithmetic_intensity",
        "predicted_time_s",
        "bound",
    } <= set(data["totals"])
    assert {
        "name",
        "op_type",
        "flops",
        "macs",
        "bytes_read",
        "bytes_written",
        "params",
        "arithmetic_intensity",
        "bound",
        "compute_time_s",
        "memory_time_s",
        "overhead_time_s",
        "predicted_time_s",
    } <= set(data["nodes"][0])
    assert data["device"]["key"] == "t4"


def test_csv_has_a_row_per_node():
    text = render(analyze(_shared_weight_model()), "csv")
    lines = text.strip().splitlines()
    assert lines[0].startswith("name,op_type,")
    assert len(lines) == 1 + 4


def test_table_fits_the_width_it_is_given():
    a = analyze("zoo:resnet18")
    for width in (100, 80):
        text = render(a, "table", top=0, by_op_type=True, width=width)
        assert max(len(line) for line in text.splitlines()) <= width
    whole = render(a, "table", top=0, by_op_type=True)
    assert "layer4.0.downsample.0" in whole and "…" not in whole  # without a width nothing is cut


def test_paper001_lstm_kernel_is_overhead_bound_on_v100():
    # Paper 001: 2 kernels per time step (GEMM + elementwise), 16 steps, 4.2 us per launch on a V100:
    # overhead = 2 * 16 * 4.2e-6 = 134.4 us, far above its ~1.6 MFLOP / 15.7 TFLOP/s compute time.
    a = analyze("zoo:lstm_kernel", device="v100-sxm2")
    lstm = next(n for n in a.nodes if n.op_type == "LSTM")
    assert lstm.cost.kernels == 32
    assert lstm.prediction.overhead_time_s == pytest.approx(134.4e-6)
    assert lstm.prediction.bound == "overhead"
    # MACs: 16 steps * 16 batch * 4*16*(32+16) = 786432
    assert lstm.cost.macs == 786432


def test_paper001_conv2d_kernel_flops():
    # 2 * N*C_out*H_out*W_out * C_in*kH*kW = 2 * 16*64*56*56 * 64*3*3 = 3699376128 FLOPs, no bias.
    a = analyze("zoo:conv2d_kernel", device="v100-sxm2")
    conv = next(n for n in a.nodes if n.op_type == "Conv")
    assert conv.cost.flops == 2 * 16 * 64 * 56 * 56 * 64 * 3 * 3


# torchvision's published multiply-accumulates (its "GFLOPS" column counts MACs of conv, linear and matmul).
TORCHVISION_GMACS = {
    "resnet18": 1.814,
    "resnet50": 4.089,
    "vgg16": 15.47,
    "mobilenetv2": 0.301,
    "vit_b_16": 17.564,
}


@pytest.mark.parametrize("name", sorted(TORCHVISION_GMACS))
def test_zoo_macs_match_torchvision_within_half_a_percent(name: str):
    a = analyze(f"zoo:{name}")
    macs = sum(n.cost.macs for n in a.nodes if n.op_type in ("Conv", "Gemm", "MatMul"))
    assert macs / 1e9 == pytest.approx(TORCHVISION_GMACS[name], rel=0.005)


@pytest.mark.skipif(not LIGHT_DIR.exists(), reason="onnx's bundled light models are not installed")
def test_bundled_light_resnet50_weights_cost_no_compute():
    a = analyze(LIGHT_DIR / "light_resnet50.onnx")
    assert a.folded_nodes == 239  # its 239 ConstantOfShape weight builders run once at load, never as compute
    assert "ConstantOfShape" not in {n.op_type for n in a.nodes}


def test_time_by_bound_splits_the_predicted_time():
    # Relu on 1e6 floats is memory-bound on a V100 (1 FLOP per 8 B, far left of the 17.4 FLOP/B ridge).
    relu = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1000, 1000])], [_vi("y", None)])
    a = analyze(relu, device="v100-sxm2")
    assert a.totals.time_by_bound["memory"] == pytest.approx(a.totals.predicted_time_s)
    assert a.totals.time_by_bound["compute"] == 0 and a.totals.time_by_bound["overhead"] == 0
    # 8e6 B / 900e9 B/s = 8.89 us
    assert a.totals.predicted_time_s == pytest.approx(8e6 / 900e9)


# Published parameter counts of the networks behind onnx's bundled light models.
LIGHT_PARAMS = {
    "light_bvlc_alexnet.onnx": 60_965_224,  # BVLC AlexNet (Caffe, grouped convs)
    "light_vgg19.onnx": 143_667_240,  # VGG19 (Simonyan & Zisserman; torchvision vgg19)
    "light_squeezenet.onnx": 1_235_496,  # SqueezeNet 1.1 (torchvision squeezenet1_1)
    # ResNet50 25,557,032 (torchvision) + BatchNorm running mean and variance, which these models keep as
    # weights: 2 * 26,560 BN channels (64 + 1,408 + 3,584 + 10,240 + 11,264 over stem and stages 1-4).
    "light_resnet50.onnx": 25_557_032 + 2 * 26_560,
}


@pytest.mark.skipif(not LIGHT_DIR.exists(), reason="onnx's bundled light models are not installed")
@pytest.mark.parametrize("name", sorted(LIGHT_PARAMS))
def test_bundled_light_models_params_match_published_counts(name: str):
    a = analyze(LIGHT_DIR / name)
    assert a.totals.params == LIGHT_PARAMS[name]
    assert not a.unsupported


def _branch(name: str, op: str, repeats: int) -> onnx.GraphProto:
    """A subgraph applying ``op`` ``repeats`` times to the outer-scope tensor x[4,8]."""
    nodes, prev = [], "x"
    for i in range(repeats):
        nodes.append(helper.make_node(op, [prev], [f"{name}{i}"]))
        prev = f"{name}{i}"
    return helper.make_graph(nodes, name, [], [_vi(prev, [4, 8])])


def test_if_costs_its_costlier_branch_and_loop_its_body_times_trips():
    # then: 3 Relu over 32 elements = 96 FLOPs; else: 1 Relu = 32 FLOPs -> If costs 96.
    cond = numpy_helper.from_array(np.array(True), "cond")
    if_node = helper.make_node(
        "If", ["c"], ["y"], then_branch=_branch("t", "Relu", 3), else_branch=_branch("e", "Relu", 1)
    )
    m = _model([helper.make_node("Identity", ["cond"], ["c"]), if_node], [_vi("x", [4, 8])], [_vi("y", [4, 8])], [cond])
    # cond is a weight, so Identity(cond) folds; If reads a weight condition but is never folded (it has subgraphs).
    a = analyze(m)
    node = next(n for n in a.nodes if n.op_type == "If")
    assert node.cost.flops == 96

    # Loop with trip count 5 (a constant) whose body does one Relu on [4,8]: 5 * 32 = 160 FLOPs.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Relu", ["v_in"], ["v_out"])],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("v_in", [4, 8])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("v_out", [4, 8])],
    )
    inits = [numpy_helper.from_array(np.array(5, np.int64), "M"), numpy_helper.from_array(np.array(True), "keep")]
    loop = helper.make_node("Loop", ["M", "keep", "x"], ["y"], body=body)
    a = analyze(_model([loop], [_vi("x", [4, 8])], [_vi("y", [4, 8])], inits))
    assert a.nodes[0].cost.flops == 5 * 32


def test_weights_read_only_inside_subgraphs_are_parameters():
    # The then-branch multiplies the outer x[4,8] by the outer weight W[8,8] (64 params) and adds its own bias
    # B[8] (8 params); the else-branch reads W again. Distinct weights: 64 + 8 = 72, though no top-level node
    # but the If reads any, and the If reads only its condition.
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "W")
    bias = numpy_helper.from_array(np.ones(8, np.float32), "B")
    then_branch = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["tw"]), helper.make_node("Add", ["tw", "B"], ["t"])],
        "then",
        [],
        [_vi("t", [4, 8])],
        [bias],
    )
    else_branch = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["e"])], "else", [], [_vi("e", [4, 8])])
    if_node = helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)
    m = _model([if_node], [_vi("x", [4, 8]), _vi("c", [], TensorProto.BOOL)], [_vi("y", [4, 8])], [w])
    assert analyze(m).totals.params == 72


def test_opset7_model_with_upsample_and_legacy_batchnorm():
    # Opset 7: Upsample with a scales attribute; BatchNormalization with the old 'spatial' attribute.
    stats = [numpy_helper.from_array(np.ones(3, np.float32), n) for n in ("s", "b", "m", "v")]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], spatial=1),
        helper.make_node("Upsample", ["n"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0]),
    ]
    m = _model(nodes, [_vi("x", [1, 3, 4, 4])], [_vi("y", None)], stats, opsets=(("", 7),))
    m.ir_version = 3
    a = analyze(m)
    bn, up = a.nodes
    assert bn.cost.flops == 2 * 48  # 2 FLOPs per element (folded scale and shift) * 1*3*4*4
    assert up.cost.bytes_written == 1 * 3 * 8 * 8 * 4  # nearest x2: 192 floats written
    assert not a.unsupported


def test_repeated_nodes_are_costed_by_their_own_attributes_and_aliasing():
    """Nodes with equal shapes share one cost computation only when everything the cost depends on is equal."""
    nodes = [
        helper.make_node("Gemm", ["x", "W"], ["g1"]),
        helper.make_node("Gemm", ["x", "W"], ["g2"], alpha=2.0),
        helper.make_node("Gemm", ["x", "W"], ["g3"]),
        helper.make_node("Mul", ["g1", "g1"], ["m1"]),
        helper.make_node("Mul", ["g2", "g3"], ["m2"]),
    ]
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "W")
    outputs = [_vi("m1", None), _vi("m2", None)]
    a = analyze(_model(nodes, [_vi("x", [4, 16])], outputs, [w]), device="v100-sxm2")
    by_name = {n.name: n for n in a.nodes}
    gemms = [by_name[f"Gemm_{i}"].cost.flops for i in range(3)]
    # 2*M*N*K = 2*4*16*16 = 2048 FLOPs; a non-unit alpha adds one multiply per output element: 4*16 = 64.
    assert gemms == [2048, 2048 + 64, 2048]
    # Mul(g1, g1) reads its one distinct input once: 4*16*4 = 256 B; Mul(g2, g3) reads two: 512 B.
    assert by_name["Mul_3"].cost.bytes_read == 256
    assert by_name["Mul_4"].cost.bytes_read == 512


def test_repeated_nodes_are_told_apart_by_weight_flags():
    """Equal dtypes and shapes are not enough to share a cost: a weight input and an activation of the same
    shape cost different parameters."""
    nodes = [
        helper.make_node("Add", ["x", "W"], ["a1"]),
        helper.make_node("Add", ["x", "v"], ["a2"]),
        helper.make_node("Add", ["x", "W"], ["a3"]),
    ]
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "W")  # above SMALL_CONSTANT: no value kept
    outputs = [_vi(n, None) for n in ("a1", "a2", "a3")]
    a = analyze(_model(nodes, [_vi("x", [16, 16]), _vi("v", [16, 16])], outputs, [w]), device="v100-sxm2")
    # W is a weight of 16*16 = 256 elements; v, of the same shape, is a graph input and no parameter.
    assert [n.cost.params for n in a.nodes] == [256, 0, 256]


def test_every_repeated_unsupported_node_is_counted():
    nodes = [helper.make_node("NoSuchOp", [f"x{i}"], [f"y{i}"], domain="custom.domain") for i in range(3)]
    inputs = [_vi(f"x{i}", [2, 8]) for i in range(3)]
    outputs = [_vi(f"y{i}", [2, 8]) for i in range(3)]
    model = _model(nodes, inputs, outputs, opsets=(("", 17), ("custom.domain", 1)))
    with pytest.warns(UnsupportedOpWarning):
        a = analyze(model, device="v100-sxm2")
    assert [(u.op_type, u.count) for u in a.unsupported] == [("NoSuchOp", 3)]
    assert all(not n.supported and n.cost.bytes_read == 2 * 8 * 4 for n in a.nodes)


def test_an_engine_analysis_reads_weights_at_the_reuse_speedup_of_the_bytes_the_graph_moves():
    from dataclasses import replace

    from onnxroof.devices import WeightReuse
    from onnxroof.predict.analysis import analyze_graph
    from onnxroof.predict.memory import bytes_moved
    from tests.helpers import calibrated_host, loaded_graph

    weight = numpy_helper.from_array(np.full((512, 512), 0.01, dtype=np.float32), "w")
    loaded = loaded_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 512])],
        [weight],
        opset=17,
    )
    # A run moves the MatMul's 2 KiB vector in, 1 MiB weight and 2 KiB vector out, and the Relu's 2 KiB in and
    # out: 1 MiB + 8 KiB = 1,056,768 bytes. Halfway in log(traffic) between a point at half that (3x) and one at
    # twice it (1x): 2x, for the MatMul's 1 MiB weight.
    traffic = 512 * 512 * 4 + 4 * 512 * 4
    assert bytes_moved(loaded) == traffic
    reuse = WeightReuse(((traffic / 2, 3.0), (traffic * 2, 1.0)), "calibrated: test")
    device = replace(calibrated_host(), weight_reuse=reuse)
    note = analyze_graph(loaded, device, engine=True).nodes[0].engine
    assert note is not None and note.weight_speedup == pytest.approx(2.0)
    # The plain roofline of the graph as exported knows nothing of an engine's caches.
    assert analyze_graph(loaded, device).nodes[0].engine is None


def test_equal_nodes_reading_inputs_from_different_levels_get_their_own_predictions():
    from onnxroof.predict.analysis import analyze_graph
    from tests.helpers import calibrated_host, loaded_graph

    # x -> Relu a -> Relu b -> Relu c -> Relu d -> Add(d, c) near -> Add(near, a) far, every tensor 1x32x32x32 fp32
    # (128 KiB); each Add moves 384 KiB, in the hand-made host's L2 (1 MiB, 50 GB/s). near reads d just written and
    # c, written before d's Relu moved 256 KiB: both within L2. far reads a, written before 3 x 256 KiB of Relus
    # and near's 384 KiB: 1,152 KiB and its own 128 KiB, past L2, so from DRAM (10 GB/s): 131,072 / 10e9 = 13.11 us
    # in place of 131,072 / 50e9 = 2.62 us, 10.49 us more. Equal in signature, the two get their own predictions.
    shape = [1, 32, 32, 32]
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="r1"),
        helper.make_node("Relu", ["a"], ["b"], name="r2"),
        helper.make_node("Relu", ["b"], ["c"], name="r3"),
        helper.make_node("Relu", ["c"], ["d"], name="r4"),
        helper.make_node("Add", ["d", "c"], ["near"], name="near"),
        helper.make_node("Add", ["near", "a"], ["y"], name="far"),
    ]
    loaded = loaded_graph(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        opset=17,
    )
    by_name = {n.name: n for n in analyze_graph(loaded, calibrated_host(), engine=True).nodes}
    near, far = by_name["near"], by_name["far"]
    assert near.engine is not None and far.engine is not None
    assert near.engine.terms["distant_reads"] == 0.0
    assert far.engine.terms["distant_reads"] == pytest.approx(131072 / 10e9 - 131072 / 50e9)
    assert far.prediction.predicted_time_s == pytest.approx(
        near.prediction.predicted_time_s + far.engine.terms["distant_reads"]
    )


def test_a_streaming_node_after_one_that_fills_its_level_writes_into_lines_from_the_next():
    from onnxroof.predict.analysis import analyze_graph
    from tests.helpers import calibrated_host, loaded_graph

    # x -> Add(x, bias) first -> MatMul by a 512x512 weight -> Add(m, bias) second, the activations 1x128x512 fp32
    # (256 KiB), the bias 2 KiB. Each Add's working set, 2 x 256 KiB + 2 KiB = 526,336 B, is in the hand-made
    # host's L2 (1 MiB, 50 GB/s). The first runs first: nothing before it, nothing added. The second follows the
    # MatMul, whose working set (256 KiB in, 1 MiB of weight, 256 KiB out) with its own no longer fits L2: the
    # lines of its 256 KiB output come from the next level with a bandwidth, DRAM at 10 GB/s (the L3 has none),
    # read before they are written and written back, 2 x 262,144 / 10e9 = 52.43 us more.
    shape = [1, 128, 512]
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["a"], name="first"),
        helper.make_node("MatMul", ["a", "w"], ["m"], name="product"),
        helper.make_node("Add", ["m", "bias"], ["y"], name="second"),
    ]
    weights = [
        numpy_helper.from_array(np.zeros(512, np.float32), "bias"),
        numpy_helper.from_array(np.zeros((512, 512), np.float32), "w"),
    ]
    loaded = loaded_graph(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        weights,
        opset=17,
    )
    by_name = {n.name: n for n in analyze_graph(loaded, calibrated_host(), engine=True).nodes}
    first, second = by_name["first"].engine, by_name["second"].engine
    assert first is not None and second is not None
    assert first.working_set == second.working_set == 2 * 262144 + 2048 and first.level == "L2"
    assert first.terms["write_allocate"] == 0.0
    assert second.terms["write_allocate"] == pytest.approx(2 * 262144 / 10e9)
    gained = by_name["second"].prediction.predicted_time_s - by_name["first"].prediction.predicted_time_s
    assert gained == pytest.approx(second.terms["write_allocate"])
