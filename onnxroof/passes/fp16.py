"""The fp16 pass: a float32 model as a float16 one, through onnxruntime's converter.

The conversion is onnxruntime's maintained copy of onnxconverter-common's converter,
``onnxruntime.transformers.float16.convert_float_to_float16``. What it does, and what this pass adds:

- Every float32 tensor type (graph inputs and outputs, intermediate values, initializers, Constant values, in
  subgraphs too) becomes float16, except around the ops it keeps in float32: its default block list
  (``DEFAULT_OP_BLOCK_LIST``: the ai.onnx.ml ops, TopK, NonMaxSuppression, RoiAlign, Range, CumSum, Min, Max,
  Upsample, ...) plus the ``block_ops`` given here. A kept op gets a Cast to float32 before each float16 input and a
  Cast back after each output. An initializer only kept ops read stays float32.
- Resize's ``scales`` input stays float32 (onnx types it float only): the converter reads the model's opset to
  find it (input 1 at opset 10, input 2 from opset 11) and casts a float16 value there back to float32. The opset
  itself is kept as it is: the converter changes types, never ops.
- Weight values above float16's largest finite value (65504) in magnitude are clamped to +-65504, not turned into
  inf (infinities stay infinities); nonzero magnitudes below float16's smallest subnormal (5.96e-8) become
  +-5.96e-8 rather than zero. Each weight with a clamped value is named in a note.
- ``keep_io_types`` keeps the float32 graph inputs and outputs: a Cast after each such input and before each
  such output.
- The converter edits the model it is given and appends its Casts at the end of the node list: here it edits a
  copy, and the nodes are put back in topological order afterwards (onnx requires it).

A graph-only model (weights absent, see :mod:`.weights`) has no values the converter could read. Its absent
float32 initializers are converted here by type alone (data type float16, external length halved) under the same
rule the converter applies (an initializer becomes float16 when a node that is not kept in float32 reads it where
a float16 input is allowed), pointed at no file (its float32 bytes in the original data file are not its values),
and the converter does the rest of the graph.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, TensorProto, helper

from onnxroof.load.symbolic import captured_warnings
from onnxroof.passes import Note, Refused, RewriteResult, inferred_copy
from onnxroof.passes.weights import ABSENT, is_absent, values

__all__ = ["FP16_MAX", "fp16"]

FP16_MAX = float(np.finfo(np.float16).max)  # 65504, the largest finite float16
CONVERTER_LOGGER = "onnxruntime.transformers.float16"


def fp16(model: ModelProto, *, keep_io_types: bool = False, block_ops: Sequence[str] = ()) -> RewriteResult:
    """``model`` with its float32 tensors as float16 (see the module docstring for what stays float32).

    ``keep_io_types`` keeps the float32 graph inputs and outputs (Casts at the boundary); ``block_ops`` names op
    types that stay float32 besides the converter's default block list. An empty or unknown op type (neither an
    op of this model nor one onnx defines) is refused; a known op type the model does not use is noted and has no
    effect. A model without a float32 tensor is refused.
    """
    from onnxruntime.transformers import float16 as converter

    work = inferred_copy(model)  # a new proto: the input stays untouched
    op_types = Counter(node.op_type for graph in _graphs(work.graph) for node in graph.node)
    notes = _check_block_ops(block_ops, op_types)
    if not _has_float32(work):
        raise Refused("nothing to convert: no float32 tensor", "the fp16 pass converts float32 models")

    blocked = set(converter.DEFAULT_OP_BLOCK_LIST) | set(block_ops)
    always_float = dict(converter.ALWAYS_FLOAT_INPUTS)
    if _onnx_opset(work) <= 10:
        always_float["Resize"] = [1]
    absent = _convert_absent(work, blocked, always_float)
    float_nodes = _float_nodes(work)
    originals = {t.name: t for graph in _graphs(model.graph) for t in graph.initializer}
    casts_before = op_types["Cast"]

    with captured_warnings(CONVERTER_LOGGER):
        converted = converter.convert_float_to_float16(
            work, keep_io_types=keep_io_types, disable_shape_infer=True, op_block_list=sorted(blocked)
        )
    if absent:
        _drop_value_info(converted.graph, absent)
    for graph in _graphs(converted.graph):
        _fix_absent_lengths(graph)
        _drop_duplicates(graph)
    _toposort(converted.graph)

    notes += _conversion_notes(model, converted, originals, float_nodes, blocked, casts_before)
    if absent:
        notes.append(
            Note(
                "weights",
                f"values absent (graph-only model): {len(absent)} float32 initializers became float16 by type and "
                "size alone; their values stay absent",
            )
        )
    graph_only = any(is_absent(t) for graph in _graphs(model.graph) for t in graph.initializer)
    return RewriteResult(converted, True, tuple(notes), graph_only)


def _graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """``graph`` and every subgraph inside it, depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _graphs(sub)


