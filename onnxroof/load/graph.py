"""Load an ONNX model into the analysis graph: shapes resolved, weights identified, no weight bytes read.

One direction: read the model and its graph (read.py), fix its input shapes from ``--input``/``--dim``
(inputs.py), infer shapes through the ordered inference steps (infer.py), and assemble the Graph once from
the value types found (assemble.py). Where inference leaves node outputs without a shape and every input is a
static tensor, a run of the model that the caller provides fills them (fill_from_run.py). A model is read with its
external data left on disk (or absent), so a model that references hundreds of GB of weights analyzes in little
memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from onnxroof.errors import UserError
from onnxroof.ir import Graph
from onnxroof.load.assemble import assemble
from onnxroof.load.fill_from_run import ShapeRun, fill_from_run
from onnxroof.load.infer import infer
from onnxroof.load.inputs import fix_inputs, parse_shape
from onnxroof.load.model_spec import ModelSpec
from onnxroof.load.read import opset_of, read_graph, read_model
from onnxroof.load.values import Value, value_arrays, write_values
from onnxroof.protos import GraphProto, ModelProto

MIN_IR_VERSION = 3
MIN_OPSET = 7


# The model at the input shapes asked for where they change a static dim (onnxroof.passes.input_shapes), and the
# line that says what it repaired (empty where nothing); None where writing the shapes into the inputs is enough.
Reshape = Callable[[ModelProto, Mapping[str, tuple[int, ...]], Mapping[str, int]], tuple[ModelProto, str] | None]


def load_graph(
    source: str | os.PathLike | ModelProto,
    inputs: Mapping[str, tuple[int, ...] | str] | None = None,
    dims: Mapping[str, int] | None = None,
    shape_run: ShapeRun | None = None,
    reshape: Reshape | None = None,
    values: Mapping[str, Value] | None = None,
) -> Graph:
    """Read a model, fix its input shapes, infer every shape and identify weights: the analysis graph.

    ``shape_run`` (onnxroof.ort.run_for_shapes.shapes_from_run, from the stages that may run a model) gives the
    shapes inference leaves unknown where every input is a static tensor; without it they stay unknown.
    ``reshape`` (onnxroof.passes.input_shapes.at_input_shapes, from the stages that may rewrite a model) takes
    the model to shapes that change a static dim, repairing the constants that hard-code the exported size;
    without it those shapes are written into the inputs alone, and inference may keep the exported size where
    the model stores it. ``values`` (values.py) are written in as constants first, so that the shapes computed
    from them resolve. The caller's model (file or proto) is never modified: overrides are applied to a copy.
    """
    model, display_name = read_model(source, weight_bytes=False)  # a copy of our own, weight bytes left out
    if model.ir_version < MIN_IR_VERSION:
        raise UserError(
            f"IR version {model.ir_version} is older than {MIN_IR_VERSION}", "re-export with a newer exporter"
        )
    opset = opset_of(model)
    if opset and opset < MIN_OPSET:
        raise UserError(f"opset {opset} is older than {MIN_OPSET}", "convert it with onnx.version_converter")
    shapes = {k: parse_shape(v) if isinstance(v, str) else tuple(v) for k, v in (inputs or {}).items()}
    arrays = value_arrays(model, values or {}, shapes, dims or {})  # before the graph is read: they are weights
    write_values(model, arrays)
    shapes = {k: v for k, v in shapes.items() if k not in arrays}
    reshaped = reshape(model, shapes, dict(dims or {})) if reshape is not None and (shapes or dims) else None
    if reshaped is not None:
        model = reshaped[0]
    raw = read_graph(model.graph)  # inputs' shapes are not among what it reads: fixing them next leaves it true
    initializers = raw.weight_names()
    if reshaped is None:
        fix_inputs(model, shapes, dict(dims or {}), initializers)
    outputs = tuple(o.name for o in model.graph.output)
    inferred = infer(model, raw)
    types, warnings = inferred.types, list(inferred.warnings)
    if reshaped is not None and reshaped[1]:
        warnings.insert(0, reshaped[1])
    from_run: tuple[str, ...] = ()
    typed: Callable[[], GraphProto] = lambda: inferred.model.model.graph  # noqa: E731
    if shape_run is not None:
        given = ModelSpec(source, shapes, dict(dims or {}), arrays)
        ran = fill_from_run(types, raw, inferred.model, model, given, shape_run, initializers)
        types, from_run = ran.types, ran.from_run
        warnings += ran.warnings
        typed_model = ran.typed
        if typed_model is not None:  # its If branches hold the shapes the run found inside them
            typed = lambda: typed_model.graph  # noqa: E731
    tensors, constants, nodes, runtime_inputs = assemble(types, raw, typed, opset=opset or 0)
    return Graph(
        name=display_name,
        nodes=tuple(nodes),
        tensors=tensors,
        constants=constants,
        inputs=tuple(runtime_inputs),
        outputs=outputs,
        opset=opset,
        ir_version=model.ir_version,
        warnings=tuple(warnings),
        shapes_from_run=from_run,
    )
