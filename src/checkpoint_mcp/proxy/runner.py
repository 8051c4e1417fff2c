"""Run one proxy process: open the journal, protect stdout, start the relay, return the exit code."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from contextlib import ExitStack

from checkpoint_mcp.journal import Journal, default_workflow_id, open_journal
from checkpoint_mcp.proxy.config import ProxyConfig
from checkpoint_mcp.proxy.interceptor import Interceptor
from checkpoint_mcp.proxy.relay import Relay

logger = logging.getLogger(__name__)


def _wire_streams(stack: ExitStack) -> tuple[object, object]:
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
        JournalError: the journal cannot be opened (before the upstream is started).
    """
    journal: Journal | None = None
    workflow: str | None = None
    if config.journal is not None:
        journal = open_journal(config.journal)
        workflow = config.workflow_id or default_workflow_id(config.journal)
        logger.info("journal %s, workflow %r", journal.location, workflow)
    elif config.workflow_id is not None:
        logger.warning("--workflow-id has no effect without --journal")
    with ExitStack() as stack:
        if journal is not None:
            stack.callback(journal.close)
        interceptor = Interceptor(config, journal, workflow)
        client_in, client_out = _wire_streams(stack)
        relay = Relay(config.upstream_cmd, interceptor, client_in, client_out)  # type: ignore[arg-type]
        return asyncio.run(relay.run())
