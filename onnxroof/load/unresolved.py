"""Input shapes left open, named in one error: every runtime input with a dim that is not a number, and a hint
with values to give built from the model's own dim names (a batch of 1, a sequence of 128, a 224x224 image), in
the options of the command that meets it (``UnresolvedInputs.hint_for``)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from onnxroof.errors import UserError

if TYPE_CHECKING:  # the classes load with onnx's extension: a user error's hint needs neither
    from onnxroof.protos import ValueInfoProto

__all__ = [
    "EXAMPLE_BATCH",
    "EXAMPLE_SEQUENCE",
    "EXAMPLE_SIDE",
    "InputProblem",
    "UnresolvedInputs",
    "example_dims",
    "unresolved",
]


class InputProblem(NamedTuple):
    """A runtime input whose shape is not fully known: its declared dims (a number, a symbol, or None where
    unknown; None for the whole shape where none is declared) and the positions of those that are not numbers."""

    name: str
    dims: tuple[int | str | None, ...] | None
    open: tuple[int, ...]


def unresolved(vi: ValueInfoProto) -> InputProblem | None:
    """What is open in a tensor input's declared shape, None where it is static (or the input is no tensor)."""
    if not vi.type.HasField("tensor_type"):
        return None
    if not vi.type.tensor_type.HasField("shape"):
        return InputProblem(vi.name, None, ())
    dims: list[int | str | None] = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:  # 0 is a real dim: an empty tensor
            dims.append(d.dim_value)
        else:
            dims.append(d.dim_param or None)
    open_dims = tuple(i for i, d in enumerate(dims) if not isinstance(d, int))
    return InputProblem(vi.name, tuple(dims), open_dims) if open_dims else None


