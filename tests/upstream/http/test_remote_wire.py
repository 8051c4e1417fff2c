"""What crosses HTTP: the client's bytes are the POST body, the server's bytes are the client's line, the MCP
headers of each era are set, and cancellation reaches the server the way its era says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkpoint_mcp.journal.records import CallState

from httpservers import faults_server
from support import ProxyProcess, journal_states, read_effects, wait_until

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def received(tmp_path: Path, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in read_effects(tmp_path / "effects.jsonl")
        if e["event"] == "received" and all(e.get(k) == v for k, v in match.items())
    ]


def test_bytes_cross_http_unchanged_in_both_directions(tmp_path: Path) -> None:
    odd = (
        b'{ "jsonrpc" : "2.0", "id":7, "method":"tools/call", "params":{"name":"send_email",'
        b'"arguments":{"to":"odd","n":1.0E+2,"big":12345678901234567890}}, "x-vendor":[true] }\n'
    )
    with faults_server(tmp_path) as server, ProxyProcess("--upstream-url", server.url) as proxy:
        proxy.initialize()
        proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        listed = proxy.recv_line()
        proxy.send_raw(odd)
        answered = proxy.recv_line()
        assert proxy.close() == 0
    [call] = received(tmp_path, tool="send_email")
    assert call["raw"].encode() == odd.rstrip(b"\n")  # the POST body is the client's line, byte for byte
    tools = json.loads(listed)["result"]["tools"]
    # The server's JSON (with its own spacing) is the line the client read, byte for byte.
    assert listed == json.dumps({"jsonrpc": "2.0", "id": "list", "result": {"tools": tools}}).encode() + b"\n"
    assert b'"text": "sent to odd"' in answered


def test_a_2026_request_carries_the_routing_headers_and_no_session(journal: str, tmp_path: Path) -> None:
    with faults_server(tmp_path) as server, ProxyProcess("--upstream-url", server.url, "--journal", journal) as proxy:
        params = {"name": "send_email", "arguments": {"to": "nia"}, "_meta": MODERN_META}
        reply = proxy.request("tools/call", params)
        assert proxy.close() == 0
    assert reply["result"]["content"][0]["text"] == "sent to nia"
    [call] = received(tmp_path, tool="send_email")
    assert (call["version"], call["mcp_method"], call["mcp_name"], call["session"]) == (
        "2026-07-28",
        "tools/call",
        "send_email",
        None,
    )


def test_cancelling_a_session_request_posts_the_notification(journal: str, workflow: str, tmp_path: Path) -> None:
    with faults_server(tmp_path) as server, ProxyProcess("--upstream-url", server.url, "--journal", journal) as proxy:
        proxy.initialize()
        proxy.send({"jsonrpc": "2.0", "id": "stuck", "method": "tools/call", "params": {"name": "never"}})
        wait_until(lambda: received(tmp_path, tool="never"), what="the call to reach the server")
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "stuck"}}
        proxy.send(cancel)
        wait_until(lambda: received(tmp_path, method="notifications/cancelled"), what="the cancellation")
        proxy.proc.terminate()
        proxy.wait()
    [note] = received(tmp_path, method="notifications/cancelled")
    assert json.loads(note["raw"]) == cancel
    assert note["session"] == "s1"
    assert journal_states(journal, workflow) == {1: CallState.PENDING}  # no answer came: in doubt


def test_cancelling_a_2026_request_closes_its_stream_instead(journal: str, workflow: str, tmp_path: Path) -> None:
    with faults_server(tmp_path) as server, ProxyProcess("--upstream-url", server.url, "--journal", journal) as proxy:
        params = {"name": "never", "arguments": {}, "_meta": MODERN_META}
        proxy.send({"jsonrpc": "2.0", "id": "stuck", "method": "tools/call", "params": params})
        wait_until(lambda: received(tmp_path, tool="never"), what="the call to reach the server")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "stuck"}})
        later = proxy.request("tools/call", {"name": "send_email", "arguments": {"to": "oli"}, "_meta": MODERN_META})
        assert proxy.close() == 0
    assert later["result"]["content"][0]["text"] == "sent to oli"
    assert not received(tmp_path, method="notifications/cancelled")  # that era has no client notifications
    assert journal_states(journal, workflow) == {1: CallState.PENDING, 2: CallState.COMPLETED}
