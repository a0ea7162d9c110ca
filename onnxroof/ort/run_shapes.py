"""Shapes from one onnxruntime run: the loader's fallback where shape inference leaves node outputs unknown and
every input is a static tensor (onnxroof.load.run_shapes says when it asks).

The run is one session on the CPU provider with one thread and graph optimizations off, so that every tensor
asked for is still there to be returned: onnxruntime returns graph outputs only, so each one becomes a graph
output of a copy of the model. Inputs are random of the right element types (zeros for integers, so that token
ids and indices are valid; false for booleans) and weights absent from disk are random of their declared shapes.
A run holds every weight in memory, so one whose weights would not fit in the memory available is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from onnx import ModelProto, TensorProto, ValueInfoProto

from onnxroof.errors import UserError
from onnxroof.load.run_shapes import ShapeRequest, ShapeRunFailed
from onnxroof.ort.sessions import make_session, random_feeds, runnable_model

# A run holds each weight about three times over: in the filled model, in its serialization handed to
# onnxruntime, and in onnxruntime's own initializers.
WEIGHT_COPIES = 3
MEMORY_MARGIN = 0.8  # the share of the available memory a run may take: the rest is left to the process and OS
GB = 1e9


def shapes_from_run(request: ShapeRequest) -> dict[str, tuple[int, tuple[int, ...]]]:
    """The element type and shape of each tensor ``request`` asks for that one run of the model produces as a
    tensor. A UserError where its weights would not fit in memory; ShapeRunFailed (with the reason) where
    onnxruntime cannot load or run it."""
    check_memory(request.weight_bytes, len(request.tensors))
    try:
        runnable = runnable_model(request.source, request.inputs, request.dims)
        model = with_outputs(runnable.model, request.tensors, request.dtypes)
        session, _ = make_session(model, "cpu", 1, "disable")
        feeds = random_feeds(runnable)
        values = run_for_values(session, list(request.tensors), feeds)
    except Exception as exc:  # onnxruntime's errors, and UserErrors about inputs it cannot be given
        raise ShapeRunFailed(first_line(exc)) from exc
    found: dict[str, tuple[int, tuple[int, ...]]] = {}
    for name, value in zip(request.tensors, values):
        if value.is_tensor():
            found[name] = (element_type(value.data_type()), tuple(value.shape()))
    return found


def check_memory(weight_bytes: float, tensors: int) -> None:
    """A UserError where a run's copies of the weights would not fit in the memory available."""
    needed = WEIGHT_COPIES * weight_bytes
    available = available_memory()
    if available is not None and needed > MEMORY_MARGIN * available:
        raise UserError(
            f"the shapes of {tensors} node output(s) need an onnxruntime run, and its weights "
            f"({weight_bytes / GB:.1f} GB, held {WEIGHT_COPIES} times over) would not fit in the "
            f"{available / GB:.1f} GB of memory available",
            "analyze it where more memory is free, or give those shapes in the model's value_info",
        )


def available_memory() -> int | None:
    """The bytes of memory available to a new allocation (MemAvailable of /proc/meminfo, else the free pages),
    or None where the system says neither."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def with_outputs(model: ModelProto, names: tuple[str, ...], dtypes: Mapping[str, int]) -> ModelProto:
    """``model`` (a runnable copy, changed in place) with each of ``names`` a graph output: typed with its
    element type where it is known, untyped elsewhere (onnxruntime types it)."""
    present = {o.name for o in model.graph.output}
    for name in names:
        if name in present:
            continue
        output = ValueInfoProto(name=name)
        if dtypes.get(name):
            output.type.tensor_type.elem_type = dtypes[name]
        model.graph.output.append(output)
    return model


def run_for_values(session: object, names: list[str], feeds: Mapping[str, object]) -> list:
    """The OrtValues of ``names`` from one run: OrtValues rather than arrays, so that every element type (numpy
    has no bfloat16 or float8) gives its shape."""
    from onnxruntime import OrtValue

    values = {k: v if isinstance(v, OrtValue) else OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}
    return session.run_with_ort_values(names, values)  # type: ignore[attr-defined]


def element_type(data_type: str) -> int:
    """An ONNX element type from onnxruntime's name of a tensor type ('tensor(float16)'); UNDEFINED where the
    name is not one."""
    name = data_type.removeprefix("tensor(").removesuffix(")").upper()
    try:
        return TensorProto.DataType.Value(name)
    except ValueError:
        return TensorProto.UNDEFINED


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (at most 160 characters), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__
