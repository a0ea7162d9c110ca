"""Benchmark: a census's rows per second in one process, in two, and on a Dask cluster of two workers; what the
executor adds to each task over a direct call; and the client's peak memory over a census of 1,000 models.

The set is the graph-only zoo (``zoo:*``) and the benchmark set (tools/export_models.py's, in
``benchmark-models/`` of onnxroof's cache folder; exporting it needs torch, so where it is absent the zoo runs
alone), or ``--models``; each on 10 catalog devices (data-centre, desktop and mobile GPUs, an edge module, server
and edge CPUs) at batches 1, 8, 32 and what-if precisions fp32, fp16, int8. The tasks are planned as ``onnxroof
census`` plans them: one per model and batch, with every device and precision. Each mode runs the same tasks:

  direct    run_task called in a loop in this process, no executor: the baseline of the executor's overhead
  local-1   InProcess, what ``census --jobs 1`` runs: one process, the baseline of the speedups
  pool-1    a process pool of one worker
  local-2   a process pool of two workers (``census --jobs 2``)
  dask-2    a Dask scheduler and two single-threaded workers this tool starts on 127.0.0.1 (tools/dask_cluster.py),
            or the workers of the cluster at ``--executor ADDRESS``

This process runs one task before the first mode, untimed, so that direct and local-1 start with their imports
done; so does every Dask worker (a cluster outlives a census). A process pool starts afresh for each census, as
``onnxroof census --jobs 2`` starts one, so its workers' start and imports are part of its time: on a set that
takes seconds they dominate, and ``--copies K`` lists each model K times to see the steady state.

Each task runs as ``census.timed_task``, which times run_task inside the worker. The executor's overhead per task
is (wall seconds x workers - the sum of the tasks' own seconds) / tasks, shown with its share of the mean task
time; "over direct" is the same against the direct loop's wall seconds, so that it also counts what a fresh
worker spends importing inside its first task. ``--repeat R`` runs the modes R times in turn and keeps each
mode's fastest round. The rows of every mode are compared: they must be the same rows.

Client memory: a census of ``--client-memory N`` model references (the zoo's names, or ``--models``, repeated to
N), each on the same devices, batches and precisions, planned and run through dask-2 (local-2 where no Dask mode
runs) by a fresh process that holds every row as ``onnxroof census`` does; its peak RSS (VmHWM) is the figure.

Targets: two workers reach at least 1.7x one process; the executor adds at most 10% per task over a direct call;
the client of a census of 1,000 graph-only models stays under 1 GB.

usage: python tools/bench_census.py [--models M1,M2] [--devices D1,D2] [--batches 1,8,32]
           [--precisions fp32,fp16,int8] [--modes direct,local-1,local-2,dask-2] [--executor tcp://HOST:PORT]
           [--copies K] [--repeat R] [--client-memory N] [--bench-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

DEVICES = (
    "h100-sxm",
    "a100-sxm4-80gb",
    "v100-sxm2",
    "mi300x",
    "t4",
    "rtx4090",
    "jetson-agx-orin",
    "xeon-8480",
    "graviton4",
    "raspberry-pi-5",
)
BATCHES = (1, 8, 32)
PRECISIONS = ("fp32", "fp16", "int8")
MODES = ("direct", "local-1", "pool-1", "local-2", "dask-2")
DEFAULT_MODES = ("direct", "local-1", "local-2", "dask-2")
DIRECT = "direct"  # the baseline of the overhead
BASELINE = "local-1"  # one process: the baseline of the speedups
DASK_WORKERS = 2
CLIENT_MODELS = 1000

TARGET_SPEEDUP = 1.7  # two workers over one process
TARGET_OVERHEAD = 0.10  # the executor's share of a task's time, over a direct call
TARGET_CLIENT_BYTES = 1e9  # 1 GB (decimal, as the project writes GB)


def note(message: str) -> None:
    """One progress line on stderr."""
    print(f"bench_census: {message}", file=sys.stderr, flush=True)


def split(text: str) -> list[str]:
    """A comma-separated option's values."""
    return [v.strip() for v in text.split(",") if v.strip()]


