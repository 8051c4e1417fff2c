"""Byte-verbatim relay: everything that is not a tools/call reaches the other side as the original bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.wire import member_text

from support import ProxyProcess, effects_proxy, journal_calls, journal_states, server_cmd, wait_until

CLIENT_LINES = [
    # requests with odd spellings, unknown envelope fields, vendor methods
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},'
    b'"clientInfo":{"name":"t","version":"0"}},"x-unknown":{"n":1.0E+2}}\n',
    b'{ "jsonrpc" : "2.0" , "method" : "notifications/initialized" }\n',
    b'{"jsonrpc":"2.0","id":"str-id","method":"resources/read","params":{"uri":"file:///a","n":-0.0,"big":1e400}}\n',
    b'{"jsonrpc":"2.0","id":2.5,"method":"vendor.example/custom","params":[1,2,3]}\n',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":0.50}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"str-id","reason":"user"}}\n',
    # a client's answers to server-to-client requests (sampling, roots, elicitation)
    b'{"jsonrpc":"2.0","id":77,"result":{"roots":[{"uri":"file:///w","name":"w"}]}}\n',
    b'{"jsonrpc":"2.0","id":78,"result":{"action":"accept","content":{"ok":true}},"_extra":"\\u00e9"}\n',
    b'{"jsonrpc":"2.0","id":79,"error":{"code":-1,"message":"declined"}}\n',
    '{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"é ✓ 😀"}}\r\n'.encode(),
    b"\n",
]

UPSTREAM_LINES = [
    b'{"jsonrpc":"2.0","id":"str-id","result":{"contents":[{"uri":"file:///a","text":"x"}],"n":1.10}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1E0}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"a":[1,2.000]}}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n',
    b'{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{}}\n',
    b'{"jsonrpc":"2.0","id":77,"method":"roots/list"}\n',
    b'{"jsonrpc":"2.0","id":78,"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{}}}\n',
    b'{"jsonrpc":"2.0","id":80,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1.0e1}}\n',
    b'{"jsonrpc":"2.0","id":2.5,"result":{"vendor":true},"x-trailer":null}\n',
    (
        '{"jsonrpc":"2.0","id":3,"result":{"messages":[{"role":"user","content":{"type":"text","text":"é ✓ 😀"}}]}}\n'
    ).encode(),
    b'{"jsonrpc":"2.0","id":99,"result":{"note":"an answer to nothing"}}\n',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"no handshake here","data":[1.0]}}\n',
]


@pytest.mark.parametrize("journaled", [False, True])
def test_every_line_that_is_not_a_tools_call_crosses_the_proxy_byte_for_byte(tmp_path: Path, journaled: bool) -> None:
    raw_log = tmp_path / "received.bin"
    emit = tmp_path / "emit.bin"
    emit.write_bytes(b"".join(UPSTREAM_LINES))
    extra = ["--journal", str(tmp_path / "j.db")] if journaled else []
    env = {"RAW_LOG": str(raw_log), "EMIT_FILE": str(emit)}
    with ProxyProcess("--upstream-cmd", server_cmd("recorder_server.py"), *extra, env=env) as p:
        for line in CLIENT_LINES:
            p.send_raw(line)
        wait_until(lambda: raw_log.exists() and raw_log.read_bytes().count(b"\n") >= len(CLIENT_LINES), what="lines")
        p.send_raw(b'{"jsonrpc":"2.0","method":"test/emit"}\n')
        received = [p.recv_line() for _ in UPSTREAM_LINES]
        p.close()
    assert raw_log.read_bytes() == b"".join(CLIENT_LINES) + b'{"jsonrpc":"2.0","method":"test/emit"}\n'
    # The initialize response is not among these, so nothing may differ by a single byte.
    assert received == UPSTREAM_LINES


def test_the_server_identity_in_the_initialize_result_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    with ProxyProcess(
        "--upstream-cmd", server_cmd("effects_server.py"), "--name", "my-proxy", "--version", "4.5.6"
    ) as p:
        p.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}\n')
        line = p.recv_line()
        p.close()
    result = json.loads(line)["result"]
    assert result["serverInfo"] == {"name": "my-proxy", "version": "4.5.6", "title": "Effects test server"}
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {"listChanged": True}}


def test_the_default_identity_is_checkpoint_0_0_0_in_the_discover_result(tmp_path: Path) -> None:
    with ProxyProcess("--upstream-cmd", server_cmd("effects_server.py")) as p:
        reply = p.request("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
        p.close()
    info = reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert info == {"name": "checkpoint", "version": "0.0.0"}
    assert reply["result"]["supportedVersions"] == ["2026-07-28"]


def test_messages_of_tens_of_mebibytes_pass_both_ways(tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    size = 24 * 1024 * 1024
    with ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        str(tmp_path / "j.db"),
        env={"EFFECTS_FILE": str(effects)},
    ) as p:
        big_argument = "y" * size
        reply = p.call("big", {"size": size, "payload": big_argument}, timeout=120)
        p.close(timeout=60)
    assert len(reply["result"]["content"][0]["text"]) == size


def test_every_result_that_names_the_server_in_meta_names_ours_fresh_or_replayed(journal: str, tmp_path: Path) -> None:
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl"), "EFFECTS_SERVER_INFO_META": "1"}
    args = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--name", "mine", "--version", "9")
    with ProxyProcess(*args, env=env) as p:
        results = [
            p.request("server/discover", {})["result"],
            p.request("tools/list", {})["result"],
            p.request("ping")["result"],
            p.call("send_email", {"to": "ann"}, seq=1)["result"],
            p.call("send_email", {"to": "ann"}, seq=1)["result"],  # answered from the journal
        ]
        p.close()
    assert results[-1]["_meta"]["checkpoint/journal"]["replayed"] is True
    for result in results:
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "mine", "version": "9"}


def test_an_upstream_reply_that_is_not_utf8_reaches_the_client_repaired_and_is_journaled(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with effects_proxy(journal, tmp_path) as p:
        reply = p.call("bad_utf8")
        p.close()
    assert reply["result"]["content"][0]["text"] == "caf\ufffd \ufffd"
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}
    assert "not UTF-8" in p.stderr


def _spaced(result: str) -> bytes:
    return f'{{"jsonrpc": "2.0", "id": 5, "result": {result}}}\n'.encode()


SPACED_RESULT = '{"content": [{"type": "text", "text": "a \\"quoted\\" \\u00e9 ✓"}], "isError": false, "n": 1.50}'


@pytest.mark.parametrize(
    "reply",
    [
        _spaced(SPACED_RESULT),  # Python's json.dumps default: the fast path
        # every white space a line can hold (a line feed ends it on stdio)
        f'{{ "jsonrpc" :\t"2.0" ,\r "id" : 5 , "result" :\t\r{SPACED_RESULT} \t}}\r\n'.encode(),
        f'{{"jsonrpc":"2.0","id":5,"result":{SPACED_RESULT}}}\n'.encode(),  # compact
        f'{{"result": {SPACED_RESULT}, "jsonrpc": "2.0", "id": 5}}\n'.encode(),  # another order: the slow path
        _spaced('{"big": "' + "x" * 100_000 + '", "nested": {"a": [1, {"b": []}]}}'),
    ],
)
def test_a_journaled_reply_written_with_spaces_is_journaled_byte_for_byte_and_replayed_the_same(
    journal: str, workflow: str, tmp_path: Path, reply: bytes
) -> None:
    emit = tmp_path / "emit.bin"
    emit.write_bytes(reply)
    call = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","_meta":{"checkpoint_seq":1}}}\n'
    raw_log = tmp_path / "received.bin"
    env = {"RAW_LOG": str(raw_log), "EMIT_FILE": str(emit)}
    with ProxyProcess("--upstream-cmd", server_cmd("recorder_server.py"), "--journal", journal, env=env) as p:
        p.send_raw(call)
        wait_until(lambda: raw_log.exists() and b"tools/call" in raw_log.read_bytes(), what="the call upstream")
        p.send_raw(b'{"jsonrpc":"2.0","method":"test/emit"}\n')
        answer = p.recv_line()
        p.close()
    result_text = member_text(reply.decode(), ("result",))
    assert result_text is not None
    meta = f'"_meta":{{"checkpoint/journal":{{"workflow":{json.dumps(workflow)},"seq":1,"replayed":false}}}},'
    # The client gets the upstream's bytes, the journal's _meta key added at the front of the result, nothing else.
    assert answer == reply.replace(result_text.encode(), b"{" + meta.encode() + result_text[1:].encode(), 1)
    [row] = journal_calls(journal, workflow)
    assert (row.state, row.outcome) == (CallState.COMPLETED, result_text)

    again_log = tmp_path / "again.bin"
    env = {"RAW_LOG": str(again_log), "EMIT_FILE": str(emit)}
    with ProxyProcess("--upstream-cmd", server_cmd("recorder_server.py"), "--journal", journal, env=env) as p:
        p.send_raw(call.replace(b'"id":5', b'"id":6'))
        replayed = p.recv_line()
        p.close()
    assert b"tools/call" not in again_log.read_bytes()
    replayed_meta = meta.replace("false", "true").encode()
    expected = b'{"jsonrpc":"2.0","id":6,"result":{' + replayed_meta + result_text[1:].encode() + b"}\n"
    assert replayed == expected
