"""onnxruntime sessions for measuring: a runnable copy of a model, the providers a session really got, inputs.

Everything that talks to onnxruntime for ``measure``, ``calibrate`` and ``validate`` goes through here, so that
provider checks, thread settings and the handling of absent weights are written once; a session is made from a
``SessionSpec`` (session_spec.py), a runnable copy from a ``ModelSpec`` (onnxroof.load.model_spec). The graph
onnxruntime runs after its optimizations is optimized.py's. onnxruntime is imported lazily: the analysis pass
never needs it.
"""

from __future__ import annotations

import contextlib
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

from onnxroof.errors import UserError, first_line
from onnxroof.load import fix_inputs, read_model, runtime_inputs
from onnxroof.load.decoder import DecoderInputs, decoder_inputs
from onnxroof.load.model_spec import ModelSpec, Source, model_spec
from onnxroof.load.values import value_arrays
from onnxroof.ort.decoder_feeds import decoder_feeds
from onnxroof.ort.relax import open_inputs, refused_by_inference
from onnxroof.ort.session_spec import DEFAULT_SESSION, SessionSpec
from onnxroof.passes.input_shapes import at_input_shapes

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
    decoder: DecoderInputs | None = None  # a decoder step's inputs that must agree with its cache


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


def runnable_model(model: ModelSpec | Source, seed: int = 0) -> RunnableModel:
    """A copy of the model with its weights loaded (random where absent) and its input shapes fixed.

    The user's file is never modified. External weights are read when their file is there; a missing file, a
    short one, or weights stripped from the model are replaced by deterministic random values and said in
    ``notes``. The spec's ``inputs``/``dims`` fix shapes as in ``onnxroof analyze``, through the same repairs
    where they change a static dim (onnxroof.passes.input_shapes; what they repaired is in ``notes``); its
    ``values`` (``--value``) are the feeds of the inputs they name, whatever else feeds the others. A bare
    source is the model as stored.
    """
    spec = model_spec(model)
    source, shapes, dims = spec.source, spec.inputs, dict(spec.dims)
    proto, name = read_model(source)
    copy = ModelProto()
    copy.CopyFrom(proto)
    base = (
        Path(os.fspath(source)).parent
        if isinstance(source, (str, os.PathLike)) and not str(source).startswith("zoo:")
        else None
    )
    filled = _load_or_fill_weights(copy.graph, base, np.random.default_rng(seed))
    arrays = value_arrays(copy, spec.values, shapes, dims)
    reshaped = at_input_shapes(copy, shapes, dims) if shapes or dims else None
    if reshaped is None:
        fix_inputs(copy, shapes, dims)
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
    return RunnableModel(copy, name, typed, notes, arrays, decoder_inputs(proto))


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


def fixed_feeds(model: RunnableModel) -> dict[str, np.ndarray]:
    """The feeds random values must not replace: the decoder inputs that agree with its cache, and the values the
    user gave (which win)."""
    return {**(decoder_feeds(model.decoder, model.inputs) if model.decoder else {}), **model.values}


