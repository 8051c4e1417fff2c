"""Traces and metrics by the OpenTelemetry conventions for MCP, received by a real OTLP/HTTP receiver (``otlp.py``)
from real `checkpoint` processes: span names and attributes, parentage client → proxy → upstream, what the journal
decided, no argument bytes unless asked, and nothing at all (no import, no traffic) without the variables."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp import telemetry
from checkpoint_mcp.refusals import DIVERGENCE, IN_DOUBT, UPSTREAM_EXITED

from httpservers import faults_server
from otlp import Receiver
from support import ProxyProcess, read_effects, server_cmd, wait_until

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
SECRET = "s3cr3t-argument-bytes"


@pytest.fixture
def receiver() -> Any:
    with Receiver() as started:
        yield started


def traced_call(proxy: ProxyProcess, seq: int, to: str = SECRET) -> dict[str, Any]:
    params = {
        "name": "send_email",
        "arguments": {"to": to},
        "_meta": {"checkpoint_seq": seq, "traceparent": TRACEPARENT, "tracestate": TRACESTATE},
    }
    return proxy.request("tools/call", params)


def server_spans(spans: list[dict[str, Any]], name: str = "tools/call send_email") -> list[dict[str, Any]]:
    return [span for span in spans if span["name"] == name and span["kind"] == "SERVER"]


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for span in spans if span["parent"] == parent["span_id"]]


def test_a_run_its_replay_and_an_in_doubt_refusal_arrive_as_mcp_spans_with_the_journal_decision(
    tmp_path: Path, receiver: Receiver
) -> None:
    journal = str(tmp_path / "j.db")
    env = receiver.env()
    run = ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        "--workflow-id",
        "wf",
        env={**env, "EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )
    with run:
        run.initialize()
        answer = traced_call(run, 1)
        assert answer["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": 1, "replayed": False}
        # Over stdio the request goes up byte for byte: the upstream sees the client's own trace context.
        echoed = run.request(
            "tools/call", {"name": "echo_meta", "arguments": {}, "_meta": {"traceparent": TRACEPARENT}}
        )
        assert json.loads(echoed["result"]["content"][0]["text"])["_meta"]["traceparent"] == TRACEPARENT
        assert run.close() == 0

    spans = receiver.wait_for_spans(lambda s: len(server_spans(s)) == 1)
    server = server_spans(spans)[0]
    assert server["trace_id"] == CLIENT_TRACE
    assert server["parent"] == CLIENT_SPAN
    assert server["trace_state"] == TRACESTATE  # the vendors' entries travel on with the trace
    attributes = server["attributes"]
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "send_email"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["jsonrpc.request.id"] == "1002"  # after initialize's
    assert attributes["mcp.protocol.version"] == "2025-11-25"
    assert attributes["network.transport"] == "pipe"
    assert attributes["checkpoint.workflow"] == "wf"
    assert attributes["checkpoint.seq"] == 1
    assert attributes["checkpoint.decision"] == "run"
    assert attributes["checkpoint.journal.commit.duration"] > 0
    assert "error.type" not in attributes
    assert server["resource"]["service.name"] == "checkpoint-under-test"
    below = children(spans, server)
    upstream = [span for span in below if span["kind"] == "CLIENT"]
    assert [span["name"] for span in upstream] == ["tools/call send_email"]
    assert upstream[0]["attributes"]["network.transport"] == "pipe"
    commits = sorted((span for span in below if span["name"] == "checkpoint.journal.commit"), key=lambda s: s["start"])
    assert [span["attributes"]["checkpoint.journal.write"] for span in commits] == ["reserve", "complete"]
    # The PENDING row was durable before the upstream exchange began, the COMPLETED row before the answer left.
    assert commits[0]["end"] <= upstream[0]["start"]
    assert upstream[0]["end"] <= commits[1]["start"] <= server["end"]
    opened = next(span for span in spans if span["name"] == "initialize" and span["kind"] == "SERVER")
    assert opened["parent"] is None  # no trace context in the request: a root span of its own trace
    assert opened["trace_id"] != CLIENT_TRACE

    # A replay: answered from the journal, no upstream exchange.
    replay = ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        "--workflow-id",
        "wf",
        "--replay-from-start",
        env={**env, "EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )
    with replay:
        replay.initialize()
        assert traced_call(replay, 1)["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
        assert traced_call(replay, 1, to="someone else")["error"]["code"] == DIVERGENCE
        assert replay.close() == 0
    spans = receiver.wait_for_spans(lambda s: len(server_spans(s)) == 3)
    replayed, diverged = sorted(server_spans(spans), key=lambda s: s["start"])[1:]
    assert replayed["attributes"]["checkpoint.decision"] == "replay"
    assert replayed["attributes"]["checkpoint.seq"] == 1
    assert not [span for span in children(spans, replayed) if span["kind"] == "CLIENT"]
    assert diverged["attributes"]["checkpoint.decision"] == "divergence"
    assert diverged["attributes"]["error.type"] == str(DIVERGENCE)
    assert not [span for span in children(spans, diverged) if span["kind"] == "CLIENT"]

    # In doubt: the proxy dies after the PENDING commit; the next one refuses the call, and says so in its span.
    crash = ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        "--workflow-id",
        "wf",
        env={
            **env,
            "EFFECTS_FILE": str(tmp_path / "effects.jsonl"),
            "CHECKPOINT_DEBUG_TRIGGER": "after_pending_commit",
        },
    )
    with crash:
        crash.initialize()
        crash.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "x"}, "_meta": {"checkpoint_seq": 5}},
            }
        )
        assert crash.proc.wait(20) != 0
    after = ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        "--workflow-id",
        "wf",
        env={**env, "EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )
    with after:
        after.initialize()
        refused = after.request(
            "tools/call",
            {
                "name": "send_email",
                "arguments": {"to": "x"},
                "_meta": {"checkpoint_seq": 5, "traceparent": TRACEPARENT},
            },
        )
        assert refused["error"]["code"] == IN_DOUBT
        assert after.close() == 0
    spans = receiver.wait_for_spans(lambda s: any(x["attributes"].get("checkpoint.decision") == "in_doubt" for x in s))
    assert len(server_spans(spans)) == 4  # the crashed proxy's span died with it (SIGKILL): nothing was exported
    in_doubt = next(x for x in spans if x["attributes"].get("checkpoint.decision") == "in_doubt")
    assert in_doubt["name"] == "tools/call send_email"
    assert in_doubt["attributes"]["error.type"] == str(IN_DOUBT)
    assert in_doubt["attributes"]["rpc.response.status_code"] == str(IN_DOUBT)
    assert in_doubt["attributes"]["checkpoint.seq"] == 5
    assert in_doubt["status"] == 2  # ERROR
    assert in_doubt["status_message"] == "in doubt"  # the code's name: a message may quote arguments

    # No argument bytes left the proxy in any export, by default.
    assert not any(SECRET.encode() in body for body in receiver.raw)


def test_the_conventions_duration_metrics_are_exported(tmp_path: Path, receiver: Receiver) -> None:
    env = {**receiver.env(), "EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db")]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        traced_call(proxy, 1)
        assert proxy.request("tools/call", {"name": "tool_error", "arguments": {}})["result"]["isError"] is True
        assert proxy.close() == 0
    deadline = time.monotonic() + 20
    while not {"mcp.server.operation.duration", "mcp.client.operation.duration"} <= {
        m["name"] for m in receiver.metrics
    }:
        assert time.monotonic() < deadline, receiver.metrics
        time.sleep(0.05)
    server = [m for m in receiver.metrics if m["name"] == "mcp.server.operation.duration"]
    assert all(m["unit"] == "s" and m["kind"] == "histogram" for m in server)
    assert server[0]["bounds"][:3] == [0.01, 0.02, 0.05]
    calls = {
        m["attributes"].get("gen_ai.tool.name"): m for m in server if m["attributes"]["mcp.method.name"] == "tools/call"
    }
    assert calls["send_email"]["attributes"]["checkpoint.decision"] == "run"
    assert calls["tool_error"]["attributes"]["error.type"] == "tool_error"
    client = [m for m in receiver.metrics if m["name"] == "mcp.client.operation.duration"]
    assert any(m["attributes"].get("gen_ai.tool.name") == "send_email" for m in client)
    spans = receiver.wait_for_spans(lambda s: len(server_spans(s, "tools/call tool_error")) == 1)
    assert server_spans(spans, "tools/call tool_error")[0]["attributes"]["error.type"] == "tool_error"


@pytest.mark.parametrize(("extra", "recorded"), [((), True), (("--redact-args-in-journal",), False)])
def test_arguments_and_results_are_recorded_only_when_asked_and_never_under_redaction(
    tmp_path: Path, receiver: Receiver, extra: tuple[str, ...], recorded: bool
) -> None:
    env = {**receiver.env(CHECKPOINT_OTEL_RECORD_CONTENT="1"), "EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db"), *extra]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        traced_call(proxy, 1)
        assert proxy.close() == 0
    spans = receiver.wait_for_spans(lambda s: len(server_spans(s)) == 1)
    attributes = server_spans(spans)[0]["attributes"]
    if recorded:
        assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"to": SECRET}
        assert SECRET in attributes["gen_ai.tool.call.result"]
    else:
        assert "gen_ai.tool.call.arguments" not in attributes
        assert "gen_ai.tool.call.result" not in attributes
        assert not any(SECRET.encode() in body for body in receiver.raw)


def opentelemetry_imported(stderr: str) -> bool:
    """Whether ``PYTHONPROFILEIMPORTTIME`` output names an OpenTelemetry module."""
    return any("opentelemetry" in line for line in stderr.splitlines() if line.startswith("import time:"))


@pytest.mark.parametrize(
    ("variables", "exported"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, False),
        ("disabled", False),
        ("endpoint", True),
    ],
)
def test_without_an_endpoint_nothing_of_opentelemetry_is_imported_and_nothing_is_sent(
    tmp_path: Path, receiver: Receiver, variables: Any, exported: bool
) -> None:
    if variables == "disabled":
        variables = {**receiver.env(), "OTEL_SDK_DISABLED": "true"}
    elif variables == "endpoint":
        variables = receiver.env()
    env = {"PYTHONPROFILEIMPORTTIME": "1", "EFFECTS_FILE": str(tmp_path / "effects.jsonl"), **variables}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db")]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        traced_call(proxy, 1)
        assert proxy.close() == 0
        stderr = proxy.stderr
    assert opentelemetry_imported(stderr) is exported
    if exported:
        receiver.wait_for_spans(lambda s: len(server_spans(s)) == 1)
    else:
        time.sleep(0.3)  # what a batch processor would have sent by now (OTEL_BSP_SCHEDULE_DELAY=50)
        assert receiver.requests == 0


@pytest.mark.parametrize("transport", ["streamable", "legacy"])
def test_over_http_the_upstream_gets_the_proxys_exchange_span_as_parent_in_a_traceparent_header(
    tmp_path: Path, receiver: Receiver, transport: str
) -> None:
    with faults_server(tmp_path, *(["--legacy"] if transport == "legacy" else [])) as server:
        argv = ["--upstream-url", server.url, "--journal", str(tmp_path / "j.db"), "--workflow-id", "wf"]
        with ProxyProcess(*argv, env=receiver.env()) as proxy:
            proxy.initialize()
            answer = traced_call(proxy, 1, to="ann")
            assert answer["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
            assert proxy.close() == 0
    spans = receiver.wait_for_spans(lambda s: len(server_spans(s)) == 1)
    server_span = server_spans(spans)[0]
    assert server_span["parent"] == CLIENT_SPAN
    assert server_span["attributes"]["checkpoint.decision"] == "run"
    exchange = [span for span in children(spans, server_span) if span["kind"] == "CLIENT"]
    assert len(exchange) == 1
    attributes = exchange[0]["attributes"]
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == server.port
    assert attributes["network.transport"] == "tcp"
    # client → proxy (SERVER) → proxy's exchange (CLIENT) → the upstream, which got that span as its parent.
    effects = read_effects(tmp_path / "effects.jsonl")
    received = [e for e in effects if e["event"] == "received" and e.get("tool") == "send_email"]
    assert len(received) == 1
    assert received[0]["traceparent"] == f"00-{CLIENT_TRACE}-{exchange[0]['span_id']}-01"
    if transport == "streamable":  # ...while the request's own bytes went up verbatim, _meta.traceparent included
        assert json.loads(received[0]["raw"])["params"]["_meta"]["traceparent"] == TRACEPARENT
    initialize = next(e for e in read_effects(tmp_path / "effects.jsonl") if e.get("method") == "initialize")
    assert initialize["traceparent"] is not None  # every request's exchange is traced, not only tools/call


@pytest.mark.parametrize(
    ("environ", "signals"),
    [
        ({}, (False, False)),
        ({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, (False, False)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, (True, True)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, (False, False)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}, (True, False)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, (True, False)),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, (False, True)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, (False, False)),
    ],
)
def test_which_signals_the_otel_variables_ask_for(environ: dict[str, str], signals: tuple[bool, bool]) -> None:
    assert telemetry.wanted(environ) == signals


def test_a_collector_that_is_down_neither_fails_calls_nor_holds_the_exit_up(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed}", "EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db")]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        assert traced_call(proxy, 1)["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
        assert proxy.close(timeout=12) == 0  # the SDK alone would retry for up to 30 s
        assert "the collector did not take the last spans within 3s" in proxy.stderr


def test_a_call_whose_upstream_dies_ends_both_its_spans_with_the_error_and_they_are_still_exported(
    tmp_path: Path, receiver: Receiver
) -> None:
    env = {**receiver.env(), "EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db")]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        died = proxy.request("tools/call", {"name": "die", "arguments": {"code": 3}})
        assert died["error"]["code"] == UPSTREAM_EXITED
        assert proxy.wait() == 1
    spans = receiver.wait_for_spans(lambda s: len(server_spans(s, "tools/call die")) == 1)
    server = server_spans(spans, "tools/call die")[0]
    assert server["attributes"]["error.type"] == str(UPSTREAM_EXITED)
    assert server["attributes"]["checkpoint.decision"] == "run"  # it went upstream: in doubt now, never re-run
    exchange = [span for span in children(spans, server) if span["kind"] == "CLIENT"]
    assert len(exchange) == 1
    assert exchange[0]["attributes"]["error.type"] == str(UPSTREAM_EXITED)
    assert exchange[0]["status"] == 2


def test_a_cancelled_request_ends_its_spans_as_cancelled(tmp_path: Path, receiver: Receiver) -> None:
    env = {**receiver.env(), "EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db")]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        proxy.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
        wait_until(lambda: read_effects(tmp_path / "effects.jsonl"), what="the upstream got the call")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
        spans = receiver.wait_for_spans(lambda s: len(server_spans(s, "tools/call hang")) == 1)
        server = server_spans(spans, "tools/call hang")[0]
        assert server["attributes"]["error.type"] == "cancelled"
        assert server["status_message"] == "cancelled by the client"
        exchange = [span for span in children(spans, server) if span["kind"] == "CLIENT"]
        assert [span["attributes"]["error.type"] for span in exchange] == ["cancelled"]
        proxy.proc.kill()
