"""onnxruntime sessions for measuring: a runnable copy of a model, providers it really got, inputs, optimized graph.

Everything that talks to onnxruntime for ``measure``, ``calibrate`` and ``validate`` goes through here, so that
provider checks, thread settings and the handling of absent weights are written once. onnxruntime is imported
lazily: the analysis pass never needs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.ir import Graph
from onnxroof.load import fix_inputs, load_graph, parse_shape, read_model, runtime_inputs
from onnxroof.load.values import Value, value_arrays
from onnxroof.ort.relax import declare_inputs, open_inputs, refused_by_inference
from onnxroof.passes.input_shapes import at_input_shapes

PROVIDERS: Mapping[str, str] = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
OPT_LEVELS: tuple[str, ...] = ("disable", "basic", "extended", "all")
_RANDOM_WEIGHTS_NOTE = "weights absent: {count} initializer(s) filled with random values of the right shapes"
_NON_TENSOR_KINDS = {
    "sequence_type": "a sequence",
    "map_type": "a map",
    "optional_type": "an optional",
    "sparse_tensor_type": "a sparse tensor",
    "opaque_type": "an opaque value",
}


@dataclass(frozen=True)
class RunnableModel:
    """A model onnxruntime can run: every weight present (random where the file had none), inputs fixed."""

    model: ModelProto
    name: str
    inputs: Mapping[str, tuple[tuple[int, ...], int]]  # runtime input -> (shape, ONNX element type)
    notes: tuple[str, ...] = field(default_factory=tuple)
    values: Mapping[str, np.ndarray] = field(default_factory=dict)  # inputs whose value was given: their feeds


def ort() -> Any:
    """The onnxruntime module, or a UserError saying how to get it."""
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - onnxruntime is a dependency
        raise UserError("onnxruntime is not installed", "pip install onnxruntime (or onnxroof[cuda] for GPUs)") from exc
    # Fatal only: a provider fallback is reported by make_session, and a failing kernel by the UserError its
    # exception becomes (the log would print the same error again, in colour, before it).
    onnxruntime.set_default_logger_severity(4)
    return onnxruntime


def provider_name(provider: str) -> str:
    """'cpu' / 'cuda' (or a full onnxruntime provider name) -> the onnxruntime provider name."""
    key = provider.lower().removesuffix("executionprovider")
    if key in PROVIDERS:
        return PROVIDERS[key]
    raise UserError(f"unknown execution provider {provider!r}", "use cpu or cuda")


def runnable_model(
    source: str | os.PathLike | ModelProto,
    inputs: Mapping[str, tuple[int, ...] | str] | None = None,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
    values: Mapping[str, Value] | None = None,
) -> RunnableModel:
    """A copy of the model with its weights loaded (random where absent) and its input shapes fixed.

    The user's file is never modified. External weights are read when their file is there; a missing file, a
    short one, or weights stripped from the model are replaced by deterministic random values and said in
    ``notes``. ``inputs``/``dims`` fix shapes as in ``onnxroof analyze``, through the same repairs where they
    change a static dim (onnxroof.passes.input_shapes; what they repaired is in ``notes``); ``values``
    (``--value``) are the feeds of the inputs they name, whatever else feeds the others.
    """
    model, name = read_model(source)
    copy = ModelProto()
    copy.CopyFrom(model)
    base = (
        Path(os.fspath(source)).parent
        if isinstance(source, (str, os.PathLike)) and not str(source).startswith("zoo:")
        else None
    )
    filled = _load_or_fill_weights(copy.graph, base, np.random.default_rng(seed))
    shapes = {k: parse_shape(v) if isinstance(v, str) else tuple(v) for k, v in (inputs or {}).items()}
    arrays = value_arrays(copy, values or {}, shapes, dict(dims or {}))
    reshaped = at_input_shapes(copy, shapes, dict(dims or {})) if shapes or dims else None
    if reshaped is None:
        fix_inputs(copy, shapes, dict(dims or {}))
    else:
        copy = reshaped.model
    runtime = runtime_inputs(copy.graph)
    for vi in runtime:
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            raise UserError(
                f"input {vi.name!r} is {_NON_TENSOR_KINDS.get(kind or '', 'untyped')}, not a tensor: onnxroof makes "
                "and loads tensor inputs only",
                "measure a model whose inputs are tensors (onnxroof analyze costs this one)",
            )
    typed = {
        vi.name: (tuple(d.dim_value for d in vi.type.tensor_type.shape.dim), vi.type.tensor_type.elem_type)
        for vi in runtime
    }
    notes = ((_RANDOM_WEIGHTS_NOTE.format(count=filled),) if filled else ()) + (
        (reshaped.repaired,) if reshaped is not None and reshaped.repaired else ()
    )
    return RunnableModel(copy, name, typed, notes, arrays)


def _load_or_fill_weights(graph: onnx.GraphProto, base: Path | None, rng: np.random.Generator) -> int:
    """Load external initializers in place (subgraphs included); fill those whose bytes are absent. Returns how
    many were filled."""
    filled = 0
    for init in graph.initializer:
        if init.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in init.external_data}
        value = _read_external(init, info, base)
        if value is None:
            value = random_array(tuple(init.dims), init.data_type, rng)
            filled += 1
        loaded = numpy_helper.from_array(value, init.name)
        init.CopyFrom(loaded)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                filled += _load_or_fill_weights(attr.g, base, rng)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    filled += _load_or_fill_weights(sub, base, rng)
    return filled


def _read_external(init: TensorProto, info: Mapping[str, str], base: Path | None) -> np.ndarray | None:
    """The tensor's value from its external file, or None when the file or its bytes are not there."""
    location = info.get("location", "")
    if base is None or not location or location.startswith("#"):
        return None
    path = base / location
    dtype = onnx.helper.tensor_dtype_to_np_dtype(init.data_type)
    count = prod(init.dims)
    offset, length = int(info.get("offset", 0)), count * dtype.itemsize
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            raw = handle.read(length)
    except OSError:
        return None
    if len(raw) != length:
        return None
    return np.frombuffer(raw, dtype=dtype).reshape(tuple(init.dims)).copy()