def random_feeds(model: RunnableModel, seed: int = 0) -> dict[str, Any]:
    """Random inputs of the right dtype and shape for every runtime input, as onnxruntime takes them: numpy
    arrays, or OrtValues for bfloat16 and float8 inputs (numpy has no such types). A decoder's masks, lengths
    and positions agree with its cache (decoder_feeds.py)."""
    rng = np.random.default_rng(seed)
    known = fixed_feeds(model)
    feeds: dict[str, Any] = {}
    for name, (shape, elem) in model.inputs.items():
        if name in known:
            feeds[name] = known[name]
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
    session: SessionSpec,
    *,
    profile_prefix: str | None = None,
    optimized_path: str | None = None,
    park_when_idle: bool = False,
) -> Any:
    """onnxruntime SessionOptions for ``session``: its intra-op threads (1 inter-op), its optimization level,
    optional profiling and an optional path to save the optimized graph to (weights over 1 KiB kept out of it).

    ``park_when_idle`` stops the session's pool threads spinning as soon as a run returns (they spin within a
    run as usual). Without it an idle pool keeps polling for work, onnxruntime's default, so the idle sessions a
    calibration keeps alive, or a model timed in turns with the reference block, would take CPU time from the
    session being timed."""
    rt = ort()
    options = rt.SessionOptions()
    options.intra_op_num_threads = session.threads
    options.inter_op_num_threads = 1
    options.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = {
        "disable": rt.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": rt.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": rt.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[session.opt_level]
    options.log_severity_level = 4  # fatal only: see ort()
    if session.threads == 1:
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


# protobuf serializes no message of 2 GiB or more: a larger model reaches onnxruntime as a file with its weights
# beside it.
PROTO_LIMIT = 2**31 - 1


def _serializable(model: ModelProto) -> bool:
    """Whether protobuf serializes the model (its size is refused, not counted, at 2 GiB and beyond)."""
    try:
        return model.ByteSize() < PROTO_LIMIT
    except Exception:  # protobuf's EncodeError, which its untyped package alone defines
        return False


def _inference_session(rt: Any, model: ModelProto | bytes, options: Any, providers: list[str]) -> Any:
    """An InferenceSession of ``model``: from its bytes, or where it is too large to serialize, from a temporary
    file whose weights are external (onnxruntime reads or maps them while it makes the session; the folder goes
    once it is made, or stays until the system clears it where a mapped file cannot be removed)."""
    if isinstance(model, bytes):
        return rt.InferenceSession(model, options, providers=providers)
    if _serializable(model):
        return rt.InferenceSession(model.SerializeToString(), options, providers=providers)
    copy = ModelProto()
    copy.CopyFrom(model)  # saving as external data rewrites the initializers it saves
    with tempfile.TemporaryDirectory(prefix="onnxroof-large-", ignore_cleanup_errors=True) as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save_model(copy, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin")
        del copy
        return rt.InferenceSession(path, options, providers=providers)


def make_session(
    model: ModelProto | bytes,
    session: SessionSpec = DEFAULT_SESSION,
    *,
    profile_prefix: str | None = None,
    optimized_path: str | None = None,
    park_when_idle: bool = False,
) -> tuple[Any, str]:
    """An InferenceSession as ``session`` specifies it, and the provider it really runs on.

    onnxruntime-gpu lists the CUDA provider even where there is no GPU and then falls back to the CPU without an
    error: only the session's own provider list is trusted. A fallback is a UserError unless the spec allows it.
    ``model`` may come serialized, for a caller that opens many sessions on one model.
    """
    rt = ort()
    wanted = session.provider_name
    if wanted == "CUDAExecutionProvider" and hasattr(rt, "preload_dlls"):
        try:  # CUDA/cuDNN from the nvidia-* wheels of the cuda extra, when installed; it prints what it misses
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                rt.preload_dlls()
        except Exception:
            pass
    providers = [wanted] + (["CPUExecutionProvider"] if wanted != "CPUExecutionProvider" else [])
    options = session_options(
        session, profile_prefix=profile_prefix, optimized_path=optimized_path, park_when_idle=park_when_idle
    )
    try:
        try:
            made = _inference_session(rt, model, options, providers)
        except Exception as exc:  # a branch not taken that cannot hold for the fixed input shapes: see relax.py
            if not refused_by_inference(exc) or (opened := open_inputs(model)) is None:
                raise
            made = _inference_session(rt, opened, options, providers)
    except Exception as exc:
        first = first_line(exc)
        raise UserError(
            f"onnxruntime cannot load the model: {first}", "check that the model runs with onnxruntime"
        ) from exc
    actual = made.get_providers()[0]
    if actual != wanted and not session.allow_fallback:
        raise UserError(
            f"asked for {wanted} but onnxruntime runs the model on {actual}",
            "install onnxroof[cuda] on a machine with an NVIDIA GPU, or pass --allow-fallback",
        )
    return made, actual
