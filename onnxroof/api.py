"""The library's front door: ``onnxroof.analyze(model, device)``.

It resolves the device (a catalog key, a device file, or ``host``: this machine's calibrated onnxruntime
profile), picks the graph to predict on (the model as exported, or the graph onnxruntime runs when the device's
engine is onnxruntime) and hands it to the analysis pass. It sits above every stage, beside the command line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from onnxroof.devices import Device
from onnxroof.devices.engines import with_engine
from onnxroof.devices.resolve import DEFAULT_DEVICE, resolve_device
from onnxroof.ir import Graph
from onnxroof.load import load_graph
from onnxroof.load.fill_from_run import ShapeRequest
from onnxroof.load.model_spec import ModelSpec
from onnxroof.load.values import Value
from onnxroof.predict.analysis import Analysis, analyze_graph, collection_paused
from onnxroof.predict.precision import check_precision
from onnxroof.predict.profiles import named_profile
from onnxroof.protos import ModelProto

__all__ = ["DEFAULT_DEVICE", "analyze", "get_device", "prediction_graph"]


def get_device(
    spec: str | os.PathLike | Device,
    threads: int = 1,
    provider: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
    engine: str | None = None,
) -> Device:
    """A Device from a catalog key, a device file or ``host``: this machine's cached calibrated profile for the
    thread count and provider, calibrated first when none is cached. ``engine`` (one of
    ``devices.engines.ENGINES``) says what runs the model there: the device's own (its ``engine`` field) when
    None."""

    def host() -> Device:
        from onnxroof.ort.calibrate import host_device

        return host_device(threads=threads, provider=provider, progress=progress)

    device = resolve_device(spec, host=host)
    return device if engine is None else with_engine(device, engine)


def analyze(
    model: str | os.PathLike | ModelProto | Graph,
    device: str | os.PathLike | Device = DEFAULT_DEVICE,
    inputs: Mapping[str, tuple[int, ...] | str] | None = None,
    dims: Mapping[str, int] | None = None,
    precision: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    as_exported: bool = False,
    optimized: bool = False,
    threads: int = 1,
    values: Mapping[str, Value] | None = None,
    engine: str | None = None,
) -> Analysis:
    """Cost every node of a model and place it on a device's roofline.

    ``model`` is a path, ``zoo:NAME``, a ModelProto or a loaded Graph; ``device`` a catalog key, a device file,
    ``host`` or a Device; ``precision`` (fp64 ... int8) asks "what if every float tensor were stored and computed
    at P" instead of following the tensors' own dtypes. ``progress(done, total)`` is called while nodes are
    costed.

    On a device profile whose engine is onnxruntime (a calibrated host), the prediction is made on the graph
    onnxruntime runs: its optimizer's output on this machine (fusions, NCHWc layout), each node under its op
    class's calibrated ceiling and the memory level its data fits in, plus the run overhead once.
    ``as_exported`` asks for the plain per-node roofline of the graph as given instead; ``optimized`` says the
    model already is onnxruntime's optimized graph (as profiled), so it is not optimized again. ``threads`` picks
    the calibration ``host`` resolves to. ``values`` give inputs' values (``{"sr": 16000}``), written in as
    constants so that the shapes computed from them resolve.

    ``inputs`` and ``dims`` fix input shapes; where they change a static dim of an export, the constants that
    hard-code its size are repaired as the batch and input-size rewrites repair them, or a UserError names the
    node and the size that cannot change (onnxroof.passes.input_shapes).

    Where shape inference leaves node outputs without a shape and every input is static, one onnxruntime run on
    random inputs gives them (a UserError where the model's weights would not fit in memory for it); their
    nodes' notes and one warning say so.
    """
    check_precision(precision)
    dev = get_device(device, threads, progress=progress, engine=engine)
    profiled = named_profile(dev) is not None and not as_exported  # the device names an engine profile
    with collection_paused():
        graph = prediction_graph(model, dev, inputs, dims, values, as_exported=as_exported, optimized=optimized)
        analysis = analyze_graph(graph, dev, precision=precision, engine=profiled, progress=progress)
        # Dropped before the collector resumes: its first pass would otherwise walk every object of the graph.
        del graph
    return analysis


def prediction_graph(
    model: str | os.PathLike | ModelProto | Graph,
    device: Device,
    inputs: Mapping[str, tuple[int, ...] | str] | None = None,
    dims: Mapping[str, int] | None = None,
    values: Mapping[str, Value] | None = None,
    *,
    as_exported: bool = False,
    optimized: bool = False,
) -> Graph:
    """The graph ``analyze`` predicts ``model`` on for ``device``: the graph the device's engine runs where it
    names an engine profile (unless ``as_exported``, or ``optimized`` says the model already is that graph), else
    the model as exported, loaded with a shape run and the input-shape repairs where they are needed. A loaded
    Graph is its own. Callers that predict one model on several devices or precisions load it once through here."""
    if isinstance(model, Graph):
        return model
    if named_profile(device) is not None and not as_exported and not optimized:
        from onnxroof.ort.optimized import engine_graph

        return engine_graph(ModelSpec.of(model, inputs, dims, values), device)
    return load_graph(
        model, inputs=inputs, dims=dims, shape_run=_shapes_from_run, reshape=_at_input_shapes, values=values
    )


def _shapes_from_run(request: ShapeRequest) -> Mapping[str, tuple[int, tuple[int, ...]]]:
    """ort.run_for_shapes.shapes_from_run, imported where a model needs a run: it brings onnx and onnxruntime."""
    from onnxroof.ort.run_for_shapes import shapes_from_run

    return shapes_from_run(request)


def _at_input_shapes(
    model: ModelProto, shapes: Mapping[str, tuple[int, ...]], dims: Mapping[str, int]
) -> tuple[ModelProto, str] | None:  # passes.input_shapes.Reshaped
    """passes.input_shapes.at_input_shapes, imported where --input or --dim is given: it brings onnx's helpers."""
    from onnxroof.passes.input_shapes import at_input_shapes

    return at_input_shapes(model, shapes, dims)