def random_array(shape: tuple[int, ...], elem_type: int, rng: np.random.Generator) -> np.ndarray:
    """Deterministic values of an ONNX element type: small normal floats (no denormals, no overflow in deep
    nets), zeros for integer indices and shapes (valid for any Gather), random bytes for 8-bit types."""
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    if np.issubdtype(dtype, np.floating):  # an array even for shape (): arithmetic on a 0-d array gives a scalar
        return np.asarray(rng.standard_normal(shape, dtype=np.float32) * 0.05).astype(dtype)
    if dtype in (np.int8, np.uint8):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    if dtype == np.bool_:
        return np.zeros(shape, dtype=np.bool_)
    return np.zeros(shape, dtype=dtype)


# Element types onnx gives as ml_dtypes arrays, which onnxruntime takes only as OrtValues of their raw bits.
_BITS_VIEW: dict[int, type] = {TensorProto.BFLOAT16: np.uint16}
for _name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0"):
    if hasattr(TensorProto, _name):
        _BITS_VIEW[getattr(TensorProto, _name)] = np.uint8
# Sub-byte types: onnxruntime wants them packed two or four to a byte.
_PACKED = {getattr(TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2") if hasattr(TensorProto, n)}


def random_feeds(model: RunnableModel, seed: int = 0) -> dict[str, Any]:
    """Random inputs of the right dtype and shape for every runtime input, as onnxruntime takes them: numpy
    arrays, or OrtValues for bfloat16 and float8 inputs (numpy has no such types)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, Any] = {}
    for name, (shape, elem) in model.inputs.items():
        if name in model.values:
            feeds[name] = model.values[name]
            continue
        if elem in _PACKED:
            raise UserError(
                f"input {name!r} is {TensorProto.DataType.Name(elem).lower()}, a packed sub-byte type that onnxroof "
                "cannot make inputs of",
                "measure a variant whose inputs are 8-bit or wider (onnxroof analyze costs this one)",
            )
        value = random_array(shape, elem, rng)
        if elem in _BITS_VIEW:
            feeds[name] = ort().OrtValue.ortvalue_from_numpy_with_onnx_type(value.view(_BITS_VIEW[elem]), elem)
        else:
            feeds[name] = value
    return feeds


def load_feeds(path: str | os.PathLike, model: RunnableModel) -> dict[str, np.ndarray]:
    """Inputs from an .npz file, checked against the model's runtime inputs (names, shapes, dtypes); an input
    whose value was given (``--value``) takes that value, and the file need not hold it."""
    try:
        with np.load(os.fspath(path)) as data:
            feeds = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read inputs from {path}: {exc}", "pass an .npz written by numpy.savez") from None
    twice = sorted(set(model.values) & set(feeds))
    if twice:
        raise UserError(f"input {twice[0]!r} is given both by --value and in {path}", "give it once")
    feeds.update(model.values)
    missing = sorted(set(model.inputs) - set(feeds))
    if missing:
        raise UserError(
            f"{path} lacks input(s) {', '.join(missing)}", "its arrays must be named like the model's inputs"
        )
    for name, (shape, elem) in model.inputs.items():
        want = onnx.helper.tensor_dtype_to_np_dtype(elem)
        if feeds[name].dtype != want:
            raise UserError(
                f"input {name!r} in {path} is {feeds[name].dtype}, the model wants {want}", "save it with that dtype"
            )
        if tuple(feeds[name].shape) != shape:
            raise UserError(
                f"input {name!r} in {path} has shape {'x'.join(map(str, feeds[name].shape))}, the model wants "
                f"{'x'.join(map(str, shape))}",
                f"save it at that shape, or run the model at {'x'.join(map(str, feeds[name].shape))} "
                f"(--input {name}={'x'.join(map(str, feeds[name].shape))})",
            )
    return {name: feeds[name] for name in model.inputs}


def session_options(
    threads: int,
    opt_level: str = "all",
    *,
    profile_prefix: str | None = None,
    optimized_path: str | None = None,
    park_when_idle: bool = False,
) -> Any:
    """onnxruntime SessionOptions: ``threads`` intra-op threads (1 inter-op), an optimization level, optional
    profiling and an optional path to save the optimized graph to (weights over 1 KiB kept out of it).

    ``park_when_idle`` stops the session's pool threads spinning as soon as a run returns (they spin within a
    run as usual). Without it an idle pool keeps polling for work, onnxruntime's default, so the idle sessions a
    calibration keeps alive, or a model timed in turns with the reference block, would take CPU time from the
    session being timed."""
    rt = ort()
    if opt_level not in OPT_LEVELS:
        raise UserError(f"unknown optimization level {opt_level!r}", "use one of " + ", ".join(OPT_LEVELS))
    options = rt.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = {
        "disable": rt.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": rt.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": rt.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[opt_level]
    options.log_severity_level = 4  # fatal only: see ort()
    if threads == 1:
        # One thread should mean one: no spinning pool thread competing with the measured one.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if park_when_idle:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if optimized_path is not None:
        options.optimized_model_filepath = optimized_path
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", Path(optimized_path).name + ".data"
        )
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    return options


def make_session(
    model: ModelProto | bytes,
    provider: str = "cpu",
    threads: int = 1,
    opt_level: str = "all",
    *,
    allow_fallback: bool = False,
    profile_prefix: str | None = None,
    optimized_path: str | None = None,
    park_when_idle: bool = False,
) -> tuple[Any, str]:
    """An InferenceSession on ``provider`` and the provider it really runs on.

    onnxruntime-gpu lists the CUDA provider even where there is no GPU and then falls back to the CPU without an
    error: only the session's own provider list is trusted. A fallback is a UserError unless ``allow_fallback``.
    ``model`` may come serialized, for a caller that opens many sessions on one model.
    """
    rt = ort()
    wanted = provider_name(provider)
    if wanted == "CUDAExecutionProvider" and hasattr(rt, "preload_dlls"):
        try:  # CUDA/cuDNN from the nvidia-* wheels of the cuda extra, when installed; it prints what it misses
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                rt.preload_dlls()
        except Exception:
            pass
    providers = [wanted] + (["CPUExecutionProvider"] if wanted != "CPUExecutionProvider" else [])
    options = session_options(
        threads, opt_level, profile_prefix=profile_prefix, optimized_path=optimized_path, park_when_idle=park_when_idle
    )
    try:
        serialized = model if isinstance(model, bytes) else model.SerializeToString()
        try:
            session = rt.InferenceSession(serialized, options, providers=providers)
        except Exception as exc:  # a branch not taken that cannot hold for the fixed input shapes: see relax.py
            if not refused_by_inference(exc) or (opened := open_inputs(model)) is None:
                raise
            session = rt.InferenceSession(opened.SerializeToString(), options, providers=providers)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"onnxruntime cannot load the model: {first}", "check that the model runs with onnxruntime"
        ) from exc
    actual = session.get_providers()[0]
    if actual != wanted and not allow_fallback:
        raise UserError(
            f"asked for {wanted} but onnxruntime runs the model on {actual}",
            "install onnxroof[cuda] on a machine with an NVIDIA GPU, or pass --allow-fallback",
        )
    return session, actual


# The largest constant whose values are read back from an optimized graph's side file for its masks (64 MiB of
# float32): an attention mask is a few hundred thousand elements, a weight larger than this is no mask.
MAX_MASK_ELEMENTS = 1 << 24


def optimized_model(model: ModelProto, provider: str = "cpu", threads: int = 1, opt_level: str = "all") -> ModelProto:
    """The graph onnxruntime runs after its optimizations (fusions, NCHWc layout), without weight bytes.

    onnxruntime saves it while creating a session; large weights go to a side file that is not read back, so
    the result is analyzed like any model whose weights are absent.
    """
    with tempfile.TemporaryDirectory(prefix="onnxroof-opt-") as tmp:
        return onnx.load(_save_optimized(model, provider, threads, opt_level, tmp), load_external_data=False)


def _save_optimized(model: ModelProto, provider: str, threads: int, opt_level: str, folder: str) -> str:
    """Write onnxruntime's optimized graph into ``folder`` (large weights in a side file next to it); its path."""
    path = os.path.join(folder, "optimized.onnx")
    make_session(model, provider, threads, opt_level, allow_fallback=True, optimized_path=path)
    return path


def inline_added_constants(model: ModelProto, folder: str) -> None:
    """Read into ``model`` the values of its initializers that an Add node adds (an attention mask among them),
    from the side file in ``folder`` where they were saved: the folder is temporary, and
    :func:`with_softmax_masks` reads the masks' values later. Initializers of over ``MAX_MASK_ELEMENTS`` are
    left out."""
    added = {name for node in model.graph.node if node.op_type == "Add" and node.domain == "" for name in node.input}
    for init in model.graph.initializer:
        external = onnx.external_data_helper.uses_external_data(init)
        if init.name in added and external and prod(init.dims) <= MAX_MASK_ELEMENTS:
            onnx.external_data_helper.load_external_data_for_tensor(init, folder)


def with_softmax_masks(graph: Graph, model: ModelProto) -> Graph:
    """``graph`` (loaded from ``model``) with the values of the constant masks added to its Softmax inputs, where
    ``model`` holds them inline (:func:`inline_added_constants`): the loader keeps only small constants' values, and
    the masks decide which of the Softmax's elements underflow (``onnxroof.predict.subnormal``)."""
    from onnxroof.predict.subnormal import mask_candidates

    wanted = mask_candidates(graph)
    values = {
        init.name: numpy_helper.to_array(init)
        for init in model.graph.initializer
        if init.name in wanted and not onnx.external_data_helper.uses_external_data(init)
    }
    return dataclasses.replace(graph, constants={**graph.constants, **values}) if values else graph


def engine_graph(
    model: str | os.PathLike | ModelProto,
    device: Device,
    inputs: Mapping[str, tuple[int, ...] | str] | None = None,
    dims: Mapping[str, int] | None = None,
    values: Mapping[str, Value] | None = None,
) -> Graph:
    """The graph onnxruntime runs for ``model`` on this machine, with the calibrated profile's provider and
    threads (weights absent from disk are filled at random only to let onnxruntime build it). The constant masks
    added to a Softmax's input keep their values (``onnxroof.predict.subnormal``): where they send exp below the
    normal float range, the Softmax and the product after it run on subnormal floats."""
    runnable = runnable_model(model, inputs, dims, values=values)
    calibration = device.calibration
    provider = "cuda" if calibration is not None and calibration.provider.lower().startswith("cuda") else "cpu"
    threads = calibration.threads if calibration is not None else 1
    from onnxroof.ort.run_shapes import shapes_from_run  # it imports this module

    with tempfile.TemporaryDirectory(prefix="onnxroof-opt-") as tmp:
        optimized = onnx.load(_save_optimized(runnable.model, provider, threads, "all", tmp), load_external_data=False)
        declare_inputs(optimized, runnable.inputs)  # a load with the inputs left open saves them open
        inline_added_constants(optimized, tmp)
    graph = with_softmax_masks(load_graph(optimized, shape_run=shapes_from_run, values=runnable.values), optimized)
    return dataclasses.replace(graph, name=runnable.name)
