"""The one interface behind the MCP endpoint: what a session or a workflow hands its messages to.

Two things play this role, as httpx's transports do behind its client: a ``Channel`` (``channel.py``: one upstream,
its interceptor, the streams waiting for its answers) and a ``Federation`` (``federation/``: the upstreams of
``--upstreams``, one channel each, behind one endpoint). The endpoint and the gateway's sessions speak to a
``Backend`` only; which one it is they never ask.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from checkpoint_mcp.gateway.streams import Stream
from checkpoint_mcp.wire import Message


class Backend(Protocol):
    """The upstream side of one session (session era) or one workflow (2026-07-28)."""

    name: str
    """What it is, for logs (``session 1a2b3c4d``, ``workflow 'alice/run'``)."""
    closed: asyncio.Event
    """Set once it is gone for good (closed, or its only upstream died): a new one is opened for the next request."""
    exit_status: str | None
    """Why it is gone, once it is."""
    last_active: float
    """When a client last sent it something (``time.monotonic``): ``--idle-timeout`` counts from there."""

    @property
    def busy(self) -> bool:
        """True while some request waits for its answer (it is not idle, whatever ``last_active`` says)."""
        ...

    @property
    def fatal(self) -> str | None:
        """Why the journal is gone for good, if it is (the gateway must stop)."""
        ...

    def submit(
        self, message: Message, line: bytes, stream: Stream | None, carrier: Mapping[str, str] | None = None
    ) -> None:
        """Take one message from a client: a request's answer and the messages related to it go to ``stream``
        (None for a notification or a response). ``carrier``: the HTTP request's trace-context headers. Once
        ``closed``, a request is answered with an error at once."""
        ...

    def cancel(self, stream: Stream, reason: str) -> None:
        """The client closed ``stream`` before its answer (2026-07-28: that is its cancellation): cancel the
        request upstream and forget it, so that nothing waits for it any more."""
        ...

    async def close(self, reason: str = "stopped at shutdown") -> None:
        """Let the requests in flight finish and be journaled (bounded), then end the upstream (or upstreams)."""
        ...

    def calls_in_flight(self) -> int:
        """tools/call requests waiting for their answer (the in-doubt gauge leaves them out)."""
        ...

    def running(self) -> int:
        """How many upstream processes or connections it holds now (the ``checkpoint_upstreams`` gauge)."""
        ...
