"""A decoder graph's phase dims, found from its attention nodes rather than from its input names.

An autoregressive decoder exported to ONNX is one forward step over ``sequence`` new tokens with a key/value cache
of ``past`` rows per layer, ``total = past + sequence`` rows attended. Its graph inputs carry these as symbolic
dims, named differently by each exporter (GenAI's ``past_sequence_length``, optimum's ``past_sequence_length``
or ``past_key_values.0.key_dim_2``...). They are found by what the graph does with them:

- the past caches are the graph inputs read as an attention's past key and value: GroupQueryAttention's inputs 3
  and 4, MultiHeadAttention's 6 and 7, standard Attention's (opset 23) 4 and 5, or a rank-4 input concatenated
  along its sequence axis (an attention written out in plain ops). Their layout is ``[batch, heads, past, head]``:
  dim 0 names the batch and dim 2 the past length;
- the total length is dim 1 of the ``[batch, total]`` mask the attention reads, directly or through the shape
  arithmetic that computes GroupQueryAttention's ``seqlens_k`` and ``total_sequence_length`` from it; in plain
  ops, the one ``[batch, X]`` input the new keys are not computed from (``input_ids`` feeds them, the mask not);
- the sequence length is the one other symbolic dim of the graph inputs (``input_ids [batch, sequence]``).

A dim that the export fixed (a past of 0 rows written into the graph) or that cannot be told apart is refused in
one line naming it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from onnxroof.errors import UserError
from onnxroof.ir import op_domain
from onnxroof.protos import ModelProto, NodeProto, TensorProto, ValueInfoProto

__all__ = ["DecoderDims", "DecoderInputs", "decoder_dims", "decoder_inputs", "position_limit"]

# Where each attention op reads its past key and value, and the inputs its mask reaches it through.
_PAST_INPUTS: dict[tuple[str, str], tuple[int, int]] = {
    ("com.microsoft", "GroupQueryAttention"): (3, 4),
    ("com.microsoft", "MultiHeadAttention"): (6, 7),
    ("", "Attention"): (4, 5),
}
_MASK_INPUTS: dict[tuple[str, str], tuple[int, ...]] = {
    ("com.microsoft", "GroupQueryAttention"): (5, 6),
    ("com.microsoft", "MultiHeadAttention"): (4, 5),
    ("", "Attention"): (3, 6),
}
# GroupQueryAttention's inputs that hold lengths: seqlens_k (each sequence's total length minus 1) and
# total_sequence_length (the longest).
_LENGTH_INPUTS: dict[tuple[str, str], tuple[int, int]] = {("com.microsoft", "GroupQueryAttention"): (5, 6)}
_ROTARY_INPUTS = {("com.microsoft", "GroupQueryAttention"): 7}  # the cos cache [max positions, rotary / 2]
_INTEGER_TYPES = {
    TensorProto.INT64,
    TensorProto.INT32,
    TensorProto.INT16,
    TensorProto.INT8,
    TensorProto.UINT64,
    TensorProto.UINT32,
    TensorProto.UINT16,
    TensorProto.UINT8,
}
_SEQUENCE_AXES = (2, -2)  # a [batch, heads, sequence, head] cache is concatenated along this axis


@dataclass(frozen=True)
class DecoderDims:
    """The symbolic dims of a decoder step's inputs, and its past caches by graph input name."""

    batch: str
    sequence: str
    past: str
    total: str | None  # None: no mask input; the total is then past + sequence everywhere it appears
    caches: tuple[str, ...]
    presents: tuple[str, ...]  # the graph outputs that are the caches after the step
    attention: str  # the attention op the caches were found at ("Concat" for an attention in plain ops)

    def step(self, batch: int, new_tokens: int, context: int, buffer: int | None = None) -> dict[str, int]:
        """The dims of one step: ``new_tokens`` tokens over a cache of ``context`` valid rows, held in a past
        input of ``buffer`` rows where past and present share one buffer, else of exactly ``context``."""
        dims = {self.batch: batch, self.sequence: new_tokens, self.past: context if buffer is None else buffer}
        if self.total is not None:
            dims[self.total] = context + new_tokens
        return dims


