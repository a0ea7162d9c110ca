"""Op-type census of a set of models: the ops onnxruntime runs for them, and how the engine model costs each.

For every model, onnxruntime's optimized graph (level all, on the CPU, at the calibrated host profile's thread
count) is analyzed on the calibrated host; each node has its op type (domain::op), the op class the engine
model puts it in (onnxroof.predict.op_classes.op_class) and the ceiling it was predicted under: its class's own,
another class's it falls back to ("via CLASS"), or none (the plain roofline: the device has no ceiling for the
class, or the op is shape-only or without a class). One line per op type: how many models and nodes have it,
its share of the predicted time (the mean over the models that have it, and over all the models), its classes
with their node counts, and how its nodes were costed. Op types without a cost function (charged their tensor
bytes) are marked "no cost function".

usage: python tools/op_census.py [--set benchmark|default|all] [--models bench:gpt2,...] [--bench-dir DIR]
                                [--threads 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _accuracy_tool() -> Any:
    """tools/accuracy.py, for its model sources and the benchmark set's manifest."""
    spec = importlib.util.spec_from_file_location("onnxroof_accuracy_tool", Path(__file__).parent / "accuracy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class OpCensus:
    """What the set's models hold of one op type."""

    op: str  # domain::op_type
    models: set[str] = field(default_factory=set)
    nodes: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    costed: Counter[str] = field(default_factory=Counter)  # "own", "via CLASS", "plain roofline", "shape-only"
    unsupported: int = 0  # nodes without a cost function
    shares: dict[str, float] = field(default_factory=dict)  # per model, the op's share of its predicted time


def costed_as(op_class: str, ceiling: str | None) -> str:
    """How a node was costed, from its class and the ceiling its engine note names."""
    if op_class == "shape":
        return "shape-only"
    if ceiling is None:
        return "plain roofline"
    return "own" if ceiling == op_class else f"via {ceiling}"


def add_model(census: dict[str, OpCensus], model: str, nodes: list[tuple[str, str, str | None, bool, float]]) -> None:
    """Count one model's nodes, each (domain::op, op class, ceiling, has a cost function, predicted time)."""
    total = sum(t for *_, t in nodes) or 1.0
    times: defaultdict[str, float] = defaultdict(float)
    for op, cls, ceiling, supported, time_s in nodes:
        entry = census.setdefault(op, OpCensus(op))
        entry.models.add(model)
        entry.nodes += 1
        entry.classes[cls] += 1
        entry.costed[costed_as(cls, ceiling)] += 1
        entry.unsupported += not supported
        times[op] += time_s
    for op, t in times.items():
        census[op].shares[model] = t / total


def census_lines(census: dict[str, OpCensus], models: int) -> list[str]:
    """The table: op types by their share of the predicted time over all the models, largest first."""
    rows = sorted(census.values(), key=lambda e: -sum(e.shares.values()))
    width = max([16] + [len(e.op) for e in rows])
    head = f"{'op type':<{width}} {'models':>6} {'nodes':>6} {'time %':>6} {'(where)':>7}  classes; costed as"
    lines = [head, "-" * len(head)]
    for e in rows:
        over_all = sum(e.shares.values()) / max(models, 1)
        where = sum(e.shares.values()) / max(len(e.models), 1)
        classes = ", ".join(f"{c} {n}" for c, n in e.classes.most_common())
        costed = ", ".join(f"{c} {n}" for c, n in e.costed.most_common())
        flag = "; no cost function" if e.unsupported else ""
        lines.append(
            f"{e.op:<{width}} {len(e.models):>6} {e.nodes:>6} {over_all:>6.1%} {where:>7.1%}  {classes}; {costed}{flag}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="benchmark", choices=("default", "benchmark", "all"))
    parser.add_argument("--models", default=None, help="comma-separated zoo:NAME / light:NAME / bench:NAME")
    parser.add_argument("--bench-dir", type=Path, default=None, help="the benchmark set's folder")
    parser.add_argument("--threads", type=int, default=1, help="the calibrated host profile's thread count")
    parser.add_argument("--json", metavar="FILE", help="also write the census and each model's op counts to FILE")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    accuracy = _accuracy_tool()
    from onnxroof.api import analyze
    from onnxroof.ort.calibrate import host_device

    warnings.simplefilter("ignore")
    folder = args.bench_dir or accuracy.bench_dir()
    wants_bench = args.set != "default" or (args.models is not None and "bench:" in args.models)
    manifest = accuracy.read_manifest(folder) if wants_bench else []
    sources = accuracy.model_sources(args.models, manifest=manifest, folder=folder, which=args.set)
    device = host_device(args.threads)
    census: dict[str, OpCensus] = {}
    per_model: dict[str, dict[str, int]] = {}
    done = 0
    for label, source in sources:
        print(f"analyzing {label}", file=sys.stderr, flush=True)
        try:
            analysis = analyze(source, device)
        except Exception as exc:  # a model this onnxruntime cannot run: say so and go on
            print(f"{label}: failed: {str(exc).splitlines()[0][:100]}")
            continue
        nodes = [
            (
                f"{n.domain or 'ai.onnx'}::{n.op_type}",
                n.engine.op_class if n.engine is not None else "none",
                n.engine.ceiling if n.engine is not None else None,
                n.supported,
                n.prediction.predicted_time_s,
            )
            for n in analysis.nodes
        ]
        add_model(census, label, nodes)
        per_model[label] = dict(Counter(op for op, *_ in nodes))
        done += 1
    print(f"{done} model(s) on {device.name} [{device.key}], onnxruntime's optimized graph (level all)")
    print("time %: the op's share of the predicted time, over all the models and over those that have it")
    for line in census_lines(census, done):
        print(line)
    if args.json:
        out = {
            "device": device.key,
            "models": per_model,
            "ops": [
                {
                    "op": e.op,
                    "models": sorted(e.models),
                    "nodes": e.nodes,
                    "classes": dict(e.classes),
                    "costed": dict(e.costed),
                    "unsupported_nodes": e.unsupported,
                    "time_shares": e.shares,
                }
                for e in census.values()
            ],
        }
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
