"""Benchmark: onnxroof's GPU predictions against published measurements.

Each row of ``tools/published.toml`` is one published measurement: a model at a batch and precision, run by an
engine (TensorRT, onnxruntime's CUDA provider, PyTorch eager) on a GPU, its latency or throughput, what the timing
includes and its exact source. Each is predicted with ``--engine`` on the graph of its model (the zoo's, or the
published set that ``tools/export_models.py --set published`` writes; graph-only is enough), at the row's batch
(the exported batch-1 graph reshaped as ``--input`` reshapes it) and precision, and compared as predicted over
measured time (a throughput row as batch / throughput). It prints every row, then per engine and per device how
many rows lie within 25% and within 2x, and their median ratio. A row whose value is a network client's round
trip (``client_round_trip``: request, transport, queue and response around the execution) is predicted and
printed, and kept out of the counts: a prediction covers the kernels and the host's issuing them.

Nothing is fitted to a row or a model: the predictions read the devices' figures (datasheets and published
microbenchmarks, onnxroof/devices) and the engines' profiles (onnxroof/predict/profiles.py) only. MLPerf inference
results and NVIDIA/TensorRT's demo/BERT README are kept out of the rows: they are the independent check.

Targets: at least 75% of the tensorrt and onnxruntime-cuda rows within 25% and none off by more than 2x; at least
60% of all rows within 25%. Nothing here is a test.

usage: python tools/published.py [--rows ID,ID] [--engine E] [--json FILE] [--models-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the onnxroof beside this tool, not another checkout's

ROWS = ROOT / "tools" / "published.toml"
# The graph each row's model is predicted on, by (model, input) as the rows name them: the zoo's, or the published
# set's (tools/export_models.py --set published).
MODELS: Mapping[tuple[str, str], str] = {
    ("resnet50", "3x224x224"): "zoo:resnet50",
    ("efficientnet_b0", "3x224x224"): "efficientnet_b0",
    ("efficientnet_b4", "3x380x380"): "efficientnet_b4",
    ("bert_large", "seq=384"): "bert_large_qa_384",
    ("bert_base", "seq=128"): "bert_base_qa_128",
    ("bert_base_mlm", "seq=128"): "bert_base_mlm_128",
    ("bert_6l_768d", "seq=384"): "bert_6l_qa_384",
    ("roberta_base", "seq=384"): "roberta_base_cls_384",
}
# The catalog device each row's GPU is (a memory size apart, which no latency here depends on); a row whose GPU's
# variant its source does not state has none.
DEVICES: Mapping[str, str] = {
    "v100-sxm2-16gb": "v100-sxm2",
    "v100-sxm2-32gb": "v100-sxm2",
    "v100-pcie-16gb": "v100-pcie",
    "v100-pcie-32gb": "v100-pcie",
    "t4": "t4",
    "a100-sxm4-80gb": "a100-sxm4-80gb",
    "rtx-3090": "rtx3090",
    "a30": "a30",
    "a40": "a40",
}
# The what-if precision a row runs at: None, the graph's own fp32, which an engine's TF32 default may lower; tf32
# where the source says its products ran so; AMP computes products and most activations in fp16.
PRECISIONS: Mapping[str, str | None] = {"fp32": None, "tf32": "tf32", "fp16": "fp16", "amp": "fp16", "int8": "int8"}
TARGET_RATIO = 1.25
ENGINE_TARGET = ("tensorrt", "onnxruntime-cuda")


@dataclass(frozen=True)
class Row:
    """One published measurement and its prediction: ``measured_s`` and ``predicted_s`` are one batch's time (a
    throughput row's batch / throughput); ``skipped`` says why a row was not predicted, ``outside`` why its timing
    covers more than a prediction does (it is printed, and kept out of the counts)."""

    id: str
    engine: str
    device: str
    model: str
    batch: int
    precision: str
    metric: str
    measured_s: float
    predicted_s: float | None
    skipped: str = ""
    outside: str = ""

    @property
    def ratio(self) -> float | None:
        return None if self.predicted_s is None else self.predicted_s / self.measured_s

    @property
    def counted_ratio(self) -> float | None:
        """The ratio where the row counts: predicted, and timed as a prediction covers."""
        return None if self.outside else self.ratio


CLIENT_ROUND_TRIP = "not counted: a network client's round trip around the execution"


def outside(row: Mapping[str, Any]) -> str:
    """Why a row's timing covers more than a prediction does ('' when it covers the same)."""
    return CLIENT_ROUND_TRIP if row.get("client_round_trip") else ""


