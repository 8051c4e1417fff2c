"""Repeats caught by their content (`--policy`), through real proxies: a fresh `checkpoint` per call, as
langchain and llama-index run one, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import default_workflow_id, open_journal
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT, REPEAT_REFUSED

from support import ProxyProcess, done_count, journal_calls, read_effects, server_cmd


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends in every run: a repeat must be caught wherever the journal lives."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def write_policy(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def proxy(location: str, tmp_path: Path, *extra: str) -> ProxyProcess:
    return ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        location,
        *extra,
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def fresh_call(location: str, tmp_path: Path, tool: str, arguments: dict[str, Any], *extra: str) -> dict[str, Any]:
    """One tools/call from a new proxy process, as a client that opens a session per call makes it."""
    with proxy(location, tmp_path, *extra) as p:
        p.initialize()
        reply = p.call(tool, arguments)
        assert p.close() == 0, p.stderr
    return reply


def events(location: str, kind: str = "repeat") -> list[tuple[int | None, dict[str, Any]]]:
    """(seq, detail) of the journal's events of ``kind``, oldest first."""
    journal: Any = open_journal(location)
    try:
        rows = journal.execute(
            "SELECT seq, detail FROM events WHERE workflow_id = ? AND kind = ? ORDER BY id",
            (default_workflow_id(location), kind),
        ).fetchall()
    finally:
        journal.close()
    return [(row[0], json.loads(row[1])) for row in rows]


def rows(location: str) -> list[Any]:
    return journal_calls(location, default_workflow_id(location))


MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


