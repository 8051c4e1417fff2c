"""Journaling through `checkpoint serve`: replays across sessions, crashes, re-sent calls joining, id renaming."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
from pathlib import Path
from typing import Any

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import (
    DIVERGENCE,
    IN_DOUBT,
    LIMIT_REACHED,
    REPEAT_REFUSED,
    STILL_IN_FLIGHT,
    UPSTREAM_EXITED,
)
from gatewayproc import MODERN, effects_gateway, initialize, modern_call, request

from support import DEFAULT_TIMEOUT, done_count, journal_states, read_effects, wait_until

WORKFLOW = "order-7"
PATH = f"/w/{WORKFLOW}/mcp"


def session_call(port: int, session: str, ident: Any, tool: str, arguments: dict[str, Any], **meta: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    if meta:
        body["params"]["_meta"] = meta
    reply = request(port, "POST", PATH, body, {"Mcp-Session-Id": session})
    assert reply.status == 200, reply.body
    return reply.message()


def modern(port: int, ident: Any, tool: str, arguments: dict[str, Any], **meta: Any) -> Any:
    reply = request(port, "POST", PATH, modern_call(ident, tool, arguments, **meta), MODERN)
    assert reply.status == 200, reply.body
    return reply.message()


def test_a_call_journaled_in_one_session_replays_in_another_without_running_again(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with effects_gateway(tmp_path, "--journal", journal) as gateway:
        first = initialize(gateway.port, PATH)
        answer = session_call(gateway.port, first, 1, "send_email", {"to": "ann"}, checkpoint_seq=1)
        assert answer["result"]["_meta"]["checkpoint/journal"] == {"workflow": WORKFLOW, "seq": 1, "replayed": False}
        second = initialize(gateway.port, PATH)
        again = session_call(gateway.port, second, 1, "send_email", {"to": "ann"}, checkpoint_seq=1)
        assert again["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
        assert again["result"]["content"] == answer["result"]["content"]
        # A 2026-07-28 request on the same workflow sees the same journal.
        modern_again = modern(gateway.port, 9, "send_email", {"to": "ann"}, checkpoint_seq=1)
        assert modern_again["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(tmp_path / "effects.jsonl") == 1
    assert journal_states(journal, WORKFLOW) == {1: CallState.COMPLETED}


def test_calls_of_two_sessions_on_one_workflow_take_distinct_sequences(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with effects_gateway(tmp_path, "--journal", journal) as gateway:
        a, b = initialize(gateway.port, PATH), initialize(gateway.port, PATH)
        seqs = [
            session_call(gateway.port, session, i, "send_quiet", {"n": i})["result"]["_meta"]["checkpoint/journal"][
                "seq"
            ]
            for i, session in enumerate([a, b, a, b])
        ]
    assert sorted(seqs) == [1, 2, 3, 4]
    assert done_count(tmp_path / "effects.jsonl") == 4


def test_a_gateway_killed_after_the_pending_commit_leaves_the_call_in_doubt(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    env = {"CHECKPOINT_DEBUG_TRIGGER": "after_pending_commit"}
    with effects_gateway(tmp_path, "--journal", journal, env=env) as gateway:
        session = initialize(gateway.port, PATH)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send_email"}}
        body["params"]["arguments"] = {"to": "ann"}
        body["params"]["_meta"] = {"checkpoint_seq": 1}
        with contextlib.suppress(http.client.HTTPException, OSError):  # the gateway dies mid-request, as armed
            request(gateway.port, "POST", PATH, body, {"Mcp-Session-Id": session})
        assert gateway.proc.wait(timeout=DEFAULT_TIMEOUT) == -9
    assert journal_states(journal, WORKFLOW) == {1: CallState.PENDING}
    with effects_gateway(tmp_path, "--journal", journal) as gateway:
        session = initialize(gateway.port, PATH)
        refused = session_call(gateway.port, session, 2, "send_email", {"to": "ann"}, checkpoint_seq=1)
        assert refused["error"]["code"] == IN_DOUBT
        assert refused["error"]["data"]["reason"] == "in_doubt"
    assert done_count(tmp_path / "effects.jsonl") == 0


def test_a_re_sent_call_joins_the_original_in_flight_and_returns_its_outcome(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    with effects_gateway(tmp_path, "--journal", journal) as gateway, concurrent.futures.ThreadPoolExecutor(2) as pool:
        original = pool.submit(modern, gateway.port, 1, "slow", {"seconds": 1.0, "label": "x"}, checkpoint_key="k1")
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the original to start")
        # The client's stream broke; as the spec says, it re-sends the request under a new id.
        resent = modern(gateway.port, 2, "slow", {"seconds": 1.0, "label": "x"}, checkpoint_key="k1")
        first = original.result(timeout=DEFAULT_TIMEOUT)
    assert first["id"] == 1
    assert resent["id"] == 2
    assert resent["result"]["content"] == first["result"]["content"]
    assert resent["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(effects, "slow") == 1


def test_a_re_sent_call_is_refused_as_still_in_flight_after_the_join_timeout(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    with effects_gateway(tmp_path, "--journal", journal, "--join-timeout", "0.3") as gateway:
        session = initialize(gateway.port, PATH)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            original = pool.submit(
                session_call, gateway.port, session, 1, "slow", {"seconds": 1.5, "label": "y"}, checkpoint_seq=4
            )
            wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the original")
            other = initialize(gateway.port, PATH)
            refused = session_call(gateway.port, other, 1, "slow", {"seconds": 1.5, "label": "y"}, checkpoint_seq=4)
            assert refused["error"]["code"] == STILL_IN_FLIGHT
            assert refused["error"]["data"]["seq"] == 4
            # A different call at the sequence in flight is refused at once: it has nothing to join.
            different = session_call(gateway.port, other, 2, "send_email", {"to": "z"}, checkpoint_seq=4)
            assert different["error"]["code"] == IN_DOUBT
            assert different["error"]["data"]["reason"] == "in_flight"
            assert original.result(timeout=DEFAULT_TIMEOUT)["result"]["content"][0]["text"] == "slow y done"
    assert done_count(effects, "slow") == 1
    assert done_count(effects, "send_email") == 0


def test_two_clients_sending_the_same_id_to_one_workflow_each_read_their_own_answer(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with effects_gateway(tmp_path, "--journal", journal) as gateway, concurrent.futures.ThreadPoolExecutor(4) as pool:
        replies = list(
            pool.map(lambda label: modern(gateway.port, 1, "slow", {"seconds": 0.5, "label": label}), "abcd")
        )
    assert [reply["id"] for reply in replies] == [1, 1, 1, 1]
    assert [reply["result"]["content"][0]["text"] for reply in replies] == [f"slow {x} done" for x in "abcd"]
    assert done_count(tmp_path / "effects.jsonl", "slow") == 4


def test_an_upstream_that_dies_mid_call_answers_the_call_as_in_doubt(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with effects_gateway(tmp_path, "--journal", journal) as gateway:
        session = initialize(gateway.port, PATH)
        died = session_call(gateway.port, session, 1, "die", {"code": 3}, checkpoint_seq=1)
        assert died["error"]["code"] == UPSTREAM_EXITED
        assert (
            request(
                gateway.port, "POST", PATH, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"Mcp-Session-Id": session}
            ).status
            == 404
        )
        fresh = initialize(gateway.port, PATH)
        again = session_call(gateway.port, fresh, 3, "die", {"code": 3}, checkpoint_seq=1)
        assert again["error"]["code"] == IN_DOUBT
    assert journal_states(journal, WORKFLOW) == {1: CallState.PENDING}


def test_metrics_count_calls_by_outcome_and_refusals_by_code(tmp_path: Path) -> None:
    with effects_gateway(tmp_path, "--journal", str(tmp_path / "j.db")) as gateway:
        modern(gateway.port, 1, "send_email", {"to": "a"}, checkpoint_seq=1)
        modern(gateway.port, 2, "send_email", {"to": "a"}, checkpoint_seq=1)
        modern(gateway.port, 3, "send_email", {"to": "b"}, checkpoint_seq=1)  # divergence
        modern(gateway.port, 4, "fail", {"reason": "r"})
        text = request(gateway.port, "GET", "/metrics").body.decode()
        health = request(gateway.port, "GET", "/healthz")
    samples = dict(
        line.rsplit(" ", 1)
        for line in text.splitlines()
        if line and not line.startswith("#") and "_created" not in line
    )
    assert float(samples['checkpoint_calls_total{outcome="completed"}']) == 1
    assert float(samples['checkpoint_calls_total{outcome="replayed"}']) == 1
    assert float(samples['checkpoint_calls_total{outcome="refused"}']) == 1
    assert float(samples['checkpoint_calls_total{outcome="failed"}']) == 1
    assert float(samples[f'checkpoint_refusals_total{{code="{DIVERGENCE}"}}']) == 1
    assert float(samples["checkpoint_replays_total"]) == 1
    assert float(samples["checkpoint_in_doubt_calls"]) == 0
    assert float(samples["checkpoint_journal_commit_seconds_count"]) >= 3
    assert health.status == 200
    assert json.loads(health.body)["journal"] == "ok"


def test_a_limit_holds_on_a_gateway_over_an_sqlite_journal_across_its_sessions(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\nlimit = { calls = 2, per = "1h" }\n', encoding="utf-8")
    journal = str(tmp_path / "j.db")
    with effects_gateway(tmp_path, "--journal", journal, "--policy", str(policy)) as gateway:
        first, second = (initialize(gateway.port, PATH) for _ in range(2))
        answers = [
            session_call(gateway.port, first, 1, "send_email", {"to": "a"}),
            session_call(gateway.port, second, 1, "send_email", {"to": "b"}),
            modern(gateway.port, 3, "send_email", {"to": "c"}),
        ]
    assert ["result" in answer for answer in answers] == [True, True, False]
    assert answers[2]["error"]["code"] == LIMIT_REACHED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2


def test_a_repeat_runs_within_an_mcp_session_but_not_across_sessions_nor_among_stateless_requests(
    tmp_path: Path,
) -> None:
    """A session-era MCP session is one agent's session: its own repeat runs under within_session = "run"; another
    session's, and a 2026-07-28 request's (which belongs to no session), is caught."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\nrepeat = "refuse"\nwithin_session = "run"\n', encoding="utf-8")
    mail = {"to": "bob", "subject": "Invoice"}
    with effects_gateway(tmp_path, "--journal", str(tmp_path / "j.db"), "--policy", str(policy)) as gateway:
        first, second = (initialize(gateway.port, PATH) for _ in range(2))
        answers = [
            session_call(gateway.port, first, 1, "send_email", mail),
            session_call(gateway.port, first, 2, "send_email", mail),
            session_call(gateway.port, second, 1, "send_email", mail),
            modern(gateway.port, 3, "send_email", {"to": "eve", "subject": "Hello"}),
            modern(gateway.port, 4, "send_email", {"to": "eve", "subject": "Hello"}),
        ]
    assert ["result" in answer for answer in answers] == [True, True, False, True, False]
    assert answers[2]["error"]["code"] == answers[4]["error"]["code"] == REPEAT_REFUSED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 3