def read_rows(path: Path = ROWS) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        return list(tomllib.load(f)["row"])


def measured_seconds(row: Mapping[str, Any]) -> float:
    """One batch's time: a latency as given, a throughput as batch / throughput."""
    if row["metric"] == "latency_ms":
        return float(row["value"]) / 1e3
    if row["metric"] == "throughput_per_s":
        return int(row["batch"]) / float(row["value"])
    raise ValueError(f"row {row['id']}: unknown metric {row['metric']!r}")


def graph_name(row: Mapping[str, Any]) -> str | None:
    """The graph a row is predicted on: its model's (MODELS), at the row's opset where its source fixes one."""
    source = MODELS.get((row["model"], row["input"]))
    if source is None or "onnx_opset" not in row:
        return source
    return f"{source}-opset{row['onnx_opset']}"


def why_skipped(row: Mapping[str, Any], models_dir: Path) -> str:
    """Why a row cannot be predicted here ('' when it can)."""
    source = graph_name(row)
    if source is None:
        return f"no graph for {row['model']} at {row['input']}"
    if not source.startswith("zoo:") and not (models_dir / f"{source}.onnx").exists():
        return f"{source}.onnx not exported (python tools/export_models.py --set published)"
    if row["device"] not in DEVICES:
        return f"device {row['device']}: its source does not state the variant"
    from onnxroof.devices import catalog

    if DEVICES[row["device"]] not in catalog():
        return f"device {DEVICES[row['device']]} is not in the catalog"
    if row["precision"] not in PRECISIONS:
        return f"precision {row['precision']}"
    return ""


class Predictor:
    """Predicts rows, building each (model, batch, engine)'s engine graph once for every device it runs on."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = models_dir
        self.graphs: dict[tuple[str, int, str], Any] = {}

    def seconds(self, row: Mapping[str, Any]) -> float:
        from onnxroof.api import get_device
        from onnxroof.predict.analysis import analyze_graph

        release = f":{row['engine_release']}" if row.get("engine_release") else ""
        device = get_device(f"{DEVICES[row['device']]}@{row['engine']}{release}")
        graph = self._graph(str(graph_name(row)), int(row["batch"]), device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            analysis = analyze_graph(graph, device, precision=PRECISIONS[row["precision"]], engine=True)
        return analysis.totals.prediction.predicted_time_s

    def _graph(self, source: str, batch: int, device: Any) -> Any:
        key = (source, batch, str(device.engine_spec()))
        if key not in self.graphs:
            self.graphs[key] = _engine_graph(self._model(source), batch, device)
        return self.graphs[key]

    def _model(self, source: str) -> Any:
        import onnx

        if source.startswith("zoo:"):
            import model_zoo

            return model_zoo.build(source.removeprefix("zoo:"))
        return onnx.load(str(self.models_dir / f"{source}.onnx"), load_external_data=False)


def _engine_graph(model: Any, batch: int, device: Any) -> Any:
    """The graph the device's engine runs for ``model`` with every input's first dim set to ``batch``."""
    from onnxroof.load.model_spec import ModelSpec
    from onnxroof.ort.optimized import engine_graph

    inputs = {}
    initializers = {i.name for i in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        inputs[value.name] = (batch, *dims[1:])
    return engine_graph(ModelSpec.of(model, inputs, {}, {}), device)


def predict(rows: Iterable[Mapping[str, Any]], models_dir: Path, progress: bool = True) -> list[Row]:
    predictor = Predictor(models_dir)
    out = []
    rows = list(rows)
    for index, row in enumerate(rows):
        skipped = why_skipped(row, models_dir)
        if progress:
            print(f"[{index + 1}/{len(rows)}] {row['id']}", file=sys.stderr, flush=True)
        predicted = None if skipped else predictor.seconds(row)
        out.append(
            Row(
                row["id"],
                row["engine"],
                row["device"],
                row["model"],
                int(row["batch"]),
                row["precision"],
                row["metric"],
                measured_seconds(row),
                predicted,
                skipped,
                outside(row),
            )
        )
    return out


def within(ratio: float, bound: float) -> bool:
    return 1 / bound <= ratio <= bound


def summary(rows: Sequence[Row]) -> str:
    """How many rows lie within 25% and within 2x, and their median ratio, for ``rows``' predicted ones."""
    ratios = [r.counted_ratio for r in rows if r.counted_ratio is not None]
    if not ratios:
        return "no rows compared"
    close = sum(within(x, TARGET_RATIO) for x in ratios)
    near = sum(within(x, 2.0) for x in ratios)
    return (
        f"{len(ratios):3d} rows: {close:3d} within 25% ({100 * close / len(ratios):3.0f}%), {near:3d} within 2x, "
        f"median predicted/measured {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})"
    )


