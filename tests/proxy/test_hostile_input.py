"""Hostile lines from the client, each judged on its own: odd ids, huge sequences, deep nesting, float ids.

Every request gets exactly one answer, a good call never depends on the line next to it, and nothing is left
PENDING for a call the upstream never saw.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import INVALID_PARAMS, INVALID_REQUEST

from support import ProxyProcess, done_count, effects_proxy, journal_states, server_cmd


def tools_call(ident: Any, to: str, meta: dict[str, Any] | None = None, arguments: Any = None) -> bytes:
    params: dict[str, Any] = {"name": "send_email", "arguments": arguments if arguments is not None else {"to": to}}
    if meta is not None:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}).encode()


def nested(depth: int) -> bytes:
    """A tools/call line whose arguments nest ``depth`` levels (the arguments object is level 1), id ``depth``."""
    arguments = '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    line = f'{{"jsonrpc":"2.0","id":{depth},"method":"tools/call","params":{{"name":"send_email","arguments":{arguments}}}}}'
    return line.encode()


GOOD = tools_call(1, "good")
HOSTILE = {
    "an object id": b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"send_email","arguments":{"to":"bad"}}}',
    "an array id": b'{"jsonrpc":"2.0","id":[2],"method":"ping"}',
    "a checkpoint_seq of 2**70": tools_call(3, "bad", {"checkpoint_seq": 2**70}),
    "a checkpoint_seq of 2**63": tools_call(3, "bad", {"checkpoint_seq": 2**63}),
    "a json value nested 1,000 deep": nested(1000),
}
EXPECTED = {
    "an object id": (None, INVALID_REQUEST),
    "an array id": (None, INVALID_REQUEST),
    "a checkpoint_seq of 2**70": (3, INVALID_PARAMS),
    "a checkpoint_seq of 2**63": (3, INVALID_PARAMS),
    "a json value nested 1,000 deep": (1000, INVALID_PARAMS),
}


def answers(p: ProxyProcess, count: int, timeout: float = 10) -> list[dict[str, Any]]:
    return [json.loads(p.recv_line(timeout)) for _ in range(count)]


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_good_call_read_together_with_a_line_that_cannot_be_routed_still_runs_alone(
    journal: str, workflow: str, tmp_path: Path, name: str
) -> None:
    with effects_proxy(journal, tmp_path) as p:
        p.send_raw(GOOD + b"\n" + HOSTILE[name] + b"\n")  # one write: the proxy reads both lines at once
        replies = answers(p, 2)
        started = time.monotonic()
        assert p.close() == 0
        closed_in = time.monotonic() - started
    by_id = {json.dumps(r["id"]): r for r in replies}
    good = by_id.pop("1")
    assert good["result"]["content"][0]["text"] == "sent to good"
    [bad] = by_id.values()
    ident, code = EXPECTED[name]
    assert bad["id"] == ident
    assert bad["error"]["code"] == code
    assert done_count(tmp_path / "effects.jsonl") == 1
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}
    assert closed_in < 5  # nothing stranded for the shutdown drain to wait for


def test_a_request_whose_id_holds_a_lone_surrogate_is_answered_every_time(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    ident = "\ud800"
    with effects_proxy(journal, tmp_path) as p:
        first = tools_call(ident, "ann", {"checkpoint_seq": 1})
        p.send_raw(first + b"\n")
        ran = json.loads(p.recv_line())
        p.send_raw(first + b"\n")  # a replay: the proxy writes this answer itself
        replayed = json.loads(p.recv_line())
        p.send_raw(tools_call(ident, "eve", {"checkpoint_seq": 1}) + b"\n")  # a divergence: so is this error
        refused = json.loads(p.recv_line())
        p.close()
    assert ran["id"] == ident
    assert ran["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
    assert replayed["id"] == ident
    assert replayed["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert refused["id"] == ident
    assert refused["error"]["data"]["reason"] == "divergence"
    assert done_count(tmp_path / "effects.jsonl") == 1


def test_arguments_nested_400_deep_are_journaled_and_1000_deep_are_invalid_params(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with effects_proxy(journal, tmp_path) as p:
        p.send_raw(nested(400) + b"\n")
        deep = p.recv_line()
        p.send_raw(nested(501) + b"\n")
        too_deep = json.loads(p.recv_line())
        p.send_raw(nested(1000) + b"\n")
        far_too_deep = json.loads(p.recv_line())
        p.send_raw(
            b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"send_email","arguments":{"s":"\\udc00"}}}\n'
        )
        surrogate = json.loads(p.recv_line())
        p.close()
    assert deep.startswith(b'{"jsonrpc":"2.0","id":400,"result":')
    for reply, ident in ((too_deep, 501), (far_too_deep, 1000), (surrogate, 4)):
        assert reply["id"] == ident
        assert reply["error"]["code"] == INVALID_PARAMS
    assert "500 levels" in too_deep["error"]["message"]
    assert "500 levels" in far_too_deep["error"]["message"]
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}


def test_an_id_written_as_a_float_is_matched_to_the_integer_a_javascript_server_answers(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl"), "EFFECTS_INTEGER_IDS": "1"}
    command = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--name", "mine")
    with ProxyProcess(*command, env=env) as p:
        p.send_raw(
            b'{"jsonrpc":"2.0","id":1.0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
        )
        hello = json.loads(p.recv_line())
        p.send_raw(tools_call(1e2, "ann").replace(b'"id": 100.0', b'"id": 1e2') + b"\n")
        call = json.loads(p.recv_line())
        started = time.monotonic()
        assert p.close() == 0
        closed_in = time.monotonic() - started
        extra = p._lines.qsize()  # anything after the proxy's end of output is an invented reply
    assert hello["id"] == 1
    assert hello["result"]["serverInfo"]["name"] == "mine"
    assert call["id"] == 100
    assert call["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}
    assert closed_in < 5
    assert extra == 1  # only the end-of-stream marker: no second, false "upstream exited" error


def test_a_batch_too_deep_to_read_whole_is_refused_and_its_call_never_runs(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with effects_proxy(journal, tmp_path) as p:
        p.send_raw(b"[" + nested(1000) + b"]\n")  # a tools/call inside a batch, too deep for the parser
        refused = json.loads(p.recv_line())
        p.send_raw(b"[]\n")  # an empty batch is an invalid request (JSON-RPC 2.0)
        empty = json.loads(p.recv_line())
        p.close()
    for reply in (refused, empty):
        assert reply["id"] is None
        assert reply["error"]["code"] == INVALID_REQUEST
    assert "batch" in refused["error"]["message"]
    assert done_count(tmp_path / "effects.jsonl") == 0
    assert journal_states(journal, workflow) == {}
