"""A decoder's phase dims found from its attention nodes: GroupQueryAttention (GenAI), ONNX Attention with a past,
an attention in plain ops (a past concatenated with the new keys), and what is refused."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

import model_zoo
from onnxroof.errors import UserError
from onnxroof.load.decoder import decoder_dims
from tests.helpers import plain_ops_decoder

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, opset=23):
    graph = helper.make_graph(nodes, "decoder", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def test_genai_layout():
    dims = decoder_dims(model_zoo.build_decoder("tiny-decoder-int4", weights=False))
    assert (dims.batch, dims.sequence, dims.past, dims.total) == (
        "batch_size",
        "sequence_length",
        "past_sequence_length",
        "total_sequence_length",
    )
    assert dims.attention == "GroupQueryAttention" and len(dims.caches) == len(dims.presents) == 4
    assert dims.step(2, 1, 10) == {
        "batch_size": 2,
        "sequence_length": 1,
        "past_sequence_length": 10,
        "total_sequence_length": 11,
    }
    # a shared buffer: the past input is the buffer, the total the valid rows plus the new
    assert dims.step(1, 1, 10, buffer=64)["past_sequence_length"] == 64


def test_plain_ops_attention_whatever_the_names():
    dims = decoder_dims(plain_ops_decoder())
    assert (dims.batch, dims.sequence, dims.past, dims.total) == ("b", "s", "past", "t")
    assert dims.attention == "Concat" and dims.caches == ("pk",) and dims.presents == ("present_k",)


def test_onnx_attention_with_a_past():
    inputs = [helper.make_tensor_value_info(n, F, ["B", 4, "S", 8]) for n in ("q", "k", "v")]
    inputs += [helper.make_tensor_value_info(n, F, ["B", 4, "P", 8]) for n in ("past_k", "past_v")]
    inputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, ["B", "L"]))
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "past_k", "past_v"], ["y", "pk", "pv"])
    outputs = [helper.make_tensor_value_info(n, F, ["B", 4, "L", 8]) for n in ("pk", "pv")]
    dims = decoder_dims(_model([node], inputs, outputs))
    assert (dims.batch, dims.sequence, dims.past, dims.total) == ("B", "S", "P", "L")


def test_no_cache_is_refused_in_one_line():
    with pytest.raises(UserError, match="no past key/value cache"):
        decoder_dims(model_zoo.build("conv2d_kernel", weights=False))


def test_a_fixed_past_is_refused():
    with pytest.raises(UserError, match="past length is fixed at 7"):
        decoder_dims(plain_ops_decoder(past_len=7))


def test_an_extra_open_dim_must_be_fixed_by_the_user():
    model = plain_ops_decoder(mask=False)  # no mask: t appears only in the output, s is alone again
    assert decoder_dims(model).total is None
    extra = plain_ops_decoder()
    extra.graph.input.append(helper.make_tensor_value_info("lang", I64, ["n_lang"]))
    with pytest.raises(UserError, match="several: n_lang, s"):
        decoder_dims(extra)
    assert decoder_dims(extra, fixed={"n_lang": 1}).sequence == "s"


def test_hf_optimum_layout():
    # optimum's text-generation-with-past export: attention in standard ops, one Concat per cache along axis -2,
    # the mask's dim named 'past_sequence_length + sequence_length', position_ids a third [batch, sequence] input.
    dims = decoder_dims(model_zoo.build_decoder("tiny-decoder-hf-fp16", weights=False))
    assert (dims.batch, dims.sequence, dims.past, dims.total) == (
        "batch_size",
        "sequence_length",
        "past_sequence_length",
        "past_sequence_length + sequence_length",
    )
    assert dims.attention == "Concat" and len(dims.caches) == len(dims.presents) == 4
    assert dims.step(1, 1, 10)["past_sequence_length + sequence_length"] == 11


def test_hf_inputs_by_what_they_hold():
    # the mask is what layer 0's new keys are not computed from; position_ids is gathered from no table
    from onnxroof.load.decoder import decoder_inputs

    found = decoder_inputs(model_zoo.build_decoder("tiny-decoder-hf-fp16", weights=False))
    assert found is not None
    assert (found.tokens, found.masks, found.positions) == ("input_ids", ("attention_mask",), ("position_ids",))
