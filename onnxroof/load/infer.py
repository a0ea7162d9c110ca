"""Shape inference for analysis: onnx's, and onnxruntime's symbolic inference for what onnx leaves unknown,
neither of them ever given a weight's bytes (which passes a model needs is the loader's choice, in graph.py).

Large weights reach onnx's inference as typed graph inputs (``weights_as_inputs``) and symbolic inference as
values it cannot know; weights up to SMALL_CONSTANT elements keep their values, since shapes are computed from
them (Reshape targets, axes, pads, K of TopK).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, TensorProto, numpy_helper

from onnxroof.ir import Tensor
from onnxroof.load import native
from onnxroof.load.standins import unknown_output_count

SMALL_CONSTANT = 64  # constants up to this many elements keep their values (trip counts, K of TopK, axes)


def shape_of(type_proto: onnx.TypeProto) -> tuple[int, tuple[int, ...] | None]:
    """Element type and static shape of a type (shape None when the rank or any dim is unknown or symbolic)."""
    tt = type_proto.tensor_type  # a default (elem_type 0, no shape) for sequence and map types
    dims = [d.dim_value for d in tt.shape.dim]
    if not dims:  # a scalar, or no shape at all
        return tt.elem_type, (() if tt.HasField("shape") else None)
    # dim_value reads 0 when unset (a symbolic or unknown dim); only then is the slower exact check needed.
    if 0 in dims and any(not d.HasField("dim_value") for d in tt.shape.dim):
        return tt.elem_type, None
    return tt.elem_type, tuple(dims)


Shapes = dict[str, Tensor]  # the typed values of a graph, none of them a weight


def read_shapes(graph: GraphProto, input_count: int | None = None) -> Shapes:
    """Element type and static shape of every input (or of the first ``input_count``), value_info and output of
    one graph (not its subgraphs), as tensors that are not weights.

    Reading nested protobuf fields from Python is the slowest part of loading a large graph, and most of its
    tensors share a handful of types: each distinct type is read once, keyed by its serialized bytes. The
    native reader, where it was built, does the same on the serialized graph.
    """
    if native.reader is not None:
        return native.reader.value_types(graph.SerializeToString(), -1 if input_count is None else input_count, Tensor)
    shapes: Shapes = {}
    by_type: dict[bytes, tuple[int, tuple[int, ...] | None]] = {}
    for vi in itertools.chain(graph.input[:input_count], graph.value_info, graph.output):
        type_proto = vi.type
        key = type_proto.SerializeToString()
        entry = by_type.get(key)
        if entry is None:
            entry = by_type[key] = shape_of(type_proto)
        if entry[1] is not None or vi.name not in shapes:  # a declared output without a shape keeps the inferred one
            shapes[vi.name] = Tensor(vi.name, entry[0], entry[1], False)
    return shapes


class Inferred:
    """onnx's inference of a model, kept in the wire format it comes in: loading a large graph needs only its
    value types, which the native reader decodes from these bytes, so the proto is parsed only when a later
    pass asks for it (parsing it and serializing the graph again for the reader cost about a fifth as much as
    the inference itself)."""

    def __init__(self, data: bytes | None = None, model: ModelProto | None = None) -> None:
        self._data = data
        self._model = model

    @property
    def model(self) -> ModelProto:
        """The inferred model as a proto (parsed on first use)."""
        if self._model is None:
            self._model = ModelProto.FromString(self._data)
        return self._model

    def shapes(self, input_count: int | None = None) -> Shapes:
        """read_shapes of the inferred top-level graph."""
        if native.reader is None or self._data is None:
            return read_shapes(self.model.graph, input_count)
        count = -1 if input_count is None else input_count
        return native.reader.value_types(model_graph_bytes(self._data), count, Tensor)


def model_graph_bytes(model: bytes) -> bytes:
    """The serialized GraphProto inside a serialized ModelProto (field 7); occurrences of the field are merged
    by concatenation, as protobuf merges a repeated embedded message."""
    parts = []
    position = 0
    while position < len(model):
        key, position = _read_varint(model, position)
        wire_type = key & 7
        if wire_type == 0:
            _, position = _read_varint(model, position)
        elif wire_type == 2:
            length, position = _read_varint(model, position)
            if key >> 3 == 7:
                parts.append(model[position : position + length])
            position += length
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unexpected wire type {wire_type} in a ModelProto")
    if position != len(model):
        raise ValueError("truncated ModelProto")
    return b"".join(parts)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def onnx_infer_serialized(model: bytes, data_prop: bool, warnings: list[str]) -> Inferred:
    """onnx_infer of a serialized model, its result left serialized until a proto is needed."""
    try:
        return Inferred(data=_infer_wire(model, False, False, data_prop))
    except Exception as exc:  # inference errors on odd but runnable models: keep going with what we have
        warnings.append(_inference_failed(exc))
        return Inferred(data=model)


def _infer_wire(model: bytes, check_type: bool, strict_mode: bool, data_prop: bool) -> bytes:
    """onnx's shape inference from bytes to bytes: what onnx.shape_inference.infer_shapes calls before it parses
    the result (the public function, then serialized again, where that binding is not there)."""
    try:
        from onnx.onnx_cpp2py_export.shape_inference import infer_shapes
    except ImportError:
        return onnx.shape_inference.infer_shapes(model, check_type, strict_mode, data_prop).SerializeToString()
    return infer_shapes(model, check_type, strict_mode, data_prop)


def _inference_failed(exc: Exception) -> str:
    reason = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
    return f"onnx shape inference failed ({reason}); shapes may be missing"


def onnx_infer(model: ModelProto | bytes, data_prop: bool, warnings: list[str]) -> ModelProto:
    """onnx's shape inference of a model (or a serialized one); on failure the model as it is and a warning."""
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=data_prop)
    except Exception as exc:  # inference errors on odd but runnable models: keep going with what we have
        warnings.append(_inference_failed(exc))
        return model if isinstance(model, ModelProto) else ModelProto.FromString(model)


