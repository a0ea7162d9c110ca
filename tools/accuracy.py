"""Benchmark: predicted against measured latency on this machine, for the zoo and onnx's bundled light models.

For each model: the whole-model latency measured with onnxruntime at its default optimization level (samples
spread over a few seconds; the mean of their fastest eighth, the idle-machine estimate calibration also uses,
with the error against the plain median of all samples next to it), the machine's speed relative to its
calibration (a reference MatMul timed at both moments; 1.00 = unchanged), the prediction on the calibrated
host profile (onnxruntime's optimized graph, per-class ceilings, memory levels),
the per-kernel agreement (Spearman rank correlation, median absolute relative error), and the same per-kernel
figures for the plain single-peak roofline of the exported graph under the same calibrated peak and DRAM
bandwidth, for reference. Targets: model latency within 10% for at least 90% of the models, per-kernel
Spearman >= 0.9 and median absolute error <= 25%. Nothing here is a test: the numbers are this machine's.

usage: python tools/accuracy.py [--threads 1,2] [--models zoo:resnet18,light:squeezenet] [--repeat 32] [--runs 10]
                               [--spread 8] [--recalibrate]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ("resnet18", "resnet34", "resnet50", "vgg16", "alexnet", "mobilenetv2", "unet", "vit_b_16", "conv2d_kernel")
LIGHT = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512")


def model_sources(spec: str | None) -> list[tuple[str, str]]:
    """(label, source) pairs: zoo:NAME as is, light:NAME as the onnx package's bundled file."""
    import onnx

    light_dir = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    names = spec.split(",") if spec else [f"zoo:{n}" for n in ZOO] + [f"light:{n}" for n in LIGHT]
    out = []
    for name in names:
        if name.startswith("light:"):
            path = light_dir / f"light_{name[len('light:'):]}.onnx"
            if path.exists():
                out.append((name, str(path)))
        else:
            out.append((name, name))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,2", help="thread counts, comma separated (each calibrated first if needed)")
    parser.add_argument("--models", default=None, help="comma-separated zoo:NAME / light:NAME (default: all)")
    # 32 samples over 8 s: with 16 over 4 s, a slow phase of the shared machine lasting the whole window set the
    # fastest eighth (2 samples) of a few models 15-25% slow; rerun with these, the same models agreed within 2%.
    parser.add_argument("--repeat", type=int, default=32, help="whole-model timing samples per model")
    parser.add_argument("--spread", type=float, default=8.0, help="seconds the whole-model samples are spread over")
    parser.add_argument("--recalibrate", action="store_true", help="calibrate each thread count afresh first")
    parser.add_argument("--runs", type=int, default=10, help="profiled runs per model")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from onnxroof.agreement import agreement
    from onnxroof.analysis import analyze
    from onnxroof.calibrate import host_device
    from onnxroof.devices.resolve import resolve_device
    from onnxroof.validate import compare, scored, validate

    warnings.simplefilter("ignore")
    for threads in [int(t) for t in args.threads.split(",") if t]:
        device = host_device(threads, recalibrate=True) if args.recalibrate else resolve_device("host", threads=threads)
        print(f"\n{device.name} [{device.key}], {threads} thread(s), onnxruntime optimization level all")
        header = (f"{'model':<20} {'measured':>9} {'predicted':>9} {'error':>7} {'vs med':>7} {'kernels':>7} {'rho':>6} "
                  f"{'med|e|':>7} {'speed':>6} | {'plain rho':>9} {'plain med|e|':>12}")
        print(header)
        print("-" * len(header))
        errors, median_errors, rhos, medians, pooled_p, pooled_m, plain_medians = [], [], [], [], [], [], []
        for label, source in model_sources(args.models):
            try:
                v = validate(source, device, threads=threads, repeat=args.repeat, runs=args.runs, spread_s=args.spread)
            except Exception as exc:  # a model this onnxruntime cannot run: say so and go on
                print(f"{label:<20} failed: {str(exc).splitlines()[0][:70]}")
                continue
            plain = compare(analyze(source, device, as_exported=True), v.profile, engine_graph=False)
            plain_mapped = scored(plain, engine_graph=False)
            plain_stats = agreement([k.predicted_time_s for k in plain_mapped], [k.measured_time_s for k in plain_mapped])
            s = v.agreement
            errors.append(v.model_error)
            median_errors.append(v.median_error)
            rhos.append(s.spearman)
            medians.append(s.median_abs_error)
            plain_medians.append(plain_stats.median_abs_error)
            counted = scored(v.kernels, engine_graph=True)
            pooled_p += [k.predicted_time_s for k in counted]
            pooled_m += [k.measured_time_s for k in counted]
            fmt = lambda x, spec: format(x, spec) if x is not None else "n/a"  # noqa: E731
            print(
                f"{label:<20} {v.measured_time_s * 1e3:>7.2f}ms {v.predicted_time_s * 1e3:>7.2f}ms {v.model_error:>+7.1%} "
                f"{v.median_error:>+7.1%} {s.count:>7} {fmt(s.spearman, '6.3f'):>6} {fmt(s.median_abs_error, '7.1%'):>7} {fmt(v.machine_speed, '6.2f'):>6} | "
                f"{fmt(plain_stats.spearman, '9.3f'):>9} {fmt(plain_stats.median_abs_error, '12.1%'):>12}"
            )
        if not errors:
            continue
        within = sum(abs(e) <= 0.10 for e in errors) / len(errors)
        pooled = agreement(pooled_p, pooled_m)
        print("-" * len(header))
        print(f"models within 10% of measured: {within:.0%} ({sum(abs(e) <= 0.10 for e in errors)}/{len(errors)}; target >= 90%); "
              f"against the median of all samples: {sum(abs(e) <= 0.10 for e in median_errors)}/{len(median_errors)}")
        print(f"per-kernel Spearman: median over models {statistics.median([r for r in rhos if r is not None]):.3f}, "
              f"pooled over all kernels {pooled.spearman:.3f} (target >= 0.9)")
        print(f"per-kernel median |error|: median over models {statistics.median([m for m in medians if m is not None]):.1%}, "
              f"pooled {pooled.median_abs_error:.1%} (target <= 25%); plain roofline: "
              f"{statistics.median([m for m in plain_medians if m is not None]):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
