"""What plot and report draw from: the model analysed on each device and precision, measured on this machine
with --measure, and swept over the sweep command's axes where they are given."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from onnxroof.cli import sweep as sweep_command
from onnxroof.cli.common import (
    Progress,
    add_devices_option,
    add_measured_inputs_option,
    add_shape_options,
    dims,
    inputs_need_measure,
    model_spec,
    resolve_devices,
    split_list,
)

if TYPE_CHECKING:
    from onnxroof.report.figures import FigureInputs


def add_input_options(parser: argparse.ArgumentParser, measure_help: str) -> None:
    """The options plot and report share: the model, its devices, the sweep axes, --measure (``measure_help``
    says what it adds), --threads and the shape options."""
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    add_devices_option(
        parser, "devices, repeatable or comma-separated (catalog keys, device files or host; default v100-sxm2)"
    )
    sweep_command.add_sweep_axes(parser)
    parser.add_argument("--measure", action="store_true", help=measure_help)
    add_measured_inputs_option(parser)
    parser.add_argument(
        "--threads", type=int, default=1, metavar="N", help="--device host and --measure: threads (default 1)"
    )
    add_shape_options(parser)


def sweeping(args: argparse.Namespace) -> bool:
    """Whether the sweep axes that change the graph (--batch, --input-size, --rewrite) are given."""
    return bool(args.batch or args.input_size or args.rewrite)


def devices(args: argparse.Namespace) -> list[str]:
    """The --device values, the default device when none is given; with --measure the host is left out here
    because the measurement brings its own analysis of it."""
    from onnxroof.api import DEFAULT_DEVICE

    named = split_list(args.device) or [DEFAULT_DEVICE]
    return [d for d in named if d != "host"] if args.measure else named


def analyzed(args: argparse.Namespace, progress: Progress) -> FigureInputs:
    """One analysis per device and --precision (the tensors' own dtypes without one) and, with --measure, the
    validation on this machine (calibrating it first where no calibration is cached) whose analysis of the host
    joins the others."""
    from onnxroof.api import analyze
    from onnxroof.report.figures import FigureInputs

    shape_dims = dims(args)
    inputs_need_measure(args)
    targets = resolve_devices(devices(args), args.threads, progress)  # a bad name refused first
    if args.measure:
        resolve_devices(["host"], args.threads, progress)  # calibrated first where needed, with its progress
    wanted: list[str | None] = [*sweep_command.precisions(args)] or [None]
    analyses = []
    for device in targets:
        for precision in wanted:
            progress.stage(f"analyzing on {device.key}")
            analyses.append(
                analyze(
                    args.model,
                    device=device,
                    inputs=dict(args.input),
                    dims=shape_dims,
                    precision=precision,
                    progress=progress,
                    threads=args.threads,
                    values=dict(args.value),
                )
            )
    validation = None
    if args.measure:
        from onnxroof.ort.session_spec import SessionSpec
        from onnxroof.ort.validate import validate

        progress.stage("measuring on this machine (calibrating first if needed)")
        validation = validate(
            model_spec(args),
            "host",
            SessionSpec(threads=args.threads),
            feeds_path=args.inputs,
            stage=progress.stage,
            progress=progress,
        )
        analyses.append(validation.analysis)
    return FigureInputs(tuple(analyses), validation)


def swept(args: argparse.Namespace, progress: Progress) -> FigureInputs:
    """The sweep over the sweep command's axes on the --device devices, and those devices for its roofs."""
    from onnxroof.report.figures import FigureInputs
    from onnxroof.whatif.sweep import sweep

    inputs_need_measure(args)
    named = devices(args)
    targets = tuple(resolve_devices(named, args.threads, progress))  # the roofs; refused early
    result = sweep(
        args.model,
        named,
        batches=sweep_command.batches(args),
        sizes=sweep_command.input_sizes(args),
        precisions=sweep_command.precisions(args),
        rewrites=sweep_command.rewrites(args),
        threads=args.threads,
        progress=progress,
    )
    return FigureInputs(sweep=result, devices=targets)


def warnings_of(inputs: FigureInputs) -> list[str]:
    """The analyses' and the validation's warnings, each once."""
    notes = [m for a in inputs.analyses for m in a.warnings]
    if inputs.validation is not None:
        notes += inputs.validation.warnings
    return list(dict.fromkeys(notes))
