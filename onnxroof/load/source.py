"""What a model source names, checked before anything is read: a ``zoo:NAME`` spec, or the path of a file that is
there. It imports nothing heavy, so that the command line finds a missing file before it imports onnx or numpy."""

from __future__ import annotations

import os
from pathlib import Path

from onnxroof.errors import UserError

ZOO_PREFIX = "zoo:"


def model_path(spec: str | os.PathLike[str]) -> Path | None:
    """The file a model source names (None for a ``zoo:NAME`` spec); a UserError where no such file is there or
    it is a directory."""
    text = os.fspath(spec)
    if text.startswith(ZOO_PREFIX):
        return None
    path = Path(text)
    if not path.exists():
        raise UserError(f"no such file: {text}", "check the path, or use zoo:NAME for a built-in model (onnxroof zoo)")
    if path.is_dir():
        raise UserError(f"{text} is a directory, not an ONNX file", "pass the .onnx file inside it")
    return path
