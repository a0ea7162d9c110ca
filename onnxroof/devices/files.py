"""Reading and writing device files, and the bundled catalog: one schema and one parser for both."""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import os
import re
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, released on its own
    import tomli as tomllib

from onnxroof import atomic
from onnxroof.devices.engines import parse_engine
from onnxroof.devices.schema import (
    CACHE_SCOPES,
    CEILING_NAMES,
    GPU_FIGURES,
    KINDS,
    OVERLAPS,
    PRECISIONS,
    TERMINAL_PRECISIONS,
    CacheLevel,
    Calibration,
    Ceiling,
    Device,
    FrozenMap,
    GpuFigures,
    Peak,
    Sourced,
    WeightReuse,
    WeightWait,
    limit_violations,
)
from onnxroof.errors import UserError

__all__ = ["catalog", "device_from_dict", "load_device", "save_device"]

# ---------------------------------------------------------------------------------------------------- parsing

_REQUIRED = ("name", "kind", "overlap", "peak_flops", "memory_bandwidth", "launch_overhead")
_OPTIONAL = (
    "memory_capacity",
    "caches",
    "engine",
    "run_overhead",
    "calibration",
    "ceilings",
    "dram_overlap",
    "network_factor",
    "weight_reuse",
    "conv_weight_wait",
    "softmax_underflow",
    "subnormal_product",
    "branch_overhead",
    "load_limit",
    "flop_limit",
    "gpu",
)
_FIELDS = _REQUIRED + _OPTIONAL
# Op classes no longer in the table (tools/ablation.py found they bought nothing): a profile calibrated before holds
# their ceilings, which are read past; its nodes take their fallback's.
RETIRED_CEILINGS = frozenset({"reorder_short", "cast", "pow_square", "pow_cube", "conv_border", "transpose"})
_INPUT_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SCHEMA_HINT = "see the device file format in the onnxroof.devices docstring, or copy an entry of `onnxroof devices`"


def _fail(where: str, problem: str, hint: str | None = None) -> UserError:
    return UserError(f"{where}: {problem}", hint=hint or _SCHEMA_HINT)


