"""Benchmark: onnxroof's decoder predictions against published LLM generation measurements.

Each row of ``tools/llm_published.toml`` is one figure a public source printed for a Llama-2-7B or Llama-3-8B class
decoder: TensorRT-LLM's performance pages (NVIDIA/TensorRT-LLM, docs/source/performance.md of releases 0.5 to 0.9
and docs/source/performance/perf-overview.md) and llama.cpp's maintainers' llama-bench tables in its pull requests,
each with its engine's release, GPU, precision, batch, input and output lengths and exact source. Each row is
predicted with ``onnxroof.whatif.decoder.predict_decoder`` on the zoo decoder of its precision (graph-only,
onnxruntime GenAI's layout, its KV cache one buffer that each step writes its new rows into, as both engines keep
it), on the row's catalog GPU and the engine profile nearest its engine, and compared with the figure as the row
defines it:

- ``output_tokens_per_s``: TensorRT-LLM's gptSessionBenchmark times one static batch through GptSession::generate
  and prints ``batch * output_len / latency``. Its first output token comes from the context phase (the prefill),
  its other ``output_len - 1`` from the generation steps (``for step in 0 .. maxNewTokens - 1``, step 0 the
  context), so the prediction is ``batch * OSL / (prefill + (OSL - 1) * decode_mean)``, with ``OSL - 1`` decode
  steps over caches of ``ISL .. ISL + OSL - 2`` rows;
- ``first_token_ms``: the same benchmark at an output length of 1: the prefill of ``ISL`` tokens;
- ``prompt_tokens_per_s``: llama-bench's ``pp512``, one batch of 512 tokens over an empty cache:
  ``batch * ISL / prefill``;
- ``decode_tokens_per_s``: llama-bench's ``tg128``, 128 tokens one at a time from an empty cache:
  ``batch / decode_mean`` over 128 decode steps. ``predict_decoder`` needs a prompt of at least one token, so its
  steps read caches of 1 .. 128 rows where llama-bench's read 0 .. 127: half a row more on average, next to a
  7B model's weights.

The printed ratio is predicted over published time (a rate's inverse): above 1 the prediction is slower. A row is
within 20% where the ratio lies in [1/1.2, 1.2]. Rows are skipped, with the reason printed, where the zoo has no
variant of their precision (FP8: it builds int4 and fp16), where their GPU is not in the catalog, or where their
batch is the scheduler's and not published. A row whose A100's form factor its source does not state is predicted
on the A100 SXM4 80GB, printed, and kept out of the counts (a second line counts it in).

Precision to zoo variant: fp16 -> NAME-fp16; llama.cpp's Q4_0 (4-bit weights in blocks of 32, an fp16 scale each,
4.5 bits a weight) -> NAME-int4, MatMulNBits in blocks of 32 whose scales, activations and KV cache are fp32 (the
builder's CPU layout): 5 bits a weight, and a cache row twice Q4_0's fp16 one.

Engine to profile: TensorRT-LLM -> tensorrt; llama.cpp -> tensorrt as well, the nearest profile onnxroof has (each
fused kernel launched once from the host); llama.cpp's own kernels are not modeled.

The rows are split by source into a development set (TensorRT-LLM's 0.5 and 0.6.1 pages) and held-out rows
(TensorRT-LLM's 0.8.0 and 0.9.0 pages, its current overview, llama.cpp's tables), counted apart. Nothing is fitted to
a row: the predictions read the devices' figures (onnxroof/devices) and the engines' profiles
(onnxroof/predict/profiles.py) only, and nothing here may change them to move a held-out row.

Target: at least 75% of the counted rows within 20%. Nothing here is a test.

usage: python tools/llm_published.py [--rows ID,ID] [--engine E] [--set S] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the onnxroof beside this tool, not another checkout's

ROWS = ROOT / "tools" / "llm_published.toml"
# The zoo decoder each (model, precision) is predicted on. Llama 3.1 8B has Llama 3 8B's shape (its rope scaling
# apart, which no step's cost reads).
VARIANTS: Mapping[tuple[str, str], str] = {
    ("llama-2-7b", "fp16"): "llama-2-7b-fp16",
    ("llama-2-7b", "q4_0"): "llama-2-7b-int4",
    ("llama-3.1-8b", "fp16"): "llama-3-8b-fp16",
}
NO_VARIANT: Mapping[str, str] = {"fp8": "fp8: the zoo builds no FP8 decoder (int4 and fp16 only)"}
# The catalog device each GPU the rows name is.
DEVICES: Mapping[str, str] = {
    "a100-sxm4-80gb": "a100-sxm4-80gb",
    "h100-sxm-80gb": "h100-sxm",
    "h200-sxm-141gb": "h200",
    "rtx-3090": "rtx3090",
    "rtx-4090": "rtx4090",
}
# GPUs whose variant the source leaves open: the catalog device they are predicted on, kept out of the counts.
UNSTATED: Mapping[str, str] = {"a100": "a100-sxm4-80gb"}
UNSTATED_NOTE = "not counted: the source does not state the A100's form factor (predicted on the SXM4 80GB)"
# The engine profile each engine is predicted with (see the docstring).
PROFILES: Mapping[str, str] = {"tensorrt-llm": "tensorrt", "llama.cpp": "tensorrt"}
RATES = ("output_tokens_per_s", "prompt_tokens_per_s", "decode_tokens_per_s")
UNITS: Mapping[str, str] = {
    "output_tokens_per_s": "out tok/s",
    "first_token_ms": "TTFT ms",
    "prompt_tokens_per_s": "pp tok/s",
    "decode_tokens_per_s": "tg tok/s",
}
TARGET_RATIO = 1.2
TARGET_SHARE = 0.75
SETS = ("development", "held-out")
# The groups the counts are printed for: a Row's field and its title.
GROUPS = (("set", "per set"), ("engine", "per engine"), ("metric", "per metric"), ("device", "per device"))


@dataclass(frozen=True)
class Row:
    """One published figure and its prediction, both in the row's metric's unit; ``skipped`` says why a row was not
    predicted, ``outside`` why a predicted one is kept out of the counts."""

    id: str
    engine: str
    device: str
    model: str
    precision: str
    batch: int | None
    input_len: int
    output_len: int
    metric: str
    set: str
    published: float
    predicted: float | None
    prefill_s: float | None = None
    decode_mean_s: float | None = None
    skipped: str = ""
    outside: str = ""

    @property
    def ratio(self) -> float | None:
        """Predicted over published time (a rate's inverse)."""
        return None if self.predicted is None else time_ratio(self.metric, self.predicted, self.published)

    @property
    def counted_ratio(self) -> float | None:
        return None if self.outside else self.ratio


def read_rows(path: Path = ROWS) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        return list(tomllib.load(f)["row"])


def steps(row: Mapping[str, Any]) -> tuple[int, int]:
    """The prompt and the decode steps ``predict_decoder`` runs for a row's metric (see the docstring)."""
    metric, isl, osl = row["metric"], int(row["input_len"]), int(row["output_len"])
    if metric == "output_tokens_per_s":
        return isl, max(osl - 1, 1)
    if metric in ("first_token_ms", "prompt_tokens_per_s"):
        return isl, 1
    if metric == "decode_tokens_per_s":
        return 1, osl
    raise ValueError(f"row {row['id']}: unknown metric {metric!r}")


def predicted_value(row: Mapping[str, Any], prefill_s: float, decode_mean_s: float) -> float:
    """The row's figure from a prediction's prefill and mean decode step, as the row's engine computes it."""
    metric, batch = row["metric"], int(row["batch"])
    isl, osl = int(row["input_len"]), int(row["output_len"])
    if metric == "output_tokens_per_s":
        return batch * osl / (prefill_s + (osl - 1) * decode_mean_s)
    if metric == "first_token_ms":
        return prefill_s * 1e3
    if metric == "prompt_tokens_per_s":
        return batch * isl / prefill_s
    if metric == "decode_tokens_per_s":
        return batch / decode_mean_s
    raise ValueError(f"row {row['id']}: unknown metric {metric!r}")


def time_ratio(metric: str, predicted: float, published: float) -> float:
    """Predicted over published time: a rate's inverse ratio, a latency's own."""
    return published / predicted if metric in RATES else predicted / published


def catalog_device(row: Mapping[str, Any]) -> str | None:
    return DEVICES.get(row["device"]) or UNSTATED.get(row["device"])


def why_skipped(row: Mapping[str, Any]) -> str:
    """Why a row cannot be predicted here ('' when it can)."""
    if row["precision"] in NO_VARIANT:
        return NO_VARIANT[row["precision"]]
    if (row["model"], row["precision"]) not in VARIANTS:
        return f"no zoo decoder for {row['model']} in {row['precision']}"
    device = catalog_device(row)
    if device is None:
        return f"device {row['device']} is not in the catalog"
    from onnxroof.devices import catalog

    if device not in catalog():
        return f"device {device} is not in the catalog"
    if "batch" not in row:
        return "batch not published (the scheduler's)"
    return ""


def outside(row: Mapping[str, Any]) -> str:
    """Why a predicted row is kept out of the counts ('' when it counts)."""
    return UNSTATED_NOTE if row["device"] in UNSTATED else ""


class Predictor:
    """Predicts rows, building each zoo decoder once (graph-only)."""

    def __init__(self) -> None:
        self.models: dict[str, Any] = {}

    def times(self, row: Mapping[str, Any]) -> tuple[float, float]:
        """The row's predicted prefill and mean decode step, in seconds."""
        from onnxroof.whatif.decoder import predict_decoder

        prompt, generate = steps(row)
        device = f"{catalog_device(row)}@{PROFILES[row['engine']]}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prediction = predict_decoder(
                self._model(VARIANTS[(row["model"], row["precision"])]),
                device,
                prompt=prompt,
                generate=generate,
                batch=int(row["batch"]),
                shared_buffer=True,
                tensor_parallel=int(row.get("tp", 1)),
            )
        return prediction.prefill.time_s, prediction.decode_mean_s

    def _model(self, name: str) -> Any:
        if name not in self.models:
            import model_zoo

            self.models[name] = model_zoo.build_decoder(name, weights=False)
        return self.models[name]


