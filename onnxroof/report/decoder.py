"""A decoder's generation as text or JSON: the phases, tokens/s, memory, and the decode steps analyzed."""

from __future__ import annotations

import json

from onnxroof.report.format import Column, seconds, table, wrap
from onnxroof.units import decimal_bytes
from onnxroof.whatif.decoder import DecoderPrediction

__all__ = ["render_decoder"]


def _headline(p: DecoderPrediction) -> str:
    engine = f" through {p.engine}" if p.engine else ""
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
    lines = [line for text in prose for line in wrap(text, width)]
    columns = [
        Column("step"),
        Column("cache", right=True),
        Column("tokens", right=True),
        Column("time", right=True),
        Column("bound"),
    ]
    rows = [["prefill", "0", str(p.prefill.new_tokens), seconds(p.prefill.time_s), p.prefill.bound]]
    rows += [["decode", str(s.context), "1", seconds(s.time_s), s.bound] for s in p.decode]
    return [*lines, "", *table(columns, rows, width)]


def render_decoder(p: DecoderPrediction, fmt: str = "table", width: int | None = None) -> str:
    """The prediction as text laid out within ``width`` columns (None: no limit), or as JSON."""
    if fmt == "json":
        return json.dumps(p.to_dict(), indent=2) + "\n"
    return "\n".join(_lines(p, width)) + "\n"
