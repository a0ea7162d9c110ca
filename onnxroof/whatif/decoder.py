"""A decoder's generation, predicted phase by phase from its one-step graph: the prefill of the prompt (the time
to the first token), every decode step as the KV cache grows (the time per output token), tokens/s, and memory.

Generating G tokens after a prompt of P: the prefill runs the graph once on the P prompt tokens over an empty
cache; then G decode steps each run it on one token, step k (k = 0 .. G-1) over a cache of P + k rows, so the
first reads P rows, the last P + G - 1, and the cache ends at P + G rows. Each step is the analysis of the graph
with its dims fixed to that step (onnxroof.load.decoder finds them), on the device and engine asked for. With more
than ``samples`` steps, that many are analyzed, evenly spaced over the contexts, first and last included, and the
others are interpolated linearly between them (a step's bytes grow linearly with its cache; its time is a sum of
per-node roofline times, piecewise linear in the context): ``exact`` says whether every step was analyzed.

A shared buffer (``shared_buffer``, what onnxruntime GenAI runs on a GPU: past and present are one tensor of
P + G rows) fixes the past dim at the buffer's length in every step; GroupQueryAttention then reads its valid rows
and writes the new ones (onnxroof.costs.contrib).

Memory: the weights (each once), the KV cache at P + G rows (the past inputs' bytes per token, times the batch and
P + G), and the activations: the peak of live buffers of the prefill and of the last step, the caches left out
(the runtime holds them across steps; onnxroof.predict.memory counts a step's past and present as two). The peak
is their sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.ir import Tensor
from onnxroof.load.decoder import DecoderDims, decoder_dims, position_limit
from onnxroof.protos import ModelProto
from onnxroof.whatif.tensor_parallel import TensorParallel
from onnxroof.whatif.tensor_parallel import tensor_parallel as parallel_plan

__all__ = [
    "DEFAULT_SAMPLES",
    "DecoderMemory",
    "DecoderPrediction",
    "MeasuredGeneration",
    "Step",
    "StepAt",
    "analyze_step",
    "decode_contexts",
    "decoder_memory",
    "kv_bytes_per_token",
    "mean_step_time",
    "predict_decoder",
]

DEFAULT_SAMPLES = 9  # decode steps analyzed where there are more


@dataclass(frozen=True)
class Step:
    """One forward call: ``new_tokens`` tokens over a cache of ``context`` rows, as the analysis predicts it."""

    context: int
    new_tokens: int
    time_s: float
    bound: str  # the bound holding most of its time
    flops: float
    bytes: float
    uncounted: int = 0  # nodes its analysis could not count in full: its figures are then lower bounds
    all_reduce_s: float = 0.0  # split over GPUs: the part of time_s its all-reduces take

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DecoderMemory:
    """What generation holds: weights, the KV cache at the last token, the activations of the largest step."""

    weights_bytes: int
    kv_bytes_per_token: int  # one sequence's cache row over every layer's K and V
    kv_cache_bytes: int  # at P + G rows, for the whole batch
    activation_bytes: int

    @property
    def peak_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "peak_bytes": self.peak_bytes}


@dataclass(frozen=True)
class MeasuredGeneration:
    """The same steps timed on this machine with onnxruntime: the median of each step's samples."""

    threads: int
    batch: int
    prefill_s: float
    decode: tuple[tuple[int, float], ...]  # (context, seconds) of the decode steps the prediction analyzed
    decode_mean_s: float  # over all G steps, interpolated as the prediction's mean is

    @property
    def tokens_per_s(self) -> float:
        return self.batch / self.decode_mean_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "prefill_s": self.prefill_s,
            "decode_s": {"first": self.decode[0][1], "mean": self.decode_mean_s, "last": self.decode[-1][1]},
            "tokens_per_s": self.tokens_per_s,
            "steps": [{"context": c, "time_s": t} for c, t in self.decode],
        }


