"""Write output files atomically: a reader sees the old file or the whole new one, never a partial write."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from onnxroof.errors import UserError


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and an atomic rename.

    The file gets the permissions a plain ``open(path, "w")`` would give it: those of the file it replaces, or for a
    new file the default mode less the process's umask (a temporary file is created private to its owner).
    """
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, with the permissions ``write_text`` gives (a model, a figure)."""
    target = Path(path)
    _check_target(target)
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.chmod(handle.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_target(target: Path) -> None:
    """A UserError for a path that cannot take a file: a folder (a rename over it fails, and replacing a folder
    with a file is never what was meant), or one whose parent folder does not exist."""
    if target.is_dir():
        raise UserError(f"{target} is a folder: the output is a file", f"name a file inside it, e.g. {target / 'NAME'}")
    parent = target.parent
    if not parent.is_dir():
        raise UserError(f"{parent} is not a folder", "create it first, or write the file elsewhere")


def _mode_for(target: Path) -> int:
    """The permission bits of ``target`` where it exists, else 0o666 less the umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # reading the umask means setting it: put it back at once
        os.umask(umask)
        return 0o666 & ~umask
