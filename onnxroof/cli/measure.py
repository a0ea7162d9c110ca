"""onnxroof measure: time a model with onnxruntime, optionally per kernel."""

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
    session_spec,
    warn,
)

# --memory's two runs: onnxruntime's arena and memory pattern planner both on (its default), then both off.
MEMORY_CONFIGURATIONS = {"default": True, "no_arena_no_pattern": False}

HELP = "time a model with onnxruntime"
DESCRIPTION = """Time a model with onnxruntime: warm-up runs, then repetitions in batches; median, min, p90, max.

Inputs are random of the right dtype and shape (fix shapes with --input/--dim) or read from an .npz
(--inputs FILE, arrays named like the model's inputs, for the timing and --per-node's profile alike);
--value NAME=16000 gives one input's value. Weights that are absent from disk are filled with random
values of the right shapes, and the output says so. The provider that really ran is reported: asking for
cuda on a machine where onnxruntime falls back to the CPU is an error unless --allow-fallback. A busy machine
(load from other processes, or a wide spread between repetitions) is reported as a warning; --spread 5
spreads the samples over five seconds so that some fall in quiet moments, and "fast" (the mean of the fastest
eighth of the samples) estimates the time on an idle machine.

--memory also measures the peak resident memory, after the timing: the model runs 3 times on random inputs in a
fresh process on the CPU provider, once with onnxruntime's memory arena and memory pattern planner on (its
default) and once with both off. For each, the table gives what making the session added to the process (weights
and buffers allocated up front), what the runs added on top of it (activations, outputs, scratch space, the
arena's growth), the two together, and the process's peak resident set. On Linux the peak is VmHWM, reset once
the session is made so that it covers the runs alone; elsewhere it is getrusage's ru_maxrss. --format json adds
them as a "memory" object ("default" and "no_arena_no_pattern").

examples:
  onnxroof measure zoo:resnet18 --threads 1
  onnxroof measure model.onnx --inputs batch.npz --provider cuda --repeat 100
  onnxroof measure zoo:mobilenetv2 --per-node --format json -o timing.json
  onnxroof measure model.onnx --memory
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
        "--memory",
        action="store_true",
        help="also the peak resident memory, with onnxruntime's arena and memory pattern on and off (CPU provider, "
        "random inputs, a fresh process each)",
    )
    parser.add_argument(
        "-f", "--format", default="table", choices=("table", "json"), help="output format (default table)"
    )
    parser.add_argument(
        "--top", type=int, default=20, metavar="N", help="--per-node table: the N slowest kernels (default 20)"
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from onnxroof.ort.measure import measure
    from onnxroof.ort.memory import PeakMemory, measure_peak_memory
    from onnxroof.ort.sessions import load_feeds, runnable_model
    from onnxroof.report.format import output_width
    from onnxroof.report.memory import memory_table
    from onnxroof.report.timing import measurement_table

    check_output_option(args)
    session = session_spec(args)
    progress = Progress("measuring", "samples")
    progress.stage("loading the model into onnxruntime")
    try:
        runnable = runnable_model(model_spec(args))
        feeds = load_feeds(args.inputs, runnable) if args.inputs else None  # for the timing and the profile
        result = measure(
            runnable,
            session,
            warmup=args.warmup,
            repeat=args.repeat,
            spread_s=args.spread,
            feeds=feeds,
            timeout_s=args.timeout,
            progress=progress,
        )
        kernels = None
        if args.per_node:
            from onnxroof.ort.profile import profile_nodes

            progress.stage("profiling each kernel")
            kernels = profile_nodes(runnable, session, feeds=feeds)
        memory: dict[str, PeakMemory] = {}
        if args.memory:
            progress.stage("measuring the peak memory")
            for key, on in MEMORY_CONFIGURATIONS.items():
                memory[key] = measure_peak_memory(
                    runnable, arena=on, pattern=on, threads=args.threads, opt_level=args.opt_level
                )
    finally:
        progress.close()
    if args.format == "json":
        data = result.to_dict()
        if kernels is not None:
            data["profile"] = kernels.to_dict()
        if memory:
            data["memory"] = {key: m.to_dict() for key, m in memory.items()}
        text = json.dumps(data, indent=2) + "\n"
    else:
        text = measurement_table(result, kernels, top=args.top, width=output_width(args.output))
        if memory:
            text += "\n" + memory_table(list(memory.values()), width=output_width(args.output))
        for message in result.warnings + (kernels.warnings if kernels else ()):
            warn(message)
    emit(text, args.output)
    return 0
