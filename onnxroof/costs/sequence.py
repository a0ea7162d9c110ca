"""Cost functions: tensor sequences (Sequence*, SplitToSequence, ConcatFromSequence, SequenceMap), string ops
(StringConcat, StringNormalizer, StringSplit, RegexFullMatch), TfIdfVectorizer and ImageDecoder.

Sequences. onnxroof tracks tensor shapes only: a sequence-typed value reaches a cost function as a Tensor with no
shape and dtype 0. Sequence ops are therefore costed from their tensor-typed side, as the copies onnxruntime's
kernels make (each builds its output sequence from fresh copies of the tensors it holds):

- SequenceConstruct copies its input tensors in; SplitToSequence copies its input out as the pieces;
  ConcatFromSequence copies the elements into its output tensor; SequenceAt copies one element out;
  SequenceInsert copies the inserted tensor in. Each reads and writes those tensors' bytes, with 0 FLOPs and
  one kernel.
- SequenceLength and SequenceEmpty move no data (a length read off the container, an empty container made):
  0 FLOPs, 0 bytes and 0 kernels, like Shape and Size.
- Bytes held in a sequence are unknown to a cost function. Where an op copies such elements (SequenceErase
  copies the kept ones, SequenceInsert re-copies the existing ones in onnxruntime's CPU kernel), only what is
  known is charged and the Cost's note says what was left out.
- SequenceMap runs its ``body`` once per element; the number of elements is not visible to the node, so one
  iteration is counted and the note says so, as Loop does for an unknown trip count.

Strings. A string tensor has no fixed element size (``dtype_size(STRING) == 0``), so the bytes of string tensors
are not modelled: they count 0 and the Cost's note says so. String ops still do work per element, counted as one
FLOP per element-level operation (a concatenation, a regex match, a split, a stopword lookup, a case change): a
stated unit, since the real work grows with string lengths that onnxroof does not know.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import prod

from onnxroof.costs import OTHER, Cost, NodeView, distinct_tensors, register, weight_params
from onnxroof.costs.common import UNKNOWN_TRIPS_NOTE, broadcast_shape, subgraph_coster
from onnxroof.ir import Tensor, UnknownShape
from onnxroof.protos import TensorProto

__all__ = [
    "DECODE_FLOPS_PER_VALUE",
    "STRING_BYTES_NOTE",
    "UNKNOWN_ELEMENTS_NOTE",
    "concat_from_sequence",
    "image_decoder",
    "regex_full_match",
    "sequence_at",
    "sequence_construct",
    "sequence_erase",
    "sequence_insert",
    "sequence_map",
    "sequence_metadata",
    "split_to_sequence",
    "string_concat",
    "string_normalizer",
    "string_split",
    "tfidf_probes",
    "tfidf_vectorizer",
]

STRING_BYTES_NOTE = "string tensors: bytes not modelled"
UNKNOWN_ELEMENTS_NOTE = "sequence element sizes unknown"
# ImageDecoder: FLOPs per decoded output value (one channel of one pixel). The image format, and with it the real
# per-value work (an inverse DCT and colour conversion for JPEG, inflate and unfiltering for PNG, a copy for BMP),
# is known only from the data, so a format-neutral unit of one operation per produced value is counted.
DECODE_FLOPS_PER_VALUE = 1

_STRING = TensorProto.STRING


# ---------------------------------------------------------------------------------------------------------
# Helpers.


def _present(tensors: Iterable[Tensor | None]) -> list[Tensor]:
    """The given (not omitted) tensors."""
    return [t for t in tensors if t is not None and t.name]


def _bytes(t: Tensor | None) -> float:
    """Bytes of a tensor-typed value at its dtype's size (UnknownShape when its shape is unknown); 0 for an
    absent one and for a string tensor, whose bytes are not modelled (its shape is then not needed)."""
    if t is None or not t.name or t.dtype == _STRING:
        return 0.0
    return t.nbytes


def _distinct_bytes(tensors: Iterable[Tensor | None]) -> float:
    """Bytes of each distinct tensor once (the compulsory-traffic model)."""
    return sum(map(_bytes, distinct_tensors(tensors)), 0.0)


def _scalar_bytes(t: Tensor | None) -> float:
    """Bytes of a position input, which the ops define as a scalar: its own size when its shape is known, else
    one element at its dtype's size; 0 when omitted."""
    if t is None or not t.name:
        return 0.0
    return t.nbytes if t.known else t.itemsize


