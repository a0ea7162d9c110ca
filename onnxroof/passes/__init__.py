"""Graph rewrites: each "what if" of a model as a pass that produces a valid, runnable model.

The contract every pass keeps (``onnxroof/passes/<name>.py``, one pass a file):

- A pass is a function ``model -> RewriteResult`` (its options bound with ``functools.partial`` or a closure).
  It never modifies the model it is given: it edits a copy (onnx-graphsurgeon's ``import_onnx`` reads the proto,
  ``export_onnx`` builds a new one).
- It checks its preconditions before it changes anything and raises :class:`Refused` naming the node and the
  reason where it does not apply ("Conv layer3.0.conv1 has group == C_in: already depthwise").
- Its result says whether anything changed and carries one :class:`Note` per change: the node, what it became,
  and the relative approximation error where the rewrite approximates (a factorized kernel, a narrower dtype).
- A weight whose values a pass does not need is carried over as it is; a pass that needs values it does not have
  (the model is graph-only: its external weight data is absent) either works on shapes alone and says so in its
  notes, or refuses.

:func:`compose` runs passes left to right and checks every result with ``onnx.checker`` (full check, which runs
shape inference). Reading and writing models, with the rules for external weights, is :mod:`.model_file`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from onnx import ModelProto

from onnxroof.errors import UserError

__all__ = [
    "ABSENT_VALUE",
    "Note",
    "Pass",
    "Refused",
    "RewriteResult",
    "check_model",
    "compose",
    "inferred_copy",
    "lean",
]

# What onnx's shape inference says where it needs the values of a tensor whose data is external (absent here).
ABSENT_VALUE = "Cannot parse data from external tensors"


@dataclass(frozen=True)
class Note:
    """One change a pass made: the node (or tensor) it touched, what it became, and the relative error of the
    approximation where there is one (``||approx - exact|| / ||exact||``, on weights or on outputs as the pass
    states)."""

    node: str
    change: str
    error: float | None = None

    def __str__(self) -> str:
        tail = f" (relative error {self.error:.2e})" if self.error is not None else ""
        return f"{self.node}: {self.change}{tail}"


@dataclass(frozen=True)
class RewriteResult:
    """What a pass returns: the new model, whether it differs from the input, and a note per change.

    ``graph_only`` is true when the model's weights are shapes without values (absent external data): the model
    can be analyzed but not run with its real weights.
    """

    model: ModelProto
    changed: bool
    notes: tuple[Note, ...] = ()
    graph_only: bool = False
    passes: tuple[str, ...] = field(default=())


class Refused(UserError):
    """A pass that does not apply to a model, with the node and the reason in the message."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint or "'onnxroof rewrite --help' says what each pass applies to")


Pass = Callable[[ModelProto], RewriteResult]


def lean(model: ModelProto) -> ModelProto:
    """A copy of ``model`` without the bytes of its weights larger than a small constant (their dims and dtypes
    stay): what shape inference and the checker need, and under protobuf's 2 GB limit whatever the weights weigh.
    Its external weights point at no file (:func:`.weights.mark_absent`), so that a graph-only model, whose data
    file is missing, passes the checker as one whose weights are there.
    """
    from onnxroof.load.read import read_model
    from onnxroof.passes.weights import mark_absent

    copy = read_model(model, weight_bytes=False)[0]
    mark_absent(copy)
    return copy


def inferred_copy(model: ModelProto) -> ModelProto:
    """A copy of ``model`` with the value_info onnx's shape inference gives, inferred on its lean copy (so that
    a model of 2 GB or more, which onnx cannot infer in one message, is inferred all the same)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(lean(model))
    out = ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    out.graph.value_info.extend(inferred.graph.value_info)
    return out


def check_model(model: ModelProto, what: str = "the rewritten model") -> None:
    """``onnx.checker``'s full check (which includes strict shape inference) of ``model``'s lean copy.

    A failure is a defect of the pass that produced the model, never the user's input, so it raises
    RuntimeError naming ``what``. Where inference stops at a value it needs that is absent (a Reshape target of a
    graph-only model), no check can follow the shapes past it, whatever the pass did: the graph's structure and
    types are checked without the strict inference.
    """
    import onnx

    copy = lean(model)
    try:
        onnx.checker.check_model(copy, full_check=True)
    except onnx.shape_inference.InferenceError as exc:
        if ABSENT_VALUE not in str(exc):
            raise RuntimeError(f"{what} fails onnx's full check: {exc}") from exc
        try:
            onnx.checker.check_model(copy)
        except onnx.checker.ValidationError as inner:
            raise RuntimeError(f"{what} fails onnx's check: {inner}") from inner
    except onnx.checker.ValidationError as exc:
        raise RuntimeError(f"{what} fails onnx's full check: {exc}") from exc


def compose(
    model: ModelProto, steps: Sequence[tuple[str, Pass]], *, graph_only: bool = False, check: bool = True
) -> RewriteResult:
    """Apply named passes left to right; each result is checked (see check_model) unless ``check`` is off.

    ``graph_only`` says the input's weights are shapes without values (see RewriteResult). The notes of all
    passes are concatenated in order; ``changed`` is true if any pass changed the model.
    """
    current = RewriteResult(model, False, (), graph_only)
    for name, step in steps:
        result = step(current.model)
        if check and result.changed:
            check_model(result.model, f"the model after {name}")
        current = RewriteResult(
            result.model,
            current.changed or result.changed,
            current.notes + result.notes,
            current.graph_only or result.graph_only,
            current.passes + (name,),
        )
    return current


def unchanged(model: ModelProto, notes: Iterable[Note] = ()) -> RewriteResult:
    """The result of a pass that had nothing to do."""
    return RewriteResult(model, False, tuple(notes))
