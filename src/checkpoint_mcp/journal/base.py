"""The journal's vocabulary: call states, the call record, the decision table, and the store interface.

Everything here is pure except ``Journal``, the abstract store; one subclass per database holds only what
differs between them (``sqlite.py``, and the dialect-specific parts of later backends).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

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


@dataclass(frozen=True, slots=True)
class CallRecord:
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

    @property
    def redacted(self) -> bool:
        """True when the arguments were not journaled."""
        return self.arguments == REDACTED_ARGUMENTS


@dataclass(frozen=True, slots=True)
class Proceed:
    """No row at this sequence: reserve PENDING, then call the upstream."""


@dataclass(frozen=True, slots=True)
class Replay:
    """A finished call with the same signature: answer from the journal, do not call the upstream."""

    record: CallRecord


@dataclass(frozen=True, slots=True)
class Diverge:
    """A finished call with another signature: refuse."""

    record: CallRecord


@dataclass(frozen=True, slots=True)
class InDoubtAt:
    """A PENDING row: the call may or may not have run; refuse until an operator reconciles it."""

    record: CallRecord


Decision = Proceed | Replay | Diverge | InDoubtAt

PROCEED = Proceed()


def decide(record: CallRecord | None, signature: str) -> Decision:
    """The decision table of spec §3.4 (with FAILED rows replayed like COMPLETED ones)."""
    if record is None:
        return PROCEED
    if record.state is CallState.PENDING:
        return InDoubtAt(record)
    if record.signature != signature:
        return Diverge(record)
    return Replay(record)


def utc_now() -> str:
    """The current time as ISO 8601 UTC with milliseconds, as stored in the journal."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JournalBatch(ABC):
    """Reads and writes inside one open transaction of a ``Journal``; nothing here commits."""

    @abstractmethod
    def read(self, workflow: str, seq: int) -> CallRecord | None:
        """The row at ``(workflow, seq)``, including rows written earlier in this batch."""

    @abstractmethod
    def reserve(self, workflow: str, seq: int, tool: str, arguments: str, signature: str) -> None:
        """Insert a PENDING row."""

    @abstractmethod
    def finish(self, workflow: str, seq: int, state: CallState, outcome: str) -> bool:
        """Move a PENDING row to COMPLETED or FAILED; False if it was no longer PENDING."""


class Journal(ABC):
    """A durable store of call records, shared by the proxy and the operator's commands.

    Every method may raise ``JournalUnavailable`` (the store cannot be read or written) or ``JournalCorrupt``.
    """

    location: str
    """Where the journal lives, safe to print (no credentials)."""

    @abstractmethod
    def max_seq(self, workflow: str) -> int:
        """The highest sequence journaled for ``workflow``, 0 if none."""

    @abstractmethod
    def read(self, workflow: str, seq: int) -> CallRecord | None:
        """The row at ``(workflow, seq)``, or None."""

    @abstractmethod
    def batch(self) -> AbstractContextManager[JournalBatch]:
        """Open a write transaction; it commits, durably, when the block exits without an exception.

        Several calls' rows share one commit this way (group commit).
        """

    @abstractmethod
    def calls(self, workflow: str) -> Iterator[CallRecord]:
        """Every row of ``workflow`` in sequence order."""

    @abstractmethod
    def close(self) -> None:
        """Release the store."""
