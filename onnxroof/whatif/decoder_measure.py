"""A decoder's predicted generation timed on this machine: the prefill and each decode step the prediction
analyzed, run with onnxruntime at that step's dims on inputs that agree with its cache (onnxroof.ort.decoder_feeds),
each the median of its samples. The mean decode step is interpolated over the same contexts as the prediction's,
so the two means compare like with like."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from onnxroof.load.model_spec import ModelSpec, Source
from onnxroof.whatif.decoder import DecoderPrediction, MeasuredGeneration, mean_step_time

__all__ = ["measure_generation"]

DEFAULT_REPEAT = 10  # samples per step: a generation times many steps


def measure_generation(
    source: Source,
    prediction: DecoderPrediction,
    *,
    threads: int = 1,
    dims: Mapping[str, int] | None = None,
    repeat: int = DEFAULT_REPEAT,
    progress: Callable[[str], None] | None = None,
) -> DecoderPrediction:
    """The prediction with its steps timed here at ``threads`` threads (``dims`` fix the model's other symbolic
    dims, as for the prediction)."""
    from onnxroof.ort.measure import measure
    from onnxroof.ort.session_spec import SessionSpec

    say = progress or (lambda text: None)
    p, session = prediction, SessionSpec(threads=threads)
    buffer = p.prompt + p.generate if p.shared_buffer else None

    def timed(new_tokens: int, context: int) -> float:
        step = {**(dims or {}), **p.dims.step(p.batch, new_tokens, context, buffer)}
        return measure(ModelSpec(source, dims=step), session, warmup=3, repeat=repeat).median_s

    say("timing the prefill here")
    prefill = timed(p.prompt, 0)
    decode = []
    for i, step in enumerate(p.decode):
        say(f"timing decode step {i + 1} of {len(p.decode)} here (context {step.context})")
        decode.append((step.context, timed(1, step.context)))
    mean = mean_step_time(decode, p.prompt, p.generate)
    return replace(p, measured=MeasuredGeneration(threads, p.batch, prefill, tuple(decode), mean))
