"""How far a rewritten model's outputs are from the original's, on the same random inputs.

Both models run with onnxruntime on the CPU at one thread. Inputs are made for the reference and cast to the
dtype the candidate declares (an fp16 model without --keep-io-types takes fp16 inputs). Each output pair is
compared in float64: the largest absolute difference, that difference relative to the largest magnitude of the
reference output, and the NaN and infinite values the candidate has where the reference has none (an fp16
overflow shows as inf).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto

from onnxroof.errors import UserError
from onnxroof.ort.sessions import make_session, random_feeds, runnable_model

__all__ = ["OutputDifference", "output_differences"]


@dataclass(frozen=True)
class OutputDifference:
    """One output compared: largest absolute and relative difference, new NaN and inf values."""

    name: str
    max_abs: float
    max_rel: float
    nan: int
    inf: int

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.inf == 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "max_abs": self.max_abs, "max_rel": self.max_rel, "nan": self.nan, "inf": self.inf}


def output_differences(
    reference: ModelProto, candidate: ModelProto, seed: int = 0, feeds: Mapping[str, np.ndarray] | None = None
) -> tuple[OutputDifference, ...]:
    """The outputs of ``candidate`` against ``reference``'s on random inputs (or ``feeds``), matched by name.

    Both models must take the same inputs by name and shape; a UserError says so where they do not.
    """
    ref = runnable_model(reference)
    cand = runnable_model(candidate)
    if {k: shape for k, (shape, _) in ref.inputs.items()} != {k: shape for k, (shape, _) in cand.inputs.items()}:
        raise UserError(
            "the two models take different inputs, so their outputs cannot be compared",
            "compare outputs of rewrites that keep the input shapes (not --batch or --input-size)",
        )
    given = dict(feeds) if feeds is not None else random_feeds(ref, seed)
    cast = {
        name: np.asarray(value).astype(onnx.helper.tensor_dtype_to_np_dtype(cand.inputs[name][1]))
        for name, value in given.items()
    }
    expected = _run(ref.model, given)
    actual = _run(cand.model, cast)
    found = []
    for name, want in expected.items():
        if name not in actual:
            continue
        a = np.asarray(want, dtype=np.float64)
        b = np.asarray(actual[name], dtype=np.float64)
        if a.shape != b.shape:
            raise UserError(
                f"output {name!r} has shape {b.shape} after the rewrite, {a.shape} before",
                "compare outputs of rewrites that keep the output shapes",
            )
        new_nan = int(np.count_nonzero(np.isnan(b) & ~np.isnan(a)))
        new_inf = int(np.count_nonzero(np.isinf(b) & ~np.isinf(a)))
        both = np.isfinite(a) & np.isfinite(b)
        diff = float(np.max(np.abs(a[both] - b[both]), initial=0.0))
        scale = float(np.max(np.abs(a[both]), initial=0.0))
        found.append(OutputDifference(name, diff, diff / scale if scale else 0.0, new_nan, new_inf))
    return tuple(found)


def _run(model: ModelProto, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    session, _ = make_session(model)  # the CPU, one thread
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds))))
