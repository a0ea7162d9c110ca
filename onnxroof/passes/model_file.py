"""Reading a model with its weights for a rewrite, and writing the rewritten model.

Reading: a model's external weight data is read only from files inside the model's own folder. A location that
leaves the folder (an absolute path, ``..``, a link that points out of it) is refused, as onnx's security
advisories on external data require. Where a weight's file is missing the weight stays external and absent: the
model is graph-only, and every pass works on its shapes (see :mod:`.weights`). ``zoo:NAME`` builds the zoo model
with its weights.

Writing: atomic (a reader sees the old files or the whole new ones), never over an existing file unless
``force``; a model of 2 GB or more (protobuf's limit for one message) is written with its weights in a
``<name>.data`` file beside it. The input file is never opened for writing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

import onnx
from onnx import ModelProto, TensorProto, external_data_helper

from onnxroof.errors import UserError
from onnxroof.passes.weights import all_tensors, is_absent

__all__ = ["PROTOBUF_LIMIT", "Source", "read_source", "too_large", "weight_bytes", "write_model"]

PROTOBUF_LIMIT = 2**31 - 1  # the largest message protobuf serializes


class Source(NamedTuple):
    """A model read for rewriting: the proto (its own copy), a display name, and whether weights are absent."""

    model: ModelProto
    name: str
    graph_only: bool


def read_source(spec: str | os.PathLike[str]) -> Source:
    """The model at ``spec`` (a path or ``zoo:NAME[?batch=B&size=S]``) with every weight that exists loaded."""
    text = os.fspath(spec)
    if text.startswith("zoo:"):
        return _zoo(text)
    path = Path(text)
    if not path.is_file():
        hint = "pass the .onnx file inside it" if path.is_dir() else "check the path, or use zoo:NAME (onnxroof zoo)"
        raise UserError(f"no such file: {text}" if not path.exists() else f"{text} is not a file", hint)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and others for a file that is not ONNX
        raise UserError(f"{text} is not a readable ONNX model ({type(exc).__name__})", "re-export the model") from exc
    if not model.HasField("graph"):
        raise UserError(f"{text} is not an ONNX model (no graph)", "re-export the model as ONNX")
    folder = path.resolve().parent
    absent = 0
    for proto in all_tensors(model):
        if is_absent(proto):
            absent += not _load_inside(proto, folder, text)
    return Source(model, path.name, absent > 0)


def _zoo(spec: str) -> Source:
    import model_zoo
    from onnxroof.load.read import read_model

    read_model(spec, weight_bytes=False)  # validates the name and options with the loader's messages
    name, _, query = spec[len("zoo:") :].partition("?")
    options = {key: int(value) for key, _, value in (part.partition("=") for part in filter(None, query.split("&")))}
    return Source(model_zoo.build(name, weights=True, **options), spec, False)


def _load_inside(proto: TensorProto, folder: Path, model_name: str) -> bool:
    """Load ``proto``'s external data from inside ``folder``; False where its file is absent."""
    location = {entry.key: entry.value for entry in proto.external_data}.get("location", "")
    if location.startswith("#"):
        return False  # marked as not on disk, as weights.ABSENT is
    target = (folder / location).resolve()
    if Path(location).is_absolute() or not target.is_relative_to(folder):
        raise UserError(
            f"{model_name}: weight {proto.name!r} points at {location!r}, outside the model's folder",
            "external data must lie in the model's own folder; move the data file there and fix its location",
        )
    if not target.is_file():
        return False
    try:
        external_data_helper.load_external_data_for_tensor(proto, str(folder))
    except Exception as exc:  # a truncated file or a bad offset
        raise UserError(
            f"{model_name}: cannot read weight {proto.name!r} from {location!r} ({exc})",
            "the data file may be truncated or belong to another export",
        ) from exc
    proto.data_location = TensorProto.DEFAULT
    del proto.external_data[:]
    return True


def write_model(model: ModelProto, path: str | os.PathLike[str], *, force: bool = False) -> list[Path]:
    """Write ``model`` to ``path`` atomically and return the files written (the model, and its data file when
    the model is 2 GB or more). An existing file is replaced only with ``force``."""
    target = Path(path)
    data_name = f"{target.name}.data"
    if target.is_dir():
        raise UserError(f"{target} is a directory", "give a file name for the rewritten model")
    if not target.parent.is_dir():
        raise UserError(f"no such folder: {target.parent}", "create it first, or write elsewhere")
    large = too_large(model)
    outputs = [target] + ([target.parent / data_name] if large else [])
    existing = [p for p in outputs if p.exists()]
    if existing and not force:
        raise UserError(f"{existing[0]} exists", "pass --force to replace it, or choose another -o")
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        if large:
            copy = ModelProto()
            copy.CopyFrom(model)
            external_data_helper.convert_model_to_external_data(copy, location=data_name, size_threshold=1024)
            onnx.save_model(copy, str(staging / target.name))
        else:
            (staging / target.name).write_bytes(model.SerializeToString())
        mode = 0o666 & ~_umask()
        for out in outputs:
            os.chmod(staging / out.name, mode)
            os.replace(staging / out.name, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return outputs


def too_large(model: ModelProto) -> bool:
    """Whether ``model`` is too large for one protobuf message (its weights within 64 MiB of 2 GB, the rest of
    the graph taking less than that)."""
    return weight_bytes(model) >= PROTOBUF_LIMIT - 64 * 2**20


def weight_bytes(model: ModelProto) -> int:
    """Bytes of the weights held in the proto (absent ones hold none)."""
    return sum(len(t.raw_data) + 4 * len(t.float_data) + 8 * len(t.int64_data) for t in all_tensors(model))


def _umask() -> int:
    umask = os.umask(0)  # reading the umask means setting it: put it back at once
    os.umask(umask)
    return umask