def _string_noted(cost: Cost, tensors: Iterable[Tensor | None]) -> Cost:
    """The cost, with STRING_BYTES_NOTE when any of ``tensors`` is a string tensor."""
    return cost.with_note(STRING_BYTES_NOTE) if any(t.dtype == _STRING for t in _present(tensors)) else cost


def _output(node: NodeView, i: int = 0) -> Tensor:
    """Output i, or UnknownShape when the node lacks it."""
    out = node.output(i)
    if out is None or not out.name:
        raise UnknownShape(f"{node.name}: {node.op_type} has no output {i}")
    return out


def _shape(t: Tensor, fallback: Sequence[int] | None = None) -> tuple[int, ...]:
    """The tensor's shape, else ``fallback``; UnknownShape naming the tensor when neither is known."""
    if t.known:
        return t.need_shape()
    if fallback is not None:
        return tuple(fallback)
    raise UnknownShape(t.name)


# ---------------------------------------------------------------------------------------------------------
# Sequence ops.


@register("SequenceConstruct", engine=OTHER)
def sequence_construct(node: NodeView) -> Cost:
    """SequenceConstruct: a copy of each input tensor into the sequence. 0 FLOPs; each distinct input read once
    and one copy written per input position (a tensor passed twice is stored twice)."""
    inputs = _present(node.inputs)
    read = _distinct_bytes(inputs)
    written = sum(_bytes(t) for t in inputs)
    cost = Cost(bytes_read=read, bytes_written=written, params=weight_params(inputs), kernels=1)
    return _string_noted(cost, inputs)


@register("SplitToSequence", engine="movement")
def split_to_sequence(node: NodeView) -> Cost:
    """SplitToSequence: the input copied out as the pieces, which together hold every input element once
    whatever ``split``, ``axis`` and ``keepdims`` are. 0 FLOPs; the input and the optional ``split`` read, the
    input's bytes written."""
    x, split = node.need_input(0), node.input(1)
    read = _distinct_bytes([x, split])
    cost = Cost(bytes_read=read, bytes_written=_bytes(x), params=weight_params([x]), kernels=1)
    return _string_noted(cost, [x])


@register("ConcatFromSequence", engine="movement")
def concat_from_sequence(node: NodeView) -> Cost:
    """ConcatFromSequence: the sequence's elements copied into one tensor; concatenated (``new_axis`` = 0) or
    stacked (``new_axis`` = 1), they hold exactly the output's elements. 0 FLOPs; the output's bytes read (from
    the elements) and written."""
    out = _output(node)
    moved = _bytes(out)
    return _string_noted(Cost(bytes_read=moved, bytes_written=moved, kernels=1), [out])


@register("SequenceAt", engine=OTHER)
def sequence_at(node: NodeView) -> Cost:
    """SequenceAt: one element copied out. 0 FLOPs; the output's bytes read (from the element) plus the scalar
    position, and the output's bytes written."""
    out = _output(node)
    moved = _bytes(out)
    cost = Cost(bytes_read=moved + _scalar_bytes(node.input(1)), bytes_written=moved, kernels=1)
    return _string_noted(cost, [out])


@register("SequenceInsert", engine=OTHER)
def sequence_insert(node: NodeView) -> Cost:
    """SequenceInsert: the inserted tensor copied in. 0 FLOPs; that tensor and the optional scalar position
    read, the tensor's bytes written. onnxruntime's CPU kernel also re-copies the input sequence's elements into
    the new sequence; their sizes are unknown here, so they are not counted and the note says so."""
    tensor = node.need_input(1)
    moved = _bytes(tensor)
    cost = Cost(
        bytes_read=moved + _scalar_bytes(node.input(2)),
        bytes_written=moved,
        params=weight_params([tensor]),
        kernels=1,
        note=f"{UNKNOWN_ELEMENTS_NOTE}: only the inserted tensor's copy counted",
    )
    return _string_noted(cost, [tensor])


@register("SequenceErase", engine=OTHER)
def sequence_erase(node: NodeView) -> Cost:
    """SequenceErase: the output sequence holds the input's elements but one, which onnxruntime's CPU kernel
    copies; their sizes are unknown here, so only the optional scalar position is charged (read), with one
    kernel and 0 FLOPs, and the note says the element copies are not counted."""
    return Cost(
        bytes_read=_scalar_bytes(node.input(1)),
        kernels=1,
        note=f"{UNKNOWN_ELEMENTS_NOTE}: copies of the kept elements not counted",
    )