def render(rows: Sequence[Row]) -> str:
    lines = [
        f"{'row':44} {'engine':16} {'device':15} {'batch':>5} {'prec':5} {'measured':>10} {'predicted':>10} ratio",
    ]
    for r in rows:
        predicted = "-" if r.predicted_s is None else f"{r.predicted_s * 1e3:8.3f}ms"
        ratio = r.skipped if r.ratio is None else f"{r.ratio:.2f}" + (f" ({r.outside})" if r.outside else "")
        lines.append(
            f"{r.id:44} {r.engine:16} {r.device:15} {r.batch:5d} {r.precision:5} {r.measured_s * 1e3:8.3f}ms "
            f"{predicted:>10} {ratio}"
        )
    lines += ["", f"all      {summary(rows)}"]
    for key, title in (("engine", "per engine"), ("device", "per device"), ("model", "per model")):
        lines += ["", title]
        for value in sorted({getattr(r, key) for r in rows}):
            lines.append(f"  {value:18} {summary([r for r in rows if getattr(r, key) == value])}")
    lines += ["", _targets(rows)]
    return "\n".join(lines) + "\n"


def _targets(rows: Sequence[Row]) -> str:
    engine_ratios = [r.counted_ratio for r in rows if r.engine in ENGINE_TARGET and r.counted_ratio is not None]
    all_ratios = [r.counted_ratio for r in rows if r.counted_ratio is not None]
    if not engine_ratios:
        return "targets: no tensorrt or onnxruntime-cuda row predicted"
    share = sum(within(x, TARGET_RATIO) for x in engine_ratios) / len(engine_ratios)
    beyond = sum(not within(x, 2.0) for x in engine_ratios)
    overall = sum(within(x, TARGET_RATIO) for x in all_ratios) / len(all_ratios)
    return (
        f"targets: tensorrt + onnxruntime-cuda within 25%: {100 * share:.0f}% (>= 75%), beyond 2x: {beyond} (0); "
        f"all rows within 25%: {100 * overall:.0f}% (>= 60%)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=None, help="comma-separated row ids (default: every row)")
    parser.add_argument("--engine", default=None, help="only the rows of this engine")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the rows and predictions as JSON")
    parser.add_argument("--models-dir", type=Path, default=None, help="the published set's folder")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tools"))
    from export_models import default_dir

    models_dir = args.models_dir or default_dir("published")
    rows = read_rows()
    if args.rows:
        wanted = set(args.rows.split(","))
        rows = [r for r in rows if r["id"] in wanted]
    if args.engine:
        rows = [r for r in rows if r["engine"] == args.engine]
    results = predict(rows, models_dir)
    print(render(results), end="")
    if args.json:
        records = [r.__dict__ | {"ratio": r.ratio, "counted": r.counted_ratio is not None} for r in results]
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
