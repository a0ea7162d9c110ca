"""How a node's terms combine, which engine profile charges which terms, and the JSON engine object."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.costs import Cost
from onnxroof.devices import FrozenMap, Peak, load_device
from onnxroof.predict import engine, profiles, terms
from onnxroof.predict.analysis import analyze_graph
from onnxroof.report.analysis_json import to_json
from tests.helpers import T, W, calibrated_host, loaded_graph, make_node

# ------------------------------------------------------------------------------------------------ the combine rule


def test_serial_combine_adds_the_stalls_to_the_arithmetic_then_the_overhead_and_the_passes_after():
    seconds = {
        "arithmetic": 3.0,
        "projection": 1.0,
        "activations": 2.0,
        "weights": 1.5,
        "weight_wait": 0.5,
        "output_write": 0.25,
        "bias_pass": 0.25,
        "dispatch": 0.125,
        "epilogue": 0.5,
        "subnormal": 0.25,
    }
    combined = terms.combine(seconds, "serial")
    # compute 3 + 1 = 4, memory 2 + 1.5 = 3.5, stalls 0.5 + 0.25 + 0.25 = 1:
    # max(4 + 1, 3.5) + 0.125 + 0.5 + 0.25 = 5.875
    assert (combined.compute_s, combined.memory_s, combined.overhead_s) == (4.0, 3.5, 0.125)
    assert combined.time_s == 5.875
    assert combined.terms == seconds  # nothing dropped
    # under max: max(4 + 1, 3.5, 0.125) + 0.5 + 0.25 = 5.75
    assert terms.combine(seconds, "max").time_s == 5.75


def test_the_stalls_count_only_where_the_arithmetic_with_them_outlasts_the_memory_side():
    seconds = {"arithmetic": 1.0, "activations": 3.0, "weight_wait": 1.0, "bias_pass": 0.5, "dispatch": 0.25}
    combined = terms.combine(seconds, "serial")
    # 1 + 1 + 0.5 = 2.5 < 3: the memory side holds the weights and the output; max(1, 3) + 0.25 = 3.25
    assert combined.time_s == 3.25
    assert combined.terms == {**seconds, "weight_wait": 0.0, "bias_pass": 0.0}
    # 1 + 1 + 1.5 = 3.5 >= 3: they count, max(3.5, 3) + 0.25 = 3.75
    assert terms.combine({**seconds, "bias_pass": 1.5}, "serial").time_s == 3.75


def test_a_compute_ceiling_is_read_with_the_same_terms_taken_off():
    """The calibration's inverse: the kernel's own arithmetic, predicted and measured."""
    seconds = {"arithmetic": 4.0, "projection": 1.0, "activations": 2.0, "weight_wait": 0.5, "bias_pass": 0.25}
    # predicted: compute (4 + 1) less the projection = 4; measured: 7 - 0.5 (exposed) - 1 (projection) - 0.25 = 5.25
    assert terms.kernel_arithmetic(7.0, seconds) == (4.0, 5.25)
    # a ceiling of 4 / 5.25 applied predicts the kernel back at its measured 7 s
    slower = {**seconds, "arithmetic": 4.0 / (4.0 / 5.25)}
    assert terms.combine(slower, "serial").time_s == pytest.approx(7.0)


def test_every_term_is_named_once_and_of_a_known_kind():
    names = [t.name for t in terms.TERMS]
    assert len(names) == len(set(names))
    assert {t.kind for t in terms.TERMS} <= set(terms.KINDS)
    # the compute and memory sides' terms come first: every other term reads the whole memory time
    sides = [t.kind in (terms.COMPUTE, terms.MEMORY) for t in terms.TERMS]
    assert sides == sorted(sides, reverse=True)
    for profile in profiles.PROFILES:
        assert set(profile.terms) <= set(names), profile.name
        assert [t.name for t in profiles.profile_terms(profile)] == [n for n in names if n in profile.terms]


def test_a_products_stalls_count_while_its_arithmetic_with_them_outlasts_its_memory_time():
    """max(compute + stalls, memory): the prediction moves continuously as the ceilings move a product from its
    arithmetic's side to its memory's, where the stalls once came and went at once."""
    # 49 x 768 by 768 x 3072 (an MLP over 49 frames), a MatMul: 2 * 49 * 768 * 3072 = 231,211,008 FLOPs.
    # Weights 768 * 3072 * 4 = 9,437,184 B, read at DRAM's 10 GB/s: 943.7 us, the stall of a product by cold
    # weights (exposed_weight_time). Input 150,528 B and output 602,112 B; the working set (10,189,824 B) is past
    # the 1 MiB L2, so the output is read and written at DRAM's rate too (output_write_time): 2 * 602,112 / 10e9 =
    # 120.4 us. Stalls: 1064.1 us. Memory time: 10,189,824 B at 10 GB/s = 1019.0 us.
    flops, weights, acts = 2 * 49 * 768 * 3072, 768 * 3072 * 4, (49 * 768 + 49 * 3072) * 4
    view = make_node("MatMul", [T((49, 768)), W((768, 3072))], [T((49, 3072))])
    cost = Cost(flops=flops, bytes_read=weights + 49 * 768 * 4, bytes_written=49 * 3072 * 4, kernels=1)
    stalls, memory = weights / 10e9 + 2 * 602_112 / 10e9, (weights + acts) / 10e9

    def predicted(peak: float) -> tuple[float, float]:
        dev = replace(calibrated_host(), peak_flops=FrozenMap({"fp32": Peak(peak, True, "calibrated: test")}))
        pred, note = engine.predict_engine(view, cost, "fp32", dev)
        return pred.predicted_time_s, terms.total(note.terms, terms.EXPOSED)

    # At 100 GFLOP/s the arithmetic takes 2312.1 us, past the memory time: arithmetic + stalls + 1 us of dispatch.
    assert predicted(100e9) == pytest.approx((flops / 100e9 + stalls + 1e-6, stalls))
    # Arithmetic a hair under and over the memory time (1019 us): the prediction hardly moves (arithmetic + stalls
    # both times), where the stalls once vanished below it.
    below, above = predicted(flops / (memory * 0.99)), predicted(flops / (memory * 1.01))
    assert below == (pytest.approx(memory * 0.99 + stalls + 1e-6), pytest.approx(stalls))
    assert above == (pytest.approx(memory * 1.01 + stalls + 1e-6), pytest.approx(stalls))
    # Arithmetic so fast that even with the stalls it ends before the memory: the memory time alone.
    assert predicted(flops / (memory - stalls - 10e-6)) == (pytest.approx(memory + 1e-6), 0.0)


# ------------------------------------------------------------------------------------------------ engine profiles


def _gemm_with_c():
    """64 x 768 by 768 x 768 with C: 75,497,472 FLOPs, 2,362,368 B of weights and bias (past COLD_WEIGHTS)."""
    view = make_node("Gemm", [T((64, 768)), W((768, 768)), W((768,))], [T((64, 768))], transB=1)
    weights = 4 * (768 * 768 + 768)
    cost = Cost(flops=2 * 64 * 768 * 768, bytes_read=4 * 64 * 768 + weights, bytes_written=4 * 64 * 768, kernels=1)
    return view, cost, weights


def test_a_device_names_its_profile_through_its_engine_field():
    host = calibrated_host()
    assert profiles.named_profile(host).name == "onnxruntime-cpu"  # engine = "onnxruntime", kind cpu
    assert profiles.named_profile(replace(host, kind="gpu")).name == "onnxruntime-accelerator"
    assert profiles.named_profile(replace(host, engine="onnxruntime-accelerator")).name == "onnxruntime-accelerator"
    assert profiles.named_profile(replace(host, engine="another-runtime")) is None
    datasheet = load_device("colab-xeon-1core")
    assert profiles.named_profile(datasheet) is None  # the plain roofline in an analysis
    assert profiles.engine_profile(datasheet).name == "onnxruntime-cpu"  # what predict_engine on it follows


def test_the_accelerator_profile_charges_no_weight_wait_and_no_pass_for_c():
    view, cost, weights = _gemm_with_c()
    host = calibrated_host()
    _, on_cpu = engine.predict_engine(view, cost, "fp32", host)
    # On the CPU executor: compute 75,497,472 / 100e9 = 755.0 us; the 2,755,584 B working set is past L2, so the
    # weights wait 2,362,368 / 10e9 = 236.2 us and the output's write 2 x 196,608 / 10e9 = 39.3 us; C's pass over
    # the 196,608 B output in L2, 2 x 196,608 / 50e9 = 7.9 us.
    assert on_cpu.terms["weight_wait"] == pytest.approx(weights / 10e9)
    assert on_cpu.terms["bias_pass"] == pytest.approx(2 * 196_608 / 50e9)
    pred, on_gpu = engine.predict_engine(view, cost, "fp32", replace(host, kind="gpu", overlap="max"))
    assert "weight_wait" not in on_gpu.terms and "bias_pass" not in on_gpu.terms
    # max(755.0 + 39.3, 275.6 of memory at DRAM's rate, 1 of dispatch) us under a GPU's max rule
    assert pred.predicted_time_s == pytest.approx(2 * 64 * 768 * 768 / 100e9 + 2 * 196_608 / 10e9)


def test_the_terms_ask_the_profile_not_the_device_kind():
    view, cost, _ = _gemm_with_c()
    host = calibrated_host()
    cpu, cpu_note = engine.predict_engine(view, cost, "fp32", host)
    named, named_note = engine.predict_engine(view, cost, "fp32", replace(host, kind="gpu", engine="onnxruntime-cpu"))
    assert named == cpu and named_note.terms == cpu_note.terms


# ------------------------------------------------------------------------------------------------ the JSON


def test_the_json_engine_object_holds_class_reason_and_terms_that_add_up_to_the_prediction():
    # x (64 x 768) -> Gemm by a 768 x 768 weight with C -> Relu: the Gemm charges its weights' wait and its pass for C
    nodes = [
        helper.make_node("Gemm", ["x", "w", "c"], ["g"], name="gemm", transB=1),
        helper.make_node("Relu", ["g"], ["y"], name="relu"),
    ]
    inits = [
        numpy_helper.from_array(np.zeros((768, 768), np.float32), "w"),
        numpy_helper.from_array(np.zeros(768, np.float32), "c"),
    ]
    loaded = loaded_graph(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 768])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 768])],
        inits,
        opset=17,
    )
    document = json.loads(to_json(analyze_graph(loaded, calibrated_host(), engine=True)))
    by_name = {n["name"]: n for n in document["nodes"]}
    for node in by_name.values():
        e = node["engine"]
        assert e["class"] == e["op_class"] and isinstance(e["reason"], str)
        assert list(e["terms"]) == list(profiles.PROFILES[0].terms)
        t = e["terms"]
        compute = t["arithmetic"] + t["projection"]
        memory = t["activations"] + t["weights"] + t["distant_reads"] + t["write_allocate"]
        stalls = t["exposed_dram"] + t["weight_wait"] + t["output_write"] + t["bias_pass"]
        assert node["compute_time_s"] == pytest.approx(compute) and node["memory_time_s"] == pytest.approx(memory)
        assert node["overhead_time_s"] == t["dispatch"]
        after = t["epilogue"] + t["subnormal"]
        assert node["predicted_time_s"] == pytest.approx(max(compute + stalls, memory) + t["dispatch"] + after)
        assert e["exposed_memory_s"] == pytest.approx(t["exposed_dram"] + t["weight_wait"] + t["output_write"])
    assert by_name["gemm"]["engine"]["class"] == "gemm"
    assert by_name["gemm"]["engine"]["terms"]["weight_wait"] > 0 and by_name["gemm"]["engine"]["terms"]["bias_pass"] > 0


def _relu_graph():
    """One Relu over 64 x 768 floats."""
    return loaded_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 768])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 768])],
    )


def test_a_device_naming_a_profile_by_its_own_name_gets_the_engine_prediction():
    import onnxroof

    loaded = _relu_graph()
    named = replace(calibrated_host(), engine="onnxruntime-cpu")
    analysis = onnxroof.analyze(loaded, named)
    assert analysis.graph == "onnxruntime-optimized" and analysis.nodes[0].engine is not None
    plain = onnxroof.analyze(loaded, replace(calibrated_host(), engine=None))
    assert plain.graph == "as-exported" and plain.nodes[0].engine is None


def test_a_profile_without_a_term_charges_it_nowhere_and_the_rest_alike():
    view, cost, weights = _gemm_with_c()
    host = calibrated_host()
    full, full_note = engine.predict_engine(view, cost, "fp32", host)
    lean = profiles.without_terms(profiles.engine_profile(host), frozenset({"weight_wait"}))
    pred, note = engine.predict_engine(view, cost, "fp32", host, profile=lean)
    assert "weight_wait" not in note.terms
    # The product is compute-bound with and without it (755.0 + 39.3 + 7.9 us of arithmetic and stalls against
    # 275.6 us of memory, see the accelerator test above), so the prediction loses exactly the weights' wait,
    # 2,362,368 B / 10e9 B/s = 236.2 us.
    assert full.predicted_time_s - pred.predicted_time_s == pytest.approx(weights / 10e9)
    assert {k: v for k, v in full_note.terms.items() if k != "weight_wait"} == dict(note.terms)
    with pytest.raises(KeyError, match="no term"):
        profiles.without_terms(lean, frozenset({"weight_wait"}))


def test_an_analysis_on_a_given_profile_charges_its_terms_only():
    loaded = _relu_graph()
    host = calibrated_host()
    lean = profiles.without_terms(profiles.engine_profile(host), frozenset({"dispatch"}))
    full = analyze_graph(loaded, host, engine=True)
    without = analyze_graph(loaded, host, engine=True, profile=lean)
    # One Relu: the dispatch term is the device's per-node overhead, so the run loses exactly that.
    lost = full.totals.predicted_time_s - without.totals.predicted_time_s
    assert lost == pytest.approx(host.launch_overhead.value)
    assert "dispatch" not in without.nodes[0].engine.terms
    # A profile is an engine prediction's: given alone, it is not ignored.
    assert analyze_graph(loaded, host, profile=lean).totals == without.totals
