"""The inputs of a decoder step that must agree with its cache, made for the shapes a run fixes.

Random values are wrong for them: a zero ``total_sequence_length`` is refused by GroupQueryAttention, a zero
``seqlens_k`` or an all-zero mask attends nothing, and positions past the cache's end index outside its rotary
table. For a step of ``sequence`` new tokens over a ``past`` input of ``P`` rows, with ``T`` the total length
(the mask's dim 1 where there is a mask, else ``P + sequence``):

- masks are 1 (integer and boolean) over all ``T`` rows, or 0 for a float mask (added to the scores);
- ``seqlens_k`` is ``T - 1`` for every sequence and ``total_sequence_length`` is ``T``, as int32;
- positions are ``T - sequence .. T - 1`` for every sequence: the new tokens follow the valid rows (where past and
  present share a buffer longer than ``T - sequence``, the buffer's tail is not read).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from onnxroof.load.decoder import DecoderInputs

__all__ = ["decoder_feeds"]

Shapes = Mapping[str, tuple[tuple[int, ...], int]]  # input -> (shape, ONNX element type)


def _lengths(inputs: DecoderInputs, shapes: Shapes) -> tuple[int, int]:
    """(new tokens, total rows) of the step the shapes fix."""
    past = shapes[inputs.caches[0]][0][2]
    sequence = shapes[inputs.tokens][0][1] if inputs.tokens is not None and inputs.tokens in shapes else 1
    total = shapes[inputs.masks[0]][0][1] if inputs.masks and inputs.masks[0] in shapes else past + sequence
    return sequence, total


def decoder_feeds(inputs: DecoderInputs, shapes: Shapes) -> dict[str, np.ndarray]:
    """Values for the decoder's masks, lengths and positions at the shapes given (runtime inputs only)."""
    sequence, total = _lengths(inputs, shapes)
    feeds: dict[str, np.ndarray] = {}

    def typed(name: str, value: np.ndarray | int) -> None:
        shape, elem = shapes[name]
        feeds[name] = np.broadcast_to(value, shape).astype(onnx.helper.tensor_dtype_to_np_dtype(elem))

    for name in inputs.masks:
        if name in shapes:
            floating = np.issubdtype(onnx.helper.tensor_dtype_to_np_dtype(shapes[name][1]), np.floating)
            typed(name, 0 if floating else 1)
    for name in inputs.lengths:
        if name in shapes:
            typed(name, total - 1)
    for name in inputs.totals:
        if name in shapes:
            typed(name, total)
    for name in inputs.positions:
        if name in shapes:
            typed(name, np.arange(total - sequence, total))
    return feeds