def weights_as_inputs(model: ModelProto, initializers: Sequence[tuple[str, int, tuple[int, ...], Any]]) -> bytes:
    """``model`` serialized for shape inference, with each weight larger than a small constant moved from the
    initializers to the graph inputs as a typed input, after the inputs it declares (``initializers`` are the
    graph's, as _read_graph read them). The moved weights are removed from ``model``, load_graph's own copy.

    onnx's inference handles every initializer several times over, at a cost per weight close to its cost per
    node; a typed input costs it only its type. The shapes it infers are the same: it can use a weight's values
    only when they are inline, and those of weights this large are never read. The inputs are encoded straight
    into the wire format, where a repeated field's entries may follow the message they belong to: building them
    as protobuf objects in Python would cost as much as the inference saves.
    """
    graph = model.graph
    large = [prod(dims) > SMALL_CONSTANT for _, _, dims, _ in initializers]
    if not any(large):
        return model.SerializeToString()
    declared = {vi.name for vi in graph.input}  # IR 3 lists every initializer as an input already
    entries = [
        (name, dtype, dims)
        for (name, dtype, dims, _), moved in zip(initializers, large)
        if moved and name not in declared
    ]
    inputs = native.reader.typed_inputs(entries) if native.reader is not None else typed_inputs(entries)
    kept = GraphProto()
    kept.initializer.extend([graph.initializer[i] for i, moved in enumerate(large) if not moved])
    del graph.initializer[:]
    graph.initializer.extend(kept.initializer)
    return model.SerializeToString() + _wire_field(7, inputs)  # ModelProto.graph, merged into the first


def typed_inputs(entries: Sequence[tuple[str, int, tuple[int, ...]]]) -> bytes:
    """The serialized GraphProto.input fields declaring each (name, elem_type, dims) as a typed tensor."""
    types: dict[tuple[int, tuple[int, ...]], bytes] = {}
    inputs = []
    for name, dtype, dims in entries:
        type_field = types.get((dtype, dims))
        if type_field is None:
            shape = b"".join([_wire_field(1, _wire_int(1, d)) for d in dims])  # TensorShapeProto.dim: dim_value
            tensor_type = _wire_int(1, dtype) + _wire_field(2, shape)  # TypeProto.Tensor: elem_type, shape
            type_field = types[(dtype, dims)] = _wire_field(2, _wire_field(1, tensor_type))  # ValueInfoProto.type
        value_info = _wire_field(1, name.encode()) + type_field  # ValueInfoProto.name, .type
        inputs.append(_wire_field(11, value_info))  # GraphProto.input
    return b"".join(inputs)


_SMALL_VARINTS = [bytes([value]) for value in range(0x80)]


def _wire_varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _wire_int(number: int, value: int) -> bytes:
    """A protobuf varint field (wire type 0) of a field number below 16 (a one-byte key)."""
    return _SMALL_VARINTS[number << 3] + _wire_varint(value)


def _wire_field(number: int, payload: bytes) -> bytes:
    """A protobuf length-delimited field (wire type 2: a string or an embedded message) of a field number
    below 16."""
    return _SMALL_VARINTS[number << 3 | 2] + _wire_varint(len(payload)) + payload


# The ops exporters build shape computations from. onnx's data propagation follows only some of them (not Equal,
# Where, Mod, Not, ...); fold_shape_values evaluates any of them on known small values.
_SHAPE_ARITHMETIC = frozenset(
    {
        "Identity",
        "Cast",
        "Gather",
        "Concat",
        "Unsqueeze",
        "Squeeze",
        "Slice",
        "Reshape",
        "Expand",
        "Tile",
        "ConstantOfShape",
        "Range",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Mod",
        "Neg",
        "Abs",
        "Max",
        "Min",
        "Clip",
        "Floor",
        "Ceil",
        "Sqrt",
        "Equal",
        "Less",
        "Greater",
        "LessOrEqual",
        "GreaterOrEqual",
        "Not",
        "And",
        "Or",
        "Where",
        "ReduceProd",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
    }
)
FOLDED_SUFFIX = "::onnxroof-value"  # names the constants fold_shape_values gives a graph


