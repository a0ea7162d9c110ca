"""Load an ONNX model into the analysis graph: shapes resolved, weights identified, no weight bytes read.

A model is read with its external data left on disk (or absent), so a model that references hundreds of GB of
weights analyzes in little memory. Input shapes are fixed from ``--input``/``--dim``, shapes come from onnx's
shape inference and, for what it leaves unknown, from onnxruntime's symbolic shape inference. Weights are
initializers, Constant nodes, ConstantOfShape of a constant shape, and every node computed only from weights:
such nodes are "folded" (they run once at load time in any engine) and never cost compute.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import re
from collections import ChainMap
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from math import prod
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, numpy_helper

from onnxroof.errors import UserError
from onnxroof.ir import Graph, Node, Tensor
from onnxroof.load import native
from onnxroof.load.infer import (
    SMALL_CONSTANT,
    STRIPPED,
    Inferred,
    Shapes,
    drop_weight_bytes,
    fold_shape_values,
    infer_complete,
    onnx_infer_serialized,
    read_shapes,
    weights_as_inputs,
    with_symbolic_shapes,
)
from onnxroof.load.standins import PROXY_OP_TYPES as _PROXY_OP_TYPES
from onnxroof.load.standins import infer_with_proxies, needs_proxy

MIN_IR_VERSION = 3
MIN_OPSET = 7

# Nodes whose outputs change between runs even when every input is a weight: never folded.
NON_DETERMINISTIC = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}


# -------------------------------------------------------------------------------------------------------------
# Reading


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
    if spec.startswith("zoo:"):
        model = _read_zoo(spec)
        if not weight_bytes:
            drop_weight_bytes(model.graph)
        return model, spec
    path = Path(spec)
    if not path.exists():
        raise UserError(f"no such file: {spec}", "check the path, or use zoo:NAME for a built-in model (onnxroof zoo)")
    if path.is_dir():
        raise UserError(f"{spec} is a directory, not an ONNX file", "pass the .onnx file inside it")
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
        model = onnx.load(str(path), load_external_data=False)
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

    name, _, query = spec[len("zoo:") :].partition("?")
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
        raise UserError(f"no zoo model named {name!r}", "known: " + ", ".join(model_zoo.names()))
    try:
        return model_zoo.build(name, weights=False, **options)
    except (TypeError, ValueError) as exc:
        raise UserError(f"cannot build {spec}: {exc}", "options are batch and size, e.g. zoo:unet?batch=16") from None


# -------------------------------------------------------------------------------------------------------------
# Input shapes


def parse_shape(text: str) -> tuple[int, ...]:
    """'1x3x224x224' -> (1, 3, 224, 224)."""
    try:
        dims = tuple(int(d) for d in re.split(r"[x,]", text.strip()))
    except ValueError:
        raise UserError(f"bad shape {text!r}", "write a shape as 1x3x224x224") from None
    if not dims or any(d <= 0 for d in dims):
        raise UserError(f"bad shape {text!r}: every dim must be a positive integer", "e.g. 1x3x224x224")
    return dims


def runtime_inputs(graph: GraphProto, initializers: Collection[str] | None = None) -> list[onnx.ValueInfoProto]:
    """The graph inputs that are not initializers; ``initializers`` are their names where already read."""
    if initializers is None:
        initializers = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    return [vi for vi in graph.input if vi.name not in initializers]


def fix_inputs(
    model: ModelProto,
    inputs: Mapping[str, tuple[int, ...]],
    dims: Mapping[str, int],
    initializers: Collection[str] | None = None,
) -> None:
    """Write --input shapes and --dim values into the (copied) model, then fail on anything left unresolved.
    ``initializers`` are the names of the graph's initializers where they were already read."""
    graph = model.graph
    runtime = {vi.name: vi for vi in runtime_inputs(graph, initializers)}
    for name, shape in inputs.items():
        if name not in runtime:
            raise UserError(f"the model has no input named {name!r}", "its inputs: " + ", ".join(runtime) or "none")
        tensor_shape = runtime[name].type.tensor_type.shape
        if tensor_shape.dim and len(tensor_shape.dim) != len(shape):
            raise UserError(
                f"--input {name} has {len(shape)} dims but the model declares {len(tensor_shape.dim)}",
                f"give all {len(tensor_shape.dim)} dims",
            )
        del tensor_shape.dim[:]
        for d in shape:
            tensor_shape.dim.add().dim_value = d
    if dims:
        used = set()
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param in dims:
                    used.add(d.dim_param)
                    d.dim_value = dims[d.dim_param]
        unknown = set(dims) - used
        if unknown:
            params = sorted(
                {d.dim_param for vi in runtime.values() for d in vi.type.tensor_type.shape.dim if d.dim_param}
            )
            raise UserError(
                f"--dim names no symbolic dim of this model: {', '.join(sorted(unknown))}",
                "its symbolic dims: " + (", ".join(params) or "none"),
            )
    for vi in runtime.values():
        if not vi.type.HasField("tensor_type"):
            continue
        shape = vi.type.tensor_type.shape
        if not vi.type.tensor_type.HasField("shape"):
            raise UserError(
                f"input {vi.name!r} has no declared shape", f"pass --input {vi.name}=1x3x224x224 (its shape)"
            )
        for i, d in enumerate(shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:  # 0 is a real dim: an empty tensor
                continue
            if d.dim_param:
                raise UserError(
                    f"input {vi.name!r} dim {i} is the unresolved symbol {d.dim_param!r}",
                    f"pass --dim {d.dim_param}=1 (or --input {vi.name}=...)",
                )
            raise UserError(f"input {vi.name!r} dim {i} is unknown", f"pass --input {vi.name}=<shape like 1x3x224x224>")


# -------------------------------------------------------------------------------------------------------------
# Shapes and tensors


def _has_unknown_outputs(tensors: Mapping[str, Tensor], nodes: Sequence[Node]) -> bool:
    for node in nodes:
        for o in node.outputs:
            if o and (o not in tensors or tensors[o].shape is None):
                return True
    return False


# Ops whose output values become shapes elsewhere: only graphs with one need onnx's (slower) data propagation
# up front; any other graph gets it only when the plain pass leaves outputs unknown.
_SHAPE_SOURCES = frozenset({"Shape", "Size"})
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})  # the standard ops with subgraphs, which may hold proxied ops