@dataclass(frozen=True)
class DecoderPrediction:
    """A generation of ``generate`` tokens after a prompt of ``prompt``, at ``batch`` sequences."""

    model: str
    device: str
    engine: str | None
    batch: int
    prompt: int
    generate: int
    dims: DecoderDims
    shared_buffer: bool
    prefill: Step
    decode: tuple[Step, ...]  # the steps analyzed, by context
    exact: bool
    decode_mean_s: float
    memory: DecoderMemory
    includes: str
    measured: MeasuredGeneration | None = None
    tensor_parallel: int = 1  # GPUs the model is split over; times and memory are one GPU's
    precision: str = ""  # what its steps compute at (the analysis' precision)

    @property
    def complete(self) -> bool:
        """Whether every step's analysis counted every node (else the times are lower bounds)."""
        return not any(s.uncounted for s in (self.prefill, *self.decode))

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput: tokens the batch generates per second of decoding."""
        return self.batch / self.decode_mean_s

    @property
    def total_s(self) -> float:
        return self.prefill.time_s + self.generate * self.decode_mean_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "engine": self.engine,
            "includes": self.includes,
            "batch": self.batch,
            "prompt": self.prompt,
            "generate": self.generate,
            "shared_buffer": self.shared_buffer,
            "tensor_parallel": self.tensor_parallel,
            "precision": self.precision,
            "attention": self.dims.attention,
            "prefill_s": self.prefill.time_s,
            "decode_s": {"first": self.decode[0].time_s, "mean": self.decode_mean_s, "last": self.decode[-1].time_s},
            "tokens_per_s": self.tokens_per_s,
            "total_s": self.total_s,
            "kv_cache_bytes": self.memory.kv_cache_bytes,
            "kv_bytes_per_token": self.memory.kv_bytes_per_token,
            "weights_bytes": self.memory.weights_bytes,
            "activation_bytes": self.memory.activation_bytes,
            "peak_bytes": self.memory.peak_bytes,
            "exact": self.exact,
            "complete": self.complete,
            "steps": {"prefill": self.prefill.to_dict(), "decode": [s.to_dict() for s in self.decode]},
            "measured": self.measured.to_dict() if self.measured else None,
        }


def decode_contexts(prompt: int, generate: int, samples: int) -> list[int]:
    """The contexts of the decode steps analyzed: every one of P .. P+G-1 where there are at most ``samples``,
    else ``samples`` of them evenly spaced, first and last included."""
    if generate <= samples:
        return list(range(prompt, prompt + generate))
    spaced = np.linspace(prompt, prompt + generate - 1, samples)
    return sorted({round(float(c)) for c in spaced})


def mean_step_time(steps: Sequence[tuple[int, float]], prompt: int, generate: int) -> float:
    """The mean time of the G decode steps from (context, seconds) of those analyzed or timed: their mean where
    every one was, else that of the steps interpolated linearly between them."""
    contexts = np.array([c for c, _ in steps], dtype=float)
    times = np.array([t for _, t in steps])
    return float(np.interp(np.arange(prompt, prompt + generate, dtype=float), contexts, times).mean())


def _check(prompt: int, generate: int, batch: int, samples: int) -> None:
    for value, what in ((prompt, "--prompt"), (generate, "--generate"), (batch, "--batch"), (samples, "--samples")):
        if value < 1:
            raise UserError(f"{what} {value}: must be at least 1", f"e.g. {what} {16 if what == '--samples' else 1}")
    if samples < 2 and generate > 1:
        raise UserError("--samples 1 cannot span the first and last decode step", "give at least 2")


def predict_decoder(
    model: ModelProto,
    device: str | Device,
    *,
    prompt: int,
    generate: int,
    batch: int = 1,
    shared_buffer: bool = False,
    samples: int = DEFAULT_SAMPLES,
    dims: dict[str, int] | None = None,
    tensor_parallel: int = 1,
    name: str = "",
    progress: Callable[[str], None] | None = None,
) -> DecoderPrediction:
    """Predict a generation on ``device`` (a catalog key, device file or host, with ``@ENGINE`` where given),
    split over ``tensor_parallel`` such GPUs (onnxroof.whatif.tensor_parallel). ``dims`` fix the model's other
    symbolic dims. A UserError for a model that is no decoder with a KV cache, or for a shared buffer where its
    attention is not GroupQueryAttention."""
    from onnxroof.api import get_device

    _check(prompt, generate, batch, samples)
    target = device if isinstance(device, Device) else get_device(device)
    split = None if tensor_parallel == 1 else parallel_plan(model, target, tensor_parallel)
    found = decoder_dims(model, fixed=dims or {})
    if shared_buffer and found.attention != "GroupQueryAttention":
        raise UserError(
            f"--shared-buffer: the decoder's attention is {found.attention}, which reads its whole past",
            "a buffer shared by past and present is GroupQueryAttention's (onnxruntime GenAI); drop --shared-buffer",
        )
    limit = position_limit(model)
    if limit is not None and prompt + generate > limit:
        raise UserError(
            f"a context of {prompt + generate} tokens: the decoder's rotary tables hold {limit} positions",
            f"keep --prompt + --generate within {limit}",
        )
    at = StepAt(model, found, batch, prompt + generate if shared_buffer else None, dims or {}, split)
    say = progress or (lambda text: None)
    say("prefill")
    prefill, first = analyze_step(at, target, prompt, 0)
    contexts = decode_contexts(prompt, generate, samples)
    decode = []
    for i, context in enumerate(contexts):
        say(f"decode step {i + 1} of {len(contexts)} (context {context})")
        decode.append(analyze_step(at, target, 1, context)[0])
    steps = tuple(decode)
    memory = decoder_memory(at, [(prompt, 0), (1, prompt + generate - 1)], prompt + generate)
    return DecoderPrediction(
        model=name or model.graph.name,
        device=first.device.key,
        engine=first.device.engine,
        batch=batch,
        prompt=prompt,
        generate=generate,
        dims=found,
        shared_buffer=shared_buffer,
        prefill=prefill,
        decode=steps,
        exact=len(steps) == generate,
        decode_mean_s=mean_step_time([(s.context, s.time_s) for s in steps], prompt, generate),
        memory=memory,
        includes=first.includes,
        tensor_parallel=tensor_parallel,
        precision=first.totals.prediction.precision,
    )


@dataclass(frozen=True)
class StepAt:
    """What fixes a step's dims beside its new tokens and context: the model, its decoder dims, the batch, the
    shared buffer's rows (None: past and present apart) and the user's other dims."""

    model: ModelProto
    found: DecoderDims
    batch: int
    buffer: int | None
    dims: dict[str, int]
    split: TensorParallel | None = None  # the model split over GPUs: each step is one GPU's share

    def dims_of(self, new_tokens: int, context: int) -> dict[str, int]:
        return {**self.dims, **self.found.step(self.batch, new_tokens, context, self.buffer)}


def analyze_step(at: StepAt, device: str | Device, new_tokens: int, context: int) -> tuple[Step, Any]:
    """One step analyzed on ``device``: its Step and the Analysis behind it."""
    from onnxroof.api import analyze

    analysis = analyze(at.model, device, dims=at.dims_of(new_tokens, context))
    totals = analysis.totals
    bound = max(totals.time_by_bound.items(), key=lambda kv: kv[1])[0] if totals.time_by_bound else "memory"
    time_s, moved = totals.prediction.predicted_time_s, totals.bytes_read + totals.bytes_written
    communication = 0.0
    if at.split is not None:
        time_s, communication = at.split.step_time(analysis, at.batch, new_tokens)
    step = Step(context, new_tokens, time_s, bound, totals.flops, moved, totals.uncounted, communication)
    return step, analysis


def kv_bytes_per_token(model: ModelProto, found: DecoderDims, element_bits: float | None = None) -> int:
    """One sequence's cache row: over every past input, its element size (``element_bits`` where given, else its
    dtype's) times its dims but batch and past."""
    total = 0.0
    for info in model.graph.input:
        if info.name not in found.caches:
            continue
        t = info.type.tensor_type
        row = tuple(d.dim_value for i, d in enumerate(t.shape.dim) if i not in (0, 2))
        tensor = Tensor(info.name, t.elem_type, row)
        total += tensor.nbytes if element_bits is None else tensor.numel * element_bits / 8
    return math.ceil(total)