def predict(rows: Iterable[Mapping[str, Any]], progress: bool = True) -> list[Row]:
    predictor = Predictor()
    rows = list(rows)
    out = []
    for index, row in enumerate(rows):
        if progress:
            print(f"[{index + 1}/{len(rows)}] {row['id']}", file=sys.stderr, flush=True)
        skipped = why_skipped(row)
        times = None if skipped else predictor.times(row)
        out.append(_result(row, times, skipped))
    return out


def _result(row: Mapping[str, Any], times: tuple[float, float] | None, skipped: str) -> Row:
    predicted = None if times is None else predicted_value(row, *times)
    return Row(
        id=row["id"],
        engine=row["engine"],
        device=row["device"],
        model=row["model"],
        precision=row["precision"],
        batch=row.get("batch"),
        input_len=int(row["input_len"]),
        output_len=int(row["output_len"]),
        metric=row["metric"],
        set=row["set"],
        published=float(row["value"]),
        predicted=predicted,
        prefill_s=None if times is None else times[0],
        decode_mean_s=None if times is None else times[1],
        skipped=skipped,
        outside="" if skipped else outside(row),
    )


def within(ratio: float, bound: float = TARGET_RATIO) -> bool:
    return 1 / bound <= ratio <= bound


def summary(ratios: Sequence[float]) -> str:
    """'N of M rows within 20%', with the share, how many lie within 2x, and the median and range of ``ratios``."""
    if not ratios:
        return "no rows compared"
    close = sum(within(x) for x in ratios)
    near = sum(within(x, 2.0) for x in ratios)
    return (
        f"{close} of {len(ratios)} rows within 20% ({100 * close / len(ratios):.0f}%), {near} within 2x, median "
        f"predicted/published time {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})"
    )


