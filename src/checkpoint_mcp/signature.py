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


def canonical_json(value: Any) -> bytes:
    """The canonical bytes of a JSON value: RFC 8785, or the exact-integer form (see the module docstring).

    Raises:
        ValueError: the value holds something JSON cannot express (NaN, infinity).
    """
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        exact = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return _EXACT_PREFIX + exact.encode()


def call_signature(name: str, arguments: dict[str, Any]) -> str:
    """The hex SHA-256 signature of one tools/call."""
    return hashlib.sha256(canonical_json({"name": name, "arguments": arguments})).hexdigest()