Built = tuple[MutableMapping[str, Tensor], MutableMapping[str, np.ndarray], list[Node], list[str]]


def _infer_and_build(model: ModelProto, raw: _RawGraph) -> tuple[list[str], Built]:
    """Infer shapes and build the top-level graph, doing only as much inference as the model needs; returns the
    inference warnings and the built graph.

    Shapes come from onnx's inference, then onnxruntime's symbolic inference for what is still unknown.
    onnxruntime contrib ops that neither knows (FusedConv, NCHWc, QLinear, ...) are inferred through standard
    stand-ins. Reading protobuf fields is the slowest part of loading a large graph, so nodes and initializers
    are read once (``raw``, read from ``model``), whichever inference passes run, and the inferred model stays
    serialized unless a later pass needs it as a proto.
    """
    op_types = {node[1] for node in raw.nodes}
    if (op_types & _PROXY_OP_TYPES or op_types & _CONTROL_FLOW) and needs_proxy(model):
        model, warnings = infer_with_proxies(model, infer_complete)
        return warnings, _build(model.graph, {}, {})
    warnings: list[str] = []
    data_prop = bool(op_types & _SHAPE_SOURCES)
    declared = len(model.graph.input)  # inference gets the large weights as inputs after these
    lean = weights_as_inputs(model, raw.initializers)

    def build(inferred: Inferred) -> Built:
        return _assemble(inferred.shapes(declared), lambda: inferred.model.graph, raw, {}, {})

    inferred = onnx_infer_serialized(lean, data_prop, warnings)
    built = build(inferred)
    unknown = _has_unknown_outputs(built[0], built[2])
    if unknown and not data_prop:
        inferred = onnx_infer_serialized(lean, True, warnings)
        built = build(inferred)
        unknown = _has_unknown_outputs(built[0], built[2])
    if unknown and fold_shape_values(inferred.model, _small_constants(raw), inferred.shapes(), _opset(model)):
        inferred = onnx_infer_serialized(inferred.model.SerializeToString(), True, warnings)
        built = build(inferred)
        unknown = _has_unknown_outputs(built[0], built[2])
    if unknown:
        inferred = Inferred(model=with_symbolic_shapes(inferred.model, warnings))
        built = build(inferred)
    return warnings, built


def _opset(model: ModelProto) -> int:
    """The model's default-domain opset (0 when it imports none)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _small_constants(raw: _RawGraph) -> dict[str, np.ndarray]:
    """The values of a graph's small initializers and Constant nodes, by tensor name."""
    values = {name: value for name, _, _, value in raw.initializers if value is not None}
    for _, op_type, domain, _, outputs, attrs, _, _ in raw.nodes:
        if op_type != "Constant" or domain not in ("", "ai.onnx") or not outputs:
            continue
        if isinstance(attrs.get("value"), np.ndarray):
            values[outputs[0]] = attrs["value"]
        elif "value_int" in attrs or "value_ints" in attrs:
            values[outputs[0]] = np.array(attrs.get("value_int", attrs.get("value_ints")), dtype=np.int64)
    return values


