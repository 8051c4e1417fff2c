"""The interface every way out implements: ``Upstream`` (what a pump needs of a server, however it is reached)
and ``UpstreamSink`` (what the server's side calls back).

The stdio child (``stdio.child.ChildUpstream``) and the remote server (``http.remote.RemoteUpstream``) are the two
implementations; the pumps (the stdio relay, the gateway's channels) drive them through these two protocols only.
"""

from __future__ import annotations

from typing import Any, Protocol


class UpstreamSink(Protocol):
    """What an upstream reports to the pump that drives it (all called on the event loop)."""

    def upstream_lines(self, lines: list[bytes]) -> None:
        """Complete messages from the server, one line each ending in ``\\n``, as the original bytes."""

    def upstream_closed(self) -> None:
        """The server is gone for good (its output closed); ``Upstream.died`` says how."""

    def pause_client(self, paused: bool) -> None:
        """Backpressure: the server is not taking our writes; stop (or resume) reading the client."""

    def request_abandoned(self, ident: Any, reason: str) -> None:
        """The request with JSON-RPC id ``ident`` will get no answer (its exchange broke); ``reason`` says why.

        A journaled call then stays PENDING: in doubt, never re-sent.
        """


class Upstream(Protocol):
    """A server the proxy talks to: lines in, lines out, and a bounded end."""

    async def start(self, sink: UpstreamSink) -> None:
        """Begin delivering the server's messages to ``sink``."""

    def send(self, data: bytes) -> None:
        """Send one or more complete lines (original bytes, each ending in ``\\n``) to the server."""

    def pause_reading(self, paused: bool) -> None:
        """Backpressure: the client is not reading; stop (or resume) reading the server."""

    async def died(self) -> str:
        """After ``upstream_closed``: how the server ended (``exit code 3``, ``killed by SIGKILL``)."""

    async def shutdown(self) -> str:
        """End the server gracefully, then by force, every wait bounded; how it ended."""

    def kill(self) -> None:
        """End the server at once."""
