"""On `checkpoint serve`, a request that is not journaled never waits for a commit of its own workflow.

Another connection holds the SQLite journal's write lock, so the gateway's commit waits on its committer thread:
a ping and a tools/list of the same workflow (the same upstream, the same interceptor) are answered meanwhile,
while the journaled call stays unsent until its PENDING row is durable, and its answer stays with the gateway
until its COMPLETED row is.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

from checkpoint_mcp.journal.records import CallState
from gatewayproc import MODERN, Reply, effects_gateway, modern_call, request

from support import DEFAULT_TIMEOUT, done_count, journal_states, read_effects, wait_until, write_lock

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
PASSES_WITHIN = 3.0  # seconds; a request waiting behind the held commit would wait for SQLite's 5 s busy timeout


def plain(port: int, ident: int, method: str) -> Any:
    """The result of a request that is not journaled, on workflow ``a``."""
    body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": {"_meta": META}}
    reply = request(port, "POST", "/w/a/mcp", body, MODERN, PASSES_WITHIN)
    assert reply.status == 200, reply.body
    return reply.message()["result"]


def received(port: int) -> int:
    """MCP requests of 2026-07-28 the gateway has received (its ``/metrics``)."""
    for text in request(port, "GET", "/metrics").body.decode().splitlines():
        if text.startswith('checkpoint_http_requests_total{era="2026"}'):
            return int(float(text.split()[-1]))
    return 0


def test_a_ping_and_a_tools_list_pass_a_held_commit_of_their_workflow(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    gate = tmp_path / "gate"
    with effects_gateway(tmp_path, "--journal", journal) as gateway, concurrent.futures.ThreadPoolExecutor(1) as pool:
        port = gateway.port
        first = request(port, "POST", "/w/a/mcp", modern_call(1, "send_email", {"to": "ann"}), MODERN)
        assert "result" in first.message(), first.body
        with write_lock(journal):
            call = modern_call(2, "send_email", {"to": "bob"})
            waiting: concurrent.futures.Future[Reply] = pool.submit(
                request, port, "POST", "/w/a/mcp", call, MODERN, DEFAULT_TIMEOUT
            )
            wait_until(lambda: received(port) == 2, what="the gateway to receive the call")
            assert plain(port, 3, "ping") == {}
            assert "tools" in plain(port, 5, "tools/list")
            # The call's PENDING row is not durable: the upstream has not seen it.
            assert done_count(effects) == 1
            assert not waiting.done()
        answer = waiting.result(timeout=DEFAULT_TIMEOUT)
        assert "result" in answer.message(), answer.body
        assert done_count(effects) == 2
        gated = pool.submit(
            request, port, "POST", "/w/a/mcp", modern_call(6, "gate", {"path": str(gate)}), MODERN, DEFAULT_TIMEOUT
        )
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the gated call")
        with write_lock(journal):
            gate.touch()
            wait_until(lambda: any(e["event"] == "answered" for e in read_effects(effects)), what="its answer")
            # The upstream answered the call before this ping: the gateway holds that answer, not this one.
            assert "tools" in plain(port, 7, "tools/list")
            assert not gated.done()
            assert journal_states(journal, "a")[3] is CallState.PENDING
        reply = gated.result(timeout=DEFAULT_TIMEOUT)
        assert reply.message()["result"]["content"][0]["text"] == "gate passed"
    assert journal_states(journal, "a") == {1: CallState.COMPLETED, 2: CallState.COMPLETED, 3: CallState.COMPLETED}
