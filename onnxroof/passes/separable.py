"""Depthwise-separable factorization: a standard 2-D Conv becomes a depthwise conv followed by a pointwise conv.

For a Conv with weight ``W`` of shape ``[C_out, C_in, kh, kw]`` (group 1, kernel larger than 1x1), the pass
approximates every input channel's slice by a rank-1 product: ``A_c = W[:, c].reshape(C_out, kh*kw)`` has the
SVD ``A_c = U S V^T``, and its best rank-1 approximation (Eckart-Young) is ``s u v^T`` with the first singular
triple. The depthwise kernel of channel ``c`` is ``v`` reshaped to ``kh x kw``; column ``c`` of the pointwise
weight ``[C_out, C_in, 1, 1]`` is ``s * u``. Since the conv is linear in its weight and
``W_approx[o, c] = p[o, c] * d[c]``, the pointwise conv of the depthwise conv computes exactly the conv with
``W_approx``: a kernel that is separable to begin with gives the same outputs.

The whole singular value goes to the pointwise side: the depthwise kernels then have unit Frobenius norm, so the
intermediate activation stays at the scale of the input (by Cauchy-Schwarz no output of a unit-norm filter
exceeds the norm of its window), which keeps it within range when the model runs in a narrower dtype, and the
pointwise conv, like the original conv, carries the layer's gain.

Each converted layer gets a :class:`Note` with the relative error ``||W - W_approx||_F / ||W||_F`` of its
weight. A graph-only model (weights without values, see :mod:`.weights`) is converted on shapes alone: the new
weights are absent too and the note says so (error None).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np
import onnx_graphsurgeon as gs
from onnx import ModelProto, TensorProto
from onnx_graphsurgeon.ir.tensor import LazyValues

from onnxroof.ir import op_domain
from onnxroof.passes import Note, Refused, RewriteResult
from onnxroof.passes.graph_edit import Names, export_like
from onnxroof.passes.weights import absent_tensor, has_values, tensor, values

__all__ = ["factorize", "separable"]


def separable(model: ModelProto, nodes: Sequence[str] | None = None) -> RewriteResult:
    """Replace each eligible Conv (``nodes``, or every eligible one when None) by a depthwise kh x kw Conv and a
    pointwise 1x1 Conv; one Note per converted layer with the weight's relative approximation error.

    Raises Refused for a named node that does not exist or is not eligible (naming it and the reason), and when
    ``nodes`` is None and no Conv of the model is eligible. ``model`` is never modified.
    """
    work = ModelProto()
    work.CopyFrom(model)  # graphsurgeon hands the imported TensorProtos back on export: keep them off the input
    initializers = {init.name: init for init in work.graph.initializer}
    graph = gs.import_onnx(work)
    by_name = {node.name: node for node in graph.nodes if node.name}
    input_names = {t.name for t in graph.inputs}

    chosen: list[gs.Node] = []
    if nodes is None:
        skipped: list[str] = []
        for node in graph.nodes:
            if node.op != "Conv" or op_domain(node.domain or "") != "":
                continue
            reason = _ineligible(node, initializers, input_names)
            if reason is None:
                chosen.append(node)
            else:
                skipped.append(f"{_label(node)} {reason}")
        if not chosen:
            detail = f": {'; '.join(skipped[:5])}{' ...' if len(skipped) > 5 else ''}" if skipped else ""
            raise Refused(f"no Conv of the model can be separated{detail}" if skipped else "the model has no Conv")
    else:
        for name in dict.fromkeys(nodes):  # in order, each once
            node = by_name.get(name)
            if node is None:
                close = difflib.get_close_matches(name, list(by_name), n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise Refused(f"no node named {name}{hint}")
            if node.op != "Conv" or op_domain(node.domain or "") != "":
                raise Refused(f"node {name} is a {node.op}, not a Conv")
            reason = _ineligible(node, initializers, input_names)
            if reason is not None:
                raise Refused(f"Conv {name} {reason}")
            chosen.append(node)
        if not chosen:
            return RewriteResult(model, False, (), not has_values(model))

    names = Names(graph)
    notes = [_convert(graph, node, initializers[node.inputs[1].name], names) for node in chosen]
    result = export_like(graph, model)
    return RewriteResult(result, True, tuple(notes), not has_values(model))


def factorize(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The depthwise ``[C_in, 1, kh, kw]`` and pointwise ``[C_out, C_in, 1, 1]`` weights whose composition is the
    best per-channel rank-1 approximation of the Conv weight ``[C_out, C_in, kh, kw]`` (computed in float64)."""
    c_out, c_in, kh, kw = weight.shape
    # A[c] = W[:, c].reshape(C_out, kh*kw), one matrix per input channel; numpy's SVD works on the stack.
    a = weight.astype(np.float64).transpose(1, 0, 2, 3).reshape(c_in, c_out, kh * kw)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    u0, s0, v0 = u[:, :, 0], s[:, 0], vh[:, 0, :]
    # The singular vectors are defined up to a joint sign: make the largest entry of each v positive, so that the
    # result does not depend on the LAPACK build.
    sign = np.where(v0[np.arange(c_in), np.abs(v0).argmax(axis=1)] < 0, -1.0, 1.0)
    v0, u0 = v0 * sign[:, None], u0 * sign[:, None]
    depthwise = v0.reshape(c_in, 1, kh, kw)
    pointwise = (s0[:, None] * u0).T.reshape(c_out, c_in, 1, 1)
    return depthwise, pointwise


