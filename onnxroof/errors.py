"""The one exception a user can cause: it prints as one line plus a hint, and the CLI exits with code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a missing file, an unknown device, an unresolved dim), with what to do about it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message
