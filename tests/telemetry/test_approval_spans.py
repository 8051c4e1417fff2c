"""Approval gates in traces: the span of a call refused for an approval says so (``awaiting_approval``,
``approval_denied``), the span of a call that ran on one names it (``checkpoint.approval``), received by a real
OTLP/HTTP receiver from a real `checkpoint` process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.refusals import APPROVAL_REQUIRED

from otlp import Receiver
from support import ProxyProcess, decide_request, done_count, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
OTHER = {"to": "eve@example.com", "subject": "Your refund"}
SPAN = "tools/call send_email"


@pytest.fixture
def receiver() -> Any:
    with Receiver() as started:
        yield started


def decide(journal: str, approval_id: int, grant: bool) -> None:
    """A person's decision, stored in the journal as `checkpoint journal approve` stores it."""
    decide_request(journal, approval_id, grant, None if grant else "wrong customer")


def test_refused_and_approved_calls_carry_the_approval_decision_and_id(tmp_path: Path, receiver: Receiver) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    env = {**receiver.env(), "EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--policy", str(policy)]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        waiting = proxy.call("send_email", MAIL)["error"]
        assert waiting["code"] == APPROVAL_REQUIRED
        other = proxy.call("send_email", OTHER)["error"]["data"]["approval"]
        decide(journal, waiting["data"]["approval"], True)
        decide(journal, other, False)
        ran = proxy.call("send_email", MAIL)
        assert ran["result"]["_meta"]["checkpoint/journal"]["approval"] == waiting["data"]["approval"]
        denied = proxy.call("send_email", OTHER)["error"]
        assert denied["data"]["reason"] == "approval_denied"
        assert proxy.close() == 0, proxy.stderr
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1

    spans = receiver.wait_for_spans(lambda s: sum(x["name"] == SPAN and x["kind"] == "SERVER" for x in s) == 4)
    asked, asked_other, approved, refused = sorted(
        (x for x in spans if x["name"] == SPAN and x["kind"] == "SERVER"), key=lambda x: x["start"]
    )
    for span, approval_id in ((asked, waiting["data"]["approval"]), (asked_other, other)):
        assert span["attributes"]["checkpoint.decision"] == "awaiting_approval"
        assert span["attributes"]["checkpoint.approval"] == approval_id
        assert span["attributes"]["error.type"] == str(APPROVAL_REQUIRED)
        assert span["status_message"] == "approval required"  # the code's name: the message quotes no arguments
        assert not [x for x in spans if x["parent"] == span["span_id"] and x["kind"] == "CLIENT"]  # never went up
    assert approved["attributes"]["checkpoint.decision"] == "run"
    assert approved["attributes"]["checkpoint.approval"] == waiting["data"]["approval"]
    assert approved["attributes"]["checkpoint.seq"] == ran["result"]["_meta"]["checkpoint/journal"]["seq"]
    assert "error.type" not in approved["attributes"]
    assert [x["kind"] for x in spans if x["parent"] == approved["span_id"] and x["name"] == SPAN] == ["CLIENT"]
    assert refused["attributes"]["checkpoint.decision"] == "approval_denied"
    assert refused["attributes"]["checkpoint.approval"] == other
