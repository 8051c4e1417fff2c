"""Every error code Checkpoint can send is outside the range JSON-RPC and MCP reserve, or one they define.

The MCP specification (2026-07-28, "Error Codes") reserves -32020..-32099 for its own codes, and says new codes
SHOULD sit outside JSON-RPC's -32768..-32000. Here the allowed codes inside that range are written out from the
two specifications, not taken from ``refusals.py``, so that a code added there in the reserved range fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp import refusals
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.refusals import (
    DIVERGENCE,
    ERROR_CODES,
    IN_DOUBT,
    MOVED_CODES,
    OWN_CODES,
    REPEAT_REFUSED,
    CallRefused,
    current_code,
    current_error,
)
from checkpoint_mcp.signature import call_signature
from gatewayproc import MODERN, effects_gateway, modern_call, request

from support import ProxyProcess, done_count, server_cmd

JSON_RPC_STANDARD = {-32700, -32600, -32601, -32602, -32603}
# MCP's own: -32000..-32019 legacy (the transport's -32000 and -32001 bodies), -32020 header mismatch, -32021
# missing client capability, -32022 unsupported protocol version, -32042 URL elicitation required.
MCP_DEFINED = {-32000, -32001, -32020, -32021, -32022, -32042}
SRC = Path(__file__).parents[1] / "src" / "checkpoint_mcp"


def allowed(code: int) -> bool:
    return not -32768 <= code <= -32000 or code in JSON_RPC_STANDARD or code in MCP_DEFINED


COMMANDS = {"show": "checkpoint journal show", "release": "checkpoint journal resolve --release", "completed": "c"}
SAMPLES: dict[type[CallRefused], CallRefused] = {
    refusals.InvalidCallParams: refusals.InvalidCallParams("invalid params: no tool name"),
    refusals.DuplicateRequestId: refusals.DuplicateRequestId(1),
    refusals.InDoubt: refusals.InDoubt(workflow="wf", seq=1, tool="t", journaled_at="now", commands=COMMANDS),
    refusals.Divergence: refusals.Divergence(
        workflow="wf", seq=1, journaled={"tool": "t"}, received={"tool": "t"}, difference=[], commands=COMMANDS
    ),
    refusals.JournalWriteFailed: refusals.JournalWriteFailed(workflow="wf", seq=1, tool="t", cause="disk full"),
    refusals.UpstreamExited: refusals.UpstreamExited(workflow="wf", seq=1, tool="t", exit_status="exit code 1"),
    refusals.UpstreamRefused: refusals.UpstreamRefused(status=401, reason="Unauthorized", method="tools/call"),
    refusals.Stopped: refusals.Stopped(workflow="wf", seq=1, tool="t", why="SIGTERM"),
    refusals.Collected: refusals.Collected(workflow="wf", seq=1, commands=COMMANDS),
    refusals.StillInFlight: refusals.StillInFlight(workflow="wf", seq=1, tool="t", waited=1.0, commands=COMMANDS),
    refusals.RepeatRefused: refusals.RepeatRefused(
        workflow="wf",
        seq=1,
        tool="t",
        started_at="now",
        ago="2 minutes",
        result="ok",
        window="1h",
        runs_again_after="later",
        rule="default",
        commands=COMMANDS,
    ),
    refusals.ApprovalRequired: refusals.ApprovalRequired(
        workflow="wf", tool="t", approval=1, commands={"approve": "a", "deny": "d", "pages": "p"}
    ),
    refusals.LimitReached: refusals.LimitReached.over_limit(
        workflow="wf", tool="t", rule="tools.t", scope="workflow", calls=3, per="1h", counted=3, after="later"
    ),
    refusals.WorkflowSharedRefusal: refusals.WorkflowSharedRefusal(workflow="wf", tool="t", seq=7),
}


def subclasses(cls: type[CallRefused]) -> set[type[CallRefused]]:
    found = set(cls.__subclasses__())
    return found.union(*(subclasses(sub) for sub in found)) if found else found


def test_every_refusal_class_has_an_allowed_code_in_the_table_and_says_its_reason() -> None:
    assert subclasses(CallRefused) == set(SAMPLES), "a new CallRefused: add a sample of it here"
    for cls, refusal in SAMPLES.items():
        error = refusal.to_error()
        assert allowed(error["code"]), cls
        assert error["code"] in ERROR_CODES, cls
        row = ERROR_CODES[error["code"]]
        if row.reasons:
            assert error["data"]["reason"] in row.reasons, cls


def test_every_code_of_the_table_and_of_refusals_py_is_allowed_and_ours_moved_by_the_rule() -> None:
    constants = {
        name: value
        for name, value in vars(refusals).items()
        if name.isupper() and isinstance(value, int) and -33000 < value < -31000
    }
    assert set(constants.values()) >= set(ERROR_CODES)
    for name, code in constants.items():
        assert allowed(code), name
    assert {code for code in ERROR_CODES if not -32768 <= code <= -32000} == OWN_CODES
    assert {-32080 - n: -31080 - n for n in range(10)} == MOVED_CODES


def test_no_module_names_a_json_rpc_code_but_refusals_py() -> None:
    """A code written as a number elsewhere would escape the table (and this test's check of it)."""
    literal = re.compile(r"(?<![\w.])-3[12]\d{3}\b")
    found = [
        f"{path.relative_to(SRC)}: {match.group()}"
        for path in SRC.rglob("*.py")
        if path.name != "refusals.py"
        for match in literal.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(
    ("code", "data", "expected"),
    [
        (-32085, {"reason": "failed_by_operator", "by": "alice"}, refusals.FAILED_BY_OPERATOR),
        (-32087, {"reason": "upstream_refused", "status": 401}, refusals.UPSTREAM_REFUSED),
        (-32080, {"reason": "in_flight"}, IN_DOUBT),
        (-32085, None, -32085),  # an upstream's own -32085: no reason of ours
        (-32087, {"reason": "failed_by_operator"}, -32087),  # another code's reason
        (-32000, {"reason": "upstream_refused"}, -32000),  # not a code that moved
        (True, {"reason": "in_doubt"}, True),
        ([-32080], {}, [-32080]),
    ],
)
def test_a_stored_error_moves_to_its_new_code_only_when_checkpoint_made_it(code: Any, data: Any, expected: Any) -> None:
    assert current_code(code, data) == expected


def test_a_stored_error_text_keeps_every_byte_but_the_code() -> None:
    stored = '{"code": -32085,  "message":"bounced \\u00e9","data":{"reason":"failed_by_operator","by":"al"}}'
    assert current_error(stored) == stored.replace("-32085", str(refusals.FAILED_BY_OPERATOR))
    theirs = '{"code":-32085,"message":"their own"}'
    assert current_error(theirs) == theirs
    assert current_error("not json -32085") == "not json -32085"
    assert current_error("[-32085]") == "[-32085]"


def proxy(location: str, tmp_path: Path, *extra: str) -> ProxyProcess:
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    return ProxyProcess("--upstream-cmd", server_cmd("effects_server.py"), "--journal", location, *extra, env=env)


def test_the_proxy_sends_its_refusals_and_its_own_error_lines_with_allowed_codes(tmp_path: Path) -> None:
    location = str(tmp_path / "j.db")
    journal = open_journal(location)
    try:
        journal.lineage("wf")
        unit = journal.unit()
        unit.reserve("wf", 2, NewCall("send_email", '{"to":"b"}', call_signature("send_email", {"to": "b"})))
        unit.commit()  # PENDING, and no proxy owns it: in doubt
    finally:
        journal.close()
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_quiet]\nrepeat = "refuse"\nwindow = "1h"\n', encoding="utf-8")
    codes: list[int] = []
    with proxy(location, tmp_path, "--workflow-id", "wf", "--policy", str(policy)) as p:
        p.initialize()
        assert "result" in p.call("send_email", {"to": "a"}, seq=1)
        diverged = p.call("send_email", {"to": "someone else"}, seq=1)
        in_doubt = p.call("send_email", {"to": "b"}, seq=2)
        assert "result" in p.call("send_quiet", {"n": 1})
        p.send_raw(b"not json\n")
        codes.append(p.recv()["error"]["code"])
        p.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"arguments": {}}})
        codes.append(p.response(7)["error"]["code"])
        p.send({"jsonrpc": "2.0", "id": [1], "method": "ping"})
        codes.append(p.recv()["error"]["code"])
        assert p.close() == 0, p.stderr
    with proxy(location, tmp_path, "--workflow-id", "wf", "--policy", str(policy)) as p:
        p.initialize()
        repeat = p.call("send_quiet", {"n": 1})
        assert p.close() == 0, p.stderr
    assert diverged["error"]["code"] == DIVERGENCE
    assert in_doubt["error"]["code"] == IN_DOUBT
    assert repeat["error"]["code"] == REPEAT_REFUSED
    assert codes == [refusals.PARSE_ERROR, refusals.INVALID_PARAMS, refusals.INVALID_REQUEST]
    for code in [diverged["error"]["code"], in_doubt["error"]["code"], repeat["error"]["code"], *codes]:
        assert allowed(code)
    assert done_count(tmp_path / "effects.jsonl") == 2


def test_the_gateway_sends_a_refusal_with_an_allowed_code_and_counts_it_under_that_code(tmp_path: Path) -> None:
    def call(ident: int, to: str) -> dict[str, Any]:
        body = modern_call(ident, "send_email", {"to": to}, checkpoint_seq=1)
        reply = request(gateway.port, "POST", "/mcp", body, MODERN)
        assert reply.status == 200, reply.body
        message: dict[str, Any] = reply.message()
        return message

    with effects_gateway(tmp_path, "--journal", str(tmp_path / "j.db")) as gateway:
        assert "result" in call(1, "a")
        diverged = call(2, "b")
        metrics = request(gateway.port, "GET", "/metrics").body.decode()
        not_json = request(gateway.port, "POST", "/mcp", b"not json", MODERN)
    assert diverged["error"]["code"] == DIVERGENCE
    assert f'checkpoint_refusals_total{{code="{DIVERGENCE}"}} 1.0' in metrics
    transport = json.loads(not_json.body)["error"]["code"]
    assert transport == refusals.PARSE_ERROR
    assert allowed(diverged["error"]["code"])
    assert allowed(transport)
