"""What a tools/call says about its own place in the journal: ``_meta.checkpoint_seq``, and its key
(``_meta.checkpoint_key``, or ``params.idempotencyKey`` (SEP-3182)), each checked once as it arrives."""

from __future__ import annotations

from typing import Any

from checkpoint_mcp.journal.base import MAX_HINT_SEQ, MAX_KEY_LENGTH
from checkpoint_mcp.refusals import InvalidCallParams
from checkpoint_mcp.wire import dumps

SEQ_HINT = "checkpoint_seq"
"""The ``params._meta`` key by which a client names the sequence a tools/call must take."""
KEY_HINT = "checkpoint_key"
"""The ``params._meta`` key by which a client names a call independently of its sequence."""
IDEMPOTENCY_KEY = "idempotencyKey"
"""The ``params`` member by which MCP's request-idempotency proposal (SEP-3182) names a call: the same as
``_meta.checkpoint_key``. It sits outside ``_meta`` because several agent frameworks drop ``_meta``."""


def call_hints(params: dict[str, Any]) -> tuple[int | None, str | None]:
    """``params._meta.checkpoint_seq`` and the call's key (``_meta.checkpoint_key`` or ``idempotencyKey``), validated.

    Raises:
        InvalidCallParams: one is present but malformed, or the two keys disagree.
    """
    if "_meta" not in params and IDEMPOTENCY_KEY not in params:
        return None, None  # the usual call names neither
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        meta = {}
    seq = meta.get(SEQ_HINT)
    if SEQ_HINT in meta and (isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_HINT_SEQ):
        shown = dumps(seq)
        raise InvalidCallParams(
            f"invalid params: _meta.{SEQ_HINT} must be an integer from 1 to {MAX_HINT_SEQ} (2**53 - 1), "
            f"got {shown if len(shown) <= 40 else shown[:40] + '…'}",
            {"reason": "invalid_checkpoint_seq", "received": seq if isinstance(seq, int | str) else shown[:200]},
        )
    key = _key(meta, KEY_HINT, f"_meta.{KEY_HINT}", "invalid_checkpoint_key")
    standard = _key(params, IDEMPOTENCY_KEY, IDEMPOTENCY_KEY, "invalid_idempotency_key")
    if key is not None and standard is not None and key != standard:
        raise InvalidCallParams(
            f"invalid params: {IDEMPOTENCY_KEY} and _meta.{KEY_HINT} name two different keys; give one, or the same",
            {"reason": "conflicting_keys"},
        )
    return seq, key if key is not None else standard


def _key(holder: dict[str, Any], member: str, label: str, reason: str) -> str | None:
    if member not in holder:
        return None
    key = holder[member]
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH or not _encodable(key):
        raise InvalidCallParams(
            f"invalid params: {label} must be a non-empty string of at most {MAX_KEY_LENGTH} characters "
            "(and valid Unicode)",
            {"reason": reason},
        )
    return key


def _encodable(text: str) -> bool:
    """False for a string holding a lone surrogate (valid in a JSON escape, not in UTF-8 or a database)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
