"""Call signatures: SHA-256 over the RFC 8785 canonical JSON of ``{"name", "arguments"}``.

Two calls have the same signature exactly when they name the same tool with equal arguments, whatever the key
order, white space or number spelling the client used. ``_meta`` is not part of the signature: it carries
per-request envelope data (protocol version, client info, ``checkpoint_seq``) that says nothing about what the
call does.

RFC 8785 represents numbers as IEEE doubles, so it refuses integers beyond 2**53. Arguments holding such an
integer (database ids, snowflakes) are canonicalised instead with sorted keys and exact integers, under a
different domain prefix so the two forms can never produce the same digest.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

_RFC8785_DOMAIN = b"jcs:"
_EXACT_DOMAIN = b"exact:"


def canonical_json(value: Any) -> bytes:
    """The canonical bytes of a JSON value, prefixed by the canonicalisation that produced them."""
    try:
        return _RFC8785_DOMAIN + rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        exact = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return _EXACT_DOMAIN + exact.encode()


def call_signature(name: str, arguments: dict[str, Any]) -> str:
    """The hex SHA-256 signature of one tools/call."""
    return hashlib.sha256(canonical_json({"name": name, "arguments": arguments})).hexdigest()
