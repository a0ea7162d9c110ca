"""What the commands share: argument groups, output to a file or stdout, --dim parsing, devices resolved up front
(calibrating with the progress shown), and the progress display (progress.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from onnxroof.cli.progress import Progress
from onnxroof.errors import UserError

if TYPE_CHECKING:
    from onnxroof.devices import Device
    from onnxroof.load.model_spec import ModelSpec
    from onnxroof.ort.session_spec import SessionSpec
    from onnxroof.whatif.executors import Executor

__all__ = [
    "Progress",
    "add_engine_option",
    "add_session_options",
    "add_shape_options",
    "add_what_if_options",
    "apply_engine",
    "check_output",
    "dims",
    "emit",
    "model_spec",
    "resolve_devices",
    "session_spec",
    "split_list",
    "warn",
]


def _pair(kind: str, empty: bool = False) -> Callable[[str], tuple[str, str]]:
    """NAME=VALUE as (name, value); ``empty`` accepts NAME= (a scalar's shape)."""

    def parse(text: str) -> tuple[str, str]:
        name, sep, value = text.rpartition("=")
        if not sep or not name or not (value or empty):
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}")
        return name, value

    return parse


def add_shape_options(parser: argparse.ArgumentParser) -> None:
    """--input NAME=SHAPE, --dim NAME=VALUE and --value NAME=V, each repeatable."""
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        type=_pair("NAME=1x3x224x224", empty=True),
        metavar="NAME=SHAPE",
        help="fix an input's shape; NAME= for a scalar (repeatable)",
    )
    add_dim_option(parser)
    parser.add_argument(
        "--value",
        action="append",
        default=[],
        type=_pair("NAME=16000 or NAME=1,2,3"),
        metavar="NAME=V",
        help="an input's value, a number or a comma-separated list: fed to the runs and written in as a constant "
        "for the analysis, so that shapes computed from it resolve (repeatable)",
    )


def add_dim_option(
    parser: argparse.ArgumentParser, help: str = "fix a symbolic dim such as batch (repeatable)"
) -> None:
    """--dim NAME=VALUE, repeatable; ``dims(args)`` reads it."""
    parser.add_argument("--dim", action="append", default=[], type=_pair("NAME=VALUE"), metavar="NAME=VALUE", help=help)


def add_what_if_options(parser: argparse.ArgumentParser) -> None:
    """-p/--precision (the analysis' what-if precision) and --threads (which calibration --device host uses)."""
    parser.add_argument(
        "-p",
        "--precision",
        default=None,
        help="what if every float tensor were this precision: fp64, fp32, tf32, fp16, bf16, fp8, int8 "
        "(default: the tensors' own dtypes)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="--device host: the thread count whose calibration to use (default 1)",
    )


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """The onnxruntime session's provider, threads, optimization level and fallback."""
    parser.add_argument(
        "--provider", default="cpu", choices=("cpu", "cuda"), help="onnxruntime execution provider (default cpu)"
    )
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="onnxruntime intra-op threads (default 1)")
    parser.add_argument(
        "--opt-level",
        default="all",
        choices=("disable", "basic", "extended", "all"),
        help="onnxruntime graph optimization level (default all)",
    )
    parser.add_argument(
        "--allow-fallback", action="store_true", help="accept onnxruntime running on the CPU when cuda was asked for"
    )


def dims(args: argparse.Namespace) -> dict[str, int]:
    """The --dim values as integers; a UserError for one that is not a positive integer."""
    out: dict[str, int] = {}
    for name, value in args.dim:
        try:
            out[name] = int(value)
        except ValueError:
            raise UserError(f"--dim {name}={value}: the value must be an integer", f"e.g. --dim {name}=1") from None
        if out[name] <= 0:
            raise UserError(f"--dim {name}={value}: the value must be positive", f"e.g. --dim {name}=1")
    return out


def model_spec(args: argparse.Namespace) -> ModelSpec:
    """The model a command names and what fixes its inputs: MODEL, --input, --dim and --value (a UserError for a
    bad shape or dim)."""
    from onnxroof.load.model_spec import ModelSpec

    return ModelSpec.of(args.model, dict(args.input), dims(args), dict(args.value))


def session_spec(args: argparse.Namespace) -> SessionSpec:
    """The onnxruntime session of add_session_options: --provider, --threads, --opt-level, --allow-fallback (a
    UserError for a thread count below 1)."""
    from onnxroof.ort.session_spec import SessionSpec

    return SessionSpec(args.provider, args.threads, args.opt_level, args.allow_fallback)


def add_devices_option(parser: argparse.ArgumentParser, help: str) -> None:
    """-d/--device for the commands that take several devices: repeatable and comma-separated (see split_list),
    and --engine for what runs the model on them (several to compare engines)."""
    parser.add_argument("-d", "--device", action="append", default=None, metavar="D", help=help)
    add_engine_option(parser, several=True)


ENGINE_HELP = (
    "what runs the model on the device: roofline (the plain roofline of the graph as exported), onnxruntime (a "
    "calibrated host), onnxruntime-cuda, tensorrt, pytorch-eager (GPUs: each engine's kernels, fusions and host "
    "costs); default: the device's own (a calibrated host's onnxruntime, else roofline). tensorrt:8.2 names a "
    "release (before 8.6, attention is not one kernel). -d DEVICE@ENGINE names one per device"
)


