"""onnxroof report: one self-contained HTML page of a model's analysis on one or more devices."""

from __future__ import annotations

import argparse
import os
import warnings

from onnxroof.cli.common import Progress, check_output, warn
from onnxroof.cli.inputs import add_input_options
from onnxroof.errors import UserError

HELP = "one offline HTML page: summary, devices, every figure, the sortable per-layer table"
DESCRIPTION = """Write one self-contained HTML file of a model's analysis: a summary (totals, predicted time, time
by bound), the devices and where each of their numbers comes from, every figure (roofline, time-based roofline,
complexity, layers; a sweep's trajectories where --batch, --input-size or --rewrite is given), the per-layer
table (click a header to sort; filter by op type, bound or name), totals by op type, unsupported ops and warnings
and, with --measure, predicted against measured for the model and per kernel.

The page fetches nothing: style, script, figures and data are inside it, and its Content-Security-Policy forbids
network access, so it opens offline and can be mailed or archived as it is. Hovering a point on a figure names
the layer and its numbers; clicking a table row marks the layer's points, clicking a point marks its row.

--measure times the model on this machine with onnxruntime (calibrating it first where no calibration is cached,
which takes a minute or more) and adds the host, its measured kernels beside their predictions.

examples:
  onnxroof report zoo:resnet18 -d a100-sxm4-80gb,t4 -o resnet18.html
  onnxroof report model.onnx --measure -o model.html
  onnxroof report zoo:unet -d v100-sxm2 -p fp32,fp16 --batch 1,8,64 -o unet.html
"""

SUFFIXES = (".html", ".htm")


def configure(parser: argparse.ArgumentParser) -> None:
    add_input_options(parser, "also measure the model here: predicted against measured (slow)")
    parser.add_argument("--title", default=None, help="the page's title (default: the model and devices)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the report's file: .html")
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from onnxroof.cli.inputs import analyzed, sweeping, swept, warnings_of

    if args.threads < 1:
        raise UserError(f"--threads {args.threads}: expected a positive count", "e.g. --threads 1")
    if args.measure and args.precision:
        raise UserError(
            "--measure times the model as its tensors are typed: a what-if --precision cannot be measured",
            "drop --precision, or convert the model with 'onnxroof rewrite --fp16' and report on that",
        )
    if sweeping(args) and (args.input or args.dim or args.value):
        raise UserError(
            "--input, --dim and --value do not apply with the sweep axes: the sweep varies the shapes itself",
            "drop --batch/--input-size/--rewrite, or the --input/--dim/--value options",
        )
    check_output(args.output, args.force, SUFFIXES)
    progress = Progress("reporting")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the analyses' warnings are in the page and printed once, below
            inputs = analyzed(args, progress)
            if sweeping(args):
                trajectories = swept(args, progress)
                inputs = replace(inputs, sweep=trajectories.sweep, devices=trajectories.devices)
        from onnxroof.report.figures import KINDS, applicable, embed
        from onnxroof.report.html import build_report, write_report

        figures = []
        for kind in KINDS:
            if applicable(kind, inputs):
                progress.stage(f"drawing the {kind} figure")
                figures.append(embed(kind, inputs))
        page = build_report(inputs.analyses, figures, inputs.validation, title=args.title)
        write_report(args.output, page, force=args.force)
    finally:
        progress.close()
    for message in warnings_of(inputs):
        warn(message)
    size = os.path.getsize(args.output)
    print(f"wrote the report to {args.output} ({size / 1e6:.2f} MB, {len(figures)} figures)")
    return 0
