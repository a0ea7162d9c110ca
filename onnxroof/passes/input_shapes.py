"""The model at the input shapes a user asks for (``--input NAME=SHAPE``, ``--dim NAME=VALUE``), for every command
that takes them.

Over a symbolic dim, writing the value asked into the inputs is all it takes (``load.inputs.fix_inputs``). Over a
static dim it is not: an export at static shapes stores the shapes inference found at its own size (value_info,
the graph outputs' shapes) and hard-codes that size in constants (Reshape targets, Expand shapes), so that
inference keeps the exported size and the analysis costs it without a word. A static dim asked to change
therefore goes through the repairs of the rewrite passes, with the stored shapes dropped and inferred afresh: the
dims but the batch through the input-size pass's repairs (:func:`.input_size.resize_inputs`), then a new batch
(dim 0 of every input) through the batch pass. What no repair handles (a position embedding of the exported
length added to the sequence, a Reshape target the repairs cannot read) stops with one line naming the node and
the size.

The loader sits below the passes and cannot import them: the callers that load a model for analysis hand
:func:`at_input_shapes` to ``load_graph`` (``reshape``), as they hand it a shape run, and onnxruntime's sessions
(``ort.sessions.runnable_model``) call it on the model they run, so that every command sees the same graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from onnx import ModelProto

from onnxroof.errors import UserError
from onnxroof.load.inputs import fix_inputs, runtime_inputs
from onnxroof.passes import Note, Refused, lean
from onnxroof.passes.batch import batch
from onnxroof.passes.input_size import resize_inputs
from onnxroof.passes.shape_repair import Shape, shape_of, shape_text

__all__ = ["Reshaped", "at_input_shapes"]

HINT = "the model was exported at static shapes and fixes this one; re-export it at the shape you want"


class Reshaped(NamedTuple):
    """The model at the shapes asked, and one line that says which constants the repairs changed (empty where
    none)."""

    model: ModelProto
    repaired: str


def at_input_shapes(
    model: ModelProto, inputs: Mapping[str, tuple[int, ...]], dims: Mapping[str, int]
) -> Reshaped | None:
    """``model`` (not modified) at the shapes ``inputs`` and ``dims`` ask for, where they change a static dim of
    an input; None where they change none (``fix_inputs`` writes them, as for any model).

    A UserError (exit 2) for what ``fix_inputs`` refuses (an unknown input, a wrong rank, an unresolved dim), for
    a new batch that not every input gets, and for a node that cannot take the new shapes, named with the
    constant and the size that fix it.
    """
    declared, wanted = _asked(model, inputs, dims)
    changed = {
        name: [i for i, d in enumerate(declared[name]) if isinstance(d, int) and d != wanted[name][i]]
        for name in wanted
    }
    if not any(changed.values()):
        return None
    current = _exported_sizes(lean(model), declared, wanted)  # the repairs copy it: weights' bytes left out
    notes: list[Note] = []
    new_batch = _new_batch(declared, wanted) if any(0 in positions for positions in changed.values()) else None
    try:
        # The other dims first, at the exported batch: a batch of 1 there leaves no doubt which entry of a
        # Reshape target holds a length ([1, 128, 768] is [batch, seq, hidden]); the batch pass then knows its own.
        sizes = {name: (_declared_shape(current, name)[:1] + shape[1:]) for name, shape in wanted.items()}
        rest = {name: shape for name, shape in sizes.items() if _declared_shape(current, name) != shape}
        if rest:
            asked_text = ", ".join(f"{name} {shape_text(shape)}" for name, shape in rest.items())
            result = resize_inputs(current, rest, "resized", f"at input {asked_text}")
            current, notes = result.model, notes + list(result.notes)
        if new_batch is not None:
            result = batch(current, new_batch)
            current, notes = result.model, notes + list(result.notes)
    except Refused as exc:
        raise UserError(f"{_asked_text(inputs, dims)}: {exc.message}", HINT) from exc
    _restore_weights(current, model)
    return Reshaped(current, _summary([note for note in notes if _repair(note, wanted)]))


def _declared_shape(model: ModelProto, name: str) -> tuple[int, ...]:
    """The declared shape of graph input ``name`` (0 for a dim that is not a number)."""
    vi = next(vi for vi in model.graph.input if vi.name == name)
    return tuple(d if isinstance(d, int) else 0 for d in shape_of(vi) or ())


def _asked(
    model: ModelProto, inputs: Mapping[str, tuple[int, ...]], dims: Mapping[str, int]
) -> tuple[dict[str, Shape], dict[str, tuple[int, ...]]]:
    """Each runtime input's declared shape and the shape asked for it (every dim a number), checked as
    ``fix_inputs`` checks them, on a copy of the graph's declarations alone (the weights stay where they are)."""
    skeleton = ModelProto()
    for field in ("input", "output", "value_info"):
        getattr(skeleton.graph, field).extend(getattr(model.graph, field))
    initializers = {t.name for t in model.graph.initializer} | {t.values.name for t in model.graph.sparse_initializer}
    fix_inputs(skeleton, inputs, dims, initializers)
    declared = {vi.name: shape_of(vi) or () for vi in runtime_inputs(model.graph, initializers)}
    wanted = {
        vi.name: tuple(int(d or 0) for d in shape_of(vi) or ()) for vi in runtime_inputs(skeleton.graph, initializers)
    }
    return declared, wanted


