"""expand_models: files, folders, globs and zoo patterns to model sources, and a pattern that matches nothing as a
UserError."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import model_zoo
from onnxroof.errors import UserError
from onnxroof.load.expand import expand_models


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """models/a.onnx, models/deep/b.onnx, models/notes.txt, c.onnx and an empty folder, in the working directory
    (the files need not be models: expansion reads none of them)."""
    monkeypatch.chdir(tmp_path)
    for name in ("models/a.onnx", "models/deep/b.onnx", "models/notes.txt", "c.onnx"):
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_bytes(b"")
    Path("empty").mkdir()
    return tmp_path


def test_a_folder_is_every_onnx_file_below_it_sorted(tree: Path) -> None:
    assert expand_models(["models"]) == [os.path.join("models", "a.onnx"), os.path.join("models", "deep", "b.onnx")]


def test_globs_are_expanded_here_with_double_star(tree: Path) -> None:
    assert expand_models(["*.onnx"]) == ["c.onnx"]
    assert expand_models(["models/**/*.onnx"]) == [
        os.path.join("models", "a.onnx"),
        os.path.join("models", "deep", "b.onnx"),
    ]
    assert expand_models(["models/*"]) == [  # a matched folder is expanded, a matched non-model left out
        os.path.join("models", "a.onnx"),
        os.path.join("models", "deep", "b.onnx"),
    ]


def test_a_file_named_twice_is_one_model_in_the_order_first_named(tree: Path) -> None:
    assert expand_models(["c.onnx", "models", "./c.onnx"]) == [
        "c.onnx",
        os.path.join("models", "a.onnx"),
        os.path.join("models", "deep", "b.onnx"),
    ]


def test_zoo_patterns() -> None:
    assert expand_models(["zoo:*"]) == [f"zoo:{n}" for n in model_zoo.names()]  # graph-only: no decoder
    assert expand_models(["zoo:resnet*?size=32"]) == [f"zoo:resnet{d}?size=32" for d in (18, 34, 50)]
    assert expand_models(["zoo:unet?batch=4"]) == ["zoo:unet?batch=4"]  # '?' starts the options
    decoder = model_zoo.decoder_names()[0]
    assert expand_models([f"zoo:{decoder}"]) == [f"zoo:{decoder}"]  # named one by one


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("missing.onnx", "no such file or folder: missing.onnx"),
        ("*.pt", "*.pt matches no .onnx file"),
        ("empty", "empty holds no .onnx file"),
        ("zoo:nope", "no zoo model named 'nope'"),
        ("zoo:nope*", "zoo:nope* matches no zoo model"),
    ],
)
def test_a_pattern_that_matches_nothing_is_a_user_error(tree: Path, pattern: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        expand_models(["c.onnx", pattern])
    assert message in caught.value.message and caught.value.hint