def test_a_repeat_from_a_fresh_proxy_is_replayed_and_not_sent_again(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[tools.send_email]\nrepeat = "replay"\n')
    first = fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    again = fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    assert first["result"]["_meta"]["checkpoint/journal"] == {
        "workflow": default_workflow_id(location),
        "seq": 1,
        "replayed": False,
    }
    assert again["result"]["content"] == first["result"]["content"]
    meta = again["result"]["_meta"]["checkpoint/journal"]
    assert meta["replayed"] is True
    assert meta["repeatOf"] == {"workflow": default_workflow_id(location), "seq": 1}
    assert [(r.seq, r.state) for r in rows(location)] == [(1, CallState.COMPLETED)]
    ((seq, detail),) = events(location)
    assert seq == 1
    assert detail["action"] == "replayed"
    assert detail["tool"] == "send_email"
    assert "bob@example.com" not in json.dumps(detail)  # audit records hold no arguments


def test_a_refused_repeat_names_the_original_its_time_its_result_and_the_way_out(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "refuse"\nwindow = "1h"\n')
    fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    refused = fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    error = refused["error"]
    assert error["code"] == REPEAT_REFUSED
    data = error["data"]
    (original,) = rows(location)
    assert data["reason"] == "repeat"
    assert data["original"] == {
        "workflow": original.workflow,
        "seq": 1,
        "state": "COMPLETED",
        "at": original.started_at,
    }
    assert data["result"] == "sent to bob@example.com"
    assert data["window"] == "1h"
    assert data["rule"] == "default"
    assert "checkpoint journal resolve" in data["resolve"]["release"]
    assert data["resolve"]["release"].endswith("--release")
    started = datetime.fromisoformat(original.started_at.replace("Z", "+00:00"))
    after = datetime.fromisoformat(data["runsAgainAfter"].replace("Z", "+00:00"))
    assert 3599 <= (after - started).total_seconds() <= 3600
    assert "call #1" in error["message"]
    assert [d["action"] for _, d in events(location)] == ["refused"]


def test_allow_and_no_policy_run_the_call_again_as_today(location: str, tmp_path: Path) -> None:
    allow = write_policy(tmp_path, '[default]\nrepeat = "allow"\n')
    fresh_call(location, tmp_path, "send_email", MAIL, "--policy", allow)
    second = fresh_call(location, tmp_path, "send_email", MAIL, "--policy", allow)
    third = fresh_call(location, tmp_path, "send_email", MAIL)
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 3
    assert second["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert third["result"]["_meta"]["checkpoint/journal"]["seq"] == 3
    assert events(location) == []


def test_a_call_with_a_sequence_or_a_key_is_never_a_repeat(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "refuse"\n')
    fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    with proxy(location, tmp_path, "--policy", policy) as p:
        p.initialize()
        keyed = p.request("tools/call", {"name": "send_email", "arguments": MAIL, "_meta": {"checkpoint_key": "k2"}})
        hinted = p.call("send_email", MAIL, seq=7)
        p.close()
    assert keyed["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert hinted["result"]["_meta"]["checkpoint/journal"]["seq"] == 7
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 3


def test_other_arguments_are_another_call(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "refuse"\n')
    fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    other = fresh_call(location, tmp_path, "send_email", {**MAIL, "to": "carol@example.com"}, "--policy", policy)
    meta_only = fresh_call(location, tmp_path, "send_quiet", {}, "--policy", policy)
    assert other["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert meta_only["result"]["_meta"]["checkpoint/journal"]["seq"] == 3


def test_a_repeat_of_a_failed_call_runs_again(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "refuse"\n')
    first = fresh_call(location, tmp_path, "fail", {"reason": "smtp down"}, "--policy", policy)
    again = fresh_call(location, tmp_path, "fail", {"reason": "smtp down"}, "--policy", policy)
    assert first["error"]["code"] == -32000
    assert again["error"]["code"] == -32000
    assert done_count(tmp_path / "effects.jsonl", "fail") == 2
    assert [(r.seq, r.state) for r in rows(location)] == [(1, CallState.FAILED), (2, CallState.FAILED)]
    assert [(seq, d["action"]) for seq, d in events(location)] == [(1, "ran_again")]


def test_the_window_catches_a_repeat_inside_it_and_lets_one_after_it_run(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[tools.send_email]\nrepeat = "refuse"\nwindow = "10s"\n')
    fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    (original,) = rows(location)
    started = datetime.fromisoformat(original.started_at.replace("Z", "+00:00"))
    inside = fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    assert (datetime.now(UTC) - started).total_seconds() < 10  # the edge is still ahead
    assert inside["error"]["code"] == REPEAT_REFUSED
    time.sleep(max(0.0, 10.2 - (datetime.now(UTC) - started).total_seconds()))
    after = fresh_call(location, tmp_path, "send_email", MAIL, "--policy", policy)
    assert after["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2


def test_a_repeat_of_a_call_in_doubt_is_refused_as_in_doubt(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "replay"\n')
    with proxy(location, tmp_path, "--policy", policy) as p:
        p.initialize()
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "arguments": {"n": 1}}})
        deadline = time.monotonic() + 20
        while not any(e["tool"] == "hang" for e in read_effects(tmp_path / "effects.jsonl")):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        p.kill()  # the call stays PENDING: in doubt
    again = fresh_call(location, tmp_path, "hang", {"n": 1}, "--policy", policy)
    assert again["error"]["code"] == IN_DOUBT
    assert again["error"]["data"]["seq"] == 1
    assert again["error"]["data"]["reason"] == "in_doubt"
    assert [(seq, d["action"]) for seq, d in events(location)] == [(1, "in_doubt")]


def test_a_repeat_of_a_call_still_in_flight_in_the_same_proxy_is_refused_as_in_flight(
    location: str, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "replay"\n')
    with proxy(location, tmp_path, "--policy", policy) as p:
        p.initialize()
        p.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 1}}}
        )
        p.send(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 1}}}
        )
        second = p.response(2)
        first = p.response(1)
        p.close()
    assert first["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert second["error"]["code"] == IN_DOUBT
    assert second["error"]["data"]["reason"] == "in_flight"
    assert done_count(tmp_path / "effects.jsonl", "slow") == 1


@pytest.mark.parametrize(
    ("declaration", "journaled"),
    [("[tools.lookup]\nread_only = true\n", True), ('[tools."look*"]\njournal = false\n', False)],
)
def test_a_read_tool_declared_in_the_policy_reads_afresh_under_a_refusing_default(
    location: str, tmp_path: Path, declaration: str, journaled: bool
) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "refuse"\n' + declaration)
    first = fresh_call(location, tmp_path, "lookup", {"key": "a"}, "--policy", policy)
    second = fresh_call(location, tmp_path, "lookup", {"key": "a"}, "--policy", policy)
    reads = [e for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "read"]
    assert len(reads) == 2
    assert "error" not in second
    assert ("_meta" in first["result"]) is journaled
    assert len(rows(location)) == (2 if journaled else 0)
    assert events(location) == []


def test_a_tool_the_upstream_marks_read_only_reads_afresh_once_the_proxy_has_seen_tools_list(
    location: str, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path, '[default]\nrepeat = "refuse"\n')
    with proxy(location, tmp_path, "--policy", policy) as p:
        p.initialize()
        p.request("tools/list")
        first = p.call("lookup", {"key": "a"})
        second = p.call("lookup", {"key": "a"})
        p.close()
    assert [r["result"]["_meta"]["checkpoint/journal"]["seq"] for r in (first, second)] == [1, 2]
    assert len([e for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "read"]) == 2


@pytest.fixture
def sqlite_location(tmp_path: Path) -> str:
    return str(tmp_path / "j.db")


def test_a_policy_whose_probe_tool_is_not_read_only_stops_the_proxy_when_tools_list_shows_it(
    sqlite_location: str, tmp_path: Path
) -> None:
    policy = write_policy(
        tmp_path,
        '[tools.send_email.probe]\ntool = "send_quiet"\narguments = { to = "/to" }\n'
        'happened_if = { pointer = "/n", equals = 1 }\n[tools.ghost]\nrepeat = "refuse"\n',
    )
    with proxy(sqlite_location, tmp_path, "--policy", policy) as p:
        p.initialize()
        p.request("tools/list")
        code = p.wait()
    assert code != 0
    assert "the tool policy is refused" in p.stderr
    assert "[tools.send_email.probe] tool: 'send_quiet' is not read-only" in p.stderr


def test_a_policy_naming_a_tool_the_upstream_lacks_is_a_warning(sqlite_location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[tools.ghost]\nrepeat = "refuse"\n[tools."send_*"]\nrepeat = "replay"\n')
    with proxy(sqlite_location, tmp_path, "--policy", policy) as p:
        p.initialize()
        p.request("tools/list")
        p.request("tools/list")
        reply = p.call("send_email", MAIL)
        assert p.close() == 0
    assert "result" in reply
    assert p.stderr.count("[tools.ghost] names a tool the upstream does not list") == 1
    assert "send_*" not in p.stderr
