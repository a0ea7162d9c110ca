"""Benchmark: how far one calibration's draw moves the predictions, held against one set of measurements.

Calibrates this host several times in a row (``--calibrations``, nothing cached: the profile ``--device host``
uses is left as it is), predicts every model on each profile, and prints per model its prediction on each and how
far apart they lie ((max - min) / min). With ``--measured`` (the JSON ``tools/accuracy.py --json`` wrote at the same
thread count, on this machine) each profile's error against those measurements is printed too, with how many
models lie within 10%.

A shared machine's measurements of the benchmark set move little from one hour to the next when each model is read
as tools/accuracy.py reads it (the median of its quietest round), while each calibration reads its ceilings and
network factor in the two minutes it runs: this tells the calibration's share of an accuracy run's error from the
measurement's, in minutes instead of an accuracy run's half hour. Nothing here is a test: the numbers are this
machine's, at one moment.

usage: python tools/calibration_spread.py [--threads 1] [--calibrations 3] [--measured runs.json]
                                          [--models bench:resnet18,zoo:resnet50] [--bench-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ProfileLine:
    """One calibration's predictions of the set against the measurements: its network factor, how many of the
    ``models`` with a measured time lie within 10% of it, and its median error (None without measurements)."""

    factor: float | None
    models: int
    within: int | None
    median_error: float | None


def profile_lines(
    predicted: dict[str, list[float]], measured: dict[str, float], factors: list[float | None]
) -> list[ProfileLine]:
    """Per calibration (the i-th prediction of each model in ``predicted``), its factor and, over the models that
    have a measured time, its count within 10% and its median relative error."""
    lines = []
    for i, factor in enumerate(factors):
        errors = [times[i] / measured[label] - 1 for label, times in predicted.items() if label in measured]
        lines.append(
            ProfileLine(
                factor,
                len(errors),
                sum(abs(e) <= 0.10 for e in errors) if errors else None,
                statistics.median(errors) if errors else None,
            )
        )
    return lines


def spread(times: list[float]) -> float:
    """How far apart a model's predictions lie: (max - min) / min."""
    return max(times) / min(times) - 1


def set_shift(predicted: dict[str, list[float]], first: int, second: int) -> float:
    """The median over models of their prediction on calibration ``second`` over that on ``first``: how far one
    calibration moved the whole set against another."""
    return statistics.median(times[second] / times[first] for times in predicted.values())


def _accuracy_tool() -> Any:
    """tools/accuracy.py, for its benchmark-set helpers (it is a script, loaded from its file)."""
    spec = importlib.util.spec_from_file_location("onnxroof_accuracy_tool", Path(__file__).with_name("accuracy.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="the thread count to calibrate at (default 1)")
    parser.add_argument("--calibrations", type=int, default=3, help="calibrations in a row (default 3)")
    parser.add_argument(
        "--measured", type=Path, default=None, help="a tools/accuracy.py JSON of this machine: its models, measured"
    )
    parser.add_argument(
        "--models", default=None, help="comma-separated zoo:NAME / light:NAME / bench:NAME (default: --measured's)"
    )
    parser.add_argument(
        "--bench-dir", type=Path, default=None, help="the benchmark set's folder (default: benchmark-models/, cache)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write each calibration's factor and predictions")
    args = parser.parse_args(argv)
    if args.calibrations < 2:
        parser.error("--calibrations must be 2 or more: a spread needs two")
    measured: dict[str, float] = {}
    if args.measured is not None:
        if not args.measured.is_file():
            parser.error(f"{args.measured}: no such file (write one with tools/accuracy.py --json FILE)")
        runs = json.loads(args.measured.read_text()).get(str(args.threads))
        if runs is None:
            parser.error(f"{args.measured} has no run at {args.threads} thread(s)")
        measured = {m["model"]: m["measured_time_s"] for m in runs["models"]}
    labels = args.models or ",".join(measured)
    if not labels:
        parser.error("name the models: --measured FILE or --models")

    sys.path.insert(0, str(ROOT))
    from onnxroof.api import analyze
    from onnxroof.ort.calibrate import calibrate

    warnings.simplefilter("ignore")
    accuracy = _accuracy_tool()
    folder = args.bench_dir or accuracy.bench_dir()
    manifest = accuracy.read_manifest(folder) if "bench:" in labels else []
    sources = accuracy.model_sources(labels, manifest=manifest, folder=folder)
    predicted: dict[str, list[float]] = {label: [] for label, _ in sources}
    factors: list[float | None] = []
    stamps: list[str] = []
    for i in range(args.calibrations):
        print(f"calibration {i + 1}/{args.calibrations} at {args.threads} thread(s)", file=sys.stderr, flush=True)
        device = calibrate(threads=args.threads)
        factors.append(device.network_factor.value if device.network_factor is not None else None)
        stamps.append(device.calibration.date if device.calibration is not None else "")
        for label, source in sources:
            predicted[label].append(analyze(source, device).totals.predicted_time_s)

    cpu = device.calibration.cpu if device.calibration is not None else "unknown CPU"
    print(f"CPU: {cpu}; {args.threads} thread(s); {args.calibrations} calibrations, {stamps[0]} to {stamps[-1]}")
    width = max([20] + [len(label) for label in predicted])
    heads = " ".join(f"{f'cal. {i + 1}':>9}" for i in range(args.calibrations))
    print(f"{'model':<{width}} {'measured':>9} {heads} {'spread':>7}")
    for label, times in predicted.items():
        shown = f"{measured[label] * 1e3:>7.2f}ms" if label in measured else f"{'-':>9}"
        cells = " ".join(f"{t * 1e3:>7.2f}ms" for t in times)
        print(f"{label:<{width}} {shown} {cells} {spread(times):>7.1%}")
    print(f"median spread over models: {statistics.median(spread(t) for t in predicted.values()):.1%}")
    for i, line in enumerate(profile_lines(predicted, measured, factors)):
        shift = set_shift(predicted, 0, i)
        against = (
            f"; {line.within}/{line.models} within 10% of measured, median error {line.median_error:+.1%}"
            if line.median_error is not None
            else ""
        )
        factor = f"{line.factor:.3g}" if line.factor is not None else "n/a"
        head = f"calibration {i + 1} ({stamps[i]}): network factor {factor}"
        print(f"{head}, the set x{shift:.3f} of calibration 1{against}")
    if args.json:
        from onnxroof import atomic

        dump: dict[str, Any] = {"cpu": cpu, "threads": args.threads, "calibrated": stamps}
        dump |= {"network_factors": factors, "predicted_time_s": predicted}
        atomic.write_text(args.json, json.dumps(dump, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
