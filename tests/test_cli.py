"""The command line: reports in every format, one-line errors with exit code 2, and atomic output files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.cli import main
from onnxroof.devices import catalog

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def symbolic_model(tmp_path: Path) -> Path:
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "sym",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [w],
    )
    path = tmp_path / "sym.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_analyze_table_json_and_csv(symbolic_model: Path, capsys):
    assert main(["analyze", str(symbolic_model), "--dim", "batch=4"]) == 0
    table = capsys.readouterr().out
    assert "MatMul" in table and "bound" in table
    assert max(len(line) for line in table.splitlines()) <= 100

    assert main(["analyze", str(symbolic_model), "--dim", "batch=4", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # MatMul [4,16] x [16,8]: 2*4*8*16 = 1024 FLOPs; Relu: 32 FLOPs.
    assert data["totals"]["flops"] == 1024 + 32
    assert [n["op_type"] for n in data["nodes"]] == ["MatMul", "Relu"]

    assert main(["analyze", str(symbolic_model), "--input", "x=2x16", "--format", "csv"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 3


def test_output_file_is_written_and_the_model_untouched(symbolic_model: Path, tmp_path: Path):
    before = symbolic_model.read_bytes()
    out = tmp_path / "report.json"
    assert main(["analyze", str(symbolic_model), "--dim", "batch=1", "-f", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["model"] == "sym.onnx"
    assert symbolic_model.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "sym.onnx"]


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "zoo:conv2d_kernel"],
        ["validate", "zoo:conv2d_kernel"],
        ["measure", "zoo:conv2d_kernel"],
        ["compare", "zoo:conv2d_kernel", "zoo:conv2d_kernel"],
        ["sweep", "zoo:conv2d_kernel"],
        ["explore", "zoo:conv2d_kernel"],
        ["fit", "zoo:conv2d_kernel"],
        ["calibrate"],
    ],
)
def test_an_existing_output_is_refused_before_any_work(args: list[str], tmp_path: Path, capsys):
    out = tmp_path / "mine.txt"
    out.write_text("keep me")
    assert main([*args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out} exists" in err and "--force" in err
    assert out.read_text() == "keep me"


def test_force_replaces_an_existing_output(tmp_path: Path):
    out = tmp_path / "report.json"
    out.write_text("old")
    assert main(["analyze", "zoo:conv2d_kernel", "-f", "json", "-o", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["model"] == "zoo:conv2d_kernel"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["analyze", "missing.onnx"], "no such file"),
        (["analyze", "zoo:nope"], "no zoo model named"),
        (["analyze", "zoo:conv2d_kernel", "--device", "gtx9999"], "unknown device"),
        (["analyze", "zoo:conv2d_kernel", "--precision", "fp12"], "unknown precision"),
        (["analyze", "zoo:conv2d_kernel", "--dim", "batch=x"], "must be an integer"),
    ],
)
def test_user_errors_are_one_line_with_a_hint_and_exit_2(cli, args, expected):
    result = cli(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0] and "hint" in lines[0]
    assert "Traceback" not in result.stderr


def test_a_user_error_quoting_a_line_break_stays_one_line(tmp_path: Path, capsys):
    # The model's input name holds a newline, and the error's hint quotes the name as the user would type it.
    graph = helper.make_graph([helper.make_node("Relu", ["x\ny"], ["r"])], "g", [], [])
    graph.input.append(helper.make_tensor_value_info("x\ny", TensorProto.FLOAT, None))
    graph.output.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert main(["analyze", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "has no declared shape" in lines[0] and "--input x\\ny=" in lines[0]


def test_unresolved_dim_names_the_fix(cli, symbolic_model: Path):
    result = cli("analyze", str(symbolic_model))
    assert result.returncode == 2
    assert "'batch'" in result.stderr and "--dim batch=1" in result.stderr


def test_not_onnx_and_truncated_files(cli, tmp_path: Path, symbolic_model: Path):
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a model\n" * 10)
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(symbolic_model.read_bytes()[:40])
    for path in (junk, truncated):
        result = cli("analyze", str(path))
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr


def test_verbose_shows_the_traceback(cli):
    result = cli("--verbose", "analyze", "missing.onnx")
    assert result.returncode != 0
    assert "Traceback" in result.stderr


def test_devices_zoo_and_ops_listings(cli):
    devices = cli("devices")
    assert devices.returncode == 0 and "h100-sxm" in devices.stdout and "colab-xeon-1core" in devices.stdout
    # The JSON listing is the catalog, every number with its source.
    listed = json.loads(cli("devices", "--format", "json").stdout)
    assert listed == json.loads(json.dumps({key: d.to_dict() for key, d in catalog().items()}))
    zoo = cli("zoo")
    assert zoo.returncode == 0 and "zoo:unet" in zoo.stdout
    ops = cli("ops")
    assert ops.returncode == 0 and "Conv" in ops.stdout.split()


def test_help_explains_each_command(cli):
    assert "analyze" in cli("--help").stdout
    assert "--dim" in cli("analyze", "--help").stdout


def _runnable(tmp_path: Path) -> Path:
    """MatMul + Relu with batch 'batch'; IR 8 so that any onnxruntime of the supported range loads it."""
    w = numpy_helper.from_array(np.full((16, 8), 0.5, np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [w],
    )
    path = tmp_path / "small.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


@pytest.mark.ort
def test_measure_reports_statistics_as_table_and_json(cli, tmp_path: Path):
    path = _runnable(tmp_path)
    before = path.read_bytes()
    table = cli("measure", str(path), "--dim", "batch=4", "--repeat", "5", "--warmup", "1")
    assert table.returncode == 0, table.stderr
    assert "median" in table.stdout and "CPUExecutionProvider" in table.stdout
    out = tmp_path / "timing.json"
    result = cli(
        "measure", str(path), "--dim", "batch=4", "--repeat", "5", "--per-node", "--format", "json", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["min_s"] <= data["median_s"] <= data["p90_s"] <= data["max_s"]
    assert data["provider"] == "CPUExecutionProvider" and len(data["samples_s"]) == 5
    covered = {name for node in data["profile"]["nodes"] for name in node["covers"]}
    assert covered | {u["name"] for u in data["profile"]["unmapped"]} == {"mm", "relu"}
    assert path.read_bytes() == before


def test_measure_errors_are_one_line(cli, tmp_path: Path):
    path = _runnable(tmp_path)
    unresolved = cli("measure", str(path))
    assert unresolved.returncode == 2 and "--dim batch=" in unresolved.stderr and "Traceback" not in unresolved.stderr
    bad_npz = tmp_path / "in.npz"
    np.savez(bad_npz, x=np.zeros((3, 5), np.float32))
    wrong = cli("measure", str(path), "--dim", "batch=4", "--inputs", str(bad_npz))
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1 and "hint:" in wrong.stderr


def _usage_options(command: str) -> set[str]:
    from onnxroof.cli import command_options

    return command_options(command)


# Each command that writes -o, with the arguments it needs to reach its output check.
WRITERS = {
    "analyze": ["zoo:conv2d_kernel"],
    "measure": ["zoo:conv2d_kernel"],
    "calibrate": [],
    "validate": ["zoo:conv2d_kernel"],
    "rewrite": ["zoo:conv2d_kernel", "--fp16"],
    "annotate": ["zoo:conv2d_kernel"],
    "compare": ["zoo:conv2d_kernel", "zoo:conv2d_kernel"],
    "sweep": ["zoo:conv2d_kernel"],
    "census": ["zoo:conv2d_kernel"],
    "plot": ["zoo:conv2d_kernel"],
    "report": ["zoo:conv2d_kernel"],
    "explore": ["zoo:conv2d_kernel"],
    "fit": ["zoo:conv2d_kernel"],
    "llm": ["zoo:tiny-decoder-int4", "--prompt", "4", "--generate", "2"],
}


def test_every_command_that_writes_is_listed():
    from onnxroof.cli import COMMANDS

    assert {name for name in COMMANDS if "-o" in _usage_options(name)} == set(WRITERS)


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_a_folder_as_output_is_one_line_with_or_without_force(cli, command: str, tmp_path: Path):
    folder = tmp_path / "out.html"  # a folder whose name has an extension the command may write
    folder.mkdir()
    for force in ([], ["--force"]):
        result = cli(command, *WRITERS[command], "-o", str(folder), *force)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "is a folder" in lines[0] and "hint:" in lines[0], result.stderr
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_a_folder_for_annotate_model_explorer_is_refused(cli, tmp_path: Path):
    folder = tmp_path / "nodes.json"
    folder.mkdir()
    out = tmp_path / "out.onnx"
    result = cli("annotate", "zoo:conv2d_kernel", "-o", str(out), "--model-explorer", str(folder), "--force")
    assert result.returncode == 2 and "is a folder" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def _open_dims(tmp_path: Path) -> Path:
    """Conv over images [batch, 3, height, width] and Relu over mask [batch, 4]: three dims left open."""
    w = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "W")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["images", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["mask"], ["m"], name="relu"),
        ],
        "open",
        [
            helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 4]),
        ],
        [
            helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("m", TensorProto.FLOAT, None),
        ],
        [w],
    )
    path = tmp_path / "open.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def test_every_unresolved_dim_is_named_in_one_error_whose_example_runs(tmp_path: Path, capsys):
    path = _open_dims(tmp_path)
    assert main(["analyze", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "input 'images' has unresolved dims 'batch', 'height', 'width'; input 'mask' has dim 'batch'" in line
    assert "--dim batch=1 --dim height=224 --dim width=224" in line
    # The example as given resolves every dim: 2*1*8*224*224*3*3*3 conv FLOPs.
    assert (
        main(["analyze", str(path), "--dim", "batch=1", "--dim", "height=224", "--dim", "width=224", "-f", "json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    (conv,) = [n for n in data["nodes"] if n["name"] == "conv"]
    assert conv["macs"] == 1 * 8 * 224 * 224 * 3 * 3 * 3  # N * C_out * H * W * C_in * kh * kw = 10838016


# The commands that read a MODEL, with what each needs besides it to reach the model's shapes.
MODEL_COMMANDS = {
    "analyze": [],
    "measure": [],
    "validate": ["-d", "v100-sxm2"],
    "annotate": ["-o", "{tmp}/out.onnx"],
    "rewrite": ["-o", "{tmp}/out.onnx", "--int8", "static"],
    "compare": ["{model}"],
    "sweep": [],
    "plot": ["-o", "{tmp}/out.png"],
    "report": ["-o", "{tmp}/out.html"],
    "explore": [],
    "fit": [],
}


def _options_named(text: str, command: str | None) -> list[tuple[str | None, str]]:
    """(command, option) for each option ``text`` names: an option after 'onnxroof NAME' is NAME's, one before any
    such mention is ``command``'s (None: a library's message, which any command may meet); a quoted `dask ...`
    command line names Dask's options, not ours."""
    import re

    from onnxroof.cli import COMMANDS

    named = []
    owner = command
    for piece in re.split(r"(onnxroof [a-z]+|`dask [^`]*`)", text):
        if piece.startswith("`dask "):  # another tool's command line, quoted: its options are its own
            continue
        if piece.startswith("onnxroof ") and piece.split()[1] in COMMANDS:
            owner = piece.split()[1]
            continue
        named += [(owner, option) for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", piece)]
    return named


@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_the_hint_for_open_dims_names_options_the_command_has(command: str, tmp_path: Path, capsys):
    path = _open_dims(tmp_path)
    extra = [a.format(tmp=tmp_path, model=path) for a in MODEL_COMMANDS[command]]
    assert main([command, str(path), *extra]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "unresolved dims 'batch', 'height', 'width'" in line, line
    named = _options_named(line.partition("(hint:")[2], command)
    assert named and all(option in _usage_options(owner or command) for owner, option in named), (command, line)


def _hint_texts() -> list[tuple[str, int, str]]:
    """(module path, line, text) for the message and hint of every UserError and Refused raised in onnxroof/."""
    import ast

    found = []
    for path in sorted((ROOT / "onnxroof").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("UserError", "Refused"):
                for arg in [*node.args[:2], *(k.value for k in node.keywords)]:
                    found.append((str(path.relative_to(ROOT)), node.lineno, ast.unparse(arg)))
    return found


def test_every_option_an_error_names_exists():
    from onnxroof.cli import COMMANDS

    every = set().union(*(_usage_options(name) for name in COMMANDS))
    wrong = []
    for path, line, text in _hint_texts():
        command = path.removeprefix("onnxroof/cli/").removesuffix(".py")
        # A command's own module names its own options; a library module ones that some command has.
        for owner, option in _options_named(text, command if command in COMMANDS else None):
            if option not in (_usage_options(owner) if owner else every):
                wrong.append(f"{path}:{line}: {option}")
    assert wrong == []


def test_an_option_is_never_read_as_the_start_of_another(cli):
    result = cli("rewrite", "zoo:conv2d_kernel", "-o", "out.onnx", "--input", "x=1")  # rewrite has --input-size
    assert result.returncode == 2 and "unrecognized arguments: --input" in result.stderr


@pytest.mark.ort
def test_a_scalar_input_and_a_value_are_given_on_the_command_line(tmp_path: Path, capsys):
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
            helper.make_node("Expand", ["x", "n1"], ["wide"]),
            helper.make_node("Relu", ["wide"], ["y"], name="relu"),
        ],
        "sized",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("n", TensorProto.INT64, None),  # no declared shape: a scalar given
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [axes],
    )
    path = tmp_path / "sized.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    assert main(["analyze", str(path), "--input", "n=", "--value", "n=16000", "-f", "json"]) == 0
    (relu,) = [n for n in json.loads(capsys.readouterr().out)["nodes"] if n["name"] == "relu"]
    assert relu["flops"] == 16000  # one FLOP per element of the 16000 the value sizes
    assert main(["measure", str(path), "--value", "n=16000", "--repeat", "3", "--warmup", "0", "-f", "json"]) == 0


@pytest.mark.ort
def test_measure_per_node_and_validate_take_the_inputs_file(tmp_path: Path, monkeypatch, capsys):
    from onnxroof.ort import profile, validate

    path = _runnable(tmp_path)
    npz = tmp_path / "in.npz"
    given = np.arange(64, dtype=np.float32).reshape(4, 16)
    np.savez(npz, x=given)
    seen = []
    real = profile.profile_nodes

    def recording(runnable, session, **kwargs):
        seen.append(kwargs.get("feeds"))
        return real(runnable, session, **kwargs)

    monkeypatch.setattr(profile, "profile_nodes", recording)
    monkeypatch.setattr(validate, "profile_nodes", recording)
    args = ["--dim", "batch=4", "--inputs", str(npz), "--repeat", "3", "-f", "json"]
    assert main(["measure", str(path), "--per-node", "--warmup", "0", *args]) == 0
    assert main(["validate", str(path), "-d", "v100-sxm2", "--runs", "2", "--spread", "0", *args]) == 0
    capsys.readouterr()
    assert len(seen) == 2 and all(feeds is not None and np.array_equal(feeds["x"], given) for feeds in seen)


@pytest.mark.ort
def test_static_int8_calibration_inputs_take_samples_and_hint_at_rewrites_own_options(tmp_path: Path, capsys):
    w = numpy_helper.from_array(np.full((16, 8), 0.5, np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "static",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [w],
    )
    path = tmp_path / "static.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    samples, wrong = tmp_path / "samples.npz", tmp_path / "wrong.npz"
    np.savez(samples, x=np.ones((4, 16), np.float32))  # four samples of the batch-1 input, stacked on its batch axis
    np.savez(wrong, x=np.ones((4, 15), np.float32))
    out = tmp_path / "q.onnx"
    base = ["rewrite", str(path), "-o", str(out), "--int8", "static", "--no-compare"]
    assert main([*base, "--calibration", str(samples)]) == 0
    capsys.readouterr()
    assert main([*base, "--calibration", str(wrong), "--force"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "has shape 4x15, the model takes 1x16" in line
    named = _options_named(line.partition("(hint:")[2], "rewrite")
    assert named and all(option in _usage_options("rewrite") for _, option in named), line


@pytest.mark.parametrize("command", ["plot", "report"])
def test_plot_and_report_feed_their_measurement_from_the_inputs_file(command: str, tmp_path: Path, monkeypatch, capsys):
    from onnxroof.errors import UserError
    from onnxroof.ort import validate

    out = tmp_path / ("figure.png" if command == "plot" else "page.html")
    assert main([command, "zoo:conv2d_kernel", "--inputs", "x.npz", "-o", str(out)]) == 2
    assert "--inputs feeds the runs of --measure" in capsys.readouterr().err
    asked: dict = {}

    def recording(*args, **kwargs):
        asked.update(kwargs)
        raise UserError("recorded")

    monkeypatch.setattr(validate, "validate", recording)
    monkeypatch.setattr("onnxroof.cli.inputs.resolve_devices", lambda *a, **k: [])  # no calibration for this
    assert main([command, "zoo:conv2d_kernel", "--measure", "--inputs", "x.npz", "-o", str(out)]) == 2
    assert "recorded" in capsys.readouterr().err and asked["feeds_path"] == "x.npz"


@pytest.mark.parametrize("command", [("compare", "zoo:conv2d_kernel", "zoo:conv2d_kernel"), ("explore", "zoo:unet")])
def test_compare_and_explore_refuse_inputs_without_measure(command, capsys):
    assert main([*command, "--inputs", "x.npz"]) == 2
    assert "--inputs feeds the runs of --measure" in capsys.readouterr().err
