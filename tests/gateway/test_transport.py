"""Streamable HTTP through `checkpoint serve`: bytes, ids, sessions, streams, resumption, idle timeout, SIGTERM."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import signal
from pathlib import Path

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import UPSTREAM_EXITED
from gatewayproc import MODERN, GatewayProcess, effects_gateway, initialize, request, sse_data

import nodetools
from support import DEFAULT_TIMEOUT, journal_states, read_effects, server_cmd, wait_until

PING = {"jsonrpc": "2.0", "id": 3, "method": "ping"}


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone (reading the file of a process that exits meanwhile is ESRCH)
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def recorder_gateway(tmp_path: Path, emit: bytes) -> GatewayProcess:
    (tmp_path / "emit").write_bytes(emit)
    env = {"RAW_LOG": str(tmp_path / "raw.log"), "EMIT_FILE": str(tmp_path / "emit")}
    return GatewayProcess("--upstream-cmd", server_cmd("recorder_server.py"), env=env)


def test_message_bodies_travel_byte_for_byte_both_ways(tmp_path: Path) -> None:
    answer = b'{"jsonrpc":"2.0",  "id":5,"result":{"n":1.0E+2,"s":"\\u00fc\xc3\xbc","x-vendor":[]}}\n'
    with recorder_gateway(tmp_path, answer) as gateway:
        body = (
            b'{"jsonrpc":"2.0","id":5,"method":"test/emit",\n  "params":{"_meta":'
            b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"odd":1E2, "u":"\\u00e9"}}'
        )
        reply = request(gateway.port, "POST", "/mcp", body, MODERN)
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.body == answer.rstrip(b"\n")
    # The only change upstream: the line break between tokens became a space (stdio is one message per line).
    assert (tmp_path / "raw.log").read_bytes() == body.replace(b"\n", b" ") + b"\n"


def test_a_second_request_with_an_id_in_flight_is_renamed_upstream_and_restored_downstream(tmp_path: Path) -> None:
    emit = (
        b'{"jsonrpc":"2.0","id":"checkpoint-gw-1","result":{"who":"second"}}\n'
        b'{"jsonrpc":"2.0","id":7,"result":{"who":"first"}}\n'
    )
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    with recorder_gateway(tmp_path, emit) as gateway, concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(
            request,
            gateway.port,
            "POST",
            "/mcp",
            {"jsonrpc": "2.0", "id": 7, "method": "test/hold", "params": {"_meta": meta}},
            MODERN,
        )
        wait_until((tmp_path / "raw.log").exists, what="the first request upstream")
        second = request(
            gateway.port,
            "POST",
            "/mcp",
            {"jsonrpc": "2.0", "id": 7, "method": "test/emit", "params": {"_meta": meta}},
            MODERN,
        )
        assert second.json() == {"jsonrpc": "2.0", "id": 7, "result": {"who": "second"}}
        assert first.result(timeout=DEFAULT_TIMEOUT).json() == {"jsonrpc": "2.0", "id": 7, "result": {"who": "first"}}
    upstream = [json.loads(line) for line in (tmp_path / "raw.log").read_text().splitlines()]
    assert [message["id"] for message in upstream] == [7, "checkpoint-gw-1"]


def test_sessions_are_named_by_their_id_and_end_with_delete(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        assert request(gateway.port, "POST", "/mcp", PING).status == 400  # no session, not 2026-07-28
        assert request(gateway.port, "POST", "/mcp", PING, {"Mcp-Session-Id": "nope"}).status == 404
        assert request(gateway.port, "GET", "/mcp", headers={"Accept": "text/event-stream"}).status == 405
        session = initialize(gateway.port)
        headers = {"Mcp-Session-Id": session}
        assert request(gateway.port, "POST", "/mcp", PING, headers).message() == {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {},
        }
        call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "send_quiet", "arguments": {}}}
        assert "result" in request(gateway.port, "POST", "/mcp", call, headers).message()
        [effect] = read_effects(tmp_path / "effects.jsonl")
        child = effect["pid"]
        assert pid_alive(child)
        assert request(gateway.port, "DELETE", "/mcp", headers=headers).status == 200
        wait_until(lambda: not pid_alive(child), what="the session's upstream to exit")
        assert request(gateway.port, "POST", "/mcp", PING, headers).status == 404
        assert request(gateway.port, "DELETE", "/mcp", headers=headers).status == 404


def test_an_idle_session_and_an_idle_workflow_upstream_are_closed(tmp_path: Path) -> None:
    with effects_gateway(tmp_path, "--idle-timeout", "0.5") as gateway:
        session = initialize(gateway.port)
        call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "send_quiet", "arguments": {}}}
        request(gateway.port, "POST", "/mcp", call, {"Mcp-Session-Id": session})
        modern = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "send_quiet", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
        }
        assert "result" in request(gateway.port, "POST", "/mcp", modern, MODERN).json()
        children = {effect["pid"] for effect in read_effects(tmp_path / "effects.jsonl")}
        assert len(children) == 2  # one for the session, one for the workflow's 2026-07-28 requests
        wait_until(lambda: not any(pid_alive(pid) for pid in children), what="idle upstreams to be closed")
        assert request(gateway.port, "POST", "/mcp", PING, {"Mcp-Session-Id": session}).status == 404


def test_server_messages_outside_a_request_reach_the_get_stream(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        session = initialize(gateway.port)
        headers = {"Mcp-Session-Id": session}
        call = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "notify_later", "arguments": {"seconds": 0.3, "text": "hello later"}},
        }
        assert request(gateway.port, "POST", "/mcp", call, headers).message()["result"]["content"][0]["text"] == "later"
        connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=DEFAULT_TIMEOUT)
        connection.request("GET", "/mcp", headers={**headers, "Accept": "text/event-stream"})
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("content-type") == "text/event-stream"
        event = b""
        while b"\n\n" not in event:
            event += response.read1(65536)
        [data] = sse_data(event)
        assert json.loads(data)["params"]["data"] == "hello later"
        assert f"id: {session}.get/0".encode() in event
        second = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=DEFAULT_TIMEOUT)
        second.request("GET", "/mcp", headers={**headers, "Accept": "text/event-stream"})
        assert second.getresponse().status == 409  # one GET stream per session
        second.close()
        connection.close()


def test_a_broken_post_stream_resumes_with_last_event_id(tmp_path: Path) -> None:
    upstream = " ".join([*nodetools.package_bin("@modelcontextprotocol/server-everything", "dist/index.js"), "stdio"])
    with GatewayProcess("--upstream-cmd", upstream, env=nodetools.env()) as gateway:
        session = initialize(gateway.port)
        headers = {
            "Mcp-Session-Id": session,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        call = {
            "jsonrpc": "2.0",
            "id": 11,
            "method": "tools/call",
            "params": {
                "name": "trigger-long-running-operation",
                "arguments": {"duration": 1, "steps": 4},
                "_meta": {"progressToken": "p1"},
            },
        }
        connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=DEFAULT_TIMEOUT)
        connection.request("POST", "/mcp", body=json.dumps(call), headers=headers)
        response = connection.getresponse()
        assert response.getheader("content-type") == "text/event-stream"
        first = b""
        while b"\n\n" not in first:
            first += response.read1(65536)
        first_event = first.split(b"\n\n")[0].decode()
        assert json.loads(sse_data(first)[0])["method"] == "notifications/progress"
        last_id = next(line[4:] for line in first_event.split("\n") if line.startswith("id: "))
        connection.close()  # the stream breaks mid-call
        resumed = request(
            gateway.port,
            "GET",
            headers={"Mcp-Session-Id": session, "Accept": "text/event-stream", "Last-Event-ID": last_id},
        )
    messages = [json.loads(data) for data in sse_data(resumed.body)]
    assert messages[-1]["id"] == 11
    assert "Long running operation completed" in messages[-1]["result"]["content"][0]["text"]
    assert all(m["method"] == "notifications/progress" for m in messages[:-1])
    assert [m["params"]["progress"] for m in messages[:-1]] == [2, 3, 4]  # nothing lost, nothing repeated


def test_sigterm_lets_the_call_in_flight_finish_and_be_journaled_then_closes_every_upstream(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    gateway = effects_gateway(tmp_path, "--journal", journal, "--workflow-id", "wf")
    with gateway, concurrent.futures.ThreadPoolExecutor(1) as pool:
        session = initialize(gateway.port)
        call = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 1.0, "label": "z"}},
        }
        pending = pool.submit(request, gateway.port, "POST", "/mcp", call, {"Mcp-Session-Id": session})
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the call to start")
        child = read_effects(effects)[0]["pid"]
        assert gateway.terminate() == 128 + signal.SIGTERM
        answer = pending.result(timeout=DEFAULT_TIMEOUT)
    assert answer.message()["result"]["content"][0]["text"] == "slow z done"
    assert journal_states(journal, "wf") == {1: CallState.COMPLETED}
    assert not pid_alive(child)


def test_closing_a_2026_stream_cancels_the_request_upstream(tmp_path: Path) -> None:
    with recorder_gateway(tmp_path, b"") as gateway:
        body = {
            "jsonrpc": "2.0",
            "id": 41,
            "method": "test/hold",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
        }
        connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=DEFAULT_TIMEOUT)
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **MODERN}
        connection.request("POST", "/mcp", body=json.dumps(body), headers=headers)
        wait_until((tmp_path / "raw.log").exists, what="the request upstream")
        connection.close()  # the client gives up: on Streamable HTTP 2026-07-28 that is the cancellation

        def cancelled() -> bool:
            lines = [json.loads(line) for line in (tmp_path / "raw.log").read_text().splitlines()]
            return any(m.get("method") == "notifications/cancelled" and m["params"]["requestId"] == 41 for m in lines)

        wait_until(cancelled, what="notifications/cancelled upstream")


def test_health_says_when_the_upstream_cannot_serve(tmp_path: Path) -> None:
    with GatewayProcess("--upstream-cmd", "exit 7") as gateway:
        assert request(gateway.port, "GET", "/healthz").status == 200  # nothing has failed yet
        reply = request(
            gateway.port,
            "POST",
            "/mcp",
            {**PING, "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}},
            MODERN,
        )
        assert reply.json()["error"]["code"] == UPSTREAM_EXITED
        wait_until(lambda: request(gateway.port, "GET", "/healthz").status == 503, what="health to turn")
        report = request(gateway.port, "GET", "/healthz").json()
        assert "exit code 7" in report["upstream"]
