"""Benchmark: predicted against measured latency on this machine, for the zoo and onnx's bundled light models.

For each model: the whole-model latency measured with onnxruntime at its default optimization level, the
machine's speed relative to its calibration (a reference block timed at both moments; 1.00 = unchanged), the
prediction on the calibrated host profile (onnxruntime's optimized graph, per-class ceilings, memory levels),
the per-kernel agreement (Spearman rank correlation, median absolute relative error), and the same per-kernel
figures for the plain single-peak roofline of the exported graph under the same calibrated peak and DRAM
bandwidth, for reference. Targets: model latency within 10% for at least 90% of the models, per-kernel
Spearman >= 0.9 and median absolute error <= 25%. Nothing here is a test: the numbers are this machine's.

Whole-model samples are taken in rounds: the first with each model's validation, the others cycling through
all the models again, so that each model is measured at several moments minutes apart instead of in one window
of seconds. Each round is read like a calibration pass: its fast estimate (the mean of its fastest eighth of
samples) sets aside the moments other work took within the window; "measured" is the median of the rounds'
fast estimates, and "rounds" how far apart they lay ((max - min) / min), the measurement's own noise.

A shared machine also drifts between its calibration and the measurements, in phases of minutes that move
every model alike. The calibration's reference block is timed between every round's samples, so each round
has the machine's speed relative to its calibration ("speed", the median over rounds); "at cal." reads every
round at the calibrated speed (its fast estimate times its speed) and takes their median, and "error" compares
the prediction with that, as validate compares the prediction scaled to the measurement's speed. "uncorr." is
the error against the measured latency as it is, "vs med" against the median of all samples read at the
calibrated speed.

usage: python tools/accuracy.py [--threads 1,2] [--models zoo:resnet18,light:squeezenet] [--repeat 32] [--runs 10]
                               [--spread 8] [--rounds 3] [--recalibrate] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ZOO = ("resnet18", "resnet34", "resnet50", "vgg16", "alexnet", "mobilenetv2", "unet", "vit_b_16", "conv2d_kernel")
LIGHT = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)


def model_sources(
    spec: str | None, zoo: tuple[str, ...] = ZOO, light: tuple[str, ...] = LIGHT
) -> list[tuple[str, str]]:
    """(label, source) pairs: zoo:NAME as is, light:NAME as the onnx package's bundled file (one that this onnx
    lacks is left out); without ``spec``, the models of ``zoo`` and ``light``."""
    import onnx

    light_dir = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    names = spec.split(",") if spec else [f"zoo:{n}" for n in zoo] + [f"light:{n}" for n in light]
    out = []
    for name in names:
        if name.startswith("light:"):
            path = light_dir / f"light_{name[len('light:') :]}.onnx"
            if path.exists():
                out.append((name, str(path)))
        else:
            out.append((name, name))
    return out


@dataclass
class Row:
    """One model's validation (round one) and the whole-model samples of every round."""

    label: str
    source: str
    validation: Any
    plain: Any
    rounds: list[list[float]] = field(default_factory=list)
    speeds: list[float | None] = field(default_factory=list)  # each round's machine speed over its calibration

    @property
    def samples(self) -> list[float]:
        return [s for r in self.rounds for s in r]

    @property
    def round_estimates(self) -> list[float]:
        """Each round's fast estimate (the mean of its fastest eighth)."""
        from onnxroof.ort.measure import fast_estimate

        return [fast_estimate(r) for r in self.rounds]

    @property
    def measured_s(self) -> float:
        """The model's measured latency: the median of its rounds' fast estimates."""
        return statistics.median(self.round_estimates)

    @property
    def at_calibrated_speed_s(self) -> float | None:
        """The median of the rounds' fast estimates, each times the machine's speed in its round relative to the
        calibration: the latency the measurements imply for the machine as calibrated (None without speeds)."""
        return self._at_calibrated_speed(self.round_estimates)

    @property
    def compared_s(self) -> float:
        """What the prediction is compared with: the measured latency at the calibrated speed where every round
        has a speed, else the measured latency as it is."""
        return self.at_calibrated_speed_s or self.measured_s

    @property
    def compared_median_s(self) -> float:
        """The median of all samples, read the same way: each round's median at the calibrated speed, their median
        (the plain median of all samples without speeds)."""
        at_speed = self._at_calibrated_speed([statistics.median(r) for r in self.rounds])
        return at_speed or statistics.median(self.samples)

    def _at_calibrated_speed(self, per_round: list[float]) -> float | None:
        if not self.speeds or any(s is None for s in self.speeds) or len(self.speeds) != len(self.rounds):
            return None
        return statistics.median(e * s for e, s in zip(per_round, self.speeds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--threads", default="1,2", help="thread counts, comma separated (each calibrated first if needed)"
    )
    parser.add_argument("--models", default=None, help="comma-separated zoo:NAME / light:NAME (default: all)")
    # 32 samples over 8 s: the fastest eighth is four samples a quarter of a second apart or more, so that a
    # slow phase of a shared machine lasting a few seconds cannot set a round's estimate alone.
    parser.add_argument("--repeat", type=int, default=32, help="whole-model timing samples per model and round")
    parser.add_argument("--spread", type=float, default=8.0, help="seconds each round's samples are spread over")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of whole-model samples, cycling through the models"
    )
    parser.add_argument("--recalibrate", action="store_true", help="calibrate each thread count afresh first")
    parser.add_argument("--runs", type=int, default=10, help="profiled runs per model")
    parser.add_argument(
        "--json", metavar="FILE", help="also write every model's prediction and samples per round to FILE"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")

    sys.path.insert(0, str(ROOT))
    from onnxroof.ort.calibrate import host_device

    warnings.simplefilter("ignore")
    dump: dict[str, Any] = {}
    for threads in [int(t) for t in args.threads.split(",") if t]:
        device = host_device(threads, recalibrate=args.recalibrate)
        rows = _measured_rows(model_sources(args.models), device, threads, args)
        _say()
        calibration = device.calibration
        cpu = calibration.cpu if calibration is not None else "unknown CPU"
        print(
            f"\n{device.name} [{device.key}], {threads} thread(s), onnxruntime optimization level all, "
            f"{args.rounds} round(s) of {args.repeat} samples over {args.spread:g} s"
        )
        print(f"CPU: {cpu}; calibrated {calibration.date if calibration is not None else 'never'}")
        _print_table(rows)
        dump[str(threads)] = {
            "device": device.key,
            "cpu": cpu,
            "calibrated": calibration.date if calibration is not None else None,
            "network_factor": device.network_factor.value if device.network_factor is not None else None,
            "models": [row_dict(r) for r in rows],
        }
        if args.json:  # rewritten after each thread count, so that an interrupted run keeps what it finished
            from onnxroof import atomic

            atomic.write_text(args.json, json.dumps(dump, indent=1) + "\n")
    return 0


def row_dict(row: Row) -> dict[str, Any]:
    """One model's line of the JSON dump: its prediction, its measurement read three ways, the machine's speed per
    round, the per-kernel agreement and every round's samples."""
    from onnxroof.ort.agreement import relative_error

    v = row.validation
    at_speed = row.at_calibrated_speed_s
    return {
        "model": row.label,
        "predicted_time_s": v.predicted_time_s,
        "measured_time_s": row.measured_s,
        "measured_at_calibrated_speed_s": at_speed,
        "error": relative_error(v.predicted_time_s, row.compared_s),
        "uncorrected_error": relative_error(v.predicted_time_s, row.measured_s),
        "machine_speed": v.machine_speed,
        "round_speeds": row.speeds,
        "kernel_agreement": v.agreement.to_dict(),
        "rounds_samples_s": row.rounds,
    }


def _measured_rows(sources: list[tuple[str, str]], device: Any, threads: int, args: argparse.Namespace) -> list[Row]:
    """Validate every model (round one), then time them all again, round after round."""
    from onnxroof.api import analyze
    from onnxroof.ort.measure import measure
    from onnxroof.ort.reference import ReferenceSampler
    from onnxroof.ort.sessions import runnable_model
    from onnxroof.ort.validate import compare, validate

    rows: list[Row] = []
    for label, source in sources:
        _say(f"{threads} thread(s), round 1/{args.rounds}: validating {label}")
        try:
            v = validate(source, device, threads=threads, repeat=args.repeat, runs=args.runs, spread_s=args.spread)
        except Exception as exc:  # a model this onnxruntime cannot run: say so and go on
            print(f"{label:<20} failed: {str(exc).splitlines()[0][:70]}")
            continue
        plain = compare(
            analyze(source, device, as_exported=True), v.profile, engine_graph=False, speed=v.machine_speed or 1.0
        )
        rows.append(Row(label, source, v, plain, [list(v.measurement.samples_s)], [v.machine_speed]))
    runnables: dict[str, Any] = {}
    calibrated_time = device.calibration.reference_time_s if device.calibration is not None else None
    for round_no in range(2, args.rounds + 1):
        for row in rows:
            _say(f"{threads} thread(s), round {round_no}/{args.rounds}: timing {row.label}")
            runnable = runnables.setdefault(row.label, runnable_model(row.source))
            reference = ReferenceSampler(threads) if calibrated_time else None
            timing = measure(
                runnable,
                threads=threads,
                repeat=args.repeat,
                spread_s=args.spread,
                between=reference.sample if reference is not None else None,
            )
            row.rounds.append(list(timing.samples_s))
            row.speeds.append(reference.speed(calibrated_time) if reference is not None and calibrated_time else None)
    return rows


def _print_table(rows: list[Row]) -> None:
    """One line per model, then the targets' figures over all of them."""
    from onnxroof.ort.agreement import agreement, relative_error
    from onnxroof.ort.validate import scored

    header = (
        f"{'model':<20} {'measured':>9} {'speed':>5} {'at cal.':>9} {'predicted':>9} {'error':>7} {'uncorr.':>7} "
        f"{'vs med':>7} {'rounds':>6} {'kernels':>7} {'rho':>6} {'med|e|':>7} | {'plain rho':>9} {'plain med|e|':>12}"
    )
    print(header)
    print("-" * len(header))
    errors, uncorrected, median_errors, rhos, medians, pooled_p, pooled_m, plain_medians = (
        [],
        [],
        [],
        [],
        [],
        [],
        [],
        [],
    )
    fmt = lambda x, spec: format(x, spec) if x is not None else "n/a"  # noqa: E731
    for row in rows:
        v = row.validation
        per_round = row.round_estimates
        measured, at_speed = row.measured_s, row.at_calibrated_speed_s
        error = relative_error(v.predicted_time_s, row.compared_s)
        median_error = relative_error(v.predicted_time_s, row.compared_median_s)
        apart = max(per_round) / min(per_round) - 1
        plain_mapped = scored(row.plain, engine_graph=False)
        plain_stats = agreement([k.predicted_time_s for k in plain_mapped], [k.measured_time_s for k in plain_mapped])
        s = v.agreement
        errors.append(error)
        uncorrected.append(relative_error(v.predicted_time_s, measured))
        median_errors.append(median_error)
        rhos.append(s.spearman)
        medians.append(s.median_abs_error)
        plain_medians.append(plain_stats.median_abs_error)
        counted = scored(v.kernels, engine_graph=True)
        pooled_p += [k.predicted_time_s for k in counted]
        pooled_m += [k.measured_time_s for k in counted]
        speed = statistics.median(row.speeds) if at_speed else None
        at_cal = f"{at_speed * 1e3:.2f}ms" if at_speed else "n/a"
        print(
            f"{row.label:<20} {measured * 1e3:>7.2f}ms {fmt(speed, '5.2f'):>5} {at_cal:>9} "
            f"{v.predicted_time_s * 1e3:>7.2f}ms {error:>+7.1%} {uncorrected[-1]:>+7.1%} {median_error:>+7.1%} "
            f"{apart:>6.1%} {s.count:>7} {fmt(s.spearman, '6.3f'):>6} {fmt(s.median_abs_error, '7.1%'):>7} | "
            f"{fmt(plain_stats.spearman, '9.3f'):>9} {fmt(plain_stats.median_abs_error, '12.1%'):>12}"
        )
    if not errors:
        return
    within = sum(abs(e) <= 0.10 for e in errors)
    pooled = agreement(pooled_p, pooled_m)
    print("-" * len(header))
    print(
        f"models within 10% of measured: {within / len(errors):.0%} ({within}/{len(errors)}; target >= 90%); "
        f"against the median of all samples: {sum(abs(e) <= 0.10 for e in median_errors)}/{len(median_errors)}; "
        f"uncorrected for the machine's speed: {sum(abs(e) <= 0.10 for e in uncorrected)}/{len(uncorrected)}"
    )
    print(
        f"per-kernel Spearman: median over models {statistics.median([r for r in rhos if r is not None]):.3f}, "
        f"pooled over all kernels {pooled.spearman:.3f} (target >= 0.9)"
    )
    print(
        f"per-kernel median |error|: median over models "
        f"{statistics.median([m for m in medians if m is not None]):.1%}, "
        f"pooled {pooled.median_abs_error:.1%} (target <= 25%); plain roofline: "
        f"{statistics.median([m for m in plain_medians if m is not None]):.1%}"
    )


def _say(text: str = "") -> None:
    """A progress line on stderr: overwritten by the next one on a terminal, a line of its own elsewhere."""
    if sys.stderr.isatty():
        print(f"\r\033[K{text}", end="", file=sys.stderr, flush=True)
    elif text:
        print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
