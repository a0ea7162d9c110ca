"""Load an ONNX model into the analysis graph: shapes resolved, weights identified, no weight bytes read.

A model is read with its external data left on disk (or absent), so a model that references hundreds of GB of
weights analyzes in little memory. Input shapes are fixed from ``--input``/``--dim``, shapes come from onnx's
shape inference and, for what it leaves unknown, from onnxruntime's symbolic shape inference. Weights are
initializers, Constant nodes, ConstantOfShape of a constant shape, and every node computed only from weights:
such nodes are "folded" (they run once at load time in any engine) and never cost compute.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections import ChainMap
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, MutableMapping, Optional, Sequence

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, numpy_helper

from onnxroof.costs import Tensor
from onnxroof.errors import UserError
from onnxroof.shape_proxy import PROXY_OP_TYPES as _PROXY_OP_TYPES, infer_with_proxies, needs_proxy, unknown_output_count

MIN_IR_VERSION = 3
MIN_OPSET = 7
_SMALL_CONSTANT = 64  # constants up to this many elements keep their values (trip counts, K of TopK, axes)

# Nodes whose outputs change between runs even when every input is a weight: never folded.
_NON_DETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


@dataclass(slots=True)
class Node:
    """One node of the graph, with attributes as plain Python values and its subgraphs (If/Loop/Scan) loaded.

    Read-only by convention. Not a frozen dataclass: a frozen one costs four times as much to construct, and
    building one per node is a large share of loading a graph of tens of thousands of nodes.
    """

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    folded: bool = False
    subgraphs: Mapping[str, "Graph"] = field(default_factory=dict)


@dataclass(frozen=True)
class Graph:
    """A graph ready for costing: nodes in topological order and every tensor's dtype, shape and weight flag."""

    name: str
    nodes: tuple[Node, ...]
    tensors: Mapping[str, Tensor]
    constants: Mapping[str, np.ndarray]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    opset: int = 0
    ir_version: int = 0
    warnings: tuple[str, ...] = ()

    def tensor(self, name: str) -> Tensor | None:
        """The tensor of that name, or None for an omitted optional input ('')."""
        if not name:
            return None
        return self.tensors.get(name) or Tensor(name, TensorProto.UNDEFINED, None, False)


# -------------------------------------------------------------------------------------------------------------
# Reading


def read_model(source: str | os.PathLike | ModelProto) -> tuple[ModelProto, str]:
    """The model proto and a display name, from a path, a ``zoo:NAME[?batch=B&size=S]`` spec or a proto.

    External weight data is never loaded. Every failure a user can cause becomes a UserError.
    """
    if isinstance(source, ModelProto):
        return source, source.graph.name or "model"
    spec = os.fspath(source)
    if spec.startswith("zoo:"):
        return _read_zoo(spec), spec
    path = Path(spec)
    if not path.exists():
        raise UserError(f"no such file: {spec}", "check the path, or use zoo:NAME for a built-in model (onnxroof zoo)")
    if path.is_dir():
        raise UserError(f"{spec} is a directory, not an ONNX file", "pass the .onnx file inside it")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError, RuntimeWarning or others for a bad file
        raise UserError(
            f"{spec} is not a readable ONNX model ({type(exc).__name__}: {str(exc).strip() or 'parse error'})",
            "the file may be truncated or not ONNX; re-export it or check the download",
        ) from exc
    if not model.HasField("graph") or model.ir_version == 0:
        raise UserError(f"{spec} is not an ONNX model (no graph or IR version)", "re-export the model as ONNX")
    return model, path.name


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


def _runtime_inputs(graph: GraphProto) -> list[onnx.ValueInfoProto]:
    initializers = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    return [vi for vi in graph.input if vi.name not in initializers]


