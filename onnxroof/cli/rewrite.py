"""onnxroof rewrite: apply graph rewrites (the "what if" of paper 000) and write the new model."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from onnxroof.cli.common import Progress, check_output, emit
from onnxroof.errors import UserError

if TYPE_CHECKING:
    from onnxroof.whatif.rewrite import RewriteRequest

HELP = "rewrite a model: separable convs, strides, fp16, int8, batch, input size"
DESCRIPTION = """Rewrite an ONNX model and write the result, a valid model onnxruntime can run.

The passes run in a fixed order, whatever the order of the options: --batch and --input-size, then --stride,
--separable, and last --fp16 or --int8. Each change is listed with the node it touched; approximations
(separable factorizations, fp16 weights) carry their relative error. Where the rewrite keeps the model's input
and output shapes and its weights are present, both models run on the same random inputs and the largest output
difference is reported (NaN and overflow named). The input file is never modified. External weights are read only
from the model's own folder; where they are absent the result is graph-only (weights with shapes and no values):
analyze works on it, measure fills random weights.

examples:
  onnxroof rewrite model.onnx -o model_sep.onnx --separable --fp16 --keep-io-types
  onnxroof rewrite zoo:unet -o lwu_unet.onnx --stride lwu
  onnxroof rewrite resnet50.onnx -o r50_b8.onnx --batch 8 --input-size 448x448
  onnxroof rewrite model.onnx -o model_int8.onnx --int8 static --calibration samples.npz
"""


def _size(text: str) -> tuple[int, int]:
    h, sep, w = text.lower().partition("x")
    try:
        height, width = int(h), int(w if sep else h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HxW such as 224x224, got {text!r}") from None
    if height < 1 or width < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return height, width


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def add_rewrite_options(parser: argparse.ArgumentParser) -> None:
    """The pass options, one argument group."""
    group = parser.add_argument_group("rewrites")
    group.add_argument(
        "--separable",
        nargs="?",
        const="",
        default=None,
        metavar="NODES",
        help="standard convs (group 1, kernel > 1x1) become depthwise + pointwise, weights by rank-1 SVD; "
        "NODES: comma-separated node names (default: every eligible conv)",
    )
    group.add_argument(
        "--stride",
        action="append",
        default=None,
        metavar="NODE=S|lwu",
        help="set a conv's stride and repair the shapes downstream (repeatable); 'lwu': paper 000's LWU-Net, "
        "stride 2 on the second conv of each U-Net encoder block",
    )
    group.add_argument("--fp16", action="store_true", help="convert float32 to float16 (onnxruntime's converter)")
    group.add_argument("--keep-io-types", action="store_true", help="--fp16: keep the inputs and outputs float32")
    group.add_argument(
        "--fp16-block", default="", metavar="OPS", help="--fp16: comma-separated op types to keep in float32"
    )
    group.add_argument(
        "--int8", choices=("dynamic", "static"), default=None, help="quantize with onnxruntime.quantization"
    )
    group.add_argument(
        "--calibration",
        default=None,
        metavar="NPZ",
        help="--int8 static: real inputs to calibrate on, arrays named like the inputs (random inputs otherwise)",
    )
    group.add_argument(
        "--int8-skip-symbolic-shape",
        action="store_true",
        help="--int8: skip onnxruntime's symbolic shape inference in the pre-processing (when it fails)",
    )
    group.add_argument("--batch", type=_positive, default=None, metavar="N", help="set the batch size")
    group.add_argument("--input-size", type=_size, default=None, metavar="HxW", help="set the image size")


def request_from(args: argparse.Namespace) -> RewriteRequest:
    """The RewriteRequest the options ask for."""
    from onnxroof.whatif.rewrite import LWU, RewriteRequest

    strides: dict[str, int] | str | None = None
    for item in args.stride or []:
        if item == LWU:
            if args.stride != [LWU]:
                raise UserError("--stride lwu is a preset of its own", "pass it alone, without NODE=S strides")
            strides = LWU
            continue
        node, sep, value = item.rpartition("=")
        if not sep or not node or not value.isdigit() or int(value) < 1:
            raise UserError(
                f"--stride {item}: expected NODE=S with S a positive integer, or lwu", "e.g. --stride conv2=2"
            )
        strides = {**(strides if isinstance(strides, dict) else {}), node: int(value)}
    separable = None if args.separable is None else tuple(n for n in args.separable.split(",") if n)
    return RewriteRequest(
        batch=args.batch,
        input_size=args.input_size,
        strides=strides,
        separable=separable,
        fp16=args.fp16,
        keep_io_types=args.keep_io_types,
        fp16_block=tuple(op for op in args.fp16_block.split(",") if op),
        int8=args.int8,
        calibration=args.calibration,
        int8_skip_symbolic_shape=args.int8_skip_symbolic_shape,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the rewritten model")
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")
    add_rewrite_options(parser)
    parser.add_argument("--no-compare", action="store_true", help="skip running both models to compare their outputs")
    parser.add_argument("-f", "--format", default="table", choices=("table", "json"), help="report format")


def run(args: argparse.Namespace) -> int:
    from onnxroof.passes.model_file import write_model
    from onnxroof.report.format import output_width
    from onnxroof.report.rewrite import render_rewrite
    from onnxroof.whatif.rewrite import rewrite

    request = request_from(args)
    check_output(args.output, args.force)
    progress = Progress("rewriting")
    progress.stage(" ".join(request.describe()))
    try:
        done = rewrite(args.model, request, compare_outputs=not args.no_compare, progress=progress.stage)
        written = write_model(done.result.model, args.output, force=args.force)
    finally:
        progress.close()
    emit(render_rewrite(done, [str(p) for p in written], args.format, width=output_width()), None)
    return 0
