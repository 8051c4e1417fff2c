"""Call signatures: SHA-256 over the RFC 8785 canonical JSON of ``{"name", "arguments"}``.

Two calls have the same signature exactly when they name the same tool with equal arguments, whatever the key
order, white space or number spelling the client used. ``_meta`` is not part of the signature: it carries
per-request envelope data (protocol version, client info, ``checkpoint_seq``) that says nothing about what the
call does.

The digest is over exactly the RFC 8785 bytes, so any JCS implementation can recompute it. RFC 8785 represents
numbers as IEEE doubles and so refuses integers beyond 2**53; arguments holding such an integer (database ids,
snowflakes) are canonicalised instead with sorted keys and exact integers, behind an ``exact:`` prefix: JCS
output of an object starts with ``{``, so the two forms can never produce the same bytes.

Arguments nested deeper than ``MAX_ARGUMENT_DEPTH`` levels, or holding a lone surrogate or a non-finite
number, have no canonical form: ``canonical_json`` refuses them with a ``ValueError``, which the proxy turns
into an invalid-params error.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Final

import rfc8785

from checkpoint_mcp.wire import sorted_json

_EXACT_PREFIX = b"exact:"


_SAFE_INTEGER = 2**53 - 1

MAX_ARGUMENT_DEPTH: Final = 500
"""How deeply a tools/call's arguments may nest (the arguments object is level 1); deeper ones are refused."""


class DepthError(ValueError):
    """The value nests too many objects and arrays to be canonicalised."""


def _plain_scalar(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INTEGER <= value <= _SAFE_INTEGER)
    return False  # floats (ES6 number formatting differs from repr), anything else


def _ascii_keys(item: dict[Any, Any]) -> bool:
    """True when every key is an ASCII string (joined in C: a key that is no string makes the join fail)."""
    try:
        return "".join(item).isascii()
    except TypeError:
        return False


def _plain(value: Any, max_depth: int) -> bool:
    """True when json.dumps(sort_keys=True) writes exactly the RFC 8785 bytes: no floats, safe integers, ASCII keys.

    Walks the value without recursion, so that depth is checked before anything recursive runs.

    Raises:
        ValueError: the value nests more than ``max_depth`` objects and arrays.
    """
    plain = True
    stack: list[tuple[Any, int]] = [(value, 1)]
    children: Iterable[Any]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            children = item.values()
            plain = plain and _ascii_keys(item)
        elif kind is list:
            children = item
        else:
            plain = plain and _plain_scalar(item)
            continue
        if depth > max_depth:
            raise DepthError(f"nested more than {max_depth} levels deep")
        for child in children:
            child_kind = type(child)
            if child_kind is dict or child_kind is list:
                stack.append((child, depth + 1))
            elif plain and not _plain_scalar(child):
                plain = False
    return plain


def canonical_json(value: Any, max_depth: int = MAX_ARGUMENT_DEPTH) -> bytes:
    """The canonical bytes of a JSON value: RFC 8785, or the exact-integer form (see the module docstring).

    Raises:
        ValueError: the value holds something JSON cannot express (NaN, infinity, a lone surrogate), or nests
            more than ``max_depth`` objects and arrays.
    """
    if _plain(value, max_depth):
        try:
            return sorted_json(value).encode()
        except UnicodeEncodeError:
            pass  # a lone surrogate: rfc8785 refuses it with its own message
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        exact = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return _EXACT_PREFIX + exact.encode()


def call_signature(name: str, arguments: dict[str, Any]) -> str:
    """The hex SHA-256 signature of one tools/call.

    Raises:
        ValueError: the call has no canonical form (see ``canonical_json``).
    """
    # The envelope object is one level above the arguments.
    document = {"name": name, "arguments": arguments}
    try:
        canonical = canonical_json(document, MAX_ARGUMENT_DEPTH + 1)
    except DepthError:
        raise DepthError(f"they are nested more than {MAX_ARGUMENT_DEPTH} levels deep") from None
    return hashlib.sha256(canonical).hexdigest()
