"""Model sets as users name them: files, folders, globs and zoo names, expanded to the model sources a command
reads one by one (``onnxroof census``).

A pattern is an ``.onnx`` file (whatever its extension, as given), a folder (every ``.onnx`` file below it, at any
depth, sorted), a glob (expanded here, so that a quoted glob works as the shell's would, ``**`` included; the
files it matches that end in ``.onnx`` and every ``.onnx`` below the folders it matches), or ``zoo:NAME`` /
``zoo:NAME?batch=B&size=S`` (one built-in model) / ``zoo:*`` and other ``*`` or ``[...]`` patterns over the
graph-only zoo models (decoders, whose open dims each step fixes, are named one by one). In a zoo spec ``?`` is
the start of the options, never a wildcard. A pattern that matches nothing is a UserError: a census of nothing is a
typo, never a result. It imports nothing heavy: the zoo's names are read only where a zoo pattern asks for them.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Sequence
from pathlib import Path

from onnxroof.errors import UserError
from onnxroof.load.source import ZOO_PREFIX

__all__ = ["MODEL_SUFFIX", "expand_models"]

MODEL_SUFFIX = ".onnx"
FILE_WILDCARDS = "*?["
ZOO_WILDCARDS = "*["  # '?' starts a zoo spec's options


def expand_models(patterns: Sequence[str]) -> list[str]:
    """Every model source ``patterns`` name, in the order given (each pattern's matches sorted), each once."""
    found: list[str] = []
    for pattern in patterns:
        found += _zoo(pattern) if pattern.startswith(ZOO_PREFIX) else _files(pattern)
    return list(dict.fromkeys(found))


def _files(pattern: str) -> list[str]:
    """The model files a path, folder or glob names; a UserError where it names none."""
    if any(c in pattern for c in FILE_WILDCARDS) and not Path(pattern).exists():
        matches = sorted(glob.glob(pattern, recursive=True))
        found = [m for path in matches for m in _below(path, explicit=False)]
        if not found:
            raise UserError(
                f"{pattern} matches no {MODEL_SUFFIX} file",
                f"check the pattern; e.g. 'models/**/*{MODEL_SUFFIX}' (quoted) or a folder",
            )
        return found
    path = Path(pattern)
    if not path.exists():
        raise UserError(f"no such file or folder: {pattern}", "check the path, or use zoo:NAME (onnxroof zoo)")
    found = _below(pattern, explicit=True)
    if not found:
        raise UserError(f"{pattern} holds no {MODEL_SUFFIX} file", "name a folder of models or the files themselves")
    return found


def _below(path: str, explicit: bool) -> list[str]:
    """A file as itself (``explicit``: whatever its extension; else only an .onnx one), a folder as every .onnx
    file below it, sorted."""
    if os.path.isdir(path):
        return [os.path.normpath(p) for p in sorted(Path(path).rglob(f"*{MODEL_SUFFIX}")) if p.is_file()]
    if explicit or path.lower().endswith(MODEL_SUFFIX):
        return [os.path.normpath(path)]
    return []


def _zoo(pattern: str) -> list[str]:
    """The zoo specs a ``zoo:`` pattern names: one spec as given where its name is a zoo model, the graph-only
    models whose names match a wildcard pattern (each with the pattern's options); a UserError where none does."""
    import model_zoo

    name, mark, options = pattern[len(ZOO_PREFIX) :].partition("?")
    known = [*model_zoo.names(), *model_zoo.decoder_names()]
    if not any(c in name for c in ZOO_WILDCARDS):
        if name not in known:
            raise UserError(f"no zoo model named {name!r}", "list them with 'onnxroof zoo', or use zoo:* for all")
        return [pattern]
    matched = [f"{ZOO_PREFIX}{n}{mark}{options}" for n in model_zoo.names() if fnmatch.fnmatchcase(n, name)]
    if not matched:
        raise UserError(f"{pattern} matches no zoo model", "list them with 'onnxroof zoo'; zoo:* names every one")
    return matched
