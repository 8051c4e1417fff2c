"""`checkpoint journal …` as a real command: each kind of resolve and the call it affects, ls, show, export, gc."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import is_postgres_url
from checkpoint_mcp.refusals import COLLECTED, FAILED_BY_OPERATOR, IN_DOUBT

from support import ProxyProcess, checkpoint_argv, done_count, effects_proxy, journal_calls, server_cmd, wait_until


def start(journal: str, tmp_path: Path, trigger: str | None = None) -> ProxyProcess:
    return effects_proxy(journal, tmp_path, "--workflow-id", "wf", trigger=trigger)


def cli(journal: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        checkpoint_argv("journal", args[0], "--journal", journal, *args[1:]),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def in_doubt_call(journal: str, tmp_path: Path, seq: int = 1, to: str = "x") -> None:
    """Leave call #seq PENDING: the proxy dies after the upstream answered, before COMPLETE."""
    with start(journal, tmp_path, trigger="after_upstream_reply") as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": to}, "_meta": {"checkpoint_seq": seq}},
            }
        )
        assert p.wait() == -9


def replay(journal: str, tmp_path: Path, seq: int = 1, to: str = "x") -> dict[str, Any]:
    with start(journal, tmp_path) as p:
        reply = p.call("send_email", {"to": to}, seq=seq)
        p.close()
    return reply


def test_resolve_completed_makes_replays_return_the_recorded_result(journal: str, tmp_path: Path) -> None:
    in_doubt_call(journal, tmp_path)
    assert replay(journal, tmp_path)["error"]["code"] == IN_DOUBT
    result = {"content": [{"type": "text", "text": "sent to x (checked by hand)"}], "isError": False}
    (tmp_path / "result.json").write_text(json.dumps(result))
    done = cli(journal, "resolve", "wf", "1", "--completed", "--result-file", str(tmp_path / "result.json"))
    assert "resolved as completed (was PENDING)" in done.stdout
    reply = replay(journal, tmp_path)
    assert reply["result"]["content"] == result["content"]
    assert reply["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(tmp_path / "effects.jsonl") == 1  # only the original run


def test_resolve_failed_makes_replays_return_an_operator_error(journal: str, tmp_path: Path) -> None:
    in_doubt_call(journal, tmp_path)
    cli(journal, "resolve", "wf", "1", "--failed", "--message", "bounced: mailbox full")
    reply = replay(journal, tmp_path)
    assert reply["error"]["code"] == FAILED_BY_OPERATOR
    assert reply["error"]["message"] == "bounced: mailbox full"
    assert done_count(tmp_path / "effects.jsonl") == 1


def test_resolve_release_lets_the_next_call_at_that_sequence_run_again(journal: str, tmp_path: Path) -> None:
    in_doubt_call(journal, tmp_path)
    cli(journal, "resolve", "wf", "1", "--release")
    reply = replay(journal, tmp_path)
    assert reply["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": 1, "replayed": False}
    assert done_count(tmp_path / "effects.jsonl") == 2  # an explicit decision to re-execute


def test_a_failed_call_can_be_resolved_as_completed(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("fail", {"reason": "timeout"}, seq=1)
        p.close()
    (tmp_path / "r.json").write_text('{"content": [], "isError": false}')
    done = cli(journal, "resolve", "wf", "1", "--completed", "--result-file", str(tmp_path / "r.json"))
    assert "was FAILED" in done.stdout
    with start(journal, tmp_path) as p:
        reply = p.call("fail", {"reason": "timeout"}, seq=1)
        p.close()
    assert reply["result"]["content"] == []


def test_resolve_is_refused_while_a_live_proxy_owns_the_workflow_alone(journal: str, tmp_path: Path) -> None:
    in_doubt_call(journal, tmp_path)
    with start(journal, tmp_path) as p:
        assert "result" in p.call("send_email", {"to": "y"}, seq=2)  # it numbers its calls: the workflow is its alone
        refused = cli(journal, "resolve", "wf", "1", "--release", check=False)
        p.close()
    assert refused.returncode == 1
    assert "owned by another live proxy" in refused.stderr
    assert f"pid {p.proc.pid}" in refused.stderr
    assert replay(journal, tmp_path)["error"]["code"] == IN_DOUBT  # nothing changed


def test_resolve_goes_on_beside_the_sessions_that_share_the_workflow_and_refuses_a_call_in_flight_in_one(
    journal: str, tmp_path: Path
) -> None:
    in_doubt_call(journal, tmp_path)
    gate = tmp_path / "open"
    with start(journal, tmp_path) as p:  # a session whose calls are identified by content: it shares the workflow
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "gate", "arguments": {"path": str(gate)}},
            }
        )
        wait_until(lambda: "started" in (tmp_path / "effects.jsonl").read_text(), what="the gated call started")
        [flying] = [row.seq for row in journal_calls(journal, "wf") if row.tool == "gate"]
        refused = cli(journal, "resolve", "wf", str(flying), "--release", check=False)
        assert refused.returncode == 1
        assert "is in flight on the live replica" in refused.stderr, refused.stderr
        done = cli(journal, "resolve", "wf", "1", "--release")
        assert "released" in done.stdout
        gate.touch()
        assert "result" in p.response(9)
        assert p.close() == 0
    assert replay(journal, tmp_path)["result"]["_meta"]["checkpoint/journal"]["replayed"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--release", "--failed", "--message", "m"], "exactly one"),
        (["--completed"], "--completed and --result-file go together"),
        (["--failed"], "--failed and --message go together"),
    ],
)
def test_resolve_needs_exactly_one_outcome(journal: str, tmp_path: Path, args: list[str], message: str) -> None:
    in_doubt_call(journal, tmp_path)
    done = cli(journal, "resolve", "wf", "1", *args, check=False)
    assert done.returncode != 0
    assert message in done.stderr


