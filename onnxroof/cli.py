"""onnxroof: what does this ONNX model cost on that hardware, and what bounds it?

Commands:
  analyze MODEL   per-layer FLOPs, bytes, params, arithmetic intensity and roofline time on a device
  measure MODEL   time the model with onnxruntime (whole model; --per-node adds the profiler's kernel times)
  calibrate       measure this machine's roofline through onnxruntime, for --device host
  validate MODEL  predicted against measured, per kernel and for the model, on this machine
  devices         the device catalog (peak FLOP/s per precision, bandwidth, launch overhead)
  zoo             the built-in models usable as zoo:NAME wherever a model path goes
  ops             the op types onnxroof has cost functions for

Run 'onnxroof COMMAND --help' for a command's options. Errors a user can fix print one line with a hint and
exit with code 2; --verbose shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Sequence

MEASURE_HELP = """Time a model with onnxruntime: warm-up runs, then repetitions in batches; median, min, p90, max.

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

CALIBRATE_HELP = """Measure this machine's empirical roofline through onnxruntime micro-benchmarks (paper 001's ERT).

Peak FLOP/s per precision (fp32 MatMul and Conv, int8 MatMulInteger, fp16 where the provider has kernels),
bandwidth per memory level (working sets sized to L1, L2, L3 and DRAM), per-run and per-node overhead, per
op class the efficiency its kernels reach (convolutions by kind, pooling, normalization, LRN, softmax,
elementwise, data movement, the pass a fused Clip makes over a convolution's output), and how much of a
convolution's DRAM traffic its computation hides when its data is larger than the caches (a batch-32
convolution). The result is a device file, cached per CPU model, onnxruntime version, provider and thread
count; '--device host' anywhere uses it (and calibrates first when there is none, or when an older version of
the benchmark suite measured it).

examples:
  onnxroof calibrate --threads 1
  onnxroof calibrate --threads 2 -o my-host.toml
  onnxroof analyze zoo:resnet50 --device host
"""

VALIDATE_HELP = """Predict, time and profile a model on this machine, and compare per kernel and for the whole model.

With --device host (the default) the prediction follows onnxruntime: the graph its optimizer produces here
(fusions, NCHWc layout), each kernel under its op class's calibrated ceiling and the memory level its data
fits in. --as-exported, or a catalog device, compares the plain roofline of the exported graph instead, each
kernel predicted as the sum of the exported nodes it computes. The table is sorted by measured share; the
JSON adds measured_time_s next to predicted_time_s in totals and nodes.

The whole model is timed in samples spread over a few seconds (--spread), and its measured latency is the mean
of the fastest eighth of them: other work on a shared machine only ever adds time, and calibration reads its
ceilings the same way. The median of all samples is shown next to it. On a calibrated host a reference block
(a few small convolutions, pooling and a Gemm) is timed between the samples and compared with its time at
calibration: the ratio is the machine's speed now (a busy neighbour, a throttled virtual machine), the
predictions are scaled to it before they are compared with the measurement, and a speed more than 10% off
is reported. The prediction as calibrated and its error are shown next to it.

examples:
  onnxroof validate zoo:resnet18
  onnxroof validate model.onnx --threads 2 --format json -o validation.json
  onnxroof validate zoo:alexnet --as-exported
"""

ANALYZE_HELP = """Cost every node of an ONNX model and place it on a device's roofline.

MODEL is an .onnx file (weights inline, external, or absent: weight bytes are never read) or zoo:NAME from
'onnxroof zoo', optionally with zoo:NAME?batch=B&size=S. Each node gets FLOPs, MACs, bytes read and written,
params, arithmetic intensity (FLOP/B) and, on the device, compute, memory and launch-overhead times, the
predicted time and its bound. The table lists the nodes that take the longest; --format json gives every node.

examples:
  onnxroof analyze zoo:resnet50 --device a100-sxm4-80gb
  onnxroof analyze model.onnx --dim batch=8 --precision fp16 --by-op-type
  onnxroof analyze model.onnx --input pixel_values=1x3x384x384 --format json -o report.json
"""


def _pair(kind: str) -> Callable[[str], tuple[str, str]]:
    def parse(text: str) -> tuple[str, str]:
        name, sep, value = text.rpartition("=")
        if not sep or not name or not value:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}")
        return name, value

    return parse


