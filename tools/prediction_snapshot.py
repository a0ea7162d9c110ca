"""Check that a change moves no prediction: snapshot ``analyze``'s JSON for a set of models, then compare.

onnxruntime's optimizer does not order the nodes it inserts (the NCHWc reorders of a model with branches) the
same way from one process to the next, and a host prediction reads the order (what a node's inputs were pushed
out by), so the same code gives slightly different JSON for a few models in two runs. ``graphs`` therefore
writes the graph onnxruntime runs for each model once (``ort.optimized.engine_graph``, pickled), and ``write
--graphs`` predicts on those, so that two snapshots differ only where the prediction code does.

``write`` analyzes every zoo model and every model of the benchmark set (tools/export_models.py's folder) on one
device file (a calibrated host profile, so that nothing recalibrates between the two snapshots) and writes each
model's JSON to a folder. ``compare`` reads two such folders and prints every model whose JSON differs, apart
from the fields named by --ignore (by key, anywhere in the document), and exits 1 when one does. The models'
files are read, never written.

usage:
  python tools/prediction_snapshot.py graphs --device host-t1.toml --out graphs-t1/
  python tools/prediction_snapshot.py write --device host-t1.toml --graphs graphs-t1/ --out before/
  python tools/prediction_snapshot.py write --device host-t1.toml --out before/
  python tools/prediction_snapshot.py compare before/ after/ --ignore class,reason,terms
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the onnxroof beside this tool, not another checkout's
sys.path.insert(0, str(ROOT / "tools"))  # accuracy.py, also when this file is loaded from elsewhere

from accuracy import bench_dir, read_manifest  # noqa: E402

import model_zoo  # noqa: E402
import onnxroof  # noqa: E402
from onnxroof.devices import Device  # noqa: E402
from onnxroof.devices.files import load_device  # noqa: E402
from onnxroof.ir import Graph  # noqa: E402
from onnxroof.report.analysis_json import to_json  # noqa: E402


def models(bench: Path | None) -> list[tuple[str, str]]:
    """(label, what analyze reads) for every zoo model and every benchmark-set model that is present."""
    found = [(f"zoo:{name}", f"zoo:{name}") for name in model_zoo.names()]
    if bench is not None and (bench / "manifest.json").is_file():
        for entry in read_manifest(bench):
            path = bench / str(entry["file"])
            if path.is_file():
                found.append((f"bench:{entry['name']}", str(path)))
    return found


def _file_name(label: str, suffix: str) -> str:
    return label.replace(":", "-") + suffix


def _proxy(mapping: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(mapping)


class _GraphPickler(pickle.Pickler):
    """A pickler for onnxroof's IR, whose read-only mappings are proxies of dicts."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.MappingProxyType:
            return _proxy, (dict(obj),)
        return NotImplemented


def graphs(device_file: Path, out: Path, bench: Path | None) -> int:
    """Each model's engine graph on ``device_file``, pickled into ``out``/LABEL.pickle; the number written."""
    from onnxroof.ort.optimized import engine_graph

    device = load_device(device_file)
    out.mkdir(parents=True, exist_ok=True)
    for label, source in models(bench):
        print(f"optimizing {label}", file=sys.stderr, flush=True)
        buffer = io.BytesIO()
        _GraphPickler(buffer).dump(engine_graph(source, device))
        (out / _file_name(label, ".pickle")).write_bytes(buffer.getvalue())
    return len(list(out.glob("*.pickle")))


def _prepared(folder: Path | None, label: str) -> Graph | None:
    """The engine graph ``graphs`` wrote for ``label`` into ``folder``; None without a folder."""
    if folder is None:
        return None
    path = folder / _file_name(label, ".pickle")
    if not path.is_file():
        raise SystemExit(f"no graph for {label} in {folder}: run the graphs command for this device first")
    graph: Graph = pickle.loads(path.read_bytes())  # written by graphs() on this machine
    return graph


def write(device_file: Path, out: Path, bench: Path | None, prepared: Path | None) -> int:
    """Each model's analyze JSON on ``device_file`` into ``out``/LABEL.json, on the engine graphs in ``prepared``
    where given; the number written."""
    device: Device = load_device(device_file)
    threads = device.calibration.threads if device.calibration is not None else 1
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for label, source in models(bench):
        print(f"analyzing {label}", file=sys.stderr, flush=True)
        model = _prepared(prepared, label) or source
        analysis = onnxroof.analyze(model, device, threads=threads)
        (out / _file_name(label, ".json")).write_text(to_json(analysis))
        written += 1
    return written


def stripped(document: Any, ignore: frozenset[str]) -> Any:
    """``document`` without the keys in ``ignore``, at any depth."""
    if isinstance(document, dict):
        return {k: stripped(v, ignore) for k, v in document.items() if k not in ignore}
    if isinstance(document, list):
        return [stripped(v, ignore) for v in document]
    return document


def differences(before: Path, after: Path, ignore: frozenset[str]) -> Iterable[str]:
    """One line per model whose JSON differs between the folders, or is in one of them only."""
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    for name in names:
        a, b = before / name, after / name
        if not a.is_file() or not b.is_file():
            yield f"{name}: only in {'after' if b.is_file() else 'before'}"
            continue
        if stripped(json.loads(a.read_text()), ignore) != stripped(json.loads(b.read_text()), ignore):
            yield f"{name}: differs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    g = commands.add_parser("graphs", help="write every model's engine graph on one device file, once")
    g.add_argument("--device", type=Path, required=True, help="a device file (a calibrated host profile)")
    g.add_argument("--out", type=Path, required=True, help="the folder the pickled graphs go to")
    g.add_argument("--bench-dir", type=Path, default=None, help="the benchmark set's folder (default: its cache)")
    w = commands.add_parser("write", help="analyze every model on one device file")
    w.add_argument("--graphs", type=Path, default=None, help="predict on the engine graphs in this folder")
    w.add_argument("--device", type=Path, required=True, help="a device file (a calibrated host profile)")
    w.add_argument("--out", type=Path, required=True, help="the folder the JSON files go to")
    w.add_argument("--bench-dir", type=Path, default=None, help="the benchmark set's folder (default: its cache)")
    c = commands.add_parser("compare", help="compare two snapshot folders")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--ignore", default="", help="comma-separated keys left out of the comparison")
    args = parser.parse_args(argv)
    if args.command == "graphs":
        count = graphs(args.device, args.out, args.bench_dir or bench_dir())
        print(f"{count} graph(s) written to {args.out}")
        return 0
    if args.command == "write":
        count = write(args.device, args.out, args.bench_dir or bench_dir(), args.graphs)
        print(f"{count} model(s) written to {args.out}")
        return 0
    ignore = frozenset(k for k in args.ignore.split(",") if k)
    lines = list(differences(args.before, args.after, ignore))
    for line in lines:
        print(line)
    total = len(list(args.before.glob("*.json")))
    print(f"{len(lines)} of {total} model(s) differ" + (f" (ignoring {', '.join(sorted(ignore))})" if ignore else ""))
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