def _attr_value(attr: AttributeProto) -> Any:
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
        return numpy_helper.to_array(t)
    except Exception:
        return None


@dataclass(frozen=True)
class _RawGraph:
    """What is read from a graph's protobuf apart from inferred shapes: initializers and nodes as plain values.

    Shape inference leaves these unchanged, so they are read once however many inference passes run."""

    initializers: list[tuple[str, int, tuple[int, ...], np.ndarray | None]]  # name, dtype, dims, small value
    sparse: list[tuple[str, int, tuple[int, ...]]]
    nodes: list[
        tuple[str, str, str, tuple[str, ...], tuple[str, ...], dict[str, Any], tuple[int, tuple[int, ...]] | None, bool]
    ]
    inputs: tuple[str, ...]  # the declared graph inputs' names


def _read_graph(graph: GraphProto) -> _RawGraph:
    """A graph's initializers and nodes as plain values, through the native reader when it was built."""
    if native.reader is not None:
        return _read_graph_native(graph, native.reader)
    return _read_graph_python(graph)


def _read_graph_native(graph: GraphProto, reader: Any) -> _RawGraph:
    """_read_graph through the native reader, which leaves to the protobuf API only what it does not decode
    itself: small initializers' values and the attributes that are not numbers or strings (tensors, graphs)."""
    nodes, initializers, raw_attributes = reader.graph_contents(graph.SerializeToString(), SMALL_CONSTANT)
    for i, (name, dtype, dims, data) in enumerate(initializers):
        if data is not None:  # the bytes of a tensor of at most SMALL_CONSTANT elements, stored inline
            initializers[i] = (name, dtype, dims, _small_array(TensorProto.FromString(data)))
    for index, name, data in reversed(raw_attributes):  # the last of a name wins, as in the Python reader
        attrs = nodes[index][5]
        if attrs[name] is None:  # else a later attribute of the same name replaced this one
            attrs[name] = _attr_value(AttributeProto.FromString(data))
    sparse = [(s.values.name, s.values.data_type, tuple(s.dims)) for s in graph.sparse_initializer]
    return _RawGraph(initializers, sparse, nodes, tuple(vi.name for vi in graph.input))


def _read_graph_python(graph: GraphProto) -> _RawGraph:
    initializers = []
    for init in graph.initializer:
        dims = tuple(init.dims)
        initializers.append(
            (init.name, init.data_type, dims, _small_array(init) if prod(dims) <= SMALL_CONSTANT else None)
        )
    sparse = [(s.values.name, s.values.data_type, tuple(s.dims)) for s in graph.sparse_initializer]
    nodes = []
    for index, proto in enumerate(graph.node):
        op_type = proto.op_type
        attrs: dict[str, Any] = {}
        constant_type = None  # (dtype, dims) of a Constant node's value tensor
        has_subgraph = False
        if proto.attribute:  # most nodes of a large graph have none: skip the attribute work for them
            for a in proto.attribute:
                attrs[a.name] = _attr_value(a)
                has_subgraph = has_subgraph or a.type == AttributeProto.GRAPH
                if op_type == "Constant" and a.name == "value":
                    constant_type = (a.t.data_type, tuple(a.t.dims))
        name = proto.name or f"{op_type}_{index}"
        nodes.append(
            (name, op_type, proto.domain, tuple(proto.input), tuple(proto.output), attrs, constant_type, has_subgraph)
        )
    return _RawGraph(initializers, sparse, nodes, tuple(vi.name for vi in graph.input))


def graph_nodes(graph: GraphProto) -> list[Node]:
    """The nodes of a graph as the analysis names and folds them, read from the graph as it is (no inference)."""
    return _build(graph, {}, {})[2]


def _build(graph: GraphProto, outer: Mapping[str, Tensor], outer_constants: Mapping[str, np.ndarray]) -> Built:
    """Tensors, small constant values, nodes (with folding) and runtime input names of one (sub)graph."""
    return _assemble(read_shapes(graph), lambda: graph, _read_graph(graph), outer, outer_constants)


