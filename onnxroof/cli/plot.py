"""onnxroof plot: a figure of a model on one or more devices, written as PNG, SVG or PDF."""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from onnxroof.cli import sweep as sweep_command
from onnxroof.cli.common import Progress, add_shape_options, check_output, dims, split_list, warn
from onnxroof.errors import UserError
from onnxroof.report.figures.output import FORMATS
from onnxroof.report.figures.registry import DESCRIPTIONS, KINDS

HELP = "draw a figure: roofline, time-based roofline, complexity, layers or sweep (PNG, SVG, PDF)"
DESCRIPTION = f"""Draw a figure of a model's analysis and write it to FILE: PNG, SVG or PDF by its extension.

Kinds (--kind):
{chr(10).join(f"  {kind:<11}{DESCRIPTIONS[kind]}" for kind in KINDS)}

Several devices (-d a,b) share one figure; several --precision values give one analysis each. --measure also
times the model on this machine with onnxruntime (calibrating it first if needed, which takes a minute or more)
and adds each kernel's measured point beside its predicted one on the calibrated host ('host') -- roofline and
time figures only. The sweep figure takes the sweep command's axes: --batch, --input-size, --precision and
--rewrite.

examples:
  onnxroof plot zoo:resnet50 -d v100-sxm2,t4 -o resnet50_roofline.png
  onnxroof plot zoo:resnet18 --kind time --measure -o resnet18_time.svg
  onnxroof plot model.onnx --kind layers --dim batch=8 --precision fp16 -o layers.pdf
  onnxroof plot zoo:unet --kind sweep --batch 1,8,64 --precision fp32,fp16 -d v100-sxm2 -o unet_sweep.png
"""

MEASURED_KINDS: tuple[str, ...] = ("roofline", "time")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    parser.add_argument(
        "-d",
        "--device",
        action="append",
        default=None,
        metavar="D",
        help="devices, repeatable or comma-separated (catalog keys, device files or host; default v100-sxm2)",
    )
    parser.add_argument("--kind", default="roofline", choices=KINDS, help="which figure (default roofline)")
    sweep_command.add_sweep_axes(parser)
    parser.add_argument(
        "--measure",
        action="store_true",
        help="roofline and time: also measure the model here and draw each kernel's measured point (slow)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, metavar="N", help="--device host and --measure: threads (default 1)"
    )
    add_shape_options(parser)
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the figure's file: .png, .svg or .pdf")
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")


def _refuse_nonsense(args: argparse.Namespace) -> None:
    """Options that do not apply to the figure asked for are refused rather than silently ignored."""
    sweep_only = [
        name
        for name, value in (("--batch", args.batch), ("--input-size", args.input_size), ("--rewrite", args.rewrite))
        if value
    ]
    if args.kind != "sweep" and sweep_only:
        raise UserError(
            f"{sweep_only[0]} is a sweep axis: it applies to --kind sweep",
            "draw the sweep with --kind sweep, or rewrite the model first with 'onnxroof rewrite'",
        )
    if args.kind == "sweep" and (args.input or args.dim):
        raise UserError("--input and --dim do not apply to --kind sweep", "vary the shapes with --batch/--input-size")
    if args.measure and args.kind not in MEASURED_KINDS:
        raise UserError(
            f"--measure adds measured points to the {' and '.join(MEASURED_KINDS)} figures, not to {args.kind}",
            "drop --measure, or use --kind roofline or --kind time",
        )
    if args.measure and args.precision:
        raise UserError(
            "--measure times the model as its tensors are typed: a what-if --precision cannot be measured",
            "drop --precision, or convert the model with 'onnxroof rewrite --fp16' and plot that",
        )
    if args.threads < 1:
        raise UserError(f"--threads {args.threads}: expected a positive count", "e.g. --threads 1")


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE

    _refuse_nonsense(args)
    check_output(args.output, args.force, tuple(FORMATS))
    devices = split_list(args.device) or [DEFAULT_DEVICE]
    if args.measure:
        devices = [d for d in devices if d != "host"]  # the measured host is added below, with its validation
    progress = Progress("plotting", unit="analyses" if args.kind == "sweep" else "nodes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an analysis' warnings are printed once, below
            figure, notes = (
                _sweep_figure(args, devices, progress) if args.kind == "sweep" else _figure(args, devices, progress)
            )
        progress.stage("drawing")
        from onnxroof.report.figures import save

        save(figure, args.output)
    finally:
        progress.close()
    for message in notes:
        warn(message)
    print(f"wrote the {args.kind} figure to {args.output}")
    return 0


def _figure(args: argparse.Namespace, devices: list[str], progress: Progress) -> tuple[Any, list[str]]:
    """The figure of an analysis kind: one analysis per device and precision, and with --measure the validation."""
    from onnxroof.api import analyze, get_device
    from onnxroof.report.figures import FigureInputs, draw

    shape_dims = dims(args)
    targets = [get_device(d, args.threads, "cpu", progress) for d in devices]  # a bad name refused before work
    analyses = []
    wanted: list[str | None] = [*sweep_command.precisions(args)] or [None]  # None: the tensors' own dtypes
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
                )
            )
    validation = None
    if args.measure:
        from onnxroof.ort.validate import validate

        progress.stage("measuring on this machine (calibrating first if needed)")
        validation = validate(
            args.model,
            "host",
            threads=args.threads,
            inputs=dict(args.input),
            dims=shape_dims,
            stage=progress.stage,
            progress=progress,
        )
        analyses.append(validation.analysis)
    notes = list(dict.fromkeys(m for a in analyses for m in a.warnings))
    if validation is not None:
        notes += list(validation.warnings)
    progress.stage("drawing")
    return draw(args.kind, FigureInputs(tuple(analyses), validation)), notes


def _sweep_figure(args: argparse.Namespace, devices: list[str], progress: Progress) -> tuple[Any, list[str]]:
    """The sweep figure: the sweep command's rows, drawn against the devices' roofs."""
    from onnxroof.api import get_device
    from onnxroof.report.figures import FigureInputs, draw
    from onnxroof.whatif.sweep import sweep

    targets = tuple(get_device(d, args.threads, "cpu", progress) for d in devices)  # the roofs; refused early
    result = sweep(
        args.model,
        devices,
        batches=sweep_command.batches(args),
        sizes=sweep_command.input_sizes(args),
        precisions=sweep_command.precisions(args),
        rewrites=sweep_command.rewrites(args),
        threads=args.threads,
        progress=progress,
    )
    return draw("sweep", FigureInputs(sweep=result, devices=targets)), []
