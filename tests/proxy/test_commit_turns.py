"""The stdio relay commits a journaled call in the loop turn that completes it, and still one commit per burst.

The relay runs in this process on a real event loop, over real pipes to the client (a thread of the test) and to
a real upstream child (the benchmarks' upstream, which answers all the lines of one read in one write), journaling to the test's journal (SQLite, or PostgreSQL under the
flip). The loop's selector counts its turns (each ``select`` is one), and the journal's commits are counted
where the relay makes them. A journaled call taken alone needs two turns, as a pass-through call does: the one
that reads the call (its PENDING row committed, then the call sent) and the one that reads its answer (its
COMPLETED row committed, then the answer written); committing one turn later took four. A burst of calls written
at once still shares its commits (group commit): never one per call.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import selectors
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.intercept.interceptor import Interceptor
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.journal import default_workflow_id, is_postgres_url, open_journal
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.journal.committer import Committer
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.proxy.relay import Relay
from checkpoint_mcp.upstream.stdio.child import ChildUpstream
from checkpoint_mcp.upstream.stdio.process import spawn

from support import journal_states

UPSTREAM = Path(__file__).resolve().parents[2] / "benchmarks" / "upstream_server.py"

CALLS = 20
BURST = 32
WAIT = 20.0  # seconds: the bound on every read of the client's side
ANSWER = {"content": [{"type": "text", "text": "ok"}], "isError": False}


class CountingSelector(selectors.DefaultSelector):
    """The loop's selector; each ``select`` is one turn of the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.turns = 0

    def select(self, timeout: float | None = None) -> Any:
        events = super().select(timeout)
        self.turns += 1
        return events


class Client:
    """The client's ends of the proxy's stdio pipes, used from a thread of the test with bounded reads."""

    def __init__(self, to_proxy: int, from_proxy: int) -> None:
        self._out = to_proxy
        self._in = from_proxy
        self._buffer = b""

    def send(self, *messages: dict[str, Any]) -> None:
        os.write(self._out, b"".join(json.dumps(message).encode() + b"\n" for message in messages))

    def recv(self) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("the proxy did not answer in time")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise EOFError("the proxy closed its stdout")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        os.close(self._out)


def call(ident: int) -> dict[str, Any]:
    params = {"name": "echo", "arguments": {"n": ident}}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def counted_commits(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record each transaction of ``journal`` (the batches it carries), on whichever thread the relay makes it."""
    commits: list[int] = []
    real, real_now = journal.write_batches, journal.write_now

    def counting(batches: Any) -> None:
        commits.append(len(batches))
        real(batches)

    def counting_now(batches: Any) -> bool:
        written = real_now(batches)
        if written:
            commits.append(len(batches))
        return written

    monkeypatch.setattr(journal, "write_batches", counting)
    monkeypatch.setattr(journal, "write_now", counting_now)
    return commits


@pytest.fixture
def proxy(journal: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run ``scenario(client, selector, commits)`` on a thread against a relay run on this thread's loop."""
    store = open_journal(journal)
    ownership = store.acquire(default_workflow_id(journal))
    commits = counted_commits(store, monkeypatch)

    def run(scenario: Callable[[Client, CountingSelector, list[int]], None]) -> None:
        config = ProxyConfig(upstream_cmd=shlex.join([sys.executable, str(UPSTREAM)]), journal=journal)
        interceptor = Interceptor(config, store, store.lineage(default_workflow_id(journal)))
        upstream = ChildUpstream(spawn(config.upstream_cmd or ""))
        client_reads, proxy_writes = os.pipe()
        proxy_reads, client_writes = os.pipe()
        committer = None if is_postgres_url(journal) else Committer(store)
        with open(proxy_reads, "rb", buffering=0) as client_in, open(proxy_writes, "wb", buffering=0) as client_out:
            relay = Relay(upstream, interceptor, client_in, client_out, committer)
            selector = CountingSelector()
            client = Client(client_writes, client_reads)
            failure: list[BaseException] = []

            def drive() -> None:
                try:
                    scenario(client, selector, commits)
                except BaseException as exc:  # reported on the test's thread
                    failure.append(exc)
                finally:
                    client.close()  # the relay sees EOF and shuts down

            thread = threading.Thread(target=drive)
            with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
                thread.start()
                assert runner.run(asyncio.wait_for(relay.run(), WAIT * 2)) == 0
            thread.join(WAIT)
            os.close(client_reads)
            if failure:
                raise failure[0]

    try:
        yield run
    finally:
        ownership.release()
        store.close()


def handshake(client: Client) -> None:
    client.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})
    assert "result" in client.recv()
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_a_journaled_call_alone_takes_two_loop_turns_and_two_commits(proxy: Any, journal: str) -> None:
    seen: dict[str, int] = {}

    def scenario(client: Client, selector: CountingSelector, commits: list[int]) -> None:
        handshake(client)
        client.send(call(0))  # warm-up: the first call reads the journal's sequence
        assert "result" in client.recv()
        turns, committed = selector.turns, len(commits)
        for ident in range(1, CALLS + 1):
            client.send(call(ident))
            answer = client.recv()
            assert (answer["id"], answer["result"]["content"]) == (ident, ANSWER["content"])
        # The relay's last turn (it wrote the last answer) may not have returned to ``select`` yet.
        seen["turns"], seen["commits"] = selector.turns - turns, len(commits) - committed

    proxy(scenario)
    # Two turns per call (the wait for the call, the wait for its answer), and the last one not yet counted.
    assert 2 * CALLS - 1 <= seen["turns"] <= 2 * CALLS + 1, seen
    assert seen["commits"] == 2 * CALLS  # its PENDING row, then its COMPLETED row, each durable on its own
    assert set(journal_states(journal, default_workflow_id(journal)).values()) == {CallState.COMPLETED}


def test_a_burst_of_calls_written_at_once_shares_its_commits(proxy: Any, journal: str) -> None:
    seen: dict[str, int] = {}

    def scenario(client: Client, selector: CountingSelector, commits: list[int]) -> None:
        handshake(client)
        client.send(call(0))
        assert "result" in client.recv()
        committed = len(commits)
        client.send(*(call(ident) for ident in range(1, BURST + 1)))
        answers = {client.recv()["id"] for _ in range(BURST)}
        assert answers == set(range(1, BURST + 1))
        seen["commits"] = len(commits) - committed

    proxy(scenario)
    # One commit holds the burst's PENDING rows, one its COMPLETED rows (the upstream writes its answers at once;
    # a pipe may cut a write in two, each part read and committed on its own): never one per call.
    assert 2 <= seen["commits"] <= 4, seen
    assert len(journal_states(journal, default_workflow_id(journal))) == BURST + 1