def test_resolve_refuses_to_rewrite_a_completed_call(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "x"}, seq=1)
        p.close()
    done = cli(journal, "resolve", "wf", "1", "--failed", "--message", "no", check=False)
    assert done.returncode == 1
    assert "only --release applies" in done.stderr


def test_every_resolution_is_audited_and_shown(journal: str, tmp_path: Path) -> None:
    in_doubt_call(journal, tmp_path)
    cli(journal, "resolve", "wf", "1", "--failed", "--message", "bounced")
    show = cli(journal, "show", "wf").stdout
    assert "#1 resolved as failed (was PENDING) by" in show
    detail = json.loads(cli(journal, "show", "wf", "--seq", "1", "--json").stdout)
    [audit] = detail["resolutions"]
    assert audit["action"] == "failed"
    assert audit["previousState"] == "PENDING"
    assert audit["by"]
    assert audit["at"].endswith("Z")
    assert detail["outcome"]["message"] == "bounced"


def test_ls_lists_in_doubt_workflows_first_with_the_live_proxies_that_share_them(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "x"})
        p.close()
    with ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        "--workflow-id",
        "zz",
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl"), "CHECKPOINT_DEBUG_TRIGGER": "after_upstream_reply"},
    ) as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send_email", "arguments": {}}})
        p.wait()
    with start(journal, tmp_path) as live:
        live.request("ping")
        table = cli(journal, "ls").stdout.splitlines()
        data = json.loads(cli(journal, "ls", "--json").stdout)
        live.close()
    assert table[0].split()[:2] == ["WORKFLOW", "LINEAGE"]
    assert table[1].startswith("zz ")  # in doubt first
    assert table[2].startswith("wf ")
    by_name = {w["workflow"]: w for w in data}
    assert by_name["zz"]["counts"] == {"PENDING": 1, "COMPLETED": 0, "FAILED": 0}
    assert by_name["zz"]["owner"] is None
    assert by_name["zz"]["sharers"] == []
    if not is_postgres_url(journal):  # PostgreSQL names the database sessions, not the proxies' processes
        assert f"shared: pid {live.proc.pid}" in table[2]
        assert [sharer["pid"] for sharer in by_name["wf"]["sharers"]] == [live.proc.pid]
    else:
        assert "shared: a session from" in table[2]
        assert len(by_name["wf"]["sharers"]) == 1
    assert by_name["wf"]["owner"] is None


def test_ls_names_the_live_owner_of_a_workflow_a_proxy_numbers_alone(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as live:
        assert "result" in live.call("send_email", {"to": "x"}, seq=1)
        data = json.loads(cli(journal, "ls", "--json").stdout)
        live.close()
    assert data[0]["owner"]["pid"] == live.proc.pid
    assert data[0]["sharers"] == []


def test_show_prints_a_timeline_with_short_arguments(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "ann", "body": "x" * 200})
        p.call("fail", {"reason": "r"})
        p.close()
    lines = cli(journal, "show", "wf").stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("SEQ"))
    first, second = lines[header + 1], lines[header + 2]
    assert first.split()[:3] == ["#1", "send_email", "COMPLETED"]
    assert "…" in first
    assert second.split()[:3] == ["#2", "fail", "FAILED"]
    unknown = cli(journal, "show", "nope", check=False)
    assert unknown.returncode == 1
    assert "no workflow 'nope'" in unknown.stderr


