"""A model onnxruntime refuses to load with its input shapes written in, loaded with them left open.

onnxruntime infers the types of both branches of every If when it loads a model, from the shapes its inputs
declare. Where a branch the run never takes cannot hold for the given shapes (silero-vad's Squeeze of an axis
that is 1 only on the other branch's inputs), a model that runs on those inputs is refused once its input shapes
are fixed: "Node (If_0) Op (If) [TypeInferenceError] ...". With every runtime input's dims left open (their rank
kept), the load infers less and succeeds, and the run on inputs of the fixed shapes is the same run.
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx import ModelProto

from onnxroof.load import runtime_inputs

# What onnxruntime's load says where its type and shape inference rejects the model.
INFERENCE_ERRORS = ("TypeInferenceError", "ShapeInferenceError")


def refused_by_inference(exc: BaseException) -> bool:
    """Whether onnxruntime's error is its load-time type or shape inference rejecting the model."""
    return any(word in str(exc) for word in INFERENCE_ERRORS)


def open_inputs(model: ModelProto | bytes) -> ModelProto | None:
    """A copy of ``model`` with every dim of its runtime inputs left open (rank kept), or None where no input
    declares a dim to open."""
    copy = ModelProto()
    if isinstance(model, bytes):
        copy.ParseFromString(model)
    else:
        copy.CopyFrom(model)
    opened = False
    for vi in runtime_inputs(copy.graph):
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") or dim.HasField("dim_param"):
                dim.Clear()
                opened = True
    return copy if opened else None


def declare_inputs(model: ModelProto, inputs: Mapping[str, tuple[tuple[int, ...], int]]) -> None:
    """Write ``inputs`` (name -> (shape, element type)) into ``model``'s runtime inputs of those names, in place:
    onnxruntime's optimized graph of a model loaded with its inputs open declares them open too."""
    for vi in runtime_inputs(model.graph):
        if vi.name in inputs and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            del shape.dim[:]
            for size in inputs[vi.name][0]:
                shape.dim.add().dim_value = size
