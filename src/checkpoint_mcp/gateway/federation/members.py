"""The members of one federation: each upstream's channel, started (with the client's own ``initialize``), left
out when it cannot be reached or dies, and started again once it may be.

A member that fails is left out (``failed``): out of the lists, with a warning, its requests answered with an
error naming it; ``FederationHealth`` (one per gateway, for ``/healthz``) says why. It is started again at a later
request once its back-off passed (``RETRY_DELAYS``) or the gateway's probe saw its upstream answer again
(``ready``). Leaving out or coming back changes the tools the client can call: ``changed`` is told.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from checkpoint_mcp.gateway.channel import Channel
from checkpoint_mcp.gateway.federation.own_requests import ask
from checkpoint_mcp.wire import classify

logger = logging.getLogger(__name__)

RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)  # seconds before a member that failed is started again

ChannelOpener = Callable[[str], Awaitable[Channel]]
"""Opens the member channel of one upstream (its interceptor, its journal workflow, its upstream)."""


class FederationHealth:
    """What each upstream of the file last did, for ``/healthz``: None when it answers, else why not."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.status: dict[str, str | None] = dict.fromkeys(names)

    def up(self, name: str) -> None:
        """``name`` answered."""
        if self.status.get(name) is not None:
            logger.warning("upstream %s answers again", name)
        self.status[name] = None

    def down(self, name: str, why: str) -> None:
        """``name`` could not start or answer."""
        if self.status.get(name) != why:
            logger.warning("upstream %s is left out: %s", name, why)
        self.status[name] = why


class Member:
    """One upstream of a federation: its channel, or why it has none."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.channel: Channel | None = None
        self.failures = 0
        self.retry_at = 0.0
        self.why: str | None = None
        self.hello: dict[str, Any] = {}  # what its upstream answered to the client's initialize

    @property
    def live(self) -> bool:
        """Its channel is open and its upstream runs."""
        return self.channel is not None and not self.channel.closed.is_set()


class Members:
    """The members of one session's or workflow's federation, by upstream name."""

    def __init__(
        self,
        upstreams: tuple[str, ...],
        opener: ChannelOpener,
        health: FederationHealth,
        ids: Callable[[], str],
        changed: Callable[[], None],
    ) -> None:
        """``ids`` names the federation's own requests (a member's ``initialize``); ``changed`` hears that the
        tools the client can call changed (a member left, or came back)."""
        self._members = {upstream: Member(upstream) for upstream in upstreams}
        self._open = opener
        self._health = health
        self._ids = ids
        self._changed = changed
        self.hello: dict[str, Any] | None = None
        """The client's ``initialize`` params (session era): each member's upstream gets them before its first
        request."""
        self.initialized: bytes | None = None
        """The client's ``notifications/initialized`` line, which follows."""
        self._closing: set[asyncio.Task[None]] = set()  # channels of members left out, being closed

    def __iter__(self) -> Iterator[Member]:
        return iter(self._members.values())

    def get(self, name: str) -> Member | None:
        """The member of upstream ``name``, if the file has one."""
        return self._members.get(name)

    def __getitem__(self, name: str) -> Member:
        return self._members[name]

    def live(self) -> list[Member]:
        """The members whose upstream runs now."""
        return [member for member in self if member.live]

    @property
    def fatal(self) -> str | None:
        """Why the journal is gone for good, if a member's interceptor says so."""
        return next((m.channel.fatal for m in self if m.channel and m.channel.fatal), None)

    @property
    def busy(self) -> bool:
        """True while a request waits for its answer at some member."""
        return any(m.channel.busy for m in self if m.live and m.channel)

    def calls_in_flight(self) -> int:
        """tools/call requests waiting for their answer, at every member."""
        return sum(m.channel.calls_in_flight() for m in self if m.channel is not None)

    def running(self) -> int:
        """Members whose upstream runs."""
        return len(self.live())

    async def start(self, member: Member) -> bool:
        """Open ``member``'s channel and, in the session era, initialize its upstream with the client's own
        ``initialize``; False (it is left out until its retry) if it cannot."""
        back = member.failures > 0
        try:
            channel = await self._open(member.name)
        except Exception as exc:
            self.failed(member, f"cannot start: {exc}")
            return False
        member.channel = channel
        member.why = None
        if self.hello is not None:
            try:
                member.hello = await ask(channel, "initialize", self.hello, self._ids())
            except Exception as exc:
                await channel.close("its initialize failed")
                self.failed(member, f"initialize failed: {exc}")
                return False
            if self.initialized is not None:
                channel.submit(classify(self.initialized), self.initialized, None)
            self._health.up(member.name)  # it answered (a remote opened in 2026-07-28 has said nothing yet)
        member.failures = 0
        if back:
            self._changed()
        return True

    async def ready(self, member: Member) -> bool:
        """True when ``member`` runs, starting it again if it died and may be tried (its back-off passed, or the
        gateway's probe saw the upstream answer again)."""
        if member.live:
            return True
        if member.channel is not None and member.why is None:  # it died since the last use
            self.failed(member, f"exited ({member.channel.exit_status or 'closed'})")
        due = time.monotonic() >= member.retry_at or self._health.status.get(member.name) is None
        if not due:
            return False
        return await self.start(member)

    def unreached(self, member: Member, why: str) -> None:
        """``member``'s upstream could not be reached or died: leave it out, and end its channel (a new one is
        opened when it answers again)."""
        channel = member.channel
        self.failed(member, why)
        member.channel = None  # nothing more is routed to it, while it closes
        if channel is not None and not channel.closed.is_set():
            closing = asyncio.get_running_loop().create_task(channel.close("left out: it could not be reached"))
            self._closing.add(closing)  # awaited, never cancelled, by ``close``: its upstream must end
            closing.add_done_callback(self._closing.discard)

    def failed(self, member: Member, why: str) -> None:
        """``member`` could not start or answer: left out until its back-off passes."""
        if member.why is None and member.channel is not None:
            self._changed()
        member.why = why
        member.retry_at = time.monotonic() + RETRY_DELAYS[min(member.failures, len(RETRY_DELAYS) - 1)]
        member.failures += 1
        self._health.down(member.name, why)

    async def close(self, reason: str) -> None:
        """Close every member's channel (each lets its requests in flight finish, bounded), and wait for those
        being closed already."""
        channels = [m.channel for m in self if m.channel is not None]
        await asyncio.gather(*(channel.close(reason) for channel in channels), *self._closing, return_exceptions=True)
