"""What the proxy remembers of each request from the client until its response comes back.

The table is a dict keyed by ``wire.id_key`` (the routing hot path reads it directly); what is in flight when the
upstream dies or the proxy stops is answered from it, and a cancellation marks its entry.
"""

from __future__ import annotations

import enum
from typing import Any

from checkpoint_mcp.intercept.decision.verdicts import Claimed
from checkpoint_mcp.intercept.settler import PendingProbe
from checkpoint_mcp.wire import id_key


class Track(enum.Enum):
    """Why a request from the client is remembered until its response comes back."""

    PLAIN = "plain"  # forwarded as is; remembered only to answer it if the upstream dies
    TOOL_CALL = "tool_call"  # a journaled tools/call
    INITIALIZE = "initialize"  # its result carries the server identity (handshake era)
    DISCOVER = "discover"  # its result carries the server identity (2026-07-28)
    TOOLS_LIST = "tools_list"  # its result carries the tools' annotations (--trust-annotations)
    SETTLING = "settling"  # a tools/call that met an in-doubt call: waits for the probe of that call
    PROBE = "probe"  # our own probe request (a policy's read-only tool); its answer never reaches the client
    ASKING = "asking"  # a tools/call held while its user is asked to approve it (our elicitation, ``asking``)


TRACK_BY_METHOD = {
    "initialize": Track.INITIALIZE,
    "server/discover": Track.DISCOVER,
    "tools/list": Track.TOOLS_LIST,
}


class InFlight:
    """A request from the client waiting for its response."""

    __slots__ = ("cancelled", "claimed", "ident", "pending", "track")

    def __init__(self, track: Track, ident: Any, claimed: Claimed | None = None) -> None:
        self.track = track
        self.ident = ident
        self.claimed = claimed  # for TOOL_CALL and SETTLING
        self.cancelled = False
        self.pending: PendingProbe | None = None  # for PROBE: the call waiting for its answer


class InFlightTable(dict[tuple[str, Any], InFlight]):
    """The requests in flight, by ``id_key`` of their id."""

    def outstanding(self) -> int:
        """Requests from the client still waiting for an answer (cancelled ones excluded)."""
        return sum(1 for entry in self.values() if not entry.cancelled)

    def journaled_outstanding(self) -> int:
        """Journaled calls still waiting for their answer (cancelled ones excluded): what a shutdown waits for."""
        return sum(1 for entry in self.values() if entry.claimed is not None and not entry.cancelled)

    def track(
        self,
        track: Track,
        ident: Any,
        claimed: Claimed | None = None,
        pending: PendingProbe | None = None,
        key: tuple[str, Any] | None = None,
    ) -> InFlight:
        """Remember the request ``ident`` (an id already checked to be one; ``key``: its ``id_key``, if known) until
        its response comes back."""
        entry = InFlight(track, ident, claimed)
        entry.pending = pending
        key = key if key is not None else id_key(ident)
        assert key is not None
        self[key] = entry
        return entry

    def mark_cancelled(self, params: Any) -> None:
        """A ``notifications/cancelled``: forget the request, or (a journaled call) mark it cancelled."""
        if not isinstance(params, dict) or "requestId" not in params:
            return
        key = id_key(params["requestId"])
        entry = self.get(key) if key is not None else None
        if key is None or entry is None:
            return
        if entry.track in (Track.TOOL_CALL, Track.SETTLING):
            # Keep it: if the upstream still answers, the answer is journaled as usual.
            entry.cancelled = True
        else:
            del self[key]

    def take_all(self) -> list[InFlight]:
        """Every entry, the table emptied."""
        entries = list(self.values())
        self.clear()
        return entries
