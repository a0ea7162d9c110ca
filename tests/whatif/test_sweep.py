"""sweep: one row per combination, what-if precision rows kept apart from rewrite rows, batch by the batch pass."""

from __future__ import annotations

import pytest

from onnxroof.api import analyze
from onnxroof.errors import UserError
from onnxroof.whatif.sweep import sweep


def test_every_combination_gets_a_row() -> None:
    result = sweep("zoo:unet?size=32", ["v100-sxm2", "gtx940mx"], batches=[1, 4], precisions=["fp32", "fp16"])
    assert len(result.rows) == 2 * 2 * 2
    assert {(r.batch, r.precision, r.kind, r.device) for r in result.rows} == {
        (b, p, "what-if", d) for b in (1, 4) for p in ("fp32", "fp16") for d in ("v100-sxm2", "gtx940mx")
    }
    for r in result.rows:
        assert r.throughput == pytest.approx(r.batch / r.predicted_time_s)


def test_a_batch_row_is_the_analysis_of_the_model_at_that_batch() -> None:
    row = sweep("zoo:unet?size=32", ["v100-sxm2"], batches=[4], precisions=["fp16"]).rows[0]
    direct = analyze("zoo:unet?size=32&batch=4", "v100-sxm2", precision="fp16").totals
    assert (row.flops, row.predicted_time_s, row.input_size) == (direct.flops, direct.predicted_time_s, "32x32")


def test_fp16_what_if_halves_the_bytes_of_fp32() -> None:
    rows = sweep("zoo:unet?size=32", ["v100-sxm2"], precisions=["fp32", "fp16"]).rows
    fp32, fp16 = rows
    assert fp16.bytes_moved == pytest.approx(fp32.bytes_moved / 2)  # every tensor of the U-Net is float
    assert fp16.flops == fp32.flops


def test_rewrite_rows_say_so() -> None:
    rows = sweep("zoo:unet?size=32", ["v100-sxm2"], rewrites=["fp16"]).rows
    assert [(r.precision, r.kind) for r in rows] == [("fp16", "rewrite")]


def test_unknown_names_are_user_errors() -> None:
    with pytest.raises(UserError, match="unknown rewrite"):
        sweep("zoo:unet?size=32", ["v100-sxm2"], rewrites=["fp12"])
    with pytest.raises(UserError):
        sweep("zoo:unet?size=32", ["v100-sxm2"], precisions=["fp12"])
