"""What the interceptor answers for the requests still in flight when their answer will never come: the upstream
died, the proxy stops, or one exchange with the upstream broke. A journaled call's row stays PENDING: in doubt,
never re-run."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from checkpoint_mcp.intercept.calls import CallJournal
from checkpoint_mcp.intercept.inflight import InFlight, InFlightTable, Track
from checkpoint_mcp.intercept.settling import PendingProbe
from checkpoint_mcp.journal.base import Journal, UnitOfWork
from checkpoint_mcp.refusals import Stopped, UpstreamExited
from checkpoint_mcp.wire import error_line, id_key


class Endings:
    """The interceptor's answers to requests that will get no answer (a mixin of ``Interceptor``)."""

    _in_flight: InFlightTable
    _calls: CallJournal | None
    _journal: Journal | None
    _unit: UnitOfWork | None

    @abstractmethod
    def _probe_concluded(self, pending: PendingProbe, response: dict[str, Any] | None, why: str = "") -> list[bytes]:
        """Settle the call waiting for a probe (see ``Interceptor``)."""

    def upstream_gone(self, exit_status: str) -> list[bytes]:
        """Error replies for every request still in flight; their journal rows stay PENDING (in doubt)."""
        out: list[bytes] = []
        for entry in self._in_flight.take_all():
            if entry.track is not Track.PROBE:  # the call waiting for a probe is answered itself
                out.extend(self._abandoned(entry, exit_status))
        return out

    def stopped(self, why: str) -> list[bytes]:
        """At shutdown: error replies for every request still in flight (journaled calls stay PENDING)."""
        out: list[bytes] = []
        for entry in self._in_flight.take_all():
            claimed = entry.claimed
            if claimed is not None and self._calls is not None:
                self._calls.finished(claimed)
            if not entry.cancelled and entry.track is not Track.PROBE:
                refusal = Stopped(
                    workflow=claimed.workflow if claimed else None,
                    seq=claimed.seq if claimed else None,
                    tool=claimed.tool if claimed else None,
                    why=why,
                )
                out.append(error_line(entry.ident, refusal.to_error()))
        return out

    def abandon(self, ident: Any, reason: str) -> list[bytes]:
        """The error reply for one request in flight that will get no answer (its exchange with the upstream
        broke); a journaled call's row stays PENDING (in doubt). Nothing if no such request is in flight."""
        key = id_key(ident)
        entry = self._in_flight.pop(key, None) if key is not None else None
        if entry is not None and entry.track is Track.PROBE:
            pending = entry.pending
            return self._probe_concluded(pending, None, f"the probe got no answer: {reason}") if pending else []
        return self._abandoned(entry, reason) if entry is not None else []

    def _abandoned(self, entry: InFlight, reason: str) -> list[bytes]:
        claimed = entry.claimed
        if claimed is not None and self._calls is not None:
            self._calls.finished(claimed)
            if self._journal is not None and self._journal.replica_id is not None and self._unit is not None:
                # A gateway replica gives the call up, so that other replicas see it in doubt, not in flight.
                self._unit.disown(claimed.workflow, claimed.seq)
        if entry.cancelled:
            return []
        refusal = UpstreamExited(
            workflow=claimed.workflow if claimed else None,
            seq=claimed.seq if claimed else None,
            tool=claimed.tool if claimed else None,
            exit_status=reason,
        )
        return [error_line(entry.ident, refusal.to_error())]
