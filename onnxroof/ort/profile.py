"""Per-node times from onnxruntime's profiler, mapped back to the nodes of the original graph.

onnxruntime does not run the graph it is given: it folds constants, drops Identity and Dropout, fuses
Conv+BatchNormalization+activation, Gemm+activation and MatMul+Add, and on CPUs rewrites convolutions into its
blocked NCHWc layout with reorder kernels in between. One profiled session both runs the model and saves the
graph it runs (the engine graph), so that every kernel time belongs to a node of a known graph; those engine
nodes are then tied back to the original nodes they compute.

Which original node each engine node computes is worked out in ``onnxroof.ort.mapping``.
"""

from __future__ import annotations

import bisect
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto

from onnxroof.errors import UserError
from onnxroof.ort.mapping import map_nodes
from onnxroof.ort.measure import fast_estimate
from onnxroof.ort.session_spec import DEFAULT_SESSION, SessionSpec
from onnxroof.ort.sessions import RunnableModel

FLOOR_S = 5e-6
"""A kernel whose median is below this is floor-dominated: onnxruntime spends a few microseconds per kernel on
dispatch, output allocation and the profiler's own bookkeeping, so such a time says more about that overhead
than about the kernel's work, and says little about where the kernel sits on the roofline."""

_KERNEL_SUFFIX = "_kernel_time"


@dataclass(frozen=True)
class EngineNode:
    """One node of the engine graph, its kernel time over the profiled runs (the median, and the fast estimate
    of measure.fast_estimate) and the original nodes it computes (none for an engine-only kernel such as an
    NCHWc reorder)."""

    name: str
    op_type: str
    domain: str
    provider: str | None
    median_s: float | None
    covers: tuple[str, ...]
    engine_only: bool
    floor_dominated: bool
    fast_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields above."""
        return {
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "provider": self.provider,
            "median_s": self.median_s,
            "fast_s": self.fast_s,
            "covers": list(self.covers),
            "engine_only": self.engine_only,
            "floor_dominated": self.floor_dominated,
        }


@dataclass(frozen=True)
class Unmapped:
    """An original node that no engine node computes, and why."""

    name: str
    op_type: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields above."""
        return {"name": self.name, "op_type": self.op_type, "reason": self.reason}


