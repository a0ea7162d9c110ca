"""onnxroof fit: does a model fit a device's memory and latency budget; the largest batch; the best device."""

from __future__ import annotations

import argparse

from onnxroof.cli.common import (
    Progress,
    add_devices_option,
    add_output_options,
    check_output_option,
    emit,
    resolve_devices,
    split_list,
)
from onnxroof.errors import UserError

HELP = "deploy-time check: memory and latency budgets, the largest batch, the best device (exit 1 on a miss)"
DESCRIPTION = """Check a model against a device's memory and a latency budget, as a deployment (or a CI job) asks
before it ships. Latency is the predicted time; memory is weights plus the peak of live activations over the
execution order (onnxruntime's order on --device host). The memory budget defaults to the device's memory
capacity. Budgets are written with their unit, and each check is shown in the unit its budget was written in:
--latency-budget 10ms, 2.5s or 500us; --memory-budget 4GiB (4 x 2^30 bytes), 4GB (4 x 10^9), 512MiB. A bare number
is refused (10 could be seconds where milliseconds were meant, a CI gate that never fails), and so is a prefix
alone (4G: GB or GiB?). One summary line says PASS or FAIL with the numbers. --training checks a training step
instead: forward, backward (about twice the forward for convolutions and matrix products) and the optimizer
update, with memory for weights, gradients, optimizer state and the activations kept for backward.

Exit codes: 0 when every check passes, 1 when one fails, 2 for bad input (an unknown device, a budget that does
not parse, a batch the model cannot take).

examples:
  onnxroof fit model.onnx --device t4 --batch 8 --latency-budget 10ms --memory-budget 4GiB
  onnxroof fit zoo:resnet50 --device a100-sxm4-80gb --precision fp16 --max-batch --latency-budget 20ms
  onnxroof fit zoo:resnet50 --all-devices --latency-budget 5ms --format json
  onnxroof fit zoo:resnet50 --device v100-sxm2 --batch 32 --training --optimizer adam --mixed-precision
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    add_devices_option(parser, "device(s), repeatable or comma-separated")
    parser.add_argument("--all-devices", action="store_true", help="rank every catalog device")
    parser.add_argument("--batch", type=int, default=None, metavar="N", help="the batch size (default: the model's)")
    parser.add_argument("-p", "--precision", default=None, help="what if every float tensor were P (fp32, fp16, ...)")
    parser.add_argument("--latency-budget", default=None, metavar="T", help="with its unit: 10ms, 2.5s, 500us")
    parser.add_argument(
        "--memory-budget",
        default=None,
        metavar="M",
        help="with its unit: 4GiB, 4GB, 512MiB (default: the device's memory)",
    )
    parser.add_argument("--max-batch", action="store_true", help="find the largest batch within the budgets")
    parser.add_argument(
        "--training",
        action="store_true",
        help="check a training step (forward + backward + optimizer update) instead of inference",
    )
    parser.add_argument(
        "--optimizer", default="adam", choices=("sgd", "momentum", "adam"), help="--training: its state [adam]"
    )
    parser.add_argument(
        "--mixed-precision", action="store_true", help="--training: fp16 compute, fp32 master weights and state"
    )
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="--device host: calibration threads")
    parser.add_argument("-f", "--format", default="table", choices=("table", "json"), help="output format")
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.devices import catalog
    from onnxroof.report.fit import render_fit, render_max_batch, render_ranking
    from onnxroof.report.format import output_width
    from onnxroof.units import parse_bytes, parse_seconds
    from onnxroof.whatif.fit import Training, fit, max_batch, rank_devices

    check_output_option(args)
    if args.batch is not None and args.batch < 1:
        raise UserError(f"--batch {args.batch}: a batch is at least 1", "e.g. --batch 8")
    latency = parse_seconds(args.latency_budget) if args.latency_budget else None
    memory = parse_bytes(args.memory_budget) if args.memory_budget else None
    devices = list(catalog()) if args.all_devices else split_list(args.device) or [DEFAULT_DEVICE]
    precision, threads = args.precision, args.threads
    training = Training(args.optimizer, args.mixed_precision) if args.training else None
    ranking = len(devices) > 1
    progress = Progress("fitting", unit="devices" if ranking else "fits")
    try:
        targets = resolve_devices(devices, threads, progress)  # host calibrated first where needed
        from onnxroof.predict.profiles import reads_host_memory

        if training is None and any(reads_host_memory(t) for t in targets):
            from onnxroof.ort.memory_calibration import host_memory_factors

            progress.stage("reading this host's session memory factors (measured once)")
            host_memory_factors(threads, progress=progress.stage)
        if ranking:
            ranked = rank_devices(
                args.model,
                devices,
                batch=args.batch,
                precision=precision,
                latency_budget=latency,
                memory_budget=memory,
                threads=threads,
                training=training,
                progress=progress,
            )
            emit(render_ranking(ranked, args.format, width=output_width(args.output)), args.output)
            return 0 if any(d.fit.passed for d in ranked) else 1
        if args.max_batch:
            largest = max_batch(
                args.model,
                devices[0],
                precision=precision,
                latency_budget=latency,
                memory_budget=memory,
                threads=threads,
                training=training,
                progress=progress,
            )
            emit(render_max_batch(largest, devices[0], args.format, width=output_width(args.output)), args.output)
            return 0 if largest.batch > 0 else 1
        progress.stage(f"predicting on {devices[0]}")
        result = fit(
            args.model,
            devices[0],
            batch=args.batch,
            precision=precision,
            latency_budget=latency,
            memory_budget=memory,
            threads=threads,
            training=training,
        )
    finally:
        progress.close()
    emit(render_fit(result, args.format, width=output_width(args.output)), args.output)
    return 0 if result.passed else 1
