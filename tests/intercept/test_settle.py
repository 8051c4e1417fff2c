"""The pure part of settling an in-doubt call: probe verdicts (a table), probe arguments, idempotency keys."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.intercept.policy import parse_policy
from checkpoint_mcp.intercept.policy.pointer import PointerError
from checkpoint_mcp.intercept.settle_rules import (
    SETTLED_META,
    Verdict,
    idempotency_key,
    judge,
    probe_arguments,
    probe_request,
    probed_outcome,
    with_key_argument,
)

PROBE_TABLE = {
    "tool": "list_outbox",
    "arguments": {"to": "/to", "first": "/cc/0"},
    "happened_if": {"pointer": "/count", "equals": 1},
    "not_happened_if": {"pointer": "/count", "equals": 0},
}


def probe(**extra: Any) -> Any:
    policy = parse_policy({"tools": {"send_email": {"probe": {**PROBE_TABLE, **extra}}}}, "p.toml")
    found = policy.rule_for("send_email").probe
    assert found is not None
    return found


def answer(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "p", "result": result}


def structured(value: Any) -> dict[str, Any]:
    return answer({"content": [], "structuredContent": value})


@pytest.mark.parametrize(
    ("response", "verdict", "reason"),
    [
        (structured({"count": 1}), Verdict.HAPPENED, "happened_if matched"),
        (structured({"count": 0}), Verdict.NOT_HAPPENED, "not_happened_if matched"),
        (structured({"count": 2}), Verdict.UNKNOWN, "neither happened_if nor not_happened_if matched"),
        (structured({"total": 1}), Verdict.UNKNOWN, "neither happened_if nor not_happened_if matched"),
        (structured("1"), Verdict.UNKNOWN, "neither happened_if nor not_happened_if matched"),
        (answer({"content": []}), Verdict.UNKNOWN, "the probe's result has no structuredContent"),
        (answer({"isError": True, "structuredContent": {"count": 1}}), Verdict.UNKNOWN, "the probe's tool reported"),
        (answer(["not an object"]), Verdict.UNKNOWN, "the probe's answer has no result object"),
        (
            {"jsonrpc": "2.0", "id": "p", "error": {"code": -1, "message": "x"}},
            Verdict.UNKNOWN,
            "answered with an error",
        ),
    ],
)
def test_a_probe_settles_only_what_a_matcher_proves(response: dict[str, Any], verdict: Verdict, reason: str) -> None:
    finding = judge(probe(), {"to": "bob"}, response)
    assert finding.verdict is verdict
    assert reason in finding.reason


def test_both_matchers_at_once_prove_nothing() -> None:
    both = probe(not_happened_if={"pointer": "/count", "exists": True})
    assert judge(both, {}, structured({"count": 1})).verdict is Verdict.UNKNOWN


def test_did_not_happen_is_not_believed_for_a_call_younger_than_settle_after() -> None:
    careful = probe(settle_after="1h")
    young = judge(careful, {}, structured({"count": 0}), utc_now())
    assert young.verdict is Verdict.UNKNOWN
    assert "may still land" in young.reason
    assert judge(careful, {}, structured({"count": 0}), "2020-01-01T00:00:00.000Z").verdict is Verdict.NOT_HAPPENED
    assert judge(careful, {}, structured({"count": 1}), utc_now()).verdict is Verdict.HAPPENED  # ran: ran


def test_probe_arguments_come_from_the_call_by_json_pointer() -> None:
    assert probe_arguments(probe(), {"to": "bob", "cc": ["ann", "eve"]}) == {"to": "bob", "first": "ann"}
    with pytest.raises(PointerError):
        probe_arguments(probe(), {"to": "bob"})


def test_a_probe_request_carries_the_calls_protocol_meta_but_none_of_checkpoints() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "checkpoint_seq": 3}
    line = json.loads(probe_request("checkpoint-probe-1", probe(), {"to": "bob"}, meta))
    assert line["params"] == {
        "name": "list_outbox",
        "arguments": {"to": "bob"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    }


def test_keys_are_stable_per_call_and_distinct_across_calls_and_workflows() -> None:
    key = idempotency_key("w", 1, None)
    assert key == idempotency_key("w", 1, None)
    assert key.startswith("checkpoint-")
    assert len({key, idempotency_key("w", 2, None), idempotency_key("v", 1, None), idempotency_key("w", 1, "k")}) == 4
    assert idempotency_key("w", 1, "k") == idempotency_key("w", 9, "k")  # the agent's own key names the call


def test_the_key_is_added_to_the_arguments_and_every_other_byte_is_kept() -> None:
    line = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pay","arguments":{"cents": 1.50}}}\n'
    edited = with_key_argument(line, "idempotency_key", "K")
    assert edited == (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pay","arguments":'
        b'{"idempotency_key":"K","cents": 1.50}}}\n'
    )
    bare = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pay"}}'
    assert json.loads(with_key_argument(bare, "k", "K"))["params"]["arguments"] == {"k": "K"}
    own = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pay","arguments":{"k":"mine"}}}'
    assert with_key_argument(own, "k", "K") == own


def test_a_probed_outcome_says_the_call_ran_and_carries_the_evidence() -> None:
    finding = judge(probe(), {"to": "bob"}, structured({"count": 1}))
    outcome = json.loads(probed_outcome(finding, "w", 3))
    assert outcome["isError"] is False
    assert "structuredContent" not in outcome
    assert "never received" in outcome["content"][0]["text"]
    assert outcome["_meta"][SETTLED_META]["result"]["structuredContent"] == {"count": 1}
