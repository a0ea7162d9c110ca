"""onnxroof: what does this ONNX model cost on that hardware, and what bounds it?

Commands:
  analyze MODEL   per-layer FLOPs, bytes, params, arithmetic intensity and roofline time on a device
  measure MODEL   time the model with onnxruntime (whole model; --per-node adds the profiler's kernel times)
  calibrate       measure this machine's roofline through onnxruntime, for --device host
  validate MODEL  predicted against measured, per kernel and for the model, on this machine
  rewrite MODEL   rewrite a model (separable convs, strides, fp16, int8, batch, input size) and write it
  annotate MODEL  a copy of the model with each node's FLOPs, bytes, bound and predicted time (Netron)
  compare A B     two models side by side: predicted per device, measured here
  sweep MODEL     every combination of batch, input size, precision and device
  census MODELS   many models on many devices, batches and precisions: one row each, to a file that resumes
  plot MODEL      draw a figure: roofline, time-based roofline, complexity, layers, sweep or census (PNG, SVG, PDF)
  report MODEL    one offline HTML page: summary, devices, every figure, the sortable per-layer table
  explore MODEL   the rewrites that apply, ranked by predicted speedup on a device
  fit MODEL       deploy-time check: memory and latency budgets, largest batch, best device (exit 1 on a miss)
  llm MODEL       a decoder's generation: time to first token, time per token, tokens/s, memory
  devices         the device catalog (peak FLOP/s per precision, bandwidth, launch overhead)
  zoo             the built-in models usable as zoo:NAME wherever a model path goes
  ops             the op types onnxroof has cost functions for

Run 'onnxroof COMMAND --help' for a command's options. Errors a user can fix print one line with a hint and
exit with code 2; --verbose shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from onnxroof.cli import (
    analyze,
    annotate,
    calibrate,
    census,
    compare,
    devices,
    explore,
    fit,
    llm,
    measure,
    ops,
    plot,
    report,
    rewrite,
    sweep,
    validate,
    zoo,
)

# The commands in the order --help lists them: each module has HELP, DESCRIPTION, configure(parser) and run(args).
COMMANDS: dict[str, ModuleType] = {
    "analyze": analyze,
    "measure": measure,
    "calibrate": calibrate,
    "validate": validate,
    "rewrite": rewrite,
    "annotate": annotate,
    "compare": compare,
    "sweep": sweep,
    "census": census,
    "plot": plot,
    "report": report,
    "explore": explore,
    "fit": fit,
    "llm": llm,
    "devices": devices,
    "zoo": zoo,
    "ops": ops,
}


# -v's help, before the command and after it.
VERBOSE_HELP = "show tracebacks on errors; analyze's table adds each node's op class and why"


def build_parser() -> argparse.ArgumentParser:
    """The command line: global options and one subcommand per entry of COMMANDS."""
    from onnxroof import __version__

    parser = argparse.ArgumentParser(
        prog="onnxroof", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"onnxroof {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    # -v works after the command too; SUPPRESS keeps a subcommand from resetting a -v given before it.
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    for name, command in COMMANDS.items():
        command.configure(
            commands.add_parser(
                name,
                help=command.HELP,
                description=command.DESCRIPTION,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                parents=[verbose],
                # --input on a command that has only --input-size is an error, not that option's abbreviation.
                allow_abbrev=False,
            )
        )
    return parser


def check_early(args: argparse.Namespace) -> None:
    """The errors a command's arguments hold that need no model, raised before the command imports onnx or
    numpy: a model file that is not there (or is a folder), a device that is neither ``host``, a catalog key nor
    a device file (or one an --engine does not run on), and a bad ``--dim``, ``--input`` shape or ``--precision``."""
    from onnxroof.cli.common import apply_engine, dims
    from onnxroof.devices.engines import split_engine
    from onnxroof.devices.resolve import HOST, resolve_device
    from onnxroof.load.source import model_path

    for name in ("model", "a", "b"):  # every command's model operands (compare's are A and B)
        spec = getattr(args, name, None)
        if isinstance(spec, str):
            model_path(spec)
    apply_engine(args)
    for spec in _listed(getattr(args, "device", None)):
        if split_engine(spec)[0] != HOST:
            resolve_device(spec)
    if hasattr(args, "dim"):
        dims(args)
    shapes = [shape for _, shape in getattr(args, "input", None) or []]
    precisions = _listed(getattr(args, "precision", None))
    if shapes or precisions:  # these two modules read onnx's element types: its protobuf classes, no more
        from onnxroof.load.inputs import parse_shape
        from onnxroof.predict.precision import check_precision

        for shape in shapes:
            parse_shape(shape)
        for precision in precisions:
            check_precision(precision)


def _listed(value: str | list[str] | None) -> list[str]:
    """An option's values: one, or several repeated and comma-separated (the commands that take several)."""
    values = [value] if isinstance(value, str) else value or []
    return [item.strip() for v in values for item in v.split(",") if item.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    from onnxroof import protos

    protos.use_lean()  # this process imports what its command needs: onnx's Python layer only where it is used
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        check_early(args)
        return int(COMMANDS[args.command].run(args))
    except KeyboardInterrupt:
        print("onnxroof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        from onnxroof.errors import UserError

        if args.verbose:
            raise
        if isinstance(exc, UserError):
            _hint_in_options(exc, args.command)
            # One line whatever the message quotes: a name read from a model may hold line breaks.
            text = str(exc).replace("\r", "\\r").replace("\n", "\\n")
            print(f"onnxroof: error: {text}", file=sys.stderr)
            return 2
        print(f"onnxroof: internal error: {type(exc).__name__}: {exc} (hint: rerun with --verbose)", file=sys.stderr)
        return 1


def command_options(name: str) -> set[str]:
    """The options command ``name`` takes, long and short (``--device``, ``-d``), read from the option lines of its
    --help."""
    import re

    parser = argparse.ArgumentParser(prog=f"onnxroof {name}", allow_abbrev=False)
    COMMANDS[name].configure(parser)
    invocations = [line.strip().split("  ")[0] for line in parser.format_help().splitlines() if line.startswith("  -")]
    return {option for text in invocations for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text)}


def _hint_in_options(exc: Exception, command: str) -> None:
    """An error that can say what to pass in several ways (an input shape left open) gets the hint in the options
    of the command that met it: the library writes its default, the analysis commands' --dim and --input."""
    from onnxroof.load.unresolved import UnresolvedInputs

    if isinstance(exc, UnresolvedInputs):
        exc.hint = exc.hint_for(command_options(command))
