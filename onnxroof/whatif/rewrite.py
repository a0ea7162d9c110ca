"""One rewrite request: which passes, in which order, and the checks around them.

The passes run in a fixed order whatever order the options were given in: the shape changes first (batch, input
size), then the structure (strides, separable convolutions), then the precision (fp16 or int8), so that a
quantization is calibrated on the final shapes and a separable factorization sees fp32 weights. Afterwards, where
the rewrite keeps the input and output shapes and the weights are there, both models run on the same random
inputs and the largest output difference is reported, NaN and overflow named.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import ModelProto

from onnxroof.errors import UserError
from onnxroof.ort.outputs import OutputDifference, output_differences
from onnxroof.passes import Pass, RewriteResult, compose
from onnxroof.passes.model_file import Source, read_source, too_large

__all__ = ["INT8_MODES", "LWU", "RewriteRequest", "Rewritten", "apply_request", "calibration_feeds", "rewrite", "steps"]

LWU = "lwu"  # paper 000's LWU-Net preset of --stride
INT8_MODES = ("dynamic", "static")


@dataclass(frozen=True)
class RewriteRequest:
    """What to rewrite. ``separable``: None leaves convolutions alone, () separates every eligible one, names
    only those. ``strides``: node -> stride, or LWU. ``int8``: None or one of INT8_MODES; ``calibration`` an
    .npz of real inputs for static int8 (random inputs otherwise)."""

    batch: int | None = None
    input_size: tuple[int, int] | None = None
    strides: Mapping[str, int] | str | None = None
    separable: tuple[str, ...] | None = None
    fp16: bool = False
    keep_io_types: bool = False
    fp16_block: tuple[str, ...] = ()
    int8: str | None = None
    calibration: str | None = None
    int8_skip_symbolic_shape: bool = False

    @property
    def empty(self) -> bool:
        return not self.describe()

    def describe(self) -> list[str]:
        """The passes asked for, as the command line spells them."""
        words = []
        if self.batch is not None:
            words.append(f"--batch {self.batch}")
        if self.input_size is not None:
            words.append(f"--input-size {self.input_size[0]}x{self.input_size[1]}")
        if self.strides is not None:
            shown = (
                self.strides if isinstance(self.strides, str) else ",".join(f"{k}={v}" for k, v in self.strides.items())
            )
            words.append(f"--stride {shown}")
        if self.separable is not None:
            words.append("--separable" + (f" {','.join(self.separable)}" if self.separable else ""))
        if self.fp16:
            words.append("--fp16")
        if self.int8:
            words.append(f"--int8 {self.int8}")
        return words


@dataclass(frozen=True)
class Rewritten:
    """A rewrite's result with the source's name and the output comparison (empty where it was not run, with
    the reason in ``comparison_skipped``)."""

    source: str
    request: RewriteRequest
    result: RewriteResult
    differences: tuple[OutputDifference, ...] = ()
    comparison_skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "passes": list(self.result.passes),
            "changed": self.result.changed,
            "graph_only": self.result.graph_only,
            "notes": [{"node": n.node, "change": n.change, "error": n.error} for n in self.result.notes],
            "output_differences": [d.to_dict() for d in self.differences],
            "comparison_skipped": self.comparison_skipped,
        }


def steps(request: RewriteRequest, progress: Callable[[str], None] | None = None) -> list[tuple[str, Pass]]:
    """The passes of ``request`` in the order they run (see the module docstring); ``progress(step)`` hears the
    steps of the long ones (int8)."""
    if request.fp16 and request.int8:
        raise UserError("--fp16 and --int8 both change the precision", "choose one of them")
    if request.int8 is not None and request.int8 not in INT8_MODES:
        raise UserError(f"unknown int8 mode {request.int8!r}", "use --int8 dynamic or --int8 static")
    if request.calibration is not None and request.int8 != "static":
        raise UserError("--calibration is for static int8", "pass --int8 static with it, or drop it")
    out: list[tuple[str, Pass]] = []
    if request.batch is not None:
        from onnxroof.passes.batch import batch

        n = request.batch
        out.append(("batch", lambda m: batch(m, n)))
    if request.input_size is not None:
        from onnxroof.passes.input_size import input_size

        h, w = request.input_size
        out.append(("input-size", lambda m: input_size(m, h, w)))
    if request.strides is not None:
        from onnxroof.passes import stride

        strides = request.strides
        if isinstance(strides, str):
            if strides != LWU:
                raise UserError(f"unknown stride preset {strides!r}", f"use --stride {LWU} or --stride NODE=S")
            out.append(("stride", stride.lwu))
        else:
            chosen = dict(strides)
            out.append(("stride", lambda m: stride.stride(m, chosen)))
    if request.separable is not None:
        from onnxroof.passes.separable import separable

        nodes = request.separable or None
        out.append(("separable", lambda m: separable(m, nodes)))
    if request.fp16:
        from onnxroof.passes.fp16 import fp16

        keep, block = request.keep_io_types, request.fp16_block
        out.append(("fp16", lambda m: fp16(m, keep_io_types=keep, block_ops=block)))
    if request.int8 is not None:
        out.append(("int8", _int8_step(request, progress)))
    return out


def _int8_step(request: RewriteRequest, progress: Callable[[str], None] | None = None) -> Pass:
    """The int8 pass, calibrated (static mode) on random inputs of the model it is given or on an .npz."""
    from onnxroof.passes.int8 import int8

    mode, npz, skip = request.int8 or "dynamic", request.calibration, request.int8_skip_symbolic_shape

    def run(model: ModelProto) -> RewriteResult:
        feeds = calibration_feeds(model, npz) if mode == "static" else None
        return int8(model, mode, feeds=feeds, skip_symbolic_shape=skip, progress=progress)

    return run


def calibration_feeds(model: ModelProto, npz: str | None, count: int = 8) -> list[dict[str, np.ndarray]]:
    """Inputs to calibrate static int8 on: every sample of an .npz (arrays named like the inputs, the first
    axis the sample when it has one more dimension than the input), or ``count`` random ones."""
    from onnxroof.ort.sessions import load_feeds, random_feeds, runnable_model

    runnable = runnable_model(model)
    if npz is None:
        return [random_feeds(runnable, seed) for seed in range(count)]
    try:
        with np.load(npz) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise UserError(
            f"cannot read calibration inputs from {npz}: {exc}", "pass an .npz written by numpy.savez"
        ) from None
    first = next(iter(runnable.inputs))
    shape = runnable.inputs[first][0]
    if first in arrays and arrays[first].ndim == len(shape) + 1:
        samples = arrays[first].shape[0]
        return [{k: np.asarray(arrays[k][i]) for k in runnable.inputs} for i in range(samples)]
    if first in arrays and shape[:1] == (1,) and arrays[first].shape[1:] == shape[1:]:  # N samples of batch 1
        return [{k: np.asarray(arrays[k][i : i + 1]) for k in runnable.inputs} for i in range(len(arrays[first]))]
    for name, (want, _) in runnable.inputs.items():
        if name in arrays and tuple(arrays[name].shape) != want:
            shown = "x".join(map(str, want)) or "a scalar"
            raise UserError(
                f"calibration input {name!r} in {npz} has shape {'x'.join(map(str, arrays[name].shape))}, the model "
                f"takes {shown}",
                f"save it as {shown}, or N samples as Nx{shown}; or rewrite at its shape too (--batch, --input-size)",
            )
    return [load_feeds(npz, runnable)]


def apply_request(
    source: Source,
    request: RewriteRequest,
    compare_outputs: bool = True,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Rewritten:
    """Run ``request``'s passes on ``source`` and compare outputs where the rewrite keeps the shapes;
    ``progress(step)`` is called as the long steps start."""
    if request.empty:
        raise UserError(
            "no rewrite asked for", "pass at least one of --separable, --stride, --fp16, --int8, --batch, --input-size"
        )
    result = compose(source.model, steps(request, progress), graph_only=source.graph_only)
    skipped = _why_not_compared(source, request, result) if compare_outputs else "not asked for"
    differences: tuple[OutputDifference, ...] = ()
    if skipped is None:
        if progress is not None:
            progress("running both models to compare their outputs")
        differences = output_differences(source.model, result.model, seed)
    return Rewritten(source.name, request, result, differences, skipped)


def rewrite(
    model: str | os.PathLike[str],
    request: RewriteRequest,
    compare_outputs: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Rewritten:
    """Read ``model`` (a path or zoo:NAME, with its weights where present) and apply ``request``; ``progress``
    as in apply_request."""
    return apply_request(read_source(model), request, compare_outputs, progress=progress)


def _why_not_compared(source: Source, request: RewriteRequest, result: RewriteResult) -> str | None:
    if not result.changed:
        return "nothing changed"
    if result.graph_only:
        return "the weights are absent (graph-only model)"
    if (
        request.batch is not None
        or request.input_size is not None
        or (request.strides is not None and _shapes_differ(source.model, result.model))
    ):
        return "the rewrite changes the input or output shapes"
    if too_large(source.model) or too_large(result.model):
        return "the model is 2 GB or more"
    return None


def _shapes_differ(a: ModelProto, b: ModelProto) -> bool:
    def shapes(m: ModelProto) -> list[Any]:
        return [
            [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]
            for v in list(m.graph.input) + list(m.graph.output)
        ]

    return shapes(a) != shapes(b)
