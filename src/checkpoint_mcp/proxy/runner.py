"""Run one proxy process: open the journal, claim the workflow (shared, or alone), protect stdout, start the relay."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from typing import IO

from checkpoint_mcp.client_process import client_of_this_process
from checkpoint_mcp.config import audit_key
from checkpoint_mcp.errors import UpstreamError
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.journal import default_workflow_id, is_postgres_url, open_journal
from checkpoint_mcp.journal.base import Journal, Lineage, Ownership
from checkpoint_mcp.platforms.commands import shell_name
from checkpoint_mcp.telemetry import from_environ, peer
from checkpoint_mcp.upstream.base import Upstream
from checkpoint_mcp.upstream.stdio.process import spawn

logger = logging.getLogger(__name__)


def _wire_streams(stack: ExitStack) -> tuple[IO[bytes], IO[bytes]]:
    """The client's stdin and a private copy of stdout; fd 1 then points at stderr.

    A stray print (ours or a library's) thus lands on stderr instead of corrupting the MCP wire.
    """
    sys.stdout.flush()
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    client_in = stack.enter_context(os.fdopen(0, "rb", buffering=0, closefd=False))
    client_out = stack.enter_context(os.fdopen(wire_fd, "wb", buffering=0))
    return client_in, client_out


def run_proxy(config: ProxyConfig) -> int:
    """Serve one client until it or the upstream leaves; the process exit code.

    Raises:
        JournalError: the journal cannot be opened, or another live proxy owns the workflow alone (or, with
            ``--replay-from-start``, others share it): both before the upstream is started.
    """
    with ExitStack() as stack:
        journal: Journal | None = None
        lineage: Lineage | None = None
        ownership: Ownership | None = None
        if config.journal is not None:
            journal = open_journal(config.journal, audit_key=audit_key(config.audit_key_env))
            stack.callback(journal.close)
            root = config.workflow_id or default_workflow_id(config.journal)
            ownership = _own(journal, root, stack, alone=config.replay_from_start)
            lineage = journal.lineage(root)
            how = "shared" if ownership.shared else "alone"
            logger.info("journal %s, workflow %r (%s; writing to %r)", journal.location, root, how, lineage.head)
        elif config.workflow_id is not None or config.replay_from_start or config.policy is not None:
            logger.warning("--workflow-id, --replay-from-start and --policy have no effect without --journal")
        upstream = _upstream(config)
        from checkpoint_mcp.intercept.traced import traced
        from checkpoint_mcp.intercept.workflow import Workflow
        from checkpoint_mcp.proxy.relay import Relay

        workflow = None
        if journal is not None and lineage is not None:
            workflow = Workflow(journal, lineage, replay_from_start=config.replay_from_start, ownership=ownership)

        # Imported only when the OTEL_* variables ask for it (after the child started: its start-up overlaps).
        tracer = from_environ(os.environ)
        stack.callback(tracer.shutdown)  # the spans of the last calls are exported before the process ends
        url = config.remote.url if config.remote is not None else None
        trace = tracer.session(peer("pipe", url), journaled=journal is not None, redact_args=config.redact_args)
        interceptor = traced(trace, config, journal, lineage, workflow, client=client_of_this_process())
        if config.remote is not None:
            from checkpoint_mcp.upstream.http.remote import RemoteUpstream

            assert isinstance(upstream, RemoteUpstream)
            upstream.request_headers = interceptor.upstream_headers
        client_in, client_out = _wire_streams(stack)
        committer = None
        if journal is not None and not is_postgres_url(journal.location):
            # A SQLite commit that would wait for another writer's lock goes to a thread. Not on PostgreSQL: there
            # the workflow's ownership lives in this connection, which takes it back when a write finds it dead;
            # writes on a second connection would go on past an ownership lost with the first.
            from checkpoint_mcp.journal.committer import Committer

            committer = Committer(journal)
        relay = Relay(upstream, interceptor, client_in, client_out, committer)
        with asyncio.Runner(loop_factory=_loop_factory(config)) as runner:
            return runner.run(relay.run())


def _own(journal: Journal, root: str, stack: ExitStack, *, alone: bool) -> Ownership:
    """This proxy's claim on the workflow ``root``, released with ``stack``: alone when it numbers its calls from
    the start (``--replay-from-start``), else shared with the other sessions of the project, as a replica of the
    journal whose calls are in flight while it lives (docs/sessions.md).

    Raises:
        JournalError: the journal cannot be locked, or another live proxy owns the workflow alone (or, ``alone``,
            others share it).
    """
    if alone:
        ownership = journal.acquire(root)
        stack.callback(ownership.release)
        return ownership
    presence = journal.register_replica()
    stack.callback(presence.close)
    ownership = journal.acquire(root, shared=True)
    stack.callback(ownership.release)
    return ownership


def _loop_factory(config: ProxyConfig) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop in front of a remote upstream, where installed: an HTTP exchange costs a third less CPU on it.

    A stdio upstream keeps asyncio's own loop: two pipes gain little from uvloop, and its start-up costs more.
    """
    if config.remote is None:
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _upstream(config: ProxyConfig) -> Upstream:
    """The upstream of ``config``: a child started now, or the remote server at its URL.

    Raises:
        UpstreamError: the child could not be started.
        UsageError: a remote upstream's settings cannot work (a header names an unset variable, a bad CA file).
    """
    if config.remote is not None:
        from checkpoint_mcp.upstream.http.settings import open_remote

        return open_remote(config.remote, os.environ)
    assert config.upstream_cmd is not None
    # Start the child now, before the event loop and the interceptor are imported: its own start-up overlaps
    # with ours.
    try:
        process = spawn(config.upstream_cmd)
    except OSError as exc:
        raise UpstreamError(f"cannot start the upstream with {shell_name()}: {exc}") from exc
    logger.info("upstream started (pid %d): %s", process.pid, config.upstream_cmd)
    from checkpoint_mcp.upstream.stdio.child import ChildUpstream

    return ChildUpstream(process)
