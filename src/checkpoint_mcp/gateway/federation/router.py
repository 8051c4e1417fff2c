"""The federation itself: one session's or workflow's members behind the endpoint, each client message routed to
the member it is for (``Federation``), and each member's answer back to the client's stream (``Relay``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from checkpoint_mcp.gateway.backend import Backend
from checkpoint_mcp.gateway.federation import replies
from checkpoint_mcp.gateway.federation.aliases import Aliases
from checkpoint_mcp.gateway.federation.lists import UNREACHED, Gatherer, Resources, initialized, merged
from checkpoint_mcp.gateway.federation.members import ChannelOpener, FederationHealth, Member, Members
from checkpoint_mcp.gateway.streams import Stream, StreamKind
from checkpoint_mcp.gateway.upstreams_file import split_name
from checkpoint_mcp.refusals import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from checkpoint_mcp.wire import Kind, Message, classify, dumps, encode, id_key, set_member

logger = logging.getLogger(__name__)

ROUTED_BY_NAME = ("tools/call", "prompts/get")
ROUTED_BY_URI = ("resources/read", "resources/subscribe", "resources/unsubscribe")
BROADCAST = ("logging/setLevel", "subscriptions/listen")


class Relay(Stream):
    """The stream a member channel writes one request's lines to: related lines go on to ``target`` (a server
    request under an id of the federation's), the final answer to ``done`` (else to ``target``)."""

    def __init__(
        self,
        aliases: Aliases,
        member: str,
        target: Stream | None,
        method: str | None,
        done: Callable[[bytes | None, Any], None] | None = None,
    ) -> None:
        kind = target.kind if target is not None else StreamKind.REQUEST
        super().__init__(f"{target.id if target else 'ask'}.{member}", kind, method)
        self._aliases = aliases
        self._member = member
        self.target = target
        self._done = done

    def append(self, line: bytes, *, final: bool = False, body: Any = None) -> None:
        if self.finished:
            return
        if not final:
            if self.target is not None:
                self.target.append(self._aliases.outgoing(self._member, line))
            return
        self.finished = True
        if self._done is not None:
            self._done(line, body)
        elif self.target is not None:
            self.target.append(line, final=True, body=body)

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        if self._done is not None:
            self._done(None, None)
        elif self.target is not None:
            self.target.finish()


