"""What a gateway process holds: its sessions (session era), its workflow channels (2026-07-28), its workflows.

* Session era (2025-03-26 … 2025-11-25): an ``initialize`` without ``Mcp-Session-Id`` opens a session with its
  own upstream and interceptor; later requests name it by its ``Mcp-Session-Id``; DELETE or ``--idle-timeout``
  closes it (and its upstream).
* 2026-07-28 (stateless): one upstream and interceptor per workflow, shared by every request bound for it,
  opened at its first request and closed after ``--idle-timeout`` without one.
* Workflows: on SQLite, each one this process journals is owned by it (``Journal.acquire``, as a stdio proxy would
  own it) from its first use to shutdown. On PostgreSQL the process is a replica (``journal.replicas``): several
  gateways serve one workflow at once, and the reservation of a call in the database (its sequence and key are
  unique per workflow) is what keeps two of them from running it. Either way all the interceptors of a workflow
  share one ``Workflow``, so calls of several sessions take distinct sequences and see each other in flight.
* Principals (``--issuer``): each workflow a principal asks for is journaled under an id of its own
  (``principals.journal_workflow``), recorded in the journal as that principal's before its first call; a session
  answers only to the principal that opened it.
* Federation (``--upstreams``): each session or workflow channel is a ``Federation`` of one ``Channel`` per
  upstream, each journaling ``<workflow>/<upstream>`` under that upstream's policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from checkpoint_mcp.errors import JournalError
from checkpoint_mcp.gateway.backend import Backend
from checkpoint_mcp.gateway.channel import Channel, CommitSignal
from checkpoint_mcp.gateway.config import GatewayConfig
from checkpoint_mcp.gateway.federation import Federation, FederationHealth, ask
from checkpoint_mcp.gateway.metrics import GatewayMetrics
from checkpoint_mcp.gateway.principals import journal_workflow
from checkpoint_mcp.gateway.streams import Stream, StreamKind
from checkpoint_mcp.gateway.upstreams_file import prefixed
from checkpoint_mcp.intercept.interceptor import Interceptor
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.intercept.traced import traced
from checkpoint_mcp.intercept.workflow import Workflow
from checkpoint_mcp.journal import is_postgres_url
from checkpoint_mcp.journal.base import Journal, Ownership, Presence
from checkpoint_mcp.journal.committer import Committer
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.telemetry import OFF, Telemetry, peer
from checkpoint_mcp.upstream.base import Upstream
from checkpoint_mcp.wire import Message, classify, encode

logger = logging.getLogger(__name__)

REAP_EVERY_SECONDS = 1.0
KEPT_STREAMS = 64  # finished request streams a session keeps for Last-Event-ID resumption

UpstreamFactory = Callable[[], Awaitable[Upstream]]
SINGLE = ""
"""The key of the one upstream of `--upstream-cmd` / `--upstream-url` among the gateway's upstream factories."""
PROBE_EVERY_SECONDS = 2.0  # how often an upstream of the file that is left out is tried again (``/healthz``)


class _Workflow(NamedTuple):
    ownership: Ownership | None  # None for replicas: the reservation in the database is what excludes a double run
    calls: Workflow


def _called_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """Call ``callback`` on ``loop``, from another thread."""
    loop.call_soon_threadsafe(callback)


class Session:
    """One downstream session of the session era: its channel (a federation of them, behind ``--upstreams``) and
    its streams."""

    def __init__(self, session_id: str, workflow: str, channel: Backend, principal: str | None = None) -> None:
        self.id = session_id
        self.workflow = workflow
        self.channel = channel
        self.principal = principal
        """Who opened it (with an identity provider): no one else's request reaches it."""
        self.standalone = Stream(f"{session_id}.get", StreamKind.STANDALONE)
        self.standalone_sent = 0  # lines of the standalone stream already given to a GET
        self.streams: dict[str, Stream] = {self.standalone.id: self.standalone}
        self._counter = 0

    def new_stream(self, method: str | None) -> Stream:
        """A stream for one request of this session, kept for resumption."""
        self._counter += 1
        stream = Stream(f"{self.id}.{self._counter}", StreamKind.REQUEST, method)
        self.streams[stream.id] = stream
        finished = [s for s in self.streams.values() if s.finished and s.kind is StreamKind.REQUEST]
        for old in finished[: max(0, len(finished) - KEPT_STREAMS)]:
            del self.streams[old.id]
        return stream

    @property
    def active(self) -> bool:
        """True while a request waits or a GET stream is attached."""
        return self.channel.busy or self.standalone.attached > 0


