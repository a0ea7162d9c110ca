"""onnxroof validate: predicted against measured on this machine, per kernel and for the model."""

from __future__ import annotations

import argparse
import json

from onnxroof.cli.common import (
    Progress,
    add_output_options,
    add_session_options,
    add_shape_options,
    check_output_option,
    emit,
    model_spec,
    resolve_devices,
    session_spec,
    warn,
)

HELP = "predicted vs measured on this machine"
DESCRIPTION = """Predict, time and profile a model on this machine, and compare per kernel and for the whole model.

With --device host (the default) the prediction follows onnxruntime: the graph its optimizer produces here
(fusions, NCHWc layout), each kernel under its op class's calibrated ceiling and the memory level its data
fits in. --as-exported, or a catalog device, compares the plain roofline of the exported graph instead, each
kernel predicted as the sum of the exported nodes it computes. The table is sorted by measured share; the
JSON adds measured_time_s next to predicted_time_s in totals and nodes.

The whole model is timed in samples spread over a few seconds (--spread), and its measured latency is their
median, what a timing loop of your own reports; the prediction targets it. The mean of the fastest eighth (the
machine's best moments, as calibration reads each kernel) is shown next to it. On a calibrated host a reference block
(a few small convolutions, pooling and a Gemm) is timed between the samples and compared with its time at
calibration: the ratio is the machine's speed now (a busy neighbour, a throttled virtual machine), the
predictions are scaled to it before they are compared with the measurement, and a speed more than 10% off
is reported. The prediction as calibrated and its error are shown next to it.

examples:
  onnxroof validate zoo:resnet18
  onnxroof validate model.onnx --threads 2 --format json -o validation.json
  onnxroof validate zoo:alexnet --as-exported
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    parser.add_argument(
        "-d",
        "--device",
        default="host",
        help="host (this machine, calibrated; default), a catalog key or a device file",
    )
    add_shape_options(parser)
    add_session_options(parser)
    parser.add_argument("--as-exported", action="store_true", help="predict the exported graph with the plain roofline")
    parser.add_argument(
        "--inputs",
        default=None,
        metavar="FILE.npz",
        help="inputs from an .npz (arrays named like the model's inputs) for the timing and the profile, instead of "
        "random ones",
    )
    parser.add_argument(
        "--repeat", type=int, default=30, metavar="N", help="timed samples of the whole model (default 30)"
    )
    parser.add_argument(
        "--runs", type=int, default=20, metavar="N", help="profiled runs for per-kernel times (default 20)"
    )
    parser.add_argument(
        "--spread",
        type=float,
        default=None,
        metavar="S",
        help="spread the whole-model samples over S seconds (default 5)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="stop sampling after S seconds (default 300)"
    )
    parser.add_argument(
        "-f", "--format", default="table", choices=("table", "json"), help="output format (default table)"
    )
    parser.add_argument(
        "--top",
        type=int,
        default=20,
        metavar="N",
        help="table: the N kernels with the largest measured share (default 20)",
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from onnxroof.ort.validate import SPREAD_S, validate
    from onnxroof.report.format import output_width
    from onnxroof.report.validation import validation_table

    check_output_option(args)
    progress = Progress("validating", "samples")
    try:
        resolve_devices([args.device], args.threads, progress, args.provider)  # host calibrated first where needed
        result = validate(
            model_spec(args),
            args.device,
            session_spec(args),
            as_exported=args.as_exported,
            feeds_path=args.inputs,
            repeat=args.repeat,
            runs=args.runs,
            spread_s=SPREAD_S if args.spread is None else args.spread,
            timeout_s=args.timeout,
            stage=progress.stage,
            progress=progress,
        )
    finally:
        progress.close()
    if args.format == "json":
        text = json.dumps(result.to_dict(), indent=2) + "\n"
    else:
        text = validation_table(result, top=args.top, width=output_width(args.output))
        for message in (
            *result.analysis.warnings,
            *result.measurement.warnings,
            *result.profile.warnings,
            *result.warnings,
        ):
            warn(message)
    emit(text, args.output)
    return 0