def fold_shape_values(model: ModelProto, constants: Mapping[str, np.ndarray], shapes: Shapes, opset: int) -> int:
    """Evaluate a graph's shape arithmetic on what is known, and give the results to ``model`` (an inference copy,
    changed in place) as constants its nodes read; returns how many values were given.

    Known are the small constants and every Shape or Size of a tensor whose shape is known; a node of
    _SHAPE_ARITHMETIC whose inputs are all known small values is evaluated with onnx's reference implementation.
    Each value a node computed is then given as an initializer (named with FOLDED_SUFFIX) to the nodes that read
    it, so that a second inference sees e.g. a Reshape or Expand target as a constant, as data propagation would
    if it followed these ops.
    """
    from onnx.reference import ReferenceEvaluator

    values = dict(constants)
    computed: set[str] = set()
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or not node.output:
            continue
        value = None
        if node.op_type in ("Shape", "Size"):
            tensor = shapes.get(node.input[0])
            if tensor is None or tensor.shape is None:
                continue
            dims = np.array(tensor.shape, dtype=np.int64)
            if node.op_type == "Size":
                value = np.array(dims.prod(), dtype=np.int64)
            else:
                bounds = {a.name: a.i for a in node.attribute}
                value = dims[bounds.get("start", 0) : bounds.get("end", len(dims))]  # ONNX clamps as slicing does
        elif node.op_type in _SHAPE_ARITHMETIC and all(name in values for name in node.input if name):
            feeds = {name: values[name] for name in node.input if name}
            try:
                value = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)[0]
            except Exception:  # an op the reference rejects here stays for the passes after this one
                continue
        if value is not None and np.size(value) <= SMALL_CONSTANT:
            values[node.output[0]] = np.asarray(value)
            computed.add(node.output[0])
    given: dict[str, str] = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name in computed:
                if name not in given:
                    given[name] = name + FOLDED_SUFFIX
                    tensor = numpy_helper.from_array(values[name], given[name])
                    model.graph.initializer.append(tensor)
                    if model.ir_version < 4:  # IR 3 reads an initializer only when it is a graph input too
                        model.graph.input.append(
                            onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
                        )
                node.input[i] = given[name]
    return len(given)


def infer_complete(model: ModelProto) -> tuple[ModelProto, list[str]]:
    """onnx's shape inference with data propagation, then onnxruntime's symbolic inference when outputs remain
    unknown (the full inference that shape stand-ins are run through)."""
    warnings: list[str] = []
    model = onnx_infer(model, True, warnings)
    if unknown_output_count(model.graph):
        model = with_symbolic_shapes(model, warnings)
    return model, warnings


def with_symbolic_shapes(model: ModelProto, warnings: list[str]) -> ModelProto:
    """``model`` plus the shapes onnxruntime's symbolic inference resolves; on failure ``model`` as it is and a
    warning (symbolic inference is best effort: it needs sympy and inline shape constants)."""
    try:
        return _merge_shapes(model, symbolic_infer(model))
    except Exception as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        warnings.append(f"symbolic shape inference failed ({reason})")
        return model


def _merge_shapes(model: ModelProto, extra: ModelProto) -> ModelProto:
    """``model`` plus the shapes that ``extra`` knows and ``model`` does not (only the top-level graph)."""
    known = {name for name, t in read_shapes(model.graph).items() if t.shape is not None}
    for vi in itertools.chain(extra.graph.input, extra.graph.value_info, extra.graph.output):
        if vi.name not in known and shape_of(vi.type)[1] is not None:
            model.graph.value_info.append(vi)
            known.add(vi.name)
    return model


def symbolic_infer(model: ModelProto) -> ModelProto:
    """onnxruntime's symbolic shape inference, keeping what it resolved even when it cannot resolve everything.

    Its public ``infer_shapes`` raises on an incomplete result and first saves the model into the current
    directory; this runs the same steps without writing anything.
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


STRIPPED = "#weight-bytes-not-read"  # '#' marks data that is not on disk, as onnx's own model container does


def drop_weight_bytes(graph: GraphProto) -> None:
    """Turn every inline initializer larger than a small constant into a dims-only reference, in place (the
    native reader's strip_weight_bytes does the same to a serialized model).

    Analysis needs weights' shapes and dtypes, never their values; without their bytes, shape inference (which
    copies the whole model across the C++ boundary twice) runs as fast on inline weights as on external ones.
    """
    for init in graph.initializer:
        dims = init.dims
        if init.data_location == TensorProto.EXTERNAL or prod(dims) <= SMALL_CONSTANT or min(dims) < 0:
            continue  # a negative dim makes no tensor: left as it is
        for data_field in (
            "raw_data",
            "float_data",
            "int32_data",
            "int64_data",
            "double_data",
            "uint64_data",
            "string_data",
        ):
            init.ClearField(data_field)
        init.data_location = TensorProto.EXTERNAL
        entry = init.external_data.add()
        entry.key, entry.value = "location", STRIPPED
