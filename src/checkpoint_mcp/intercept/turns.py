"""What one turn of the interceptor hands back to its pump: lines to write now, calls to re-submit, and flushes.

The pumps (the stdio relay, the gateway's channel) read these records and write their lines; they hold no
decision. ``Flushing`` is a flush begun, whose batch of journal writes a pump may commit on another thread
(``Interceptor.begin_flush`` / ``end_flush``).
"""

from __future__ import annotations

from typing import NamedTuple

from checkpoint_mcp.intercept.decision.verdicts import Claimed
from checkpoint_mcp.intercept.inflight import InFlight
from checkpoint_mcp.journal.base import Batch, Lineage


class Resubmit(NamedTuple):
    """What a ``Join`` verdict asks of the pump: a tools/call that matches one in flight here, whose ``line`` it
    re-submits once that one's outcome is committed, or answers with ``refusal`` (still in flight) when the wait
    times out. Only where joins are enabled (a gateway)."""

    line: bytes
    refusal: bytes
    workflow: str
    seq: int


class ClientBatch:
    """What can be written at once after one batch of client lines, in order (the rest waits for ``flush``)."""

    __slots__ = ("resubmits", "to_client", "to_upstream")

    def __init__(self) -> None:
        self.to_upstream: list[bytes] = []
        self.to_client: list[bytes] = []
        self.resubmits: list[Resubmit] = []


class Flushing:
    """A flush begun (``begin_flush``): the lines that wait for its batch, until ``end_flush``."""

    __slots__ = (
        "batch",
        "down_barrier",
        "finishing",
        "held_down",
        "held_up",
        "lineage",
        "reserved",
        "started_ns",
        "up_barrier",
    )

    def __init__(
        self,
        held_up: list[tuple[bytes, InFlight | None]],
        held_down: list[bytes],
        finishing: list[Claimed],
        batch: Batch | None,
        lineage: Lineage | None,
    ) -> None:
        self.held_up = held_up
        self.held_down = held_down
        self.reserved = [entry for _, entry in held_up if entry is not None]
        self.finishing = finishing
        self.batch = batch
        """The journal writes to commit (None: nothing to write; the lines are released at once)."""
        self.lineage = lineage
        self.started_ns = 0  # when the commit began (wall clock, ns), for a trace
        # A held line that no other may pass (``Interceptor._release_up``), one flag per direction.
        self.up_barrier = False
        self.down_barrier = False


class Flushed(NamedTuple):
    """What ``flush`` released, once the journal writes it waited for were durable."""

    to_upstream: list[bytes]
    to_client: list[bytes]
    journaled: bool  # ``to_upstream`` holds calls whose PENDING rows were just committed
