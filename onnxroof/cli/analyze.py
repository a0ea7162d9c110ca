"""onnxroof analyze: per-layer cost and roofline of a model on a device."""

from __future__ import annotations

import argparse
import warnings

from onnxroof.cli.common import (
    Progress,
    add_engine_option,
    add_output_options,
    add_shape_options,
    add_what_if_options,
    check_output_option,
    dims,
    emit,
    resolve_devices,
    warn,
)

HELP = "per-layer cost and roofline of a model"
DESCRIPTION = """Cost every node of an ONNX model and place it on a device's roofline.

MODEL is an .onnx file (weights inline, external, or absent: weight bytes are never read) or zoo:NAME from
'onnxroof zoo', optionally with zoo:NAME?batch=B&size=S. Each node gets FLOPs, MACs, bytes read and written,
params, arithmetic intensity (FLOP/B) and, on the device, compute, memory and launch-overhead times, the
predicted time and its bound. The table lists the nodes that take the longest; --format json gives every node.

Input shapes left open are all named in one error, with values to give. --input NAME= (nothing after =) declares
a scalar input; --value NAME=16000 (or a comma-separated list) gives an input's value, written in as a constant so
that the shapes computed from it resolve (a sample rate that picks a branch, a length that sizes a buffer).

examples:
  onnxroof analyze zoo:resnet50 --device a100-sxm4-80gb
  onnxroof analyze model.onnx --dim batch=8 --precision fp16 --by-op-type
  onnxroof analyze model.onnx --input pixel_values=1x3x384x384 --format json -o report.json
  onnxroof analyze vad.onnx --dim batch=1 --value sr=16000
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    parser.add_argument(
        "-d",
        "--device",
        default=None,
        help="catalog key (see 'onnxroof devices') or a device .toml file; default v100-sxm2",
    )
    add_engine_option(parser)
    add_shape_options(parser)
    add_what_if_options(parser)
    parser.add_argument(
        "--as-exported",
        action="store_true",
        help="--device host: the plain roofline of the graph as exported, not onnxruntime's",
    )
    parser.add_argument(
        "-f", "--format", default="table", choices=("table", "json", "csv"), help="output format (default table)"
    )
    parser.add_argument(
        "--top",
        type=int,
        default=20,
        metavar="N",
        help="table: list the N slowest nodes; 0 lists all in graph order (default 20)",
    )
    parser.add_argument("--by-op-type", action="store_true", help="table: add totals per op type")
    add_output_options(parser, extra=" instead of stdout")


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE, analyze
    from onnxroof.report.analysis import render
    from onnxroof.report.format import output_width

    check_output_option(args)
    shape_dims = dims(args)
    progress = Progress("analyzing")
    progress.stage("loading and inferring shapes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the analysis' own warnings are printed once, below
            (device,) = resolve_devices([args.device or DEFAULT_DEVICE], args.threads, progress)
            result = analyze(
                args.model,
                device=device,
                as_exported=args.as_exported,
                inputs=dict(args.input),
                dims=shape_dims,
                precision=args.precision,
                progress=progress,
                values=dict(args.value),
            )
    finally:
        progress.close()
    for message in result.warnings:
        warn(message)
    width = output_width(args.output)
    text = render(result, args.format, top=args.top, by_op_type=args.by_op_type, width=width, classes=args.verbose)
    emit(text, args.output)
    return 0