# ----------------------------------------------------------------------------------------------------------------
# The model set


def benchmark_set(folder: Path) -> list[str] | None:
    """The benchmark set's files from ``folder/manifest.json`` (those present); None where it was not exported."""
    manifest = folder / "manifest.json"
    if not manifest.exists():
        return None
    entries = json.loads(manifest.read_text())["models"]
    return [str(folder / e["file"]) for e in entries if (folder / e["file"]).exists()]


def model_set(models: str | None, bench_dir: Path | None) -> tuple[list[str], str]:
    """The models (``--models`` expanded, else the zoo and the benchmark set) and a line that says what they are."""
    from onnxroof.load.expand import expand_models

    if models:
        found = expand_models(split(models))
        return found, f"{len(found)} models (--models)"
    zoo = expand_models(["zoo:*"])
    if bench_dir is None:
        from onnxroof.ort.calibrate import cache_dir

        bench_dir = cache_dir() / "benchmark-models"
    bench = benchmark_set(bench_dir)
    if bench is None:
        line = f"{len(zoo)} models, the graph-only zoo; the benchmark set is not exported here"
        return zoo, line + " (tools/export_models.py writes it, with torch): the zoo alone"
    count = len(zoo) + len(bench)
    return zoo + bench, f"{count} models: the graph-only zoo ({len(zoo)}) and the benchmark set ({len(bench)})"


def cycled(models: Sequence[str], count: int) -> list[str]:
    """``count`` model references: ``models`` repeated, in order."""
    return [models[i % len(models)] for i in range(count)]


# ----------------------------------------------------------------------------------------------------------------
# The modes


@dataclass(frozen=True)
class Run:
    """One mode's census of the tasks: how many workers ran them, the rows (with an error: ``errors``; their
    ``digest``), the wall seconds and the sum of the tasks' own seconds (timed inside each task)."""

    mode: str
    workers: int
    tasks: int
    rows: int
    errors: int
    wall_s: float
    task_s: float
    digest: str

    def overhead_s(self) -> float:
        """What the executor adds to each task: the workers' wall time not spent inside a task, per task."""
        return (self.wall_s * self.workers - self.task_s) / self.tasks

    def over_direct_s(self, direct: Run) -> float:
        """What each task costs here beyond a direct call's share of ``direct``'s wall time."""
        return (self.wall_s * self.workers - direct.wall_s) / self.tasks


