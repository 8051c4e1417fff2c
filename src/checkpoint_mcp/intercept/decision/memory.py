"""What one client session has been answered: the agent's memory of its own calls, as far as the proxy can tell.

A session is one client session (docs/sessions.md): the stdio proxies its client started (``client``: that client
process, ``client_process``), or one gateway MCP session (its ``Mcp-Session-Id``). A journaled call whose answer
reached the client (released to it, its request not cancelled before or after) is remembered here; the agent that
sent it knows what it did, until its client starts a session again without restarting the proxy (a clear, a
compaction, a resume), which the session-start hook records in the journal under that client
(``Journal.session_starts``). A repeat of such a call, under ``within_session = "run"``, is the agent's own
deliberate repeat (the second click, the checkout back to main): it runs, where the client says where its sessions
begin; where it never has (Claude Desktop, a hook switched off) it is asked about once (``repeat.py``). One whose
original's answer never reached the client (it timed out and cancelled, the connection broke) is the same call
again, and its tool's repeat rule applies as to any other repeat.

The memory keeps a call only for as long as any repeat of it can be found: the longest window of the policy's rules
(``horizon``); older answers are let go as new ones come.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from checkpoint_mcp.intercept.decision.verdicts import Claimed
from checkpoint_mcp.journal.records import CallRecord

RECENT: Final = 1024
"""How many answered requests are remembered by id, for a cancellation that comes after its answer."""


class SessionMemory:
    """The calls one client session has been answered, within the horizon."""

    def __init__(self, client: str | None, horizon: float, clock: Callable[[], float] = time.monotonic) -> None:
        """``client``: the client process of the session (``client_process``), None for a session of no known client
        (a gateway's); ``horizon``: seconds after which a repeat of a call can no longer be found (the longest window
        of the policy)."""
        self.client = client
        self.horizon = horizon
        self.boundary_known = False
        """Set once the journal showed that the client records its session starts (``SessionStarts.known``)."""
        self._clock = clock
        self._answered: OrderedDict[tuple[str, int], float] = OrderedDict()  # oldest first
        self._recent: OrderedDict[tuple[str, Any], tuple[str, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answered)

    def answered(self, request: tuple[str, Any], claimed: Claimed) -> None:
        """The answer to request ``request`` (its ``id_key``), the call ``claimed``, was released to the client."""
        now = self._clock()
        place = (claimed.workflow, claimed.seq)
        self._answered[place] = now
        self._answered.move_to_end(place)
        self._recent[request] = place
        if len(self._recent) > RECENT:
            self._recent.popitem(last=False)
        self._let_go(now)

    def cancelled(self, request: tuple[str, Any] | None) -> None:
        """The client cancelled request ``request`` after its answer was sent: it gave up on it, and may not have
        read it (a client that timed out cancels as it gives up); the call is no longer known to it."""
        place = self._recent.pop(request, None) if request is not None else None
        if place is not None:
            self._answered.pop(place, None)

    def remembers(self, record: CallRecord) -> bool:
        """True when ``record`` is a call this session was answered, within the horizon."""
        at = self._answered.get((record.workflow, record.seq))
        return at is not None and self._clock() - at <= self.horizon

    def _let_go(self, now: float) -> None:
        """Forget the answers older than the horizon: no repeat of them can be found any more."""
        answered = self._answered
        while answered:
            place, at = next(iter(answered.items()))
            if now - at <= self.horizon:
                return
            del answered[place]
