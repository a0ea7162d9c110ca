"""onnxruntime's symbolic shape inference, for the shapes onnx's inference leaves unknown: run without writing
anything and never given a weight's bytes.
"""

from __future__ import annotations

import itertools

from onnx import ModelProto, TensorProto

from onnxroof.load.read import shape_of, value_types


def with_symbolic_shapes(model: ModelProto, warnings: list[str]) -> ModelProto:
    """``model`` (changed in place) plus the shapes onnxruntime's symbolic inference resolves; on failure ``model``
    as it is and a warning (symbolic inference is best effort: it needs sympy and inline shape constants)."""
    try:
        extra = symbolic_infer(model)
    except Exception as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        warnings.append(f"symbolic shape inference failed ({reason})")
        return model
    return merge_shapes(model, extra)


def symbolic_infer(model: ModelProto) -> ModelProto:
    """onnxruntime's symbolic shape inference, keeping what it resolved even when it cannot resolve everything.

    Its public ``infer_shapes`` raises on an incomplete result and first saves the model into the current
    directory; this runs the same steps without writing anything. ``model`` is left as it was.
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


def merge_shapes(model: ModelProto, extra: ModelProto) -> ModelProto:
    """``model`` (changed in place) plus the static shapes that ``extra`` knows and ``model`` does not (only the
    top-level graph)."""
    known = {name for name, t in value_types(model.graph).items() if t.shape is not None}
    for vi in itertools.chain(extra.graph.input, extra.graph.value_info, extra.graph.output):
        if vi.name not in known and shape_of(vi.type)[1] is not None:
            model.graph.value_info.append(vi)
            known.add(vi.name)
    return model