@register("SequenceLength", "SequenceEmpty", engine=OTHER)
def sequence_metadata(node: NodeView) -> Cost:
    """SequenceLength / SequenceEmpty: 0 FLOPs, 0 bytes, 0 kernels. Neither touches tensor data: one reads the
    container's element count, the other makes an empty container. onnxruntime runs each as a CPU kernel, but
    like Shape and Size (also CPU kernels, also counted 0) they launch no device work worth a kernel."""
    return Cost()


@register("SequenceMap", engine=OTHER)
def sequence_map(node: NodeView) -> Cost:
    """SequenceMap: the ``body`` subgraph's cost once per element of the input sequence. A cost function sees
    only its own node, and a sequence's length is not part of what onnxroof tracks, so one iteration is counted
    and the note says ``trip count unknown: one iteration counted``. The copies of each element out of the input
    sequences and into the output sequences are of unknown size, so they are not counted either (noted)."""
    body = subgraph_coster(node)("body")
    return body.with_note(
        f"number of sequence elements unknown: {UNKNOWN_TRIPS_NOTE}; element copies into and out of the "
        "sequences not counted"
    )


# ---------------------------------------------------------------------------------------------------------
# String ops. Their string inputs and outputs are strings by definition: their bytes are not modelled (0, noted),
# which also means no shape is needed for them. Non-string outputs (RegexFullMatch's bools, StringSplit's counts)
# count as usual.


def _string_cost(flops: float, written: float = 0.0) -> Cost:
    """One kernel doing ``flops`` on string tensors, writing ``written`` bytes of non-string outputs."""
    return Cost(flops=flops, bytes_written=written, kernels=1, note=STRING_BYTES_NOTE)


@register("StringConcat", engine=OTHER)
def string_concat(node: NodeView) -> Cost:
    """StringConcat: one concatenation (1 FLOP) per element of Z, the numpy broadcast of X and Y. Bytes of
    string tensors are not modelled, so it reads and writes 0 bytes (noted)."""
    out = _output(node)
    fallback = None if out.known else broadcast_shape(node.need_input(0).need_shape(), node.need_input(1).need_shape())
    return _string_cost(prod(_shape(out, fallback)))


@register("RegexFullMatch", engine=OTHER)
def regex_full_match(node: NodeView) -> Cost:
    """RegexFullMatch: one full match of ``pattern`` (1 FLOP) per element, whatever the pattern. The bool output
    Y (X's shape, 1 byte per element) is written; bytes of the string input are not modelled (0, noted)."""
    x, out = node.need_input(0), _output(node)
    elements = prod(_shape(out, x.shape))
    return _string_cost(elements, elements * (out.itemsize or 1))


@register("StringNormalizer", engine=OTHER)
def string_normalizer(node: NodeView) -> Cost:
    """StringNormalizer: per input element, 1 FLOP for the stopword lookup when ``stopwords`` is given and 1 for
    the case change when ``case_change_action`` is LOWER or UPPER; 0 FLOPs (a copy) with neither. The reference
    implementation takes both steps on every input element (``is_case_sensitive`` only orders them), so the count
    does not depend on how many words are dropped. Bytes of string tensors are not modelled (0, noted)."""
    x = node.need_input(0)
    stopwords = node.attr("stopwords") or []
    action = node.text("case_change_action", "NONE").upper()
    per_element = (1 if len(stopwords) else 0) + (1 if action in ("LOWER", "UPPER") else 0)
    return _string_cost(per_element * prod(x.need_shape()))


@register("StringSplit", engine=OTHER)
def string_split(node: NodeView) -> Cost:
    """StringSplit: one split (1 FLOP) per input element, whatever ``delimiter`` and ``maxsplit`` are. Writes the
    int64 substring counts Z (X's shape, 8 bytes per element); bytes of the string input X and of the substrings
    Y are not modelled (0, noted)."""
    x = node.need_input(0)
    elements = prod(x.need_shape())
    counts = node.output(1)
    written = 0.0
    if counts is not None and counts.name:
        written = prod(_shape(counts, x.shape)) * (counts.itemsize or 8)
    return _string_cost(elements, written)


# ---------------------------------------------------------------------------------------------------------
# TfIdfVectorizer.