def _onnx_opset(model: ModelProto) -> int:
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=11)


def _check_block_ops(block_ops: Sequence[str], op_types: Counter[str]) -> list[Note]:
    """Refuse an empty or unknown op type in ``block_ops``; a note for each known op type the model lacks."""
    known = set(op_types) | {schema.name for schema in onnx.defs.get_all_schemas_with_history()}
    notes = []
    for op in block_ops:
        if not op or op != op.strip():
            raise Refused(f"block_ops holds an empty or padded op type ({op!r})", "name op types such as Softmax")
        if op not in known:
            same = [k for k in sorted(known) if k.lower() == op.lower()]
            close = same or difflib.get_close_matches(op, sorted(known), n=3)
            hint = f"did you mean {' or '.join(close)}?" if close else "op types are spelled as in onnx (Softmax)"
            raise Refused(f"block_ops names {op!r}, which is no op type of this model or of onnx", hint)
        if op not in op_types:
            notes.append(Note(op, "kept in float32 on request, but the model has no such node: no effect"))
    return notes


def _has_float32(model: ModelProto) -> bool:
    """Whether any value, initializer or Constant value of ``model`` (shape-inferred) is float32."""
    for graph in _graphs(model.graph):
        infos = [*graph.input, *graph.output, *graph.value_info]
        if any(vi.type.tensor_type.elem_type == TensorProto.FLOAT for vi in infos):
            return True
        if any(t.data_type == TensorProto.FLOAT for t in graph.initializer):
            return True
        for node in graph.node:
            if any(a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT for a in node.attribute):
                return True
    return False


def _float_nodes(model: ModelProto) -> list[NodeProto]:
    """The nodes of ``model`` (shape-inferred) that read or write a float32 tensor."""
    found = []
    for graph in _graphs(model.graph):
        floats = {
            vi.name
            for vi in (*graph.input, *graph.output, *graph.value_info)
            if vi.type.tensor_type.elem_type == TensorProto.FLOAT
        } | {t.name for t in graph.initializer if t.data_type == TensorProto.FLOAT}
        found += [n for n in graph.node if any(name in floats for name in (*n.input, *n.output))]
    return found


def _convert_absent(model: ModelProto, blocked: set[str], always_float: dict[str, list[int]]) -> list[str]:
    """Convert the absent float32 initializers of ``model`` (in place) that the converter would convert, and give
    each a float32 value_info the converter turns to float16 (so that kept ops still get their Casts). Returns
    their names."""
    readers: dict[str, list[tuple[str, int]]] = {}
    for graph in _graphs(model.graph):
        for node in graph.node:
            for index, name in enumerate(node.input):
                readers.setdefault(name, []).append((node.op_type, index))
    names = []
    for graph in _graphs(model.graph):
        for init in graph.initializer:
            if not (is_absent(init) and init.data_type == TensorProto.FLOAT):
                continue
            uses = readers.get(init.name, [])
            if not any(op not in blocked and index not in always_float.get(op, []) for op, index in uses):
                continue
            graph.value_info.append(helper.make_tensor_value_info(init.name, TensorProto.FLOAT, list(init.dims)))
            init.data_type = TensorProto.FLOAT16
            # Its bytes in the original data file are float32: pointed there, a float16 tensor would read them.
            for entry in init.external_data:
                if entry.key in ("location", "offset"):
                    entry.value = ABSENT if entry.key == "location" else "0"
            names.append(init.name)
    return names


def _drop_value_info(graph: GraphProto, names: list[str]) -> None:
    """Remove the value_info entries of ``names`` from ``graph`` and its subgraphs."""
    drop = set(names)
    for sub in _graphs(graph):
        kept = [vi for vi in sub.value_info if vi.name not in drop]
        del sub.value_info[:]
        sub.value_info.extend(kept)


