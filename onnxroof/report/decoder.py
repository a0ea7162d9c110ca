"""A decoder's generation as text or JSON: the phases, tokens/s, memory, and the decode steps analyzed."""

from __future__ import annotations

import json
from collections.abc import Sequence

from onnxroof.report.format import Column, seconds, table, wrap
from onnxroof.units import decimal_bytes
from onnxroof.whatif.decoder import DecoderPrediction, MeasuredGeneration

__all__ = ["render_decoder", "render_decoders"]


def _headline(p: DecoderPrediction) -> str:
    engine = f" through {p.engine}" if p.engine else ""
    engine += f", split over {p.tensor_parallel} GPUs (one GPU's times and memory)" if p.tensor_parallel > 1 else ""
    lower = "" if p.complete else " (INCOMPLETE: some nodes are not counted in full; the times are lower bounds)"
    return (
        f"{p.model} on {p.device}{engine}: batch {p.batch}, prompt {p.prompt}, {p.generate} generated; "
        f"time to first token {seconds(p.prefill.time_s)}, {p.tokens_per_s:.4g} tokens/s{lower}"
    )


def _lines(p: DecoderPrediction, width: int | None) -> list[str]:
    first, last = p.decode[0], p.decode[-1]
    m = p.memory
    sampled = (
        "every decode step analyzed"
        if p.exact
        else (f"{len(p.decode)} of the {p.generate} decode steps analyzed, the others interpolated between them")
    )
    prose = [
        _headline(p),
        f"prefill {seconds(p.prefill.time_s)} ({p.prefill.bound}-bound, {p.prompt} tokens)",
        f"decode per token: first {seconds(first.time_s)} (cache of {first.context}), mean "
        f"{seconds(p.decode_mean_s)}, last {seconds(last.time_s)} (cache of {last.context}); "
        f"{p.tokens_per_s:.4g} tokens/s at batch {p.batch}; whole generation {seconds(p.total_s)}",
        f"memory: weights {decimal_bytes(m.weights_bytes)}, KV cache {decimal_bytes(m.kv_cache_bytes)} at "
        f"{p.prompt + p.generate} tokens ({decimal_bytes(m.kv_bytes_per_token)} a token a sequence), activations "
        f"{decimal_bytes(m.activation_bytes)}; peak {decimal_bytes(m.peak_bytes)}",
        f"{sampled}; attention: {p.dims.attention}"
        + ("; past and present share one buffer" if p.shared_buffer else "")
        + f"; includes {p.includes}",
    ]
    if p.measured is not None:
        prose.insert(1, _measured_line(p, p.measured))
    lines = [line for text in prose for line in wrap(text, width)]
    return [*lines, "", *table(_columns(p), _rows(p), width)]


def _measured_line(p: DecoderPrediction, m: MeasuredGeneration) -> str:
    return (
        f"measured here ({m.threads} thread{'s' if m.threads != 1 else ''}, onnxruntime, median of each step): "
        f"time to first token {seconds(m.prefill_s)} ({_error(p.prefill.time_s, m.prefill_s)}), mean decode step "
        f"{seconds(m.decode_mean_s)} ({_error(p.decode_mean_s, m.decode_mean_s)}), {m.tokens_per_s:.4g} tokens/s"
    )


def _error(predicted: float, measured: float) -> str:
    """The prediction's error against the measurement, signed: + where the prediction is slower."""
    return f"{(predicted / measured - 1) * 100:+.0f}%"


def _columns(p: DecoderPrediction) -> list[Column]:
    columns = [Column("step"), Column("cache", right=True), Column("tokens", right=True), Column("time", right=True)]
    if p.measured is not None:
        columns += [Column("measured", right=True), Column("error", right=True)]
    if p.tensor_parallel > 1:
        columns.append(Column("all-reduce", right=True))
    return [*columns, Column("bound")]


def _rows(p: DecoderPrediction) -> list[list[str]]:
    measured = [p.measured.prefill_s, *(t for _, t in p.measured.decode)] if p.measured else None
    steps = [("prefill", p.prefill), *(("decode", s) for s in p.decode)]
    rows = []
    for i, (kind, s) in enumerate(steps):
        row = [kind, str(s.context), str(s.new_tokens), seconds(s.time_s)]
        if measured is not None:
            row += [seconds(measured[i]), _error(s.time_s, measured[i])]
        if p.tensor_parallel > 1:
            row.append(seconds(s.all_reduce_s))
        rows.append([*row, s.bound])
    return rows


def render_decoders(ps: Sequence[DecoderPrediction], fmt: str = "table", width: int | None = None) -> str:
    """One prediction as render_decoder gives it; several (one per device) one after the other, or in JSON as
    ``{"devices": [...]}``."""
    if len(ps) == 1:
        return render_decoder(ps[0], fmt, width)
    if fmt == "json":
        return json.dumps({"devices": [p.to_dict() for p in ps]}, indent=2) + "\n"
    return "\n".join(render_decoder(p, fmt, width) for p in ps)


def render_decoder(p: DecoderPrediction, fmt: str = "table", width: int | None = None) -> str:
    """The prediction as text laid out within ``width`` columns (None: no limit), or as JSON."""
    if fmt == "json":
        return json.dumps(p.to_dict(), indent=2) + "\n"
    return "\n".join(_lines(p, width)) + "\n"