def _add_shape_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", action="append", default=[], type=_pair("NAME=1x3x224x224"), metavar="NAME=SHAPE", help="fix an input's shape (repeatable)")
    parser.add_argument("--dim", action="append", default=[], type=_pair("NAME=VALUE"), metavar="NAME=VALUE", help="fix a symbolic dim such as batch (repeatable)")


def _add_session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", default="cpu", choices=("cpu", "cuda"), help="onnxruntime execution provider (default cpu)")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="onnxruntime intra-op threads (default 1)")
    parser.add_argument("--opt-level", default="all", choices=("disable", "basic", "extended", "all"), help="onnxruntime graph optimization level (default all)")
    parser.add_argument("--allow-fallback", action="store_true", help="accept onnxruntime running on the CPU when cuda was asked for")


def _build_parser() -> argparse.ArgumentParser:
    from onnxroof import __version__

    parser = argparse.ArgumentParser(
        prog="onnxroof", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"onnxroof {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    # -v works after the command too; SUPPRESS keeps a subcommand from resetting a -v given before it.
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")

    analyze = commands.add_parser(
        "analyze", help="per-layer cost and roofline of a model", description=ANALYZE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=[verbose],
    )
    analyze.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    analyze.add_argument("-d", "--device", default=None, help="catalog key (see 'onnxroof devices') or a device .toml file; default v100-sxm2")
    _add_shape_options(analyze)
    analyze.add_argument("-p", "--precision", default=None, help="what if every float tensor were this precision: fp64, fp32, tf32, fp16, bf16, fp8, int8 (default: the tensors' own dtypes)")
    analyze.add_argument("--threads", type=int, default=1, metavar="N", help="--device host: the thread count whose calibration to use (default 1)")
    analyze.add_argument("--as-exported", action="store_true", help="--device host: the plain roofline of the graph as exported, not onnxruntime's")
    analyze.add_argument("-f", "--format", default="table", choices=("table", "json", "csv"), help="output format (default table)")
    analyze.add_argument("--top", type=int, default=20, metavar="N", help="table: list the N slowest nodes; 0 lists all in graph order (default 20)")
    analyze.add_argument("--by-op-type", action="store_true", help="table: add totals per op type")
    analyze.add_argument("-o", "--output", default=None, metavar="FILE", help="write the report to FILE (atomically) instead of stdout")

    measure = commands.add_parser(
        "measure", help="time a model with onnxruntime", description=MEASURE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=[verbose],
    )
    measure.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    _add_shape_options(measure)
    _add_session_options(measure)
    measure.add_argument("--warmup", type=int, default=5, metavar="N", help="untimed runs first (default 5)")
    measure.add_argument("--repeat", type=int, default=30, metavar="N", help="timed samples (default 30)")
    measure.add_argument("--spread", type=float, default=0.0, metavar="S",
                         help="spread the samples over at least S seconds, idle between them, each after an "
                              "untimed warm run (default 0: back to back)")
    measure.add_argument("--inputs", default=None, metavar="FILE.npz", help="inputs from an .npz instead of random ones")
    measure.add_argument("--timeout", type=float, default=300.0, metavar="S", help="stop sampling after S seconds (default 300)")
    measure.add_argument("--per-node", action="store_true", help="also profile each kernel (a separate profiled session)")
    measure.add_argument("-f", "--format", default="table", choices=("table", "json"), help="output format (default table)")
    measure.add_argument("--top", type=int, default=20, metavar="N", help="--per-node table: the N slowest kernels (default 20)")
    measure.add_argument("-o", "--output", default=None, metavar="FILE", help="write the report to FILE (atomically)")

    calibrate = commands.add_parser(
        "calibrate", help="measure this machine's roofline for --device host", description=CALIBRATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=[verbose],
    )
    calibrate.add_argument("--threads", type=int, default=1, metavar="N", help="onnxruntime intra-op threads (default 1)")
    calibrate.add_argument("--provider", default="cpu", choices=("cpu",), help="execution provider (default cpu)")
    calibrate.add_argument("--budget", type=float, default=120.0, metavar="S", help="seconds the micro-benchmarks may take (default 120)")
    calibrate.add_argument("-f", "--format", default="table", choices=("table", "toml", "json"), help="what to print (default table)")
    calibrate.add_argument("-o", "--output", default=None, metavar="FILE", help="also write the device file to FILE (atomically)")

    validate = commands.add_parser(
        "validate", help="predicted vs measured on this machine", description=VALIDATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=[verbose],
    )
    validate.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    validate.add_argument("-d", "--device", default="host", help="host (this machine, calibrated; default), a catalog key or a device file")
    _add_shape_options(validate)
    _add_session_options(validate)
    validate.add_argument("--as-exported", action="store_true", help="predict the exported graph with the plain roofline")
    validate.add_argument("--repeat", type=int, default=30, metavar="N", help="timed samples of the whole model (default 30)")
    validate.add_argument("--runs", type=int, default=20, metavar="N", help="profiled runs for per-kernel times (default 20)")
    validate.add_argument("--spread", type=float, default=None, metavar="S",
                          help="spread the whole-model samples over S seconds (default 5)")
    validate.add_argument("--timeout", type=float, default=300.0, metavar="S", help="stop sampling after S seconds (default 300)")
    validate.add_argument("-f", "--format", default="table", choices=("table", "json"), help="output format (default table)")
    validate.add_argument("--top", type=int, default=20, metavar="N", help="table: the N kernels with the largest measured share (default 20)")
    validate.add_argument("-o", "--output", default=None, metavar="FILE", help="write the report to FILE (atomically)")

    devices = commands.add_parser("devices", help="list the device catalog", description="The device catalog: every number with its source in --format json.", parents=[verbose])
    devices.add_argument("-f", "--format", default="table", choices=("table", "json"))

    commands.add_parser("zoo", help="list the built-in models", description="Built-in models, usable as zoo:NAME or zoo:NAME?batch=B&size=S.", parents=[verbose])

    commands.add_parser("ops", help="list the ops with cost functions", description="Every op type (domain::op outside the default domain) that has a cost function.", parents=[verbose])
    return parser


class _Progress:
    """A one-line progress bar on stderr, shown only on a terminal and only for work that takes a while."""

    def __init__(self, label: str, unit: str = "nodes") -> None:
        self.label = label
        self.unit = unit
        self.start = time.monotonic()
        self.enabled = sys.stderr.isatty()
        self.shown = False

    def stage(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[K{self.label}: {text}")
            sys.stderr.flush()
            self.shown = True

    def __call__(self, done: int, total: int) -> None:
        if self.enabled and (self.shown or time.monotonic() - self.start > 0.5):
            width = 30
            filled = int(width * done / max(total, 1))
            self.stage(f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {self.unit}")

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _emit(text: str, output: str | None) -> None:
    if output:
        from onnxroof.atomic import write_text

        write_text(output, text)
    else:
        sys.stdout.write(text)


def _dims(args: argparse.Namespace) -> dict[str, int]:
    from onnxroof.errors import UserError

    dims: dict[str, int] = {}
    for name, value in args.dim:
        try:
            dims[name] = int(value)
        except ValueError:
            raise UserError(f"--dim {name}={value}: the value must be an integer", f"e.g. --dim {name}=1") from None
        if dims[name] <= 0:
            raise UserError(f"--dim {name}={value}: the value must be positive", f"e.g. --dim {name}=1")
    return dims


def _cmd_analyze(args: argparse.Namespace) -> int:
    from onnxroof.analysis import DEFAULT_DEVICE, analyze
    from onnxroof.devices.resolve import resolve_device
    from onnxroof.report import render

    dims = _dims(args)
    progress = _Progress("analyzing")
    progress.stage("loading and inferring shapes")
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the CLI prints the analysis' own warnings once, below
            device = resolve_device(args.device or DEFAULT_DEVICE, args.threads, "cpu", progress)
            result = analyze(
                args.model,
                device=device,
                as_exported=args.as_exported,
                inputs=dict(args.input),
                dims=dims,
                precision=args.precision,
                progress=progress,
            )
    finally:
        progress.close()
    for message in result.warnings:
        print(f"onnxroof: warning: {message}", file=sys.stderr)
    _emit(render(result, args.format, top=args.top, by_op_type=args.by_op_type), args.output)
    return 0


def _cmd_measure(args: argparse.Namespace) -> int:
    import json

    from onnxroof.measure import measure
    from onnxroof.report.timing import measurement_table

    from onnxroof.runtime import runnable_model

    progress = _Progress("measuring", "samples")
    progress.stage("loading the model into onnxruntime")
    try:
        runnable = runnable_model(args.model, dict(args.input), _dims(args))
        result = measure(
            runnable, provider=args.provider, threads=args.threads, opt_level=args.opt_level,
            warmup=args.warmup, repeat=args.repeat, spread_s=args.spread, feeds_path=args.inputs, allow_fallback=args.allow_fallback,
            timeout_s=args.timeout, progress=progress,
        )
        kernels = None
        if args.per_node:
            from onnxroof.profile import profile_nodes

            progress.stage("profiling each kernel")
            kernels = profile_nodes(
                runnable, provider=args.provider, threads=args.threads, opt_level=args.opt_level,
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
            print(f"onnxroof: warning: {message}", file=sys.stderr)
    _emit(text, args.output)
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    import json

    from onnxroof.calibrate import cache_path, host_device
    from onnxroof.report.calibration import calibration_table

    progress = _Progress("calibrating", "benchmarks")
    progress.stage("starting")
    try:
        device = host_device(threads=args.threads, provider=args.provider, recalibrate=True, progress=progress, budget_s=args.budget)
    finally:
        progress.close()
    if args.output:
        _emit(device.to_toml(), args.output)
    if args.format == "toml":
        sys.stdout.write(device.to_toml())
    elif args.format == "json":
        print(json.dumps(device.to_dict(), indent=2))
    else:
        sys.stdout.write(calibration_table(device, cache_path(args.threads, args.provider)))
    for message in device.calibration.warnings if device.calibration else ():
        print(f"onnxroof: warning: {message}", file=sys.stderr)
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    import json

    from onnxroof.report.validation import validation_table
    from onnxroof.validate import SPREAD_S, validate

    progress = _Progress("validating", "samples")
    try:
        result = validate(
            args.model, args.device, provider=args.provider, threads=args.threads, opt_level=args.opt_level,
            as_exported=args.as_exported, inputs=dict(args.input), dims=_dims(args), repeat=args.repeat, runs=args.runs,
            spread_s=SPREAD_S if args.spread is None else args.spread,
            allow_fallback=args.allow_fallback, timeout_s=args.timeout, stage=progress.stage, progress=progress,
        )
    finally:
        progress.close()
    if args.format == "json":
        text = json.dumps(result.to_dict(), indent=2) + "\n"
    else:
        text = validation_table(result, top=args.top)
        for message in (*result.analysis.warnings, *result.measurement.warnings, *result.profile.warnings, *result.warnings):
            print(f"onnxroof: warning: {message}", file=sys.stderr)
    _emit(text, args.output)
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    import json

    from onnxroof.devices import PRECISIONS, catalog

    devices = catalog()
    if args.format == "json":
        print(json.dumps({key: d.to_dict() for key, d in devices.items()}, indent=2))
        return 0
    columns = "{:<17} {:<4} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>7} {:>7}"
    print(columns.format("key", "kind", "fp64", "fp32", "fp16", "bf16", "int8", "GB/s", "GB", "launch"))
    for key, d in devices.items():
        peaks = {p: d.peak_flops[p].value / 1e12 for p in PRECISIONS if p in d.peak_flops}
        cell = lambda p: f"{peaks[p]:.4g}" if p in peaks else "-"  # noqa: E731
        capacity = f"{d.memory_capacity.value / 1e9:.4g}" if d.memory_capacity else "-"
        print(
            columns.format(
                key, d.kind, cell("fp64"), cell("fp32"), cell("fp16"), cell("bf16"), cell("int8"),
                f"{d.memory_bandwidth.value / 1e9:.4g}", capacity, f"{d.launch_overhead.value * 1e6:.3g}us",
            )
        )
    print("\nPeaks in dense TFLOP/s (int8: TOPS). 'onnxroof devices --format json' gives every number's source.")
    return 0




def _cmd_zoo(args: argparse.Namespace) -> int:
    import model_zoo

    for name in model_zoo.names():
        print(f"zoo:{name:<14} {model_zoo.describe(name)}")
    return 0


def _cmd_ops(args: argparse.Namespace) -> int:
    from onnxroof.costs import registered_ops

    ops = registered_ops()
    print("\n".join(ops))
    print(f"\n{len(ops)} ops have cost functions; any other op is reported as unsupported and charged its bytes.")
    return 0


_COMMANDS = {
    "analyze": _cmd_analyze,
    "measure": _cmd_measure,
    "calibrate": _cmd_calibrate,
    "validate": _cmd_validate,
    "devices": _cmd_devices,
    "zoo": _cmd_zoo,
    "ops": _cmd_ops,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return _COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("onnxroof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        from onnxroof.errors import UserError

        if args.verbose:
            raise
        if isinstance(exc, UserError):
            print(f"onnxroof: error: {exc}", file=sys.stderr)
            return 2
        print(f"onnxroof: internal error: {type(exc).__name__}: {exc} (hint: rerun with --verbose)", file=sys.stderr)
        return 1
