"""A remote server that forgets the session (it restarted, or the session expired): the proxy starts a new one.

A 404 for the session id proves the request did not run, so the proxy starts a new session with the client's own
``initialize`` and ``notifications/initialized``, sends again the state the client had set up (its logging level,
its resource subscriptions), then the request that met the 404, once. The client never sees it; a journaled call
is journaled once; stderr says what happened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import UPSTREAM_EXITED, UPSTREAM_REFUSED

from httpservers import HttpServer, faults_server, sdk_server
from support import ProxyProcess, journal_states, read_effects, wait_until


def remote_proxy(journal: str, server: HttpServer) -> ProxyProcess:
    return ProxyProcess("--upstream-url", server.url, "--journal", journal)


def received(tmp_path: Path, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in read_effects(tmp_path / "effects.jsonl")
        if e["event"] == "received" and all(e.get(k) == v for k, v in match.items())
    ]


@pytest.mark.parametrize("first_to_meet_it", ["the call", "the GET stream"])
def test_an_expired_session_is_renewed_unseen_and_the_call_that_met_it_runs_once(
    journal: str, workflow: str, tmp_path: Path, first_to_meet_it: str
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        assert proxy.request("logging/setLevel", {"level": "debug"})["result"] == {}
        for method, uri in [("subscribe", "file:///a"), ("subscribe", "file:///b"), ("unsubscribe", "file:///b")]:
            assert "result" in proxy.request(f"resources/{method}", {"uri": uri})
        assert proxy.call("forget", seq=1)["result"]["content"][0]["text"] == "forgot"
        if first_to_meet_it == "the GET stream":
            wait_until(lambda: "forgot our session" in proxy.stderr, what="the GET stream to meet the 404")
        reply = proxy.call("send_email", {"to": "bob"}, seq=2)
        assert reply["result"]["content"][0]["text"] == "sent to bob"
        assert proxy.call("send_email", {"to": "cy"}, seq=3)["result"]["content"][0]["text"] == "sent to cy"
        assert proxy.close() == 0
        stderr = proxy.stderr
    assert journal_states(journal, workflow) == {
        1: CallState.COMPLETED,
        2: CallState.COMPLETED,
        3: CallState.COMPLETED,
    }
    # The new session began with the client's own bytes, and got back what the client had set up.
    first, second = received(tmp_path, method="initialize")
    assert (first["session"], second["session"]) == (None, None)
    assert first["raw"] == second["raw"]
    assert [e["session"] for e in received(tmp_path, method="notifications/initialized")] == ["s1", "s2"]
    assert [e["session"] for e in received(tmp_path, method="logging/setLevel")] == ["s1", "s2"]
    renewed = [e for e in received(tmp_path, session="s2") if e["method"].startswith("resources/")]
    assert [(e["method"], e["raw"].count("file:///a")) for e in renewed] == [("resources/subscribe", 1)]
    # bob's call ran once: in the new session (in the old one it met the 404, which proves it did not run).
    assert [e["session"] for e in received(tmp_path, tool="send_email")][-2:] == ["s2", "s2"]
    assert [e for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "done"] == [
        {"event": "done", "tool": "send_email"},
        {"event": "done", "tool": "send_email"},
    ]
    assert "forgot our session (HTTP 404)" in stderr
    assert "started a new session with the remote upstream (protocol 2025-11-25)" in stderr
    assert "the logging level 'debug', the subscription to file:///a;" in stderr
    assert "tasks" in stderr  # what could not be carried over is named


def test_a_new_session_with_another_protocol_version_refuses_the_call_that_met_the_expiry(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        proxy.call("forget", {"version": "2025-06-18"}, seq=1)
        refused = proxy.call("send_email", {"to": "dan"}, seq=2)
        assert proxy.close() == 0
    assert refused["error"]["code"] == UPSTREAM_REFUSED
    assert refused["error"]["data"]["status"] == 404
    assert "negotiated protocol version '2025-06-18', not the client's '2025-11-25'" in refused["error"]["message"]
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED, 2: CallState.FAILED}
    assert not [e for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "done"]


def test_a_refused_new_initialize_refuses_the_call_and_the_next_message_tries_again(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        proxy.call("forget", {"refuse": True}, seq=1)
        refused = proxy.call("send_email", {"to": "eve"}, seq=2)
        assert refused["error"]["code"] == UPSTREAM_REFUSED
        assert "refused the new initialize: not today" in refused["error"]["message"]
        again = proxy.call("send_email", {"to": "eve"}, seq=3)
        assert proxy.close() == 0
    assert again["error"]["code"] == UPSTREAM_REFUSED
    assert len(received(tmp_path, method="initialize")) == 3
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED, 2: CallState.FAILED, 3: CallState.FAILED}
    assert not [e for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "done"]


def test_a_real_server_restarted_on_the_same_port_costs_no_call_and_journals_each_once(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with sdk_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        assert proxy.call("send_email", {"to": "ann"}, seq=1)["result"]["content"][0]["text"] == "sent to ann"
        server.restart()  # SIGKILL, then a new process on the same port: every session is gone
        assert proxy.call("send_email", {"to": "bob"}, seq=2)["result"]["content"][0]["text"] == "sent to bob"
        server.restart()
        assert proxy.call("send_email", {"to": "cy"}, seq=3)["result"]["content"][0]["text"] == "sent to cy"
        assert proxy.close() == 0
        stderr = proxy.stderr
    assert journal_states(journal, workflow) == {
        1: CallState.COMPLETED,
        2: CallState.COMPLETED,
        3: CallState.COMPLETED,
    }
    sent = [e for e in read_effects(effects) if e["tool"] == "send_email"]
    assert [e["arguments"]["to"] for e in sent] == ["ann", "bob", "cy"]
    assert len({e["pid"] for e in sent}) == 3  # three server processes, one call each
    assert stderr.count("started a new session with the remote upstream") == 2


def test_a_restarted_server_leaves_the_call_in_flight_in_doubt_and_the_next_call_runs_in_a_new_session(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with sdk_server(tmp_path) as server, remote_proxy(journal, server) as proxy:
        proxy.initialize()
        proxy.send(
            {
                "jsonrpc": "2.0",
                "id": "in-flight",
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 30}, "_meta": {"checkpoint_seq": 1}},
            }
        )
        wait_until(lambda: any(e["tool"] == "slow" for e in read_effects(effects)), what="the call to start")
        server.restart()
        # The call in flight may have run: it stays in doubt, never sent again.
        assert proxy.response("in-flight")["error"]["code"] == UPSTREAM_EXITED
        assert proxy.call("send_email", {"to": "fay"}, seq=2)["result"]["content"][0]["text"] == "sent to fay"
        assert proxy.close() == 0
    assert journal_states(journal, workflow) == {1: CallState.PENDING, 2: CallState.COMPLETED}
    assert [e["arguments"]["to"] for e in read_effects(effects) if e["tool"] == "send_email"] == ["fay"]
    assert len([e for e in read_effects(effects) if e["tool"] == "slow"]) == 1
