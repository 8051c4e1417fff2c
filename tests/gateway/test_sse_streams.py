"""Session-era requests through `checkpoint serve`, each answered on an SSE stream of its own, opened at once."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from gatewayproc import effects_gateway, initialize, request, sse_data

from support import DEFAULT_TIMEOUT, read_effects, wait_until

ACCEPT = "text/event-stream, application/json"


def call(ident: int, tool: str, **arguments: object) -> bytes:
    body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return json.dumps(body).encode()


def first_event(response: http.client.HTTPResponse) -> dict[str, str]:
    """The fields of the first SSE event on ``response`` (read as it arrives, not to the end of the stream)."""
    raw = b""
    while b"\n\n" not in raw:
        chunk = response.read1(65536)
        assert chunk, f"the stream ended before its first event: {raw!r}"
        raw += chunk
    fields: dict[str, str] = {}
    for line in raw.split(b"\n\n", 1)[0].decode().split("\n"):
        name, _, value = line.partition(": ")
        fields[name.rstrip(":")] = value
    return fields


def open_post(port: int, session: str, body: bytes, version: str) -> tuple[http.client.HTTPConnection, object]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEFAULT_TIMEOUT)
    headers = {
        "Content-Type": "application/json",
        "Accept": ACCEPT,
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": version,
    }
    connection.request("POST", "/mcp", body=body, headers=headers)
    return connection, connection.getresponse()


def test_three_concurrent_posts_in_one_session_each_get_their_first_event_while_all_three_run(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        session = initialize(gateway.port, version="2025-11-25")
        opened = [open_post(gateway.port, session, call(100 + n, "hang", n=n), "2025-11-25") for n in range(3)]
        try:
            events = []
            for _, response in opened:
                assert isinstance(response, http.client.HTTPResponse)
                assert response.status == 200
                assert response.getheader("content-type") == "text/event-stream"
                events.append(first_event(response))

            # Each stream spoke first on its own, before any answer: the three calls hang upstream, all at once.
            def hanging() -> list[int]:
                effects = read_effects(tmp_path / "effects.jsonl")
                return sorted(effect["arguments"]["n"] for effect in effects if effect["tool"] == "hang")

            wait_until(lambda: hanging() == [0, 1, 2], what="the three calls to run upstream at once")
            assert all(event.get("data", "") == "" and event["id"] for event in events)  # priming events
            assert len({event["id"] for event in events}) == 3
        finally:
            for connection, _ in opened:
                connection.close()
            request(gateway.port, "DELETE", headers={"Mcp-Session-Id": session})  # ends the hanging calls


def test_a_stream_broken_before_its_first_message_resumes_from_the_priming_event(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        session = initialize(gateway.port, version="2025-11-25")
        connection, response = open_post(gateway.port, session, call(7, "slow", seconds=0.5, label="s"), "2025-11-25")
        assert isinstance(response, http.client.HTTPResponse)
        priming = first_event(response)
        connection.close()  # before the answer
        wait_until(
            lambda: any(e["event"] == "done" for e in read_effects(tmp_path / "effects.jsonl")), what="the call to end"
        )
        headers = {"Mcp-Session-Id": session, "Accept": "text/event-stream", "Last-Event-ID": priming["id"]}
        resumed = request(gateway.port, "GET", headers=headers)
    [answer] = [json.loads(data) for data in sse_data(resumed.body)]
    assert answer["id"] == 7
    assert answer["result"]["content"][0]["text"] == "slow s done"


def test_a_client_older_than_2025_11_25_gets_no_priming_event_but_its_answer_as_the_first_event(
    tmp_path: Path,
) -> None:
    with effects_gateway(tmp_path) as gateway:
        session = initialize(gateway.port, version="2025-03-26")
        connection, response = open_post(gateway.port, session, call(3, "send_quiet"), "2025-03-26")
        try:
            assert isinstance(response, http.client.HTTPResponse)
            assert response.getheader("content-type") == "text/event-stream"
            event = first_event(response)
        finally:
            connection.close()
    assert json.loads(event["data"])["id"] == 3


def test_a_client_that_accepts_only_json_still_gets_json(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        session = initialize(gateway.port)
        reply = request(
            gateway.port,
            "POST",
            "/mcp",
            call(4, "send_quiet"),
            {"Mcp-Session-Id": session, "Accept": "application/json"},
        )
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["id"] == 4
