"""onnxroof plot: a figure of a model on one or more devices, written as PNG, SVG or PDF."""

from __future__ import annotations

import argparse
import warnings

from onnxroof.cli.common import Progress, check_output, warn
from onnxroof.cli.inputs import add_input_options
from onnxroof.errors import UserError
from onnxroof.report.figures.output import FORMATS
from onnxroof.report.figures.registry import DESCRIPTIONS, KINDS, FigureInputs

HELP = "draw a figure: roofline, time-based roofline, complexity, layers, sweep or census (PNG, SVG, PDF)"
DESCRIPTION = f"""Draw a figure of a model's analysis and write it to FILE: PNG, SVG or PDF by its extension.

Kinds (--kind):
{chr(10).join(f"  {kind:<11}{DESCRIPTIONS[kind]}" for kind in KINDS)}

Several devices (-d a,b) share one figure; several --precision values give one analysis each. --measure also
times the model on this machine with onnxruntime (calibrating it first if needed, which takes a minute or more)
and adds each kernel's measured point beside its predicted one on the calibrated host ('host') -- roofline and
time figures only. The sweep figure takes the sweep command's axes: --batch, --input-size, --precision and
--rewrite. The census figure draws a census file (what 'onnxroof census -o FILE' writes: .csv, .json or
.parquet), given in MODEL's place: paper 004's view of a zoo, each model's FLOPs against the memory it needs on
each device, coloured by arithmetic intensity, with each device's memory capacity.

examples:
  onnxroof plot zoo:resnet50 -d v100-sxm2,t4 -o resnet50_roofline.png
  onnxroof plot zoo:resnet18 --kind time --measure -o resnet18_time.svg
  onnxroof plot model.onnx --kind layers --dim batch=8 --precision fp16 -o layers.pdf
  onnxroof plot zoo:unet --kind sweep --batch 1,8,64 --precision fp32,fp16 -d v100-sxm2 -o unet_sweep.png
  onnxroof plot --kind census zoo.csv -o census.svg
"""

MEASURED_KINDS: tuple[str, ...] = ("roofline", "time")


def configure(parser: argparse.ArgumentParser) -> None:
    add_input_options(
        parser, "roofline and time: also measure the model here and draw each kernel's measured point (slow)"
    )
    parser.add_argument("--kind", default="roofline", choices=KINDS, help="which figure (default roofline)")
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
    if args.kind == "census" and (args.device or args.precision or args.input or args.dim or args.value):
        raise UserError(
            "the census figure draws the rows of a census file: -d, --engine, --precision, --input, --dim and "
            "--value do not apply to --kind census",
            "choose the devices and precisions when running 'onnxroof census'",
        )
    if args.kind == "sweep" and (args.input or args.dim or args.value):
        raise UserError(
            "--input, --dim and --value do not apply to --kind sweep", "vary the shapes with --batch/--input-size"
        )
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


def _inputs(args: argparse.Namespace, progress: Progress) -> FigureInputs:
    """What the figure is drawn from: a census file's rows, a sweep, or the analyses (and measurement)."""
    from onnxroof.cli.common import inputs_need_measure
    from onnxroof.cli.inputs import analyzed, swept

    if args.kind == "census":
        from onnxroof.report.census_files import read_census

        inputs_need_measure(args)
        return FigureInputs(census=tuple(read_census(args.model)))
    return swept(args, progress) if args.kind == "sweep" else analyzed(args, progress)


def run(args: argparse.Namespace) -> int:
    from onnxroof.cli.inputs import warnings_of

    _refuse_nonsense(args)
    check_output(args.output, args.force, tuple(FORMATS))
    progress = Progress("plotting", unit="analyses" if args.kind == "sweep" else "nodes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an analysis' warnings are printed once, below
            inputs = _inputs(args, progress)
        progress.stage("drawing")
        from onnxroof.report.figures import draw, save

        save(draw(args.kind, inputs), args.output)
    finally:
        progress.close()
    for message in warnings_of(inputs):
        warn(message)
    print(f"wrote the {args.kind} figure to {args.output}")
    return 0
