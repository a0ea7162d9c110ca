"""onnx's protobuf classes and its compiled shape inference, with or without the onnx package's Python layer.

``import onnx`` runs the package's ``__init__``, which imports ``onnx.helper`` and ``onnx.numpy_helper`` and,
through them, ml_dtypes and numpy: most of a short command's start-up. Loading a model needs only two of its
modules: the generated protobuf classes (``onnx.onnx_ml_pb2``, which imports nothing but protobuf) and the
compiled extension (``onnx.onnx_cpp2py_export``: shape inference and operator schemas).

Outside the command line this module takes both from ``import onnx``. The command line calls :func:`use_lean`
first; then the two modules are loaded from the onnx package's folder by file, under their own names in
``sys.modules``, without the package's ``__init__``. A later ``import onnx`` (a command that rewrites or runs a
model) finds them there and reuses them: one set of classes, one protobuf descriptor pool. Where onnx is
imported already, or its folder does not hold the two modules, the full import is used.

The classes are resolved on first use (``from onnxroof.protos import TensorProto`` is the first use), so that
importing this module imports nothing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx import AttributeProto as AttributeProto
    from onnx import GraphProto as GraphProto
    from onnx import ModelProto as ModelProto
    from onnx import NodeProto as NodeProto
    from onnx import OperatorSetIdProto as OperatorSetIdProto
    from onnx import SparseTensorProto as SparseTensorProto
    from onnx import TensorProto as TensorProto
    from onnx import TensorShapeProto as TensorShapeProto
    from onnx import TypeProto as TypeProto
    from onnx import ValueInfoProto as ValueInfoProto

__all__ = [
    "AttributeProto",
    "GraphProto",
    "ModelProto",
    "NodeProto",
    "OperatorSetIdProto",
    "SparseTensorProto",
    "TensorProto",
    "TensorShapeProto",
    "TypeProto",
    "ValueInfoProto",
    "infer_shapes",
    "use_lean",
]

_CLASSES = frozenset(__all__) - {"infer_shapes", "use_lean"}
_EXTENSION = "onnx.onnx_cpp2py_export"
_lean = False
_loaded: tuple[ModuleType, ModuleType] | None = None  # (the module holding the classes, the extension)


def use_lean() -> None:
    """Load the classes and the extension without the onnx package's Python layer, where it is not imported
    yet: for a process that controls everything it imports (the command line). Call it before the first use."""
    global _lean
    _lean = True


def infer_shapes(model: bytes, data_prop: bool) -> bytes:
    """onnx's shape inference of a serialized model, to a serialized model (no type check, not strict)."""
    inferred: bytes = _modules()[1].shape_inference.infer_shapes(model, False, False, data_prop)
    return inferred


def __getattr__(name: str) -> Any:
    if name not in _CLASSES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_modules()[0], name)
    globals()[name] = value  # resolved once: later lookups find it without this function
    return value


def _modules() -> tuple[ModuleType, ModuleType]:
    global _loaded
    if _loaded is None:
        lean = _load_lean() if _lean and "onnx" not in sys.modules else None
        _loaded = lean or _full()
    return _loaded


def _full() -> tuple[ModuleType, ModuleType]:
    import onnx
    import onnx.onnx_cpp2py_export

    return onnx, onnx.onnx_cpp2py_export


def _load_lean() -> tuple[ModuleType, ModuleType] | None:
    """The protobuf classes' module and the extension, each loaded by file under its own name; None (nothing
    left in sys.modules) where the onnx package's folder does not hold them as expected."""
    spec = importlib.util.find_spec("onnx")  # finds the package without running its __init__
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    added: list[str] = []
    try:
        extension = sys.modules.get(_EXTENSION) or _load_by_file(_EXTENSION, folders, added)
        classes = "onnx.onnx_ml_pb2" if getattr(extension, "ONNX_ML", True) else "onnx.onnx_pb2"
        protos = sys.modules.get(classes) or _load_by_file(classes, folders, added)
        protos.ModelProto, extension.shape_inference.infer_shapes  # noqa: B018 (both are what the layout promises)
    except Exception:  # a layout this module does not know: the full import serves
        for name in added:
            sys.modules.pop(name, None)
        return None
    return protos, extension


def _load_by_file(name: str, folders: list[str], added: list[str]) -> ModuleType:
    """Module ``name`` (``onnx.X``) executed from the package's folders and entered in sys.modules by that name."""
    spec = importlib.machinery.PathFinder.find_spec(name, folders)
    if spec is None or spec.loader is None:
        raise ImportError(name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    added.append(name)
    spec.loader.exec_module(module)
    return module