class Gateway:
    """Sessions, workflow channels and owned workflows of one `checkpoint serve` process."""

    def __init__(
        self,
        config: GatewayConfig,
        journal: Journal | None,
        upstream_factories: Mapping[str, UpstreamFactory],
        metrics: GatewayMetrics,
        telemetry: Telemetry = OFF,
    ) -> None:
        """``upstream_factories``: the one upstream under ``SINGLE``, or each upstream of ``--upstreams`` by name."""
        self.config = config
        self.telemetry = telemetry
        self.journal = journal
        self.metrics = metrics
        self._factories = dict(upstream_factories)
        self._specs = {spec.name: spec for spec in config.upstreams}
        self.federation_health = FederationHealth(tuple(self._specs)) if self._specs else None
        """Each upstream of ``--upstreams``: None while it answers, else why not (``/healthz``)."""
        self._probing: asyncio.Task[None] | None = None
        self._workflows: dict[tuple[str | None, str, str], _Workflow] = {}
        """By (principal, workflow asked for, upstream), never by the id made of them: whose it is is in the key."""
        self._commits = CommitSignal()
        self._committer = Committer(journal) if journal is not None else None
        """Commits the channels' journal writes that must not hold the event loop (PostgreSQL's always; SQLite's
        when another connection holds its write lock) on a thread of its own."""
        self.sessions: dict[str, Session] = {}
        self.channels: dict[tuple[str | None, str], Backend] = {}
        """2026-07-28: each (principal, workflow asked for)'s channel."""
        self._opening: dict[tuple[str | None, str], asyncio.Lock] = {}
        self.draining = False
        self.fatal: str | None = None
        self.upstream_error: str | None = None
        """Why the last upstream could not be started, until one starts again."""
        self.stopped = asyncio.Event()
        """Set when the gateway must stop on its own (the journal is gone for good)."""
        self._reaper: asyncio.Task[None] | None = None
        self.presence: Presence | None = None
        """This process as a replica on a PostgreSQL journal (several gateways serve one workflow at once)."""
        metrics.bind(self._in_doubt, lambda: len(self.sessions), self._running_upstreams)

    # ---- workflows ----------------------------------------------------------------------------------------

    def default_workflow(self) -> str:
        """The workflow of `/mcp`: ``--workflow-id``, else the journal's default, else ``default``."""
        if self.config.proxy.workflow_id is not None:
            return self.config.proxy.workflow_id
        if self.config.proxy.journal is not None:
            from checkpoint_mcp.journal import default_workflow_id

            return default_workflow_id(self.config.proxy.journal)
        return "default"

    def _proxy(self, upstream: str) -> ProxyConfig:
        """The interceptor's settings for ``upstream``: the command line's, or (``--upstreams``) its table's."""
        spec = self._specs.get(upstream)
        if spec is None:
            return self.config.proxy
        return self.config.proxy._replace(
            upstream_cmd=spec.command, remote=spec.remote, policy=spec.policy, tool_prefix=prefixed(upstream, "")
        )

    def _calls(
        self, workflow: str, principal: str | None, requested: str, upstream: str, proxy: ProxyConfig
    ) -> Workflow | None:
        """The shared sequences and decisions of ``workflow``, owning it on first use (and recording it as
        ``principal``'s, asked for as ``requested``, if there are principals).

        Raises:
            WorkflowOwned: another live process owns it.
            WorkflowOfAnother: the journal records it as another principal's.
            JournalError: the journal cannot be read.
        """
        if self.journal is None:
            return None
        key = (principal, requested, upstream)
        known = self._workflows.get(key)
        if known is None:
            if principal is not None:
                self.journal.claim_workflow(workflow, principal, requested, upstream or None)
            ownership = (
                None if self.presence is not None else self.journal.acquire(workflow, command="checkpoint serve")
            )
            try:
                lineage = self.journal.lineage(workflow)
                calls = Workflow(
                    self.journal,
                    lineage,
                    replay_from_start=proxy.replay_from_start,
                    join_timeout=self.config.join_timeout,
                    principal=principal,
                )
            except BaseException:
                if ownership is not None:
                    ownership.release()
                raise
            known = self._workflows[key] = _Workflow(ownership, calls)
            logger.info("serving workflow %r (writing to %r)", workflow, lineage.head)
        return known.calls

    async def _open_channel(
        self,
        name: str,
        requested: str,
        principal: str | None,
        unrelated: Callable[[bytes], None] | None,
        upstream_name: str = SINGLE,
        *,
        session: bool = True,
    ) -> Channel:
        """A channel to a new upstream for ``principal``'s ``requested`` workflow; ``session``: it carries one MCP
        session's requests (session era), else the requests of every client of the workflow (2026-07-28), which
        share no memory of what they were answered."""
        proxy = self._proxy(upstream_name)
        workflow = journal_workflow(principal, requested, upstream_name or None)
        calls = self._calls(workflow, principal, requested, upstream_name, proxy)
        lineage = calls.lineage if calls is not None else None
        url = proxy.remote.url if proxy.remote is not None else None
        trace = self.telemetry.session(
            peer("tcp", url)._replace(principal=principal),
            journaled=self.journal is not None,
            redact_args=proxy.redact_args,
        )
        interceptor = traced(trace, proxy, self.journal, lineage, workflow=calls, session=session)
        try:
            upstream = await self._factories[upstream_name]()
        except Exception as exc:
            if upstream_name == SINGLE:
                self.upstream_error = str(exc)
            raise
        if url is not None:
            from checkpoint_mcp.upstream.http.remote import RemoteUpstream

            if isinstance(upstream, RemoteUpstream):
                upstream.request_headers = interceptor.upstream_headers
        channel = Channel(
            name,
            interceptor,
            upstream,
            unrelated=unrelated,
            observe=lambda stream, body: self._observe(stream, body, principal),
            flushed=self.metrics.journal_latency.observe,
            health=self._upstream_health if upstream_name == SINGLE else None,
            commits=self._commits,
            join_timeout=self.config.join_timeout,
            committer=self._committer,
        )
        await channel.start()
        return channel

    def _upstream_health(self, error: str | None) -> None:
        if error is not None:
            logger.error("%s", error)
        self.upstream_error = error

    def _observe(self, stream: Stream, body: Any, principal: str | None) -> None:
        if stream.method == "tools/call":
            self.metrics.observe_call(body, principal)

    # ---- session era --------------------------------------------------------------------------------------

    def _federation(
        self,
        name: str,
        requested: str,
        principal: str | None,
        unrelated: Callable[[bytes], None] | None,
        *,
        session: bool,
    ) -> Federation:
        holder: list[Federation] = []

        async def opener(upstream: str) -> Channel:
            member = holder[0].member_unrelated(upstream)
            return await self._open_channel(
                f"{name} ({upstream})", requested, principal, member, upstream, session=session
            )

        federation = Federation(
            name,
            tuple(self._specs),
            opener,
            self._health(),
            server_name=self.config.proxy.server_name,
            server_version=self.config.proxy.server_version,
            unrelated=unrelated,
        )
        holder.append(federation)
        return federation

    def _health(self) -> FederationHealth:
        assert self.federation_health is not None
        return self.federation_health

    async def open_session(self, workflow: str, principal: str | None = None) -> Session:
        """A new session of ``principal`` (None: no identity provider) with its own upstream (or upstreams).

        Raises:
            WorkflowOwned, WorkflowOfAnother, JournalError: the workflow cannot be journaled here.
            UpstreamError, OSError: the upstream cannot be started.
        """
        session_id = secrets.token_hex(16)
        holder: list[Session] = []

        def unrelated(line: bytes) -> None:
            if holder:
                holder[0].standalone.append(line)

        name = f"session {session_id[:8]}"
        channel: Backend
        if self._specs:
            channel = self._federation(name, workflow, principal, unrelated, session=True)
            await channel.start(eager=False)  # its members start at the client's initialize, with its hello
        else:
            channel = await self._open_channel(name, workflow, principal, unrelated)
        session = Session(session_id, workflow, channel, principal)
        holder.append(session)
        self.sessions[session_id] = session
        logger.info("session %s opened on workflow %r", session_id[:8], workflow)
        return session

    async def close_session(self, session_id: str, reason: str) -> bool:
        """Close a session and its upstream; False if there is no such session."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        logger.info("closing session %s: %s", session_id[:8], reason)
        session.standalone.finish()
        await session.channel.close(reason)
        return True

    # ---- 2026-07-28 ---------------------------------------------------------------------------------------

    def session_of(self, session_id: str, principal: str | None) -> Session | None:
        """The open session ``session_id`` if it is ``principal``'s (another's is as unknown as a closed one)."""
        session = self.sessions.get(session_id)
        if session is None or session.channel.closed.is_set() or session.principal != principal:
            return None
        return session

    async def workflow_channel(self, workflow: str, principal: str | None = None) -> Backend:
        """The channel of ``principal``'s ``workflow``, opened (with its upstream, or upstreams) if it has none.

        Raises:
            WorkflowOwned, WorkflowOfAnother, JournalError: the workflow cannot be journaled here.
            UpstreamError, OSError: the upstream cannot be started.
        """
        key = (principal, workflow)
        channel = self.channels.get(key)
        if channel is not None and not channel.closed.is_set():
            return channel
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            channel = self.channels.get(key)
            if channel is None or channel.closed.is_set():
                name = f"workflow {journal_workflow(principal, workflow, None)!r}"
                if self._specs:
                    federation = self._federation(name, workflow, principal, None, session=False)
                    await federation.start(eager=True)
                    channel = federation
                else:
                    channel = await self._open_channel(name, workflow, principal, None, session=False)
                self.channels[key] = channel
        return channel

    # ---- upkeep -------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Become a replica (on PostgreSQL), and begin closing idle sessions and channels.

        Raises:
            JournalUnavailable: the replica cannot register.
        """
        loop = asyncio.get_running_loop()
        if self.journal is not None and is_postgres_url(self.journal.location):
            notify = self._commits.notify
            self.presence = self.journal.register_replica(lambda: _called_soon(loop, notify))
            logger.info("replica %s of the journal %s", self.journal.replica_id, self.journal.location)
        if self._committer is not None:
            try:
                self._committer.start()
            except JournalError as exc:  # the channels then commit on the event loop, as they can
                logger.warning("%s; committing on the event loop", exc)
        self._reaper = loop.create_task(self._reap())
        if self.federation_health is not None:
            self._probing = loop.create_task(self._probe_left_out())

    async def probe(self, upstream: str) -> dict[str, Any]:
        """Start ``upstream`` of the file alone (no journal), ask its tools, prompts and resource templates, and
        end it: what it lists, by list (``--upstreams`` checks names at start and tries left-out upstreams again).

        Raises:
            Exception: it cannot be started or does not answer.
        """
        proxy = self._proxy(upstream)._replace(journal=None, policy=None)
        channel = Channel(f"probe ({upstream})", Interceptor(proxy, None, None), await self._factories[upstream]())
        await channel.start()
        try:
            hello = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "checkpoint", "version": "0"},
            }
            answer = await ask(channel, "initialize", hello, "checkpoint-probe-0")
            channel.submit(*_notice("notifications/initialized"), None)
            found = answer.get("capabilities")
            capabilities: dict[str, Any] = found if isinstance(found, dict) else {}
            listed: dict[str, Any] = {}
            for method, field, capability in _PROBED:
                if capability in capabilities:
                    listed[field] = (await ask(channel, method, {}, f"checkpoint-probe-{field}")).get(field, [])
            return listed
        finally:
            await channel.close("probe done")

    async def _probe_left_out(self) -> None:
        """Try each upstream of the file that is left out again, every few seconds, so ``/healthz`` and the next
        request see it back as soon as it answers."""
        health = self._health()
        while True:
            await asyncio.sleep(PROBE_EVERY_SECONDS)
            for name, why in list(health.status.items()):
                if why is None or self.draining:
                    continue
                try:
                    async with asyncio.timeout(PROBE_EVERY_SECONDS * 5):
                        await self.probe(name)
                except Exception as exc:
                    logger.debug("upstream %s still left out: %s", name, exc)
                else:
                    health.up(name)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(REAP_EVERY_SECONDS, self.config.idle_timeout / 4))
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if session.channel.closed.is_set():
                    self.sessions.pop(session.id, None)
                    session.standalone.finish()
                elif not session.active and now - session.channel.last_active > self.config.idle_timeout:
                    await self.close_session(session.id, "idle timeout")
            for key, channel in list(self.channels.items()):
                if channel.closed.is_set():
                    self.channels.pop(key, None)
                elif not channel.busy and now - channel.last_active > self.config.idle_timeout:
                    self.channels.pop(key, None)
                    logger.info("closing the upstream of %s: idle timeout", channel.name)
                    await channel.close("idle timeout")
            self._check_fatal()

    def _check_fatal(self) -> None:
        for channel in [*self.channels.values(), *(s.channel for s in self.sessions.values())]:
            if channel.fatal is not None and self.fatal is None:
                self.fatal = channel.fatal
                logger.error("stopping: %s", self.fatal)
                self.stopped.set()

    def end_long_streams(self) -> None:
        """Shutdown began: end the GET and listen streams, so that only requests in flight hold connections."""
        self.draining = True
        for session in self.sessions.values():
            session.standalone.finish()

    async def shutdown(self) -> None:
        """Let calls in flight finish and be journaled (bounded), close every upstream, release workflows."""
        self.end_long_streams()
        for task in (self._reaper, self._probing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        channels = [*(s.channel for s in self.sessions.values()), *self.channels.values()]
        self.sessions.clear()
        self.channels.clear()
        await asyncio.gather(*(channel.close() for channel in channels), return_exceptions=True)
        if self._committer is not None:
            await self._committer.close()  # every channel's last commit has ended (``Channel.close`` waits for it)
        for workflow in self._workflows.values():
            if workflow.ownership is not None:
                with contextlib.suppress(JournalError):
                    workflow.ownership.release()
        self._workflows.clear()
        if self.presence is not None:
            self.presence.close()

    # ---- health -------------------------------------------------------------------------------------------

    def _running_upstreams(self) -> float:
        channels = [*(s.channel for s in self.sessions.values()), *self.channels.values()]
        return float(sum(channel.running() for channel in channels))

    def _in_doubt(self) -> float:
        if self.journal is None:
            return 0.0
        try:
            pending = sum(s.counts.get(CallState.PENDING, 0) for s in self.journal.workflows())
        except JournalError:
            return float("nan")
        return float(max(0, pending - self._in_flight()))

    def _in_flight(self) -> int:
        channels = [*(s.channel for s in self.sessions.values()), *self.channels.values()]
        return sum(channel.calls_in_flight() for channel in channels)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Ready? With what each dependency says."""
        report: dict[str, Any] = {}
        ok = not self.draining and self.fatal is None
        if self.draining:
            report["gateway"] = "shutting down"
        if self.fatal is not None:
            report["gateway"] = f"stopping: {self.fatal}"
        if self.journal is None:
            report["journal"] = "none (pass-through)"
        else:
            try:
                self.journal.root_of("")
                report["journal"] = "ok"
            except JournalError as exc:
                ok = False
                report["journal"] = str(exc)
        if self.presence is not None:
            report["replica"] = self.presence.replica_id
            if not self.presence.alive:
                ok = False
                report["liveness"] = f"lost: {self.presence.lost_reason}"
        if self.federation_health is not None:
            status = self.federation_health.status
            report["upstreams"] = {name: "ok" if why is None else f"left out: {why}" for name, why in status.items()}
            out = [name for name, why in status.items() if why is not None]
            if len(out) == len(status):
                ok = False  # no upstream answers: nothing can be served
            running = int(self._running_upstreams())
            report["upstream"] = f"degraded: {', '.join(out)} left out" if out else f"ok ({running} running)"
        elif self.upstream_error is not None:
            ok = False
            report["upstream"] = self.upstream_error
        else:
            report["upstream"] = f"ok ({int(self._running_upstreams())} running)"
        return ok, report


_PROBED = (
    ("tools/list", "tools", "tools"),
    ("prompts/list", "prompts", "prompts"),
    ("resources/templates/list", "resourceTemplates", "resources"),
)


def _notice(method: str) -> tuple[Message, bytes]:
    line = encode({"jsonrpc": "2.0", "method": method})
    return classify(line), line
