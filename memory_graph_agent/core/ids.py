"""Validation of user and thread identifiers at the edge.

Identifiers become parts of Redis keys and SQL parameters; restricting them to a small
charset means no value can escape its key namespace or become a glob pattern.
"""

from __future__ import annotations

import re

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


class InvalidIdError(ValueError):
    """Raised when a user_id or thread_id is not a safe identifier."""


def validate_id(value: object, what: str = "id") -> str:
    """Return ``value`` if it is a safe identifier, else raise `InvalidIdError`.

    Allowed: 1-64 characters of ``[A-Za-z0-9_.@-]``, starting with a letter or digit.
    """
    if not isinstance(value, str) or not value:
        raise InvalidIdError(f"{what} is required and must be a non-empty string")
    if not _ID.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidIdError(
            f"invalid {what} {shown!r}: use 1-64 characters of letters, digits, "
            "'_', '.', '@' or '-', starting with a letter or digit"
        )
    return value
