"""One live proxy per workflow: racing proxies, takeover after SIGKILL, many workflows in one file at once."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from checkpoint_mcp.journal.records import CallState

from support import ProxyProcess, done_count, journal_calls, server_cmd


def counting_upstream(tmp_path: Path) -> str:
    """The effects server, after appending a line to ``starts.txt``: how many upstreams were spawned."""
    starts = shlex.quote(str(tmp_path / "starts.txt"))
    return f"echo started >> {starts}; exec {server_cmd('effects_server.py')}"


def start(journal: str, tmp_path: Path, workflow: str | None = None) -> ProxyProcess:
    extra = ["--workflow-id", workflow] if workflow else []
    return ProxyProcess(
        "--upstream-cmd",
        counting_upstream(tmp_path),
        "--journal",
        journal,
        *extra,
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def spawned(tmp_path: Path) -> int:
    path = tmp_path / "starts.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_of_two_proxies_racing_for_one_workflow_exactly_one_runs(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as a, start(journal, tmp_path) as b:
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
