"""Call signatures: SHA-256 over the RFC 8785 canonical JSON of ``{"name", "arguments"}``.

Two calls have the same signature exactly when they name the same tool with equal arguments, whatever the key
order, white space or number spelling the client used. ``_meta`` is not part of the signature: it carries
per-request envelope data (protocol version, client info, ``checkpoint_seq``) that says nothing about what the
call does.

The digest is over exactly the RFC 8785 bytes, so any JCS implementation can recompute it. RFC 8785 represents
numbers as IEEE doubles and so refuses integers beyond 2**53; arguments holding such an integer (database ids,
snowflakes) are canonicalised instead with sorted keys and exact integers, behind an ``exact:`` prefix: JCS
output of an object starts with ``{``, so the two forms can never produce the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

_EXACT_PREFIX = b"exact:"


_SAFE_INTEGER = 2**53 - 1


def _plain(value: Any) -> bool:
    """True when json.dumps(sort_keys=True) writes exactly the RFC 8785 bytes: no floats, safe integers, ASCII keys."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INTEGER <= value <= _SAFE_INTEGER)
    if kind is dict:
        return all(type(k) is str and k.isascii() and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return False  # floats (ES6 number formatting differs from repr), tuples, anything else


def canonical_json(value: Any) -> bytes:
    """The canonical bytes of a JSON value: RFC 8785, or the exact-integer form (see the module docstring).

    Raises:
        ValueError: the value holds something JSON cannot express (NaN, infinity).
    """
    if _plain(value):
        try:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        except UnicodeEncodeError:
            pass  # a lone surrogate: rfc8785 refuses it with its own message
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        exact = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return _EXACT_PREFIX + exact.encode()


def call_signature(name: str, arguments: dict[str, Any]) -> str:
    """The hex SHA-256 signature of one tools/call."""
    return hashlib.sha256(canonical_json({"name": name, "arguments": arguments})).hexdigest()
