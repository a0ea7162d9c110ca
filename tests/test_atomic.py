"""Atomic output files: the whole text or the old file, and the permissions a plain write would give."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from onnxroof.atomic import write_bytes, write_text


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_file_gets_the_default_mode_less_the_umask(tmp_path: Path, umask_022: None):
    out = tmp_path / "report.json"
    write_text(out, "{}\n")
    assert out.read_text() == "{}\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # 0o666 & ~0o022
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, umask_022: None):
    out = tmp_path / "report.json"
    out.write_text("old")
    out.chmod(0o640)
    write_text(out, "new")
    assert out.read_text() == "new"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    out = tmp_path / "report.json"
    out.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_text(out, "\udcff")  # a lone surrogate cannot be encoded as UTF-8
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_bytes_are_written_as_given(tmp_path: Path):
    out = tmp_path / "figure.png"
    data = bytes(range(256)) + b"\r\n\n"  # every byte value, and line ends that text mode would be free to change
    write_bytes(out, data)
    assert out.read_bytes() == data


def test_a_folder_is_refused_in_one_line_and_left_as_it_is(tmp_path: Path):
    from onnxroof.errors import UserError

    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(UserError, match="is a folder"):
        write_text(folder, "text")
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary file left beside it


def test_a_missing_folder_is_a_user_error(tmp_path: Path):
    from onnxroof.errors import UserError

    with pytest.raises(UserError, match="is not a folder"):
        write_bytes(tmp_path / "missing" / "figure.png", b"")
