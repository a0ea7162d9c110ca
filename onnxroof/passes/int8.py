"""The int8 pass: a float32 model quantized to 8-bit integers through ``onnxruntime.quantization``.

Steps, all on files in a temporary directory that is removed afterwards (the quantization tools work on files):

1. Preprocessing (``quant_pre_process``, unless ``preprocess`` is off): onnxruntime's symbolic shape inference,
   its basic graph optimizations (constant folding, BatchNormalization folded into Conv, ...) and onnx's shape
   inference, so that the quantizer knows every tensor's shape. Symbolic inference can fail on a model it does not
   understand: that is refused with the option that skips it (``skip_symbolic_shape``).
2. Quantization, by ``mode``:

   - ``"dynamic"`` (``quantize_dynamic``): weights are quantized ahead of time; activations are quantized at run
     time by DynamicQuantizeLinear, which produces uint8. Conv becomes ConvInteger, MatMul (and Gemm) MatMulInteger,
     LSTM com.microsoft's DynamicQuantizeLSTM. Weights are QUInt8: onnxruntime's CPU provider has run
     uint8 x uint8 ConvInteger and MatMulInteger in every release, while ConvInteger with int8 weights runs only
     on releases since late 2025.
   - ``"static"`` (``quantize_static`` with ``QuantFormat.QDQ``): activations' ranges are calibrated (min/max) by
     running the model on ``feeds``; every quantized op's inputs and outputs pass through QuantizeLinear and
     DequantizeLinear pairs (uint8 activations and int8 weights, the form onnxruntime recommends for x86-64), which
     onnxruntime fuses into integer kernels (QLinearConv, QGemm, ...) when it optimizes the session.

The quantizer raises the opset where its ops need it (to at least 11; 13 for per-axis Q/DQ). The result passes
:func:`onnxroof.passes.check_model`, onnx's full check; for nodes of onnxruntime's com.microsoft domain (such as
DynamicQuantizeLSTM) onnx has no schema, so its checker checks their graph wiring but neither their attributes nor
their types. The domains the result imports are cut to the ones its nodes use (the optimizer of step 1 writes out
every domain onnxruntime knows).

What the quantization library logs (through ``logging``) or prints is captured and never reaches the terminal.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto

from onnxroof.load.inputs import runtime_inputs
from onnxroof.passes import Note, Refused, RewriteResult
from onnxroof.passes.weights import has_values

__all__ = ["MODES", "int8"]

MODES = ("dynamic", "static")
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
SKIP_OPTION = "skip_symbolic_shape=True (--int8-skip-symbolic-shape)"


def int8(
    model: ModelProto,
    mode: str,
    *,
    feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
    preprocess: bool = True,
    skip_symbolic_shape: bool = False,
    progress: Callable[[str], None] | None = None,
) -> RewriteResult:
    """``model`` quantized to int8 in ``mode`` ("dynamic" or "static"; see the module docstring).

    ``feeds`` are the calibration inputs of static mode: a list of dicts from input name to array, each one run of
    the model. ``preprocess`` runs onnxruntime's preprocessing first; ``skip_symbolic_shape`` leaves its symbolic
    shape inference out. Refused: an unknown mode, static mode without feeds, a graph-only model (its weights have
    no values to quantize), a model whose preprocessing fails. ``progress(step)`` is called as each step starts.
    """
    say = progress or (lambda _: None)
    if mode not in MODES:
        raise Refused(f"unknown int8 mode {mode!r}", f"the modes are {', '.join(MODES)}")
    if not has_values(model):
        raise Refused(
            "int8 quantization needs the weights' values; this model is graph-only (its weight data is absent)",
            "read the model with its external data file beside it",
        )
    if mode == "static":
        _check_feeds(model, feeds)

    notes: list[Note] = []
    with tempfile.TemporaryDirectory(prefix="onnxroof-int8-") as folder, _quiet() as said:
        work = Path(folder)
        source = work / "model.onnx"
        source.write_bytes(model.SerializeToString())
        if preprocess:
            say("int8: onnxruntime's quantization preprocessing (shape inference, basic optimizations)")
            source = _preprocess(source, work / "preprocessed.onnx", skip_symbolic_shape)
        before = onnx.load(str(source))
        # The quantizer infers shapes again: value_info the optimizer left behind can contradict what it infers
        # (a Gemm whose folded weight changed layout), so none is kept. Its calibration runs this model, so below
        # IR version 4 no stale input may remain either.
        del before.graph.value_info[:]
        _list_initializers_as_inputs(before, model)
        source.write_bytes(before.SerializeToString())
        target = work / "quantized.onnx"
        if mode == "dynamic":
            say("int8: quantizing the weights (dynamic)")
            _dynamic(source, target)
        else:
            say(f"int8: calibrating the activations' ranges on {len(feeds or ())} input(s), then quantizing (static)")
            _static(source, target, feeds or ())
        result = onnx.load(str(target))
    if preprocess:
        notes += _count_notes(model, before, "preprocessing (onnxruntime's basic graph optimizations)")
    if any("Optimization Failed" in message for message in said):
        notes.append(Note("preprocessing", "onnxruntime's graph optimization failed; quantized without it"))
    _prune_domains(result)
    _list_initializers_as_inputs(result, model)
    notes += _count_notes(before, result, f"{mode} quantization")
    notes += _float_notes(before, result, mode)
    return RewriteResult(result, True, tuple(notes))


def _check_feeds(model: ModelProto, feeds: Sequence[Mapping[str, np.ndarray]] | None) -> None:
    """Refuse static mode without calibration inputs, or with inputs that do not name the model's inputs."""
    names = [vi.name for vi in runtime_inputs(model.graph)]
    if not feeds:
        raise Refused(
            "static int8 quantization calibrates activation ranges and has no calibration inputs",
            f"pass feeds: a list of dicts from input name ({', '.join(names)}) to a representative array",
        )
    for index, feed in enumerate(feeds):
        missing = [name for name in names if name not in feed]
        if missing:
            raise Refused(f"calibration feed {index} lacks the input(s) {', '.join(missing)}", "give every input")


