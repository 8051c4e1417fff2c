"""The gateway's Prometheus metrics (``GET /metrics``), in a registry of its own.

The gateway observes; it decides nothing. A tools/call's outcome is read from its final response: an error with
one of Checkpoint's codes is a refusal (counted by code), another error a failure, a result whose journal
``_meta`` says ``replayed: true`` a replay, any other result a completion. With an identity provider, each outcome
is also counted by principal (``checkpoint_principal_calls_total``), which only an operator's token may read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from checkpoint_mcp.refusals import OWN_CODES
from checkpoint_mcp.wire import JOURNAL_META

CONTENT_TYPE = CONTENT_TYPE_LATEST


class GatewayMetrics:
    """Counters and gauges of one gateway process."""

    def __init__(self, principals: bool = False) -> None:
        """``principals``: count calls by principal too (`checkpoint serve --issuer`)."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.by_principal = (
            Counter(
                "checkpoint_principal_calls",
                "tools/call requests answered, by principal (the token's subject) and outcome",
                ["principal", "outcome"],
                registry=self.registry,
            )
            if principals
            else None
        )
        self.calls = Counter(
            "checkpoint_calls",
            "tools/call requests answered, by outcome (completed, failed, replayed, refused, passthrough)",
            ["outcome"],
            registry=self.registry,
        )
        self.replays = Counter("checkpoint_replays", "tools/call answered from the journal", registry=self.registry)
        self.refusals = Counter(
            "checkpoint_refusals",
            "tools/call refused by Checkpoint, by JSON-RPC error code",
            ["code"],
            registry=self.registry,
        )
        self.requests = Counter(
            "checkpoint_http_requests", "MCP requests received, by protocol era", ["era"], registry=self.registry
        )
        self.journal_latency = Histogram(
            "checkpoint_journal_commit_seconds",
            "duration of one journal commit (a unit of work: the writes of one turn of the event loop)",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
        self.in_doubt = Gauge(
            "checkpoint_in_doubt_calls",
            "PENDING calls in the journal that are not in flight here",
            registry=self.registry,
        )
        self.sessions = Gauge("checkpoint_sessions", "open downstream sessions (session era)", registry=self.registry)
        self.upstreams = Gauge("checkpoint_upstreams", "running upstream connections", registry=self.registry)
        self._requests: dict[str, Any] = {}

    def bind(
        self, in_doubt: Callable[[], float], sessions: Callable[[], float], upstreams: Callable[[], float]
    ) -> None:
        """Compute the gauges at scrape time."""
        self.in_doubt.set_function(in_doubt)
        self.sessions.set_function(sessions)
        self.upstreams.set_function(upstreams)

    def count_request(self, era: str) -> None:
        """One MCP request received in ``era`` (``session`` or ``2026``)."""
        counter = self._requests.get(era)
        if counter is None:
            counter = self._requests[era] = self.requests.labels(era=era)  # labels() costs more than inc()
        counter.inc()

    def observe_call(self, body: Any, principal: str | None = None) -> None:
        """Count the outcome of one tools/call of ``principal`` from its final response (its parsed JSON body)."""
        if not isinstance(body, dict):
            return
        outcome = self._outcome(body)
        self.calls.labels(outcome=outcome).inc()
        if principal is not None and self.by_principal is not None:
            self.by_principal.labels(principal=principal, outcome=outcome).inc()

    def _outcome(self, body: dict[str, Any]) -> str:
        error = body.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            # Checkpoint's own codes are refusals; any other error (a standard code included) came from the upstream.
            if isinstance(code, int) and code in OWN_CODES:
                self.refusals.labels(code=str(code)).inc()
                return "refused"
            return "failed"
        result = body.get("result")
        meta = result.get("_meta") if isinstance(result, dict) else None
        info = meta.get(JOURNAL_META) if isinstance(meta, dict) else None
        if not isinstance(info, dict):
            return "passthrough"
        if info.get("replayed") is True:
            self.replays.inc()
            return "replayed"
        return "completed"

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
