"""onnxroof census: many models x devices x batches x precisions, one row each, to a file that resumes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from onnxroof.cli import sweep as sweep_command
from onnxroof.cli.common import (
    Progress,
    add_devices_option,
    add_executor_options,
    check_output,
    executor_of,
    resolve_devices,
    split_list,
)
from onnxroof.errors import UserError

if TYPE_CHECKING:
    from onnxroof.devices import Device
    from onnxroof.whatif.census import Key, Task

HELP = "many models on many devices, batches and precisions: one row each, to a file that resumes"
DESCRIPTION = """Predict every model of a set on every device at every batch and what-if precision: one row per
combination with FLOPs, MACs, params, bytes moved, arithmetic intensity, predicted time, throughput (samples/s),
bound, the memory the model needs there (weights plus the peak of live activations; on --device host onnxruntime's
predicted process peak), whether that fits the device's memory (empty where the device lists no capacity), the
nodes not counted in full, and an error. A model that cannot be read, inferred or rewritten to a batch gets rows
that say why in one line; the census goes on.

MODELS are .onnx files, folders (every .onnx below them), globs (quoted globs are expanded here, '**' included)
and zoo:NAME or zoo:* (every built-in model but the decoders). A pattern that matches nothing is an error.

-o FILE writes .csv, .json or .parquet (Parquet needs pyarrow: pip install 'onnxroof[parquet]'), atomically, and
rewrites it every few seconds as rows arrive: a census stopped midway keeps its rows up to the last write. An
existing FILE is resumed: its rows are kept and only the missing ones computed (rows with an error are tried
again), then old and new are written together. --force starts afresh instead, replacing FILE. Without -o the
rows go to stdout when the census ends (--format table, json or csv).

--jobs N runs N worker processes (default: the CPU count); --jobs 1 runs in this process. Each task reads a
model and rewrites it to a batch once for all the devices and precisions of that batch. --executor ADDRESS sends
the tasks to an existing Dask cluster instead (its scheduler's tcp://HOST:PORT or scheduler file; pip install
'onnxroof[distributed]'): each worker reads the model files itself (give paths every worker sees), a task whose
worker is lost runs again on another, and the rows are written here as they arrive.

examples:
  onnxroof census models/ -d jetson-agx-orin,t4 --batch 1 -o fleet.csv
  onnxroof census 'exports/**/*.onnx' zoo:resnet50 -d a100-sxm4-80gb,t4,l4 --batch 1,8,64 \\
      --precision fp32,fp16 -o zoo.parquet --jobs 8
  onnxroof census 'zoo:*' -d v100-sxm2@tensorrt,v100-sxm2 --format csv
  onnxroof census /shared/models/ -d t4,l4 --batch 1,8 -o fleet.csv --executor tcp://scheduler:8786
  onnxroof plot --kind census zoo.parquet -o census.svg
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("models", nargs="+", metavar="MODELS", help=".onnx files, folders, globs, zoo:NAME, zoo:*")
    add_devices_option(parser, "devices, repeatable or comma-separated (default v100-sxm2)")
    parser.add_argument("--batch", default=None, metavar="B1,B2", help="batch sizes (default: each model's own)")
    parser.add_argument(
        "-p", "--precision", default=None, metavar="P1,P2", help="what-if precisions: fp64 ... int8 (default: stored)"
    )
    add_executor_options(parser)
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="--device host: calibration threads")
    parser.add_argument("-f", "--format", default=None, choices=("table", "json", "csv"), help="stdout's format")
    parser.add_argument(
        "-o", "--output", default=None, metavar="FILE", help="write the rows to FILE (.csv, .json, .parquet); resumes"
    )
    parser.add_argument("--force", action="store_true", help="start afresh, replacing FILE, instead of resuming it")