class UnresolvedInputs(UserError):
    """Every runtime input whose shape is left open, in one error: the message names each input and its open
    dims; the hint shows values to give, built from the model's own names (:func:`example_dims`), as the analysis
    commands take them (``--dim``, ``--input``). ``hint_for`` writes it for another set of options."""

    def __init__(self, problems: Sequence[InputProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(_described(p, i == 0) for i, p in enumerate(self.problems)))
        self.hint = self.hint_for({"--dim", "--input"})

    def hint_for(self, options: Collection[str]) -> str:
        """The hint in the options a command has: ``--dim``/``--input``; else ``--batch``/``--input-size``
        (the batch and input-size passes); else a command that writes the shapes in first."""
        examples = example_dims(self.problems)
        if "--dim" in options:
            return _dim_hint(self.problems, examples)
        return _pass_hint(self.problems, options)


def _described(problem: InputProblem, first: bool) -> str:
    """One input's part of the message: input 'images' has unresolved dims 'height', 'width' (the word
    "unresolved" in the first part only)."""
    head = f"input {problem.name!r}"
    if problem.dims is None:
        return f"{head} has no declared shape"
    named = [repr(problem.dims[i]) for i in problem.open if isinstance(problem.dims[i], str)]
    unknown = [str(i) for i in problem.open if not isinstance(problem.dims[i], str)]
    parts = []
    if named:
        parts.append(f"{'unresolved ' if first else ''}dim{'s' if len(named) > 1 else ''} " + ", ".join(named))
    if unknown:
        parts.append(f"unknown dim{'s' if len(unknown) > 1 else ''} at position {', '.join(unknown)}")
    return f"{head} has " + " and ".join(parts)


# Names of dims, lower-cased, and the value an example gives them: a batch of 1, a sequence of 128 tokens or steps,
# a 224x224 image (ImageNet's size, what most vision exports take).
_BATCH_WORDS = ("batch", "bs", "n", "b", "num_images")
_SEQUENCE_WORDS = ("seq", "sequence", "length", "len", "token", "time", "frame", "step", "past", "text", "t")
_SPATIAL_WORDS = ("height", "width", "h", "w", "size", "img", "image")
EXAMPLE_BATCH, EXAMPLE_SEQUENCE, EXAMPLE_SIDE = 1, 128, 224


def example_dims(problems: Sequence[InputProblem]) -> dict[tuple[str, int], int | None]:
    """A value for each open dim, keyed by (input, position): from the dim's name (batch 1, a sequence 128,
    height or width 224) or its place (the first of several: the batch; the last two of a 4-d input whose
    channels are known: an image's sides); None where neither says what the dim is."""
    out: dict[tuple[str, int], int | None] = {}
    for p in problems:
        for i in p.open:
            out[(p.name, i)] = _example(p.dims or (), i)
    return out


def _example(dims: tuple[int | str | None, ...], i: int) -> int | None:
    name = dims[i] if isinstance(dims[i], str) else ""
    words = [w for w in re.split(r"[^a-z]+", str(name).lower()) if w]
    if any(w.startswith(_BATCH_WORDS[0]) or w in _BATCH_WORDS for w in words):
        return EXAMPLE_BATCH
    if any(w in _SEQUENCE_WORDS or w.startswith(("seq", "len", "token", "frame")) for w in words):
        return EXAMPLE_SEQUENCE
    if any(w in _SPATIAL_WORDS for w in words):
        return EXAMPLE_SIDE
    if len(dims) == 4 and i in (2, 3) and isinstance(dims[1], int):
        return EXAMPLE_SIDE  # NCHW with its channels known
    if len(dims) == 4 and i in (1, 2) and isinstance(dims[3], int) and dims[3] in (1, 3, 4):
        return EXAMPLE_SIDE  # NHWC
    if i == 0 and len(dims) > 1 and not words:
        return EXAMPLE_BATCH
    return None


def _dim_hint(problems: Sequence[InputProblem], examples: Mapping[tuple[str, int], int | None]) -> str:
    """``pass e.g. --dim batch=1 --dim height=224 (or --input images=1x3x224x224)``: --dim for the named dims,
    --input for an input with a dim that has no name (or no declared shape), and what a dim is where no value can
    be guessed for it."""
    named: dict[str, int | None] = {}
    for p in problems:
        for i in p.open:
            if p.dims is not None and isinstance(p.dims[i], str):
                named.setdefault(str(p.dims[i]), examples[(p.name, i)])
    unnamed = [p for p in problems if p.dims is None or any(not isinstance(p.dims[i], str) for i in p.open)]
    words = [f"--dim {n}={v if v is not None else 'N'}" for n, v in named.items()]
    words += [f"--input {p.name}={_shape_example(p, examples)}" for p in unnamed]
    hint = "pass e.g. " + " ".join(words)
    if not unnamed:
        hint += " (or " + " ".join(f"--input {p.name}={_shape_example(p, examples)}" for p in problems) + ")"
    unknown = [n for n, v in named.items() if v is None]
    if unknown:
        where = [_where(p, i) for p in problems for i in p.open if p.dims is not None and p.dims[i] in unknown]
        hint += "; N is the size of " + ", ".join(dict.fromkeys(where))
    return hint


def _shape_example(p: InputProblem, examples: Mapping[tuple[str, int], int | None]) -> str:
    if p.dims is None:
        return "SHAPE (e.g. 1x3x224x224; nothing after = for a scalar)"
    parts = [str(d) if isinstance(d, int) else str(examples[(p.name, i)] or "N") for i, d in enumerate(p.dims)]
    return "x".join(parts)


def _where(p: InputProblem, i: int) -> str:
    shown = ", ".join("?" if d is None else str(d) for d in p.dims or ())
    return f"dim {i} of input {p.name!r} [{shown}]"


def _pass_hint(problems: Sequence[InputProblem], options: Collection[str]) -> str:
    """For a command without --dim: the batch and input-size passes (a first dim; the last two of a 4-d input),
    as the command's own options where it has them, else as a rewrite that writes the shapes in first; where
    those passes cannot fix every open dim, the commands that take --dim and --input."""
    spots = [(p, i) for p in problems for i in p.open]
    batch = any(i == 0 for _, i in spots)
    sides = any(p.dims is not None and len(p.dims) == 4 and i in (2, 3) for p, i in spots)
    covered = all(p.dims is not None for p in problems) and all(
        p.dims is not None and (i == 0 or (len(p.dims) == 4 and i in (2, 3))) for p, i in spots
    )
    words = (["--batch 1"] if batch else []) + ([f"--input-size {EXAMPLE_SIDE}x{EXAMPLE_SIDE}"] if sides else [])
    if covered and all(w.split()[0] in options for w in words):
        return "pass " + " ".join(words)
    if covered:
        return "write the shapes in first: onnxroof rewrite MODEL -o FIXED.onnx " + " ".join(words)
    return "this command needs static input shapes: analyze, measure, validate and annotate take them with --dim"