def _trie_depth(node: NodeView) -> int:
    """The deepest level of the n-gram trie the op builds: the largest n in [min_gram_length, max_gram_length]
    whose slice of the pool (``ngram_counts[n-1]`` up to the next start or the pool's end) holds an n-gram."""
    pool = node.attr("pool_int64s") or node.attr("pool_strings") or []
    starts = list(node.attr("ngram_counts") or [])
    lo, hi = int(node.attr("min_gram_length", 1)), int(node.attr("max_gram_length", 1))
    depth = 0
    for i, start in enumerate(starts):
        n = i + 1
        end = starts[i + 1] if i + 1 < len(starts) else len(pool)
        if lo <= n <= hi and (end - start) // n > 0:
            depth = n
    return depth


def tfidf_probes(c: int, depth: int, min_gram: int, max_gram: int, max_skip: int) -> int:
    """Trie probes the reference implementation makes on one row of ``c`` items if every probe matches.

    For each skip distance s = 1 .. max_skip + 1, each start p with ``p + s * (min_n - 1) < c`` walks the trie
    through items p, p + s, p + 2s, ... below c, at most ``depth`` of them. ``min_n`` is ``min_gram`` and becomes
    2 after the first pass when it is 1 (unigrams are counted once); that pass is the only one when max_gram < 2.
    """
    if c <= 0 or depth <= 0:
        return 0
    total = 0
    min_n = min_gram
    for s in range(1, max_skip + 2):
        starts = min(c, max(0, c - s * (min_n - 1)))
        # starts p <= c - 1 - s*(depth - 1) reach the full depth; the rest run out of items first
        full = max(0, min(starts, c - s * (depth - 1)))
        total += full * depth + sum((c - 1 - p) // s + 1 for p in range(full, starts))
        if min_n == 1:
            min_n = 2
            if min_n > max_gram:
                break
    return total


@register("TfIdfVectorizer", engine=OTHER)
def tfidf_vectorizer(node: NodeView) -> Cost:
    """TfIdfVectorizer, following the reference implementation's n-gram matching: 1 FLOP per trie probe (a
    lookup of one input item, with the count increment a completed n-gram makes), counted by ``tfidf_probes`` per
    row as if every probe matched, since a walk stops at its first miss: an upper bound (noted). Then the
    weighting, per output element: IDF 1 (a test count > 0 selecting the weight or 1), TFIDF with ``weights`` 1
    (a multiply), TF and unweighted TFIDF 0 (a copy).

    Rows: N for an [N, C] input, 1 for [C] or a scalar. Bytes: X read (0 for a string X, whose bytes are not
    modelled), the float output written. The pool and weights are attributes, not weight tensors: no params.
    """
    x, out = node.need_input(0), _output(node)
    shape = x.need_shape()
    rows, c = (shape[0], shape[1]) if len(shape) == 2 else (1, prod(shape))
    indexes = node.attr("ngram_indexes") or []
    width = max(indexes) + 1 if len(indexes) else 0
    out_shape = _shape(out, (rows, width) if len(shape) == 2 else (width,))
    probes = rows * tfidf_probes(
        c,
        _trie_depth(node),
        int(node.attr("min_gram_length", 1)),
        int(node.attr("max_gram_length", 1)),
        int(node.attr("max_skip_count", 0)),
    )
    mode = node.text("mode", "TF").upper()
    weighted = mode == "IDF" or (mode == "TFIDF" and len(node.attr("weights") or []) > 0)
    flops = probes + (prod(out_shape) if weighted else 0)
    written = prod(out_shape) * (out.itemsize or 4)  # float32 output
    cost = Cost(flops=flops, bytes_read=_bytes(x), bytes_written=written, kernels=1)
    cost = cost.with_note("n-gram probes counted as if every probe matches: an upper bound") if probes else cost
    return _string_noted(cost, [x])


# ---------------------------------------------------------------------------------------------------------
# ImageDecoder.


@register("ImageDecoder", engine=OTHER)
def image_decoder(node: NodeView) -> Cost:
    """ImageDecoder: DECODE_FLOPS_PER_VALUE (1) FLOP per decoded output value, H * W * C (C = 3 for RGB/BGR, 1
    for Grayscale): the format, and so the real work per value, is known only from the data. Bytes: the encoded
    stream read, the uint8 image written. The image's size is known only when shape inference resolved it."""
    stream, image = node.need_input(0), _output(node)
    values = prod(image.need_shape())
    return Cost(
        flops=DECODE_FLOPS_PER_VALUE * values,
        bytes_read=_bytes(stream),
        bytes_written=values * (image.itemsize or 1),
        params=weight_params([stream]),
        kernels=1,
    )
