"""onnxroof measure: time a model with onnxruntime, optionally per kernel."""

from __future__ import annotations

import argparse
import json

from onnxroof.cli.common import Progress, add_session_options, add_shape_options, dims, emit, warn

HELP = "time a model with onnxruntime"
DESCRIPTION = """Time a model with onnxruntime: warm-up runs, then repetitions in batches; median, min, p90, max.

Inputs are random of the right dtype and shape (fix shapes with --input/--dim) or read from an .npz
(--inputs FILE, arrays named like the model's inputs). Weights that are absent from disk are filled with random
values of the right shapes, and the output says so. The provider that really ran is reported: asking for
cuda on a machine where onnxruntime falls back to the CPU is an error unless --allow-fallback. A busy machine
(load from other processes, or a wide spread between repetitions) is reported as a warning; --spread 5
spreads the samples over five seconds so that some fall in quiet moments, and "fast" (the mean of the fastest
eighth of the samples) estimates the time on an idle machine.

examples:
  onnxroof measure zoo:resnet18 --threads 1
  onnxroof measure model.onnx --inputs batch.npz --provider cuda --repeat 100
  onnxroof measure zoo:mobilenetv2 --per-node --format json -o timing.json
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    add_shape_options(parser)
    add_session_options(parser)
    parser.add_argument("--warmup", type=int, default=5, metavar="N", help="untimed runs first (default 5)")
    parser.add_argument("--repeat", type=int, default=30, metavar="N", help="timed samples (default 30)")
    parser.add_argument(
        "--spread",
        type=float,
        default=0.0,
        metavar="S",
        help="spread the samples over at least S seconds, idle between them, each after an untimed warm run "
        "(default 0: back to back)",
    )
    parser.add_argument("--inputs", default=None, metavar="FILE.npz", help="inputs from an .npz instead of random ones")
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="stop sampling after S seconds (default 300)"
    )
    parser.add_argument(
        "--per-node", action="store_true", help="also profile each kernel (a separate profiled session)"
    )
    parser.add_argument(
        "-f", "--format", default="table", choices=("table", "json"), help="output format (default table)"
    )
    parser.add_argument(
        "--top", type=int, default=20, metavar="N", help="--per-node table: the N slowest kernels (default 20)"
    )
    parser.add_argument("-o", "--output", default=None, metavar="FILE", help="write the report to FILE (atomically)")


def run(args: argparse.Namespace) -> int:
    from onnxroof.ort.measure import measure
    from onnxroof.ort.sessions import runnable_model
    from onnxroof.report.timing import measurement_table

    progress = Progress("measuring", "samples")
    progress.stage("loading the model into onnxruntime")
    try:
        runnable = runnable_model(args.model, dict(args.input), dims(args))
        result = measure(
            runnable,
            provider=args.provider,
            threads=args.threads,
            opt_level=args.opt_level,
            warmup=args.warmup,
            repeat=args.repeat,
            spread_s=args.spread,
            feeds_path=args.inputs,
            allow_fallback=args.allow_fallback,
            timeout_s=args.timeout,
            progress=progress,
        )
        kernels = None
        if args.per_node:
            from onnxroof.ort.profile import profile_nodes

            progress.stage("profiling each kernel")
            kernels = profile_nodes(
                runnable,
                provider=args.provider,
                threads=args.threads,
                opt_level=args.opt_level,
                allow_fallback=args.allow_fallback,
            )
    finally:
        progress.close()
    if args.format == "json":
        data = result.to_dict()
        if kernels is not None:
            data["profile"] = kernels.to_dict()
        text = json.dumps(data, indent=2) + "\n"
    else:
        text = measurement_table(result, kernels, top=args.top)
        for message in result.warnings + (kernels.warnings if kernels else ()):
            warn(message)
    emit(text, args.output)
    return 0
