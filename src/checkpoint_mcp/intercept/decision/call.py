"""One tools/call as the checks see it: built once from the request, read-only.

``Call.of`` reads and checks everything a decision needs, once: the tool and its arguments, the call's signature
and (where its tool's rule names a part of the arguments) its identity for repeats, its rule (looked up once, and
the sub-rule its arguments choose, where the tool's table has ``when`` sub-rules: chosen here, once),
where the call says it belongs (``_meta.checkpoint_seq``, and its key: ``_meta.checkpoint_key`` or
``params.idempotencyKey``, SEP-3182), whether the upstream marks the tool read-only, who sends it, and whether it
continues a 2026-07-28 call that asked for input. A request that cannot be journaled as sent is refused here
(``InvalidCallParams``), before any check runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from checkpoint_mcp.intercept.policy import BUILT_IN, ToolRule
from checkpoint_mcp.journal.base import MAX_CLIENT_SEQ, MAX_KEY_LENGTH
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS
from checkpoint_mcp.refusals import InvalidCallParams
from checkpoint_mcp.signature import call_signature
from checkpoint_mcp.wire import dumps

SEQ_META: Final = "checkpoint_seq"
"""The ``params._meta`` key by which a client names the sequence a tools/call must take."""
KEY_META: Final = "checkpoint_key"
"""The ``params._meta`` key by which a client names a call independently of its sequence."""
IDEMPOTENCY_KEY: Final = "idempotencyKey"
"""The ``params`` member by which MCP's request-idempotency proposal (SEP-3182) names a call: the same as
``_meta.checkpoint_key``. It sits outside ``_meta`` because several agent frameworks drop ``_meta``."""
CLIENT_INFO_META: Final = "io.modelcontextprotocol/clientInfo"
"""The request ``_meta`` key by which a 2026-07-28 client, which sends no ``initialize``, names itself."""


class Call(NamedTuple):
    """One tools/call, as the checks see it."""

    ident: Any  # the JSON-RPC id
    params: dict[str, Any]  # as sent
    name: str
    arguments: dict[str, Any]
    signature: str  # SHA-256 of the canonical {name, arguments} (signature.py)
    rule: ToolRule  # its rule: its tool's, or the sub-rule its arguments chose (``BUILT_IN`` without a policy)
    identity: str | None  # its identity for repeats, where the rule names a part of the arguments
    seq: int | None  # ``_meta.checkpoint_seq``
    key: str | None  # ``_meta.checkpoint_key`` or ``idempotencyKey``
    read_only: bool  # the upstream marks the tool ``readOnlyHint: true``
    client: Mapping[str, Any] | None  # who sends it: its ``_meta`` client info, else the session's clientInfo

    @classmethod
    def of(
        cls,
        ident: Any,
        params: dict[str, Any],
        rule: ToolRule,
        read_only: bool,
        hello: Mapping[str, Any] | None,
    ) -> Call:
        """The call a valid tools/call's ``params`` make under its tool's ``rule`` (``hello``: the session's
        ``clientInfo``, if any).

        Raises:
            InvalidCallParams: arguments with no canonical form, or a malformed sequence or key.
        """
        name: str = params["name"]
        arguments: dict[str, Any] = params.get("arguments") or {}
        seq, key = _placement(params)
        rule = rule.chosen(arguments)
        try:
            signature = call_signature(name, arguments)
            identity = rule.identity.of(name, arguments) if rule.identity is not None else None
        except ValueError as exc:
            raise InvalidCallParams(f"invalid params: arguments of {name!r} cannot be canonicalised: {exc}") from exc
        meta = params.get("_meta")
        named = meta.get(CLIENT_INFO_META) if isinstance(meta, dict) else None
        client = named if isinstance(named, dict) else hello
        return cls(ident, params, name, arguments, signature, rule, identity, seq, key, read_only, client)

    @property
    def decided_by(self) -> str | None:
        """The policy rule that decides the call, as the journal keeps it (``calls.rule``): its table, or the
        sub-rule its arguments chose (``tools.start_process.when.push``); None without a policy."""
        return None if self.rule.source == BUILT_IN.source else self.rule.source

    @property
    def named(self) -> bool:
        """True when the call names its place itself (a sequence or a key): then it is never a repeat by content."""
        return self.seq is not None or self.key is not None

    def stored(self, redact: bool) -> str:
        """The arguments as the journal keeps them: compact JSON, or the stub ``--redact-args-in-journal`` stores."""
        return REDACTED_ARGUMENTS if redact else dumps(self.arguments)

    @property
    def continues(self) -> bool:
        """True for a 2026-07-28 retry that answers a tool's request for input (``inputResponses``)."""
        return "inputResponses" in self.params or "requestState" in self.params

    @property
    def request_state(self) -> Any:
        """The ``requestState`` a 2026-07-28 retry carries back, if any."""
        return self.params.get("requestState")


def _placement(params: dict[str, Any]) -> tuple[int | None, str | None]:
    """``params._meta.checkpoint_seq`` and the call's key (``_meta.checkpoint_key`` or ``idempotencyKey``), checked.

    Raises:
        InvalidCallParams: one is present but malformed, or the two keys disagree.
    """
    if "_meta" not in params and IDEMPOTENCY_KEY not in params:
        return None, None  # the usual call names neither
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        meta = {}
    seq = meta.get(SEQ_META)
    if SEQ_META in meta and (isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_CLIENT_SEQ):
        shown = dumps(seq)
        raise InvalidCallParams(
            f"invalid params: _meta.{SEQ_META} must be an integer from 1 to {MAX_CLIENT_SEQ} (2**53 - 1), "
            f"got {shown if len(shown) <= 40 else shown[:40] + '…'}",
            {"reason": "invalid_checkpoint_seq", "received": seq if isinstance(seq, int | str) else shown[:200]},
        )
    key = _key(meta, KEY_META, f"_meta.{KEY_META}", "invalid_checkpoint_key")
    standard = _key(params, IDEMPOTENCY_KEY, IDEMPOTENCY_KEY, "invalid_idempotency_key")
    if key is not None and standard is not None and key != standard:
        raise InvalidCallParams(
            f"invalid params: {IDEMPOTENCY_KEY} and _meta.{KEY_META} name two different keys; give one, or the same",
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
