"""Approval gates through `checkpoint serve`: the flow over HTTP in both eras on SQLite, and two replicas on one
PostgreSQL journal racing to use one approval: exactly one of them runs the call."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED, IN_DOUBT
from gatewayproc import MODERN, GatewayProcess, Reply, effects_gateway, initialize, modern_call, request, sse_data

from support import (
    APPROVED_CALL_CRASHES,
    DEFAULT_TIMEOUT,
    approval_requests,
    decide_request,
    done_count,
    journal_calls,
    read_effects,
)

WORKFLOW = "approvals-gw"
PATH = f"/w/{WORKFLOW}/mcp"
MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
POLICY = '[tools.send_email]\napprove = "operator"\n'

CLIENT_INFO = "io.modelcontextprotocol/clientInfo"  # how a 2026-07-28 client names itself, in each request

Caller = Callable[[dict[str, Any]], Any]


def policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    return str(path)


def caller(gateway: GatewayProcess, era: str) -> Caller:
    """send_email(arguments) through ``gateway``: in a session (2025-11-25) or sessionless (2026-07-28)."""
    session = initialize(gateway.port, PATH, version="2025-11-25") if era == "2025-11-25" else None
    sent = iter(range(1, 1000))

    def call(arguments: dict[str, Any]) -> Any:
        ident = next(sent)
        if session is None:
            body = modern_call(ident, "send_email", arguments, **{CLIENT_INFO: {"name": "t", "version": "1"}})
            reply = request(gateway.port, "POST", PATH, body, MODERN, timeout=60)
        else:
            body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call"}
            body["params"] = {"name": "send_email", "arguments": arguments}
            headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
            reply = request(gateway.port, "POST", PATH, body, headers, timeout=60)
        assert reply.status == 200, reply.body
        return answer(reply)

    return call


def answer(reply: Reply) -> Any:
    """The JSON-RPC answer of ``reply``: its JSON body, or the last event of its SSE stream (2025-11-25 streams
    open with an empty priming event)."""
    if not reply.headers.get("content-type", "").startswith("text/event-stream"):
        return reply.json()
    return json.loads([data for data in sse_data(reply.body) if data][-1])


def requests_of(location: str) -> dict[int, Approval]:
    return {found.id: found for found in approval_requests(location, WORKFLOW)}


def decide(location: str, approval_id: int, grant: bool = True) -> None:
    decide_request(location, approval_id, grant, None if grant else "not today")


def waiting(reply: Any) -> int:
    """The request a refusal names (and that it is a refusal for want of an approval)."""
    assert reply.get("error", {}).get("code") == APPROVAL_REQUIRED, reply
    approval_id = reply["error"]["data"]["approval"]
    assert isinstance(approval_id, int)
    return approval_id


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_the_approval_flow_works_over_http(tmp_path: Path, era: str) -> None:
    location = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    with effects_gateway(tmp_path, "--journal", location, "--policy", policy(tmp_path)) as gateway:
        call = caller(gateway, era)
        first = waiting(call(MAIL))
        assert waiting(call(MAIL)) == first  # sent again while it waits: the same request
        other = waiting(call({**MAIL, "to": "eve@example.com"}))  # other arguments: a request of their own
        assert other != first
        decide(location, first)
        ran = call(MAIL)
        assert ran["result"]["content"][0]["text"] == "sent to bob@example.com", ran
        renewed = waiting(call(MAIL))  # the approval is spent: the same call asks anew
        assert renewed not in (first, other)
        decide(location, other, grant=False)
        denied = call({**MAIL, "to": "eve@example.com"})
        assert denied["error"]["data"]["reason"] == "approval_denied", denied
    assert done_count(effects, "send_email") == 1
    found = requests_of(location)
    assert {i: a.state for i, a in found.items()} == {
        first: ApprovalState.USED,
        other: ApprovalState.DENIED,
        renewed: ApprovalState.PENDING,
    }
    asked_by = json.loads(found[first].requested_by)
    assert asked_by["pid"] == gateway.proc.pid
    assert asked_by["client"] == {"name": "t", "version": "1"}  # from initialize, or (2026-07-28) the call's _meta
    assert {row.state for row in journal_calls(location, WORKFLOW)} == {CallState.COMPLETED}


@contextmanager
def fleet(pg_url: str, tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    rules = policy(tmp_path)
    with ExitStack() as stack:
        yield [stack.enter_context(effects_gateway(tmp_path, "--journal", pg_url, "--policy", rules)) for _ in range(2)]


def test_two_replicas_racing_to_use_one_approval_run_one_call(pg_url: str, tmp_path: Path) -> None:
    """Each round: a call refused through replica A, approved, then sent to both replicas at once (a barrier).
    The approval is used with a compare-and-set in the transaction that reserves the call, so one replica runs
    it and the other finds it spent and makes a new request."""
    rounds = 12
    effects = tmp_path / "effects.jsonl"
    used: list[int] = []
    with fleet(pg_url, tmp_path) as replicas, concurrent.futures.ThreadPoolExecutor(2) as pool:
        calls = [caller(replica, "2026-07-28") for replica in replicas]
        for n in range(rounds):
            arguments = {"to": f"bob{n}@example.com", "subject": f"Invoice {n}"}
            approval_id = waiting(calls[0](arguments))
            decide(pg_url, approval_id)
            barrier = threading.Barrier(2)

            def fire(call: Caller, arguments: dict[str, Any] = arguments, barrier: threading.Barrier = barrier) -> Any:
                barrier.wait(timeout=DEFAULT_TIMEOUT)
                return call(arguments)

            answers = [f.result(timeout=DEFAULT_TIMEOUT) for f in [pool.submit(fire, c) for c in calls]]
            ran = [a for a in answers if "result" in a]
            assert len(ran) == 1, f"round {n}: {answers}"
            refused = [a for a in answers if "error" in a]
            assert waiting(refused[0]) != approval_id, f"round {n}: {answers}"
            done = [e for e in read_effects(effects) if e["event"] == "done" and e["arguments"] == arguments]
            assert len(done) == 1, f"round {n}: the upstream ran the call {len(done)} times"
            used.append(approval_id)
    found = requests_of(pg_url)
    assert all(found[i].state is ApprovalState.USED for i in used)
    assert sorted(found[i].used_seq or 0 for i in used) == sorted(r.seq for r in journal_calls(pg_url, WORKFLOW))
    replicas_asking = {json.loads(a.requested_by).get("replica") for a in found.values()}
    assert None not in replicas_asking  # each request names the replica that made it: both made some
    assert len(replicas_asking) == 2
    assert done_count(effects, "send_email") == rounds


def test_the_approval_flow_across_two_replicas(pg_url: str, tmp_path: Path) -> None:
    """Asked on one replica, run on the other once; then spent, other arguments, denial and expiry, across both."""
    effects = tmp_path / "effects.jsonl"
    with fleet(pg_url, tmp_path) as (a, b):
        on_a, on_b = caller(a, "2026-07-28"), caller(b, "2025-11-25")
        first = waiting(on_a(MAIL))
        assert waiting(on_b(MAIL)) == first  # one request per call, whichever replica is asked
        decide(pg_url, first)
        assert "result" in on_b(MAIL)
        assert waiting(on_a(MAIL)) not in (first, None)  # spent: the other replica does not run it again
        other_mail = {**MAIL, "to": "eve@example.com"}
        other = waiting(on_b(other_mail))
        decide(pg_url, other, grant=False)
        assert on_a(other_mail)["error"]["data"]["reason"] == "approval_denied"
        late_mail = {**MAIL, "to": "zed@example.com"}
        late = waiting(on_a(late_mail))
        decide(pg_url, late)
        store = open_journal(pg_url)
        try:  # age the grant instead of sleeping
            with store.transaction():
                store.execute("UPDATE approvals SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", (late,))
        finally:
            store.close()
        assert waiting(on_b(late_mail)) != late  # expired: a fresh request
    assert done_count(effects, "send_email") == 1
    states = {i: found.state for i, found in requests_of(pg_url).items()}
    assert (states[first], states[other], states[late]) == (
        ApprovalState.USED,
        ApprovalState.DENIED,
        ApprovalState.EXPIRED,
    )


@pytest.mark.parametrize("point", APPROVED_CALL_CRASHES)
def test_a_replica_killed_on_an_approved_call_leaves_the_other_nothing_to_run_it_with(
    pg_url: str, tmp_path: Path, point: str
) -> None:
    """Replica A SIGKILLs itself on the approved call; replica B, sent the same call, finds it in doubt (it may
    have run: nobody is asked to approve it again) or, once completed, makes a new request."""
    effects = tmp_path / "effects.jsonl"
    rules = policy(tmp_path)
    armed = {"CHECKPOINT_DEBUG_TRIGGER": point}
    with (
        effects_gateway(tmp_path, "--journal", pg_url, "--policy", rules, env=armed) as doomed,
        effects_gateway(tmp_path, "--journal", pg_url, "--policy", rules) as survivor,
    ):
        to_survivor = caller(survivor, "2026-07-28")
        approval_id = waiting(to_survivor(MAIL))
        decide(pg_url, approval_id)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            caller(doomed, "2026-07-28")(MAIL)  # it dies before it answers
        assert doomed.proc.wait(DEFAULT_TIMEOUT) == -9, doomed.stderr
        state, possible = APPROVED_CALL_CRASHES[point]
        assert {found.id: found.state for found in requests_of(pg_url).values()} == {approval_id: ApprovalState.USED}
        assert [row.state for row in journal_calls(pg_url, WORKFLOW)] == [state]
        runs = done_count(effects, "send_email")
        assert runs in possible
        again = to_survivor(MAIL)
        if state is CallState.COMPLETED:
            assert waiting(again) != approval_id
        else:
            assert again["error"]["code"] == IN_DOUBT, again
    assert done_count(effects, "send_email") == runs
