"""The model that shape inference starts from: each weight larger than a small constant given as a typed graph
input rather than an initializer, encoded straight into the wire format.

onnx's inference handles every initializer several times over, at a cost per weight close to its cost per node;
a typed input costs it only its type. The shapes it infers are the same: it can use a weight's values only when
they are inline, and those of weights this large are never read. Weights up to SMALL_CONSTANT elements stay
initializers with their values, since shapes are computed from them (Reshape targets, axes, pads, K of TopK).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from onnxroof.load import native
from onnxroof.load.read import SMALL_CONSTANT, RawInitializer
from onnxroof.protos import GraphProto, ModelProto


def weights_as_inputs(model: ModelProto, initializers: Sequence[RawInitializer]) -> bytes:
    """``model`` serialized for shape inference, with each weight larger than a small constant moved from the
    initializers to the graph inputs as a typed input, after the inputs it declares (``initializers`` are the
    graph's, as read_graph read them). The moved weights are removed from ``model``, the loader's own copy.

    The inputs are encoded straight into the wire format, where a repeated field's entries may follow the
    message they belong to: building them as protobuf objects in Python would cost as much as the inference
    saves.
    """
    graph = model.graph
    large = [prod(init.dims) > SMALL_CONSTANT for init in initializers]
    if not any(large):
        return model.SerializeToString()
    declared = {vi.name for vi in graph.input}  # IR 3 lists every initializer as an input already
    entries = [
        (init.name, init.dtype, init.dims)
        for init, moved in zip(initializers, large)
        if moved and init.name not in declared
    ]
    kept = GraphProto()
    kept.initializer.extend([graph.initializer[i] for i, moved in enumerate(large) if not moved])
    del graph.initializer[:]
    graph.initializer.extend(kept.initializer)
    return model.SerializeToString() + wire_field(7, typed_inputs(entries))  # ModelProto.graph, merged into the first


def typed_inputs(entries: Sequence[tuple[str, int, tuple[int, ...]]]) -> bytes:
    """The serialized GraphProto.input fields declaring each (name, elem_type, dims) as a typed tensor, through
    the native encoder when it was built."""
    if native.reader is not None:
        return native.reader.typed_inputs(entries)
    return typed_inputs_python(entries)


def typed_inputs_python(entries: Sequence[tuple[str, int, tuple[int, ...]]]) -> bytes:
    """typed_inputs encoded in Python: the bytes the native encoder must give."""
    types: dict[tuple[int, tuple[int, ...]], bytes] = {}
    inputs = []
    for name, dtype, dims in entries:
        type_field = types.get((dtype, dims))
        if type_field is None:
            shape = b"".join([wire_field(1, _wire_int(1, d)) for d in dims])  # TensorShapeProto.dim: dim_value
            tensor_type = _wire_int(1, dtype) + wire_field(2, shape)  # TypeProto.Tensor: elem_type, shape
            type_field = types[(dtype, dims)] = wire_field(2, wire_field(1, tensor_type))  # ValueInfoProto.type
        value_info = wire_field(1, name.encode()) + type_field  # ValueInfoProto.name, .type
        inputs.append(wire_field(11, value_info))  # GraphProto.input
    return b"".join(inputs)


def wire_field(number: int, payload: bytes) -> bytes:
    """A protobuf length-delimited field (wire type 2: a string or an embedded message) of a field number
    below 16."""
    return _SMALL_VARINTS[number << 3 | 2] + _wire_varint(len(payload)) + payload


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
