"""Benchmark: predicted against measured peak memory of the zoo at batch 1 and 8, on this machine.

Predicted: onnxroof's estimate (onnxroof.predict.memory) on the graph onnxruntime runs here (its optimized graph,
in its order): weights plus the peak of live activations, inputs and outputs. Measured: what a run adds to a fresh
process's resident set at its peak (``onnxroof measure --memory``), with onnxruntime's arena and memory pattern on
(its default) and with both off, split into what creating the session adds ("session": the weights as onnxruntime
holds them, with its copies and buffers) and what the runs add on top ("run adds": activations, the arena).
"Process": the predicted peak of the process, from the graph's estimate and this host's memory factors
(onnxroof.ort.memory_calibration, calibrated on synthetic graphs and cached): the session's constant, the
weights by the kind of op reading them (or "large", 32 MiB or more) times the kind's factor, and the
activation peak times its factor. Goal: the prediction within 20% of the measurement for at least 80% of the
(model, batch) pairs. Nothing here is a test: the numbers are this machine's, and the CPU model is printed with them.

usage: python tools/memory_accuracy.py [--models resnet18,unet] [--batches 1,8] [--json FILE]
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

ZOO = ("resnet18", "resnet50", "mobilenetv2", "unet", "alexnet", "vgg16", "vit_b_16", "conv2d_kernel")
GOAL = 0.20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated zoo models")
    parser.add_argument("--batches", default="1,8", help="comma-separated batch sizes")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    import model_zoo
    from onnxroof.api import get_device
    from onnxroof.ort.calibrate import cpu_model
    from onnxroof.ort.memory import measure_peak_memory
    from onnxroof.ort.memory_calibration import host_memory_factors
    from onnxroof.ort.optimized import engine_graph
    from onnxroof.predict.memory import estimate_memory
    from onnxroof.predict.process_memory import process_peak_bytes, weights_by_kind

    host = get_device("host")
    factors = host_memory_factors()
    print(f"CPU: {cpu_model()}; onnxruntime's CPU provider, 1 thread; profile {host.key}")
    f = factors
    print(
        f"memory factors: constant {f.constant.value / 1e6:.1f}M, conv {f.conv.value:.2f}, "
        f"gemm {f.gemm.value:.2f}, matmul {f.matmul.value:.2f}, large {f.large.value:.2f}, "
        f"activation {f.activation.value:.2f}"
    )
    print(
        f"{'model':16}{'batch':>6}{'weights':>10}{'session':>10}{'peak act.':>11}{'run adds':>10}"
        f"{'predicted':>11}{'measured':>11}{'error':>8}{'no arena':>11}{'error':>8}{'footprint':>11}"
        f"{'process':>10}{'error':>8}"
    )
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            model = model_zoo.build(name, batch=batch)
            graph = engine_graph(model, host)
            estimate = estimate_memory(graph)
            process = process_peak_bytes(estimate, weights_by_kind(graph), factors)
            default = measure_peak_memory(model)
            plain = measure_peak_memory(model, arena=False, pattern=False)
            predicted = estimate.total_bytes
            row = {
                "model": name,
                "batch": batch,
                "weights_bytes": estimate.weights_bytes,
                "peak_activation_bytes": estimate.peak_activation_bytes,
                "predicted_bytes": predicted,
                "footprint_bytes": estimate.footprint_bytes,
                "measured_bytes": default.peak_added_bytes,
                "measured_session_bytes": default.session_bytes,
                "measured_run_added_bytes": default.run_added_bytes,
                "measured_no_arena_bytes": plain.peak_added_bytes,
                "error": predicted / default.peak_added_bytes - 1,
                "error_no_arena": predicted / plain.peak_added_bytes - 1,
                "process_bytes": process,
                "error_process": process / default.peak_added_bytes - 1,
            }
            rows.append(row)
            print(
                f"{name:16}{batch:>6}{_mb(estimate.weights_bytes):>10}{_mb(default.session_bytes):>10}"
                f"{_mb(estimate.peak_activation_bytes):>11}{_mb(default.run_added_bytes):>10}{_mb(predicted):>11}{_mb(default.peak_added_bytes):>11}{row['error']:>+8.1%}"
                f"{_mb(plain.peak_added_bytes):>11}{row['error_no_arena']:>+8.1%}{_mb(estimate.footprint_bytes):>11}"
                f"{_mb(process):>10}{row['error_process']:>+8.1%}",
                flush=True,
            )
    within = sum(abs(r["error"]) <= GOAL for r in rows)
    within_plain = sum(abs(r["error_no_arena"]) <= GOAL for r in rows)
    within_process = sum(abs(r["error_process"]) <= GOAL for r in rows)
    print(
        f"\nwithin 20% of the measured peak: {within}/{len(rows)} with the arena (goal 80%), "
        f"{within_plain}/{len(rows)} without it; the process peak predicted: {within_process}/{len(rows)} with "
        "the arena"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"cpu": cpu_model(), "factors": factors.to_dict(), "rows": rows}, indent=2)
        )
    return 0


def _mb(value: float) -> str:
    return f"{value / 1e6:.1f}M"


if __name__ == "__main__":
    sys.exit(main())
