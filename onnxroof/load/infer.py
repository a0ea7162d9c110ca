"""Shape inference for analysis: one ordered list of steps, each from a serialized model to a serialized model,
run in order until every node output has a static shape.

The steps (``STEPS``), each where it applies:

1. stand-ins: onnxruntime's contrib ops that no inference knows, inferred as standard-op stand-ins
   (standins.py); the steps after it infer the stand-in copy, and their result is mapped back at the end;
2. onnx: onnx's inference, without data propagation, where nothing needs it up front;
3. onnx with data propagation: slower, for shapes computed from Shape/Size values;
4. shape arithmetic: the shape computations data propagation does not follow, folded into constants
   (fold.py), then onnx with data propagation again;
5. symbolic: onnxruntime's symbolic inference (symbolic.py).

After each step the value types of the result are read (the native reader decodes them from the bytes) and the
node outputs still without a static shape are counted, with the meaning the assembled graph gives them: a
Constant's output is known from its value, an initializer from its header. Inference starts from the model with
its large weights as typed inputs (lean.py), and a result is parsed only where a step needs it as a proto.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from onnxroof.errors import first_line
from onnxroof.load.fold import fold_shape_values, known_values
from onnxroof.load.lean import weights_as_inputs
from onnxroof.load.read import RawGraph, Serialized, ValueTypes, opset_of, unknown_outputs
from onnxroof.load.standins import STANDIN_OP_TYPES, infer_through_standins, needs_standins
from onnxroof.load.symbolic import with_symbolic_shapes
from onnxroof.protos import ModelProto, infer_shapes

# Ops whose output values become shapes elsewhere: only graphs with one need onnx's (slower) data propagation
# up front; any other graph gets it only when the plain pass leaves outputs unknown.
SHAPE_SOURCES = frozenset({"Shape", "Size"})
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})  # the standard ops with subgraphs, which may hold proxied ops


class Context:
    """What the steps of one graph's inference share: the loader's model (its nodes and subgraphs as read, to be
    looked at, not changed) and its graph as read, the number of inputs it declares (the large weights follow
    them as inputs), its default opset and op types, the warnings the steps give, the steps that ran, and the
    functions that map a stand-in copy's result back onto the graph's own tensors."""

    def __init__(self, model: ModelProto, raw: RawGraph) -> None:
        self.model = model
        self.raw = raw
        self.declared = len(model.graph.input)
        self.opset = opset_of(model)
        self.op_types = frozenset({node.op_type for node in raw.nodes})
        self.warnings: list[str] = []
        self.ran: list[str] = []
        self.map_back: list[Callable[[bytes], bytes]] = []

    def unknown(self, types: ValueTypes) -> int:
        """How many node outputs of the graph ``types`` (value types of an inference result) leave without a
        static shape; a Constant's value and an initializer are known without them (read.unknown_outputs)."""
        return len(unknown_outputs(types, self.raw))

    def unknown_in(self, model: bytes) -> int:
        """unknown, read from a serialized model."""
        return self.unknown(Serialized(model).value_types(self.declared))


class Step(NamedTuple):
    """One inference step: its name, whether it applies to a graph, and what it does (the model in, the model's
    bytes out; a step that changes nothing returns the bytes it was given)."""

    name: str
    applies: Callable[[Serialized, Context], bool]
    run: Callable[[Serialized, Context], bytes]


class Inferred(NamedTuple):
    """The outcome of inference: the top-level graph's value types (with the declared inputs only), the
    inferred model (its nodes the graph's own, subgraphs typed too), the warnings and the steps that ran."""

    types: ValueTypes
    model: Serialized
    warnings: list[str]
    steps: tuple[str, ...]


def infer(model: ModelProto, raw: RawGraph) -> Inferred:
    """Run the inference steps that apply to ``model`` (the loader's copy, weight bytes left out; large weights
    are taken out of it) until no node output of ``raw`` (as read from it) lacks a static shape."""
    context = Context(model, raw)
    current = Serialized(weights_as_inputs(model, raw.initializers))
    types: ValueTypes | None = None
    unknown = -1
    for step in STEPS:
        if unknown == 0:
            break
        if not step.applies(current, context):
            continue
        data = step.run(current, context)
        context.ran.append(step.name)
        if data is current.data and types is not None:
            continue
        current = Serialized(data)
        types = current.value_types(context.declared)
        unknown = context.unknown(types)
    for back in reversed(context.map_back):
        current = Serialized(back(current.data))
        types = None
    if types is None:
        types = current.value_types(context.declared)
    return Inferred(types, current, context.warnings, tuple(context.ran))


# -------------------------------------------------------------------------------------------------------------
# The steps


def _has_standins(model: Serialized, context: Context) -> bool:
    candidates = context.op_types & STANDIN_OP_TYPES or context.op_types & CONTROL_FLOW
    return bool(candidates) and needs_standins(context.model)


def _standins(model: Serialized, context: Context) -> bytes:
    weights = {init.name: init.dims for init in context.raw.initializers}
    standin, back = infer_through_standins(model.data, weights, context.unknown_in)
    context.map_back.append(back)
    return standin


def _onnx_applies(model: Serialized, context: Context) -> bool:
    """The plain pass is the cheaper one: it runs where data propagation is not needed up front (the graph
    computes no shapes from Shape/Size) and has not run (the stand-in step's passes propagate data)."""
    return not (context.op_types & SHAPE_SOURCES) and not context.ran


def _onnx(model: Serialized, context: Context) -> bytes:
    return onnx_infer_serialized(model.data, False, context.warnings)


def _onnx_with_data_propagation(model: Serialized, context: Context) -> bytes:
    return onnx_infer_serialized(model.data, True, context.warnings)


def _fold(model: Serialized, context: Context) -> bytes:
    types = model.value_types()  # every input: a Shape of a weight is known too
    proto = model.take_model()
    if not fold_shape_values(proto, known_values(context.raw), types, context.opset):
        return model.data
    return onnx_infer_serialized(proto.SerializeToString(), True, context.warnings)


def _symbolic(model: Serialized, context: Context) -> bytes:
    return with_symbolic_shapes(model.take_model(), context.warnings).SerializeToString()


def _always(model: Serialized, context: Context) -> bool:
    return True


STEPS: tuple[Step, ...] = (
    Step("stand-ins", _has_standins, _standins),
    Step("onnx", _onnx_applies, _onnx),
    Step("onnx with data propagation", _always, _onnx_with_data_propagation),
    Step("shape arithmetic", _always, _fold),
    Step("symbolic", _always, _symbolic),
)


# -------------------------------------------------------------------------------------------------------------
# onnx's inference


def onnx_infer_serialized(model: bytes, data_prop: bool, warnings: list[str]) -> bytes:
    """onnx's shape inference of a serialized model; on failure the model as it is and a warning."""
    try:
        return onnx_infer_bytes(model, data_prop)
    except Exception as exc:  # inference errors on odd but runnable models: keep going with what we have
        warnings.append(f"onnx shape inference failed ({first_line(exc, 120)}); shapes may be missing")
        return model


def onnx_infer_bytes(model: bytes, data_prop: bool) -> bytes:
    """onnx's shape inference from bytes to bytes: what onnx.shape_inference.infer_shapes calls before it parses
    the result."""
    return infer_shapes(model, data_prop)
