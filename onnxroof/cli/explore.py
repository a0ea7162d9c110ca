"""onnxroof explore: every rewrite that applies to a model, ranked by predicted gain on a device."""

from __future__ import annotations

import argparse

from onnxroof.cli.common import (
    Progress,
    add_engine_option,
    add_executor_options,
    add_measured_inputs_option,
    add_output_options,
    check_output_option,
    emit,
    executor_of,
    inputs_need_measure,
    resolve_devices,
    split_list,
)

HELP = "the rewrites that apply to a model, ranked by predicted speedup on a device"
DESCRIPTION = """Try every rewrite onnxroof has on a model (separable convolutions, the LWU-Net strides, fp16,
dynamic and static int8), list the layers each touches and its predicted time on the device before and after,
ranked by predicted speedup; the ones that do not apply are listed with the reason. On --device host the
prediction is made on the graph onnxruntime runs, so the Casts its CPU provider inserts around ops without fp16
kernels and the cost of dynamic quantization are predicted. --measure N builds and times the N best here and
shows their measured speedup beside this machine's prediction.

--jobs N rewrites and analyzes the variants (the model as it is and each rewrite) in N worker processes
(default: the CPU count); --jobs 1 runs in this process. The timings of --measure run one at a time, in this
process. --executor ADDRESS sends the variants to an existing Dask cluster instead (its scheduler's
tcp://HOST:PORT or scheduler file; pip install 'onnxroof[distributed]'): each worker reads the model itself
(give a path every worker sees), and with --measure the timings go to a worker on this machine, started with
`dask worker ADDRESS --resources device:KEY=1` (KEY: this machine's profile, host-...). The ranking is the same
wherever the variants run.

examples:
  onnxroof explore zoo:unet --device rtx2060-super
  onnxroof explore model.onnx --device host --measure 3
  onnxroof explore /shared/model.onnx --device t4 --executor tcp://scheduler:8786
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    parser.add_argument("-d", "--device", default=None, help="catalog key, device file or host (default v100-sxm2)")
    add_engine_option(parser)
    parser.add_argument("--measure", type=int, default=0, metavar="N", help="time the N best rewrites here")
    add_measured_inputs_option(parser)
    parser.add_argument("--only", action="append", default=None, metavar="R", help="try only these rewrites")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="threads to measure and predict at")
    add_executor_options(parser)
    parser.add_argument("-f", "--format", default="table", choices=("table", "json"), help="output format")
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.report.explore import render_explore
    from onnxroof.report.format import output_width
    from onnxroof.whatif.explore import explore, explore_resources

    check_output_option(args)
    progress = Progress("exploring")
    try:
        inputs_need_measure(args)
        executor = executor_of(args, explore_resources)
        resolve_devices([args.device or DEFAULT_DEVICE] + (["host"] if args.measure else []), args.threads, progress)
        result = explore(
            args.model,
            args.device or DEFAULT_DEVICE,
            measure=args.measure,
            threads=args.threads,
            only=tuple(split_list(args.only)),
            feeds_path=args.inputs,
            executor=executor,
            progress=progress.stage,
        )
    finally:
        progress.close()
    emit(render_explore(result, args.format, width=output_width(args.output)), args.output)
    return 0