def _fix_inputs(model: ModelProto, inputs: Mapping[str, tuple[int, ...]], dims: Mapping[str, int]) -> None:
    """Write --input shapes and --dim values into the (copied) model, then fail on anything left unresolved."""
    graph = model.graph
    runtime = {vi.name: vi for vi in _runtime_inputs(graph)}
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
            params = sorted({d.dim_param for vi in runtime.values() for d in vi.type.tensor_type.shape.dim if d.dim_param})
            raise UserError(
                f"--dim names no symbolic dim of this model: {', '.join(sorted(unknown))}",
                "its symbolic dims: " + (", ".join(params) or "none"),
            )
    for vi in runtime.values():
        if not vi.type.HasField("tensor_type"):
            continue
        shape = vi.type.tensor_type.shape
        if not vi.type.tensor_type.HasField("shape"):
            raise UserError(f"input {vi.name!r} has no declared shape", f"pass --input {vi.name}=1x3x224x224 (its shape)")
        for i, d in enumerate(shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if d.dim_param:
                raise UserError(
                    f"input {vi.name!r} dim {i} is the unresolved symbol {d.dim_param!r}",
                    f"pass --dim {d.dim_param}=1 (or --input {vi.name}=...)",
                )
            raise UserError(f"input {vi.name!r} dim {i} is unknown", f"pass --input {vi.name}=<shape like 1x3x224x224>")


# -------------------------------------------------------------------------------------------------------------
# Shapes and tensors


def _shape_of(type_proto: onnx.TypeProto) -> tuple[int, tuple[int, ...] | None]:
    """Element type and static shape of a type (shape None when the rank or any dim is unknown or symbolic)."""
    tt = type_proto.tensor_type  # a default (elem_type 0, no shape) for sequence and map types
    dims = [d.dim_value for d in tt.shape.dim]
    if not dims:  # a scalar, or no shape at all
        return tt.elem_type, (() if tt.HasField("shape") else None)
    # dim_value reads 0 when unset (a symbolic or unknown dim); only then is the slower exact check needed.
    if 0 in dims and any(not d.HasField("dim_value") for d in tt.shape.dim):
        return tt.elem_type, None
    return tt.elem_type, tuple(dims)


Shapes = dict[str, tuple[int, Optional[tuple[int, ...]]]]


def read_shapes(graph: GraphProto, input_count: int | None = None) -> Shapes:
    """Element type and static shape of every input (or of the first ``input_count``), value_info and output of
    one graph (not its subgraphs).

    Reading nested protobuf fields from Python is the slowest part of loading a large graph, and most of its
    tensors share a handful of types: each distinct type is read once, keyed by its serialized bytes.
    """
    shapes: Shapes = {}
    by_type: dict[bytes, tuple[int, Optional[tuple[int, ...]]]] = {}
    for vi in itertools.chain(graph.input[:input_count], graph.value_info, graph.output):
        type_proto = vi.type
        key = type_proto.SerializeToString()
        entry = by_type.get(key)
        if entry is None:
            entry = by_type[key] = _shape_of(type_proto)
        if entry[1] is not None or vi.name not in shapes:  # a declared output without a shape keeps the inferred one
            shapes[vi.name] = entry
    return shapes


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


def _infer_and_build(model: ModelProto) -> tuple[ModelProto, list[str], Built]:
    """Infer shapes and build the top-level graph, doing only as much inference as the model needs.

    Shapes come from onnx's inference, then onnxruntime's symbolic inference for what is still unknown.
    onnxruntime contrib ops that neither knows (FusedConv, NCHWc, QLinear, ...) are inferred through standard
    stand-ins. Reading protobuf fields is the slowest part of loading a large graph, so nodes and initializers
    are read once, whichever inference passes run.
    """
    op_types = {n.op_type for n in model.graph.node}
    if (op_types & _PROXY_OP_TYPES or op_types & _CONTROL_FLOW) and needs_proxy(model):
        _drop_weight_bytes(model.graph)
        model, warnings = infer_with_proxies(model, _infer_complete)
        return model, warnings, _build(model.graph, {}, {})
    warnings: list[str] = []
    data_prop = bool(op_types & _SHAPE_SOURCES)
    raw = _read_graph(model.graph)
    declared = len(model.graph.input)  # inference gets the large weights as inputs after these
    lean = _weights_as_inputs(model, raw.initializers)
    inferred = _onnx_infer(lean, data_prop, warnings)
    built = _assemble(inferred.graph, raw, {}, {}, declared)
    unknown = _has_unknown_outputs(built[0], built[2])
    if unknown and not data_prop:
        inferred = _onnx_infer(lean, True, warnings)
        built = _assemble(inferred.graph, raw, {}, {}, declared)
        unknown = _has_unknown_outputs(built[0], built[2])
    if unknown:
        inferred = _with_symbolic_shapes(inferred, warnings)
        built = _assemble(inferred.graph, raw, {}, {}, declared)
    return inferred, warnings, built


def _onnx_infer(model: ModelProto | bytes, data_prop: bool, warnings: list[str]) -> ModelProto:
    """onnx's shape inference of a model (or a serialized one); on failure the model as it is and a warning."""
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=data_prop)
    except Exception as exc:  # inference errors on odd but runnable models: keep going with what we have
        warnings.append(f"onnx shape inference failed ({str(exc).splitlines()[0][:120]}); shapes may be missing")
        return model if isinstance(model, ModelProto) else ModelProto.FromString(model)


