"""The optional native graph reader, ``onnxroof.load._wire``: compiled from _wire.c at install where a C compiler is
there, absent elsewhere.

Reading a large graph's nodes and value types through the protobuf Python API costs about as much as onnx's
shape inference of it; the native reader decodes the serialized graph in a fraction of that. Loading uses it
when it is here and the Python reader otherwise; the two give the same values (tests/load/test_native_reader.py).
"""

from __future__ import annotations

import importlib
from types import ModuleType


def _load() -> ModuleType | None:
    try:
        return importlib.import_module("onnxroof.load._wire")
    except ImportError:  # not built: no compiler at install, or a source checkout run in place
        return None


reader: ModuleType | None = _load()