def _check_keys(table: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for name in table:
        if name not in allowed:
            close = difflib.get_close_matches(str(name), allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed fields: {', '.join(allowed)}"
            raise _fail(where, f"unknown field {name!r}", hint)


def _number(table: Mapping[str, Any], name: str, where: str, *, allow_zero: bool = False) -> float:
    if name not in table:
        raise _fail(where, f"missing required field '{name}'")
    raw = table[name]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise _fail(where, f"field '{name}' must be a number, got {raw!r}")
    value = float(raw)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise _fail(where, f"field '{name}' must be {'non-negative' if allow_zero else 'positive'}, got {raw!r}")
    return value


def _text(table: Mapping[str, Any], name: str, where: str) -> str:
    if name not in table:
        raise _fail(where, f"missing required field '{name}'")
    raw = table[name]
    if not isinstance(raw, str) or not raw.strip():
        raise _fail(where, f"field '{name}' must be a non-empty string, got {raw!r}")
    return raw.strip()


def _choice(table: Mapping[str, Any], name: str, choices: tuple[str, ...], where: str) -> str:
    value = _text(table, name, where)
    if value not in choices:
        raise _fail(where, f"field '{name}' must be one of {', '.join(choices)}, got {value!r}")
    return value


def _table(data: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    raw = data[name]
    if not isinstance(raw, Mapping):
        raise _fail(
            where,
            f"field '{name}' must be a table with 'value' and 'source', got {raw!r}",
            hint=f'write it as [{name}] with value = ... and source = "..." (every number needs a source)',
        )
    return raw


def _inputs(table: Mapping[str, Any], where: str) -> FrozenMap:
    """A figure's ``inputs``, the measured numbers it came from: a table of names (lower case, digits and
    underscores) to finite numbers; empty where the file has none (one written before they were recorded)."""
    raw = table.get("inputs", {})
    if not isinstance(raw, Mapping):
        raise _fail(where, f"field 'inputs' must be a table of names to numbers, got {raw!r}")
    out = {}
    for name, value in raw.items():
        if not _INPUT_NAME.fullmatch(str(name)):
            raise _fail(where, f"inputs: {name!r} is not a name of lower-case letters, digits and underscores")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise _fail(where, f"inputs: {name} must be a finite number, got {value!r}")
        out[str(name)] = float(value)
    return FrozenMap(out)


def _sourced(data: Mapping[str, Any], name: str, where: str, *, allow_zero: bool = False) -> Sourced:
    table = _table(data, name, where)
    here = f"{where}, {name}"
    _check_keys(table, ("value", "source", "inputs"), here)
    value = _number(table, "value", here, allow_zero=allow_zero)
    return Sourced(value, _text(table, "source", here), _inputs(table, here))


def _peak(table: Any, prec: str, where: str) -> Peak:
    here = f"{where}, peak_flops.{prec}"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table with value, dense and source, got {table!r}")
    _check_keys(table, ("value", "dense", "sparse_value", "source", "inputs"), here)
    value = _number(table, "value", here)
    if "dense" not in table:
        raise _fail(
            here,
            "missing required field 'dense'",
            hint="say dense = true for a dense figure, "
            "false for a 2:4-sparsity figure (store dense values as value, sparse ones as sparse_value)",
        )
    if not isinstance(table["dense"], bool):
        raise _fail(here, f"field 'dense' must be true or false, got {table['dense']!r}")
    sparse = None
    if "sparse_value" in table:
        sparse = _number(table, "sparse_value", here)
        if sparse < value:
            raise _fail(here, f"sparse_value {sparse:g} is below the dense value {value:g}")
    return Peak(value, table["dense"], _text(table, "source", here), sparse, _inputs(table, here))


def _cache(table: Any, index: int, where: str) -> CacheLevel:
    here = f"{where}, caches[{index}]"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table ([[caches]]), got {table!r}")
    _check_keys(table, ("level", "size", "bandwidth", "scope", "source", "inputs"), here)
    bandwidth = _number(table, "bandwidth", here) if "bandwidth" in table else None
    return CacheLevel(
        level=_text(table, "level", here),
        size=_number(table, "size", here),
        bandwidth=bandwidth,
        source=_text(table, "source", here),
        scope=_choice(table, "scope", CACHE_SCOPES, here),
        inputs=_inputs(table, here),
    )


def _points(raw: Any, where: str, zero: bool = False) -> tuple[tuple[float, float], ...]:
    """[[work, efficiency], ...] -> sorted tuple of pairs; work positive, efficiency positive (or zero with
    ``zero``), work distinct."""
    hint = "write e.g. compute = [[1e6, 0.3], [1e8, 0.8]]: pairs of [work, efficiency], both positive"
    if not isinstance(raw, list) or not raw:
        raise _fail(where, f"must be a non-empty array of [work, efficiency] pairs, got {raw!r}", hint)
    points = []
    for pair in raw:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in pair)
        ):
            raise _fail(where, f"each point must be [work, efficiency], got {pair!r}", hint)
        work, eff = float(pair[0]), float(pair[1])
        if not (math.isfinite(work) and math.isfinite(eff)) or work <= 0 or eff < 0 or (eff == 0 and not zero):
            raise _fail(where, f"work and efficiency must be positive and finite, got {pair!r}", hint)
        points.append((work, eff))
    points.sort()
    for (w0, _), (w1, _) in itertools.pairwise(points):
        if w0 == w1:
            raise _fail(where, f"two points at work {w0:g}", "give each work size once")
    return tuple(points)


def _ceiling(table: Any, name: str, where: str) -> Ceiling:
    here = f"{where}, ceilings.{name}"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table with compute and/or memory points and a source, got {table!r}")
    _check_keys(table, ("compute", "memory", "source"), here)
    if "compute" not in table and "memory" not in table:
        raise _fail(here, "needs a 'compute' or a 'memory' table of [work, efficiency] points")
    compute = _points(table["compute"], f"{here}.compute") if "compute" in table else ()
    memory = _points(table["memory"], f"{here}.memory") if "memory" in table else ()
    return Ceiling(compute, memory, _text(table, "source", here))


def _curve(table: Any, here: str, needs: str, zero: bool = False) -> tuple[tuple[tuple[float, float], ...], str]:
    """A curve table's points and source (``points = [[x, y], ...]``, ``source = "..."``); ``needs`` says what
    its points are, ``zero`` allows a y of 0."""
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table with points and a source, got {table!r}")
    _check_keys(table, ("points", "source"), here)
    if "points" not in table:
        raise _fail(here, f"needs 'points': {needs}")
    return _points(table["points"], f"{here}.points", zero=zero), _text(table, "source", here)


def _weight_reuse(table: Any, where: str) -> WeightReuse:
    return WeightReuse(
        *_curve(table, f"{where}, weight_reuse", "[[bytes one inference touches, speedup over DRAM], ...]")
    )


def _weight_wait(table: Any, where: str) -> WeightWait:
    needs = "[[weight bytes, share of their read at the DRAM bandwidth], ...]"
    return WeightWait(*_curve(table, f"{where}, conv_weight_wait", needs, zero=True))


def _calibration(table: Any, where: str) -> Calibration:
    here = f"{where}, calibration"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table, got {table!r}")
    # reference_flops_s is accepted and ignored: files written by suites 1-3 hold it, a lone MatMul's rate, which
    # says nothing of the reference block's time, so such a file reads without a reference reading.
    _check_keys(
        table,
        (
            "provider",
            "threads",
            "onnxruntime",
            "cpu",
            "date",
            "duration_s",
            "warnings",
            "profiler_overhead",
            "reference_time_s",
            "reference_flops_s",
            "suite",
        ),
        here,
    )
    threads, suite = _count(table.get("threads"), "threads", here), _count(table.get("suite", 1), "suite", here)
    warnings = table.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _fail(here, f"field 'warnings' must be an array of strings, got {warnings!r}")
    overhead = _number(table, "profiler_overhead", here, allow_zero=True) if "profiler_overhead" in table else None
    reference = _number(table, "reference_time_s", here) if "reference_time_s" in table else None
    return Calibration(
        provider=_text(table, "provider", here),
        threads=threads,
        onnxruntime=_text(table, "onnxruntime", here),
        cpu=_text(table, "cpu", here),
        date=_text(table, "date", here),
        duration_s=_number(table, "duration_s", here, allow_zero=True),
        warnings=tuple(warnings),
        profiler_overhead=overhead,
        reference_time_s=reference,
        suite=suite,
    )


def _count(value: Any, name: str, where: str) -> int:
    """``value`` when it is a positive integer (a TOML integer, not a boolean), else a UserError naming the field."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(where, f"field {name!r} must be a positive integer, got {value!r}")
    return value


def device_from_dict(key: str, data: Mapping[str, Any], *, origin: str | None = None) -> Device:
    """Validate one device's fields (as parsed from TOML) and build the Device; raises UserError naming the field.

    ``origin`` (a file path, or "catalog") only makes the error messages say where the device came from.
    """
    where = f"device {key!r}" + (f" in {origin}" if origin else "")
    if not isinstance(key, str) or not key.strip():
        raise _fail(where, "the device key must be a non-empty string")
    if not isinstance(data, Mapping):
        raise _fail(where, f"expected a table of device fields, got {type(data).__name__}")
    _check_keys(data, _FIELDS + ("key",), where)
    if "key" in data and data["key"] != key:
        raise _fail(where, f"field 'key' says {data['key']!r}, which contradicts the key {key!r} it is loaded as")
    for name in _REQUIRED:
        if name not in data:
            raise _fail(where, f"missing required field '{name}'")

    peaks_raw = data["peak_flops"]
    if not isinstance(peaks_raw, Mapping) or not peaks_raw:
        raise _fail(
            where,
            "field 'peak_flops' must be a table with at least one precision",
            hint="write [peak_flops.fp32] with value, dense and source",
        )
    _check_keys(peaks_raw, PRECISIONS, f"{where}, peak_flops")
    peaks = {prec: _peak(peaks_raw[prec], prec, where) for prec in PRECISIONS if prec in peaks_raw}
    if not any(prec in peaks for prec in TERMINAL_PRECISIONS):
        raise _fail(
            where,
            f"peak_flops must list at least one of {', '.join(TERMINAL_PRECISIONS)}",
            hint="every other precision falls back to one of these (see onnxroof.devices.FALLBACK)",
        )

    caches_raw = data.get("caches", [])
    if not isinstance(caches_raw, list):
        raise _fail(where, "field 'caches' must be an array of tables ([[caches]])")

    engine = release = None
    if "engine" in data:
        try:
            named, release = parse_engine(_text(data, "engine", where))
        except UserError as exc:
            raise _fail(where, exc.message, exc.hint) from exc
        engine = named.name

    ceilings_raw = data.get("ceilings", {})
    if not isinstance(ceilings_raw, Mapping):
        raise _fail(where, "field 'ceilings' must be a table of op classes ([ceilings.conv], ...)")
    ceilings_raw = {name: c for name, c in ceilings_raw.items() if name not in RETIRED_CEILINGS}
    _check_keys(ceilings_raw, CEILING_NAMES, f"{where}, ceilings")
    ceilings = {name: _ceiling(ceilings_raw[name], name, where) for name in CEILING_NAMES if name in ceilings_raw}

    device = Device(
        key=key.strip(),
        name=_text(data, "name", where),
        kind=_choice(data, "kind", KINDS, where),
        overlap=_choice(data, "overlap", OVERLAPS, where),
        peak_flops=FrozenMap(peaks),
        memory_bandwidth=_sourced(data, "memory_bandwidth", where),
        memory_capacity=_sourced(data, "memory_capacity", where) if "memory_capacity" in data else None,
        launch_overhead=_sourced(data, "launch_overhead", where, allow_zero=True),
        caches=tuple(_cache(c, i, where) for i, c in enumerate(caches_raw)),
        engine=engine,
        engine_release=release,
        run_overhead=_sourced(data, "run_overhead", where, allow_zero=True) if "run_overhead" in data else None,
        ceilings=FrozenMap(ceilings),
        calibration=_calibration(data["calibration"], where) if "calibration" in data else None,
        dram_overlap=_share(data, "dram_overlap", where) if "dram_overlap" in data else None,
        network_factor=_sourced(data, "network_factor", where) if "network_factor" in data else None,
        weight_reuse=_weight_reuse(data["weight_reuse"], where) if "weight_reuse" in data else None,
        conv_weight_wait=_weight_wait(data["conv_weight_wait"], where) if "conv_weight_wait" in data else None,
        softmax_underflow=_sourced(data, "softmax_underflow", where, allow_zero=True)
        if "softmax_underflow" in data
        else None,
        subnormal_product=_sourced(data, "subnormal_product", where, allow_zero=True)
        if "subnormal_product" in data
        else None,
        branch_overhead=_sourced(data, "branch_overhead", where, allow_zero=True)
        if "branch_overhead" in data
        else None,
        load_limit=_sourced(data, "load_limit", where) if "load_limit" in data else None,
        flop_limit=_sourced(data, "flop_limit", where) if "flop_limit" in data else None,
        gpu=_gpu(data["gpu"], where) if "gpu" in data else None,
    )
    beyond = limit_violations(device)
    if beyond:
        raise _fail(
            where,
            f"{beyond[0]}: no core moves or computes that fast",
            "calibrate again: onnxroof calibrate --threads N",
        )
    return device


def _gpu(table: Any, where: str) -> GpuFigures:
    """A GPU's published figures (GpuFigures): each a sourced number, gemm_achievable one per precision."""
    here = f"{where}, gpu"
    if not isinstance(table, Mapping):
        raise _fail(here, f"must be a table of sourced figures ([gpu.sm_count], ...), got {table!r}")
    _check_keys(table, (*GPU_FIGURES, "gemm_achievable", "gemm_sustained"), here)

    def figure(name: str) -> Sourced | None:
        return _sourced(table, name, here) if name in table else None

    def rates(name: str) -> FrozenMap:
        return FrozenMap(_per_precision(table.get(name, {}), f"{here}.{name}"))

    return GpuFigures(
        sm_count=figure("sm_count"),
        boost_clock=figure("boost_clock"),
        sustained_clock=figure("sustained_clock"),
        gemm_achievable=rates("gemm_achievable"),
        gemm_sustained=rates("gemm_sustained"),
        dram_achievable=figure("dram_achievable"),
        l2_bandwidth=figure("l2_bandwidth"),
        shortest_kernel=figure("shortest_kernel"),
        nvlink_bandwidth=figure("nvlink_bandwidth"),
        pcie_bandwidth=figure("pcie_bandwidth"),
    )


def _per_precision(table: Any, here: str) -> dict[str, Sourced]:
    """A table of sourced figures by precision ([gpu.gemm_achievable.fp16], ...)."""
    if not isinstance(table, Mapping):
        raise _fail(here, "must be a table of precisions ([gpu.gemm_achievable.fp16], ...)")
    _check_keys(table, PRECISIONS, here)
    return {prec: _sourced(table, prec, here) for prec in PRECISIONS if prec in table}


def _share(data: Mapping[str, Any], name: str, where: str) -> Sourced:
    """A sourced fraction between 0 and 1."""
    item = _sourced(data, name, where, allow_zero=True)
    if item.value > 1:
        raise _fail(f"{where}, {name}", f"value {item.value:g} is a share and must be at most 1")
    return item


# ---------------------------------------------------------------------------------------------------- loading


# The bundled GPUs' published microbenchmark figures, by catalog key: the ``gpu`` table of each (GpuFigures), kept
# apart from the datasheets' catalog.toml because they come from other publications.
GPU_FIGURES_FILE = "gpu_figures.toml"


@functools.cache
def _bundled() -> Mapping[str, Device]:
    folder = resources.files("onnxroof.devices")
    data = tomllib.loads(folder.joinpath("catalog.toml").read_text(encoding="utf-8"))
    figures = tomllib.loads(folder.joinpath(GPU_FIGURES_FILE).read_text(encoding="utf-8"))
    unknown = sorted(set(figures) - set(data))
    if unknown:
        raise UserError(f"the bundled {GPU_FIGURES_FILE} names devices the catalog lacks: {', '.join(unknown)}")
    merged = {key: {**entry, "gpu": figures[key]} if key in figures else entry for key, entry in data.items()}
    return FrozenMap({key: device_from_dict(key, entry, origin="the bundled catalog") for key, entry in merged.items()})


def catalog() -> dict[str, Device]:
    """The bundled device catalog by key (parsed once; each call returns a fresh dict of the same Devices)."""
    return dict(_bundled())


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or "\\" in spec


def load_device(spec: str | os.PathLike[str]) -> Device:
    """A device by catalog key (``"v100-sxm2"``; case and ``_``/``-`` are forgiven) or from a .toml device file.

    A string counts as a path when it ends in ``.toml`` or contains a path separator; a path object always does.
    """
    if isinstance(spec, os.PathLike) or _looks_like_path(spec):
        return _load_file(Path(spec))
    devices = _bundled()
    name = str(spec).strip()
    if name in devices:
        return devices[name]
    folded = name.lower().replace("_", "-").replace(" ", "-")
    if folded in devices:
        return devices[folded]
    suggestions = [k for k in devices if folded and k.startswith(folded)]
    close = difflib.get_close_matches(folded, list(devices), n=3, cutoff=0.5)
    suggestions += [k for k in close if k not in suggestions]
    hint = "`onnxroof devices` lists the catalog; a path to a .toml file describes your own device"
    if suggestions:
        hint = f"did you mean {', '.join(suggestions[:3])}? " + hint
    raise UserError(f"unknown device {name!r}", hint=hint)


def _load_file(path: Path) -> Device:
    hint = "give a catalog key (`onnxroof devices` lists them) or the path of a .toml device file"
    if not path.exists():
        raise UserError(f"device file not found: {path}", hint=hint)
    if not path.is_file():
        raise UserError(f"device file is not a file: {path}", hint=hint)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"device file {path} is not valid TOML: {exc}", hint=_SCHEMA_HINT) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"device file {path} is not UTF-8 text: {exc}", hint=_SCHEMA_HINT) from None

    # A single table copied from the catalog ([my-gpu] with the fields inside) is accepted as well.
    if len(data) == 1 and not any(name in data for name in _FIELDS + ("key",)):
        ((key, inner),) = data.items()
        if isinstance(inner, Mapping):
            return device_from_dict(key, inner, origin=str(path))
    data = dict(data)
    key = data.pop("key", path.stem)
    if not isinstance(key, str):
        raise _fail(f"device file {path}", f"field 'key' must be a string, got {key!r}")
    return device_from_dict(key, data, origin=str(path))


def save_device(device: Device, path: str | os.PathLike[str]) -> None:
    """Write ``device`` as a device file at ``path``, atomically: a reader sees the old file or the new one."""
    atomic.write_text(path, device.to_toml())