def _assemble(
    shapes: Shapes,
    inferred_graph: Callable[[], GraphProto],
    raw: _RawGraph,
    outer: Mapping[str, Tensor],
    outer_constants: Mapping[str, np.ndarray],
) -> Built:
    """The graph from its inferred value types and its already-read nodes and initializers. A top-level graph
    takes ``shapes``, a dict read for it alone, as its tensor table. ``inferred_graph`` gives the inferred
    GraphProto, which is read only for subgraphs (If/Loop/Scan bodies, inferred with it)."""
    # A subgraph sees the enclosing scopes' tensors through a chain, not a copy: nested Ifs stay linear.
    constants: MutableMapping[str, np.ndarray] = ChainMap({}, outer_constants) if outer_constants else {}
    tensors: MutableMapping[str, Tensor]
    if outer:
        tensors = ChainMap({}, outer)
        for name, t in shapes.items():
            if t.shape is not None or name not in tensors:  # a subgraph's untyped name keeps an outer scope's type
                tensors[name] = t
    else:
        tensors = shapes  # read for this graph alone: it is the graph's to keep
    for name, dtype, dims, value in raw.initializers:
        tensors[name] = _new_tensor((name, dtype, dims, True))
        if value is not None:
            constants[name] = value
    for name, dtype, dims in raw.sparse:
        tensors[name] = _new_tensor((name, dtype, dims, True))
    runtime_inputs = [name for name in raw.inputs if not _is_weight(tensors, name)]

    nodes: list[Node] = []
    for index, (name, op_type, domain, inputs, outputs, attrs, constant_type, has_subgraph) in enumerate(raw.nodes):
        subgraphs: Mapping[str, Graph] = _NO_SUBGRAPHS
        if has_subgraph:
            loaded: dict[str, Graph] = {}
            for a in inferred_graph().node[index].attribute:
                if a.type == AttributeProto.GRAPH:
                    sub_tensors, sub_constants, sub_nodes, sub_inputs = _build(a.g, tensors, constants)
                    loaded[a.name] = Graph(
                        a.g.name,
                        tuple(sub_nodes),
                        sub_tensors,
                        sub_constants,
                        tuple(sub_inputs),
                        tuple(o.name for o in a.g.output),
                    )
            subgraphs = loaded
        folded = op_type == "Constant" or (
            not subgraphs and op_type not in NON_DETERMINISTIC and _all_weights(tensors, inputs)
        )
        if constant_type is not None and outputs:
            tensors[outputs[0]] = _new_tensor((outputs[0], constant_type[0], constant_type[1], True))
            if attrs["value"] is not None:
                constants[outputs[0]] = attrs["value"]
        if folded:
            for o in outputs:
                if o:
                    t = tensors.get(o)
                    tensors[o] = Tensor(o, t.dtype if t else TensorProto.UNDEFINED, t.shape if t else None, True)
        nodes.append(Node(name, op_type, domain, inputs, outputs, attrs, folded, subgraphs))
    return tensors, constants, nodes, runtime_inputs


# Tensor(...) without the extra Python frame of a named tuple's generated __new__: one is built per tensor.
_new_tensor = functools.partial(tuple.__new__, Tensor)
_NO_SUBGRAPHS: Mapping[str, Graph] = MappingProxyType({})  # shared by the nodes that have none


def _is_weight(tensors: Mapping[str, Tensor], name: str) -> bool:
    t = tensors.get(name)
    return t is not None and t.is_weight


def _all_weights(tensors: Mapping[str, Tensor], inputs: Sequence[str]) -> bool:
    """Whether a node has inputs and every one given is a weight (it stops at the first that is not)."""
    given = False
    for name in inputs:
        if name:
            t = tensors.get(name)
            if t is None or not t.is_weight:
                return False
            given = True
    return given


def load_graph(
    source: str | os.PathLike | ModelProto,
    inputs: Mapping[str, tuple[int, ...] | str] | None = None,
    dims: Mapping[str, int] | None = None,
) -> Graph:
    """Read a model, fix its input shapes, infer every shape and identify weights: the analysis graph.

    The caller's model (file or proto) is never modified: overrides are applied to a copy.
    """
    model, display_name = read_model(source, weight_bytes=False)  # a copy of our own, weight bytes left out
    if model.ir_version < MIN_IR_VERSION:
        raise UserError(
            f"IR version {model.ir_version} is older than {MIN_IR_VERSION}", "re-export with a newer exporter"
        )
    opset = _opset(model)
    if opset and opset < MIN_OPSET:
        raise UserError(f"opset {opset} is older than {MIN_OPSET}", "convert it with onnx.version_converter")
    shapes = {k: parse_shape(v) if isinstance(v, str) else tuple(v) for k, v in (inputs or {}).items()}
    raw = _read_graph(model.graph)  # inputs' shapes are not among what it reads: fixing them next leaves it true
    initializers = {init[0] for init in raw.initializers}.union([name for name, _, _ in raw.sparse])
    fix_inputs(model, shapes, dict(dims or {}), initializers)
    warnings, (tensors, constants, nodes, runtime_inputs) = _infer_and_build(model, raw)
    return Graph(
        name=display_name,
        nodes=tuple(nodes),
        tensors=tensors,
        constants=constants,
        inputs=tuple(runtime_inputs),
        outputs=tuple(o.name for o in model.graph.output),
        opset=opset,
        ir_version=model.ir_version,
        warnings=tuple(warnings),
    )
