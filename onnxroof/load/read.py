"""Reading: a model from a file, a ``zoo:NAME`` spec or a proto, without its weights' bytes; then what analysis
reads of its graph as plain values (nodes, initializer headers, value types), through the native reader where
it was built and the protobuf Python API elsewhere.

Reading nested protobuf fields from Python is the slowest part of loading a large graph, so each graph is read
once: its nodes and initializers before inference (inference leaves them unchanged), its value types from each
inference result's serialized bytes.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import mmap
import os
from collections.abc import Collection, Iterable, Sequence
from math import prod
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from onnxroof.errors import UserError
from onnxroof.ir import DEFAULT_DOMAINS, Tensor
from onnxroof.load import native
from onnxroof.load.source import ZOO_PREFIX, model_path
from onnxroof.load.tensors import to_array
from onnxroof.protos import AttributeProto, GraphProto, ModelProto, TensorProto, TypeProto

SMALL_CONSTANT = 64  # constants up to this many elements keep their values (trip counts, K of TopK, axes)
STRIPPED = "#weight-bytes-not-read"  # '#' marks data that is not on disk, as onnx's own model container does


# -------------------------------------------------------------------------------------------------------------
# The model


def read_model(source: str | os.PathLike | ModelProto, weight_bytes: bool = True) -> tuple[ModelProto, str]:
    """The model proto and a display name, from a path, a ``zoo:NAME[?batch=B&size=S]`` spec or a proto.

    External weight data is never loaded. With ``weight_bytes=False`` the model is the caller's to change (a
    copy of a given proto) and the data of its inline weights larger than a small constant is left out, as
    drop_weight_bytes leaves it; the native reader leaves it out of a file's bytes before they are parsed, so
    that a model's weights are never copied into a proto. Every failure a user can cause becomes a UserError.
    """
    if isinstance(source, ModelProto):
        if weight_bytes:
            return source, source.graph.name or "model"
        copy = ModelProto()
        copy.CopyFrom(source)
        drop_weight_bytes(copy.graph)
        return copy, source.graph.name or "model"
    spec = os.fspath(source)
    path = model_path(spec)
    if path is None:
        model = _read_zoo(spec)
        if not weight_bytes:
            drop_weight_bytes(model.graph)
        return model, spec
    try:
        model = _parse_file(path, weight_bytes)
    except Exception as exc:  # protobuf raises DecodeError, RuntimeWarning or others for a bad file
        raise UserError(
            f"{spec} is not a readable ONNX model ({type(exc).__name__}: {str(exc).strip() or 'parse error'})",
            "the file may be truncated or not ONNX; re-export it or check the download",
        ) from exc
    if not model.HasField("graph") or model.ir_version == 0:
        raise UserError(f"{spec} is not an ONNX model (no graph or IR version)", "re-export the model as ONNX")
    return model, path.name


def _parse_file(path: Path, weight_bytes: bool) -> ModelProto:
    """The model in an ONNX file, without its external data; without its large weights' data either unless
    ``weight_bytes``."""
    if weight_bytes or native.reader is None:
        model = ModelProto.FromString(path.read_bytes())  # what onnx.load does without external data
        if not weight_bytes:
            drop_weight_bytes(model.graph)
        return model
    # Mapped rather than read: the pages that hold only weight bytes are skipped, never read from disk.
    with path.open("rb") as f:
        empty = os.fstat(f.fileno()).st_size == 0  # a file mmap cannot map; it parses as an empty model
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if not empty else contextlib.nullcontext(b"") as view:
            data = native.reader.strip_weight_bytes(view, SMALL_CONSTANT, STRIPPED.encode())
    return ModelProto.FromString(data)


def _read_zoo(spec: str) -> ModelProto:
    import model_zoo

    name, _, query = spec[len(ZOO_PREFIX) :].partition("?")
    if name in model_zoo.decoder_names():
        if query:
            raise UserError(f"zoo decoder {name} takes no options", "fix its dims with --dim, e.g. --dim batch_size=4")
        return model_zoo.build_decoder(name, weights=False)
    options: dict[str, Any] = {}
    for part in filter(None, query.split("&")):
        key, sep, value = part.partition("=")
        if not sep:
            raise UserError(f"bad zoo option {part!r} in {spec}", "write options as zoo:NAME?batch=4&size=160")
        try:
            options[key] = int(value)
        except ValueError:
            raise UserError(f"zoo option {key}={value!r} is not an integer", "e.g. zoo:resnet50?batch=8") from None
    if name not in model_zoo.names():
        known = ", ".join([*model_zoo.names(), *model_zoo.decoder_names()])
        raise UserError(f"no zoo model named {name!r}", "known: " + known)
    try:
        return model_zoo.build(name, weights=False, **options)
    except (TypeError, ValueError) as exc:
        raise UserError(f"cannot build {spec}: {exc}", "options are batch and size, e.g. zoo:unet?batch=16") from None


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


def opset_of(model: ModelProto) -> int:
    """The model's default-domain opset (0 when it imports none)."""
    return next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), 0)


# -------------------------------------------------------------------------------------------------------------
# Nodes and initializers


