"""Who may write a workflow (docs/sessions.md): any number of proxies whose calls are identified by content share it
at once, each call taking a sequence of the workflow's own and a repeat across them caught; a proxy that numbers its
calls (``--replay-from-start``, ``_meta.checkpoint_seq``) owns it alone, or gets the error that says why not.
Takeover after SIGKILL, many workflows in one file at once. Real proxies, on SQLite and PostgreSQL (the flip)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT, REPEAT_REFUSED, WORKFLOW_SHARED

from support import ProxyProcess, done_count, journal_calls, read_effects, server_cmd, wait_until


def counting_upstream(tmp_path: Path) -> str:
    """The effects server, after appending a line to ``starts.txt``: how many upstreams were spawned."""
    starts = shlex.quote(str(tmp_path / "starts.txt"))
    return f"echo started >> {starts}; exec {server_cmd('effects_server.py')}"


def start(journal: str, tmp_path: Path, workflow: str | None = None, *extra: str) -> ProxyProcess:
    named = ["--workflow-id", workflow] if workflow else []
    return ProxyProcess(
        "--upstream-cmd",
        counting_upstream(tmp_path),
        "--journal",
        journal,
        *named,
        *extra,
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def protected(journal: str, tmp_path: Path) -> ProxyProcess:
    """A proxy whose policy refuses a repeat of send_email (as `init` protects a send)."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\nrepeat = "refuse"\n[tools.gate]\nrepeat = "refuse"\n')
    return start(journal, tmp_path, None, "--policy", str(policy))


def outcome(reply: dict[str, Any]) -> str:
    """ "ran", or the refusal's reason."""
    if "result" in reply:
        return "ran"
    return str(reply["error"].get("data", {}).get("reason", reply["error"]["code"]))


def spawned(tmp_path: Path) -> int:
    path = tmp_path / "starts.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_two_proxies_started_at_once_on_one_workflow_both_run_and_their_calls_take_distinct_sequences(
    journal: str, tmp_path: Path, workflow: str
) -> None:
    with start(journal, tmp_path) as a, start(journal, tmp_path) as b:
        for round_ in range(5):
            for name, p in (("a", a), ("b", b)):
                reply = p.call("send_email", {"to": f"{name}-{round_}"})
                assert "result" in reply, (reply, p.stderr)
        assert a.close() == 0
        assert b.close() == 0
    rows = journal_calls(journal, workflow)
    assert len({r.seq for r in rows}) == 10
    assert all(r.state is CallState.COMPLETED for r in rows)
    assert done_count(tmp_path / "effects.jsonl") == 10
    assert spawned(tmp_path) == 2


def test_a_repeat_from_another_proxy_on_the_same_workflow_is_caught_while_both_run(
    journal: str, tmp_path: Path
) -> None:
    with protected(journal, tmp_path) as a, protected(journal, tmp_path) as b:
        assert outcome(a.call("send_email", {"to": "bob"})) == "ran"
        refused = b.call("send_email", {"to": "bob"})
        assert refused["error"]["code"] == REPEAT_REFUSED, refused
        assert outcome(b.call("send_email", {"to": "carol"})) == "ran"
        assert a.close() == 0
        assert b.close() == 0
    assert done_count(tmp_path / "effects.jsonl") == 2


def test_the_same_new_call_sent_to_two_proxies_at_once_runs_once(journal: str, tmp_path: Path) -> None:
    with protected(journal, tmp_path) as a, protected(journal, tmp_path) as b:
        for p in (a, b):
            p.initialize()
        for round_ in range(5):
            call = {"name": "send_email", "arguments": {"to": f"race-{round_}"}}
            for p in (a, b):
                p.send({"jsonrpc": "2.0", "id": f"r{round_}", "method": "tools/call", "params": call})
            outcomes = sorted(outcome(p.response(f"r{round_}")) for p in (a, b))
            # One ran; the other was refused as its repeat, or as in flight (its PENDING row was committed first).
            assert outcomes in (["ran", "repeat"], ["in_flight", "ran"]), outcomes
        assert a.close() == 0
        assert b.close() == 0
    sent = [e for e in read_effects(tmp_path / "effects.jsonl") if e.get("event") == "done"]
    assert sorted(e["arguments"]["to"] for e in sent) == [f"race-{i}" for i in range(5)]


def test_a_call_running_in_another_proxy_is_refused_as_in_flight_and_in_doubt_once_that_proxy_is_killed(
    journal: str, tmp_path: Path
) -> None:
    gate = tmp_path / "open"
    with protected(journal, tmp_path) as a, protected(journal, tmp_path) as b:
        a.send(
            {
                "jsonrpc": "2.0",
                "id": "held",
                "method": "tools/call",
                "params": {"name": "gate", "arguments": {"path": str(gate)}},
            }
        )
        wait_until(
            lambda: any(e.get("event") == "started" for e in read_effects(tmp_path / "effects.jsonl")),
            what="the call started",
        )
        flying = b.call("gate", {"path": str(gate)})
        assert flying["error"]["code"] == IN_DOUBT, flying
        assert flying["error"]["data"]["reason"] == "in_flight", flying
        a.kill()
        doubt = b.call("gate", {"path": str(gate)})
        assert doubt["error"]["code"] == IN_DOUBT, doubt
        assert doubt["error"]["data"]["reason"] == "in_doubt", doubt
        assert b.close() == 0
    assert done_count(tmp_path / "effects.jsonl") == 0


