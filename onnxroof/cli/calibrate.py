"""onnxroof calibrate: this machine's empirical roofline through onnxruntime, for --device host."""

from __future__ import annotations

import argparse
import json
import sys

from onnxroof.cli.common import Progress, add_output_options, check_output_option, emit, warn

HELP = "measure this machine's roofline for --device host"
DESCRIPTION = """Measure this machine's empirical roofline through onnxruntime micro-benchmarks (paper 001's ERT).

Peak FLOP/s per precision (fp32 MatMul and Conv, int8 MatMulInteger, fp16 where the provider has kernels),
bandwidth per memory level (working sets sized to L1, L2, L3 and DRAM), per-run and per-node overhead, per
op class the efficiency its kernels reach (convolutions by kind, pooling, normalization, LRN, softmax,
elementwise, data movement, the pass a fused Clip makes over a convolution's output, a decoder's 4-bit
products (MatMulNBits) by rows and accuracy level and its GroupQueryAttention by decode step and prefill), and
how much of a
convolution's DRAM traffic its computation hides when its data is larger than the caches (a batch-32
convolution), and how much faster than from DRAM a small model's weights come back from the caches between
back-to-back runs (chains of matrix-vector products from an eighth to four times the last cache level). The
result is a device file, cached per CPU model, onnxruntime version, provider and thread count; '--device
host' anywhere uses it, and calibrates first when there is none or when the cached one comes from an earlier
version of the benchmark suite.

With --provider cuda it measures the GPU's roofline through onnxruntime's CUDA provider instead: fp32 and fp16
MatMul peaks, the memory's bandwidth, the cost of a kernel launch and of a run (no op-class ceilings: those
describe the CPU's kernels). It stops with an error where onnxruntime would run the graphs on the CPU.

examples:
  onnxroof calibrate --threads 1
  onnxroof calibrate --threads 2 -o my-host.toml
  onnxroof calibrate --provider cuda -o gpu.toml   (then: onnxroof analyze model.onnx --device gpu.toml)
  onnxroof analyze zoo:resnet50 --device host
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="onnxruntime intra-op threads (default 1)")
    parser.add_argument(
        "--provider",
        default="cpu",
        choices=("cpu", "cuda"),
        help="execution provider (default cpu; cuda measures the GPU's roofline: peaks, bandwidth, launch cost)",
    )
    parser.add_argument(
        "--budget", type=float, default=120.0, metavar="S", help="seconds the micro-benchmarks may take (default 120)"
    )
    parser.add_argument(
        "-f", "--format", default="table", choices=("table", "toml", "json"), help="what to print (default table)"
    )
    add_output_options(parser, "the device file also")


def run(args: argparse.Namespace) -> int:
    from onnxroof.ort.calibrate import cache_path, host_device
    from onnxroof.report.calibration import calibration_table
    from onnxroof.report.format import output_width

    check_output_option(args)
    progress = Progress("calibrating", "benchmarks")
    progress.stage("starting")
    try:
        device = host_device(
            threads=args.threads, provider=args.provider, recalibrate=True, progress=progress, budget_s=args.budget
        )
    finally:
        progress.close()
    if args.output:
        emit(device.to_toml(), args.output)
    if args.format == "toml":
        sys.stdout.write(device.to_toml())
    elif args.format == "json":
        print(json.dumps(device.to_dict(), indent=2))
    else:
        sys.stdout.write(calibration_table(device, cache_path(args.threads, args.provider), width=output_width()))
    for message in device.calibration.warnings if device.calibration else ():
        warn(message)
    return 0
