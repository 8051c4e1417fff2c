"""One journaled call as the journal keeps it: its states and its record. Imports nothing of the journal, so that
every other module of it (``base``, ``conditions``, ``rows``) may build on it."""

from __future__ import annotations

import enum
from typing import NamedTuple

REDACTED_ARGUMENTS = '"«redacted»"'
"""What ``--redact-args-in-journal`` stores instead of the arguments (a JSON string)."""


class CallState(enum.Enum):
    """The life of one journaled tools/call."""

    # Reserved, and durable, before the upstream saw the call. Stays so until the upstream answers; a
    # PENDING row found by a later proxy means the call was in flight at a crash: it is in doubt.
    PENDING = "PENDING"
    # The upstream answered with a result (an ``isError: true`` result too: the tool ran). Replays return it.
    COMPLETED = "COMPLETED"
    # The upstream answered with a JSON-RPC error. Replays return the same error; it is never re-run.
    FAILED = "FAILED"


class CallRecord(NamedTuple):
    """One row of the journal: a tools/call at a sequence of a workflow, and what became of it."""

    workflow: str
    seq: int
    tool: str
    arguments: str  # compact JSON of the arguments, or REDACTED_ARGUMENTS
    signature: str  # hex SHA-256, see signature.py
    state: CallState
    outcome: str | None  # JSON text: the result if COMPLETED, the error object if FAILED, else None
    started_at: str  # ISO 8601 UTC
    finished_at: str | None
    key: str | None = None  # the call's ``_meta.checkpoint_key``, if it had one
    replica: str | None = None  # the replica that reserved it (a proxy sharing the workflow, a gateway replica)
    identity: str | None = None  # its identity for repeats, where its tool's policy names a part of the arguments
    tool_error: bool = False  # COMPLETED with a result that is a tool error (``isError: true``): its work not done
    repeat_rule: str | None = None  # its tool's repeat rule when it was reserved (None: no policy applied)
    rule: str | None = None  # the policy rule that decided it, e.g. "tools.start_process.when.push" (None: no policy)

    @property
    def happened(self) -> bool:
        """True when the call's side effect happened, as far as the upstream said: COMPLETED with a result that is
        not a tool error. (A FAILED call, or one whose tool reported an error, did not do its work.)"""
        return self.state is CallState.COMPLETED and not self.tool_error

    @property
    def redacted(self) -> bool:
        """True when the arguments were not journaled."""
        return self.arguments == REDACTED_ARGUMENTS
