"""A remote upstream that misbehaves: broken streams, silence, failure statuses (expired sessions and restarts:
test_remote_renewal.py).

Whatever breaks, Checkpoint never re-sends a request: a journaled call whose exchange broke stays PENDING (the
client gets the upstream-exited error, a replay says in doubt); a status that proves the server did not run it
is FAILED; later calls reconnect.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT, UPSTREAM_EXITED, UPSTREAM_REFUSED

from httpservers import HttpServer, faults_server
from support import ProxyProcess, journal_states, read_effects, wait_until


def remote_proxy(journal: str, server: HttpServer, *extra: str, env: dict[str, str] | None = None) -> ProxyProcess:
    return ProxyProcess("--upstream-url", server.url, "--journal", journal, *extra, env=env)


def received(tmp_path: Path, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in read_effects(tmp_path / "effects.jsonl")
        if e["event"] == "received" and all(e.get(k) == v for k, v in match.items())
    ]


def test_a_stream_that_breaks_mid_call_leaves_the_call_in_doubt_and_it_is_never_sent_again(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        broken = proxy.call("drop", seq=1)
        assert broken["error"]["code"] == UPSTREAM_EXITED
        assert broken["error"]["data"]["seq"] == 1
        progress = proxy.recv()  # what the server sent before the break reached the client
        assert progress["method"] == "notifications/progress"
        assert journal_states(journal, workflow) == {1: CallState.PENDING}
        assert proxy.call("drop", seq=1)["error"]["code"] == IN_DOUBT
        later = proxy.call("send_email", {"to": "ann"}, seq=2)  # later calls go on
        assert later["result"]["content"][0]["text"] == "sent to ann"
        assert proxy.close() == 0
    assert len(received(tmp_path, tool="drop")) == 1


def test_a_server_that_never_answers_leaves_the_call_in_doubt_after_the_timeout(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server, "--upstream-timeout", "1") as proxy:
        proxy.initialize()
        silent = proxy.call("never", seq=1, timeout=10)
        assert silent["error"]["code"] == UPSTREAM_EXITED
        assert "no response within 1s" in silent["error"]["message"]
        assert journal_states(journal, workflow) == {1: CallState.PENDING}
        assert proxy.close() == 0
    assert len(received(tmp_path, tool="never")) == 1


@pytest.mark.parametrize(
    ("status", "code", "state"),
    [
        (401, UPSTREAM_REFUSED, CallState.FAILED),
        (403, UPSTREAM_REFUSED, CallState.FAILED),
        (429, UPSTREAM_REFUSED, CallState.FAILED),
        (500, UPSTREAM_EXITED, CallState.PENDING),
        (502, UPSTREAM_EXITED, CallState.PENDING),
        (503, UPSTREAM_EXITED, CallState.PENDING),
    ],
)
def test_a_failure_status_is_failed_only_when_it_proves_the_call_did_not_run(
    journal: str, workflow: str, tmp_path: Path, status: int, code: int, state: CallState
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        reply = proxy.call("status", {"code": status}, seq=1)
        assert reply["error"]["code"] == code
        if code == UPSTREAM_REFUSED:
            assert reply["error"]["data"]["status"] == status
        again = proxy.call("status", {"code": status}, seq=1)
        assert proxy.close() == 0
    assert journal_states(journal, workflow) == {1: state}
    # A replay answers from the journal (the stored error, or in doubt), never by asking the server again.
    assert again["error"]["code"] == (code if state is CallState.FAILED else IN_DOUBT)
    assert len(received(tmp_path, tool="status")) == 1


def test_a_jsonrpc_error_sent_with_a_failure_status_is_the_servers_answer(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        reply = proxy.call("rpc_error_500", seq=1)
        assert proxy.close() == 0
    assert reply["error"] == {"code": -32000, "message": "it broke"}
    assert journal_states(journal, workflow) == {1: CallState.FAILED}


def test_a_request_stream_that_ends_early_is_resumed_with_last_event_id_not_resent(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        reply = proxy.call("resumable", seq=1)
        assert proxy.close() == 0
    assert reply["result"]["content"][0]["text"] == "resumed answer"
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}
    assert len(received(tmp_path, tool="resumable")) == 1
    resumed = [e for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "listening" and e["last_event_id"]]
    assert [e["last_event_id"] for e in resumed] == ["e2"]


def test_messages_the_server_sends_on_the_get_stream_reach_the_client(journal: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        wait_until(lambda: any(e["event"] == "listening" for e in read_effects(effects)), what="the GET stream")
        assert proxy.call("announce")["result"]["content"][0]["text"] == "announced"
        note = proxy.recv()
        assert proxy.close() == 0
    assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert any(e["event"] == "deleted" and e["session"] == "s1" for e in read_effects(effects))  # DELETE at the end


def test_a_server_that_refuses_the_post_is_spoken_to_over_the_2024_http_sse_transport(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path, "--legacy") as server, remote_proxy(journal, server) as proxy:
        result = proxy.request(
            "initialize",
            {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        )
        assert result["result"]["protocolVersion"] == "2024-11-05"
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert len(proxy.request("tools/list")["result"]["tools"]) == 9
        assert proxy.call("send_email", {"to": "dee"}, seq=1)["result"]["content"][0]["text"] == "sent to dee"
        broken = proxy.call("drop", seq=2)
        assert broken["error"]["code"] == UPSTREAM_EXITED
        again = proxy.call("send_email", {"to": "eve"}, seq=3)  # a new stream, a new session
        assert again["result"]["content"][0]["text"] == "sent to eve"
        assert proxy.close() == 0
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED, 2: CallState.PENDING, 3: CallState.COMPLETED}
    assert len(received(tmp_path, method="initialize")) == 2
    assert len(received(tmp_path, tool="drop")) == 1


def test_header_values_reach_the_server_and_nothing_else(journal: str, workflow: str, tmp_path: Path) -> None:
    secret = "s3cr3t-token-value"
    with faults_server(tmp_path) as server:
        with remote_proxy(
            journal,
            server,
            "--upstream-header",
            "Authorization: Bearer ${API_TOKEN}",
            "--log-level",
            "debug",
            env={"API_TOKEN": secret},
        ) as proxy:
            proxy.initialize()
            proxy.call("send_email", {"to": "hal"})
            proxy.call("drop")
            assert proxy.close() == 0
            stderr = proxy.stderr
        with remote_proxy(journal, server, "--upstream-header", "Authorization: Bearer ${UNSET_VARIABLE}") as bad:
            assert bad.wait() != 0
            refused = bad.stderr
    assert {e["auth"] for e in received(tmp_path)} == {f"Bearer {secret}"}
    assert secret not in stderr
    assert "UNSET_VARIABLE is not set" in refused
    assert "Bearer" not in refused
    assert secret.encode() not in Path(journal).read_bytes() if not journal.startswith("postgresql") else True
    assert secret not in json.dumps([str(row) for row in journal_states(journal, workflow).values()])


TASK_CALL = {
    "name": "start_task",
    "arguments": {"order": "A-17"},
    "task": {"ttl": 60000},
    "_meta": {"checkpoint_seq": 1},
}


def test_a_task_handle_is_the_journaled_result_and_a_restarted_agent_polls_the_task_it_started(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path) as server:
        with remote_proxy(journal, server) as first:
            first.initialize()
            started = first.request("tools/call", TASK_CALL)
            first.kill()  # the agent's proxy dies after the task started
        handle = started["result"]["task"]
        assert handle["status"] == "working"
        with remote_proxy(journal, server) as second:
            second.initialize()
            replayed = second.request("tools/call", TASK_CALL)
            polled = second.request("tasks/get", {"taskId": handle["taskId"]})
            outcome = second.request("tasks/result", {"taskId": handle["taskId"]})
            assert second.close() == 0
    assert replayed["result"]["task"] == handle  # the same task, not a second one
    assert replayed["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert polled["result"]["task"]["status"] == "completed"
    assert outcome["result"]["content"][0]["text"] == "shipped A-17"
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}
    assert len(received(tmp_path, tool="start_task")) == 1
