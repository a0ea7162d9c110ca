"""Benchmark: predicted against measured latency on this machine, for the zoo and onnx's bundled light models.

For each model: the whole-model latency measured with onnxruntime at its default optimization level, the
machine's speed relative to its calibration (a reference block timed at both moments; 1.00 = unchanged), the
prediction on the calibrated host profile (onnxruntime's optimized graph, per-class ceilings, memory levels),
the per-kernel agreement (Spearman rank correlation, median absolute relative error), and the same per-kernel
figures for the plain single-peak roofline of the exported graph under the same calibrated peak and DRAM
bandwidth, for reference. Targets: model latency within 10% for at least 90% of the models at 1 thread and 80%
at 2, per-kernel Spearman >= 0.9 and median absolute error <= 15%. Nothing here is a test: the numbers are this
machine's.

Each model is first validated (its prediction, and its kernels profiled against their predictions); then the
whole model is timed in rounds cycling through all the models, so that each model is measured at several moments
minutes apart instead of in one window of seconds. A round times a model as a user's own loop does: a fresh
session with onnxruntime's defaults (its pool spinning between runs), a few warm-up runs, then back-to-back
single runs, at least --repeat of them and at least --loop-seconds long. "measured" is the median of a round's
runs in the quietest round (the lowest of the rounds' medians); "error" compares the prediction with it.
"rounds" is how far apart the rounds' medians lay ((max - min) / min), the measurement's own noise; "fast" is the
median of the rounds' fast estimates (the mean of each round's fastest eighth), the machine's best moments.

The kernels are profiled again after each round's loop (--runs profiled runs), and a model's per-kernel figures
are read on the quietest of its profiles (the validation's and one per round), the one whose kernels' medians sum
lowest, as its latency is read on its quietest round, and compared with the prediction as calibrated, as the
latency's "error" is: a phase of a shared machine that slows the memory-bound kernels twice as much as the rest
would otherwise decide them. The validation's own figure (its one profile, the prediction scaled to the machine's
speed while it timed the model) is printed beside it and kept in the JSON.

A shared machine also drifts between its calibration and the measurements, in phases of minutes that move
every model alike. The calibration's reference block is timed right after each model's loop, so each round
has the machine's speed relative to its calibration ("speed", the median over rounds); "at cal." reads every
round's median at the calibrated speed (times its speed) and takes their median, and the error beside it
compares the prediction with that, as validate compares the prediction scaled to the measurement's speed.

``--provider cuda`` runs it all on a GPU: the host profile is then the GPU's roofline (``onnxroof calibrate
--provider cuda``), and the models are timed through the CUDA provider. onnxruntime's profiler times a CUDA kernel
on the host as it launches it, so there the per-kernel figures say less than the model's latency.

The benchmark set (``--set benchmark``, or ``bench:NAME`` among --models) is the folder tools/export_models.py
writes: models users run, exported by torch's two exporters, listed with their family in its manifest.json. Every
model has a family (the zoo's and the light models' are below); after the table, one line per family gives its
models, how many are within 10%, their mean error and the median over its models of the per-kernel median
absolute error. Targets for the set: 90% of the models within 10% at 1 thread, no family's mean error beyond
+-7%, per-kernel median absolute error 15% or less.

usage: python tools/accuracy.py [--threads 1,2] [--models zoo:resnet18,light:squeezenet,bench:gpt2] [--repeat 32]
                               [--loop-seconds 2] [--runs 20] [--spread 8] [--rounds 3] [--recalibrate] [--json FILE]
                               [--set default|benchmark|all] [--bench-dir DIR]
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
# The light set's models of 0.05 to 2 ms, built in code (tools/small_models.py): voice-activity detectors with an LSTM
# or GRU behind an If, a keyword spotter's LSTM, tiny MLP and CNN classifiers. Their per-run cost, control flow and
# recurrent steps are much of their time.
SMALL = ("vad_lstm", "vad_gru", "keyword_lstm", "tiny_mlp", "tiny_cnn")
LIGHT += SMALL
# Batches of the reference block timed after each model's loop (about 10 ms each): the fastest of them read the
# machine's speed in that moment, as the calibration read the block.
REFERENCE_BATCHES = 16
# The family of each zoo and light model, as the benchmark set's manifest names them.
FAMILIES = {
    "zoo:resnet18": "resnet",
    "zoo:resnet34": "resnet",
    "zoo:resnet50": "resnet",
    "zoo:vgg16": "other-cnn",
    "zoo:alexnet": "other-cnn",
    "zoo:mobilenetv2": "mobile-cnn",
    "zoo:unet": "segmentation",
    "zoo:vit_b_16": "vision-transformer",
    "zoo:conv2d_kernel": "kernel",
    "light:bvlc_alexnet": "other-cnn",
    "light:densenet121": "other-cnn",
    "light:inception_v1": "other-cnn",
    "light:inception_v2": "other-cnn",
    "light:resnet50": "resnet",
    "light:shufflenet": "mobile-cnn",
    "light:squeezenet": "mobile-cnn",
    "light:vgg19": "other-cnn",
    "light:zfnet512": "other-cnn",
    "light:vad_lstm": "small-recurrent",
    "light:vad_gru": "small-recurrent",
    "light:keyword_lstm": "small-recurrent",
    "light:tiny_mlp": "small-classifier",
    "light:tiny_cnn": "small-classifier",
}
MANIFEST_KEYS = ("name", "family", "exporter", "file", "inputs")


def bench_dir() -> Path:
    """The benchmark set's default folder: ``benchmark-models/`` in onnxroof's cache folder."""
    from onnxroof.ort.calibrate.host import cache_dir

    return cache_dir() / "benchmark-models"


def small_model(name: str) -> Path:
    """The file of one of the SMALL models, built by tools/small_models.py in the cache's small-models/ folder."""
    import importlib.util

    from onnxroof.ort.calibrate.host import cache_dir

    spec = importlib.util.spec_from_file_location("onnxroof_small_models", Path(__file__).with_name("small_models.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.build(name, cache_dir() / "small-models"))


def read_manifest(folder: Path) -> list[dict[str, Any]]:
    """The benchmark set's entries, from ``folder/manifest.json``, each checked for the keys the tools read."""
    path = Path(folder) / "manifest.json"
    if not path.exists():
        raise SystemExit(f"no benchmark set in {folder}: run tools/export_models.py (in an environment with torch)")
    entries = json.loads(path.read_text())["models"]
    for entry in entries:
        missing = [k for k in MANIFEST_KEYS if k not in entry]
        if missing:
            raise SystemExit(f"{path}: entry {entry.get('name', '?')!r} lacks {', '.join(missing)}")
    return entries


def family_of(label: str, manifest: list[dict[str, Any]] | None = None) -> str:
    """A model's family: the manifest's for bench:NAME, the table's for the zoo and light models, else "other"."""
    if label.startswith("bench:"):
        name = label[len("bench:") :]
        for entry in manifest or []:
            if entry["name"] == name:
                return str(entry["family"])
    return FAMILIES.get(label, "other")


def model_sources(
    spec: str | None,
    zoo: tuple[str, ...] = ZOO,
    light: tuple[str, ...] = LIGHT,
    manifest: list[dict[str, Any]] | None = None,
    folder: Path | None = None,
    which: str = "default",
) -> list[tuple[str, str]]:
    """(label, source) pairs: zoo:NAME as is, light:NAME as the onnx package's bundled file (one that this onnx
    lacks is left out) or, for the SMALL models, the file tools/small_models.py builds in the cache's
    small-models/ folder, bench:NAME as the file the manifest gives in ``folder``. Without ``spec``, the set
    ``which`` names: "default" (the models of ``zoo`` and ``light``), "benchmark" (the manifest's) or "all"."""
    import onnx

    light_dir = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    files = {e["name"]: e["file"] for e in manifest or []}
    if spec:
        names = spec.split(",")
    else:
        names = [f"zoo:{n}" for n in zoo] + [f"light:{n}" for n in light] if which in ("default", "all") else []
        names += [f"bench:{n}" for n in files] if which in ("benchmark", "all") else []
    out = []
    for name in names:
        if name.startswith("light:") and name[len("light:") :] in SMALL:
            out.append((name, str(small_model(name[len("light:") :]))))
        elif name.startswith("light:"):
            path = light_dir / f"light_{name[len('light:') :]}.onnx"
            if path.exists():
                out.append((name, str(path)))
        elif name.startswith("bench:"):
            bench = name[len("bench:") :]
            if bench not in files:
                raise SystemExit(f"{name}: not in the benchmark set's manifest")
            out.append((name, str(Path(folder or ".") / files[bench])))
        else:
            out.append((name, name))
    return out


@dataclass(frozen=True)
class FamilyLine:
    """One family's figures after the table."""

    family: str
    models: int
    within: int  # models within 10% of measured
    mean_error: float
    kernel_median: float | None  # the median over its models of their per-kernel median absolute error

    def __str__(self) -> str:
        kernels = format(self.kernel_median, ".1%") if self.kernel_median is not None else "n/a"
        return (
            f"{self.family:<20} {self.models:>3} model(s), {self.within:>3} within 10%, "
            f"mean error {self.mean_error:>+7.1%}, per-kernel median |error| {kernels}"
        )


def family_lines(records: list[tuple[str, float, float | None]]) -> list[FamilyLine]:
    """Per family, from (family, model error, per-kernel median absolute error) records: its models, how many
    lie within 10%, the mean of their (signed) errors and the median of their per-kernel medians. Families in
    order of first appearance."""
    grouped: dict[str, list[tuple[float, float | None]]] = {}
    for family, error, kernel in records:
        grouped.setdefault(family, []).append((error, kernel))
    lines = []
    for family, rows in grouped.items():
        kernels = [k for _, k in rows if k is not None]
        lines.append(
            FamilyLine(
                family,
                len(rows),
                sum(abs(e) <= 0.10 for e, _ in rows),
                statistics.fmean(e for e, _ in rows),
                statistics.median(kernels) if kernels else None,
            )
        )
    return lines


@dataclass(frozen=True)
class ClassLine:
    """One op class over the set: in how many models its kernels ran, its share of a model's kernel time (the mean
    over every model, 0 where it is absent, each model counted alike) and the median over those models of its
    kernels' predicted time over their profiled time."""

    op_class: str
    models: int
    share: float
    median_ratio: float

    def __str__(self) -> str:
        return (
            f"{self.op_class:<22} in {self.models:>3} model(s), {self.share:>6.1%} of a model's kernel time, "
            f"predicted / profiled {self.median_ratio:.2f}"
        )


def class_lines(models: list[dict[str, tuple[float, float]]], min_share: float = 0.01) -> list[ClassLine]:
    """Per op class, from each model's (predicted, profiled) kernel seconds by class: where the set's predictions
    miss, a model's classes weighed by their share of its time so that a small model counts as much as a large
    one. Classes under ``min_share`` of a model's time on average are left out; the largest share first."""
    shares: dict[str, float] = {}
    ratios: dict[str, list[float]] = {}
    for by_class in models:
        total = sum(profiled for _, profiled in by_class.values())
        if total <= 0:
            continue
        for op_class, (predicted, profiled) in by_class.items():
            shares[op_class] = shares.get(op_class, 0.0) + profiled / total / len(models)
            if profiled > 0:
                ratios.setdefault(op_class, []).append(predicted / profiled)
    lines = [
        ClassLine(op_class, len(ratios[op_class]), share, statistics.median(ratios[op_class]))
        for op_class, share in shares.items()
        if share >= min_share and op_class in ratios
    ]
    return sorted(lines, key=lambda line: -line.share)


@dataclass(frozen=True)
class ErrorSplit:
    """Where the set's error lies, medians over its models: their kernels' predicted sum over their profiled sum
    (each kernel's median on the quietest profile), and a run (the quietest round's median) over those profiled
    kernels, what the executor between kernels and a run's jitter add, which the network factor is there to carry.
    A model's error is about the first times the network factor over the second."""

    kernels: float  # median of (predicted kernel sum / profiled kernel sum - 1)
    runs: float  # median of (measured run / profiled kernel sum - 1)

    def __str__(self) -> str:
        return (
            f"where the error lies (medians over models): kernels predicted over profiled {self.kernels:+.1%}, "
            f"a run over its profiled kernels {self.runs:+.1%}"
        )


def error_split(models: list[tuple[float, dict[str, tuple[float, float]]]]) -> ErrorSplit | None:
    """The ErrorSplit of models given as (measured seconds, their (predicted, profiled) kernel seconds by class);
    None without a model whose kernels were profiled."""
    kernels, runs = [], []
    for measured, by_class in models:
        predicted = sum(p for p, _ in by_class.values())
        profiled = sum(q for _, q in by_class.values())
        if profiled > 0:
            kernels.append(predicted / profiled - 1)
            runs.append(measured / profiled - 1)
    return ErrorSplit(statistics.median(kernels), statistics.median(runs)) if kernels else None


@dataclass(frozen=True)
class Profile:
    """One profile of a model's kernels, each compared with its prediction as calibrated: on the engine graph
    (``kernels``) and on the exported graph's plain roofline (``plain``)."""

    kernel_sum_s: float  # the sum of its kernels' medians: lowest in the quietest moment
    kernels: tuple[Any, ...]
    plain: tuple[Any, ...]

    def scored(self, engine_graph: bool = True) -> list[Any]:
        """The kernels the statistics count (validate.scored) of the engine graph's comparison, or the plain one's."""
        from onnxroof.ort.validate import scored

        return scored(self.kernels if engine_graph else self.plain, engine_graph=engine_graph)

    def agreement(self, engine_graph: bool = True) -> Any:
        """The agreement statistics over the scored kernels of the engine graph's comparison, or the plain one's."""
        from onnxroof.ort.agreement import agreement

        counted = self.scored(engine_graph)
        return agreement([k.predicted_time_s for k in counted], [k.measured_time_s for k in counted])


@dataclass
class Row:
    """One model's validation, the whole-model samples of every round and the kernels' profiles (the
    validation's first, then one per round)."""

    label: str
    source: str
    validation: Any
    rounds: list[list[float]] = field(default_factory=list)
    speeds: list[float | None] = field(default_factory=list)  # each round's machine speed over its calibration
    family: str = "other"
    profiles: list[Profile] = field(default_factory=list)

    @property
    def quietest_profile(self) -> Profile:
        """The profile whose kernels' medians sum lowest: the per-kernel figures are read on it."""
        return min(self.profiles, key=lambda p: p.kernel_sum_s)

    def class_times(self) -> dict[str, tuple[float, float]]:
        """Per op class, the predicted and the profiled seconds of the quietest profile's scored kernels (a kernel
        the analysis has no node for is classed by its op type)."""
        classes = {n.name: n.engine.op_class for n in self.validation.analysis.nodes if n.engine is not None}
        out: dict[str, tuple[float, float]] = {}
        for k in self.quietest_profile.scored():
            op_class = classes.get(k.name, k.op_type)
            predicted, profiled = out.get(op_class, (0.0, 0.0))
            out[op_class] = (predicted + k.predicted_time_s, profiled + k.measured_time_s)
        return out

    @property
    def samples(self) -> list[float]:
        return [s for r in self.rounds for s in r]

    @property
    def round_medians(self) -> list[float]:
        """Each round's median, what a plain timing loop reports for the model at that moment."""
        return [statistics.median(r) for r in self.rounds]

    @property
    def measured_s(self) -> float:
        """The model's measured latency as a user gets it: the median of the quietest round (the lowest of the
        rounds' medians)."""
        return min(self.round_medians)

    @property
    def at_calibrated_speed_s(self) -> float | None:
        """The speed-corrected reading: each round's median times the machine's speed in its round relative to the
        calibration, their median (None without a speed for every round)."""
        if not self.speeds or any(s is None for s in self.speeds) or len(self.speeds) != len(self.rounds):
            return None
        return statistics.median(m * s for m, s in zip(self.round_medians, self.speeds))  # type: ignore[operator]

    @property
    def fast_s(self) -> float:
        """The median of the rounds' fast estimates (the mean of each round's fastest eighth): the machine's best
        moments, for reference."""
        from onnxroof.ort.measure import fast_estimate

        return statistics.median(fast_estimate(r) for r in self.rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--threads", default="1,2", help="thread counts, comma separated (each calibrated first if needed)"
    )
    parser.add_argument(
        "--models", default=None, help="comma-separated zoo:NAME / light:NAME / bench:NAME (default: the --set)"
    )
    parser.add_argument(
        "--set",
        default="default",
        choices=("default", "benchmark", "all"),
        help="without --models: the zoo and light models (default), the benchmark set, or both",
    )
    parser.add_argument(
        "--bench-dir", type=Path, default=None, help="the benchmark set's folder (default: benchmark-models/, cache)"
    )
    parser.add_argument(
        "--repeat", type=int, default=32, help="back-to-back runs per model and round, at the least (default 32)"
    )
    parser.add_argument(
        "--loop-seconds",
        type=float,
        default=2.0,
        help="seconds each model's loop lasts in a round, at the least (default 2)",
    )
    parser.add_argument(
        "--spread", type=float, default=8.0, help="seconds the validation's samples are spread over (default 8)"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of whole-model samples, cycling through the models"
    )
    parser.add_argument("--recalibrate", action="store_true", help="calibrate each thread count afresh first")
    parser.add_argument(
        "--provider",
        default="cpu",
        choices=("cpu", "cuda"),
        help="onnxruntime execution provider (default cpu; cuda calibrates the GPU's roofline and times on it)",
    )
    parser.add_argument(
        "--runs", type=int, default=20, help="profiled runs per model (default 20, as onnxroof validate profiles)"
    )
    parser.add_argument(
        "--json", metavar="FILE", help="also write every model's prediction and samples per round to FILE"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")

    sys.path.insert(0, str(ROOT))
    from onnxroof.errors import UserError
    from onnxroof.ort.calibrate import host_device

    warnings.simplefilter("ignore")
    folder = args.bench_dir or bench_dir()
    wants_bench = args.set != "default" or (args.models is not None and "bench:" in args.models)
    manifest = read_manifest(folder) if wants_bench else []
    sources = model_sources(args.models, manifest=manifest, folder=folder, which=args.set)
    families = {label: family_of(label, manifest) for label, _ in sources}
    dump: dict[str, Any] = {}
    for threads in [int(t) for t in args.threads.split(",") if t]:
        try:
            device = host_device(threads, args.provider, recalibrate=args.recalibrate)
        except UserError as exc:  # a provider this machine cannot run (cuda without a GPU): one line, exit 2
            print(f"accuracy: {exc}", file=sys.stderr)
            return 2
        rows = _measured_rows(sources, device, threads, args)
        for row in rows:
            row.family = families[row.label]
        _say()
        calibration = device.calibration
        cpu = calibration.cpu if calibration is not None else "unknown CPU"
        print(
            f"\n{device.name} [{device.key}], {threads} thread(s), onnxruntime optimization level all, "
            f"{args.rounds} round(s) of a plain loop (at least {args.repeat} runs and {args.loop_seconds:g} s a model)"
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
    """One model's line of the JSON dump: its prediction, its measurement (the quietest round's median), the same
    at the calibrated speed and the fast estimate, the machine's speed per round, the per-kernel agreement on the
    quietest profile and on the validation's, each profile's kernel sum, the quietest profile's predicted and
    profiled seconds per op class and every round's samples."""
    from onnxroof.ort.agreement import relative_error

    v = row.validation
    at_speed = row.at_calibrated_speed_s
    return {
        "model": row.label,
        "family": row.family,
        "predicted_time_s": v.predicted_time_s,
        "measured_time_s": row.measured_s,
        "error": relative_error(v.predicted_time_s, row.measured_s),
        "measured_at_calibrated_speed_s": at_speed,
        "error_at_calibrated_speed": relative_error(v.predicted_time_s, at_speed) if at_speed else None,
        "measured_fast_s": row.fast_s,
        "machine_speed": v.machine_speed,
        "round_speeds": row.speeds,
        "kernel_agreement": row.quietest_profile.agreement().to_dict(),
        "kernel_agreement_validation": v.agreement.to_dict(),
        "profile_kernel_sums_s": [p.kernel_sum_s for p in row.profiles],
        "class_times_s": {op_class: list(times) for op_class, times in row.class_times().items()},
        "rounds_samples_s": row.rounds,
    }


def loop_runs(run_s: float, repeat: int, seconds: float) -> int:
    """How many back-to-back runs a round's loop takes for a model whose run lasts ``run_s``: at least ``repeat``
    and enough to last ``seconds`` (measure's batch sizing, over the loop), so that a small model's median is not
    read on a window of milliseconds."""
    from onnxroof.ort.measure import runs_per_sample

    return max(repeat, runs_per_sample(run_s, seconds)) if run_s > 0 else repeat


def _measured_rows(sources: list[tuple[str, str]], device: Any, threads: int, args: argparse.Namespace) -> list[Row]:
    """Validate every model, then time them all in plain loops, round after round, profiling each after its loop."""
    from onnxroof.api import analyze
    from onnxroof.ort.measure import measure
    from onnxroof.ort.profile import profile_nodes
    from onnxroof.ort.reference import ReferenceSampler
    from onnxroof.ort.session_spec import SessionSpec
    from onnxroof.ort.sessions import runnable_model
    from onnxroof.ort.validate import compare, profiler_overhead, validate

    overhead = profiler_overhead(device)
    session = SessionSpec(args.provider, threads)

    def compared(profile: Any, analysis: Any, plain_analysis: Any) -> Profile:
        """A profile's kernels against the prediction as calibrated: the quietest profile stands at the machine's
        quiet moments, where its calibration read the ceilings; a reference reading seconds before or after it
        may find another phase."""
        kernels = compare(analysis, profile, engine_graph=True, profiler_overhead_s=overhead)
        plain = compare(plain_analysis, profile, engine_graph=False)
        return Profile(profile.kernel_sum_s, tuple(kernels), tuple(plain))

    rows: list[Row] = []
    plain_analyses: dict[str, Any] = {}
    for label, source in sources:
        _say(f"{threads} thread(s): validating {label}")
        try:
            v = validate(
                source,
                device,
                session,
                repeat=args.repeat,
                runs=args.runs,
                spread_s=args.spread,
            )
        except Exception as exc:  # a model this onnxruntime cannot run: say so and go on
            print(f"{label:<28} failed: {str(exc).splitlines()[0][:70]}")
            continue
        plain_analyses[label] = analyze(source, device, as_exported=True)
        rows.append(Row(label, source, v, profiles=[compared(v.profile, v.analysis, plain_analyses[label])]))
    runnables: dict[str, Any] = {}
    calibrated_time = device.calibration.reference_time_s if device.calibration is not None else None
    for round_no in range(1, args.rounds + 1):
        for row in rows:
            _say(f"{threads} thread(s), round {round_no}/{args.rounds}: timing {row.label}")
            runnable = runnables.setdefault(row.label, runnable_model(row.source))
            runs = loop_runs(row.validation.measurement.median_s, args.repeat, args.loop_seconds)
            # A plain loop: onnxruntime's default session, single runs back to back. Its session is gone when
            # measure returns, so no pool thread of it spins while the reference is timed after it.
            timing = measure(runnable, session, repeat=runs, batch=1)
            row.rounds.append(list(timing.samples_s))
            speed = None
            if calibrated_time:
                reference = ReferenceSampler(threads, args.provider)
                reference.sample(REFERENCE_BATCHES)
                speed = reference.speed(calibrated_time)
            row.speeds.append(speed)
            _say(f"{threads} thread(s), round {round_no}/{args.rounds}: profiling {row.label}")
            profile = profile_nodes(runnable, session, runs=args.runs)
            row.profiles.append(compared(profile, row.validation.analysis, plain_analyses[row.label]))
    return rows


def _print_table(rows: list[Row]) -> None:
    """One line per model, then the targets' figures over all of them."""
    from onnxroof.ort.agreement import agreement, relative_error

    width = max([20] + [len(r.label) for r in rows])
    fam_width = max([6] + [len(r.family) for r in rows])
    header = (
        f"{'model':<{width}} {'family':<{fam_width}} "
        f"{'measured':>9} {'predicted':>9} {'error':>7} | {'speed':>5} {'at cal.':>9} {'error':>7} | {'fast':>9} "
        f"{'rounds':>6} {'kernels':>7} {'rho':>6} {'med|e|':>7} | {'plain rho':>9} {'plain med|e|':>12}"
    )
    print(header)
    print("-" * len(header))
    errors: list[float] = []
    at_speed_errors: list[float] = []
    rhos: list[float | None] = []
    medians: list[float | None] = []
    first_medians: list[float | None] = []  # on the validation's own profile
    plain_medians: list[float | None] = []
    pooled_p: list[float] = []
    pooled_m: list[float] = []
    fmt = lambda x, spec: format(x, spec) if x is not None else "n/a"  # noqa: E731
    for row in rows:
        v = row.validation
        per_round = row.round_medians
        measured, at_speed = row.measured_s, row.at_calibrated_speed_s
        error = relative_error(v.predicted_time_s, measured)
        at_speed_error = relative_error(v.predicted_time_s, at_speed) if at_speed else None
        apart = max(per_round) / min(per_round) - 1
        quiet = row.quietest_profile
        s, plain_stats = quiet.agreement(), quiet.agreement(engine_graph=False)
        errors.append(error)
        if at_speed_error is not None:
            at_speed_errors.append(at_speed_error)
        rhos.append(s.spearman)
        medians.append(s.median_abs_error)
        first_medians.append(v.agreement.median_abs_error)
        plain_medians.append(plain_stats.median_abs_error)
        counted = quiet.scored()
        pooled_p += [k.predicted_time_s for k in counted]
        pooled_m += [k.measured_time_s for k in counted]
        speed = statistics.median(row.speeds) if at_speed else None  # type: ignore[type-var]
        at_cal = f"{at_speed * 1e3:.2f}ms" if at_speed else "n/a"
        print(
            f"{row.label:<{width}} {row.family:<{fam_width}} "
            f"{measured * 1e3:>7.2f}ms {v.predicted_time_s * 1e3:>7.2f}ms {error:>+7.1%} | "
            f"{fmt(speed, '5.2f'):>5} {at_cal:>9} {fmt(at_speed_error, '+7.1%'):>7} | {row.fast_s * 1e3:>7.2f}ms "
            f"{apart:>6.1%} {s.count:>7} {fmt(s.spearman, '6.3f'):>6} {fmt(s.median_abs_error, '7.1%'):>7} | "
            f"{fmt(plain_stats.spearman, '9.3f'):>9} {fmt(plain_stats.median_abs_error, '12.1%'):>12}"
        )
    if not errors:
        return
    within = sum(abs(e) <= 0.10 for e in errors)
    pooled = agreement(pooled_p, pooled_m)
    print("-" * len(header))
    print(
        f"models within 10% of measured (the quietest round's median): {within / len(errors):.0%} "
        f"({within}/{len(errors)}; target >= 90% at 1 thread, 80% at 2); at the calibrated speed: "
        f"{sum(abs(e) <= 0.10 for e in at_speed_errors)}/{len(at_speed_errors)}"
    )
    print(
        f"per-kernel Spearman: median over models {statistics.median([r for r in rhos if r is not None]):.3f}, "
        f"pooled over all kernels {pooled.spearman:.3f} (target >= 0.9)"
    )
    print(
        f"per-kernel median |error|: median over models "
        f"{statistics.median([m for m in medians if m is not None]):.1%}, "
        f"pooled {pooled.median_abs_error:.1%} (target <= 15%), on each model's quietest profile; on the "
        f"validation's own profile {statistics.median([m for m in first_medians if m is not None]):.1%}; plain "
        f"roofline: {statistics.median([m for m in plain_medians if m is not None]):.1%}"
    )
    class_times = [row.class_times() for row in rows]  # summed once for the split and the per-class lines
    split = error_split([(row.measured_s, times) for row, times in zip(rows, class_times, strict=True)])
    if split is not None:
        print(split)
    print("per family (targets: no family's mean error beyond +-7%, per-kernel median |error| <= 15%):")
    for line in family_lines([(r.family, e, m) for r, e, m in zip(rows, errors, medians)]):
        print(f"  {line}")
    print("per op class, on each model's quietest profile (classes over 1% of a model's kernel time on average):")
    for class_line in class_lines(class_times):
        print(f"  {class_line}")


def _say(text: str = "") -> None:
    """A progress line on stderr: overwritten by the next one on a terminal, a line of its own elsewhere."""
    if sys.stderr.isatty():
        print(f"\r\033[K{text}", end="", file=sys.stderr, flush=True)
    elif text:
        print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
