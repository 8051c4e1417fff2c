"""Many upstreams behind one endpoint (`checkpoint serve --upstreams FILE.toml`): one session or workflow, one
``Channel`` per upstream.

A ``Federation`` stands where a single ``Channel`` stands for the endpoint (the same ``submit``, ``cancel``,
``close``), and routes each message to the channel of the upstream it is for. Each member channel has its own
interceptor, its own workflow in the journal (``<workflow>/<upstream>``: a workflow's calls to ``mail`` and to
``github`` are numbered apart) and its own tool policy, so replays, repeats and in-doubt calls are per upstream;
the federation makes no journaling decision.

* ``tools/list``, ``prompts/list``, ``resources/templates/list`` (and ``resources/list``) are asked of every member
  and merged; names are prefixed ``<upstream>__<name>`` (``upstreams_file.SEPARATOR``). ``tools/call`` and
  ``prompts/get`` are routed by their prefix, which is taken off on the way up (the upstream and its journal see
  the upstream's own name: the only edit besides the gateway's id renaming). ``resources/read`` and subscriptions go
  to the upstream whose list holds the URI (or whose template's fixed start matches it).
* ``initialize`` (and 2026-07-28's ``server/discover``) is answered by the federation: the members' capabilities
  merged, the gateway's own name; each member got the client's own ``initialize`` first.
* A server request of a member (sampling, elicitation, roots) reaches the client under a new id
  (``checkpoint-fed-N``), so the answer goes back to that member with its own id.
* An upstream that cannot start or answer is left out (of lists, with a warning), the others keep working, and it
  is started again at a later request once ``FederationHealth`` says it answers again (or its back-off passed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from checkpoint_mcp.errors import UpstreamError
from checkpoint_mcp.gateway.channel import Channel
from checkpoint_mcp.gateway.streams import Stream, StreamKind
from checkpoint_mcp.gateway.upstreams_file import MAX_LISTED_NAME, prefixed, split_name
from checkpoint_mcp.refusals import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, UPSTREAM_EXITED, UPSTREAM_REFUSED
from checkpoint_mcp.wire import Kind, Message, WireParseError, classify, dumps, encode, id_key, set_member, with_id

logger = logging.getLogger(__name__)

ASK_TIMEOUT = 10.0  # seconds a member has to answer a list or an initialize before it is left out
MAX_PAGES = 50  # pages of one list followed per member
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)  # seconds before a member that failed is started again
LISTS = {"tools/list": "tools", "prompts/list": "prompts", "resources/templates/list": "resourceTemplates"}
ROUTED_BY_NAME = ("tools/call", "prompts/get")
ROUTED_BY_URI = ("resources/read", "resources/subscribe", "resources/unsubscribe")

UNREACHED = frozenset({UPSTREAM_REFUSED, UPSTREAM_EXITED})
"""The gateway's own answers that say an upstream could not be reached or died: it is left out until it answers."""

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


class _Member:
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
        return self.channel is not None and not self.channel.closed.is_set()


class _Relay(Stream):
    """The stream a member channel writes a request's lines to: related lines go on to ``target`` (server requests
    under a new id), the final answer to ``target`` or to ``done``."""

    def __init__(
        self,
        federation: Federation,
        member: str,
        target: Stream | None,
        method: str | None,
        done: Callable[[bytes | None, Any], None] | None = None,
    ) -> None:
        kind = target.kind if target is not None else StreamKind.REQUEST
        super().__init__(f"{target.id if target else 'ask'}.{member}", kind, method)
        self._federation = federation
        self._member = member
        self._target = target
        self._done = done

    def append(self, line: bytes, *, final: bool = False, body: Any = None) -> None:
        if self.finished:
            return
        if not final:
            if self._target is not None:
                self._target.append(self._federation.outgoing(self._member, line))
            return
        self.finished = True
        if self._done is not None:
            self._done(line, body)
        elif self._target is not None:
            self._target.append(line, final=True, body=body)

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        if self._done is not None:
            self._done(None, None)
        elif self._target is not None:
            self._target.finish()


