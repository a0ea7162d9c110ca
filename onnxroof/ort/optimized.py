"""The graph onnxruntime runs: its optimizer's output on this machine (fusions, NCHWc layout) as a ``Graph``.

onnxruntime saves the optimized graph while it creates a session; large weights go to a side file that is not
read back, so the graph is analyzed like any model whose weights are absent. The values of the constants an Add
adds (an attention mask among them) are read back from that side file before it goes, so that the prediction
sees which of a Softmax's elements underflow (onnxroof.predict.subnormal). Shapes that inference leaves unknown
come from a run for shapes (run_for_shapes.py).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable
from math import prod

import onnx
from onnx import ModelProto, numpy_helper

from onnxroof.devices import Device
from onnxroof.ir import Graph
from onnxroof.load import load_graph
from onnxroof.load.model_spec import ModelSpec, Source, model_spec
from onnxroof.ort.relax import declare_inputs
from onnxroof.ort.run_for_shapes import shapes_from_run
from onnxroof.ort.session_spec import SessionSpec
from onnxroof.ort.sessions import RunnableModel, make_session, runnable_model
from onnxroof.passes.input_shapes import at_input_shapes
from onnxroof.predict.fusion import fuse
from onnxroof.predict.profiles import EXPORTED_GRAPH, ONNXRUNTIME_CUDA_GRAPH, engine_profile

# The largest constant whose values are read back from an optimized graph's side file for its masks (64 MiB of
# float32): an attention mask is a few hundred thousand elements, a weight larger than this is no mask.
MAX_MASK_ELEMENTS = 1 << 24


def calibrated_session(device: Device) -> SessionSpec:
    """The session a device profile was calibrated with: its provider and thread count (the CPU and one thread
    for a device without a calibration), every optimization on, a fallback accepted (the graph is only saved)."""
    calibration = device.calibration
    provider = "cuda" if calibration is not None and calibration.provider.lower().startswith("cuda") else "cpu"
    threads = calibration.threads if calibration is not None else 1
    return SessionSpec(provider, threads, "all", allow_fallback=True)


def inline_added_constants(model: ModelProto, folder: str) -> None:
    """Read into ``model`` the values of its initializers that an Add node adds (an attention mask among them),
    from the side file in ``folder`` where they were saved: the folder is temporary, and
    :func:`with_softmax_masks` reads the masks' values later. Initializers of over ``MAX_MASK_ELEMENTS`` are
    left out."""
    added = {name for node in model.graph.node if node.op_type == "Add" and node.domain == "" for name in node.input}
    for init in model.graph.initializer:
        external = onnx.external_data_helper.uses_external_data(init)
        if init.name in added and external and prod(init.dims) <= MAX_MASK_ELEMENTS:
            onnx.external_data_helper.load_external_data_for_tensor(init, folder)


def with_softmax_masks(graph: Graph, model: ModelProto) -> Graph:
    """``graph`` (loaded from ``model``) with the values of the constant masks added to its Softmax inputs, where
    ``model`` holds them inline (:func:`inline_added_constants`): the loader keeps only small constants' values, and
    the masks decide which of the Softmax's elements underflow (``onnxroof.predict.subnormal``)."""
    from onnxroof.predict.subnormal import mask_candidates

    wanted = mask_candidates(graph)
    values = {
        init.name: numpy_helper.to_array(init)
        for init in model.graph.initializer
        if init.name in wanted and not onnx.external_data_helper.uses_external_data(init)
    }
    return dataclasses.replace(graph, constants={**graph.constants, **values}) if values else graph


def engine_graph(model: ModelSpec | Source, device: Device) -> Graph:
    """The graph the device's engine runs for ``model`` (``predict.profiles.engine_profile``): onnxruntime's
    optimizer's output, in the session the device profile was calibrated with or, for its CUDA provider, at the
    basic level followed by its transformer optimizer's GPU fusions; or the graph as exported; then the kernels
    the engine fuses its nodes into (``predict.fusion``). Weights absent from disk are filled at random only to let
    onnxruntime build it. The constant masks added to a Softmax's input keep their values
    (``onnxroof.predict.subnormal``): where they send exp below the normal float range, the Softmax and the product
    after it run on subnormal floats."""
    profile = engine_profile(device)
    if profile.graph == EXPORTED_GRAPH:  # loaded as analyze loads it: weights are filled only if a run is needed
        spec = model_spec(model)
        graph = load_graph(
            spec.source,
            inputs=spec.inputs,
            dims=spec.dims,
            values=spec.values,
            shape_run=shapes_from_run,
            reshape=at_input_shapes,
        )
    else:
        runnable = runnable_model(model)
        if profile.graph == ONNXRUNTIME_CUDA_GRAPH:
            graph = _optimized(runnable, BASIC_SESSION, transformer_fusions)
        else:
            graph = _optimized(runnable, calibrated_session(device))
        graph = dataclasses.replace(graph, name=runnable.name)
    if profile.fusion is not None:
        graph = fuse(graph, profile.fusion.at(device.engine_release))
    return graph


# onnxruntime's optimizer at its basic level, on one CPU thread: the rewrites it makes for every provider (constants
# folded, batch normalization and scales folded into convolutions, MatMul + Add as Gemm); the fusions it makes at
# the levels above are each for a list of providers, the CPU's layout among them.
BASIC_SESSION = SessionSpec("cpu", 1, "basic", allow_fallback=True)


def transformer_fusions(model: ModelProto) -> ModelProto:
    """``model`` through onnxruntime's transformer optimizer for the GPU (``onnxruntime.transformers.optimizer``,
    in Python, without a session): attention, LayerNorm, SkipLayerNorm, Gelu and bias fusions as its CUDA provider
    runs them. A model with no Softmax and no normalization has nothing for it and is returned as it is."""
    ops = {n.op_type for n in model.graph.node}
    if not ops & {"Softmax", "LayerNormalization", "ReduceMean"}:
        return model
    from onnxruntime.transformers.optimizer import optimize_model

    quiet = logging.getLogger("onnxruntime.transformers")
    level, quiet.level = quiet.level, logging.ERROR
    try:
        return optimize_model(model, model_type="bert", opt_level=0, use_gpu=True).model
    finally:
        quiet.setLevel(level)


def _optimized(
    runnable: RunnableModel, session: SessionSpec, then: Callable[[ModelProto], ModelProto] | None = None
) -> Graph:
    """The graph onnxruntime's optimizer hands back for ``runnable`` in ``session`` (and ``then`` rewrites), with
    its masks' values."""
    with tempfile.TemporaryDirectory(prefix="onnxroof-opt-") as tmp:
        path = os.path.join(tmp, "optimized.onnx")  # its large weights in a side file beside it
        make_session(runnable.model, session, optimized_path=path)
        optimized = onnx.load(path, load_external_data=False)
        if then is not None:  # a rewrite reads the weights' values: every one of them is read back first
            onnx.external_data_helper.load_external_data_for_model(optimized, tmp)
            optimized = then(optimized)
        declare_inputs(optimized, runnable.inputs)  # a load with the inputs left open saves them open
        inline_added_constants(optimized, tmp)
    return with_softmax_masks(load_graph(optimized, shape_run=shapes_from_run, values=runnable.values), optimized)