class RawNode(NamedTuple):
    """One NodeProto as plain values. The native reader builds these without a Python call (its fields are
    positional there: keep their order)."""

    name: str  # the node's name, or "<op_type>_<index in the graph>" where it has none
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]  # numbers, strings and their lists; small tensors as arrays; a graph as its name
    constant_type: tuple[int, tuple[int, ...]] | None  # (dtype, dims) of a Constant's value tensor
    has_subgraph: bool  # whether an attribute is a graph (If, Loop, Scan)


class RawInitializer(NamedTuple):
    """One initializer's header, and its value where it has at most SMALL_CONSTANT elements and is inline."""

    name: str
    dtype: int
    dims: tuple[int, ...]
    value: np.ndarray | None


class RawGraph(NamedTuple):
    """What is read of a graph apart from its value types. Shape inference leaves it unchanged, so it is read
    once however many inference steps run."""

    initializers: list[RawInitializer]
    sparse: list[RawInitializer]  # the sparse initializers: their values tensor's name and dtype, the dense dims
    nodes: list[RawNode]
    inputs: tuple[str, ...]  # the declared graph inputs' names

    def weight_names(self) -> set[str]:
        """The names of the initializers, sparse ones included."""
        return {init.name for init in self.initializers}.union([s.name for s in self.sparse])


def shapeless_outputs(
    types: ValueTypes, nodes: Iterable[tuple[Sequence[str], bool]], weights: Collection[str]
) -> list[str]:
    """The node outputs without a static shape in ``types``, in graph order; ``nodes`` gives each node's output
    names and whether it is a Constant. A Constant's value (its first output) and a weight's name (one of
    ``weights``) are left out: their shapes do not come from inference, since the assembled graph takes a
    Constant's from its value and lets an initializer win over a node output of its name."""
    get = types.get
    unknown = []
    for outputs, constant in nodes:
        for index, name in enumerate(outputs):
            if not name or name in weights or (index == 0 and constant):
                continue
            t = get(name)
            if t is None or t.shape is None:
                unknown.append(name)
    return unknown


def unknown_outputs(types: ValueTypes, raw: RawGraph) -> list[str]:
    """The node outputs of the top-level graph ``raw`` (as read) without a static shape in ``types``: see
    shapeless_outputs."""
    return shapeless_outputs(types, ((n.outputs, n.constant_type is not None) for n in raw.nodes), raw.weight_names())


def read_graph(graph: GraphProto) -> RawGraph:
    """A graph's initializers and nodes as plain values, through the native reader when it was built."""
    if native.reader is not None:
        return read_graph_native(graph, native.reader)
    return read_graph_python(graph)


def read_graph_native(graph: GraphProto, reader: ModuleType) -> RawGraph:
    """read_graph through the native reader ``reader``, which leaves to the protobuf API only what it does not
    decode itself: small initializers' values and the attributes that are not numbers or strings (tensors,
    graphs)."""
    nodes, initializers, raw_attributes = reader.graph_contents(
        graph.SerializeToString(), SMALL_CONSTANT, RawNode, RawInitializer
    )
    for i, init in enumerate(initializers):
        if init.value is not None:  # the bytes of a tensor of at most SMALL_CONSTANT elements, stored inline
            value = _small_array(TensorProto.FromString(init.value))
            initializers[i] = RawInitializer(init.name, init.dtype, init.dims, value)
    for index, name, data in reversed(raw_attributes):  # the last of a name wins, as in the Python reader
        attrs = nodes[index].attrs
        if attrs[name] is None:  # else a later attribute of the same name replaced this one
            attrs[name] = attr_value(AttributeProto.FromString(data))
    return RawGraph(initializers, _sparse(graph), nodes, tuple(vi.name for vi in graph.input))


def read_graph_python(graph: GraphProto) -> RawGraph:
    """read_graph through the protobuf Python API: the values the native reader must give."""
    initializers = []
    for init in graph.initializer:
        dims = tuple(init.dims)
        value = _small_array(init) if prod(dims) <= SMALL_CONSTANT else None
        initializers.append(_new_initializer((_text(init.name), init.data_type, dims, value)))
    nodes = []
    for index, proto in enumerate(graph.node):
        op_type = proto.op_type
        attrs: dict[str, Any] = {}
        constant_type = None
        has_subgraph = False
        if proto.attribute:  # most nodes of a large graph have none: skip the attribute work for them
            for a in proto.attribute:
                attrs[a.name] = attr_value(a)
                has_subgraph = has_subgraph or a.type == AttributeProto.GRAPH
                if op_type == "Constant" and a.name == "value":
                    constant_type = (a.t.data_type, tuple(a.t.dims))
        name, domain = proto.name, proto.domain
        if not type(name) is type(op_type) is type(domain) is str:  # protobuf gives invalid UTF-8 as bytes
            name, op_type, domain = (_text(name), _text(op_type), _text(domain))
        name = name or f"{op_type}_{index}"
        inputs, outputs = tuple(proto.input), tuple(proto.output)
        if not all(type(text) is str for text in inputs + outputs):
            inputs, outputs = tuple(map(_text, inputs)), tuple(map(_text, outputs))
        nodes.append(_new_node((name, op_type, domain, inputs, outputs, attrs, constant_type, has_subgraph)))
    return RawGraph(initializers, _sparse(graph), nodes, tuple(_text(vi.name) for vi in graph.input))


