"""onnxroof: per-layer cost and roofline analysis of ONNX models.

``onnxroof.analyze(model, device=..., inputs=..., dims=...)`` returns an Analysis with ``model``, ``device``,
``precision``, ``totals``, ``nodes``, ``by_op_type`` and ``unsupported``. Submodules are imported on first use so
that the command line starts instantly.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Analysis", "UserError", "__version__", "analyze", "load_device", "load_graph"]

_LAZY = {
    "analyze": ("onnxroof.api", "analyze"),
    "Analysis": ("onnxroof.predict.analysis", "Analysis"),
    "load_device": ("onnxroof.devices", "load_device"),
    "load_graph": ("onnxroof.load", "load_graph"),
    "UserError": ("onnxroof.errors", "UserError"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'onnxroof' has no attribute {name!r}")
