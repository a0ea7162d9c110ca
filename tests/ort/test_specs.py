"""The model and session specs: what travels together from the command line to every load, run and session."""

from __future__ import annotations

import pytest

from onnxroof.cli import build_parser
from onnxroof.cli.common import model_spec, session_spec
from onnxroof.errors import UserError
from onnxroof.load.model_spec import ModelSpec
from onnxroof.load.model_spec import model_spec as as_spec
from onnxroof.ort.optimized import calibrated_session
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.ort.sessions import make_session
from tests.helpers import calibrated_host, tiny_model


def _args(*argv: str):
    return build_parser().parse_args(list(argv))


def test_a_model_spec_parses_its_shapes_once_and_keeps_copies_of_its_mappings():
    inputs: dict[str, tuple[int, ...] | str] = {"x": "1x3x8x8", "sr": "", "y": (2, 4)}
    dims = {"batch": 2}
    spec = ModelSpec.of("m.onnx", inputs, dims, {"sr": "16000"})
    assert spec.inputs == {"x": (1, 3, 8, 8), "sr": (), "y": (2, 4)}
    dims["batch"] = 8
    inputs["x"] = "1x1"
    assert spec.dims == {"batch": 2} and spec.inputs["x"] == (1, 3, 8, 8)
    assert spec == ModelSpec("m.onnx", {"x": (1, 3, 8, 8), "sr": (), "y": (2, 4)}, {"batch": 2}, {"sr": "16000"})
    with pytest.raises(UserError, match="bad shape"):
        ModelSpec.of("m.onnx", {"x": "1xq"})


def test_a_bare_source_is_the_model_as_stored():
    spec = as_spec("zoo:resnet18")
    assert spec == ModelSpec("zoo:resnet18") and (spec.inputs, spec.dims, spec.values) == ({}, {}, {})
    assert as_spec(spec) is spec


def test_a_session_spec_refuses_settings_no_session_can_have():
    with pytest.raises(UserError, match="threads must be at least 1"):
        SessionSpec(threads=0)
    with pytest.raises(UserError, match="unknown execution provider 'tpu'"):
        SessionSpec("tpu")
    with pytest.raises(UserError, match="unknown optimization level 'most'"):
        SessionSpec(opt_level="most")
    assert SessionSpec("cuda").provider_name == "CUDAExecutionProvider"
    assert SessionSpec("CPUExecutionProvider").provider_name == "CPUExecutionProvider"


def test_measure_options_build_both_specs():
    args = _args(
        "measure",
        "zoo:resnet18",
        "--input",
        "x=1x3x32x32",
        "--dim",
        "batch=2",
        "--value",
        "sr=16000",
        "--provider",
        "cuda",
        "--threads",
        "3",
        "--opt-level",
        "basic",
        "--allow-fallback",
    )
    assert model_spec(args) == ModelSpec("zoo:resnet18", {"x": (1, 3, 32, 32)}, {"batch": 2}, {"sr": "16000"})
    assert session_spec(args) == SessionSpec("cuda", 3, "basic", allow_fallback=True)


def test_validate_defaults_build_the_default_specs():
    args = _args("validate", "model.onnx")
    assert model_spec(args) == ModelSpec("model.onnx")
    assert session_spec(args) == SessionSpec()


def test_bad_options_are_refused_when_the_specs_are_built():
    with pytest.raises(UserError, match="threads must be at least 1"):
        session_spec(_args("measure", "m.onnx", "--threads", "0"))
    with pytest.raises(UserError, match="--dim batch=0"):
        model_spec(_args("validate", "m.onnx", "--dim", "batch=0"))


@pytest.mark.ort
def test_a_spec_that_differs_only_in_threads_gives_a_different_session():
    one, two = SessionSpec(threads=1), SessionSpec(threads=2)
    assert one != two and hash(one) != hash(two)
    first, _ = make_session(tiny_model(), one)
    second, _ = make_session(tiny_model(), two)
    assert first.get_session_options().intra_op_num_threads == 1
    assert second.get_session_options().intra_op_num_threads == 2


@pytest.mark.ort
def test_the_spec_sets_the_sessions_optimization_level():
    from onnxroof.ort.sessions import ort

    made, _ = make_session(tiny_model(), SessionSpec(opt_level="disable"))
    assert made.get_session_options().graph_optimization_level == ort().GraphOptimizationLevel.ORT_DISABLE_ALL


def test_the_optimized_graph_is_made_in_the_session_the_profile_was_calibrated_with():
    assert calibrated_session(calibrated_host(threads=2)) == SessionSpec("cpu", 2, "all", allow_fallback=True)