# A named tuple from a tuple without the extra Python frame of its generated __new__: one is built per node and
# per initializer (the native reader allocates them the same way).
_new_node = functools.partial(tuple.__new__, RawNode)
_new_initializer = functools.partial(tuple.__new__, RawInitializer)


def _text(value: str | bytes) -> str:
    """A string field as text. protobuf gives a string field that is not UTF-8 as bytes; those are decoded with
    replacement characters, as the native reader decodes every string."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _sparse(graph: GraphProto) -> list[RawInitializer]:
    return [
        RawInitializer(_text(s.values.name), s.values.data_type, tuple(s.dims), None) for s in graph.sparse_initializer
    ]


def attr_value(attr: AttributeProto) -> Any:
    """An attribute as a plain value: numbers, strings and their lists; a small tensor as an array (None for a
    large one); a graph as the attribute's name."""
    kind = attr.type
    if kind == AttributeProto.INT:
        return attr.i
    if kind == AttributeProto.FLOAT:
        return attr.f
    if kind == AttributeProto.STRING:
        return attr.s.decode("utf-8", "replace")
    if kind == AttributeProto.INTS:
        return list(attr.ints)
    if kind == AttributeProto.FLOATS:
        return list(attr.floats)
    if kind == AttributeProto.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if kind == AttributeProto.TENSOR:
        return _small_array(attr.t)
    if kind in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
        return attr.name
    return None


def _small_array(t: TensorProto) -> np.ndarray | None:
    """The value of an inline tensor of at most SMALL_CONSTANT elements; None for large or external ones."""
    if t.data_location == TensorProto.EXTERNAL or prod(t.dims) > SMALL_CONSTANT:
        return None
    try:
        return to_array(t)
    except Exception:
        return None


# -------------------------------------------------------------------------------------------------------------
# Value types

ValueTypes = dict[str, Tensor]  # the typed values of a graph by name, none of them a weight


def shape_of(type_proto: TypeProto) -> tuple[int, tuple[int, ...] | None]:
    """Element type and static shape of a type (shape None when the rank or any dim is unknown or symbolic, or
    when a dim is negative: no size, as some exporters write an unknown one)."""
    tt = type_proto.tensor_type  # a default (elem_type 0, no shape) for sequence and map types
    dims = [d.dim_value for d in tt.shape.dim]
    if not dims:  # a scalar, or no shape at all
        return tt.elem_type, (() if tt.HasField("shape") else None)
    # dim_value reads 0 when unset (a symbolic or unknown dim); only then is the slower exact check needed.
    if min(dims) < 0 or (0 in dims and any(not d.HasField("dim_value") for d in tt.shape.dim)):
        return tt.elem_type, None
    return tt.elem_type, tuple(dims)


def value_types(graph: GraphProto, input_count: int | None = None) -> ValueTypes:
    """Element type and static shape of every input (or of the first ``input_count``), value_info and output of
    one graph (not its subgraphs), as tensors that are not weights. A name listed twice keeps the later entry,
    unless that one has no shape: a declared output without a shape keeps the inferred one.

    Most tensors of a large graph share a handful of types: each distinct type is read once, keyed by its
    serialized bytes. The native reader, where it was built, does the same on the serialized graph.
    """
    if native.reader is not None:
        return native.reader.value_types(graph.SerializeToString(), -1 if input_count is None else input_count, Tensor)
    types: ValueTypes = {}
    by_type: dict[bytes, tuple[int, tuple[int, ...] | None]] = {}
    for vi in itertools.chain(graph.input[:input_count], graph.value_info, graph.output):
        type_proto = vi.type
        key = type_proto.SerializeToString()
        entry = by_type.get(key)
        if entry is None:
            entry = by_type[key] = shape_of(type_proto)
        name = _text(vi.name)
        if entry[1] is not None or name not in types:
            types[name] = Tensor(name, entry[0], entry[1], False)
    return types


class Serialized:
    """A model in the wire format, as inference steps pass it on: loading a large graph needs only its value
    types, which the native reader decodes from these bytes, so the proto is parsed only where it is asked for
    (and then once)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._model: ModelProto | None = None

    @property
    def model(self) -> ModelProto:
        """The model as a proto, parsed on first use: not to be changed (it is this object's cache)."""
        if self._model is None:
            self._model = ModelProto.FromString(self.data)
        return self._model

    def take_model(self) -> ModelProto:
        """The model as a proto that the caller may change: the one parsed already, which this object then
        forgets, or a new parse."""
        model = self.model
        self._model = None
        return model

    def value_types(self, input_count: int | None = None) -> ValueTypes:
        """value_types of the model's top-level graph."""
        if native.reader is None:
            return value_types(self.model.graph, input_count)
        count = -1 if input_count is None else input_count
        return native.reader.value_types(model_graph_bytes(self.data), count, Tensor)


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
