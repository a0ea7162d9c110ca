"""Peak memory of a model run by onnxruntime on the CPU, measured as the resident set of a fresh process.

The measurement runs in a child process (``child_main`` in a new interpreter) so that what the caller has
already allocated (other sessions, numpy arrays, the Python heap's free lists) neither adds to the figures nor
hides the peak: a process's peak resident set only ever grows, and memory the caller freed but kept would be
reused by the session without showing. The model goes to the child through a temporary directory, removed
afterwards, with the request and the result beside it.

In the child, on Linux, the resident set is read from /proc/self/status: VmRSS (now) and VmHWM (the peak so
far). Making a session frees much of what it allocated (the parsed model, its weights' copies before they are
pre-packed, the optimizer's intermediate graphs), and the C library keeps that memory resident for the next
allocations: a run's activations would fill it without the resident set growing, and the runs would seem to add
nothing (a ResNet-18 added 0.5 MiB, its first convolution's output alone being 3.2 MB). So once the session is
made the child returns the freed memory to the OS (glibc's ``malloc_trim``) and reads the resident set the
session holds; then writing "5" to /proc/self/clear_refs (Linux 4.0 and later) resets VmHWM to it, so that the
peak covers the runs alone, counted from what the session holds. Where the reset is refused the peak also covers
the session's creation, and where the memory cannot be returned the runs' figure may read low: the result says
so. Where there is no /proc (macOS, the BSDs),
``resource.getrusage``'s ru_maxrss, the peak so far, stands in for every figure, and the result says so too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from onnx import ModelProto

from onnxroof.errors import UserError, first_line
from onnxroof.load.model_spec import ModelSpec, Source
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.ort.sessions import RunnableModel
from onnxroof.units import kernel_bytes

PROTOBUF_LIMIT = 2**31 - 2**20  # a model this large is saved with its weights in a separate file
_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_RESET_NOTE = (
    "the peak counter could not be reset after the session was made: the peak also covers the session's creation"
)
_MAXRSS_NOTE = (
    "no /proc/self/status here: every figure is ru_maxrss, the peak resident set so far at that point, so the "
    "baseline and the session's figure may read high and the additions low"
)
_TRIM_NOTE = (
    "the memory the session's creation freed could not be returned to the OS (no glibc malloc_trim): the runs "
    "may reuse it, and what they add may read low"
)


@dataclass(frozen=True)
class PeakMemory:
    """Resident memory of one process that made a session and ran the model ``runs`` times, in bytes.

    ``baseline_bytes`` is the resident set before the session (Python, numpy, onnxruntime and the inputs),
    ``session_rss_bytes`` the resident set once the session is made (with what its creation freed and the C
    library kept), ``held_rss_bytes`` the resident set once that freed memory is returned to the OS (what the
    session holds), ``run_peak_rss_bytes`` the highest resident set during the runs, counted from there, and
    ``peak_rss_bytes`` the process's highest of the session's and the runs'. The differences are what the model
    costs: ``session_bytes`` (what making the session took: weights, the buffers it allocates up front, what it
    freed and the process kept), ``held_bytes`` (what the session holds once made), ``run_added_bytes`` (what
    running it adds on top of the session it holds: activations, outputs, the arena's growth, kernels' scratch
    space) and ``peak_added_bytes`` (everything the model needed at its highest point, weights included)."""

    model: str
    arena: bool  # onnxruntime's CPU memory arena (SessionOptions.enable_cpu_mem_arena)
    pattern: bool  # onnxruntime's memory pattern planner (SessionOptions.enable_mem_pattern)
    threads: int
    opt_level: str
    runs: int
    baseline_bytes: int
    session_rss_bytes: int
    peak_rss_bytes: int
    source: str  # "VmHWM" (Linux /proc) or "ru_maxrss" (getrusage)
    peak_reset: bool  # whether the peak counter was reset once the session was made (then the peak is the runs')
    notes: tuple[str, ...] = ()
    held_rss_bytes: int | None = None  # None: as session_rss_bytes (the freed memory could not be returned)
    run_peak_rss_bytes: int | None = None  # None: as peak_rss_bytes

    @property
    def held_bytes(self) -> int:
        """What the session holds once made, the memory its creation freed returned to the OS."""
        return self._held - self.baseline_bytes

    @property
    def _held(self) -> int:
        return self.session_rss_bytes if self.held_rss_bytes is None else self.held_rss_bytes

    @property
    def session_bytes(self) -> int:
        """What making the session added: weights and the buffers it allocates up front."""
        return self.session_rss_bytes - self.baseline_bytes

    @property
    def peak_added_bytes(self) -> int:
        """What the model needed at its highest point, over the process before the session."""
        return self.peak_rss_bytes - self.baseline_bytes

    @property
    def run_added_bytes(self) -> int:
        """What running the model added at its highest point, over what the session holds."""
        run_peak = self.peak_rss_bytes if self.run_peak_rss_bytes is None else self.run_peak_rss_bytes
        return max(run_peak - self._held, 0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the fields above and the three differences, tuples as lists."""
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["session_bytes"] = self.session_bytes
        data["peak_added_bytes"] = self.peak_added_bytes
        data["held_bytes"] = self.held_bytes
        data["run_added_bytes"] = self.run_added_bytes
        return data


