"""What one client session has been answered: the agent's memory of its own calls, as far as the proxy can tell.

A session is one stdio proxy process (a client that starts its servers per session starts a new proxy with each),
or one gateway MCP session (its ``Mcp-Session-Id``). A journaled call whose answer reached the client (released to
it, its request not cancelled before or after) is remembered here; the agent that sent it knows what it did, until
its client starts a session again without restarting the proxy (a clear, a compaction, a resume), which the
session-start hook records in the journal (``Journal.last_session_start``). A repeat of such a call, under
``within_session = "run"``, is the agent's own deliberate repeat (the second click, the checkout back to main): it
runs. One whose original's answer never reached the client (it timed out and cancelled, the connection broke) is
the same call again, and its tool's repeat rule applies as to any other repeat.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

from checkpoint_mcp.intercept.decision.verdicts import Claimed
from checkpoint_mcp.journal.records import CallRecord

RECENT: Final = 1024
"""How many answered requests are remembered by id, for a cancellation that comes after its answer."""


class Session:
    """The calls one client session has been answered."""

    def __init__(self) -> None:
        self._answered: set[tuple[str, int]] = set()
        self._recent: OrderedDict[tuple[str, Any], tuple[str, int]] = OrderedDict()

    def answered(self, request: tuple[str, Any], claimed: Claimed) -> None:
        """The answer to request ``request`` (its ``id_key``), the call ``claimed``, was released to the client."""
        place = (claimed.workflow, claimed.seq)
        self._answered.add(place)
        self._recent[request] = place
        if len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    def cancelled(self, request: tuple[str, Any] | None) -> None:
        """The client cancelled request ``request`` after its answer was sent: it gave up on it, and may not have
        read it (a client that timed out cancels as it gives up); the call is no longer known to it."""
        place = self._recent.pop(request, None) if request is not None else None
        if place is not None:
            self._answered.discard(place)

    def remembers(self, record: CallRecord) -> bool:
        """True when ``record`` is a call this session was answered."""
        return (record.workflow, record.seq) in self._answered
