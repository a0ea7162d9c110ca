"""Deploy-time fit for a decoder: does it serve ``batch`` sequences at a context of ``context`` tokens on a device,
the largest context that fits at a batch, and the largest batch at a context.

A context of N tokens is what a generation holds when its cache reaches N rows (prompt and generated tokens
together). Its checks:

- time per output token: the decode step whose cache ends at N rows (N - 1 rows read, one added);
- time to first token (with its budget only): the prefill of an N-token prompt, the longest one the context
  allows;
- memory: the weights (at the bit width they are stored in: 4-bit MatMulNBits packed with their scales), the KV
  cache of N rows for every sequence, its elements of the cache's dtype or of ``kv_dtype``, and the larger
  activations of that prefill and that decode step. The memory budget defaults to the device's capacity.

Split over ``tensor_parallel`` GPUs (onnxroof.whatif.tensor_parallel), the times are one GPU's share with its
all-reduces, and the memory one GPU's: its share of the weights and of the KV cache's heads.

A cache dtype other than the graph's sizes the memory only: the time of a step that reads an int8 cache needs a
graph that stores it so, so a latency budget with it is refused, and no time is predicted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.load.decoder import decoder_dims, position_limit
from onnxroof.protos import ModelProto, TensorProto
from onnxroof.whatif.decoder import DecoderMemory, StepAt, analyze_step, decoder_memory
from onnxroof.whatif.fit import MAX_BATCH_LIMIT, Budget, Check, budget_check, default_memory_budget, largest_passing
from onnxroof.whatif.tensor_parallel import TensorParallel
from onnxroof.whatif.tensor_parallel import tensor_parallel as parallel_plan

__all__ = [
    "KV_DTYPES",
    "DecoderBudgets",
    "DecoderFit",
    "LargestDecoder",
    "cache_dtype",
    "fit_decoder",
    "largest_decoder",
]

# Bits a KV cache element takes, by the dtype names --kv-dtype takes.
KV_DTYPES: dict[str, float] = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
_GRAPH_DTYPES = {
    TensorProto.FLOAT: "fp32",
    TensorProto.FLOAT16: "fp16",
    TensorProto.BFLOAT16: "bf16",
    TensorProto.FLOAT8E4M3FN: "fp8",
    TensorProto.INT8: "int8",
    TensorProto.UINT8: "int8",
}
MAX_CONTEXT_LIMIT = 1 << 20  # the longest context the search tries where the graph gives no position limit


@dataclass(frozen=True)
class DecoderBudgets:
    """The budgets of a decoder fit and the cache dtype memory is counted in (None: the graph's)."""

    per_token: Budget = None
    first_token: Budget = None
    memory: Budget = None
    kv_dtype: str | None = None


@dataclass(frozen=True)
class DecoderFit:
    """The decoder at one batch and context on one device: its predicted times and memory against the budgets.
    The times are None where the cache dtype is not the graph's."""

    model: str
    device: str
    batch: int
    context: int
    kv_dtype: str
    time_per_token_s: float | None
    first_token_s: float | None
    memory: DecoderMemory
    checks: tuple[Check, ...]
    uncounted: int = 0  # nodes not counted in full: the times are then lower bounds
    tensor_parallel: int = 1  # GPUs the model is split over; times and memory are one GPU's

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "batch": self.batch,
            "context": self.context,
            "kv_dtype": self.kv_dtype,
            "tensor_parallel": self.tensor_parallel,
            "time_per_token_s": self.time_per_token_s,
            "first_token_s": self.first_token_s,
            "memory": self.memory.to_dict(),
            "passed": self.passed,
            "complete": self.uncounted == 0,
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass(frozen=True)
class LargestDecoder:
    """The largest ``what`` ("batch" or "context") within the budgets, the other held fixed; 0 where even 1 fails."""

    what: str
    value: int
    stopped_by: str
    best: DecoderFit | None
    first_failing: DecoderFit | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            f"max_{self.what}": self.value,
            "stopped_by": self.stopped_by,
            "fit": self.best.to_dict() if self.best else None,
            "first_failing": self.first_failing.to_dict() if self.first_failing else None,
        }


@dataclass(frozen=True)
class _Request:
    """What every fit of one request shares."""

    model: ModelProto
    name: str
    device: Device
    budgets: DecoderBudgets
    shared_buffer: bool
    dims: dict[str, int]
    split: TensorParallel | None  # the model split over GPUs; None on one device


def cache_dtype(model: ModelProto, caches: tuple[str, ...]) -> str:
    """The dtype name of the graph's KV cache (its first past input's)."""
    elem = next(i.type.tensor_type.elem_type for i in model.graph.input if i.name == caches[0])
    return _GRAPH_DTYPES.get(elem, TensorProto.DataType.Name(elem).lower())