def measure_peak_memory(
    model: ModelSpec | RunnableModel | Source,
    *,
    arena: bool = True,
    pattern: bool = True,
    threads: int = 1,
    runs: int = 3,
    opt_level: str = "all",
    timeout_s: float = 300.0,
) -> PeakMemory:
    """The peak resident memory of ``runs`` runs of the model on random inputs, on onnxruntime's CPU provider,
    in a fresh process.

    ``arena`` and ``pattern`` switch onnxruntime's CPU memory arena and memory pattern planner (both on by
    default in onnxruntime); ``threads`` and ``opt_level`` are the CPU session's. A failure in the child process,
    a timeout after ``timeout_s`` seconds included, is a UserError with the child's last error line. Nothing is
    left on disk."""
    from onnxroof.ort.measure import prepare_for_level
    from onnxroof.ort.sessions import fixed_feeds, runnable_model

    SessionSpec(threads=threads, opt_level=opt_level)  # a UserError for settings no session can have
    if runs < 1:
        raise UserError(f"the peak needs at least one run, got {runs}", "pass 1 or more runs")
    runnable = model if isinstance(model, RunnableModel) else runnable_model(model)
    proto = ModelProto()
    proto.CopyFrom(runnable.model)
    notes = list(runnable.notes) + prepare_for_level(proto, opt_level)
    with tempfile.TemporaryDirectory(prefix="onnxroof-memory-") as folder:
        model_path = Path(folder) / "model.onnx"
        _save(proto, model_path)
        del proto
        known_path = Path(folder) / "known.npz"
        known: dict[str, Any] = fixed_feeds(runnable)  # Any: numpy's stubs match a ** dict to allow_pickle
        np.savez(known_path, **known)
        request = {
            "model": str(model_path),
            "known": str(known_path),
            "inputs": {name: [list(shape), elem] for name, (shape, elem) in runnable.inputs.items()},
            "arena": arena,
            "pattern": pattern,
            "threads": threads,
            "opt_level": opt_level,
            "runs": runs,
            "result": str(Path(folder) / "result.json"),
        }
        request_path = Path(folder) / "request.json"
        request_path.write_text(json.dumps(request), encoding="utf-8")
        result = _run_child(request_path, Path(folder) / "result.json", timeout_s)
    return PeakMemory(
        model=runnable.name,
        arena=arena,
        pattern=pattern,
        threads=threads,
        opt_level=opt_level,
        runs=runs,
        baseline_bytes=int(result["baseline"]),
        session_rss_bytes=int(result["session"]),
        peak_rss_bytes=int(result["peak"]),
        source=str(result["source"]),
        peak_reset=bool(result["peak_reset"]),
        notes=tuple(notes + list(result["notes"])),
        held_rss_bytes=int(result["held"]),
        run_peak_rss_bytes=int(result["run_peak"]),
    )


def _save(model: ModelProto, path: Path) -> None:
    """The model to ``path``, its weights in a file beside it when it is too large for one protobuf."""
    import onnx

    if model.ByteSize() < PROTOBUF_LIMIT:
        onnx.save_model(model, str(path))
    else:
        onnx.save_model(
            model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=path.name + ".data"
        )


