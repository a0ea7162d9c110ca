"""onnxroof sweep: predicted time, throughput, intensity and bound over batch, input size, precision, device."""

from __future__ import annotations

import argparse

from onnxroof.cli.common import (
    Progress,
    add_devices_option,
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
from onnxroof.errors import UserError

HELP = "every combination of batch, input size, precision and device in one table"
DESCRIPTION = """Predict a model over every combination of batch sizes, input sizes, precisions and devices
(paper 000 sections 4.3-4.5; paper 004's batch 1/64/256): one row each with the predicted time, throughput
(samples/s), FLOPs, bytes, arithmetic intensity and bound.

--precision is the analysis' "what if": every float tensor costed at that precision (bytes and the device's peak
for it), the graph unchanged. --rewrite converts the graph instead (fp16, int8-dynamic, int8-static), so its rows
include the Casts and quantize nodes the conversion adds: on an onnxruntime host that is what really runs. The
precision column says which a row is. Batch and input size rewrite the graph (hard-coded shapes repaired).

--measure also times each row with onnxruntime on its device's own machine (the whole model's median time per
run, at the host profile's thread count) and adds the measured time and the error (predicted / measured - 1).
Only host devices are measured: host, or a device file that `onnxroof calibrate -o FILE` wrote on that machine;
a what-if --precision runs no graph, so --measure takes --rewrite instead. Here (--executor local) a device file
is timed only where it describes this machine; measurements run one at a time, in this process.

--jobs N predicts in N worker processes (default: the CPU count); --jobs 1 runs in this process. Each task is
one variant of the model (a batch, an input size, a precision) with all its devices, read and rewritten once.
--executor ADDRESS sends the tasks to an existing Dask cluster instead (its scheduler's tcp://HOST:PORT or
scheduler file; pip install 'onnxroof[distributed]'): each worker reads the model itself (give a path every
worker sees), and with --measure each row's task runs on a worker that declares its device, started on that
machine with `dask worker ADDRESS --resources device:KEY=1` (KEY: the device file's key). The rows are the same
wherever they run.

examples:
  onnxroof sweep zoo:unet --batch 1,16,64 --precision fp32,fp16,int8 --input-size 128x128,192x192 \\
      --device v100-sxm2,rtx2060-super
  onnxroof sweep model.onnx --batch 1,8 --rewrite fp16,int8-dynamic --device host --format csv -o sweep.csv
  onnxroof sweep model.onnx --batch 1,8 --rewrite fp16 --measure --device host
  onnxroof sweep /shared/model.onnx --batch 1,8 --measure -d host-a.toml,host-b.toml \\
      --executor tcp://scheduler:8786
"""


def add_sweep_axes(parser: argparse.ArgumentParser) -> None:
    """The axes a sweep varies: --batch, --input-size, -p/--precision and --rewrite, each a comma-separated list
    (read back with batches, input_sizes, precisions and rewrites)."""
    parser.add_argument("--batch", default=None, metavar="B1,B2", help="batch sizes (default: the model's)")
    parser.add_argument("--input-size", default=None, metavar="HxW,...", help="image sizes (default: the model's)")
    parser.add_argument("-p", "--precision", default=None, metavar="P1,P2", help="what-if precisions: fp64 ... int8")
    parser.add_argument(
        "--rewrite", default=None, metavar="R1,R2", help="graph conversions: fp16, int8-dynamic, int8-static"
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    add_sweep_axes(parser)
    add_devices_option(parser, "devices, repeatable or comma-separated")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="--device host: calibration threads")
    parser.add_argument(
        "--measure", action="store_true", help="also time each row with onnxruntime on its host device's machine"
    )
    add_measured_inputs_option(parser)
    add_executor_options(parser)
    parser.add_argument("-f", "--format", default="table", choices=("table", "json", "csv"), help="output format")
    add_output_options(parser)


def batches(args: argparse.Namespace) -> list[int]:
    """The --batch values: positive integers (a UserError for anything else)."""
    return _ints(args.batch, "--batch")


def input_sizes(args: argparse.Namespace) -> list[tuple[int, int]]:
    """The --input-size values as (height, width): HxW, or H alone for a square."""
    return _sizes(args.input_size)


def precisions(args: argparse.Namespace) -> list[str]:
    return split_list([args.precision] if args.precision else None)


def rewrites(args: argparse.Namespace) -> list[str]:
    return split_list([args.rewrite] if args.rewrite else None)


def _ints(text: str | None, option: str) -> list[int]:
    out = []
    for item in split_list([text] if text else None):
        if not item.isdigit() or int(item) < 1:
            raise UserError(f"{option} {item}: expected positive integers", f"e.g. {option} 1,16,64")
        out.append(int(item))
    return out


def _sizes(text: str | None) -> list[tuple[int, int]]:
    out = []
    for item in split_list([text] if text else None):
        h, sep, w = item.lower().partition("x")
        if not (h.isdigit() and (not sep or w.isdigit())) or int(h) < 1 or (sep and int(w) < 1):
            raise UserError(f"--input-size {item}: expected HxW", "e.g. --input-size 128x128,192x192")
        out.append((int(h), int(w) if sep else int(h)))
    return out


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.report.format import output_width
    from onnxroof.report.sweep import render_sweep
    from onnxroof.whatif.sweep import sweep, sweep_resources

    check_output_option(args)
    inputs_need_measure(args)
    executor = executor_of(args, sweep_resources)
    progress = Progress("sweeping", unit="analyses")
    named = split_list(args.device) or [DEFAULT_DEVICE]
    try:
        resolve_devices(named, args.threads, progress)  # host calibrated first where needed
        result = sweep(
            args.model,
            named,
            batches=batches(args),
            sizes=input_sizes(args),
            precisions=precisions(args),
            rewrites=rewrites(args),
            threads=args.threads,
            measure=args.measure,
            feeds_path=args.inputs,
            executor=executor,
            progress=progress,
        )
    finally:
        progress.close()
    emit(render_sweep(result, args.format, width=output_width(args.output)), args.output)
    return 0