def _weights_as_inputs(model: ModelProto, initializers: Sequence[tuple[str, int, tuple[int, ...], Any]]) -> bytes:
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
    large = [prod(dims) > _SMALL_CONSTANT for _, _, dims, _ in initializers]
    if not any(large):
        return model.SerializeToString()
    declared = {vi.name for vi in graph.input}  # IR 3 lists every initializer as an input already
    types: dict[tuple[int, tuple[int, ...]], bytes] = {}
    inputs = []
    for (name, dtype, dims, _), moved in zip(initializers, large):
        if not moved or name in declared:
            continue
        type_field = types.get((dtype, dims))
        if type_field is None:
            shape = b"".join([_wire_field(1, _wire_int(1, d)) for d in dims])  # TensorShapeProto.dim: dim_value
            tensor_type = _wire_int(1, dtype) + _wire_field(2, shape)  # TypeProto.Tensor: elem_type, shape
            type_field = types[(dtype, dims)] = _wire_field(2, _wire_field(1, tensor_type))  # ValueInfoProto.type
        value_info = _wire_field(1, name.encode()) + type_field  # ValueInfoProto.name, .type
        inputs.append(_wire_field(11, value_info))  # GraphProto.input
    kept = GraphProto()
    kept.initializer.extend([graph.initializer[i] for i, moved in enumerate(large) if not moved])
    del graph.initializer[:]
    graph.initializer.extend(kept.initializer)
    return model.SerializeToString() + _wire_field(7, b"".join(inputs))  # ModelProto.graph, merged into the first


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


def _infer_complete(model: ModelProto) -> tuple[ModelProto, list[str]]:
    """onnx's shape inference with data propagation, then onnxruntime's symbolic inference when outputs remain
    unknown (the full inference that shape stand-ins are run through)."""
    warnings: list[str] = []
    model = _onnx_infer(model, True, warnings)
    if unknown_output_count(model.graph):
        model = _with_symbolic_shapes(model, warnings)
    return model, warnings


def _with_symbolic_shapes(model: ModelProto, warnings: list[str]) -> ModelProto:
    """``model`` plus the shapes onnxruntime's symbolic inference resolves; on failure ``model`` as it is and a
    warning (symbolic inference is best effort: it needs sympy and inline shape constants)."""
    try:
        return _merge_shapes(model, _symbolic_infer(model))
    except Exception as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        warnings.append(f"symbolic shape inference failed ({reason})")
        return model


def _merge_shapes(model: ModelProto, extra: ModelProto) -> ModelProto:
    """``model`` plus the shapes that ``extra`` knows and ``model`` does not (only the top-level graph)."""
    known = {name for name, (_, shape) in read_shapes(model.graph).items() if shape is not None}
    for vi in itertools.chain(extra.graph.input, extra.graph.value_info, extra.graph.output):
        if vi.name not in known and _shape_of(vi.type)[1] is not None:
            model.graph.value_info.append(vi)
            known.add(vi.name)
    return model


def _symbolic_infer(model: ModelProto) -> ModelProto:
    """onnxruntime's symbolic shape inference, keeping what it resolved even when it cannot resolve everything.

    Its public ``infer_shapes`` raises on an incomplete result and first saves the model into the current
    directory; this runs the same steps without writing anything.
    """
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    inference = SymbolicShapeInference(2**31 - 1, True, False, 0)  # int_max, auto_merge, guess_output_rank, verbose
    inference._preprocess(model)
    # It reads the value of any initializer an arithmetic op takes, to follow shape computations. A weight whose
    # bytes are not loaded (external, or stripped by _drop_weight_bytes) must be a value it cannot know; its
    # shape stays known (_preprocess recorded every initializer's shape apart).
    for name in [n for n, t in inference.initializers_.items() if t.data_location == TensorProto.EXTERNAL]:
        del inference.initializers_[name]
    while inference.run_:
        inference._infer_impl()
    inference._update_output_from_vi()
    return inference.out_mp_


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
    """The value of an inline tensor of at most _SMALL_CONSTANT elements; None for large or external ones."""
    if t.data_location == TensorProto.EXTERNAL or prod(t.dims) > _SMALL_CONSTANT:
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
    nodes: list[tuple[str, str, str, tuple[str, ...], tuple[str, ...], dict[str, Any], tuple[int, tuple[int, ...]] | None, bool]]


def _read_graph(graph: GraphProto) -> _RawGraph:
    initializers = []
    for init in graph.initializer:
        dims = tuple(init.dims)
        initializers.append((init.name, init.data_type, dims, _small_array(init) if prod(dims) <= _SMALL_CONSTANT else None))
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
        nodes.append((name, op_type, proto.domain, tuple(proto.input), tuple(proto.output), attrs, constant_type, has_subgraph))
    return _RawGraph(initializers, sparse, nodes)