def _run_child(request: Path, result: Path, timeout_s: float) -> dict[str, Any]:
    """Run the child process on ``request`` and read what it wrote to ``result``; its failure as a UserError."""
    # This onnxroof first on the child's path, ahead of its working directory, which may hold another one.
    root = str(Path(__file__).resolve().parents[2])
    code = (
        f"import sys; sys.path.insert(0, {root!r}); from onnxroof.ort.memory import child_main; "
        "raise SystemExit(child_main(sys.argv[1:]))"
    )
    hint = "check that the model runs with onnxroof measure"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(request)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"the memory measurement did not finish in {timeout_s:g} s", "raise the timeout or use fewer runs"
        ) from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or "").splitlines() if line.strip()]
        if lines:
            why = lines[-1][:300]
        elif done.returncode < 0:
            why = f"killed by signal {-done.returncode} (out of memory?)"
        else:
            why = f"exit status {done.returncode}"
        raise UserError(f"the memory measurement failed: {why}", hint)
    try:
        data: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UserError("the memory measurement's process gave no result", hint) from None
    return data


# -------------------------------------------------------------------------------------------------------------
# The child process


def read_status() -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of this process in bytes from /proc/self/status, or None where there is none."""
    try:
        with open(_STATUS, encoding="ascii") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        now, peak = kernel_bytes(fields["VmRSS"]), kernel_bytes(fields["VmHWM"])
    except (OSError, KeyError, ValueError):
        return None
    return (now, peak) if now is not None and peak is not None else None


def max_rss() -> int:
    """The peak resident set of this process so far in bytes, from getrusage: ru_maxrss is in bytes on macOS and
    in KiB on Linux and the BSDs."""
    import resource

    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024


def return_freed_memory() -> bool:
    """Hand the memory this process freed but the C library keeps back to the OS (glibc's ``malloc_trim(0)``,
    which since glibc 2.8 releases free pages anywhere in the heap); whether it could."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is None:
        return False
    trim(0)
    return True


def reset_peak() -> bool:
    """Reset VmHWM to the current resident set; whether it was reset. Linux 4.0 and later take "5" in
    /proc/self/clear_refs; earlier kernels refuse it (EINVAL), as do systems without /proc, and the write then
    fails. The write's success is the answer: the resident-set counters are per-CPU approximations, so the
    figures read around it cannot confirm a reset of a few pages."""
    try:
        with open(_CLEAR_REFS, "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def child_main(argv: list[str]) -> int:
    """The child process: read the request, measure, write the result; a failure as one line on stderr."""
    try:
        request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        result = _measure_here(request)
        Path(request["result"]).write_text(json.dumps(result), encoding="utf-8")
    except UserError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except Exception as exc:  # anything else still ends as one line the parent can show
        print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    return 0


def _measure_here(request: Mapping[str, Any]) -> dict[str, Any]:
    """Baseline, session, runs, peak, in this process. Inputs are made before the baseline: they are the
    caller's, not the model's."""
    import gc

    from onnxroof.ort.measure import checked_run
    from onnxroof.ort.sessions import ort, random_feeds, session_options

    rt = ort()
    shapes = {name: (tuple(shape), int(elem)) for name, (shape, elem) in request["inputs"].items()}
    with np.load(str(request["known"])) as known:
        values = {name: known[name] for name in known.files}
    feeds = random_feeds(RunnableModel(ModelProto(), "", shapes, values=values))
    options = session_options(SessionSpec(threads=int(request["threads"]), opt_level=str(request["opt_level"])))
    options.enable_cpu_mem_arena = bool(request["arena"])
    options.enable_mem_pattern = bool(request["pattern"])
    notes: list[str] = []
    gc.collect()
    status = read_status()
    baseline = status[0] if status else max_rss()
    try:
        session = rt.InferenceSession(str(request["model"]), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise UserError(f"onnxruntime cannot load the model: {first_line(exc)}") from exc
    status = read_status()
    created = status[0] if status else max_rss()
    gc.collect()
    trimmed = return_freed_memory()
    status = read_status()
    held = status[0] if status and trimmed else created
    reset = reset_peak()
    if status is None:
        notes.append(_MAXRSS_NOTE)
    elif not reset:
        notes.append(_RESET_NOTE)
    elif not trimmed:
        notes.append(_TRIM_NOTE)
    run = checked_run(session, feeds)
    for _ in range(int(request["runs"])):
        run()
    status = read_status()
    peak = status[1] if status else max_rss()
    return {
        "baseline": baseline,
        "session": created,
        "held": held,
        "run_peak": peak,
        "peak": max(peak, created),
        "source": "VmHWM" if status else "ru_maxrss",
        "peak_reset": reset,
        "notes": notes,
    }
