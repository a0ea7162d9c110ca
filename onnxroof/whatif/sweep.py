"""Every combination of batch, input size, precision and device: predicted time, throughput, intensity, bound.

Two kinds of precision row, never mixed up: a *what-if* row analyzes the graph as if every float tensor were
stored and computed at that precision (bytes and peak per precision, paper 000 section 4.4), the graph itself
unchanged; a *rewrite* row analyzes the graph that the --fp16 or --int8 rewrite produces (Casts, quantize and
dequantize nodes, integer kernels included), which on an onnxruntime host is what really runs. Batch and input
size are rewrites of the graph (the batch and input-size passes, which repair hard-coded shapes).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from onnx import ModelProto

from onnxroof.errors import UserError
from onnxroof.passes.model_file import Source
from onnxroof.whatif.rewrite import RewriteRequest, apply_request

if TYPE_CHECKING:
    from onnxroof.predict.analysis import Analysis

__all__ = ["PRECISION_REWRITES", "Sweep", "SweepRow", "sweep", "sweep_row", "sweep_source", "variant_model"]

# The rewrites a sweep can add as rows, and the request each stands for.
PRECISION_REWRITES: dict[str, RewriteRequest] = {
    "fp16": RewriteRequest(fp16=True, keep_io_types=True),
    "int8-dynamic": RewriteRequest(int8="dynamic"),
    "int8-static": RewriteRequest(int8="static"),
}


@dataclass(frozen=True)
class SweepRow:
    """One combination and its prediction. ``kind`` is "what-if" (precision applied in the analysis) or
    "rewrite" (the graph rewritten to ``precision``); ``precision`` "stored" means the tensors' own dtypes."""

    batch: int
    input_size: str
    precision: str
    kind: str
    device: str
    graph: str
    predicted_time_s: float
    flops: float
    bytes_moved: float
    intensity: float
    bound: str
    uncounted: int = 0  # nodes not counted in full (Totals.uncounted): the row's totals are then lower bounds

    @property
    def complete(self) -> bool:
        return self.uncounted == 0

    @property
    def throughput(self) -> float:
        """Samples per second at this batch."""
        return self.batch / self.predicted_time_s if self.predicted_time_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "throughput_per_s": self.throughput, "complete": self.complete}


@dataclass(frozen=True)
class Sweep:
    model: str
    rows: tuple[SweepRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "rows": [r.to_dict() for r in self.rows]}


def sweep(
    model: str | os.PathLike[str],
    devices: Sequence[str],
    *,
    batches: Sequence[int] = (),
    sizes: Sequence[tuple[int, int]] = (),
    precisions: Sequence[str] = (),
    rewrites: Sequence[str] = (),
    threads: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Sweep:
    """Analyze every combination of ``batches`` x ``sizes`` x (``precisions`` what-ifs and ``rewrites``) on
    every device. An empty ``batches`` or ``sizes`` keeps the model's own; no precision and no rewrite analyzes
    the stored dtypes."""
    from onnxroof.api import analyze, get_device
    from onnxroof.predict.precision import check_precision

    targets = [get_device(d, threads) for d in devices]  # resolved (and a bad name refused) before any work
    for p in precisions:
        check_precision(p)
    unknown = [r for r in rewrites if r not in PRECISION_REWRITES]
    if unknown:
        raise UserError(f"unknown rewrite {unknown[0]!r}", "use " + ", ".join(PRECISION_REWRITES))
    source = sweep_source(model, rewrites=bool(rewrites))
    cases: list[tuple[str | None, str | None]] = [(p, None) for p in precisions] or ([] if rewrites else [(None, None)])
    cases += [(None, r) for r in rewrites]
    batch_options: list[int | None] = list(batches) or [None]
    size_options: list[tuple[int, int] | None] = list(sizes) or [None]
    combos = list(itertools.product(batch_options, size_options, cases))
    total, done = len(combos) * len(targets), 0
    rows: list[SweepRow] = []
    for batch, size, (precision, rewrite) in combos:
        variant = variant_model(source, batch, size, rewrite)
        for device in targets:
            analysis = analyze(variant, device, precision=precision, threads=threads)
            rows.append(sweep_row(variant, analysis, precision, rewrite))
            done += 1
            if progress:
                progress(done, total)
    return Sweep(source.name, tuple(rows))


def sweep_source(model: str | os.PathLike[str], rewrites: bool) -> Source:
    """The model as a sweep reads it: with its weights where a precision rewrite needs them (fp16 converts them,
    static int8 calibrates on them), without their bytes where only shapes and what-if precisions change."""
    from onnxroof.passes.model_file import read_source

    return read_source(model) if rewrites else _weightless(model)


def variant_model(
    source: Source, batch: int | None, size: tuple[int, int] | None = None, rewrite: str | None = None
) -> ModelProto:
    """The model at ``batch`` and input ``size`` (None: its own), converted by the precision rewrite ``rewrite``
    (a key of PRECISION_REWRITES) where one is given: the batch and input-size passes repair hard-coded shapes or
    refuse, a UserError naming the node. The source itself where nothing changes."""
    base = PRECISION_REWRITES[rewrite] if rewrite else RewriteRequest()
    request = replace(base, batch=batch, input_size=size)
    return source.model if request.empty else apply_request(source, request, compare_outputs=False).result.model


def sweep_row(variant: ModelProto, analysis: Analysis, precision: str | None, rewrite: str | None) -> SweepRow:
    """The row of ``analysis``, the prediction of ``variant`` at the what-if ``precision`` (None: the stored
    dtypes) or of its ``rewrite``: batch and input size read from the variant's first input."""
    shape = _input_shape(variant)
    t = analysis.totals
    return SweepRow(
        batch=shape[0] if shape else 1,
        input_size="x".join(map(str, shape[2:])) if len(shape) == 4 else "-",
        precision=rewrite or precision or "stored",
        kind="rewrite" if rewrite else ("what-if" if precision else "stored"),
        device=analysis.device.spec(),
        graph=analysis.graph,
        predicted_time_s=t.predicted_time_s,
        flops=t.flops,
        bytes_moved=t.bytes_read + t.bytes_written,
        intensity=t.arithmetic_intensity,
        bound=t.bound,
        uncounted=t.uncounted,
    )


def _weightless(model: str | os.PathLike[str]) -> Source:
    """The model without its weights' bytes (a sweep of shapes and what-if precisions needs none)."""
    from onnxroof.load.read import read_model

    proto, name = read_model(model, weight_bytes=False)
    return Source(proto, name, True)


def _input_shape(model: ModelProto) -> tuple[int, ...]:
    """The first graph input's shape (0 for a symbolic dim)."""
    from onnxroof.load.inputs import runtime_inputs

    inputs = runtime_inputs(model.graph)
    return tuple(d.dim_value for d in inputs[0].type.tensor_type.shape.dim) if inputs else ()