@dataclass(frozen=True)
class NodeProfile:
    """Per-kernel times of one profiled session, the engine graph they belong to, and how it maps to the original.

    ``engine_model`` is the graph that was profiled (weights not included), its nodes named as in ``nodes``, so
    that analyzing it costs exactly the kernels that were timed. ``mapping`` takes an original node name (as the
    analysis names it) to the engine node that computes it.
    """

    model: str
    provider: str
    requested_provider: str
    threads: int
    opt_level: str
    runs: int
    warmup: int
    run_median_s: float
    nodes: tuple[EngineNode, ...]
    unmapped: tuple[Unmapped, ...]
    mapping: Mapping[str, str]
    engine_model: ModelProto = field(repr=False, compare=False)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def kernel_sum_s(self) -> float:
        """The sum of the kernels' medians: the run time less the framework's own work between kernels."""
        return sum(n.median_s or 0.0 for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the engine model itself is left out)."""
        return {
            "model": self.model,
            "provider": self.provider,
            "requested_provider": self.requested_provider,
            "threads": self.threads,
            "opt_level": self.opt_level,
            "runs": self.runs,
            "warmup": self.warmup,
            "run_median_s": self.run_median_s,
            "kernel_sum_s": self.kernel_sum_s,
            "floor_s": FLOOR_S,
            "nodes": [n.to_dict() for n in self.nodes],
            "unmapped": [u.to_dict() for u in self.unmapped],
            "mapping": dict(self.mapping),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


# -------------------------------------------------------------------------------------------------------------
# Profiling


def profile_nodes(
    runnable: RunnableModel,
    session: SessionSpec = DEFAULT_SESSION,
    *,
    runs: int = 20,
    warmup: int = 3,
    feeds: Mapping[str, Any] | None = None,
) -> NodeProfile:
    """Profile ``runs`` runs (after ``warmup``) in one session of ``session`` that also saves its optimized graph,
    and map each kernel's median time to the engine node it ran and the original nodes that node computes.

    The trace and the saved graph live in a temporary directory that is removed on return, on errors and on
    KeyboardInterrupt; the caller's model is left unchanged. ``feeds`` default to random inputs. At opt level
    "disable" weights stored as ConstantOfShape become initializers first, as in ``measure``.
    """
    from onnxroof.load import STRIPPED, graph_nodes
    from onnxroof.ort.measure import prepare_for_level
    from onnxroof.ort.sessions import random_feeds

    if runs < 1:
        raise UserError(f"profiling needs at least one run, got {runs}", "pass --runs 1 or more")
    if warmup < 0:
        raise UserError(f"warm-up runs cannot be negative, got {warmup}", "pass --warmup 0 or more")
    feeds = dict(feeds) if feeds is not None else random_feeds(runnable)
    original = runnable.model
    originals = graph_nodes(original.graph)
    notes = list(runnable.notes)
    model = original
    if session.opt_level == "disable":  # a copy, named while its node indices are still the analysis's
        model = ModelProto()
        model.CopyFrom(original)
        _name_unnamed(model)
        notes += prepare_for_level(model, session.opt_level)

    renamed = _name_unnamed(model)
    try:
        with tempfile.TemporaryDirectory(prefix="onnxroof-profile-") as tmp:
            engine_model, events, actual = _profile_session(model, session, tmp, feeds, runs=runs, warmup=warmup)
    finally:
        for node, had_field in renamed:  # the caller's model is left as it was, byte for byte
            if had_field:
                node.name = ""
            else:
                node.ClearField("name")
    _mark_weights_absent(engine_model.graph, STRIPPED)

    run_events, run_times = split_runs(events, runs)
    engine = list(engine_model.graph.node)
    kernels = assign_events(run_events, engine)
    engine_inits = {t.name for t in engine_model.graph.initializer}
    assigned, reasons = map_nodes(originals, engine, engine_inits, {t.name: t for t in original.graph.initializer})
    names = engine_names(engine, kernels.names)
    covers: dict[int, list[str]] = {}
    for i, j in sorted(assigned.items()):
        covers.setdefault(j, []).append(originals[i].name)
    nodes = _engine_nodes(engine, names, kernels, covers)
    for proto, name in zip(engine_model.graph.node, names):  # after mapping, which reads onnxruntime's names
        proto.name = name
    return NodeProfile(
        model=runnable.name,
        provider=actual,
        requested_provider=session.provider_name,
        threads=session.threads,
        opt_level=session.opt_level,
        runs=len(run_times),
        warmup=warmup,
        run_median_s=float(np.median(run_times)) if run_times else 0.0,
        nodes=nodes,
        unmapped=tuple(Unmapped(originals[i].name, originals[i].op_type, why) for i, why in sorted(reasons.items())),
        mapping={originals[i].name: names[j] for i, j in sorted(assigned.items())},
        engine_model=engine_model,
        notes=tuple(notes),
        warnings=tuple(_profile_warnings(originals, kernels.orphans, actual)),
    )


def _engine_nodes(
    engine: Sequence[NodeProto], names: Sequence[str], kernels: Kernels, covers: Mapping[int, Sequence[str]]
) -> tuple[EngineNode, ...]:
    """The result rows: each engine node with its median kernel time and the original nodes it covers."""
    nodes = []
    for j, proto in enumerate(engine):
        times = kernels.times.get(j)
        median = float(np.median(times)) if times else None
        nodes.append(
            EngineNode(
                name=names[j],
                op_type=proto.op_type,
                domain=proto.domain,
                provider=kernels.providers.get(j),
                median_s=median,
                covers=tuple(covers.get(j, ())),
                engine_only=not covers.get(j),
                floor_dominated=median is not None and median < FLOOR_S,
                fast_s=fast_estimate(times) if times else None,
            )
        )
    return tuple(nodes)


def _profile_warnings(originals: Sequence[Any], orphans: int, provider: str) -> list[str]:
    """What makes a profile harder to read: repeated node names, kernels of no known node, CUDA host timing."""
    warnings = []
    duplicates = _duplicates(n.name for n in originals)
    if duplicates:
        shown = ", ".join(duplicates[:3])
        warnings.append(f"{len(duplicates)} node name(s) occur more than once ({shown}): their mapping is ambiguous")
    if orphans:
        warnings.append(f"{orphans} kernel event(s) per run matched no node of the optimized graph and were left out")
    if provider == "CUDAExecutionProvider":
        warnings.append(
            "onnxruntime's profiler times CUDA kernels on the host: launches are asynchronous, so CUDA node times "
            "can show launch cost rather than GPU time"
        )
    return warnings


def _profile_session(
    model: ModelProto, session: SessionSpec, tmp: str, feeds: Mapping[str, Any], *, runs: int, warmup: int
) -> tuple[ModelProto, list[dict[str, Any]], str]:
    """Run the profiled session with its files in ``tmp``: (the saved engine graph, the trace's events, the
    provider that ran)."""
    from onnxroof.ort.measure import checked_run
    from onnxroof.ort.optimized import inline_added_constants
    from onnxroof.ort.sessions import make_session

    engine_path = os.path.join(tmp, "engine.onnx")
    made, actual = make_session(model, session, profile_prefix=os.path.join(tmp, "trace"), optimized_path=engine_path)
    try:
        run = checked_run(made, feeds)
        for _ in range(warmup + runs):
            run()
    finally:
        # Ending the profile here writes the trace into tmp while it still exists, wherever this exits, so the
        # session's destructor has nothing left to write.
        trace_path = made.end_profiling()
        del made
    events = json.loads(Path(trace_path).read_text(encoding="utf-8"))
    engine_model = onnx.load(engine_path, load_external_data=False)
    inline_added_constants(engine_model, tmp)  # the attention masks' values, which decide subnormal work
    return engine_model, events, actual


def _name_unnamed(model: ModelProto) -> list[tuple[NodeProto, bool]]:
    """Give every unnamed top-level node the name the analysis uses ("<op_type>_<index>"); returns those nodes,
    each with whether its name field was set (to "") before.

    onnxruntime keeps node names through most of its rewrites, so the profile and the engine graph then speak
    of original nodes by the analysis's names."""
    renamed = []
    for index, node in enumerate(model.graph.node):
        if not node.name:
            renamed.append((node, node.HasField("name")))
            node.name = f"{node.op_type}_{index}"
    return renamed


