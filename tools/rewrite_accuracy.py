"""Benchmark: predicted against measured speedup of every rewrite, on the zoo and onnx's bundled light models.

For each model, every rewrite that ``onnxroof explore`` tries (separable convolutions, the LWU-Net strides, fp16,
dynamic and static int8) is applied; each one that applies is predicted on this machine's calibrated profile
(``--device host``: the graph onnxruntime runs, with its Casts and integer kernels) and then timed here against
the original, alternating the two (onnxroof.whatif.compare.time_pair). The predicted speedup is set against the
measured one: direction right (both on the same side of 1, or no measured change beyond 3% with a prediction
within 10% of 1) and size right (within 20%). Goals: direction right for at least 90% of the pairs, size within
20% for at least 75%. Nothing here is a test: the numbers are this machine's, and the CPU model is printed with
them.

usage: python tools/rewrite_accuracy.py [--models zoo:resnet18,light:squeezenet] [--rewrites fp16,int8-dynamic]
                                        [--threads 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Models small enough to time every rewrite of in minutes at one thread.
ZOO = ("resnet18", "mobilenetv2", "unet", "alexnet", "conv2d_kernel")
LIGHT = ("squeezenet", "shufflenet", "inception_v1", "resnet50", "zfnet512")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None, help="comma-separated zoo:NAME / light:NAME (default: all)")
    parser.add_argument("--rewrites", default=None, help="comma-separated rewrites (default: every one)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)

    from onnxroof.api import get_device
    from onnxroof.ort.calibrate import cpu_model
    from onnxroof.whatif.explore import CANDIDATES, explore
    from tools.accuracy import model_sources

    rewrites = tuple(args.rewrites.split(",")) if args.rewrites else tuple(CANDIDATES)
    device = get_device("host", args.threads)
    print(f"CPU: {cpu_model()}; {args.threads} thread(s); profile {device.key}", flush=True)
    print(HEADER + "  (before/after: measured ms; pred: predicted speedup here; meas: measured)")
    rows: list[dict[str, Any]] = []
    failures = 0
    for label, source in model_sources(args.models, ZOO, LIGHT):
        print(f"{label} ...", file=sys.stderr, flush=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = explore(source, "host", measure=len(rewrites), threads=args.threads, only=rewrites)
        except Exception as exc:  # one model's failure is reported and the others still run
            print(f"  {label:22} failed: {type(exc).__name__}: {exc}", flush=True)
            failures += 1
            continue
        for c in found.candidates:
            if c.refused:
                print(f"  {label:22} {c.name:13} does not apply: {c.refused}", file=sys.stderr)
                continue
            data = c.to_dict()
            rows.append({"model": label, **data})
            print(_line(label, data), flush=True)
    judged = [r for r in rows if r.get("measured_speedup") is not None]
    direction = sum(bool(r["direction_right"]) for r in judged)
    size = sum(bool(r["size_right"]) for r in judged)
    print()
    if judged:
        print(
            f"direction right: {direction}/{len(judged)} ({100 * direction / len(judged):.0f}%, goal 90%); "
            f"size within 20%: {size}/{len(judged)} ({100 * size / len(judged):.0f}%, goal 75%)"
        )
    if failures:
        print(f"{failures} model(s) failed: see above")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_model(), "threads": args.threads, "rows": rows}, indent=2))
    return 0


HEADER = f"{'model':22} {'rewrite':13} {'before':>9} {'after':>9} {'pred':>7} {'meas':>7}  direction size"


def _line(label: str, r: dict[str, Any]) -> str:
    def ms(v: float | None) -> str:
        return f"{v * 1e3:.2f}" if v is not None else "-"

    def x(v: float | None) -> str:
        return f"{v:.2f}x" if v is not None else "-"

    verdict = ""
    if "direction_right" in r:
        verdict = f"{'right' if r['direction_right'] else 'WRONG':9} {'right' if r['size_right'] else 'off'}"
    return (
        f"{label:22} {r['name']:13} {ms(r['measured_before_s']):>9} {ms(r['measured_after_s']):>9} "
        f"{x(r['host_predicted_speedup']):>7} {x(r['measured_speedup']):>7}  {verdict}"
    )


if __name__ == "__main__":
    sys.exit(main())
