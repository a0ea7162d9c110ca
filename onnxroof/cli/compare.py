"""onnxroof compare: two models side by side, predicted on devices and measured here."""

from __future__ import annotations

import argparse

from onnxroof.cli.common import (
    Progress,
    add_devices_option,
    add_measured_inputs_option,
    add_output_options,
    check_output_option,
    emit,
    inputs_need_measure,
    resolve_devices,
    split_list,
)

HELP = "two models side by side: totals, per-layer deltas, predicted and measured speedup"
DESCRIPTION = """Compare two models (typically a model and its rewrite): totals (FLOPs, bytes, params, intensity),
the predicted time of each on every --device and the speedup B over A (above 1: B is faster), and the layers whose
predicted time changed most, matched by name (a layer that became 'NAME.depthwise' and 'NAME.pointwise' is matched
to both) and by position where names changed. With --measure both models are timed here, alternating, and the
measured speedup is set against the prediction for this machine's calibrated profile (--device host): whether it
got the direction and the size (within 20%) right.

examples:
  onnxroof compare model.onnx model_sep.onnx --device v100-sxm2,rtx2060-super
  onnxroof compare zoo:unet lwu_unet.onnx --device host --measure
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="the first model (.onnx file or zoo:NAME)")
    parser.add_argument("b", metavar="B", help="the second model")
    add_devices_option(parser, "catalog key, device file or host; repeatable or comma-separated (default v100-sxm2)")
    parser.add_argument("--measure", action="store_true", help="also time both models here (onnxruntime, CPU)")
    add_measured_inputs_option(parser)
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="threads to measure and predict at")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="table: the N layers that changed most")
    parser.add_argument("-f", "--format", default="table", choices=("table", "json"), help="output format")
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.report.compare import render_compare
    from onnxroof.report.format import output_width
    from onnxroof.whatif.compare import compare

    check_output_option(args)
    devices = split_list(args.device) or [DEFAULT_DEVICE]
    progress = Progress("comparing")
    try:
        inputs_need_measure(args)
        resolve_devices(devices + (["host"] if args.measure else []), args.threads, progress)
        result = compare(
            args.a,
            args.b,
            devices,
            measure=args.measure,
            threads=args.threads,
            feeds_path=args.inputs,
            progress=progress.stage,
        )
    finally:
        progress.close()
    emit(render_compare(result, args.format, args.top, width=output_width(args.output)), args.output)
    return 0
