"""Conv strides: set the stride of named Convs and repair what the new spatial sizes break downstream.

:func:`stride` sets the stride of each named Conv on every spatial axis, then follows the new shapes through the
graph with onnx's shape inference and repairs or refuses, node by node in topological order:

- a join (Concat, or an elementwise op of several inputs such as Add, Mul, Sub, Sum) whose inputs now differ in
  spatial size by an integer factor gets a nearest-neighbour Resize (by scales) on each smaller input, up to the
  largest; a ratio that is not an integer is refused, naming the node and both shapes. An input that broadcasts
  (size 1 on an axis where another input is larger, in the original model) is left alone on that axis;
- a node whose output would get a spatial size of 0 or less, a Reshape whose fixed target no longer matches its
  input's element count, and a Flatten whose output changes (the layers after it are sized for the old one) are
  refused, naming the node; whatever else onnx's strict shape inference rejects afterwards is refused with its
  message;
- a graph output whose shape changes gets its declared shape updated and a Note.

:func:`lwu` is paper 000's LWU-Net preset for the U-Net: in each encoder block (Conv -> Relu -> Conv -> Relu,
then a 2x2/2 MaxPool, the pre-pool output also feeding a later Concat as the skip connection) the second Conv
gets stride 2 and the MaxPool goes, so the strided Conv does the block's downsampling and every later level keeps
its size; the skip, now at half resolution, is upsampled x2 before its Concat by the join repair above.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from itertools import chain
from math import prod

import numpy as np
import onnx
import onnx_graphsurgeon as gs
from onnx import ModelProto

from onnxroof.ir import op_domain
from onnxroof.passes import Note, Refused, RewriteResult, lean, unchanged
from onnxroof.passes.graph_edit import Names, export_like
from onnxroof.passes.shape_repair import absent_refusal
from onnxroof.passes.weights import has_values

__all__ = ["JOINS", "lwu", "stride"]

# Ops that combine several inputs of the same spatial size (elementwise ops broadcast, Concat stacks channels).
JOINS = frozenset(
    {
        "Concat",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Sum",
        "Mean",
        "Max",
        "Min",
        "Pow",
        "Mod",
        "PRelu",
        "Where",
        "Equal",
        "Greater",
        "GreaterOrEqual",
        "Less",
        "LessOrEqual",
        "And",
        "Or",
        "Xor",
        "BitShift",
    }
)

Dim = int | str | None
Shape = tuple[Dim, ...]


def stride(model: ModelProto, strides: Mapping[str, int]) -> RewriteResult:
    """Set the stride of each named Conv (``{name: S}``, S on every spatial axis) and repair the graph after it.

    Raises Refused for a name that is not a node or not a Conv, a stride below 1, a Conv whose stride already
    is S, and for a downstream conflict the repairs do not cover (see the module docstring). ``model`` is never
    modified.
    """
    if not strides:
        return unchanged(model)
    graph, dropped = _import(model)
    by_name = {node.name: node for node in graph.nodes if node.name}
    notes: list[Note] = []
    for name, value in strides.items():
        node = by_name.get(name)
        if node is None:
            close = difflib.get_close_matches(name, list(by_name), n=3)
            raise Refused(f"no node named {name}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        if node.op != "Conv" or op_domain(node.domain or "") != "":
            raise Refused(f"node {name} is a {node.op}, not a Conv: only a Conv's stride is set")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Refused(f"stride {value!r} for Conv {name}: a stride is an integer of at least 1")
        old = _strides(node)
        if old == [value] * len(old):
            raise Refused(f"Conv {name} already has stride {value}: nothing to change")
        node.attrs["strides"] = [value] * len(old)
        notes.append(Note(name, f"stride {_text(old)} -> {value}"))
    notes += _repair(graph, model, dropped, {})
    return RewriteResult(export_like(graph, model), True, tuple(notes), not has_values(model))


def lwu(model: ModelProto) -> RewriteResult:
    """Paper 000's LWU-Net preset for the U-Net: stride 2 on the second Conv of each encoder block, the block's
    MaxPool removed, each skip connection upsampled x2 before its Concat. Refused for a model without encoder
    blocks of that pattern. ``model`` is never modified."""
    graph, dropped = _import(model)
    blocks = [block for pool in graph.nodes if (block := _encoder_block(pool)) is not None]
    if not blocks:
        raise Refused(
            "no U-Net encoder block found (Conv -> Relu -> Conv -> Relu -> MaxPool 2x2/2 with the pre-pool output "
            "also feeding a Concat): the LWU-Net preset applies to a U-Net"
        )
    notes: list[Note] = []
    pooled: dict[str, str] = {}  # block output (the pre-pool tensor) -> the pool output it now stands for
    for conv, pool in blocks:
        old = _strides(conv)
        conv.attrs["strides"] = [2] * len(old)
        notes.append(Note(conv.name, f"stride {_text(old)} -> 2: the conv downsamples the encoder block"))
        block_out, pool_out = pool.inputs[0], pool.outputs[0]
        for consumer in list(pool_out.outputs):
            for i, tensor in enumerate(consumer.inputs):
                if tensor is pool_out:
                    consumer.inputs[i] = block_out
        pooled[block_out.name] = pool_out.name
        pool.inputs.clear()
        pool.outputs.clear()
        graph.nodes.remove(pool)
        notes.append(Note(pool.name, f"MaxPool removed: {conv.name} with stride 2 halves the size instead"))
    notes += _repair(graph, model, dropped, pooled)
    return RewriteResult(export_like(graph, model), True, tuple(notes), not has_values(model))


def _encoder_block(pool: gs.Node) -> tuple[gs.Node, gs.Node] | None:
    """(second Conv, MaxPool) where ``pool`` ends a U-Net encoder block, else None."""
    if pool.op != "MaxPool" or len(pool.outputs) != 1 or pool.outputs[0].name == "":
        return None
    attrs = pool.attrs
    if list(attrs.get("kernel_shape", [])) != [2, 2] or list(attrs.get("strides", [1, 1])) != [2, 2]:
        return None
    if any(attrs.get("pads", [0] * 4)) or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return None
    if list(attrs.get("dilations", [1, 1])) != [1, 1] or attrs.get("ceil_mode", 0):
        return None
    block_out = pool.inputs[0]
    chain_ops = []
    tensor = block_out
    for _ in range(4):  # Relu <- Conv <- Relu <- Conv, walking up from the pool's input
        producers = tensor.inputs
        if len(producers) != 1:
            return None
        chain_ops.append(producers[0])
        tensor = producers[0].inputs[0] if producers[0].inputs else None
        if tensor is None:
            return None
    if [n.op for n in chain_ops] != ["Relu", "Conv", "Relu", "Conv"]:
        return None
    conv2 = chain_ops[1]
    if _strides(conv2) != [1, 1] or len(conv2.outputs[0].outputs) != 1 or len(chain_ops[2].outputs[0].outputs) != 1:
        return None
    if not any(consumer.op == "Concat" for consumer in block_out.outputs):
        return None  # no skip connection: not a U-Net encoder
    return conv2, pool


def _strides(node: gs.Node) -> list[int]:
    """The node's strides, one per spatial axis (1s where the attribute is absent)."""
    if "strides" in node.attrs:
        return [int(s) for s in node.attrs["strides"]]
    if "kernel_shape" in node.attrs:
        rank = len(node.attrs["kernel_shape"])
    else:
        weight = node.inputs[1] if len(node.inputs) > 1 else None
        shape = getattr(weight, "shape", None)
        rank = len(shape) - 2 if shape else 2
    return [1] * rank