@dataclass(frozen=True)
class DecoderInputs:
    """The graph inputs of a decoder step whose values must agree with its cache for the step to run: what each
    holds, by name."""

    caches: tuple[str, ...]  # [batch, heads, past, head]
    tokens: str | None  # [batch, sequence] token ids: the indices of the largest table gathered
    masks: tuple[str, ...]  # [batch, total]: every row attended
    lengths: tuple[str, ...]  # seqlens_k: each sequence's total length minus 1
    totals: tuple[str, ...]  # total_sequence_length: the total length
    positions: tuple[str, ...]  # [batch, sequence] integer inputs besides the tokens: the new tokens' positions


def _dims(info: ValueInfoProto) -> list[str | int]:
    """A graph input's dims: the symbol of a symbolic dim, the size of a fixed one."""
    return [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]


def _producers(model: ModelProto) -> dict[str, NodeProto]:
    return {out: node for node in model.graph.node for out in node.output if out}


def _graph_inputs_above(name: str, producers: Mapping[str, NodeProto], inputs: Mapping[str, object]) -> set[str]:
    """The graph inputs a tensor is computed from."""
    found, stack, seen = set(), [name], set()
    while stack:
        current = stack.pop()
        if current in seen or not current:
            continue
        seen.add(current)
        if current in inputs:
            found.add(current)
        elif (node := producers.get(current)) is not None:
            stack.extend(node.input)
    return found


def _concatenated_caches(model: ModelProto, inputs: Mapping[str, ValueInfoProto]) -> Iterator[str]:
    """Rank-4 graph inputs concatenated along their sequence axis: the past caches of an attention in plain ops."""
    for node in model.graph.node:
        if node.op_type != "Concat" or op_domain(node.domain):
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), None)
        if axis not in _SEQUENCE_AXES:
            continue
        yield from (n for n in node.input if n in inputs and len(_dims(inputs[n])) == 4)


def _attention_caches(model: ModelProto, inputs: Mapping[str, ValueInfoProto]) -> tuple[list[str], str, list[str]]:
    """(the past caches, the attention op they were found at, the inputs its masks are read from)."""
    caches: dict[str, None] = {}
    masks: list[str] = []
    found = ""
    for node in model.graph.node:
        key = (op_domain(node.domain), node.op_type)
        if key not in _PAST_INPUTS:
            continue
        past = [node.input[i] for i in _PAST_INPUTS[key] if i < len(node.input) and node.input[i] in inputs]
        if past:
            found = node.op_type
            caches.update(dict.fromkeys(past))
            masks += [node.input[i] for i in _MASK_INPUTS[key] if i < len(node.input) and node.input[i]]
    if not caches:
        caches = dict.fromkeys(_concatenated_caches(model, inputs))
        found = "Concat" if caches else ""
    return list(caches), found, masks


def _runtime_inputs(model: ModelProto) -> dict[str, ValueInfoProto]:
    weights = {t.name for t in model.graph.initializer}
    return {i.name: i for i in model.graph.input if i.name not in weights}


def _mask_candidates(
    model: ModelProto,
    inputs: Mapping[str, ValueInfoProto],
    caches: Collection[str],
    masks: Collection[str],
    batch: object,
) -> list[str]:
    """The ``[batch, X]`` graph inputs that can be the attention mask: those the attention's mask inputs are
    computed from or, in plain ops, those the first layer's new keys are not computed from (input_ids is, the
    mask not; a later layer's keys are computed from the mask through the attentions before it). The first
    layer's are the new rows computed from no past cache."""
    producers = _producers(model)
    led = {n for n, i in inputs.items() if len(_dims(i)) == 2 and _dims(i)[0] == batch}
    if masks:
        return sorted(led & set().union(*(_graph_inputs_above(m, producers, inputs) for m in masks)))
    concats = [node for node in model.graph.node if node.op_type == "Concat" and set(node.input) & set(caches)]
    rows = [_graph_inputs_above(n, producers, inputs) for node in concats for n in node.input if n not in caches]
    first = [above for above in rows if not above & set(caches)]
    return sorted(led - set().union(*first))


def _symbol(dims: list[str | int], axis: int, what: str, name: str) -> str:
    value = dims[axis]
    if isinstance(value, int):
        raise UserError(
            f"the decoder's {what} is fixed at {value} in {name}: it cannot grow",
            "export it with a dynamic axis there (torch.onnx.export's dynamic_axes / dynamic_shapes)",
        )
    return value