def _build(graph: GraphProto, outer: Mapping[str, Tensor], outer_constants: Mapping[str, np.ndarray]) -> Built:
    """Tensors, small constant values, nodes (with folding) and runtime input names of one (sub)graph."""
    return _assemble(graph, _read_graph(graph), outer, outer_constants)


def _assemble(
    graph: GraphProto,
    raw: _RawGraph,
    outer: Mapping[str, Tensor],
    outer_constants: Mapping[str, np.ndarray],
    input_count: int | None = None,
) -> Built:
    """The graph from its inferred shapes (read from ``graph``) and its already-read nodes and initializers;
    ``input_count`` leaves out the inputs after the first that many (weights shape inference got as inputs)."""
    # A subgraph sees the enclosing scopes' tensors through a chain, not a copy: nested Ifs stay linear.
    tensors: MutableMapping[str, Tensor] = ChainMap({}, outer) if outer else {}
    constants: MutableMapping[str, np.ndarray] = ChainMap({}, outer_constants) if outer_constants else {}

    for name, (dtype, shape) in read_shapes(graph, input_count).items():
        if shape is not None or name not in tensors:
            tensors[name] = _new_tensor((name, dtype, shape, False))
    for name, dtype, dims, value in raw.initializers:
        tensors[name] = _new_tensor((name, dtype, dims, True))
        if value is not None:
            constants[name] = value
    for name, dtype, dims in raw.sparse:
        tensors[name] = _new_tensor((name, dtype, dims, True))
    runtime_inputs = [vi.name for vi in graph.input[:input_count] if not _is_weight(tensors, vi.name)]

    nodes: list[Node] = []
    for index, (name, op_type, domain, inputs, outputs, attrs, constant_type, has_subgraph) in enumerate(raw.nodes):
        subgraphs: Mapping[str, Graph] = _NO_SUBGRAPHS
        if has_subgraph:
            loaded: dict[str, Graph] = {}
            for a in graph.node[index].attribute:
                if a.type == AttributeProto.GRAPH:
                    sub_tensors, sub_constants, sub_nodes, sub_inputs = _build(a.g, tensors, constants)
                    loaded[a.name] = Graph(
                        a.g.name, tuple(sub_nodes), sub_tensors, sub_constants, tuple(sub_inputs), tuple(o.name for o in a.g.output)
                    )
            subgraphs = loaded
        folded = op_type == "Constant" or (
            not subgraphs and op_type not in _NON_DETERMINISTIC and _all_weights(tensors, inputs)
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
_NO_SUBGRAPHS: Mapping[str, "Graph"] = MappingProxyType({})  # shared by the nodes that have none


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


_STRIPPED = "#weight-bytes-not-read"  # '#' marks data that is not on disk, as onnx's own model container does


def _drop_weight_bytes(graph: GraphProto) -> None:
    """Turn every inline initializer larger than a small constant into a dims-only reference, in place.

    Analysis needs weights' shapes and dtypes, never their values; without their bytes, shape inference (which
    copies the whole model across the C++ boundary twice) runs as fast on inline weights as on external ones.
    """
    for init in graph.initializer:
        if init.data_location == TensorProto.EXTERNAL or prod(init.dims) <= _SMALL_CONSTANT:
            continue
        for data_field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
            init.ClearField(data_field)
        init.data_location = TensorProto.EXTERNAL
        entry = init.external_data.add()
        entry.key, entry.value = "location", _STRIPPED


def load_graph(
    source: str | os.PathLike | ModelProto,
    inputs: Mapping[str, tuple[int, ...] | str] | None = None,
    dims: Mapping[str, int] | None = None,
) -> Graph:
    """Read a model, fix its input shapes, infer every shape and identify weights: the analysis graph.

    The caller's model (file or proto) is never modified: overrides are applied to a copy.
    """
    model, display_name = read_model(source)
    if model.ir_version < MIN_IR_VERSION:
        raise UserError(f"IR version {model.ir_version} is older than {MIN_IR_VERSION}", "re-export with a newer exporter")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset and opset < MIN_OPSET:
        raise UserError(f"opset {opset} is older than {MIN_OPSET}", "convert it with onnx.version_converter")
    shapes = {k: parse_shape(v) if isinstance(v, str) else tuple(v) for k, v in (inputs or {}).items()}
    if isinstance(source, ModelProto):  # the caller's proto: work on a copy
        copy = ModelProto()
        copy.CopyFrom(model)
        model = copy
    _fix_inputs(model, shapes, dict(dims or {}))
    model, warnings, (tensors, constants, nodes, runtime_inputs) = _infer_and_build(model)
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