def _text(values: tuple[Dim, ...] | list[int] | None) -> str:
    """1x4x64x64 for a shape, ? for an unknown dim."""
    if values is None:
        return "?"
    return "x".join("?" if d is None else str(d) for d in values)


def _import(model: ModelProto) -> tuple[gs.Graph, set[str]]:
    """A graphsurgeon graph of a copy of ``model`` with the shapes of every tensor but the graph inputs dropped,
    so that shape inference computes them afresh, and the names of the tensors whose shapes were dropped (their
    new shapes are declared in the result)."""
    work = ModelProto()
    work.CopyFrom(model)  # graphsurgeon hands the imported TensorProtos back on export: keep them off the input
    graph = gs.import_onnx(work)
    inputs = {t.name for t in graph.inputs}
    dropped: set[str] = set()
    for tensor in graph.tensors().values():
        if isinstance(tensor, gs.Variable) and tensor.name not in inputs and tensor.shape is not None:
            tensor.shape = None
            dropped.add(tensor.name)
    return graph, dropped


def _shapes(model: ModelProto) -> dict[str, Shape]:
    """Every tensor's shape that onnx's shape inference finds (non-strict: a conflict leaves a shape out)."""
    inferred = onnx.shape_inference.infer_shapes(lean(model), strict_mode=False, data_prop=True)
    found: dict[str, Shape] = {init.name: tuple(int(d) for d in init.dims) for init in inferred.graph.initializer}
    for info in chain(inferred.graph.input, inferred.graph.value_info, inferred.graph.output):
        tensor_type = info.type.tensor_type
        if tensor_type.HasField("shape"):
            found[info.name] = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim
            )
    return found


