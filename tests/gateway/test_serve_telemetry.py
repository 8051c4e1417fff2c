"""`checkpoint serve` traced: its requests' spans continue the HTTP ``traceparent`` header, or the request's own
``_meta.traceparent`` (then the header's context is linked), as a real OTLP/HTTP receiver gets them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gatewayproc import MODERN, effects_gateway, initialize, modern_call, request

from otlp import Receiver

HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"
HEADER_SPAN = "b7ad6b7169203331"
META_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
META_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def receiver() -> Any:
    with Receiver() as started:
        yield started


def test_served_requests_continue_the_http_traceparent_or_the_meta_one_and_say_what_the_journal_decided(
    tmp_path: Path, receiver: Receiver
) -> None:
    header = {"traceparent": f"00-{HEADER_TRACE}-{HEADER_SPAN}-01"}
    meta = {"traceparent": f"00-{META_TRACE}-{META_SPAN}-01", "checkpoint_seq": 1}
    journal = str(tmp_path / "j.db")
    with effects_gateway(tmp_path, "--journal", journal, "--workflow-id", "wf", env=receiver.env()) as gateway:
        initialize(gateway.port, headers=header)
        first = request(
            gateway.port, "POST", body=modern_call(1, "send_email", {"to": "ann"}, **meta), headers={**MODERN, **header}
        )
        assert first.message()["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
        again = request(gateway.port, "POST", body=modern_call(2, "send_email", {"to": "ann"}, **meta), headers=MODERN)
        assert again.message()["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
        assert gateway.terminate() == 128 + 15

    def calls(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [s for s in spans if s["name"] == "tools/call send_email" and s["kind"] == "SERVER"]

    spans = receiver.wait_for_spans(lambda s: len(calls(s)) == 2)
    opened = next(s for s in spans if s["name"] == "initialize" and s["kind"] == "SERVER")
    assert (opened["trace_id"], opened["parent"]) == (HEADER_TRACE, HEADER_SPAN)
    assert opened["attributes"]["network.transport"] == "tcp"
    assert opened["attributes"]["mcp.protocol.version"] == "2025-06-18"

    run, replay = sorted(calls(spans), key=lambda s: s["start"])
    assert (run["trace_id"], run["parent"]) == (META_TRACE, META_SPAN)
    assert run["links"] == [(HEADER_TRACE, HEADER_SPAN)]
    assert run["attributes"]["checkpoint.decision"] == "run"
    assert run["attributes"]["checkpoint.workflow"] == "wf"
    assert run["attributes"]["mcp.protocol.version"] == "2026-07-28"
    assert [s["kind"] for s in spans if s["parent"] == run["span_id"] and s["kind"] == "CLIENT"] == ["CLIENT"]
    assert replay["attributes"]["checkpoint.decision"] == "replay"
    assert replay["links"] == []
    assert not [s for s in spans if s["parent"] == replay["span_id"] and s["kind"] == "CLIENT"]


def test_without_the_variables_the_gateway_imports_nothing_of_opentelemetry(tmp_path: Path) -> None:
    env = {"PYTHONPROFILEIMPORTTIME": "1", "OTEL_SERVICE_NAME": "x"}
    with effects_gateway(tmp_path, "--journal", str(tmp_path / "j.db"), env=env) as gateway:
        call = modern_call(1, "send_email", {"to": "ann"}, checkpoint_seq=1)
        assert request(gateway.port, "POST", body=call, headers=MODERN).message()["result"]
        assert gateway.terminate() == 128 + 15
        imports = [line for line in gateway.stderr.splitlines() if line.startswith("import time:")]
    assert any("checkpoint_mcp.gateway" in line for line in imports)  # the check sees the imports
    assert not [line for line in imports if "opentelemetry" in line]


def test_with_an_identity_provider_each_request_span_says_whose_it_is(tmp_path: Path, receiver: Receiver) -> None:
    from idp import JwksServer, Key, bearer, token_flags

    key = Key("k", "RS256")
    journal = str(tmp_path / "j.db")
    with (
        JwksServer(key) as jwks,
        effects_gateway(tmp_path, *token_flags(jwks.url), "--journal", journal, env=receiver.env()) as gateway,
    ):
        for ident, who in enumerate(("alice", "bob"), 1):
            headers = {**MODERN, **bearer(key.token(who))}
            reply = request(gateway.port, "POST", "/w/run/mcp", modern_call(ident, "send_email", {"to": who}), headers)
            assert reply.message()["result"]["_meta"]["checkpoint/journal"]["workflow"] == f"{who}/run"
        assert gateway.terminate() == 128 + 15

    def calls(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [s for s in spans if s["name"] == "tools/call send_email" and s["kind"] == "SERVER"]

    spans = receiver.wait_for_spans(lambda s: len(calls(s)) == 2)
    whose = {s["attributes"]["checkpoint.workflow"]: s["attributes"]["checkpoint.principal"] for s in calls(spans)}
    assert whose == {"alice/run": "alice", "bob/run": "bob"}
