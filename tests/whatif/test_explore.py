"""explore: every candidate rewrite tried, the ones that apply ranked by predicted speedup, the others listed
with the pass's reason; the layers a rewrite touches."""

from __future__ import annotations

import pytest

from onnxroof.api import analyze
from onnxroof.errors import UserError
from onnxroof.passes.model_file import read_source
from onnxroof.whatif.explore import explore, touched_nodes
from onnxroof.whatif.rewrite import RewriteRequest, apply_request
from tests.helpers import calibrated_host


def test_unet_candidates_are_ranked_by_predicted_speedup() -> None:
    result = explore("zoo:unet?size=32", "rtx2060-super", only=("separable", "lwu", "fp16"))
    applied = [c for c in result.candidates if not c.refused]
    assert {c.name for c in applied} == {"separable", "lwu", "fp16"}
    speedups = [c.predicted_speedup for c in applied]
    assert speedups == sorted(speedups, reverse=True)
    base = analyze("zoo:unet?size=32", "rtx2060-super").totals.predicted_time_s
    assert result.baseline_s == pytest.approx(base)
    lwu = next(c for c in applied if c.name == "lwu")
    assert {f"encoder{i}.conv2" for i in range(4)} <= set(lwu.layers)
    assert lwu.command == "--stride lwu"


def test_a_rewrite_that_does_not_apply_is_listed_with_its_reason() -> None:
    result = explore("zoo:resnet18?size=32", "v100-sxm2", only=("lwu",))
    (lwu,) = result.candidates
    assert lwu.refused and "U-Net" in lwu.refused


def test_unknown_candidates_are_user_errors() -> None:
    with pytest.raises(UserError, match="unknown rewrite"):
        explore("zoo:unet?size=32", "v100-sxm2", only=("winograd",))


def test_fp16_touches_every_node_on_float_tensors() -> None:
    source = read_source("zoo:unet?size=32")
    half = apply_request(source, RewriteRequest(fp16=True), compare_outputs=False).result.model
    # Without keep_io_types every tensor of the U-Net is float, so every node reads or writes fp16 afterwards.
    assert set(touched_nodes(source.model, half)) == {n.name for n in source.model.graph.node}


def test_separable_touches_exactly_the_converted_convs() -> None:
    source = read_source("zoo:unet?size=32")
    sep = apply_request(source, RewriteRequest(separable=("encoder0.conv2",)), compare_outputs=False)
    assert touched_nodes(source.model, sep.result.model) == ("encoder0.conv2",)


@pytest.mark.ort
def test_measure_times_the_best_candidates_against_this_machines_prediction() -> None:
    here = calibrated_host()
    result = explore("zoo:unet?size=16&depth=1", "v100-sxm2", measure=1, only=("lwu", "fp16"), here=here)
    timed = [c for c in result.candidates if c.measured_speedup is not None]
    untimed = [c for c in result.candidates if not c.refused and c.measured_speedup is None]
    assert len(timed) == 1 and len(untimed) == 1
    assert timed[0].predicted_speedup >= untimed[0].predicted_speedup  # the best one is timed
    (best,) = timed
    assert best.host_before_s == pytest.approx(analyze("zoo:unet?size=16&depth=1", here).totals.predicted_time_s)
    assert best.measured_before_s and best.measured_after_s and best.measured_before_s > 0
    data = best.to_dict()
    assert data["measured_speedup"] == pytest.approx(best.measured_before_s / best.measured_after_s)
    assert isinstance(data["direction_right"], bool)