def _constant(tensor: gs.Tensor) -> np.ndarray | None:
    """The value of a constant tensor (an initializer with values, or a Constant node's output), else None."""
    if isinstance(tensor, gs.Constant):
        try:
            return np.asarray(tensor.values)
        except Exception:  # absent values of a graph-only model
            return None
    producers = tensor.inputs
    if len(producers) == 1 and producers[0].op == "Constant" and "value" in producers[0].attrs:
        return np.asarray(producers[0].attrs["value"].values)
    return None


def _check(graph: gs.Graph, before: Mapping[str, Shape], after: Mapping[str, Shape]) -> None:
    """Refuse a node that gets a non-positive size, a Reshape whose fixed target no longer fits, a Flatten whose
    output changes."""
    for node in graph.nodes:
        label = f"{node.op} {node.name or node.outputs[0].name}"
        for out in node.outputs:
            shape = after.get(out.name)
            if shape is not None and any(isinstance(d, int) and d <= 0 for d in shape):
                was = before.get(out.name)
                if was is None or not any(isinstance(d, int) and d <= 0 for d in was):
                    raise Refused(f"{label} would get an output of {_text(shape)}: a size of 0 or less")
        if node.op == "Reshape" and len(node.inputs) > 1:
            target, shape = _constant(node.inputs[1]), after.get(node.inputs[0].name)
            if target is None or shape is None or not all(isinstance(d, int) for d in shape):
                continue
            sizes = [d for d in shape if isinstance(d, int)]
            count = prod(sizes)
            dims = [sizes[i] if t == 0 and i < len(sizes) else int(t) for i, t in enumerate(target.tolist())]
            known = prod(d for d in dims if d != -1)
            fits = count % known == 0 if -1 in dims and known else count == known
            if not fits:
                raise Refused(
                    f"{label} has the fixed target {list(target.tolist())}, which no longer fits its input of "
                    f"{_text(shape)} ({count} elements)"
                )
        if node.op == "Flatten" and node.outputs:
            name = node.outputs[0].name
            if name in before and after.get(name) != before[name]:
                raise Refused(
                    f"{label} now gives {_text(after.get(name))}, was {_text(before[name])}: the layers after it "
                    "are sized for the old shape"
                )


