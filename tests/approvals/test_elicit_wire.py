"""`approve = "elicit"` on the wire: which clients are asked, what our elicitation looks like, and the answers
that leave the call to an operator (an error, a cancelled call, no answer in time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkpoint_mcp.intercept.asking import ASK_TIMEOUT
from checkpoint_mcp.intercept.interceptor import Interceptor
from checkpoint_mcp.intercept.policy import parse_policy
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.approval_rows import ApprovalState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED

from support import ProxyProcess, done_count, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
POLICY = '[tools.send_email]\napprove = "elicit"\n'


def started(journal: str, tmp_path: Path, capabilities: dict[str, Any]) -> ProxyProcess:
    rules = tmp_path / "policy.toml"
    rules.write_text(POLICY, encoding="utf-8")
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--policy", str(rules)]
    proxy = ProxyProcess(*argv, env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")})
    hello = {"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}
    proxy.request("initialize", hello)
    proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proxy


def send_call(proxy: ProxyProcess, ident: int) -> None:
    params = {"name": "send_email", "arguments": MAIL}
    proxy.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})


def pending_states(journal: str) -> list[ApprovalState]:
    store = open_journal(journal)
    try:
        return [found.state for found in store.approvals.approvals()]
    finally:
        store.close()


def test_a_2025_06_18_client_is_asked_and_an_error_answer_leaves_the_call_to_an_operator(
    journal: str, tmp_path: Path
) -> None:
    with started(journal, tmp_path, {"elicitation": {}}) as proxy:
        send_call(proxy, 7)
        asked = proxy.recv()
        assert asked["method"] == "elicitation/create"
        assert str(asked["id"]).startswith("checkpoint-ask-")
        assert "mode" not in asked["params"]  # form mode, as a 2025-06-18 client reads it
        assert asked["params"]["requestedSchema"] == {"type": "object", "properties": {}}
        assert json.dumps(MAIL["to"]) in asked["params"]["message"]
        proxy.send({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32601, "message": "no UI here"}})
        refused = proxy.response(7)
        assert refused["error"]["code"] == APPROVAL_REQUIRED
        assert refused["error"]["data"]["reason"] == "awaiting_approval"
        assert proxy.close() == 0, proxy.stderr
    assert pending_states(journal) == [ApprovalState.PENDING]
    assert done_count(tmp_path / "effects.jsonl") == 0


def test_a_client_that_elicits_only_by_url_gets_the_operator_refusal_at_once(journal: str, tmp_path: Path) -> None:
    with started(journal, tmp_path, {"elicitation": {"url": {}}}) as proxy:
        send_call(proxy, 7)
        refused = proxy.recv()
        assert refused["id"] == 7
        assert refused["error"]["data"]["reason"] == "awaiting_approval"
        assert proxy.close() == 0, proxy.stderr


def test_a_call_cancelled_while_its_user_is_asked_never_runs(journal: str, tmp_path: Path) -> None:
    with started(journal, tmp_path, {"elicitation": {"form": {}}}) as proxy:
        send_call(proxy, 7)
        asked = proxy.recv()
        assert asked["method"] == "elicitation/create"
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
        proxy.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}})
        pong = proxy.request("ping")  # behind the answer: once it is back, the answer was routed
        assert pong["result"] == {}
        assert all(message.get("id") != 7 for message in proxy._stash)
        assert proxy.close() == 0, proxy.stderr
    assert pending_states(journal) == [ApprovalState.PENDING]  # nobody waited: nothing decided
    assert done_count(tmp_path / "effects.jsonl") == 0


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def interceptor_on(location: str) -> tuple[Interceptor, Any]:
    """An interceptor in this process on a real SQLite journal (the pump's part, the timers, is the test's)."""
    journal = open_journal(location)
    policy = parse_policy({"tools": {"send_email": {"approve": "elicit"}}}, "policy.toml")
    config = ProxyConfig("true", journal=location, policy=policy)
    return Interceptor(config, journal, journal.lineage("w")), journal


def send_email(ident: int, arguments: dict[str, Any], **more: Any) -> bytes:
    params = {"name": "send_email", "arguments": arguments, **more}
    return line({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})


def test_no_answer_in_time_withdraws_the_question_and_refuses_as_the_operator_path(tmp_path: Path) -> None:
    interceptor, journal = interceptor_on(str(tmp_path / "j.db"))
    try:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t"}}
        interceptor.from_client([line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})])
        routed = interceptor.from_client([send_email(2, {})])
        assert routed.to_upstream == []
        [request] = [json.loads(sent) for sent in routed.to_client]
        [(ask_id, delay)] = interceptor.take_timers()
        assert (ask_id, delay) == (request["id"], ASK_TIMEOUT)
        withdrawn, refused = (json.loads(sent) for sent in interceptor.probe_expired(ask_id))
        assert withdrawn == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": ask_id, "reason": f"no answer within {ASK_TIMEOUT:g}s"},
        }
        assert (refused["id"], refused["error"]["data"]["reason"]) == (2, "awaiting_approval")
        # A late answer is dropped: not forwarded upstream, and it runs nothing.
        late = interceptor.from_client([line({"jsonrpc": "2.0", "id": ask_id, "result": {"action": "accept"}})])
        assert (late.to_upstream, late.to_client) == ([], [])
        assert interceptor.outstanding() == 1  # the initialize alone (no upstream answers it here): not the call
    finally:
        journal.close()


def test_a_2026_retry_decides_only_the_request_of_its_own_exact_call(tmp_path: Path) -> None:
    interceptor, journal = interceptor_on(str(tmp_path / "j.db"))
    try:
        meta = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
        first = interceptor.from_client([send_email(1, MAIL, _meta=meta)])
        [answer] = [json.loads(sent) for sent in first.to_client]
        result = answer["result"]
        assert result["resultType"] == "input_required"
        asked = result["inputRequests"]["checkpoint/approval"]
        assert asked["method"] == "elicitation/create"
        assert MAIL["subject"] in asked["params"]["message"]
        state = result["requestState"]
        # The same state and a yes, on other arguments: the request of the first call stays undecided, and the
        # other call goes through the gate as itself (its own request, refused).
        accept = {"checkpoint/approval": {"action": "accept", "content": {}}}
        other = {**MAIL, "to": "eve@example.com"}
        forged = interceptor.from_client([send_email(2, other, _meta=meta, requestState=state, inputResponses=accept)])
        [refused] = [json.loads(sent) for sent in forged.to_client]
        assert refused["error"]["data"]["reason"] == "awaiting_approval"
        assert interceptor.flush().to_upstream == []
        store = journal
        assert [found.state for found in store.approvals.approvals()] == [ApprovalState.PENDING, ApprovalState.PENDING]
        # The right call with the yes: granted, and sent upstream without our two members.
        retry = interceptor.from_client([send_email(3, MAIL, _meta=meta, requestState=state, inputResponses=accept)])
        assert retry.to_client == []
        [sent] = retry.to_upstream + interceptor.flush().to_upstream
        params = json.loads(sent)["params"]
        assert "requestState" not in params
        assert "inputResponses" not in params
        assert params["arguments"] == MAIL
        assert [found.state for found in store.approvals.approvals()] == [ApprovalState.PENDING, ApprovalState.USED]
    finally:
        journal.close()