def _kv_heads(model: ModelProto, found: DecoderDims) -> int:
    """The KV heads of the caches' layout ``[batch, heads, past, head]``."""
    info = next(i for i in model.graph.input if i.name == found.caches[0])
    return info.type.tensor_type.shape.dim[1].dim_value or 1


def decoder_memory(
    at: StepAt, steps: Sequence[tuple[int, int]], tokens: int, kv_bits: float | None = None
) -> DecoderMemory:
    """Weights, the KV cache of ``tokens`` rows a sequence (its elements of ``kv_bits`` bits where given, else of
    the graph's dtype) and the largest activations of ``steps``, each (new tokens, context), the caches left out."""
    from onnxroof.load import load_graph
    from onnxroof.predict.memory import estimate_memory

    held = set(at.found.caches) | set(at.found.presents)
    estimates = [
        estimate_memory(load_graph(at.model, dims=at.dims_of(new, context)), held=held) for new, context in steps
    ]
    per_token = kv_bytes_per_token(at.model, at.found, kv_bits)
    weights = estimates[0].weights_bytes
    if at.split is not None:
        weights = at.split.weights_bytes(weights)
        per_token = math.ceil(per_token * at.split.kv_share(_kv_heads(at.model, at.found)))
    return DecoderMemory(
        weights_bytes=weights,
        kv_bytes_per_token=per_token,
        kv_cache_bytes=per_token * at.batch * tokens,
        activation_bytes=max(e.peak_activation_bytes for e in estimates),
    )
