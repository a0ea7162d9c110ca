"""Shapes from one onnxruntime run: the loader's fallback where shape inference leaves node outputs unknown and
every input is a static tensor (onnxroof.load.fill_from_run says when it asks).

A run is one session on the CPU provider with one thread and graph optimizations off, so that every tensor
asked for is still there to be returned: onnxruntime returns graph outputs only, so each one becomes a graph
output of a copy of the model, and a tensor inside an If branch is reached by a run of a variant with the If
replaced by its branch (branches.py). Inputs are random of the right element types (zeros for integers, so
that token ids and indices are valid; false for booleans) and weights absent from disk are random of their
declared shapes. A run holds every weight in memory, so one whose weights would not fit in the memory
available is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from onnx import ModelProto, TensorProto, ValueInfoProto

from onnxroof.errors import UserError, first_line
from onnxroof.load.fill_from_run import ShapeRequest, ShapeRunFailed
from onnxroof.ort.branches import ELSE, THEN, Variant, ifs_reaching, inline
from onnxroof.ort.proc import memory_available
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.ort.sessions import make_session, random_feeds, runnable_model

# A run holds each weight about four times over: in the filled model, in the copy of it that a run's variant
# is, in that copy's serialization handed to onnxruntime, and in onnxruntime's own initializers.
WEIGHT_COPIES = 4
MAX_RUNS = 16  # runs of variants with If nodes replaced by their branches, to reach the tensors inside them
OTHER = {THEN: ELSE, ELSE: THEN}
MEMORY_MARGIN = 0.8  # the share of the available memory a run may take: the rest is left to the process and OS
GB = 1e9
# The CPU provider, one thread, graph optimizations off: every tensor asked for is still there to be returned.
SHAPE_SESSION = SessionSpec(opt_level="disable")


def shapes_from_run(request: ShapeRequest) -> dict[str, tuple[int, tuple[int, ...]]]:
    """The element type and shape of each tensor ``request`` asks for that a run of the model produces as a
    tensor. A UserError where its weights would not fit in memory; ShapeRunFailed (with the first reason) where
    onnxroof cannot make the model's inputs, or onnxruntime cannot load or run any variant of it.

    The first run is of the model as it is. A tensor inside an If branch is reached by running a variant with
    the If replaced by that branch (branches.py): the branch the run took (its condition among the outputs),
    and each other branch once; a variant whose run fails gives way to one per branch. At most MAX_RUNS runs.
    """
    check_memory(request.weight_bytes, len(request.tensors))
    try:
        runnable = runnable_model(request.model)
        feeds = ort_values(random_feeds(runnable))
    except Exception as exc:  # a UserError about inputs onnxroof cannot make, or a weight it cannot load
        raise ShapeRunFailed(first_line(exc, 160)) from exc
    base = runnable.model
    wanted = set(request.tensors)
    found: dict[str, tuple[int, tuple[int, ...]]] = {}
    reasons: list[str] = []
    queue = [Variant(list(base.graph.node), [])]
    runs = 0
    while queue and runs < MAX_RUNS and not wanted.issubset(found):
        variant = queue.pop(0)
        missing = wanted.difference(found)
        here = set(produced_here(variant))
        top = [name for name in request.tensors if name in missing and name in here]
        ifs = ifs_reaching(variant, missing)
        if not top and not ifs:
            continue
        # The branch each If takes is read from its condition where a node of this graph computes it.
        conditions = {index: variant.nodes[index].input[0] for index in ifs if variant.nodes[index].input[0] in here}
        outputs = list(dict.fromkeys([*top, *conditions.values()]))
        runs += 1
        try:
            model = variant_model(base, variant, outputs, request.dtypes)
            values = dict(zip(outputs, run_once(model, outputs, feeds)))
        except Exception as exc:  # onnxruntime's errors, as UserErrors or its own
            reasons.append(first_line(exc, 160))
            queue += [inline(variant, dict.fromkeys(ifs, side)) for side in (THEN, ELSE)] if ifs else []
            continue
        for name in top:
            if values[name].is_tensor():
                found[name] = (element_type(values[name].data_type()), tuple(values[name].shape()))
        taken = dict.fromkeys(ifs, THEN) | {
            index: THEN if taken_then(values[condition]) else ELSE for index, condition in conditions.items()
        }
        if ifs:
            queue.append(inline(variant, taken))
            queue += [inline(variant, {**taken, index: OTHER[side]}) for index, side in taken.items()]
    if not found and reasons:
        raise ShapeRunFailed(reasons[0])
    return found


def produced_here(variant: Variant) -> Iterator[str]:
    """The node outputs of a variant's own graph (not inside its If branches)."""
    for node in variant.nodes:
        yield from (o for o in node.output if o)


def variant_model(base: ModelProto, variant: Variant, outputs: Sequence[str], dtypes: Mapping[str, int]) -> ModelProto:
    """``base`` (the runnable model) with the variant's nodes and weights, and ``outputs`` among its outputs."""
    model = ModelProto()
    model.CopyFrom(base)
    del model.graph.node[:]
    model.graph.node.extend(variant.nodes)
    model.graph.initializer.extend(variant.weights)
    return with_outputs(model, tuple(outputs), dtypes)


def run_once(model: ModelProto, names: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
    """The OrtValues of ``names`` from one run of ``model`` in SHAPE_SESSION: OrtValues rather than arrays, so
    that every element type (numpy has no bfloat16 or float8) gives its shape."""
    session, _ = make_session(model, SHAPE_SESSION)
    return list(session.run_with_ort_values(list(names), feeds))


def ort_values(feeds: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs as OrtValues (random_feeds gives numpy arrays, and OrtValues for types numpy lacks)."""
    from onnxruntime import OrtValue

    return {k: v if isinstance(v, OrtValue) else OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}


def taken_then(condition: Any) -> bool:
    """Whether an If's condition (an OrtValue holding one boolean) selects its then branch."""
    return bool(np.asarray(condition.numpy()).reshape(-1)[0])


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
    available = memory_available()
    if available is not None:
        return available
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


def element_type(data_type: str) -> int:
    """An ONNX element type from onnxruntime's name of a tensor type ('tensor(float16)'); UNDEFINED where the
    name is not one."""
    name = data_type.removeprefix("tensor(").removesuffix(")").upper()
    try:
        return TensorProto.DataType.Value(name)
    except ValueError:
        return TensorProto.UNDEFINED
