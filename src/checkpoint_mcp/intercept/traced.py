"""The interceptor, watched by a trace: the same routing, with every line that crosses it shown to a ``CallTrace``.

``TracedInterceptor`` changes nothing the interceptor does, decides or writes; it only shows the trace the lines
going in and coming out, in order, and times the journal commits that ``flush`` makes (a line released by a
flush waited for that commit). The pumps build one only when telemetry is on (``traced``), so with telemetry off
they hold the plain ``Interceptor`` and the hot path pays nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from checkpoint_mcp.intercept.interceptor import Interceptor
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.intercept.turns import ClientBatch, Flushed, Flushing
from checkpoint_mcp.intercept.workflow import Workflow
from checkpoint_mcp.journal.base import Journal, Lineage
from checkpoint_mcp.telemetry import CallTrace


class TracedInterceptor(Interceptor):
    """An ``Interceptor`` whose traffic a ``CallTrace`` sees."""

    def __init__(
        self,
        trace: CallTrace,
        config: ProxyConfig,
        journal: Journal | None,
        lineage: Lineage | None,
        workflow: Workflow | None = None,
        *,
        session: bool = True,
        client: str | None = None,
    ) -> None:
        super().__init__(config, journal, lineage, workflow, session=session, client=client)
        self.trace = trace
        self._carrier: Mapping[str, str] | None = None

    def transport_context(self, carrier: Mapping[str, str] | None) -> None:
        """The HTTP trace-context headers of the request(s) the next ``from_client`` gets (the gateway)."""
        self._carrier = carrier

    def from_client(self, lines: list[bytes]) -> ClientBatch:
        """See ``Interceptor.from_client``."""
        carrier, self._carrier = self._carrier, None
        self.trace.from_client(lines, carrier)
        out = super().from_client(lines)
        self.trace.to_upstream(out.to_upstream)
        self.trace.to_client(out.to_client)
        return out

    def begin_flush(self) -> Flushing:
        """See ``Interceptor.begin_flush`` (``flush`` goes through it too)."""
        flushing = super().begin_flush()
        flushing.started_ns = time.time_ns()
        return flushing

    def end_flush(self, flushing: Flushing, error: BaseException | None) -> Flushed:
        """See ``Interceptor.end_flush``: the lines it releases waited for the commit that began with the flush."""
        flushed = super().end_flush(flushing, error)
        commit = (flushing.started_ns, time.time_ns()) if flushing.batch is not None else None
        self.trace.to_upstream(flushed.to_upstream, commit)
        self.trace.to_client(flushed.to_client, commit)
        return flushed

    def from_upstream(self, lines: list[bytes]) -> list[bytes]:
        """See ``Interceptor.from_upstream``."""
        self.trace.from_upstream(lines)
        out = super().from_upstream(lines)
        self.trace.to_client(out)
        return out

    def upstream_gone(self, exit_status: str) -> list[bytes]:
        """See ``Interceptor.upstream_gone``."""
        return self._answered(super().upstream_gone(exit_status))

    def stopped(self, why: str) -> list[bytes]:
        """See ``Interceptor.stopped``."""
        return self._answered(super().stopped(why))

    def abandon(self, ident: Any, reason: str) -> list[bytes]:
        """See ``Interceptor.abandon``."""
        return self._answered(super().abandon(ident, reason))

    def upstream_headers(self, key: tuple[str, Any] | None) -> dict[str, str]:
        """See ``Interceptor.upstream_headers``; with the ``traceparent`` of the request's upstream exchange."""
        return {**self.trace.headers_for(key), **super().upstream_headers(key)}

    def _answered(self, lines: list[bytes]) -> list[bytes]:
        self.trace.to_client(lines)
        return lines


def traced(
    trace: CallTrace | None,
    config: ProxyConfig,
    journal: Journal | None,
    lineage: Lineage | None,
    workflow: Workflow | None = None,
    *,
    session: bool = True,
    client: str | None = None,
) -> Interceptor:
    """The interceptor a pump uses: the plain one when ``trace`` is None (telemetry off), else a traced one.
    ``session``, ``client``: its lines are one client session's, of that client process (see ``Interceptor``)."""
    if trace is None:
        return Interceptor(config, journal, lineage, workflow, session=session, client=client)
    return TracedInterceptor(trace, config, journal, lineage, workflow, session=session, client=client)
