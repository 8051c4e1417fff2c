"""Crash safety over HTTP: SIGKILL the proxy at each named point while a remote server with counted side effects
runs the call; a fresh proxy replays what completed, reports what was in flight as in doubt, and nothing runs
twice. The guarantee, verbatim, holds for a remote upstream as for a local one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT

from httpservers import HttpServer, sdk_server
from support import ProxyProcess, done_count, journal_states, read_effects, wait_until


@pytest.fixture(params=["sse", "stateless-json"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HttpServer]:
    """The SDK test server, once with sessions and SSE streams, once stateless with JSON bodies."""
    flags = [] if request.param == "sse" else ["--stateless", "--json"]
    with sdk_server(tmp_path, *flags) as running:
        yield running


def remote_proxy(journal: str, server: HttpServer, trigger: str | None = None) -> ProxyProcess:
    env = {"CHECKPOINT_DEBUG_TRIGGER": trigger} if trigger else {}
    return ProxyProcess("--upstream-url", server.url, "--journal", journal, env=env)


def test_guarantee_holds_for_a_remote_upstream(journal: str, workflow: str, tmp_path: Path, server: HttpServer) -> None:
    effects = tmp_path / "effects.jsonl"
    script = [("send_email", {"to": f"user{i}@example.com", "subject": f"invoice {i}"}) for i in range(1, 4)]
    with remote_proxy(journal, server) as first:
        first.initialize()
        originals = [first.call(name, args, seq=seq)["result"] for seq, (name, args) in enumerate(script, 1)]
        first.send(
            {
                "jsonrpc": "2.0",
                "id": "step4",
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 30}, "_meta": {"checkpoint_seq": 4}},
            }
        )
        wait_until(lambda: any(e["tool"] == "slow" for e in read_effects(effects)), what="step 4 to start")
        first.kill()
    assert done_count(effects, "send_email") == 3
    assert journal_states(journal, workflow) == {
        1: CallState.COMPLETED,
        2: CallState.COMPLETED,
        3: CallState.COMPLETED,
        4: CallState.PENDING,
    }

    with remote_proxy(journal, server) as second:
        second.initialize()
        replays = [second.call(name, args, seq=seq)["result"] for seq, (name, args) in enumerate(script, 1)]
        in_doubt = second.call("slow", {"seconds": 30}, seq=4)
        new = second.call("send_email", {"to": "new@example.com", "subject": "after"}, seq=5)
        assert second.close() == 0

    assert done_count(effects, "send_email") == 4
    for original, replay in zip(originals, replays, strict=True):
        assert replay["content"] == original["content"]
        assert replay["_meta"]["checkpoint/journal"]["replayed"] is True
    assert in_doubt["error"]["code"] == IN_DOUBT
    assert [e["event"] for e in read_effects(effects) if e["tool"] == "slow"] == ["started"]
    assert new["result"]["_meta"]["checkpoint/journal"] == {"workflow": workflow, "seq": 5, "replayed": False}


# point -> (row state after the crash, times the upstream may have run the call, what a replay answers)
CRASH_POINTS = {
    "after_pending_commit": (CallState.PENDING, {0}, "in_doubt"),
    "after_forward": (CallState.PENDING, {0, 1}, "in_doubt"),
    "after_upstream_reply": (CallState.PENDING, {1}, "in_doubt"),
    "after_complete_commit": (CallState.COMPLETED, {1}, "replay"),
}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_proxy_in_front_of_a_remote_server_killed_at_each_named_point_never_runs_the_call_twice(
    journal: str, workflow: str, tmp_path: Path, server: HttpServer, point: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    expected_state, possible_runs, replay_kind = CRASH_POINTS[point]
    args = {"to": "crash@example.com", "subject": point}
    with remote_proxy(journal, server, trigger=point) as doomed:
        doomed.initialize()
        doomed.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": args, "_meta": {"checkpoint_seq": 1}},
            }
        )
        assert doomed.wait() == -9
        with pytest.raises(AssertionError, match="closed its stdout"):
            doomed.recv_line(timeout=5)
    assert journal_states(journal, workflow) == {1: expected_state}
    runs = done_count(effects)
    assert runs in possible_runs

    with remote_proxy(journal, server) as fresh:
        fresh.initialize()
        reply = fresh.call("send_email", args, seq=1)
        fresh.close()
    # The replay never reached the server (after_forward: a POST that left just before the kill may still land).
    assert done_count(effects) == runs if point != "after_forward" else done_count(effects) in possible_runs
    if replay_kind == "replay":
        assert reply["result"]["content"][0]["text"] == "sent to crash@example.com"
        assert reply["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    else:
        assert reply["error"]["code"] == IN_DOUBT
