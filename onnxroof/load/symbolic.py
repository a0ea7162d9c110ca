"""onnxruntime's symbolic shape inference, for the shapes onnx's inference leaves unknown: run without writing
anything, never given a weight's bytes, and quiet.

It logs what it assumes through ``logging`` (where it cannot compare a Slice end with a dim: "Unable to
determine if ... <= ..., treat as equal"), and with no logging configured Python's last-resort handler prints
such warnings to stderr. Here its logger is captured for the duration of the call, and what it said becomes at
most one warning of the loaded graph.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator

from onnxroof.errors import first_line
from onnxroof.load.read import shape_of, value_types
from onnxroof.protos import ModelProto, TensorProto

LOGGER = "onnxruntime.tools.symbolic_shape_infer"  # the logger of onnxruntime's module (its __name__)
ASSUMED_EQUAL = "treat as equal"  # how its messages end where it assumed two dims equal


def with_symbolic_shapes(model: ModelProto, warnings: list[str]) -> ModelProto:
    """``model`` (changed in place) plus the shapes onnxruntime's symbolic inference resolves. What the inference
    logged becomes one warning; on failure ``model`` stays as it is, with a warning (symbolic inference is best
    effort: it needs sympy and inline shape constants)."""
    with captured_warnings(LOGGER) as said:
        try:
            extra = symbolic_infer(model)
        except Exception as exc:
            warnings.append(f"symbolic shape inference failed ({first_line(exc, 120)})")
            return model
    if said:
        warnings.append(summary(said))
    return merge_shapes(model, extra)


def symbolic_infer(model: ModelProto) -> ModelProto:
    """onnxruntime's symbolic shape inference, keeping what it resolved even when it cannot resolve everything.

    Its public ``infer_shapes`` raises on an incomplete result and first saves the model into the current
    directory; this runs the same steps without writing anything. ``model`` is left as it was.
    """
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inference = SymbolicShapeInference(2**31 - 1, True, False, 0)  # int_max, auto_merge, guess_output_rank, verbose
    inference._preprocess(model)
    # It reads the value of any initializer an arithmetic op takes, to follow shape computations. A weight whose
    # bytes are not loaded (external, or stripped by drop_weight_bytes) must be a value it cannot know; its
    # shape stays known (_preprocess recorded every initializer's shape apart).
    for name in [n for n, t in inference.initializers_.items() if t.data_location == TensorProto.EXTERNAL]:
        del inference.initializers_[name]
    while inference.run_:
        inference._infer_impl()
    inference._update_output_from_vi()
    return inference.out_mp_


def merge_shapes(model: ModelProto, extra: ModelProto) -> ModelProto:
    """``model`` (changed in place) plus the static shapes that ``extra`` knows and ``model`` does not (only the
    top-level graph)."""
    known = {name for name, t in value_types(model.graph).items() if t.shape is not None}
    for vi in itertools.chain(extra.graph.input, extra.graph.value_info, extra.graph.output):
        if vi.name not in known and shape_of(vi.type)[1] is not None:
            model.graph.value_info.append(vi)
            known.add(vi.name)
    return model


class _Collector(logging.Handler):
    """Keeps the messages of the records it is given."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:  # a message whose arguments do not format: its template says what it was about
            self.messages.append(str(record.msg))


@contextlib.contextmanager
def captured_warnings(name: str) -> Iterator[list[str]]:
    """The messages of warning level and above that the logger ``name`` logs in the block, in order, kept for
    the duration from the handlers of the loggers above it and from Python's last-resort stderr handler."""
    logger = logging.getLogger(name)
    collector = _Collector(logging.WARNING)
    propagate = logger.propagate
    logger.addHandler(collector)
    logger.propagate = False
    try:
        yield collector.messages
    finally:
        logger.removeHandler(collector)
        logger.propagate = propagate


def summary(messages: list[str]) -> str:
    """One warning for what symbolic inference logged: the pairs of dims it assumed equal (each named once), and
    how many other warnings it gave with the first of them."""
    assumed = len({m for m in messages if m.endswith(ASSUMED_EQUAL)})
    others = [m for m in messages if not m.endswith(ASSUMED_EQUAL)]
    said = []
    if assumed:
        said.append(f"assumed {assumed} {'pair' if assumed == 1 else 'pairs'} of dims equal that it could not compare")
    if others:
        first = (others[0].splitlines() or [""])[0][:120]
        said.append(f"warned {len(others)} {'time' if len(others) == 1 else 'times'} (first: {first})")
    return "symbolic shape inference " + " and ".join(said) + "; the shapes it gave rest on that"
