"""A decoder step's masks, lengths and positions made to agree with its cache, so that random runs are valid."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import model_zoo
from onnxroof.load.decoder import decoder_inputs
from onnxroof.load.model_spec import ModelSpec
from onnxroof.ort.decoder_feeds import decoder_feeds
from onnxroof.ort.sessions import make_session, random_feeds, runnable_model
from tests.helpers import IR_VERSION, plain_ops_decoder

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
MS = "com.microsoft"


def _gqa_with_length_inputs():
    """GroupQueryAttention whose seqlens_k and total_sequence_length are graph inputs (no mask), with token ids
    gathered from a 32 x 64 embedding and positions from a smaller 16 x 64 table added to it."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((32, 64)).astype(np.float32), "embed"),
        numpy_helper.from_array(rng.standard_normal((16, 64)).astype(np.float32), "pos_table"),
        numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "wk"),
    ]
    nodes = [
        helper.make_node("Gather", ["embed", "input_ids"], ["tok"]),
        helper.make_node("Gather", ["pos_table", "pos"], ["where"]),
        helper.make_node("Add", ["tok", "where"], ["h"]),
        helper.make_node("MatMul", ["h", "wk"], ["k"]),
        helper.make_node(
            "GroupQueryAttention",
            ["h", "k", "k", "past_k", "past_v", "seqlens_k", "total"],
            ["y", "present_k", "present_v"],
            domain=MS,
            num_heads=4,
            kv_num_heads=2,
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("input_ids", I64, ["B", "S"]),
        helper.make_tensor_value_info("pos", I64, ["B", "S"]),
        helper.make_tensor_value_info("past_k", F, ["B", 2, "P", 16]),
        helper.make_tensor_value_info("past_v", F, ["B", 2, "P", 16]),
        helper.make_tensor_value_info("seqlens_k", I32, ["B"]),
        helper.make_tensor_value_info("total", I32, [1]),
    ]
    outputs = [helper.make_tensor_value_info("y", F, ["B", "S", 64])]
    outputs += [helper.make_tensor_value_info(n, F, ["B", 2, "T", 16]) for n in ("present_k", "present_v")]
    graph = helper.make_graph(nodes, "gqa", inputs, outputs, weights)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def test_length_inputs_and_positions_are_found_by_what_they_feed():
    found = decoder_inputs(_gqa_with_length_inputs())
    assert found is not None
    assert found.tokens == "input_ids" and found.positions == ("pos",)
    assert (found.lengths, found.totals, found.masks) == (("seqlens_k",), ("total",), ())


def test_values_agree_with_the_cache():
    found = decoder_inputs(_gqa_with_length_inputs())
    assert found is not None
    shapes = {
        "input_ids": ((2, 3), I64),
        "pos": ((2, 3), I64),
        "past_k": ((2, 2, 5, 16), F),
        "past_v": ((2, 2, 5, 16), F),
        "seqlens_k": ((2,), I32),
        "total": ((1,), I32),
    }
    feeds = decoder_feeds(found, shapes)
    # 3 new tokens after 5 past rows: 8 rows in all, seqlens_k = 8 - 1 per sequence, positions 5, 6, 7
    assert feeds["seqlens_k"].tolist() == [7, 7] and feeds["seqlens_k"].dtype == np.int32
    assert feeds["total"].tolist() == [8] and feeds["total"].dtype == np.int32
    assert feeds["pos"].tolist() == [[5, 6, 7], [5, 6, 7]] and feeds["pos"].dtype == np.int64
    assert set(feeds) == {"seqlens_k", "total", "pos"}  # tokens and caches stay random


@pytest.mark.ort
def test_random_feeds_of_a_gqa_step_run():
    # batch 1: GroupQueryAttention takes several new tokens over a past for one sequence only
    spec = ModelSpec(_gqa_with_length_inputs(), dims={"B": 1, "S": 3, "P": 5})
    runnable = runnable_model(spec)
    session, _ = make_session(runnable.model)
    y, present_k, _ = session.run(None, random_feeds(runnable))
    assert y.shape == (1, 3, 64) and present_k.shape == (1, 2, 8, 16)


def test_a_mask_attends_every_row():
    found = decoder_inputs(plain_ops_decoder())
    assert found is not None and found.masks == ("m",)
    shapes = {"ids": ((2, 1), I64), "pk": ((2, 2, 6, 4), F), "m": ((2, 7), I64)}
    assert decoder_feeds(found, shapes)["m"].tolist() == [[1] * 7] * 2


def test_a_float_mask_adds_zero():
    # ONNX Attention's float mask is added to the scores: 0 attends a row
    inputs = [helper.make_tensor_value_info(n, F, ["B", 4, "S", 8]) for n in ("q", "k", "v")]
    inputs += [helper.make_tensor_value_info(n, F, ["B", 4, "P", 8]) for n in ("past_k", "past_v")]
    inputs.append(helper.make_tensor_value_info("mask", F, ["B", "L"]))
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "past_k", "past_v"], ["y", "pk", "pv"])
    graph = helper.make_graph([node], "attention", inputs, [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=IR_VERSION)
    found = decoder_inputs(model)
    assert found is not None and found.masks == ("mask",)
    shapes = {"q": ((1, 4, 1, 8), F), "past_k": ((1, 4, 3, 8), F), "mask": ((1, 4), F)}
    assert decoder_feeds(found, shapes)["mask"].tolist() == [[0.0] * 4]


@pytest.mark.ort
def test_a_genai_step_runs_on_random_feeds():
    # the mask of zeros random inputs would give makes seqlens_k -1, which GroupQueryAttention refuses
    dims = {"batch_size": 2, "sequence_length": 1, "past_sequence_length": 5, "total_sequence_length": 6}
    runnable = runnable_model(ModelSpec("zoo:tiny-decoder-int4", dims=dims))
    session, _ = make_session(runnable.model)
    logits = session.run(["logits"], random_feeds(runnable))[0]
    assert logits.shape == (2, 1, 256) and np.isfinite(logits).all()


def test_other_models_have_no_decoder_inputs():
    assert decoder_inputs(model_zoo.build("conv2d_kernel", weights=False)) is None