def _mismatch(
    node: gs.Node, before: Mapping[str, Shape], after: Mapping[str, Shape]
) -> list[tuple[int, list[float]]] | None:
    """For a join whose inputs differ in spatial size: (input index, Resize scales) for each smaller input; None
    where the sizes agree. Refused where a ratio is not an integer."""
    shapes = [after.get(t.name) if t.name else None for t in node.inputs]
    rank = max((len(s) for s in shapes if s is not None), default=0)
    if rank < 3:
        return None
    axis = int(node.attrs.get("axis", 1)) % rank if node.op == "Concat" else None
    scales: dict[int, list[float]] = {}
    for ax in range(2, rank):
        if ax == axis:
            continue
        sizes: dict[int, int] = {}
        for i, (tensor, shape) in enumerate(zip(node.inputs, shapes)):
            if shape is None or len(shape) != rank or not isinstance(shape[ax], int):
                continue
            was = before.get(tensor.name)
            if was is not None and len(was) == rank and was[ax] == 1:
                continue  # broadcast along this axis in the original model
            sizes[i] = int(shape[ax])  # type: ignore[arg-type]
        if len(set(sizes.values())) < 2:
            continue
        target = max(sizes.values())
        big = next(i for i, s in sizes.items() if s == target)
        for i, size in sizes.items():
            if size == target:
                continue
            if target % size:
                raise Refused(
                    f"{node.op} {node.name} joins inputs of {_text(shapes[big])} and {_text(shapes[i])}: "
                    f"{target}/{size} on axis {ax} is not an integer factor"
                )
            scales.setdefault(i, [1.0] * rank)[ax] = float(target // size)
    return sorted(scales.items()) or None


def _upsample(graph: gs.Graph, node: gs.Node, index: int, scales: list[float], names: Names) -> str:
    """Put a nearest Resize by ``scales`` on input ``index`` of ``node``; the Resize's name."""
    x = node.inputs[index]
    name = names.fresh(f"{node.name or node.outputs[0].name}.upsample")
    scale = gs.Constant(names.fresh(f"{name}.scales"), np.array(scales, dtype=np.float32))
    out = gs.Variable(names.fresh(f"{name}.output"), dtype=x.dtype)
    opset = graph.opset
    attrs: dict[str, object] = {"mode": "nearest"}
    if opset >= 11:
        # Asymmetric coordinates with floor give each output element the input element it covers: for an integer
        # factor f, output i reads input floor(i / f), the same as PyTorch's and Keras' 'nearest'.
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    if opset >= 13:
        inputs = [x, gs.Variable.empty(), scale]
    elif opset >= 11:
        inputs = [x, gs.Constant(names.fresh(f"{name}.roi"), np.zeros(0, dtype=np.float32)), scale]
    elif opset == 10:
        inputs = [x, scale]
    else:
        raise Refused(f"{node.op} {node.name} needs an upsampling Resize, which opset {opset} does not have")
    graph.nodes.append(gs.Node("Resize", name, attrs, inputs, [out]))
    node.inputs[index] = out
    return name


def _repair(graph: gs.Graph, original: ModelProto, declared: set[str], pooled: Mapping[str, str]) -> list[Note]:
    """Follow the new shapes through ``graph``: Resize the smaller inputs of joins, refuse what cannot be repaired,
    and declare the new shapes of the ``declared`` tensors (those whose shapes the model declared, graph outputs
    among them); the notes of the repairs.

    ``pooled`` maps a tensor that now stands for a removed pool's output to that output's name: its new shape
    must be the one the pool gave, or the rewrite does not keep the later levels' sizes.
    """
    before = _shapes(original)
    names = Names(graph)
    notes: list[Note] = []
    for _ in range(len(graph.nodes) + 1):  # each round repairs one join, so this bounds the rounds
        graph.toposort()
        after = _shapes(gs.export_onnx(graph, do_type_check=False))
        for stand_in, pool_out in pooled.items():
            if pool_out in before and after.get(stand_in) != before[pool_out]:
                raise Refused(
                    f"{stand_in} is {_text(after.get(stand_in))} with the strided conv, but the pool gave "
                    f"{_text(before[pool_out])}: the later levels would change size"
                )
        _check(graph, before, after)
        fix = next(((n, m) for n in graph.nodes if n.op in JOINS and (m := _mismatch(n, before, after))), None)
        if fix is None:
            break
        node, resizes = fix
        shapes = [after.get(t.name) for t in node.inputs]
        for index, scales in resizes:
            smaller = node.inputs[index].name
            resize = _upsample(graph, node, index, scales, names)
            factor = "x".join(f"{s:g}" for s in scales[2:])
            notes.append(
                Note(
                    node.name or smaller,
                    f"input '{smaller}' is {_text(shapes[index])}, smaller than the other inputs: upsampled "
                    f"{factor} by the nearest Resize {resize}",
                )
            )
    exported = gs.export_onnx(graph, do_type_check=False)
    try:
        onnx.shape_inference.infer_shapes(lean(exported), strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as exc:
        raise absent_refusal(str(exc)) or Refused(f"the new sizes break the model: {exc}") from exc
    for tensor in graph.tensors().values():
        if tensor.name in declared and tensor.name in after:
            tensor.shape = list(after[tensor.name])
    for out in graph.outputs:
        was, now = before.get(out.name), after.get(out.name)
        if now is not None and was != now:
            notes.append(Note(out.name, f"output '{out.name}' is now {_text(now)}, was {_text(was)}"))
    return notes
