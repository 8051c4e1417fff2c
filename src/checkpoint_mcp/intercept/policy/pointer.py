"""JSON pointers (RFC 6901): parse one, and resolve it in a JSON value. Pure; no I/O.

A pointer is ``""`` (the whole document) or a sequence of ``/``-prefixed reference tokens in which ``~1`` stands
for ``/`` and ``~0`` for ``~``. Array indexes are decimal without leading zeros; ``-`` (the element past the end)
never resolves, since a pointer here only reads.
"""

from __future__ import annotations

import re
from typing import Any, Final

_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE: Final = re.compile(r"~(?![01])")


class PointerError(ValueError):
    """The text is not a JSON pointer (RFC 6901)."""


class Missing:
    """What a pointer resolves to when the document has nothing there (distinct from JSON ``null``)."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = Missing()


def parse_pointer(text: str) -> tuple[str, ...]:
    """The unescaped reference tokens of ``text``.

    Raises:
        PointerError: ``text`` is neither empty nor starts with ``/``, or holds a ``~`` not followed by 0 or 1.
    """
    if text == "":
        return ()
    if not text.startswith("/"):
        raise PointerError(f"{text!r} is not a JSON pointer: it must be empty or start with '/' (RFC 6901)")
    if _BAD_ESCAPE.search(text):
        raise PointerError(f"{text!r} is not a JSON pointer: '~' must be followed by 0 or 1 (RFC 6901)")
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in text[1:].split("/"))


def resolve(document: Any, tokens: tuple[str, ...]) -> Any:
    """The value at ``tokens`` in ``document``, or ``MISSING`` when there is none (never raises)."""
    value = document
    for token in tokens:
        if isinstance(value, dict):
            if token not in value:
                return MISSING
            value = value[token]
        elif isinstance(value, list):
            if not _ARRAY_INDEX.fullmatch(token) or int(token) >= len(value):
                return MISSING
            value = value[int(token)]
        else:
            return MISSING
    return value