def decoder_dims(model: ModelProto, fixed: Collection[str] = ()) -> DecoderDims:
    """The phase dims of a decoder step, or a UserError saying what the graph lacks; the dims named in ``fixed``
    are the user's to set (``--dim``) and are none of them."""
    inputs = _runtime_inputs(model)
    caches, attention, masks = _attention_caches(model, inputs)
    if not caches:
        raise UserError(
            "no past key/value cache found: no attention reads a graph input as its past",
            "llm takes a decoder exported with its KV cache (onnxruntime GenAI, optimum's 'with past')",
        )
    first = _dims(inputs[caches[0]])
    batch = _symbol(first, 0, "batch", caches[0])
    past = _symbol(first, 2, "past length", caches[0])
    candidates = _mask_candidates(model, inputs, caches, masks, batch)
    mask = candidates[0] if len(candidates) == 1 else None
    total = _symbol(_dims(inputs[mask]), 1, "total length", mask) if mask is not None else None
    others = {d for i in inputs.values() for d in _dims(i) if isinstance(d, str)} - {batch, past, total, *fixed}
    if len(others) != 1:
        what = "no other symbolic dim" if not others else "several: " + ", ".join(sorted(others))
        raise UserError(
            f"cannot tell the decoder's new-token dim: its inputs have {what} beside batch {batch!r} and past {past!r}",
            "fix the others with --dim NAME=SIZE",
        )
    presents = tuple(
        o.name for o in model.graph.output if len(dims := _dims(o)) == 4 and dims[0] == batch and dims[2] != past
    )
    return DecoderDims(batch, others.pop(), past, total, tuple(caches), presents, attention)


def _token_input(model: ModelProto, candidates: Collection[str]) -> str | None:
    """The candidate gathered from the largest weight table: the token ids index the embedding, positions a
    smaller cos/sin table (or none)."""
    sizes = {t.name: math.prod(t.dims) for t in model.graph.initializer}
    gathered = [
        (sizes.get(node.input[0], 0), node.input[1])
        for node in model.graph.node
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] in candidates
    ]
    return max(gathered)[1] if gathered else None


def _length_inputs(model: ModelProto, inputs: Mapping[str, ValueInfoProto]) -> tuple[list[str], list[str]]:
    """(seqlens_k inputs, total_sequence_length inputs) that are graph inputs."""
    lengths: dict[str, None] = {}
    totals: dict[str, None] = {}
    for node in model.graph.node:
        where = _LENGTH_INPUTS.get((op_domain(node.domain), node.op_type))
        if where is None:
            continue
        for index, found in zip(where, (lengths, totals)):
            if index < len(node.input) and node.input[index] in inputs:
                found[node.input[index]] = None
    return list(lengths), list(totals)


def decoder_inputs(model: ModelProto) -> DecoderInputs | None:
    """The inputs of a decoder step by what they hold, found as ``decoder_dims`` finds its dims, or None for a
    graph without a past cache. Fixed dims are allowed here: a model ready to run has them."""
    inputs = _runtime_inputs(model)
    caches, _, masks = _attention_caches(model, inputs)
    if not caches:
        return None
    batch = _dims(inputs[caches[0]])[0]
    mask_inputs = _mask_candidates(model, inputs, caches, masks, batch)
    lengths, totals = _length_inputs(model, inputs)
    integer = [
        n
        for n, i in inputs.items()
        if len(_dims(i)) == 2
        and _dims(i)[0] == batch
        and i.type.tensor_type.elem_type in _INTEGER_TYPES
        and n not in mask_inputs
    ]
    tokens = _token_input(model, integer)
    positions = tuple(n for n in integer if n != tokens)
    return DecoderInputs(tuple(caches), tokens, tuple(mask_inputs), tuple(lengths), tuple(totals), positions)


def position_limit(model: ModelProto) -> int | None:
    """The most positions the graph's rotary tables hold (GroupQueryAttention's cos cache rows): the longest
    context it runs; None where its attention has no such table."""
    rows = {t.name: t.dims[0] for t in model.graph.initializer if t.dims}
    limits = [
        rows[node.input[index]]
        for node in model.graph.node
        if (index := _ROTARY_INPUTS.get((op_domain(node.domain), node.op_type), -1)) >= 0
        and index < len(node.input)
        and node.input[index] in rows
    ]
    return min(limits) if limits else None