def _fix_absent_lengths(graph: GraphProto) -> None:
    """Set the external length of each absent tensor of ``graph`` to what its dims and data type take."""
    tensors = list(graph.initializer) + [
        a.t for node in graph.node for a in node.attribute if a.type == onnx.AttributeProto.TENSOR
    ]
    for tensor in tensors:
        if not is_absent(tensor):
            continue
        size = int(np.prod(tensor.dims, dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        for entry in tensor.external_data:
            if entry.key == "length":
                entry.value = str(size)


def _drop_duplicates(graph: GraphProto) -> None:
    """Keep the first of identical nodes and of value_info entries of one name: the converter inserts one Cast per
    reader of a value a float32 input needs, each under the same name, where several nodes read it (Resize nodes
    sharing one scales tensor)."""
    seen: set[bytes] = set()
    nodes = []
    for node in graph.node:
        key = node.SerializeToString(deterministic=True)
        if key not in seen:
            seen.add(key)
            nodes.append(node)
    if len(nodes) < len(graph.node):
        kept = [NodeProto() for _ in nodes]
        for copy, node in zip(kept, nodes):
            copy.CopyFrom(node)
        del graph.node[:]
        graph.node.extend(kept)
    names: set[str] = set()
    infos = []
    for vi in graph.value_info:
        if vi.name not in names:
            names.add(vi.name)
            infos.append(vi)
    if len(infos) < len(graph.value_info):
        kept_infos = [onnx.ValueInfoProto() for _ in infos]
        for copy_vi, vi in zip(kept_infos, infos):
            copy_vi.CopyFrom(vi)
        del graph.value_info[:]
        graph.value_info.extend(kept_infos)


def _toposort(graph: GraphProto) -> None:
    """Reorder ``graph``'s nodes (in place) so that each comes after the producers of what it reads, its
    subgraphs' outer-scope reads included; nodes keep their relative order where the data allows."""
    available = {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | {""}
    producers = {out for node in graph.node for out in node.output}
    pending = list(graph.node)
    ordered: list[NodeProto] = []
    while pending:
        ready = [n for n in pending if all(n2 in available for n2 in _reads(n) if n2 in producers)]
        if not ready:
            raise RuntimeError("the converted graph has a cycle")
        ready_ids = {id(n) for n in ready}
        for node in ready:
            ordered.append(node)
            available.update(node.output)
        pending = [n for n in pending if id(n) not in ready_ids]
    copies = [NodeProto() for _ in ordered]
    for copy, node in zip(copies, ordered):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


def _reads(node: NodeProto) -> set[str]:
    """The names ``node`` reads: its inputs and the outer-scope names its subgraphs use."""
    names = set(node.input)
    for attr in node.attribute:
        subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for sub in subs:
            for inner in _graphs(sub):
                defined = {vi.name for vi in inner.input} | {t.name for t in inner.initializer}
                defined |= {out for n in inner.node for out in n.output}
                names |= {name for n in inner.node for name in n.input if name not in defined}
    return names


def _conversion_notes(
    model: ModelProto,
    converted: ModelProto,
    originals: dict[str, TensorProto],
    float_nodes: list[NodeProto],
    blocked: set[str],
    casts_before: int,
) -> list[Note]:
    """What the conversion did: initializers and nodes converted, op types kept, Casts inserted, clamped weights."""
    notes = []
    results = {t.name: t for graph in _graphs(converted.graph) for t in graph.initializer}
    was_float = [name for name, t in originals.items() if t.data_type == TensorProto.FLOAT]
    became = [name for name in was_float if results[name].data_type == TensorProto.FLOAT16]
    notes.append(Note("initializers", f"{len(became)} of {len(was_float)} float32 initializers are float16"))
    kept = Counter(n.op_type for n in float_nodes if n.op_type in blocked)
    converted_nodes = len(float_nodes) - sum(kept.values())
    notes.append(Note("nodes", f"{converted_nodes} of {len(float_nodes)} nodes on float32 values compute in float16"))
    for op, count in sorted(kept.items()):
        notes.append(Note(op, f"{count} nodes kept in float32 (Casts to and from float16 around them)"))
    resizes = sum(1 for n in float_nodes if n.op_type == "Resize")
    if resizes:
        notes.append(Note("Resize", f"the scales input of {resizes} nodes stays float32 (onnx types it float only)"))
    casts = [n for graph in _graphs(converted.graph) for n in graph.node if n.op_type == "Cast"]
    boundary = sum(1 for n in casts if n.name.startswith(("graph_input_cast", "graph_output_cast")))
    inserted = len(casts) - casts_before
    if inserted:
        notes.append(
            Note(
                "Cast",
                f"{inserted} Casts inserted ({boundary} at the graph's inputs and outputs, the rest around "
                "float32 ops and inputs)",
            )
        )
    for name in became:
        data = values(originals[name])
        if data is None or data.size == 0:
            continue
        finite = np.abs(data[np.isfinite(data)])
        if finite.size and float(finite.max()) > FP16_MAX:
            over = int(np.count_nonzero(finite > FP16_MAX))
            notes.append(
                Note(
                    name,
                    f"{over} float32 values exceed float16's largest finite value {FP16_MAX:g} (largest "
                    f"magnitude {float(finite.max()):.6g}): clamped to +-{FP16_MAX:g}",
                )
            )
    return notes