def _fit_at(request: _Request, batch: int, context: int) -> DecoderFit:
    m, b = request.model, request.budgets
    found = decoder_dims(m, fixed=request.dims)
    graph_dtype = cache_dtype(m, found.caches)
    kv_dtype = b.kv_dtype or graph_dtype
    at = StepAt(m, found, batch, context if request.shared_buffer else None, request.dims, request.split)
    memory = decoder_memory(at, [(context, 0), (1, context - 1)], context, KV_DTYPES[kv_dtype])
    checks = [budget_check("memory", memory.peak_bytes, default_memory_budget(request.device, b.memory), "B")]
    per_token = first = None
    uncounted = 0
    if kv_dtype == graph_dtype:
        step, _ = analyze_step(at, request.device, 1, context - 1)
        per_token, uncounted = step.time_s, step.uncounted
        checks.insert(0, budget_check("time per token", per_token, b.per_token, "s"))
        if b.first_token is not None:
            prefill, _ = analyze_step(at, request.device, context, 0)
            first, uncounted = prefill.time_s, uncounted + prefill.uncounted
            checks.insert(1, budget_check("time to first token", first, b.first_token, "s"))
    ranks = request.split.ranks if request.split is not None else 1
    return DecoderFit(
        request.name,
        request.device.key,
        batch,
        context,
        kv_dtype,
        per_token,
        first,
        memory,
        tuple(checks),
        uncounted,
        ranks,
    )


def _request(
    model: ModelProto,
    name: str,
    device: Device,
    budgets: DecoderBudgets,
    shared_buffer: bool,
    dims: dict[str, int] | None,
    ranks: int,
) -> _Request:
    """The request, checked: a known cache dtype, no latency budget where the cache dtype is not the graph's, and
    a model that splits over ``ranks`` GPUs where more than one."""
    found = decoder_dims(model, fixed=dims or {})
    if budgets.kv_dtype is not None and budgets.kv_dtype not in KV_DTYPES:
        raise UserError(f"--kv-dtype {budgets.kv_dtype}: unknown", "choose from " + ", ".join(KV_DTYPES))
    graph_dtype = cache_dtype(model, found.caches)
    timed = budgets.per_token is not None or budgets.first_token is not None
    if budgets.kv_dtype not in (None, graph_dtype) and timed:
        raise UserError(
            f"--kv-dtype {budgets.kv_dtype} sizes the cache's memory; the graph stores it as {graph_dtype}, and a "
            "step reading another dtype is not this graph's time",
            "drop the latency budgets, or export the decoder with that cache dtype",
        )
    if shared_buffer and found.attention != "GroupQueryAttention":
        raise UserError(
            f"--shared-buffer: the decoder's attention is {found.attention}, which reads its whole past",
            "drop --shared-buffer",
        )
    split = parallel_plan(model, device, ranks) if ranks != 1 else None
    return _Request(model, name, device, budgets, shared_buffer, dict(dims or {}), split)


def fit_decoder(
    model: ModelProto,
    device: Device,
    *,
    context: int,
    batch: int = 1,
    budgets: DecoderBudgets = DecoderBudgets(),
    shared_buffer: bool = False,
    dims: dict[str, int] | None = None,
    name: str = "",
    tensor_parallel: int = 1,
) -> DecoderFit:
    """The decoder serving ``batch`` sequences at ``context`` tokens on ``device`` (split over
    ``tensor_parallel`` of them), checked against ``budgets``."""
    _positive(context=context, batch=batch)
    _within_positions(model, context)
    request = _request(model, name or model.graph.name, device, budgets, shared_buffer, dims, tensor_parallel)
    return _fit_at(request, batch, context)


def largest_decoder(
    model: ModelProto,
    device: Device,
    *,
    vary: str,
    context: int = 1,
    batch: int = 1,
    budgets: DecoderBudgets = DecoderBudgets(),
    shared_buffer: bool = False,
    dims: dict[str, int] | None = None,
    name: str = "",
    tensor_parallel: int = 1,
    progress: Callable[[str], None] | None = None,
) -> LargestDecoder:
    """The largest batch at ``context`` (``vary="batch"``) or the largest context at ``batch`` (``"context"``)
    within the budgets, by doubling then bisecting: times and memory grow with both."""
    _positive(context=context, batch=batch)
    _within_positions(model, context)
    request = _request(model, name or model.graph.name, device, budgets, shared_buffer, dims, tensor_parallel)
    if (
        budgets.per_token is None
        and budgets.first_token is None
        and default_memory_budget(device, budgets.memory) is None
    ):
        raise UserError(
            f"{device.key} lists no memory capacity and no budget was given: every {vary} fits",
            "pass --memory-budget or --latency-budget",
        )
    say = progress or (lambda text: None)
    seen: dict[int, DecoderFit] = {}

    def at(n: int) -> DecoderFit:
        if n not in seen:
            say(f"{vary} {n}")
            seen[n] = _fit_at(request, n, context) if vary == "batch" else _fit_at(request, batch, n)
        return seen[n]

    limit = MAX_BATCH_LIMIT if vary == "batch" else position_limit(model) or MAX_CONTEXT_LIMIT
    return LargestDecoder(vary, *largest_passing(at, limit))


def _within_positions(model: ModelProto, context: int) -> None:
    limit = position_limit(model)
    if limit is not None and context > limit:
        raise UserError(
            f"--context {context}: the decoder's rotary tables hold {limit} positions",
            f"give --context {limit} or less",
        )


def _positive(**values: int) -> None:
    for what, value in values.items():
        if value < 1:
            raise UserError(f"--{what} {value}: must be at least 1", f"e.g. --{what} 1")