def _preprocess(source: Path, target: Path, skip_symbolic_shape: bool) -> Path:
    """Run onnxruntime's quantization preprocessing from ``source`` to ``target``; refused where it fails."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(str(source), str(target), skip_symbolic_shape=skip_symbolic_shape)
    except Exception as exc:  # symbolic inference raises plain Exception ("Incomplete symbolic shape inference")
        if skip_symbolic_shape:
            raise Refused(
                f"onnxruntime's quantization preprocessing fails on this model ({exc})",
                "pass preprocess=False to quantize without it",
            ) from exc
        raise Refused(
            f"onnxruntime's symbolic shape inference, part of the quantization preprocessing, fails on this model "
            f"({type(exc).__name__}: {exc})",
            f"pass {SKIP_OPTION} to preprocess with onnx's shape inference alone",
        ) from exc
    return target


def _list_initializers_as_inputs(model: ModelProto, original: ModelProto) -> None:
    """Below IR version 4 every initializer must also be a graph input. The quantizer adds initializers (scales,
    zero points, quantized weights) without listing them, and the preprocessing folds initializers away while their
    inputs stay, which onnxruntime would then require as feeds: the inputs become the original's runtime inputs and
    one per initializer."""
    if model.ir_version >= 4:
        return
    weights = {init.name for init in original.graph.initializer} | {init.name for init in model.graph.initializer}
    runtime = runtime_inputs(model.graph, weights)
    del model.graph.input[:]
    model.graph.input.extend(runtime)
    for init in model.graph.initializer:
        model.graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))


def _dynamic(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QUInt8)


def _static(source: Path, target: Path, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        """The calibration inputs, one run each, as onnxruntime's reader protocol (None when done)."""

        def __init__(self) -> None:
            self.pending = iter([dict(feed) for feed in feeds])

        def get_next(self) -> Any:
            return next(self.pending, None)

    # uint8 activations and int8 weights (U8S8): the form onnxruntime recommends for x86-64 CPUs, whose integer
    # kernels multiply unsigned by signed bytes (VPMADDUBSW); int8 activations there take a slower path.
    quantize_static(
        str(source),
        str(target),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )


@contextlib.contextmanager
def _quiet() -> Iterator[list[str]]:
    """Capture, for the block, what the root logger and the onnxruntime loggers receive (the quantization tools log
    through both) and what is printed to stdout; yields the captured log messages."""
    messages: list[str] = []

    class Collector(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            with contextlib.suppress(Exception):
                messages.append(record.getMessage())

    collector = Collector(logging.WARNING)
    root = logging.getLogger()
    handlers = root.handlers[:]
    quantization = logging.getLogger("onnxruntime")
    propagate = quantization.propagate
    # The sessions the quantizer opens log through onnxruntime's own logger, which has no getter to restore:
    # warnings and below are silenced for good, as onnxroof's onnxruntime stage silences them for its sessions.
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    root.handlers = [collector]
    quantization.addHandler(collector)
    quantization.propagate = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield messages
    finally:
        root.handlers = handlers
        quantization.removeHandler(collector)
        quantization.propagate = propagate


def _prune_domains(model: ModelProto) -> None:
    """Keep the opset imports of the standard domain and of the domains the nodes use."""
    used = {""} | {node.domain for node in _nodes(model)} | {f.domain for f in model.functions}
    kept = [o for o in model.opset_import if o.domain in used or o.domain == "ai.onnx"]
    if len(kept) < len(model.opset_import):
        del model.opset_import[:]
        model.opset_import.extend(kept)


def _nodes(model: ModelProto) -> list[onnx.NodeProto]:
    """Every node of ``model``, in subgraphs too."""
    found: list[onnx.NodeProto] = []

    def visit(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            found.append(node)
            for attr in node.attribute:
                for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                    visit(sub)

    visit(model.graph)
    return found


def _count_notes(before: ModelProto, after: ModelProto, step: str) -> list[Note]:
    """One note per op type whose node count ``step`` changed."""
    old = Counter(node.op_type for node in _nodes(before))
    new = Counter(node.op_type for node in _nodes(after))
    return [
        Note(op, f"{step}: {old[op]} -> {new[op]} nodes") for op in sorted(set(old) | set(new)) if old[op] != new[op]
    ]


def _float_notes(before: ModelProto, after: ModelProto, mode: str) -> list[Note]:
    """Which nodes of the quantizer's input were quantized and which stay in float, by op type.

    A node of ``before`` (matched by name) is quantized when it is gone from ``after`` in dynamic mode (replaced
    by integer ops) or reads a DequantizeLinear output in static mode; in static mode a node that is gone was
    folded into a neighbour's quantization (a Relu or Clip after a quantized op). A node still there with no
    dequantized input stays in float.
    """
    kept = {node.name: node for node in after.graph.node if node.name}
    dequantized = {out for node in after.graph.node if node.op_type == "DequantizeLinear" for out in node.output}
    quantized: Counter[str] = Counter()
    folded: Counter[str] = Counter()
    floating: Counter[str] = Counter()
    for node in before.graph.node:
        if node.op_type in QDQ_OPS:
            continue
        now = kept.get(node.name) if node.name else None
        if now is None or now.op_type != node.op_type:
            (quantized if mode == "dynamic" else folded)[node.op_type] += 1
        elif any(name in dequantized for name in now.input):
            quantized[node.op_type] += 1
        else:
            floating[node.op_type] += 1
    notes = []
    for label, counts in (
        ("quantized", quantized),
        ("folded into the quantization of a neighbour", folded),
        ("left in float", floating),
    ):
        if counts:
            listing = ", ".join(f"{op} x{count}" for op, count in sorted(counts.items()))
            notes.append(Note(label, listing))
    return notes
