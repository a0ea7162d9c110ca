"""The one exception a user can cause: it prints as one line plus a hint, and the CLI exits with code 2; and the
one line a message shows of any other exception."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a missing file, an unknown device, an unresolved dim), with what to do about it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters, or its type's name where the message is
    empty: what a warning or a UserError quotes of a library's failure, whose message may run to pages."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
