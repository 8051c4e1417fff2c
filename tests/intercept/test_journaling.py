"""The decision table of spec §3.4, driven through a real proxy process, a real upstream and a real SQLite file."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from checkpoint_mcp.journal import default_workflow_id
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import DIVERGENCE, IN_DOUBT, INVALID_PARAMS

from support import ProxyProcess, done_count, journal_calls, read_effects, server_cmd, wait_until


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.jsonl"


def proxy(journal: str, effects: Path, *extra: str) -> ProxyProcess:
    return ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        *extra,
        env={"EFFECTS_FILE": str(effects)},
    )


def default_location(journal: str) -> str:
    """How the proxy names the journal in operator commands (a URL without its password)."""
    return default_workflow_id(journal)


def rows(journal: str, workflow: str | None = None) -> list:
    return journal_calls(journal, workflow or default_workflow_id(journal))


def test_a_journaled_call_reaches_the_upstream_once_and_is_recorded_completed(
    journal: str, effects: Path, workflow: str
) -> None:
    with proxy(journal, effects) as p:
        p.initialize()
        reply = p.call("send_email", {"to": "ann@example.com", "subject": "hi"})
        assert p.close() == 0
    assert reply["result"]["content"][0]["text"] == "sent to ann@example.com"
    assert reply["result"]["_meta"]["checkpoint/journal"] == {
        "workflow": workflow,
        "seq": 1,
        "replayed": False,
    }
    [row] = rows(journal)
    assert (row.seq, row.tool, row.state) == (1, "send_email", CallState.COMPLETED)
    assert json.loads(row.arguments) == {"to": "ann@example.com", "subject": "hi"}
    assert json.loads(row.outcome)["content"][0]["text"] == "sent to ann@example.com"
    assert row.finished_at is not None
    assert done_count(effects) == 1


def test_a_replayed_call_returns_the_stored_result_without_calling_the_upstream(
    journal: str, effects: Path, workflow: str
) -> None:
    with proxy(journal, effects) as p:
        first = p.call("send_email", {"to": "ann", "subject": "hi"}, seq=1)
        p.close()
    with proxy(journal, effects) as p:
        again = p.call("send_email", {"subject": "hi", "to": "ann"}, seq=1)  # same call, other key order
        p.close()
    assert done_count(effects) == 1
    assert again["result"]["content"] == first["result"]["content"]
    assert again["result"]["_meta"]["checkpoint/journal"] == {"workflow": workflow, "seq": 1, "replayed": True}


def test_a_different_call_at_a_journaled_sequence_is_refused_as_a_divergence(
    journal: str, effects: Path, workflow: str
) -> None:
    with proxy(journal, effects) as p:
        p.call("send_email", {"to": "ann", "subject": "hi"}, seq=1)
        refused = p.call("send_email", {"to": "eve", "subject": "hi"}, seq=1)
        p.close()
    assert done_count(effects) == 1
    error = refused["error"]
    assert error["code"] == DIVERGENCE
    data = error["data"]
    assert data["reason"] == "divergence"
    assert data["workflow"] == workflow
    assert data["seq"] == 1
    assert data["tool"] == "send_email"
    assert data["journaled"]["arguments"] == {"to": "ann", "subject": "hi"}
    assert data["received"]["arguments"] == {"to": "eve", "subject": "hi"}
    assert data["difference"] == ['arguments.to: "ann" → "eve"']
    assert data["journaled"]["at"].endswith("Z")
    target = f"--journal {shlex.quote(default_location(journal))}"  # the default workflow goes without saying
    assert data["resolve"]["release"] == f"checkpoint journal resolve {target} 1 --release"
    assert data["resolve"]["show"] == f"checkpoint journal show {target} --seq 1"


def test_another_tool_at_a_journaled_sequence_names_both_tools(journal: str, effects: Path, workflow: str) -> None:
    with proxy(journal, effects) as p:
        p.call("send_email", {"to": "ann"}, seq=1)
        refused = p.call("fail", {"reason": "x"}, seq=1)
        p.close()
    assert refused["error"]["code"] == DIVERGENCE
    assert refused["error"]["data"]["difference"][0] == 'tool: "send_email" → "fail"'


def test_a_pending_row_is_refused_as_in_doubt_and_the_upstream_is_not_called(
    journal: str, effects: Path, workflow: str
) -> None:
    with proxy(journal, effects) as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
        wait_until(lambda: len(read_effects(effects)) == 1, what="the upstream to start the call")
        p.kill()
    [row] = rows(journal)
    assert row.state is CallState.PENDING
    with proxy(journal, effects) as p:
        refused = p.call("hang", {}, seq=1)
        other = p.call("send_email", {"to": "x"}, seq=1)
        p.close()
    for reply in (refused, other):
        error = reply["error"]
        assert error["code"] == IN_DOUBT
        assert error["data"]["reason"] == "in_doubt"
        assert error["data"]["seq"] == 1
        assert error["data"]["tool"] == "hang"
        assert error["data"]["state"] == "PENDING"
        assert set(error["data"]["resolve"]) == {"show", "completed", "failed", "release"}
        assert error["data"]["resolve"]["completed"].startswith("checkpoint journal resolve --journal")
    assert [e["event"] for e in read_effects(effects)] == ["started"]


def test_an_upstream_json_rpc_error_is_journaled_failed_and_replayed_as_the_same_error(
    journal: str, effects: Path, workflow: str
) -> None:
    with proxy(journal, effects) as p:
        first = p.call("fail", {"reason": "quota"}, seq=1)
        p.close()
    with proxy(journal, effects) as p:
        again = p.call("fail", {"reason": "quota"}, seq=1)
        p.close()
    assert first["error"] == {"code": -32000, "message": "failed: quota"}
    assert again["error"] == first["error"]
    assert done_count(effects, "fail") == 1
    [row] = rows(journal)
    assert row.state is CallState.FAILED


def test_a_result_with_is_error_true_is_completed_and_replays_as_is(journal: str, effects: Path, workflow: str) -> None:
    with proxy(journal, effects) as p:
        first = p.call("tool_error", {"reason": "bad input"}, seq=1)
        p.close()
    with proxy(journal, effects) as p:
        again = p.call("tool_error", {"reason": "bad input"}, seq=1)
        p.close()
    assert first["result"]["isError"] is True
    assert again["result"]["isError"] is True
    assert again["result"]["content"] == first["result"]["content"]
    assert done_count(effects, "tool_error") == 1
    assert rows(journal)[0].state is CallState.COMPLETED


@pytest.mark.parametrize("bad", [0, -3, 1.5, "2", True, None, [1]])
def test_a_checkpoint_seq_that_is_not_a_positive_integer_is_invalid_params_and_not_journaled(
    journal: str, effects: Path, workflow: str, bad: object
) -> None:
    with proxy(journal, effects) as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "x"}, "_meta": {"checkpoint_seq": bad}},
            }
        )
        reply = p.response(7)
        p.close()
    assert reply["error"]["code"] == INVALID_PARAMS
    assert "checkpoint_seq" in reply["error"]["message"]
    assert rows(journal) == []
    assert done_count(effects) == 0


@pytest.mark.parametrize(
    "params",
    [
        {"arguments": {"to": "x"}},
        {"name": "", "arguments": {}},
        {"name": 5, "arguments": {}},
        {"name": "send_email", "arguments": ["to", "x"]},
        {"name": "send_email", "arguments": "to=x"},
        "not an object",
    ],
)
def test_a_malformed_tools_call_is_invalid_params_and_neither_journaled_nor_forwarded(
    journal: str, effects: Path, workflow: str, params: object
) -> None:
    with proxy(journal, effects) as p:
        p.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
        reply = p.response(9)
        p.close()
    assert reply["error"]["code"] == INVALID_PARAMS
    assert rows(journal) == []
    assert read_effects(effects) == []


def test_a_fresh_proxy_continues_after_the_highest_journaled_sequence(
    journal: str, effects: Path, workflow: str
) -> None:
    with proxy(journal, effects) as p:
        p.call("send_email", {"to": "a"}, seq=5)
        p.close()
    with proxy(journal, effects) as p:
        reply = p.call("send_email", {"to": "a"})  # no hint: MAX+1, a new call, not a replay
        p.close()
    assert reply["result"]["_meta"]["checkpoint/journal"]["seq"] == 6
    assert done_count(effects) == 2


def test_an_explicit_sequence_moves_the_cursor_past_it(journal: str, effects: Path, workflow: str) -> None:
    with proxy(journal, effects) as p:
        p.call("send_email", {"to": "a"}, seq=3)
        nxt = p.call("send_email", {"to": "b"})
        p.close()
    assert nxt["result"]["_meta"]["checkpoint/journal"]["seq"] == 4


def test_concurrent_calls_get_distinct_sequences_and_all_complete(journal: str, effects: Path, workflow: str) -> None:
    with proxy(journal, effects) as p:
        for i in range(20):
            p.send(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": "slow", "arguments": {"seconds": 0.2, "label": str(i)}},
                }
            )
        replies = [p.response(i) for i in range(20)]
        p.close()
    seqs = sorted(r["result"]["_meta"]["checkpoint/journal"]["seq"] for r in replies)
    assert seqs == list(range(1, 21))
    assert all(row.state is CallState.COMPLETED for row in rows(journal))
    assert done_count(effects, "slow") == 20


def test_the_same_sequence_while_its_call_is_still_in_flight_is_refused(
    journal: str, effects: Path, workflow: str
) -> None:
    with proxy(journal, effects) as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 0.5}, "_meta": {"checkpoint_seq": 1}},
            }
        )
        duplicate = p.call("slow", {"seconds": 0.5}, seq=1)
        first = p.response(1)
        p.close()
    assert duplicate["error"]["code"] == IN_DOUBT
    assert duplicate["error"]["data"]["reason"] == "in_flight"
    assert "result" in first
    assert done_count(effects, "slow") == 1


def test_workflows_in_one_journal_file_are_independent(journal: str, effects: Path, workflow: str) -> None:
    with proxy(journal, effects, "--workflow-id", "alpha") as p:
        p.call("send_email", {"to": "a"}, seq=1)
        p.close()
    with proxy(journal, effects, "--workflow-id", "beta") as p:
        other = p.call("send_email", {"to": "b"}, seq=1)  # no divergence: another workflow
        p.close()
    assert "result" in other
    assert other["result"]["_meta"]["checkpoint/journal"]["workflow"] == "beta"
    assert [r.seq for r in rows(journal, "alpha")] == [1]
    assert [r.seq for r in rows(journal, "beta")] == [1]


def test_without_a_journal_nothing_is_journaled_and_results_are_untouched(tmp_path: Path, effects: Path) -> None:
    with ProxyProcess("--upstream-cmd", server_cmd("effects_server.py"), env={"EFFECTS_FILE": str(effects)}) as p:
        first = p.call("send_email", {"to": "a"}, seq=1)
        again = p.call("send_email", {"to": "a"}, seq=1)
        p.close()
    assert "_meta" not in first["result"]
    assert done_count(effects) == 2  # pass-through: no journal, no replay
    assert again["result"] == first["result"]
    assert list(tmp_path.glob("*.db")) == []


@pytest.mark.parametrize("bad", [2**53, 2**63 - 1, 2**63, 2**70])
def test_a_checkpoint_seq_beyond_two_to_the_53_is_invalid_params_and_the_cursor_does_not_move(
    journal: str, effects: Path, workflow: str, bad: int
) -> None:
    with proxy(journal, effects) as p:
        refused = p.call("send_email", {"to": "x"}, seq=bad)
        first = p.call("send_email", {"to": "a"})
        p.close()
    with proxy(journal, effects) as p:  # a later proxy on the workflow is not stopped either
        second = p.call("send_email", {"to": "b"})
        edge = p.call("send_email", {"to": "c"}, seq=2**53 - 1)
        p.close()
    assert refused["error"]["code"] == INVALID_PARAMS
    assert refused["error"]["data"]["reason"] == "invalid_checkpoint_seq"
    assert first["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert second["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert edge["result"]["_meta"]["checkpoint/journal"]["seq"] == 2**53 - 1
    assert [r.seq for r in rows(journal)] == [1, 2, 2**53 - 1]


def test_a_row_at_the_top_of_the_64_bit_range_written_by_an_older_checkpoint_does_not_stop_the_cursor(
    journal: str, effects: Path, workflow: str
) -> None:
    from checkpoint_mcp.journal import open_journal

    old = open_journal(journal)
    try:
        unit = old.unit()
        unit.reserve(old.lineage(workflow).head, 2**63 - 1, NewCall("send_email", "{}", "0" * 64))
        unit.commit()
    finally:
        old.close()
    with proxy(journal, effects) as p:
        after = p.call("send_email", {"to": "a"})
        p.close()
    assert after["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert {r.seq: r.state for r in rows(journal)} == {1: CallState.COMPLETED, 2**63 - 1: CallState.PENDING}
