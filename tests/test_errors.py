"""The user error's one line, and the one line a message quotes of any other exception."""

from onnxroof.errors import UserError, first_line


def test_user_error_prints_its_hint_after_the_message():
    assert str(UserError("no such file", "check the path")) == "no such file (hint: check the path)"
    assert str(UserError("no such file")) == "no such file"


def test_first_line_keeps_only_the_first_line_of_a_long_message():
    exc = RuntimeError("  [ONNXRuntimeError] : 1 : FAIL : bad shape\nstack frame 1\nstack frame 2")
    assert first_line(exc) == "[ONNXRuntimeError] : 1 : FAIL : bad shape"


def test_first_line_is_cut_at_the_limit():
    assert first_line(ValueError("x" * 300)) == "x" * 200
    assert first_line(ValueError("abcdef"), limit=3) == "abc"


def test_an_empty_message_is_named_by_the_exception_type():
    assert first_line(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert first_line(OSError("   \n  ")) == "OSError"