def counted(rows: Sequence[Row]) -> list[float]:
    return [r.counted_ratio for r in rows if r.counted_ratio is not None]


def render(rows: Sequence[Row]) -> str:
    lines = [_header(), *(_line(r) for r in rows), "", f"all       {summary(counted(rows))}"]
    for key, title in (
        ("set", "per set"),
        ("engine", "per engine"),
        ("metric", "per metric"),
        ("device", "per device"),
    ):
        lines += ["", title]
        for value in sorted({getattr(r, key) for r in rows}):
            lines.append(f"  {value:20} {summary(counted([r for r in rows if getattr(r, key) == value]))}")
    every = [r.ratio for r in rows if r.ratio is not None]
    lines += ["", f"with the rows whose GPU's variant is unstated: {summary(every)}"]
    skipped = sum(1 for r in rows if r.skipped)
    lines += [f"skipped: {skipped} of {len(rows)} rows (reasons above)", "", _target(counted(rows))]
    return "\n".join(lines) + "\n"


def _header() -> str:
    return (
        f"{'row':52} {'engine':12} {'device':14} {'set':8} {'batch':>5} {'ISL/OSL':>11} {'metric':9} "
        f"{'published':>10} {'predicted':>10} ratio  20%?"
    )


def _line(r: Row) -> str:
    predicted = "-" if r.predicted is None else f"{r.predicted:10.1f}"
    batch = "-" if r.batch is None else str(r.batch)
    head = (
        f"{r.id:52} {r.engine:12} {r.device:14} {r.set[:8]:8} {batch:>5} {f'{r.input_len}/{r.output_len}':>11} "
        f"{UNITS[r.metric]:9} {r.published:10.1f} {predicted:>10}"
    )
    if r.ratio is None:
        return f"{head} skipped: {r.skipped}"
    verdict = "yes" if within(r.ratio) else "no"
    return f"{head} {r.ratio:5.2f}  {verdict}" + (f"  ({r.outside})" if r.outside else "")


def _target(ratios: Sequence[float]) -> str:
    if not ratios:
        return "target: no counted row predicted"
    share = sum(within(x) for x in ratios) / len(ratios)
    verdict = "met" if share >= TARGET_SHARE else "not met"
    return f"target: {100 * TARGET_SHARE:.0f}% of the counted rows within 20%: {100 * share:.0f}% ({verdict})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=None, help="comma-separated row ids (default: every row)")
    parser.add_argument("--engine", default=None, help="only the rows of this engine (tensorrt-llm, llama.cpp)")
    parser.add_argument("--set", default=None, choices=SETS, help="only the rows of this set")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the rows and predictions as JSON")
    args = parser.parse_args(argv)
    rows = read_rows()
    if args.rows:
        wanted = set(args.rows.split(","))
        rows = [r for r in rows if r["id"] in wanted]
    if args.engine:
        rows = [r for r in rows if r["engine"] == args.engine]
    if args.set:
        rows = [r for r in rows if r["set"] == args.set]
    results = predict(rows)
    print(render(results), end="")
    if args.json:
        records = [asdict(r) | {"ratio": r.ratio, "counted": r.counted_ratio is not None} for r in results]
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