def digest(rows: Sequence[dict[str, Any]]) -> str:
    """The rows' fingerprint, whatever order they arrived in."""
    lines = sorted(repr(sorted(r.items())) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def direct_run(tasks: Sequence[Any]) -> Run:
    """The tasks' function called in a loop here: no executor."""
    from onnxroof.whatif.census import run_task

    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for task in tasks:
        rows += run_task(task)
    wall = time.perf_counter() - start
    return Run(DIRECT, 1, len(tasks), len(rows), _errors(rows), wall, wall, digest(rows))


def executor_run(mode: str, executor: Any, workers: int, tasks: Sequence[Any]) -> Run:
    """The tasks through ``executor`` as census.timed_task, each task's own seconds summed as they arrive."""
    from onnxroof.whatif.census import error_rows, one_line, timed_task

    rows: list[dict[str, Any]] = []
    inside = 0.0
    start = time.perf_counter()
    for done in executor.run(timed_task, tasks):
        if done.error is not None:
            rows += error_rows(done.task, one_line(done.error))
            continue
        got, seconds = done.result
        rows += got
        inside += seconds
    wall = time.perf_counter() - start
    return Run(mode, workers, len(tasks), len(rows), _errors(rows), wall, inside, digest(rows))


def _errors(rows: Sequence[dict[str, Any]]) -> int:
    """How many of ``rows`` hold an error."""
    return sum(bool(r.get("error")) for r in rows)


def run_mode(mode: str, tasks: Sequence[Any], address: str | None, dask_workers: int) -> Run:
    """One mode's census of ``tasks``."""
    from onnxroof.whatif.executors import InProcess, ProcessPool

    if mode == DIRECT:
        return direct_run(tasks)
    if mode == "local-1":
        return executor_run(mode, InProcess(), 1, tasks)
    if mode in ("pool-1", "local-2"):
        jobs = int(mode[-1])
        return executor_run(mode, ProcessPool(jobs), min(jobs, len(tasks)), tasks)
    from onnxroof.whatif.dask_executor import DaskExecutor

    assert address is not None
    return executor_run(mode, DaskExecutor(address), dask_workers, tasks)


def best_runs(modes: Sequence[str], tasks: Sequence[Any], address: str | None, workers: int, repeat: int) -> list[Run]:
    """Each mode's fastest of ``repeat`` rounds, the modes run in turn within a round."""
    best: dict[str, Run] = {}
    for round_ in range(repeat):
        for mode in modes:
            run = run_mode(mode, tasks, address, workers)
            note(f"{mode} (round {round_ + 1} of {repeat}): {run.rows} rows, {run.tasks} tasks in {run.wall_s:.2f} s")
            if mode not in best or run.wall_s < best[mode].wall_s:
                best[mode] = run
    return [best[mode] for mode in modes]


# ----------------------------------------------------------------------------------------------------------------
# The cluster


@contextmanager
def cluster_address(given: str | None, needed: bool) -> Iterator[str | None]:
    """The Dask scheduler's address: ``given`` (--executor), else that of a scheduler and DASK_WORKERS workers
    started here for as long as the context lasts where a mode ``needed`` it, else None."""
    if given or not needed:
        yield given
        return
    from tools.dask_cluster import dask_cluster

    note(f"starting a Dask scheduler and {DASK_WORKERS} single-threaded workers on 127.0.0.1")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        names = {f"w{i}": "" for i in range(DASK_WORKERS)}
        with dask_cluster(Path(tmp), names) as cluster:
            note(f"the cluster started in {time.perf_counter() - start:.1f} s")
            yield cluster.address


def warm_cluster(address: str, task: Any) -> int:
    """Run ``task`` once on every worker of the cluster (untimed: their imports done) and return how many tasks
    the cluster runs at once (its workers' threads)."""
    from distributed import Client

    from onnxroof.whatif.census import run_task

    with Client(address, set_as_default=False) as client:
        client.run(run_task, task)
        return sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())


# ----------------------------------------------------------------------------------------------------------------
# Client memory, measured in a process of its own


def memory_bytes(field: str) -> int | None:
    """A /proc/self/status figure in bytes (VmHWM: the peak RSS, VmRSS: the RSS now); None off Linux."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith(f"{field}:")), None)
    except OSError:
        return None


def peak_rss_bytes() -> int:
    """This process's peak RSS: VmHWM, else getrusage's ru_maxrss (bytes on macOS, KiB elsewhere)."""
    peak = memory_bytes("VmHWM")
    if peak is not None:
        return peak
    import resource

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def probe(spec: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The client's side of a census as ``onnxroof census`` runs it: plan, run through the Dask cluster at
    spec's address (else a pool of two), hold every row, order them; the RSS before the plan and the peak."""
    from onnxroof.api import get_device
    from onnxroof.whatif.census import census, ordered, plan, planned_keys
    from onnxroof.whatif.dask_executor import executor_for

    executor = executor_for(spec["address"]) if spec["address"] else executor_for("local", 2)
    devices = [get_device(d) for d in spec["devices"]]
    before = memory_bytes("VmRSS")
    start = time.perf_counter()
    args = (spec["models"], devices, spec["batches"], spec["precisions"])
    planned, tasks = planned_keys(*args), plan(*args)
    rows: list[dict[str, Any]] = []
    for new in census(tasks, executor):
        rows += new
    rows = ordered(rows, planned)
    seconds = time.perf_counter() - start
    return {"tasks": len(tasks), "rows": len(rows), "errors": _errors(rows), "seconds": seconds}, before