def test_export_writes_json_lines(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "ann"})
        p.call("send_email", {"to": "bob"})
        p.close()
    lines = [json.loads(line) for line in cli(journal, "export", "wf").stdout.splitlines()]
    calls = [x for x in lines if x["type"] == "call"]
    assert [(x["seq"], x["arguments"]) for x in calls] == [(1, {"to": "ann"}), (2, {"to": "bob"})]
    assert calls[0]["outcome"]["content"][0]["text"] == "sent to ann"
    # then the hash chain's links, each naming the one before it
    chain = [x for x in lines if x["type"] == "link"]
    assert [(x["seq"], x["kind"]) for x in chain] == [
        (1, "reserved"),
        (1, "completed"),
        (2, "reserved"),
        (2, "completed"),
    ]
    assert [x["prev"] for x in chain[1:]] == [x["hash"] for x in chain[:-1]]


def test_gc_removes_old_finished_calls_never_pending_ones_and_refuses_collected_sequences(
    journal: str, tmp_path: Path
) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "a"}, seq=1)
        p.call("fail", {"reason": "r"}, seq=2)
        p.close()
    in_doubt_call(journal, tmp_path, seq=3)
    report = json.loads(cli(journal, "gc", "--older-than", "0s", "--json").stdout)
    assert report == {"removed": {"wf": [1, 2]}, "skipped": []}
    shown = json.loads(cli(journal, "show", "wf", "--json").stdout)
    assert [(c["seq"], c["state"]) for c in shown["calls"]] == [(3, "PENDING")]
    collected = replay(journal, tmp_path, seq=1, to="a")
    assert collected["error"]["code"] == COLLECTED
    with start(journal, tmp_path) as p:
        nxt = p.call("send_email", {"to": "new"})
        p.close()
    assert nxt["result"]["_meta"]["checkpoint/journal"]["seq"] == 4
    assert done_count(tmp_path / "effects.jsonl") == 4  # a, fail, x (in doubt), new: nothing re-ran


def test_gc_keeps_recent_calls_and_skips_live_workflows(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "a"})
        kept = cli(journal, "gc", "--older-than", "1d", "--json").stdout
        skipped = json.loads(cli(journal, "gc", "--older-than", "0s", "--json").stdout)
        p.close()
    assert json.loads(kept) == {"removed": {}, "skipped": ["wf"]}
    assert skipped == {"removed": {}, "skipped": ["wf"]}
    bad = cli(journal, "gc", "--older-than", "soon", check=False)
    assert bad.returncode == 2
    assert "cannot read duration" in bad.stderr


def test_operator_commands_never_create_a_journal_at_a_mistyped_location(journal: str, tmp_path: Path) -> None:
    for args in (
        ("ls",),
        ("show", "wf"),
        ("export",),
        ("gc", "--older-than", "1d"),
        ("resolve", "wf", "1", "--release"),
    ):
        done = cli(journal, *args, check=False)
        assert done.returncode == 1, args
        assert "it never creates one" in done.stderr
        assert "Traceback" not in done.stderr
    if journal.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(journal) as conn:
            tables = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
            assert tables.fetchone() == (0,)
    else:
        assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_operator_commands_refuse_an_empty_file_and_leave_it_untouched(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    done = cli(str(empty), "ls", check=False)
    assert done.returncode == 1
    assert "is not a Checkpoint journal" in done.stderr
    assert empty.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_a_sequence_beyond_64_bits_is_a_usage_error_not_a_traceback(journal: str, tmp_path: Path) -> None:
    in_doubt_call(journal, tmp_path)
    for args in (("resolve", "wf", "1180591620717411303424", "--release"), ("show", "wf", "--seq", str(2**64))):
        done = cli(journal, *args, check=False)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert "9223372036854775807" in done.stderr


def test_the_workflow_argument_defaults_to_the_journals_default_workflow(journal: str, tmp_path: Path) -> None:
    with effects_proxy(journal, tmp_path, trigger="after_upstream_reply") as p:  # no --workflow-id
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send_email", "arguments": {}}})
        assert p.wait() == -9
    with effects_proxy(journal, tmp_path) as p:
        refused = p.call("send_email", {}, seq=1)
        p.close()
    release = refused["error"]["data"]["resolve"]["release"]
    assert release.startswith("checkpoint journal resolve --journal ")
    assert release.split()[-2:] == ["1", "--release"]  # no workflow argument: it is the journal's default
    assert len(release.split()) == 7
    shown = cli(journal, "show")
    assert "PENDING" in shown.stdout
    done = cli(journal, "resolve", "1", "--release")
    assert "resolved as released" in done.stdout
