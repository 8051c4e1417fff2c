"""What a new session with a remote upstream needs: the client's handshake, and the state it set up since.

A server that forgets a session (it restarted, or the session expired) answers 404 to its id, which proves the
request was not run. The remote upstream then starts a new session itself, as the client would have (the client's
own ``initialize`` and ``notifications/initialized``, byte for byte), and sends the request again, once. A new
session lacks what the client set up on the old one; ``SessionMemory`` remembers what the proxy saw the server
accept, so it can be sent again: the resource subscriptions (``resources/subscribe`` less
``resources/unsubscribe``) and the logging level (``logging/setLevel``). Whatever else the old session held is
named in the log, never guessed at. A refused ``initialize``, or another negotiated protocol version than the
client's, is the refusal of the request that met the 404 instead (``UPSTREAM_REFUSED``: it did not run).

``Renewal`` makes sure that however many exchanges meet the 404 at once, one new session is started; the I/O
is ``remote.RemoteUpstream``'s.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from checkpoint_mcp.upstream.http.exchange import Lost, Refused
from checkpoint_mcp.upstream.http.headers import OutgoingMessage, read_outgoing, result_of
from checkpoint_mcp.wire import Kind, WireParseError, classify

logger = logging.getLogger(__name__)

RENEW_ID_PREFIX = "checkpoint-renew-"  # ids of the requests the proxy sends on its own to restore a session
LOST_WITH_A_SESSION = "anything else the server kept for the old session (tasks, events of its streams)"


class Expired(Exception):
    """A request met a 404 for the session it was sent in (``generation``): it did not run."""

    def __init__(self, generation: int) -> None:
        super().__init__(generation)
        self.generation = generation


class SessionMemory:
    """The client's handshake and the session state the server accepted from it, learned from relayed answers."""

    def __init__(self) -> None:
        self.initialize: bytes | None = None
        """The client's ``initialize`` request line."""
        self.initialized: bytes | None = None
        """The client's ``notifications/initialized`` line."""
        self.negotiated: str | None = None
        """The protocol version the server answered the client's ``initialize`` with."""
        self.level: str | None = None
        self.subscriptions: dict[str, None] = {}  # resource URIs, in the order subscribed
        self._sent = 0

    def saw_sent(self, line: bytes, message: OutgoingMessage) -> None:
        """Remember the client's handshake lines as they go out."""
        if message.method == "initialize" and message.kind is Kind.REQUEST:
            self.initialize = line
        elif message.method == "notifications/initialized":
            self.initialized = line

    def learn(self, message: OutgoingMessage, line: bytes) -> None:
        """Remember what an answer to ``message`` says the server now holds for this session."""
        if message.method not in ("initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"):
            return
        result = result_of(line)
        params = message.params if isinstance(message.params, dict) else {}
        if result is None:
            return
        if message.method == "initialize":
            version = result.get("protocolVersion")
            self.negotiated = version if isinstance(version, str) else None
        elif message.method == "logging/setLevel" and isinstance(params.get("level"), str):
            self.level = params["level"]
        elif message.method == "resources/subscribe" and isinstance(params.get("uri"), str):
            self.subscriptions[params["uri"]] = None
        elif message.method == "resources/unsubscribe" and isinstance(params.get("uri"), str):
            self.subscriptions.pop(params["uri"], None)

    def version_refusal(self, answer: bytes | None) -> str | None:
        """Why the answer to a new ``initialize`` cannot stand in for the client's session, or None if it can.

        A refusal, or another protocol version than the client negotiated: the client's view of the server would
        no longer hold, so the proxy must not carry on as if nothing happened.
        """
        if answer is None:
            return "the remote upstream did not answer the new initialize"
        try:
            parsed = classify(answer)
        except WireParseError:
            return "the remote upstream's answer to the new initialize is not JSON"
        error = parsed.body.get("error") if parsed.kind is Kind.RESPONSE else None
        if isinstance(error, dict):
            return f"the remote upstream refused the new initialize: {error.get('message', error)}"
        result = result_of(answer)
        if result is None:
            return "the remote upstream's answer to the new initialize has no result"
        version = result.get("protocolVersion")
        if self.negotiated is not None and version != self.negotiated:
            return (
                f"the new session negotiated protocol version {version!r}, not the client's {self.negotiated!r}: "
                "restart the client to talk to the restarted server"
            )
        return None

    def restoring_requests(self) -> list[tuple[str, bytes]]:
        """The requests that set up the new session as the client had set up the old one: (what, line)."""
        wanted: list[tuple[str, str, dict[str, Any]]] = []
        if self.level is not None:
            wanted.append((f"the logging level {self.level!r}", "logging/setLevel", {"level": self.level}))
        for uri in self.subscriptions:
            wanted.append((f"the subscription to {uri}", "resources/subscribe", {"uri": uri}))
        requests = []
        for what, method, params in wanted:
            self._sent += 1
            body = {"jsonrpc": "2.0", "id": f"{RENEW_ID_PREFIX}{self._sent}", "method": method, "params": params}
            requests.append((what, json.dumps(body, separators=(",", ":")).encode() + b"\n"))
        return requests


class Renewal:
    """New sessions, one at a time: each exchange that met a 404 asks for a new session in place of the one it was
    sent in (its ``generation``), and only the first such request for a generation starts one."""

    def __init__(self, start: Callable[[], Awaitable[str | None]]) -> None:
        self.memory = SessionMemory()
        self.generation = 0
        """Counts the sessions started; a request remembers the one it was sent in."""
        self._start = start  # starts a new session: None, or why it could not
        self._lock = asyncio.Lock()
        self._failure: str | None = None

    async def settled(self) -> None:
        """Return once no new session is being started."""
        if self._lock.locked():
            async with self._lock:
                pass

    async def renew(self, generation: int) -> str | None:
        """A new session in place of session ``generation``: None once there is one, else why there is none."""
        async with self._lock:
            if generation != self.generation:
                return self._failure  # another exchange started one already (or failed to)
            self.generation += 1
            self._failure = await self._start()
            if self._failure is not None:
                logger.warning("no new session with the remote upstream: %s", self._failure)
            return self._failure

    async def restore(self, ask: Callable[[OutgoingMessage], Awaitable[bytes]]) -> None:
        """Send again, through ``ask``, what the client had set up on the old session; log what came of it."""
        restored: list[str] = []
        unrestored: list[str] = []
        for what, line in self.memory.restoring_requests():
            try:
                done = succeeded(await ask(read_outgoing(line)))
            except (Refused, Lost):
                done = False
            (restored if done else unrestored).append(what)
        logger.warning(
            "started a new session with the remote upstream (protocol %s); sent again: %s; could not send again: "
            "%s; lost with the old session: %s",
            self.memory.negotiated or "as negotiated",
            ", ".join(restored) or "nothing to send",
            ", ".join(unrestored) or "nothing",
            LOST_WITH_A_SESSION,
        )


def succeeded(line: bytes) -> bool:
    """Whether ``line`` is a response with a result (not an error)."""
    return result_of(line) is not None