def client_memory(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The probe's figures from a fresh process (its peak RSS its own); None where it fails (said on stderr)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--client-probe"]
    done = subprocess.run(command, input=json.dumps(spec), capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        note("the client-memory census failed: " + (done.stderr.strip().splitlines() or ["no output"])[-1])
        return None
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def probe_main() -> int:
    """``--client-probe``: the spec on stdin, the figures as one JSON line on stdout."""
    figures, before = probe(json.loads(sys.stdin.read()))
    figures.update(start_rss_bytes=before, peak_rss_bytes=peak_rss_bytes())
    print(json.dumps(figures))
    return 0


# ----------------------------------------------------------------------------------------------------------------
# Figures, targets and the printout


def figures(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Each mode's figures: its run, rows/s, the speedup over local-1, the overhead per task and its share of the
    mean task time, over the tasks' own times and over the direct loop (None where a baseline did not run)."""
    by_mode = {r.mode: r for r in runs}
    baseline, direct = by_mode.get(BASELINE), by_mode.get(DIRECT)
    out = []
    for run in runs:
        mean = run.task_s / run.tasks
        over = run.over_direct_s(direct) if direct else None
        out.append(
            {
                **asdict(run),
                "rows_per_s": run.rows / run.wall_s,
                "speedup": baseline.wall_s / run.wall_s if baseline else None,
                "mean_task_s": mean,
                "overhead_per_task_s": run.overhead_s(),
                "overhead_share": run.overhead_s() / mean,
                "over_direct_per_task_s": over,
                "over_direct_share": over / (direct.wall_s / direct.tasks) if direct and over is not None else None,
            }
        )
    return out


@dataclass(frozen=True)
class Verdict:
    """A target, the figure measured against it and whether it was met (None: not measured)."""

    target: str
    figure: str
    met: bool | None


def speedup_verdicts(figs: Sequence[dict[str, Any]]) -> list[Verdict]:
    """Every mode of two workers or more against TARGET_SPEEDUP."""
    target = f"two workers at least {TARGET_SPEEDUP}x one process ({BASELINE})"
    found = [f for f in figs if f["workers"] >= 2]
    if not found:
        return [Verdict(target, "no mode of two workers ran", None)]
    return [
        Verdict(
            f"{f['mode']}: {target}",
            f"{BASELINE} did not run" if f["speedup"] is None else f"{f['speedup']:.2f}x",
            _at_least(f),
        )
        for f in found
    ]


def _at_least(fig: dict[str, Any]) -> bool | None:
    """Whether a mode's speedup reaches TARGET_SPEEDUP; None where local-1 did not run."""
    return None if fig["speedup"] is None else fig["speedup"] >= TARGET_SPEEDUP


def overhead_verdicts(figs: Sequence[dict[str, Any]]) -> list[Verdict]:
    """Every executor's overhead share against TARGET_OVERHEAD."""
    target = f"the executor adds at most {TARGET_OVERHEAD:.0%} per task over a direct call"
    found = [f for f in figs if f["mode"] != DIRECT]
    if not found:
        return [Verdict(target, "no executor ran", None)]
    return [
        Verdict(
            f"{f['mode']}: {target}",
            f"{f['overhead_share']:.1%} ({f['overhead_per_task_s'] * 1e3:.2f} ms a task)",
            f["overhead_share"] <= TARGET_OVERHEAD,
        )
        for f in found
    ]


def memory_verdict(memory: dict[str, Any] | None, count: int) -> Verdict:
    """The client's peak RSS against TARGET_CLIENT_BYTES."""
    target = f"a census of {count or CLIENT_MODELS} graph-only models stays under {TARGET_CLIENT_BYTES / 1e9:g} GB"
    target += " in the client"
    if memory is None:
        return Verdict(target, "--client-memory 0" if not count else "its census failed", None)
    peak = memory["peak_rss_bytes"]
    return Verdict(target, f"{peak / 1e9:.3f} GB peak RSS", peak < TARGET_CLIENT_BYTES)


def _cell(value: float | None, fmt: str, width: int) -> str:
    """A table cell: ``value`` in ``fmt``, or "-" where there is none."""
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{fmt}}"


def table(figs: Sequence[dict[str, Any]]) -> list[str]:
    """One line per mode, under a header."""
    lines = [
        f"{'mode':<8} {'workers':>7} {'tasks':>6} {'rows':>7} {'errors':>6} {'wall s':>8} {'rows/s':>8} "
        f"{'speedup':>7} {'task ms':>8} {'overhead ms':>11} {'share':>6} {'over direct ms':>14} {'share':>6}"
    ]
    for f in figs:
        over = f["over_direct_per_task_s"]
        lines.append(
            f"{f['mode']:<8} {f['workers']:>7} {f['tasks']:>6} {f['rows']:>7} {f['errors']:>6} {f['wall_s']:>8.2f} "
            f"{f['rows_per_s']:>8.1f} {_cell(f['speedup'], '.2f', 7)} {f['mean_task_s'] * 1e3:>8.2f} "
            f"{f['overhead_per_task_s'] * 1e3:>11.2f} {f['overhead_share']:>6.1%} "
            f"{_cell(None if over is None else over * 1e3, '.2f', 14)} {_cell(f['over_direct_share'], '.1%', 6)}"
        )
    return lines


LEGEND = (
    "speedup = rows/s over local-1's; task ms = the mean of the tasks' own times, timed inside each task; "
    "overhead ms = (wall x workers - the tasks' own times) / tasks, share = overhead / task ms; over direct = "
    "(wall x workers - the direct loop's wall) / tasks, share of the direct loop's time per task."
)


def memory_line(memory: dict[str, Any] | None, mode: str) -> str:
    """The client-memory census in one line."""
    if memory is None:
        return "client memory: not measured"
    start = memory["start_rss_bytes"]
    before = f", {start / 1e6:.0f} MB before the plan" if start is not None else ""
    return (
        f"client memory: {memory['rows']} rows of {memory['tasks']} tasks through {mode} in {memory['seconds']:.1f} s "
        f"({memory['errors']} with an error): peak RSS {memory['peak_rss_bytes'] / 1e6:.0f} MB{before}"
    )


def verdict_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """Each target with its figure and verdict, one a line."""
    said = {True: "met", False: "not met"}
    return ["targets:"] + [
        f"  {v.target}: not measured ({v.figure})" if v.met is None else f"  {v.target}: {v.figure}: {said[v.met]}"
        for v in verdicts
    ]


# ----------------------------------------------------------------------------------------------------------------
# The run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, checked: known modes, positive counts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=None, help="model patterns, comma separated (default: zoo:* and the set)")
    parser.add_argument("--devices", default=",".join(DEVICES), help="catalog devices, comma separated")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), help="batch sizes, comma separated")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="what-if precisions, comma separated")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument("--executor", default=None, metavar="ADDRESS", help="dask-2 on this cluster instead")
    parser.add_argument("--copies", type=int, default=1, help="list each model this many times")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the modes; each mode's fastest is kept")
    parser.add_argument("--client-memory", type=int, default=CLIENT_MODELS, metavar="N", help="0: not measured")
    parser.add_argument("--bench-dir", type=Path, default=None, help="the benchmark set's folder")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="save the figures")
    parser.add_argument("--client-probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [m for m in split(args.modes) if m not in MODES]
    if unknown or args.copies < 1 or args.repeat < 1 or args.client_memory < 0:
        parser.error(f"--modes takes {', '.join(MODES)}; --copies and --repeat at least 1; --client-memory 0 or more")
    return args


def header(models_line: str, args: argparse.Namespace, tasks: int, rows: int) -> list[str]:
    """The printout's first lines: the CPU, the models, the devices, batches and precisions, the tasks and rows."""
    from onnxroof.ort.calibrate import cpu_model
    from onnxroof.whatif.executors import default_jobs

    copies = f" x {args.copies} copies" if args.copies > 1 else ""
    return [
        f"census benchmark on {cpu_model()}, {default_jobs()} CPUs",
        f"models: {models_line}{copies}",
        f"devices: {args.devices}; batches {args.batches}; precisions {args.precisions}: {tasks} tasks, {rows} rows",
    ]


def main(argv: list[str] | None = None) -> int:
    """Plan the tasks, time every mode (on a cluster started here where a Dask mode needs one), measure the
    client's memory and print the figures and the targets' verdicts."""
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.client_probe:
        return probe_main()
    from onnxroof.api import get_device
    from onnxroof.whatif.census import plan, run_task

    models, models_line = model_set(args.models, args.bench_dir)
    devices = [get_device(d) for d in split(args.devices)]
    batches, precisions = [int(b) for b in split(args.batches)], split(args.precisions)
    tasks = plan(models * args.copies, devices, batches, precisions)
    if not tasks:
        raise SystemExit("nothing to run: give --devices, --batches and --precisions at least one value each")
    modes = split(args.modes)
    lines = header(models_line, args, len(tasks), sum(len(t.configs) for t in tasks))
    print("\n".join(lines), flush=True)
    run_task(tasks[0])  # this process's imports done before any mode is timed
    dask = [m for m in modes if m.startswith("dask")]
    with ExitStack() as stack:
        address = stack.enter_context(cluster_address(args.executor, bool(dask)))
        workers = warm_cluster(address, tasks[0]) if address and dask else 0
        runs = best_runs(modes, tasks, address, workers, args.repeat)
        memory_mode = "dask-2" if address and dask else "local-2"
        memory = measure_memory(args, models, address if dask else None, memory_mode)
    report(lines, runs, memory, memory_mode, args)
    return 0


def measure_memory(args: argparse.Namespace, models: list[str], address: str | None, mode: str) -> Any:
    """The client-memory census of ``--client-memory`` models (None where it is 0 or fails)."""
    if not args.client_memory:
        return None
    from onnxroof.load.expand import expand_models

    base = models if args.models else expand_models(["zoo:*"])
    note(f"client memory: a census of {args.client_memory} models through {mode}")
    spec = {
        "models": cycled(base, args.client_memory),
        "devices": split(args.devices),
        "batches": [int(b) for b in split(args.batches)],
        "precisions": split(args.precisions),
        "address": address,
    }
    return client_memory(spec)


def report(
    lines: list[str], runs: Sequence[Run], memory: dict[str, Any] | None, mode: str, args: argparse.Namespace
) -> None:
    """The table, the rows' agreement, the client memory and the targets' verdicts; --json saves them."""
    figs = figures(runs)
    agree = len({r.digest for r in runs}) <= 1
    verdicts = [*speedup_verdicts(figs), *overhead_verdicts(figs), memory_verdict(memory, args.client_memory)]
    out = ["", *table(figs), LEGEND, ""]
    out.append(f"rows: {'the same in every mode' if agree else 'NOT the same in every mode'}")
    out += [memory_line(memory, mode), "", *verdict_lines(verdicts)]
    print("\n".join(out))
    if args.json is not None:
        from onnxroof.atomic import write_text

        saved = {"header": lines, **settings(args), "modes": figs, "rows_agree": agree, "client_memory": memory}
        saved["targets"] = [asdict(v) for v in verdicts]
        write_text(args.json, json.dumps(saved, indent=2) + "\n")


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """What the run was asked for, as --json saves it."""
    from onnxroof.ort.calibrate import cpu_model
    from onnxroof.whatif.executors import default_jobs

    return {
        "cpu": cpu_model(),
        "cpus": default_jobs(),
        "models": args.models,
        "devices": split(args.devices),
        "batches": [int(b) for b in split(args.batches)],
        "precisions": split(args.precisions),
        "copies": args.copies,
        "repeat": args.repeat,
        "client_models": args.client_memory,
    }


if __name__ == "__main__":
    raise SystemExit(main())
