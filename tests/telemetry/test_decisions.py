"""What a span says the journal decided is read off the answer the client got: one pure function, one table."""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_mcp import refusals
from checkpoint_mcp.telemetry.sdk import decision_of


def result(**journal: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "_meta": {"checkpoint/journal": journal}}}


def error(code: int, **data: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m", **({"data": data} if data else {})}}


RUN = result(workflow="wf", seq=1, replayed=False)
REPLAY = result(workflow="wf", seq=1, replayed=True)
REPEAT = result(workflow="wf", seq=1, replayed=True, repeatOf={"workflow": "wf", "seq": 1})
SETTLED = {"jsonrpc": "2.0", "id": 1, "result": {"_meta": {"checkpoint/journal": {"seq": 1}, "checkpoint/settled": {}}}}
UNMARKED = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}


@pytest.mark.parametrize(
    ("body", "forwarded", "decision"),
    [
        (RUN, True, "run"),
        (REPLAY, False, "replay"),
        (REPEAT, False, "repeat"),
        (SETTLED, False, "settled"),
        (error(refusals.IN_DOUBT, workflow="wf", seq=1), False, "in_doubt"),
        (error(refusals.DIVERGENCE, workflow="wf", seq=1), False, "divergence"),
        (error(refusals.COLLECTED, workflow="wf", seq=1), False, "collected"),
        (error(refusals.STILL_IN_FLIGHT, workflow="wf", seq=1), False, "in_flight"),
        (error(refusals.JOURNAL_WRITE_FAILED, workflow="wf", seq=1), False, "journal_write_failed"),
        (error(refusals.REPEAT_REFUSED, workflow="wf", seq=1), False, "repeat"),
        (error(refusals.APPROVAL_REQUIRED, reason="awaiting_approval", approval=3), False, "awaiting_approval"),
        (error(refusals.APPROVAL_REQUIRED, reason="approval_denied", approval=3), False, "approval_denied"),
        (error(refusals.APPROVAL_REQUIRED, reason="something_else"), False, "refused"),  # never a made-up value
        (result(workflow="wf", seq=1, replayed=False, approval=3), True, "run"),
        (error(refusals.UPSTREAM_EXITED, workflow="wf", seq=1), True, "run"),  # it went up: in doubt now
        (error(-32000), True, "run"),  # the upstream's own error: a FAILED run
        (error(-32000), False, "replay"),  # a FAILED outcome answered from the journal
        (error(refusals.INVALID_PARAMS, reason="invalid_checkpoint_seq"), False, "refused"),
        (UNMARKED, True, None),  # a read-only tool under --trust-annotations: not journaled
    ],
)
def test_the_decision_is_read_off_the_answer(body: dict[str, Any], forwarded: bool, decision: str | None) -> None:
    assert decision_of(body, forwarded) == decision