def _label(node: gs.Node) -> str:
    """The node's name, or its first output's where it has none."""
    return str(node.name or (node.outputs[0].name if node.outputs else "<unnamed>"))


def _ineligible(node: gs.Node, initializers: dict[str, TensorProto], input_names: set[str]) -> str | None:
    """Why a Conv is not separated (the text after "Conv <name> "), or None when it is eligible."""
    if len(node.inputs) < 2:
        return "has no weight input"
    weight = node.inputs[1]
    if not isinstance(weight, gs.Constant) or weight.name not in initializers or weight.name in input_names:
        return "weight is not a constant initializer"
    dims = list(initializers[weight.name].dims)
    if len(dims) != 4:
        return f"is {len(dims) - 2}-D: only 2-D convolutions are separated"
    group = int(node.attrs.get("group", 1))
    c_in = dims[1] * group
    if group != 1:
        if group == c_in:
            return "has group == C_in: already depthwise"
        return f"has group {group}: grouped convolutions are not separated"
    if dims[2] * dims[3] == 1:
        return "is 1x1: already pointwise"
    return None


def _convert(graph: gs.Graph, node: gs.Node, proto: TensorProto, names: Names) -> Note:
    """Replace ``node`` in ``graph`` by its depthwise and pointwise Convs; the Note of the change."""
    base = _label(node)
    c_out, c_in, kh, kw = (int(d) for d in proto.dims)
    x, out = node.inputs[0], node.outputs[0]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2].name else None

    dw_name, pw_name = names.fresh(f"{base}.depthwise"), names.fresh(f"{base}.pointwise")
    dw_weight_name, pw_weight_name = names.fresh(f"{dw_name}.weight"), names.fresh(f"{pw_name}.weight")
    dw_shape, pw_shape = (c_in, 1, kh, kw), (c_out, c_in, 1, 1)
    array = values(proto)
    if array is None:
        dw_proto = absent_tensor(dw_weight_name, dw_shape, proto.data_type)
        pw_proto = absent_tensor(pw_weight_name, pw_shape, proto.data_type)
        error: float | None = None
        tail = "; weight values are absent, the new weights have shapes only"
    else:
        depthwise, pointwise = factorize(array)
        approx = pointwise.reshape(c_out, c_in, 1, 1) * depthwise.reshape(1, c_in, kh, kw)
        norm = float(np.linalg.norm(array.astype(np.float64)))
        error = float(np.linalg.norm(array.astype(np.float64) - approx)) / norm if norm else 0.0
        dw_proto = tensor(dw_weight_name, depthwise.astype(array.dtype))
        pw_proto = tensor(pw_weight_name, pointwise.astype(array.dtype))
        tail = ""

    attrs = node.attrs
    dw_attrs: dict[str, object] = {"group": c_in, "kernel_shape": [kh, kw]}
    for key in ("strides", "pads", "dilations", "auto_pad"):
        if key in attrs:
            dw_attrs[key] = attrs[key]
    mid = gs.Variable(names.fresh(f"{dw_name}.output"), dtype=out.dtype)
    dw_inputs = [x, gs.Constant(dw_weight_name, LazyValues(dw_proto))]
    pw_inputs = [mid, gs.Constant(pw_weight_name, LazyValues(pw_proto))] + ([bias] if bias is not None else [])
    graph.nodes.append(gs.Node("Conv", dw_name, dw_attrs, dw_inputs, [mid], domain=node.domain))
    graph.nodes.append(gs.Node("Conv", pw_name, {"kernel_shape": [1, 1]}, pw_inputs, [out], domain=node.domain))
    node.inputs.clear()
    node.outputs.clear()  # the original node now feeds nothing: cleanup() drops it and its weight
    change = (
        f"Conv {kh}x{kw} {c_in}->{c_out} became {dw_name} (depthwise {kh}x{kw}, group {c_in}) + "
        f"{pw_name} (pointwise 1x1 {c_in}->{c_out}){tail}"
    )
    return Note(base, change, error)