def _check_output(args: argparse.Namespace) -> None:
    """-o's extension names a format (pyarrow there for Parquet), it is no folder and its folder exists; --format
    is stdout's, so it goes with -o only where the two agree."""
    from onnxroof.report.census_files import FORMATS, census_format, require_parquet

    if args.force and not args.output:
        raise UserError("--force replaces the -o FILE a census writes: there is none", "add -o FILE, or drop --force")
    if not args.output:
        return
    check_output(args.output, True, tuple(FORMATS))  # an existing file is resumed (or, with --force, replaced)
    fmt = census_format(args.output)
    if args.format and args.format != fmt:
        raise UserError(f"--format {args.format} and -o {args.output} disagree", f"drop --format: -o writes {fmt}")
    if fmt == "parquet":
        require_parquet()


def _previous(args: argparse.Namespace, planned: list[Key]) -> tuple[list[dict[str, Any]], set[Key]]:
    """The rows an existing -o FILE holds that a rerun keeps and the keys it need not compute (none: no file, or
    --force)."""
    from pathlib import Path

    from onnxroof.report.census_files import read_census
    from onnxroof.whatif.census import resume

    if not args.output or args.force or not Path(args.output).exists():
        return [], set()
    return resume(read_census(args.output), set(planned))


def _devices(args: argparse.Namespace, progress: Progress) -> list[Device]:
    """The devices, resolved before any work (host calibrated first, and its memory factors read, where named)."""
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.predict.profiles import reads_host_memory

    targets = resolve_devices(split_list(args.device) or [DEFAULT_DEVICE], args.threads, progress)
    if any(reads_host_memory(t) for t in targets):
        from onnxroof.ort.memory_calibration import host_memory_factors

        progress.stage("reading this host's session memory factors (measured once)")
        host_memory_factors(args.threads, progress=progress.stage)
    return targets


def run(args: argparse.Namespace) -> int:
    from onnxroof.load.expand import expand_models
    from onnxroof.whatif.census import plan, planned_keys

    _check_output(args)
    if args.threads < 1:
        raise UserError(f"--threads {args.threads}: expected a positive count", "e.g. --threads 1")
    executor = executor_of(args)
    models = expand_models(args.models)
    batches: list[int | None] = list(sweep_command.batches(args))
    precisions: list[str | None] = list(sweep_command.precisions(args))
    progress = Progress("census", unit="rows")
    try:
        devices = _devices(args, progress)
        planned = planned_keys(models, devices, batches, precisions)
        kept, done = _previous(args, planned)
        tasks = plan(models, devices, batches, precisions, done, args.threads)
        rows = _run(args, tasks, executor, kept, planned, progress)
    finally:
        progress.close()
    _report(args, rows, kept)
    return 0


def _run(
    args: argparse.Namespace,
    tasks: list[Task],
    executor: Any,
    kept: list[dict[str, Any]],
    planned: list[Key],
    progress: Progress,
) -> list[dict[str, Any]]:
    """Every row, old and new, in the planned order: to -o FILE as they arrive (and once more at the end, an
    interrupt included), else gathered for stdout."""
    from onnxroof.report.census_files import Checkpoint
    from onnxroof.whatif.census import census, ordered

    total, done = sum(len(t.configs) for t in tasks), 0
    sink = Checkpoint(args.output, kept, planned) if args.output else None
    rows = list(kept)
    progress(0, total)
    try:
        for new in census(tasks, executor):
            rows += new
            if sink is not None:
                sink.add(new)
            done += len(new)
            progress(done, total)
    finally:
        if sink is not None:
            sink.close()
    return ordered(rows, planned)


def _report(args: argparse.Namespace, rows: list[dict[str, Any]], kept: list[dict[str, Any]]) -> None:
    """The rows on stdout without -o; with it, one line of what was written."""
    from onnxroof.cli.common import emit
    from onnxroof.report.census import render_census
    from onnxroof.report.format import output_width

    if not args.output:
        emit(render_census(rows, args.format or "table", width=output_width(None)), None)
        return
    failed = sum(bool(r.get("error")) for r in rows)
    new = len(rows) - len(kept)
    print(f"wrote {len(rows)} rows to {args.output}: {new} new, {len(kept)} kept from before, {failed} with an error")