class Federation:
    """The members of one session (session era) or workflow (2026-07-28), behind the endpoint's one channel."""

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
        self.name = name
        self._members = {upstream: _Member(upstream) for upstream in upstreams}
        self._open = opener
        self._health = health
        self._server_info = {"name": server_name, "version": server_version}
        self._unrelated = unrelated
        self._hello: dict[str, Any] | None = None  # the client's initialize params (session era)
        self._initialized: bytes | None = None  # its notifications/initialized line
        self._aliases: dict[str, tuple[str, str]] = {}  # our server-request id -> (member, its original id text)
        self._routes: dict[tuple[str, Any] | None, list[str]] = {}  # a client's request id -> members serving it
        self._uris: dict[str, str] = {}  # a resource's URI -> its upstream
        self._templates: list[tuple[str, str]] = []  # (a template's fixed start, its upstream)
        self._counter = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing: set[asyncio.Task[None]] = set()  # channels of members left out, being closed
        self._queue: asyncio.Queue[tuple[Message, bytes, Stream | None]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.exit_status: str | None = None
        self.last_active = time.monotonic()

    # ---- what the endpoint and the gateway read -----------------------------------------------------------

    @property
    def fatal(self) -> str | None:
        """Why the journal is gone for good, if a member's interceptor says so."""
        return next((m.channel.fatal for m in self._members.values() if m.channel and m.channel.fatal), None)

    @property
    def busy(self) -> bool:
        """True while some request waits for its answer."""
        return bool(self._routes) or any(m.channel.busy for m in self._members.values() if m.live and m.channel)

    def calls_in_flight(self) -> int:
        """tools/call requests waiting for their answer, at every member."""
        return sum(m.channel.calls_in_flight() for m in self._members.values() if m.channel is not None)

    def running(self) -> int:
        """Members whose upstream runs."""
        return sum(1 for m in self._members.values() if m.live)

    async def start(self, *, eager: bool) -> None:
        """Begin routing; ``eager``: start every member now (2026-07-28; those that cannot start are left out, and
        tried again later), else at the client's ``initialize`` (session era), which each member gets first."""
        self._worker = asyncio.get_running_loop().create_task(self._work())
        if eager:
            await asyncio.gather(*(self._start(member) for member in self._members.values()))

    # ---- members ------------------------------------------------------------------------------------------

    async def _start(self, member: _Member) -> bool:
        """Open ``member``'s channel and, in the session era, initialize its upstream with the client's own
        ``initialize``; False (it is left out until its retry) if it cannot."""
        back = member.failures > 0
        try:
            channel = await self._open(member.name)
        except Exception as exc:
            self._failed(member, f"cannot start: {exc}")
            return False
        member.channel = channel
        member.why = None
        if self._hello is not None:
            try:
                member.hello = await ask(channel, "initialize", self._hello, self._next_id())
            except Exception as exc:
                await channel.close("its initialize failed")
                self._failed(member, f"initialize failed: {exc}")
                return False
            if self._initialized is not None:
                channel.submit(classify(self._initialized), self._initialized, None)
            self._health.up(member.name)  # it answered (a remote opened in 2026-07-28 has said nothing yet)
        member.failures = 0
        if back:
            self._list_changed()
        return True

    def _unreached(self, member: _Member, why: str) -> None:
        """``member``'s upstream could not be reached or died: leave it out, and end its channel (a new one is
        opened when it answers again)."""
        channel = member.channel
        self._failed(member, why)
        member.channel = None  # nothing more is routed to it, while it closes
        if channel is not None and not channel.closed.is_set():
            closing = asyncio.get_running_loop().create_task(channel.close("left out: it could not be reached"))
            self._closing.add(closing)  # awaited, never cancelled, by ``close``: its upstream must end
            closing.add_done_callback(self._closing.discard)

    def _list_changed(self) -> None:
        """The tools the client can call changed (an upstream left or came back): say so on the session's GET
        stream (2026-07-28 clients, without one, see it at their next list)."""
        if self._unrelated is not None and self._hello is not None:
            self._unrelated(encode({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))

    def _failed(self, member: _Member, why: str) -> None:
        if member.why is None and member.channel is not None:
            self._list_changed()
        member.why = why
        member.retry_at = time.monotonic() + RETRY_DELAYS[min(member.failures, len(RETRY_DELAYS) - 1)]
        member.failures += 1
        self._health.down(member.name, why)

    async def _ready(self, member: _Member) -> bool:
        """True when ``member`` runs, starting it again if it died and may be tried (its back-off passed, or the
        gateway's probe saw the upstream answer again)."""
        if member.live:
            return True
        if member.channel is not None and member.why is None:  # it died since the last use
            self._failed(member, f"exited ({member.channel.exit_status or 'closed'})")
        due = time.monotonic() >= member.retry_at or self._health.status.get(member.name) is None
        if not due:
            return False
        return await self._start(member)

    def _next_id(self) -> str:
        self._counter += 1
        return f"checkpoint-fed-{self._counter}"

    # ---- client -> members --------------------------------------------------------------------------------

    def submit(
        self, message: Message, line: bytes, stream: Stream | None, carrier: Mapping[str, str] | None = None
    ) -> None:
        """Route one message from the client (in order, on the federation's worker); a request's answer goes to
        ``stream``."""
        self.last_active = time.monotonic()
        if self.closed.is_set():
            if stream is not None and message.kind is Kind.REQUEST:
                stream.append(_error(message, INTERNAL_ERROR, "the session's upstreams are closed"), final=True)
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
                    stream.append(_error(message, INTERNAL_ERROR, "internal error in the gateway"), final=True)

    async def _dispatch(self, message: Message, line: bytes, stream: Stream | None) -> None:
        kind, method = message.kind, message.method or ""
        if kind is Kind.RESPONSE or (kind is Kind.OTHER and message.has_id):
            await self._answer_to_member(message, line)
            return
        if kind is Kind.NOTIFICATION:
            await self._notification(message, line)
            return
        if kind is Kind.REQUEST and stream is not None:
            await self._request(message, line, stream, method)

    async def _request(self, message: Message, line: bytes, stream: Stream, method: str) -> None:
        if method == "initialize":
            self._hello = message.params if isinstance(message.params, dict) else {}
            await self._initialize(message, stream)  # what the client sends next finds every member initialized
        elif method == "ping":
            stream.append(_result(message, {}), final=True)
        elif method in LISTS or method == "resources/list":
            self._spawn(self._list(message, stream))
        elif method == "server/discover":
            self._spawn(self._discover(message, stream))
        elif method in ROUTED_BY_NAME or (method == "completion/complete" and _ref_kind(message) == "ref/prompt"):
            await self._by_name(message, line, stream)
        elif method in ROUTED_BY_URI or method == "completion/complete":
            await self._by_uri(message, line, stream)
        elif method in ("logging/setLevel", "subscriptions/listen"):
            self._spawn(self._broadcast(message, line, stream))
        else:
            live = [m for m in self._members.values() if m.live]
            if len(live) == 1:  # a method the federation does not know: the only live upstream may
                await self._to_member(live[0], message, line, stream)
            else:
                stream.append(_error(message, METHOD_NOT_FOUND, f"Method not found: {method}"), final=True)

    async def _to_member(self, member: _Member, message: Message, line: bytes, stream: Stream) -> None:
        if not await self._ready(member):
            text = f"the upstream {member.name!r} is unavailable: {member.why}"
            stream.append(_error(message, INTERNAL_ERROR, text, {"upstream": member.name}), final=True)
            return
        assert member.channel is not None
        key = id_key(message.id)
        self._routes.setdefault(key, []).append(member.name)

        def done(answer: bytes | None, body: Any) -> None:
            self._forget_route(key, member.name)
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and error.get("code") in UNREACHED:
                self._unreached(member, str(error.get("message", "unreachable")))
            if answer is not None:
                stream.append(answer, final=True, body=body)
            else:
                stream.finish()

        member.channel.submit(message, line, _Relay(self, member.name, stream, message.method, done))

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
            stream.append(_error(message, INVALID_PARAMS, text), final=True)
            return
        edited = set_member(line.decode(), path, dumps(parts[1])).encode()
        await self._to_member(member, classify(edited), edited, stream)

    async def _by_uri(self, message: Message, line: bytes, stream: Stream) -> None:
        params = message.params if isinstance(message.params, dict) else {}
        uri = params.get("uri")
        if message.method == "completion/complete":
            ref = params.get("ref")
            uri = ref.get("uri") if isinstance(ref, dict) else None
        name = self._owner_of(uri) if isinstance(uri, str) else None
        if name is None and isinstance(uri, str):  # learn the URIs first (a client may read before it lists)
            for method in ("resources/list", "resources/templates/list"):
                for upstream, answer in (await self._gather(method, _envelope(message))).items():
                    self._learn(method, upstream, answer.get(LISTS.get(method, "resources"), []))
            name = self._owner_of(uri)
        if name is None:
            stream.append(_error(message, INVALID_PARAMS, f"Unknown resource {uri!r}"), final=True)
            return
        await self._to_member(self._members[name], message, line, stream)

    def _learn(self, method: str, upstream: str, items: Any) -> None:
        """Remember which upstream serves the resources (or templates) of one of its lists."""
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            if method == "resources/list" and isinstance(item.get("uri"), str):
                self._uris[item["uri"]] = upstream
            elif method == "resources/templates/list" and isinstance(item.get("uriTemplate"), str):
                start = (item["uriTemplate"].split("{", 1)[0], upstream)
                if start not in self._templates:
                    self._templates.append(start)

    def _owner_of(self, uri: str) -> str | None:
        if uri in self._uris:
            return self._uris[uri]
        fitting = [(len(start), name) for start, name in self._templates if start and uri.startswith(start)]
        return max(fitting)[1] if fitting else None

    async def _notification(self, message: Message, line: bytes) -> None:
        method = message.method
        if method == "notifications/initialized":
            self._initialized = line
        if method == "notifications/cancelled":
            params = message.params if isinstance(message.params, dict) else {}
            for name in list(self._routes.get(id_key(params.get("requestId")), [])):
                member = self._members[name]
                if member.live and member.channel is not None:
                    member.channel.submit(message, line, None)
            return
        for member in self._members.values():
            if member.live and member.channel is not None:
                member.channel.submit(message, line, None)

    async def _answer_to_member(self, message: Message, line: bytes) -> None:
        """The client's answer to a member's server request: back to that member under its own id."""
        alias = message.id if isinstance(message.id, str) else None
        target = self._aliases.pop(alias, None) if alias is not None else None
        if target is None:
            logger.debug("an answer of the client to an unknown request %r was dropped", message.id)
            return
        name, original = target
        member = self._members[name]
        if member.live and member.channel is not None:
            _, restored = with_id(line.decode(), original)
            member.channel.submit(classify(restored), restored.encode(), None)

    def outgoing(self, member: str, line: bytes) -> bytes:
        """A member's line on its way to the client: a server request gets an id of the federation's."""
        try:
            message = classify(line)
        except WireParseError:
            return line
        if message.kind is not Kind.REQUEST:
            return line
        alias = self._next_id()
        original, renamed = with_id(line.decode(), dumps(alias))
        if original is None:
            return line
        self._aliases[alias] = (member, original)
        return renamed.encode()

    def member_unrelated(self, member: str) -> Callable[[bytes], None]:
        """The ``unrelated`` callback of a member channel: its server messages for no request, to the client."""

        def unrelated(line: bytes) -> None:
            if self._unrelated is not None:
                self._unrelated(self.outgoing(member, line))

        return unrelated

    def cancel(self, stream: Stream, reason: str) -> None:
        """The client closed a request's stream (2026-07-28): cancel it at the members serving it, and forget it
        here (nobody waits for its answer: the federation is idle once nothing else is in flight)."""
        for member in self._members.values():
            if member.live and member.channel is not None:
                relays = [s for s in member.channel.waiting_streams() if isinstance(s, _Relay) and s._target is stream]
                for relay in relays:
                    member.channel.cancel(relay, reason)
                    relay.finish()  # its ``done`` forgets the route; the stream ends with nothing more to say

    # ---- answered here ------------------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(_guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _gather(self, method: str, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Ask every member that runs (or may be started) ``method``; their results, by member. A member that does
        not answer is left out, with a warning."""

        async def one(member: _Member) -> tuple[str, dict[str, Any] | None]:
            if not await self._ready(member):
                return member.name, None
            assert member.channel is not None
            try:
                if method in LISTS or method == "resources/list":
                    return member.name, await self._all_pages(member.channel, method, params)
                return member.name, await ask(member.channel, method, params, self._next_id())
            except AskFailed as exc:
                if exc.code in UNREACHED:
                    self._unreached(member, str(exc))
                else:  # it answered: it only has no such list
                    logger.debug("upstream %s has no %s: %s", member.name, method, exc)
                return member.name, None
            except Exception as exc:
                self._unreached(member, f"no answer to {method}: {exc or type(exc).__name__}")
                return member.name, None

        found = await asyncio.gather(*(one(member) for member in self._members.values()))
        return {name: result for name, result in found if result is not None}

    async def _all_pages(self, channel: Channel, method: str, params: dict[str, Any]) -> dict[str, Any]:
        field = LISTS.get(method, "resources")
        items: list[Any] = []
        cursor: Any = None
        for _ in range(MAX_PAGES):
            page = await ask(channel, method, {**params, **({"cursor": cursor} if cursor else {})}, self._next_id())
            found = page.get(field)
            items.extend(found if isinstance(found, list) else [])
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return {field: items}

    async def _list(self, message: Message, stream: Stream) -> None:
        method = message.method or ""
        field = LISTS.get(method, "resources")
        merged: list[Any] = []
        for name, answer in (await self._gather(method, _envelope(message))).items():
            self._learn(method, name, answer.get(field, []))
            for item in answer.get(field, []):
                if not isinstance(item, dict):
                    continue
                if method == "resources/list":
                    merged.append(item)
                    continue
                listed = prefixed(name, str(item.get("name", "")))
                if len(listed) > MAX_LISTED_NAME:
                    logger.error("%s %r of upstream %s is left out: over %d characters", field, listed, name, 64)
                    continue
                merged.append({**item, "name": listed})
        result: dict[str, Any] = {field: merged}
        if _modern(message):  # 2026-07-28 results say how long they may be cached: not at all, upstreams come and go
            result.update(cacheScope="private", resultType="complete", ttlMs=0)
            result["_meta"] = {"io.modelcontextprotocol/serverInfo": self._server_info}
        stream.append(_result(message, result), final=True)

    async def _initialize(self, message: Message, stream: Stream) -> None:
        members = list(self._members.values())
        await asyncio.gather(*(self._ready(member) for member in members))
        answers = {member.name: member.hello for member in members if member.live}
        asked = (self._hello or {}).get("protocolVersion")
        versions = sorted(str(a.get("protocolVersion")) for a in answers.values() if a.get("protocolVersion"))
        result: dict[str, Any] = {
            "protocolVersion": versions[0] if versions else asked or "2025-06-18",
            "capabilities": _merged_capabilities(answers.values()),
            "serverInfo": self._server_info,
        }
        instructions = [f"[{name}] {a['instructions']}" for name, a in answers.items() if a.get("instructions")]
        if instructions:
            result["instructions"] = "\n\n".join(instructions)
        stream.append(_result(message, result), final=True)

    async def _discover(self, message: Message, stream: Stream) -> None:
        params = message.params if isinstance(message.params, dict) else {}
        answers = await self._gather("server/discover", params)
        versions = sorted({v for a in answers.values() for v in a.get("supportedVersions", []) if isinstance(v, str)})
        result = {
            "supportedVersions": versions or ["2026-07-28"],
            "capabilities": _merged_capabilities(answers.values()),
            "cacheScope": "private",
            "ttlMs": 0,
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": self._server_info},
        }
        stream.append(_result(message, result), final=True)

    async def _broadcast(self, message: Message, line: bytes, stream: Stream) -> None:
        """A request every member takes (``logging/setLevel``, a 2026-07-28 listen): their related lines go to
        the client; the answer is the last member's."""
        members = [m for m in self._members.values() if await self._ready(m)]
        if not members:
            stream.append(_result(message, {}), final=True)
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
            member.channel.submit(message, line, _Relay(self, member.name, stream, message.method, done))

    # ---- the end ------------------------------------------------------------------------------------------

    async def close(self, reason: str = "stopped at shutdown") -> None:
        """Close every member (each lets its requests in flight finish, bounded)."""
        if self.closed.is_set():
            return
        self.closed.set()
        self.exit_status = reason
        if self._worker is not None:
            self._worker.cancel()
        channels = [m.channel for m in self._members.values() if m.channel is not None]
        await asyncio.gather(*(channel.close(reason) for channel in channels), *self._closing, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()


class AskFailed(UpstreamError):
    """A request of the gateway's own got an error (``code``: the JSON-RPC code, None for no answer at all)."""

    def __init__(self, method: str, code: Any, text: str) -> None:
        self.code = code
        super().__init__(f"{method}: {text}")


async def ask(channel: Channel, method: str, params: Mapping[str, Any], ident: str) -> dict[str, Any]:
    """Send one request of the gateway's own to ``channel``'s upstream and return its result.

    Raises:
        AskFailed: it answered with an error (or the gateway did for it: unreachable, exited).
        TimeoutError: it did not answer within ``ASK_TIMEOUT``.
    """
    line = encode({"jsonrpc": "2.0", "id": ident, "method": method, "params": dict(params)})
    stream = Stream(f"ask.{ident}", StreamKind.REQUEST, method)
    channel.submit(classify(line), line, stream)
    async with asyncio.timeout(ASK_TIMEOUT):
        await stream.wait_beyond(0)
        while not stream.finished:
            await stream.wait_beyond(stream.end)
    body = stream.answer
    if body is None and stream.lines:
        with contextlib.suppress(WireParseError):
            body = classify(stream.lines[-1]).body
    if not isinstance(body, dict) or not isinstance(body.get("result"), dict):
        error = body.get("error") if isinstance(body, dict) else None
        text = error.get("message") if isinstance(error, dict) else "no answer"
        raise AskFailed(method, error.get("code") if isinstance(error, dict) else None, str(text))
    result: dict[str, Any] = body["result"]
    return result


async def _guarded(work: Awaitable[None]) -> None:
    try:
        await work
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("internal error in the federation")


def _envelope(message: Message) -> dict[str, Any]:
    """The request's ``_meta`` (a 2026-07-28 request's version, client info and capabilities), for the requests
    the federation sends its members on its behalf."""
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    return {"_meta": meta} if isinstance(meta, dict) else {}


def _modern(message: Message) -> bool:
    """A 2026-07-28 request (its ``_meta`` names its protocol version)."""
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    return isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta


def _ref_kind(message: Message) -> str | None:
    params = message.params if isinstance(message.params, dict) else {}
    ref = params.get("ref")
    kind = ref.get("type") if isinstance(ref, dict) else None
    return kind if isinstance(kind, str) else None


def _result(message: Message, result: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": "2.0", "id": message.id, "result": result})


def _error(message: Message, code: int, text: str, data: dict[str, Any] | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": text}
    if data is not None:
        error["data"] = data
    return encode({"jsonrpc": "2.0", "id": message.id, "error": error})


def _merged_capabilities(answers: Any) -> dict[str, Any]:
    """The union of the members' capabilities (a flag is on when any member has it); tools always, and their list
    may change (upstreams come and go)."""
    merged: dict[str, Any] = {"tools": {"listChanged": True}}
    for answer in answers:
        capabilities = answer.get("capabilities")
        if not isinstance(capabilities, dict):
            continue
        for name, value in capabilities.items():
            if isinstance(value, dict):
                target = merged.setdefault(name, {})
                if isinstance(target, dict):
                    for key, flag in value.items():
                        target[key] = (target.get(key) is True) or flag if isinstance(flag, bool) else flag
            else:
                merged.setdefault(name, value)
    merged["tools"]["listChanged"] = True
    return merged
