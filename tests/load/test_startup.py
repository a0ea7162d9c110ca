"""What a command imports: errors that need no model are found before onnx or numpy is imported, and a model is
analyzed with onnx's protobuf classes and compiled shape inference alone, without the onnx package's Python
layer (which imports ml_dtypes). Each case runs the command line in a fresh process and reads its sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs cli.main on argv, then prints its exit code and which of the heavy modules the process holds.
_CHILD = """
import contextlib, io, json, sys
from onnxroof.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({
    "code": code,
    "onnx": "onnx" in sys.modules,
    "onnx_modules": sorted(m for m in sys.modules if m == "onnx" or m.startswith("onnx.")),
    "numpy": "numpy" in sys.modules,
    "ml_dtypes": "ml_dtypes" in sys.modules,
}))
"""


def _run(*argv: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True
    )
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyze", "missing.onnx"], "no such file: missing.onnx"),
        (["analyze", "zoo:resnet18", "-d", "no-such-device"], "unknown device 'no-such-device'"),
        (["compare", "zoo:resnet18", "missing.onnx"], "no such file: missing.onnx"),
        (["sweep", "zoo:resnet18", "-d", "t4,no-such-device"], "unknown device 'no-such-device'"),
        (["analyze", "."], "is a directory, not an ONNX file"),
    ],
)
def test_an_error_that_needs_no_model_is_found_before_onnx_or_numpy_is_imported(argv: list[str], message: str):
    child = _run(*argv)
    assert child["code"] == 2
    assert message in child["stderr"] and "(hint: " in child["stderr"]
    assert child["onnx_modules"] == [] and not child["numpy"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyze", "zoo:resnet18", "--dim", "batch=x"], "--dim batch=x: the value must be an integer"),
        (["analyze", "zoo:resnet18", "-p", "fp7"], "unknown precision 'fp7'"),
        (["sweep", "zoo:resnet18", "-p", "fp32,fp7"], "unknown precision 'fp7'"),
    ],
)
def test_a_bad_option_value_is_found_before_the_onnx_package_or_numpy_is_imported(argv: list[str], message: str):
    child = _run(*argv)
    assert child["code"] == 2
    assert message in child["stderr"] and "(hint: " in child["stderr"]
    assert not child["onnx"] and not child["numpy"] and not child["ml_dtypes"]


def test_a_model_is_analyzed_without_the_onnx_packages_python_layer(conv_bn_relu: Path, tmp_path: Path):
    child = _run("analyze", str(conv_bn_relu), "--format", "json", "-o", str(tmp_path / "out.json"))
    assert child["code"] == 0, child["stderr"]
    assert json.loads((tmp_path / "out.json").read_text())["totals"]["flops"] > 0
    # onnx's generated classes and its extension, loaded by file; never the package's __init__ (onnx.helper,
    # onnx.numpy_helper), which imports ml_dtypes.
    assert not child["onnx"] and not child["ml_dtypes"]
    assert "onnx.onnx_ml_pb2" in child["onnx_modules"] and "onnx.onnx_cpp2py_export" in child["onnx_modules"]


def test_onnx_imported_after_the_lean_load_reuses_its_classes(tmp_path: Path):
    # A command that rewrites or runs a model imports onnx after loading it: one set of classes, one descriptor
    # pool, and onnx's own functions work on the protos loading made.
    code = """
import sys
from onnxroof import protos
protos.use_lean()
model = protos.ModelProto.FromString(open(sys.argv[1], "rb").read())
assert "onnx" not in sys.modules
import onnx, onnx.checker, onnx.shape_inference
assert onnx.ModelProto is protos.ModelProto and onnx.TensorProto is protos.TensorProto
onnx.checker.check_model(model)
print(onnx.shape_inference.infer_shapes(model).graph.output[0].type.tensor_type.shape.dim[1].dim_value)
"""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 5])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 5])],
    )
    model_path = tmp_path / "relu.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), str(model_path))
    done = subprocess.run([sys.executable, "-c", code, str(model_path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5"