def test_of_two_proxies_that_number_their_calls_from_the_start_exactly_one_runs(journal: str, tmp_path: Path) -> None:
    with (
        start(journal, tmp_path, None, "--replay-from-start") as a,
        start(journal, tmp_path, None, "--replay-from-start") as b,
    ):
        # Both started at once; the loser exits before spawning its upstream.
        outcomes = {}
        for p in (a, b):
            p.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        for name, p in (("a", a), ("b", b)):
            try:
                outcomes[name] = p.wait(timeout=3)
            except AssertionError:
                outcomes[name] = None  # still running: the winner
        running = [n for n, code in outcomes.items() if code is None]
        refused = [n for n, code in outcomes.items() if code is not None]
        assert len(running) == 1, outcomes
        assert len(refused) == 1, outcomes
        loser = a if refused[0] == "a" else b
        winner = b if refused[0] == "a" else a
        assert outcomes[refused[0]] == 1
        message = loser.stderr
        assert "is owned by another live proxy" in message
        assert re.search(rf"pid {winner.proc.pid} on \S+ since \d{{4}}-\d\d-\d\dT", message), message
        assert winner.response(1)["result"] == {}
        winner.close()
    assert spawned(tmp_path) == 1


def test_a_proxy_that_numbers_its_calls_from_the_start_does_not_start_while_others_share_the_workflow(
    journal: str, tmp_path: Path
) -> None:
    with start(journal, tmp_path) as sharing:
        assert "result" in sharing.call("send_email", {"to": "a"})
        with start(journal, tmp_path, None, "--replay-from-start") as alone:
            assert alone.wait(timeout=30) == 1
            assert "is shared by other live proxies" in alone.stderr, alone.stderr
            assert "--workflow-id" in alone.stderr
        assert sharing.close() == 0
    assert spawned(tmp_path) == 1


def test_a_call_that_names_its_sequence_is_refused_while_another_proxy_shares_the_workflow_and_then_owns_it_alone(
    journal: str, tmp_path: Path
) -> None:
    with start(journal, tmp_path) as a, start(journal, tmp_path) as b:
        assert "result" in b.call("send_email", {"to": "b"})
        refused = a.call("send_email", {"to": "a"}, seq=7)
        assert refused["error"]["code"] == WORKFLOW_SHARED, refused
        assert "needs workflow" in refused["error"]["message"]
        assert "--workflow-id" in refused["error"]["message"]
        assert b.close() == 0
        numbered = a.call("send_email", {"to": "a"}, seq=7)
        assert numbered["result"]["_meta"]["checkpoint/journal"]["seq"] == 7, numbered
        fresh = a.call("send_email", {"to": "a2"})
        assert fresh["result"]["_meta"]["checkpoint/journal"]["seq"] == 8, fresh
        with start(journal, tmp_path) as late:  # the workflow is now a's alone: a sharer cannot join it
            assert late.wait(timeout=30) == 1
            assert f"is owned by another live proxy (pid {a.proc.pid}" in late.stderr, late.stderr
        assert a.close() == 0
    assert done_count(tmp_path / "effects.jsonl") == 3


def test_when_the_owner_is_sigkilled_the_next_proxy_takes_over_without_cleanup(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as owner:
        owner.call("send_email", {"to": "a"}, seq=1)
        owner.kill()
    with start(journal, tmp_path) as successor:
        replay = successor.call("send_email", {"to": "a"}, seq=1)
        fresh = successor.call("send_email", {"to": "b"})
        assert successor.close() == 0
    assert replay["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert fresh["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert done_count(tmp_path / "effects.jsonl") == 2


def test_different_workflows_in_one_journal_file_run_concurrently(journal: str, tmp_path: Path) -> None:
    names = [f"agent-{i}" for i in range(4)]
    proxies = [start(journal, tmp_path, name) for name in names]
    try:
        for round_ in range(10):
            for i, p in enumerate(proxies):
                p.send(
                    {
                        "jsonrpc": "2.0",
                        "id": round_,
                        "method": "tools/call",
                        "params": {"name": "send_email", "arguments": {"to": f"{names[i]}-{round_}"}},
                    }
                )
        for p in proxies:
            for round_ in range(10):
                assert "result" in p.response(round_)
            assert p.close() == 0
    finally:
        for p in proxies:
            p.__exit__(None, None, None)
    for name in names:
        rows = journal_calls(journal, name)
        assert [r.seq for r in rows] == list(range(1, 11))
        assert all(r.state is CallState.COMPLETED for r in rows)
        assert sorted(r.arguments for r in rows) == sorted(f'{{"to":"{name}-{i}"}}' for i in range(10))


def test_proxies_creating_a_new_journal_at_the_same_moment_all_start(tmp_path: Path) -> None:
    for attempt in range(5):
        location = str(tmp_path / f"new-{attempt}.db")
        proxies = [
            ProxyProcess(
                "--upstream-cmd", server_cmd("effects_server.py"), "--journal", location, "--workflow-id", f"w{i}"
            )
            for i in range(4)
        ]
        try:
            for p in proxies:
                assert p.request("ping")["result"] == {}, p.stderr
            for p in proxies:
                assert p.close() == 0
        finally:
            for p in proxies:
                p.__exit__(None, None, None)
