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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from checkpoint_mcp.errors import JournalError
from checkpoint_mcp.gateway.channel import Channel, CommitSignal
from checkpoint_mcp.gateway.config import GatewayConfig
from checkpoint_mcp.gateway.metrics import GatewayMetrics
from checkpoint_mcp.gateway.streams import Stream, StreamKind
from checkpoint_mcp.intercept.decision.workflow import Workflow
from checkpoint_mcp.intercept.traced import traced
from checkpoint_mcp.journal.base import Journal, Ownership
from checkpoint_mcp.journal.committer import Committer
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.journal.replicas import ReplicaPresence
from checkpoint_mcp.telemetry import OFF, Telemetry, peer
from checkpoint_mcp.upstream.base import Upstream

logger = logging.getLogger(__name__)

REAP_EVERY_SECONDS = 1.0
KEPT_STREAMS = 64  # finished request streams a session keeps for Last-Event-ID resumption

UpstreamFactory = Callable[[], Awaitable[Upstream]]


class _Workflow(NamedTuple):
    ownership: Ownership | None  # None for replicas: the reservation in the database is what excludes a double run
    calls: Workflow


class Session:
    """One downstream session of the session era: its channel and its streams."""

    def __init__(self, session_id: str, workflow: str, channel: Channel) -> None:
        self.id = session_id
        self.workflow = workflow
        self.channel = channel
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
        upstream_factory: UpstreamFactory,
        metrics: GatewayMetrics,
        telemetry: Telemetry = OFF,
    ) -> None:
        self.config = config
        self.telemetry = telemetry
        self.journal = journal
        self.metrics = metrics
        self._new_upstream = upstream_factory
        self._workflows: dict[str, _Workflow] = {}
        self._commits = CommitSignal()
        self._committer = Committer(journal) if journal is not None else None
        """Commits the channels' journal writes that must not hold the event loop (PostgreSQL's always; SQLite's
        when another connection holds its write lock) on a thread of its own."""
        self.sessions: dict[str, Session] = {}
        self.channels: dict[str, Channel] = {}  # 2026-07-28: workflow -> channel
        self._opening: dict[str, asyncio.Lock] = {}
        self.draining = False
        self.fatal: str | None = None
        self.upstream_error: str | None = None
        """Why the last upstream could not be started, until one starts again."""
        self.stopped = asyncio.Event()
        """Set when the gateway must stop on its own (the journal is gone for good)."""
        self._reaper: asyncio.Task[None] | None = None
        self.presence: ReplicaPresence | None = None
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

    def _calls(self, workflow: str) -> Workflow | None:
        """The shared sequences and decisions of ``workflow``, owning it on first use.

        Raises:
            WorkflowOwned: another live process owns it.
            JournalError: the journal cannot be read.
        """
        if self.journal is None:
            return None
        known = self._workflows.get(workflow)
        if known is None:
            ownership = (
                None if self.presence is not None else self.journal.acquire(workflow, command="checkpoint serve")
            )
            try:
                lineage = self.journal.lineage(workflow)
                calls = Workflow(
                    self.journal,
                    lineage,
                    replay_from_start=self.config.proxy.replay_from_start,
                    join_timeout=self.config.join_timeout,
                )
            except BaseException:
                if ownership is not None:
                    ownership.release()
                raise
            known = self._workflows[workflow] = _Workflow(ownership, calls)
            logger.info("serving workflow %r (writing to %r)", workflow, lineage.head)
        return known.calls

    async def _open_channel(
        self, name: str, workflow: str, unrelated: Callable[[bytes], None] | None, *, session: bool
    ) -> Channel:
        """A channel to a new upstream for ``workflow``; ``session``: it carries one MCP session's requests (session
        era), else the requests of every client of the workflow (2026-07-28), which share no memory."""
        calls = self._calls(workflow)
        lineage = calls.lineage if calls is not None else None
        proxy = self.config.proxy
        url = proxy.remote.url if proxy.remote is not None else None
        trace = self.telemetry.session(
            peer("tcp", url), journaled=self.journal is not None, redact_args=proxy.redact_args
        )
        interceptor = traced(trace, proxy, self.journal, lineage, workflow=calls, session=session)
        try:
            upstream = await self._new_upstream()
        except Exception as exc:
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
            observe=self._observe,
            flushed=self.metrics.journal_latency.observe,
            health=self._upstream_health,
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

    def _observe(self, stream: Stream, body: Any) -> None:
        if stream.method == "tools/call":
            self.metrics.observe_call(body)

    # ---- session era --------------------------------------------------------------------------------------

    async def open_session(self, workflow: str) -> Session:
        """A new session with its own upstream.

        Raises:
            WorkflowOwned, JournalError: the workflow cannot be journaled here.
            UpstreamError, OSError: the upstream cannot be started.
        """
        session_id = secrets.token_hex(16)
        holder: list[Session] = []

        def unrelated(line: bytes) -> None:
            if holder:
                holder[0].standalone.append(line)

        channel = await self._open_channel(f"session {session_id[:8]}", workflow, unrelated, session=True)
        session = Session(session_id, workflow, channel)
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

    async def workflow_channel(self, workflow: str) -> Channel:
        """The channel of ``workflow``, opened (with its upstream) if it has none.

        Raises:
            WorkflowOwned, JournalError: the workflow cannot be journaled here.
            UpstreamError, OSError: the upstream cannot be started.
        """
        channel = self.channels.get(workflow)
        if channel is not None and not channel.closed.is_set():
            return channel
        lock = self._opening.setdefault(workflow, asyncio.Lock())
        async with lock:
            channel = self.channels.get(workflow)
            if channel is None or channel.closed.is_set():
                channel = await self._open_channel(f"workflow {workflow!r}", workflow, None, session=False)
                self.channels[workflow] = channel
        return channel

    # ---- upkeep -------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Become a replica (on PostgreSQL), and begin closing idle sessions and channels.

        Raises:
            JournalUnavailable: the replica cannot register.
        """
        loop = asyncio.get_running_loop()
        if self.journal is not None and hasattr(self.journal, "register_replica"):
            notify = self._commits.notify
            self.presence = self.journal.register_replica(lambda: loop.call_soon_threadsafe(notify))
            logger.info("replica %s of the journal %s", self.journal.replica_id, self.journal.location)
        if self._committer is not None:
            try:
                self._committer.start()
            except JournalError as exc:  # the channels then commit on the event loop, as they can
                logger.warning("%s; committing on the event loop", exc)
        self._reaper = loop.create_task(self._reap())

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
            for workflow, channel in list(self.channels.items()):
                if channel.closed.is_set():
                    self.channels.pop(workflow, None)
                elif not channel.busy and now - channel.last_active > self.config.idle_timeout:
                    self.channels.pop(workflow, None)
                    logger.info("closing the upstream of workflow %r: idle timeout", workflow)
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
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
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
        return float(sum(1 for channel in channels if not channel.closed.is_set()))

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

    def health(self) -> tuple[bool, dict[str, str]]:
        """Ready? With what each dependency says."""
        report: dict[str, str] = {}
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
        if self.upstream_error is not None:
            ok = False
            report["upstream"] = self.upstream_error
        else:
            report["upstream"] = f"ok ({int(self._running_upstreams())} running)"
        return ok, report