def _duplicates(names: Iterable[str]) -> list[str]:
    """Names that occur more than once, in first-seen order."""
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for name in names:
        if name in seen:
            repeated[name] = None
        seen.add(name)
    return list(repeated)


def _mark_weights_absent(graph: onnx.GraphProto, marker: str) -> None:
    """Point external weights of the saved engine graph at a marker instead of the deleted side file, so that
    nothing later tries to read them from a path that no longer exists (or is another file by then)."""
    for init in graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            del init.external_data[:]
            entry = init.external_data.add()
            entry.key, entry.value = "location", marker


# -------------------------------------------------------------------------------------------------------------
# The trace


def split_runs(events: Sequence[Mapping[str, Any]], runs: int) -> tuple[list[list[Mapping[str, Any]]], list[float]]:
    """The top-level kernel events of each of the last ``runs`` runs (in time order), and each run's time in s.

    A run is a "model_run" session event; kernels are "Node" events named "<node>_kernel_time". Kernels of a
    control-flow node's subgraph run inside that node's own event and are left out: the node's time has them.
    """
    model_runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"), key=lambda e: e["ts"]
    )
    measured = model_runs[-runs:] if runs else []
    kernels = sorted(
        (e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(_KERNEL_SUFFIX)),
        key=lambda e: (e["ts"], -e["dur"]),
    )
    starts = [e["ts"] for e in kernels]
    per_run: list[list[Mapping[str, Any]]] = []
    for run in measured:
        first, last = bisect.bisect_left(starts, run["ts"]), bisect.bisect_right(starts, run["ts"] + run["dur"])
        top: list[Mapping[str, Any]] = []
        outer_end = -1
        for event in kernels[first:last]:
            if event["ts"] < outer_end and event["ts"] + event["dur"] <= outer_end:
                continue  # inside the previous top-level kernel: a subgraph's node
            top.append(event)
            outer_end = event["ts"] + event["dur"]
        per_run.append(top)
    return per_run, [run["dur"] * 1e-6 for run in measured]


@dataclass(frozen=True)
class Kernels:
    """Kernel events matched to engine nodes (by index): per-run times in s, the profiler's name for each node,
    the provider that ran it, and how many events per run matched no node."""

    times: dict[int, list[float]]
    names: dict[int, str]
    providers: dict[int, str]
    orphans: int


def assign_events(run_events: Sequence[Sequence[Mapping[str, Any]]], engine: Sequence[NodeProto]) -> Kernels:
    """Match each run's kernel events to engine nodes.

    Events are matched by node name; an unnamed engine node is profiled as "<op_type>_<index>" with an index the
    saved graph does not show, so leftover events go to unnamed nodes of the same op type in order. Nodes that
    share a name are matched by their order of execution.
    """
    by_name: dict[str, list[int]] = {}
    unnamed: dict[str, list[int]] = {}
    for j, node in enumerate(engine):
        if node.name:
            by_name.setdefault(node.name, []).append(j)
        else:
            unnamed.setdefault(node.op_type, []).append(j)
    times: dict[int, list[float]] = {}
    names: dict[int, str] = {}
    providers: dict[int, str] = {}
    orphans = 0
    for events in run_events:
        seen: dict[tuple[str, str], int] = {}
        run_total: dict[int, float] = {}
        run_orphans = 0
        for event in events:
            name = event["name"][: -len(_KERNEL_SUFFIX)]
            args = event.get("args", {})
            op = str(args.get("op_name", ""))
            key, candidates = (("name", name), by_name[name]) if name in by_name else (("op", op), unnamed.get(op, []))
            k = seen.get(key, 0)
            seen[key] = k + 1
            if k >= len(candidates):
                run_orphans += 1
                continue
            j = candidates[k]
            run_total[j] = run_total.get(j, 0.0) + event["dur"] * 1e-6
            names.setdefault(j, name)
            if "provider" in args:
                providers.setdefault(j, str(args["provider"]))
        for j, total in run_total.items():
            times.setdefault(j, []).append(total)
        orphans = max(orphans, run_orphans)
    return Kernels(times, names, providers, orphans)


def engine_names(engine: Sequence[NodeProto], event_names: Mapping[int, str]) -> list[str]:
    """A unique name per engine node: its own, else the profiler's ("<op_type>_<index>"), else the analysis
    convention; repeats get "_<n>" appended."""
    used: set[str] = set()
    names: list[str] = []
    for j, node in enumerate(engine):
        base = node.name or event_names.get(j) or f"{node.op_type}_{j}"
        name, n = base, 2
        while name in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        names.append(name)
    return names