def add_engine_option(parser: argparse.ArgumentParser, several: bool = False) -> None:
    """--engine: one engine, or (``several``) a comma-separated list whose every engine runs on every device."""
    more = "; comma-separated to compare engines" if several else ""
    parser.add_argument("--engine", default=None, metavar="E", help=ENGINE_HELP + more)
    parser.set_defaults(several_engines=several)


def apply_engine(args: argparse.Namespace) -> None:
    """``args.device`` with --engine's engines as ``DEVICE@ENGINE``: every device with every engine; a UserError for
    several engines where the command predicts for one device."""
    from onnxroof.devices.resolve import DEFAULT_DEVICE

    engines = split_list([args.engine]) if getattr(args, "engine", None) else []
    if not engines:
        return
    if not args.several_engines:
        if len(engines) > 1:
            raise UserError(f"--engine {args.engine}: this command predicts for one engine", "compare takes several")
        args.device = f"{args.device or DEFAULT_DEVICE}@{engines[0]}"
        return
    named = split_list(args.device) or [DEFAULT_DEVICE]
    args.device = [f"{device}@{engine}" for device in named for engine in engines]


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """--executor and --jobs: where a command's tasks run (read back with executor_of)."""
    parser.add_argument(
        "--executor",
        default="local",
        metavar="WHERE",
        help="local (worker processes here, the default), or a Dask scheduler's tcp://HOST:PORT or scheduler file "
        "(pip install 'onnxroof[distributed]')",
    )
    parser.add_argument(
        "--jobs", type=int, default=None, metavar="N", help="--executor local: worker processes (default: CPU count)"
    )


def executor_of(args: argparse.Namespace, resources: Callable[[Any], Mapping[str, float]] | None = None) -> Executor:
    """The executor --executor and --jobs name (onnxroof.whatif.dask_executor.executor_for); ``resources`` gives a
    task's worker resources on a cluster."""
    from onnxroof.whatif.dask_executor import executor_for

    return executor_for(args.executor, args.jobs, resources)


def add_measured_inputs_option(parser: argparse.ArgumentParser) -> None:
    """--inputs for the runs --measure makes."""
    parser.add_argument(
        "--inputs",
        default=None,
        metavar="FILE.npz",
        help="--measure: inputs from an .npz (arrays named like the model's inputs) instead of random ones",
    )


def inputs_need_measure(args: argparse.Namespace) -> None:
    """--inputs feeds the model's runs, which only --measure makes: refused without it, rather than ignored."""
    if args.inputs and not args.measure:
        raise UserError("--inputs feeds the runs of --measure", "add --measure, or drop --inputs")


def split_list(values: list[str] | None) -> list[str]:
    """Repeatable, comma-separated option values as one list: ['a,b', 'c'] -> ['a', 'b', 'c']."""
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def emit(text: str, output: str | None) -> None:
    """``text`` to the file ``output`` (written atomically) or, without one, to stdout."""
    if output:
        from onnxroof.atomic import write_text

        write_text(output, text)
    else:
        sys.stdout.write(text)


def add_output_options(parser: argparse.ArgumentParser, what: str = "the report", extra: str = "") -> None:
    """-o/--output FILE (written atomically) and --force, which an existing FILE needs to be replaced; the command
    calls check_output_option before any work."""
    parser.add_argument(
        "-o", "--output", default=None, metavar="FILE", help=f"write {what} to FILE (atomically){extra}"
    )
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")


def check_output_option(args: argparse.Namespace) -> None:
    """Refuse the -o FILE of add_output_options before any work is done (see check_output)."""
    if args.output:
        check_output(args.output, args.force)


def check_output(output: str, force: bool, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output file before any work is done: a folder (``force`` or not: a file never replaces one), one
    that exists without ``force``, one in a folder that does not exist, or (where ``suffixes`` are given) one whose
    extension names no format the command writes."""
    from pathlib import Path

    path = Path(output)
    if path.is_dir():
        example = path / f"NAME{suffixes[0] if suffixes else ''}"
        raise UserError(f"{output} is a folder: the output is a file", f"name a file, e.g. -o {example}")
    if suffixes and path.suffix.lower() not in suffixes:
        raise UserError(
            f"{output}: the extension {path.suffix or '(none)'} names no format this command writes",
            f"end the file name in one of {', '.join(suffixes)}",
        )
    if not path.parent.is_dir():
        raise UserError(f"{path.parent} is not a folder", "create it first, or choose another -o")
    if path.exists() and not force:
        raise UserError(f"{output} exists", "pass --force to replace it, or choose another -o")


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"onnxroof: warning: {message}", file=sys.stderr)


def resolve_devices(specs: Sequence[str], threads: int, progress: Progress, provider: str = "cpu") -> list[Device]:
    """Each device a command names, resolved before its work (a bad name is refused first): ``host`` is this
    machine's calibrated profile, calibrated here where none is cached, with the progress shown
    (``Progress.calibrating``), so that the library's own resolution of it later reads the cache."""
    from onnxroof.api import get_device

    return [get_device(spec, threads, provider, progress.calibrating) for spec in specs]
