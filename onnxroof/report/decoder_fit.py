"""A decoder's fit as text or JSON: one PASS or FAIL line with the checks, then where the memory goes; for a
search, the largest batch or context and the fits on either side of it."""

from __future__ import annotations

import json

from onnxroof.report.fit import check_text
from onnxroof.report.format import wrap
from onnxroof.units import decimal_bytes
from onnxroof.whatif.decoder_fit import DecoderFit, LargestDecoder

__all__ = ["decoder_summary", "render_decoder_fit", "render_largest_decoder"]


def decoder_summary(f: DecoderFit) -> str:
    """PASS or FAIL, the model, device, batch, context and cache dtype, and each check with its numbers."""
    lower = "" if f.uncounted == 0 else f" (INCOMPLETE, a lower bound: {f.uncounted} node(s) not counted in full)"
    checks = "; ".join(check_text(c) + (lower if c.unit == "s" else "") for c in f.checks)
    split = f" (one of {f.tensor_parallel} GPUs)" if f.tensor_parallel > 1 else ""
    return (
        f"{'PASS' if f.passed else 'FAIL'} {f.model} on {f.device}{split}, batch {f.batch}, context {f.context} "
        f"({f.kv_dtype} cache): {checks}"
    )


def _memory_line(f: DecoderFit) -> str:
    m = f.memory
    line = (
        f"  memory {decimal_bytes(m.peak_bytes)} = weights {decimal_bytes(m.weights_bytes)} + KV cache "
        f"{decimal_bytes(m.kv_cache_bytes)} ({decimal_bytes(m.kv_bytes_per_token)} a token a sequence, "
        f"{f.kv_dtype}) + activations {decimal_bytes(m.activation_bytes)}"
    )
    if f.time_per_token_s is None:
        line += f"; no time predicted: the graph's cache is not {f.kv_dtype}"
    return line


def render_decoder_fit(f: DecoderFit, fmt: str = "table", width: int | None = None) -> str:
    """The fit as text (its PASS or FAIL line whole, the rest wrapped within ``width`` columns) or as JSON."""
    if fmt == "json":
        return json.dumps(f.to_dict(), indent=2) + "\n"
    return "\n".join([decoder_summary(f), *wrap(_memory_line(f), width)]) + "\n"


def render_largest_decoder(found: LargestDecoder, fmt: str = "table", width: int | None = None) -> str:
    """The largest batch or context: a PASS or FAIL line, whole, then the fits on either side, wrapped; or JSON."""
    if fmt == "json":
        return json.dumps(found.to_dict(), indent=2) + "\n"
    what = found.what
    if found.best is None:
        tail = f": {decoder_summary(found.first_failing)}" if found.first_failing is not None else ""
        return f"FAIL no {what} fits ({found.stopped_by} at {what} 1){tail}\n"
    after = found.first_failing
    head = (
        f"PASS largest {what} on {found.best.device}: {found.value} ({found.stopped_by} stops "
        f"{what} {_size(after, what) if after is not None else 'none'})"
    )
    lines = [f"  at {found.value}: {decoder_summary(found.best)}", _memory_line(found.best)]
    if after is not None:
        lines.append(f"  at {_size(after, what)}: {decoder_summary(after)}")
    return "\n".join([head, *(part for line in lines for part in wrap(line, width))]) + "\n"


def _size(f: DecoderFit, what: str) -> int:
    return f.batch if what == "batch" else f.context
