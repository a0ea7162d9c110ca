"""Benchmark: what each prediction term and each op class buys on a set of measured models.

For every model of a recorded accuracy run (a docs/runs/ file with per-model measurements, as tools/accuracy.py
writes them), the graph onnxruntime runs is built once, then predicted on the run's thread count's calibrated host
profile as it is, with each term of the engine profile switched off in turn (``profiles.without_terms``), and
with each op class folded into its fallback (its ceiling taken off the device, so that its nodes read the one
CLASS_FALLBACK names). Each variant's predictions are compared with the run's measured latencies: per family and
over all models, the mean absolute error and how many models lie within 10%. "buys" is what switching the term or
class off costs: the variant's mean absolute error minus the full prediction's, in percentage points (positive:
the term or class makes the prediction better; zero or negative: it buys nothing on this set).

A variant changes only the models it can touch (a term that is zero on every node of a model, a class none of a
model's nodes reads its ceiling from, leave its prediction as it is), so those are not predicted again.

The measured latencies are one machine's: the run's CPU must be this machine's (the profile is calibrated here),
or the comparison says nothing. Nothing here is a test.

usage:
  python tools/ablation.py docs/runs/2026-12-01-amd-epyc-f26m2-suite43-1t.json [--device host-t1.toml] [--json F]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the onnxroof beside this tool, not another checkout's
sys.path.insert(0, str(ROOT / "tools"))  # accuracy.py, also when this file is loaded from elsewhere

from accuracy import bench_dir, family_of, model_sources, read_manifest  # noqa: E402

from onnxroof.api import get_device  # noqa: E402
from onnxroof.devices import Device, FrozenMap  # noqa: E402
from onnxroof.ir import Graph  # noqa: E402
from onnxroof.predict.analysis import Analysis, analyze_graph  # noqa: E402
from onnxroof.predict.profiles import EngineProfile, engine_profile, without_terms  # noqa: E402

FULL = "full prediction"


@dataclass(frozen=True)
class Variant:
    """One way of predicting: what it leaves out (``kind`` "full", "term" or "class", and the term's or class's
    ``name``), the engine profile and the device it predicts on."""

    kind: str
    name: str
    profile: EngineProfile
    device: Device

    @property
    def label(self) -> str:
        return FULL if self.kind == "full" else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Model:
    """One measured model: its label, family, measured seconds and the graph onnxruntime runs for it."""

    label: str
    family: str
    measured_s: float
    graph: Graph


def variants(device: Device) -> list[Variant]:
    """The full prediction, then one variant per term of its profile and one per class the device has a ceiling
    for (folded into its fallback)."""
    profile = engine_profile(device)
    out = [Variant("full", "", profile, device)]
    out += [Variant("term", t, without_terms(profile, frozenset({t})), device) for t in profile.terms]
    for cls in sorted(device.ceilings):
        folded = dataclasses.replace(device, ceilings=FrozenMap({k: v for k, v in device.ceilings.items() if k != cls}))
        out.append(Variant("class", cls, profile, folded))
    return out


def touches(variant: Variant, full: Analysis) -> bool:
    """Whether ``variant`` can change the full prediction ``full``: a term some node charges; a class some node is
    of or reads its ceiling from, and any class in a model with a fused activation's epilogue or a recurrent op's
    input projection (which read other classes' ceilings). The full prediction itself changes nothing."""
    notes = [n.engine for n in full.nodes if n.engine is not None]
    if variant.kind == "term":
        return any(note.terms.get(variant.name, 0.0) for note in notes)
    if variant.kind == "class":
        used = {note.ceiling for note in notes} | {note.op_class for note in notes}
        indirect = any(note.terms.get("epilogue", 0.0) or note.terms.get("projection", 0.0) for note in notes)
        return variant.name in used or indirect
    return False


def predicted(models: list[Model], variant: Variant, full: Mapping[str, Analysis]) -> dict[str, float]:
    """Each model's predicted seconds under ``variant`` (the full prediction's where it cannot change it)."""
    out = {}
    for m in models:
        base = full.get(m.label)
        if base is not None and not touches(variant, base):
            out[m.label] = base.totals.predicted_time_s
            continue
        analysis = analyze_graph(m.graph, variant.device, engine=True, profile=variant.profile)
        out[m.label] = analysis.totals.predicted_time_s
    return out


Score = tuple[float, int, int, int]  # mean absolute error, models within 10%, models, models the variant changed


def scores(models: list[Model], times: Mapping[str, float], full: Mapping[str, float]) -> dict[str, Score]:
    """Per family and over "all": (mean absolute error, models within 10%, models, models whose prediction
    differs from the ``full`` one)."""
    groups: dict[str, list[tuple[float, bool]]] = {"all": []}
    for m in models:
        error = abs(times[m.label] - m.measured_s) / m.measured_s
        groups["all"].append((error, times[m.label] != full[m.label]))
        groups.setdefault(m.family, []).append((error, times[m.label] != full[m.label]))
    return {
        f: (statistics.fmean(e for e, _ in rows), sum(e <= 0.10 for e, _ in rows), len(rows), sum(c for _, c in rows))
        for f, rows in groups.items()
    }


def load_models(run: Mapping[str, Any], device: Device, folder: Path) -> list[Model]:
    """The run's measured models that are here, each with the graph onnxruntime runs for it."""
    from onnxroof.ort.optimized import engine_graph

    manifest = read_manifest(folder) if (folder / "manifest.json").is_file() else []
    rows = [r for r in run.get("per_model", []) if r.get("measured_ms")]
    labels = ",".join(r["model"] for r in rows)
    sources = dict(model_sources(labels, manifest=manifest, folder=folder)) if labels else {}
    models = []
    for row in rows:
        source = sources.get(row["model"])
        if source is None or (not source.startswith("zoo:") and not Path(source).is_file()):
            print(f"  {row['model']}: not here, left out", file=sys.stderr)
            continue
        print(f"  building {row['model']}", file=sys.stderr, flush=True)
        family = row.get("family") or family_of(row["model"], manifest)
        models.append(Model(row["model"], family, row["measured_ms"] / 1e3, engine_graph(source, device)))
    return models


def table(results: list[tuple[str, dict[str, Score]]]) -> Iterable[str]:
    """The full prediction's scores, then one line per variant: what it buys per family, in points ("." where it
    changes no model of the family: the set says nothing of it there)."""
    base = results[0][1]
    families = ["all", *sorted(f for f in base if f != "all")]
    yield f"{'':<30}" + "".join(f"{f[:12]:>13}" for f in families)
    yield f"{FULL + ' |e|':<30}" + "".join(f"{base[f][0]:>12.1%} " for f in families)
    yield f"{'  within 10%':<30}" + "".join(f"{base[f][1]:>6}/{base[f][2]:<5} " for f in families)
    yield "buys (|error| without it minus with it, points; '.': it changes no model there):"
    for label, s in results[1:]:
        cells = (f"{(s[f][0] - base[f][0]) * 100:>+12.2f} " if s[f][3] else f"{'.':>12} " for f in families)
        yield f"{label:<30}" + "".join(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a docs/runs/ file with per-model measurements")
    parser.add_argument("--device", type=Path, default=None, help="the profile to predict on (default: the host's)")
    parser.add_argument("--bench-dir", type=Path, default=None, help="the benchmark set's folder")
    parser.add_argument("--json", type=Path, default=None, help="also write every variant's scores here")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text())
    threads = int(run.get("threads", 1))
    device = get_device(args.device or "host", threads=threads)
    print(f"{args.run.name}: {run.get('cpu')}, {threads} thread(s); predicting on {device.label()}", file=sys.stderr)
    models = load_models(run, device, args.bench_dir or bench_dir())
    if not models:
        raise SystemExit(f"{args.run}: no measured model of it is here")
    every = variants(device)
    full = {m.label: analyze_graph(m.graph, device, engine=True) for m in models}
    full_s = {label: a.totals.predicted_time_s for label, a in full.items()}
    results = []
    for index, variant in enumerate(every):
        print(f"  [{index + 1}/{len(every)}] {variant.label}", file=sys.stderr, flush=True)
        results.append((variant.label, scores(models, predicted(models, variant, full), full_s)))
    for line in table(results):
        print(line)
    if args.json is not None:
        document = {"run": args.run.name, "threads": threads, "variants": dict(results)}
        args.json.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