class Federation(Backend):
    """The members of one session (session era) or workflow (2026-07-28), behind the endpoint (a ``Backend``)."""

    def __init__(
        self,
        name: str,
        upstreams: tuple[str, ...],
        opener: ChannelOpener,
        health: FederationHealth,
        *,
        server_name: str,
        server_version: str,
        unrelated: Callable[[bytes], None] | None = None,
    ) -> None:
        """``unrelated`` receives the members' server messages that belong to no request (a session's GET
        stream)."""
        self.name = name
        self._aliases = Aliases()
        self._members = Members(upstreams, opener, health, self._aliases.next_id, self._list_changed)
        self._lists = Gatherer(self._members, self._aliases.next_id, Resources())
        self._server_info = {"name": server_name, "version": server_version}
        self._unrelated = unrelated
        self._routes: dict[tuple[str, Any] | None, list[str]] = {}  # a client's request id -> members serving it
        self._tasks: set[asyncio.Task[None]] = set()
        self._queue: asyncio.Queue[tuple[Message, bytes, Stream | None]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.exit_status: str | None = None
        self.last_active = time.monotonic()

    # ---- what the endpoint and the gateway read -----------------------------------------------------------

    @property
    def fatal(self) -> str | None:
        """Why the journal is gone for good, if a member's interceptor says so."""
        return self._members.fatal

    @property
    def busy(self) -> bool:
        """True while some request waits for its answer."""
        return bool(self._routes) or self._members.busy

    def calls_in_flight(self) -> int:
        """tools/call requests waiting for their answer, at every member."""
        return self._members.calls_in_flight()

    def running(self) -> int:
        """Members whose upstream runs."""
        return self._members.running()

    async def start(self, *, eager: bool) -> None:
        """Begin routing; ``eager``: start every member now (2026-07-28; those that cannot start are left out, and
        tried again later), else at the client's ``initialize`` (session era), which each member gets first."""
        self._worker = asyncio.get_running_loop().create_task(self._work())
        if eager:
            await asyncio.gather(*(self._members.start(member) for member in self._members))

    def member_unrelated(self, member: str) -> Callable[[bytes], None]:
        """The ``unrelated`` callback of a member channel: its server messages for no request, to the client."""

        def unrelated(line: bytes) -> None:
            if self._unrelated is not None:
                self._unrelated(self._aliases.outgoing(member, line))

        return unrelated

    def _list_changed(self) -> None:
        """The tools the client can call changed (an upstream left or came back): say so on the session's GET
        stream (2026-07-28 clients, without one, see it at their next list)."""
        if self._unrelated is not None and self._members.hello is not None:
            self._unrelated(encode({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))

    # ---- client -> members --------------------------------------------------------------------------------

    def submit(
        self, message: Message, line: bytes, stream: Stream | None, carrier: Mapping[str, str] | None = None
    ) -> None:
        """Route one message from the client (in order, on the federation's worker); a request's answer goes to
        ``stream``."""
        self.last_active = time.monotonic()
        if self.closed.is_set():
            if stream is not None and message.kind is Kind.REQUEST:
                stream.append(replies.error(message, INTERNAL_ERROR, "the session's upstreams are closed"), final=True)
            return
        self._queue.put_nowait((message, line, stream))

    async def _work(self) -> None:
        while True:
            message, line, stream = await self._queue.get()
            try:
                await self._dispatch(message, line, stream)
            except Exception:
                logger.exception("internal error while routing a message of %s", self.name)
                if stream is not None and not stream.finished:
                    stream.append(replies.error(message, INTERNAL_ERROR, "internal error in the gateway"), final=True)

    async def _dispatch(self, message: Message, line: bytes, stream: Stream | None) -> None:
        kind, method = message.kind, message.method or ""
        if kind is Kind.RESPONSE or (kind is Kind.OTHER and message.has_id):
            self._answer_to_member(message, line)
            return
        if kind is Kind.NOTIFICATION:
            self._notification(message, line)
            return
        if kind is Kind.REQUEST and stream is not None:
            await self._request(message, line, stream, method)

    async def _request(self, message: Message, line: bytes, stream: Stream, method: str) -> None:
        if method == "initialize":
            self._members.hello = message.params if isinstance(message.params, dict) else {}
            await self._initialize(message, stream)  # what the client sends next finds every member initialized
        elif method == "ping":
            stream.append(replies.result(message, {}), final=True)
        elif merged(method):
            self._answer_later(stream, self._lists.listed(message, self._server_info))
        elif method == "server/discover":
            self._answer_later(stream, self._lists.discovered(message, self._server_info))
        elif method in ROUTED_BY_NAME or (method == "completion/complete" and _ref_kind(message) == "ref/prompt"):
            await self._by_name(message, line, stream)
        elif method in ROUTED_BY_URI or method == "completion/complete":
            await self._by_uri(message, line, stream)
        elif method in BROADCAST:
            self._spawn(self._broadcast(message, line, stream))
        else:
            live = self._members.live()
            if len(live) == 1:  # a method the federation does not know: the only live upstream may
                await self._to_member(live[0], message, line, stream)
            else:
                stream.append(replies.error(message, METHOD_NOT_FOUND, f"Method not found: {method}"), final=True)

    async def _to_member(self, member: Member, message: Message, line: bytes, stream: Stream) -> None:
        if not await self._members.ready(member):
            text = f"the upstream {member.name!r} is unavailable: {member.why}"
            stream.append(replies.error(message, INTERNAL_ERROR, text, {"upstream": member.name}), final=True)
            return
        assert member.channel is not None
        key = id_key(message.id)
        self._routes.setdefault(key, []).append(member.name)

        def done(answer: bytes | None, body: Any) -> None:
            self._forget_route(key, member.name)
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and error.get("code") in UNREACHED:
                self._members.unreached(member, str(error.get("message", "unreachable")))
            if answer is not None:
                stream.append(answer, final=True, body=body)
            else:
                stream.finish()

        member.channel.submit(message, line, Relay(self._aliases, member.name, stream, message.method, done))

    def _forget_route(self, key: tuple[str, Any] | None, name: str) -> None:
        names = self._routes.get(key)
        if names is not None and name in names:
            names.remove(name)
            if not names:
                del self._routes[key]

    async def _by_name(self, message: Message, line: bytes, stream: Stream) -> None:
        params = message.params if isinstance(message.params, dict) else {}
        path: tuple[str, ...] = ("params", "name")
        listed = params.get("name")
        if message.method == "completion/complete":
            ref = params.get("ref")
            listed, path = (ref.get("name") if isinstance(ref, dict) else None), ("params", "ref", "name")
        parts = split_name(listed) if isinstance(listed, str) else None
        member = self._members.get(parts[0]) if parts else None
        if parts is None or member is None:
            what = "tool" if message.method == "tools/call" else "prompt"
            text = f"Unknown {what} {listed!r}: names here are <upstream>__<name>"
            stream.append(replies.error(message, INVALID_PARAMS, text), final=True)
            return
        edited = set_member(line.decode(), path, dumps(parts[1])).encode()
        await self._to_member(member, classify(edited), edited, stream)

    async def _by_uri(self, message: Message, line: bytes, stream: Stream) -> None:
        params = message.params if isinstance(message.params, dict) else {}
        uri = params.get("uri")
        if message.method == "completion/complete":
            ref = params.get("ref")
            uri = ref.get("uri") if isinstance(ref, dict) else None
        resources = self._lists.resources
        name = resources.owner_of(uri) if isinstance(uri, str) else None
        if name is None and isinstance(uri, str):  # learn the URIs first (a client may read before it lists)
            await self._lists.learn_resources(message)
            name = resources.owner_of(uri)
        if name is None:
            stream.append(replies.error(message, INVALID_PARAMS, f"Unknown resource {uri!r}"), final=True)
            return
        await self._to_member(self._members[name], message, line, stream)

    def _notification(self, message: Message, line: bytes) -> None:
        method = message.method
        if method == "notifications/initialized":
            self._members.initialized = line
        if method == "notifications/cancelled":
            params = message.params if isinstance(message.params, dict) else {}
            for name in list(self._routes.get(id_key(params.get("requestId")), [])):
                member = self._members[name]
                if member.live and member.channel is not None:
                    member.channel.submit(message, line, None)
            return
        for member in self._members.live():
            assert member.channel is not None
            member.channel.submit(message, line, None)

    def _answer_to_member(self, message: Message, line: bytes) -> None:
        """The client's answer to a member's server request: back to that member under its own id."""
        found = self._aliases.answered(message, line)
        if found is None:
            logger.debug("an answer of the client to an unknown request %r was dropped", message.id)
            return
        name, restored = found
        member = self._members[name]
        if member.live and member.channel is not None:
            member.channel.submit(classify(restored), restored, None)

    def cancel(self, stream: Stream, reason: str) -> None:
        """The client closed a request's stream (2026-07-28): cancel it at the members serving it, and forget it
        here (nobody waits for its answer: the federation is idle once nothing else is in flight)."""
        for member in self._members.live():
            assert member.channel is not None
            relays = [s for s in member.channel.waiting_streams() if isinstance(s, Relay) and s.target is stream]
            for relay in relays:
                member.channel.cancel(relay, reason)
                relay.finish()  # its ``done`` forgets the route; the stream ends with nothing more to say

    # ---- answered here ------------------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(_guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _answer_later(self, stream: Stream, answer: Awaitable[bytes]) -> None:
        """Answer ``stream`` with what ``answer`` makes, off the worker (asking every member takes a while)."""

        async def answered() -> None:
            stream.append(await answer, final=True)

        self._spawn(answered())

    async def _initialize(self, message: Message, stream: Stream) -> None:
        members = list(self._members)
        await asyncio.gather(*(self._members.ready(member) for member in members))
        answers = {member.name: member.hello for member in members if member.live}
        stream.append(initialized(message, self._members.hello, answers, self._server_info), final=True)

    async def _broadcast(self, message: Message, line: bytes, stream: Stream) -> None:
        """A request every member takes (``logging/setLevel``, a 2026-07-28 listen): their related lines go to
        the client; the answer is the last member's."""
        members = [m for m in self._members if await self._members.ready(m)]
        if not members:
            stream.append(replies.result(message, {}), final=True)
            return
        left = len(members)
        last: list[tuple[bytes, Any]] = []

        def done(answer: bytes | None, body: Any) -> None:
            nonlocal left
            left -= 1
            if answer is not None:
                last.append((answer, body))
            if left == 0:
                if last:
                    stream.append(last[-1][0], final=True, body=last[-1][1])
                else:
                    stream.finish()

        for member in members:
            assert member.channel is not None
            member.channel.submit(message, line, Relay(self._aliases, member.name, stream, message.method, done))

    # ---- the end ------------------------------------------------------------------------------------------

    async def close(self, reason: str = "stopped at shutdown") -> None:
        """Close every member (each lets its requests in flight finish, bounded)."""
        if self.closed.is_set():
            return
        self.closed.set()
        self.exit_status = reason
        if self._worker is not None:
            self._worker.cancel()
        await self._members.close(reason)
        for task in list(self._tasks):
            task.cancel()


async def _guarded(work: Awaitable[None]) -> None:
    try:
        await work
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("internal error in the federation")


def _ref_kind(message: Message) -> str | None:
    params = message.params if isinstance(message.params, dict) else {}
    ref = params.get("ref")
    kind = ref.get("type") if isinstance(ref, dict) else None
    return kind if isinstance(kind, str) else None