def _exported_sizes(
    model: ModelProto, declared: Mapping[str, Shape], wanted: Mapping[str, tuple[int, ...]]
) -> ModelProto:
    """``model`` (changed in place) with its inputs at their static dims and the values asked for the symbolic
    ones, and without the shapes it stores (value_info, the graph outputs'): the repairs infer them afresh."""
    for vi in model.graph.input:
        if vi.name not in wanted:
            continue
        for dim, old, new in zip(vi.type.tensor_type.shape.dim, declared[vi.name], wanted[vi.name]):
            if not isinstance(old, int):
                dim.Clear()
                dim.dim_value = new
    del model.graph.value_info[:]
    for out in model.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    return model


def _restore_weights(model: ModelProto, original: ModelProto) -> None:
    """Put ``original``'s initializers back into ``model`` (its reshaped lean copy, changed in place) where the
    repairs kept them: their bytes were left out for the repairs, which read small constants only."""
    weights = {init.name: init for init in original.graph.initializer}
    for init in model.graph.initializer:
        kept = weights.get(init.name)
        if kept is not None and list(kept.dims) == list(init.dims) and kept.data_type == init.data_type:
            init.CopyFrom(kept)


def _new_batch(declared: Mapping[str, Shape], wanted: Mapping[str, tuple[int, ...]]) -> int:
    """The batch every input is asked for; a UserError where the inputs are not all given the same one."""
    batches = {name: shape[0] if shape else None for name, shape in wanted.items()}
    if len(set(batches.values())) > 1:
        listed = ", ".join(
            f"{name} {'(a scalar)' if b is None else f'{declared[name][0]} -> {b}'}" for name, b in batches.items()
        )
        raise UserError(
            f"the inputs asked for change the batch (dim 0) of some inputs only: {listed}",
            "give every input the same new batch (--input NAME=SHAPE for each)",
        )
    return next(b for b in batches.values() if b is not None)


def _repair(note: Note, wanted: Mapping[str, tuple[int, ...]]) -> bool:
    """Whether a pass's note is a repair worth telling (not the inputs' new shapes, which were asked for, nor the
    outputs and value_info the passes declare)."""
    return note.node not in wanted and note.node != "value_info" and not note.change.startswith("output shape")


def _summary(repairs: list[Note]) -> str:
    """The line that says what the repairs changed: how many, and the first."""
    if not repairs:
        return ""
    more = f", and {len(repairs) - 1} more" if len(repairs) > 1 else ""
    return (
        f"the model hard-codes its exported shapes in {len(repairs)} place(s), repaired for the shapes "
        f"asked ({repairs[0]}{more})"
    )


def _asked_text(inputs: Mapping[str, tuple[int, ...]], dims: Mapping[str, int]) -> str:
    """The options as the command line spells them: ``--input x=8x3x224x224 --dim seq=384``."""
    words = [f"--input {name}={'x'.join(map(str, shape))}" for name, shape in inputs.items()]
    return " ".join(words + [f"--dim {name}={value}" for name, value in dims.items()])
