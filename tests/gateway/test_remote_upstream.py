"""`checkpoint serve --upstream-url`: the gateway in front of a remote server over Streamable HTTP, journaled."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal.records import CallState
from gatewayproc import MODERN, GatewayProcess, initialize, modern_call, request

from httpservers import sdk_server
from support import DEFAULT_TIMEOUT, checkpoint_argv, done_count, journal_states

WORKFLOW = "order-11"
PATH = f"/w/{WORKFLOW}/mcp"


def session_call(port: int, session: str, ident: int, arguments: dict[str, Any], seq: int) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": "send_email", "arguments": arguments, "_meta": {"checkpoint_seq": seq}},
    }
    reply = request(port, "POST", PATH, body, {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
    assert reply.status == 200, reply.body
    return reply.message()


@pytest.mark.parametrize("flags", [[], ["--stateless", "--json"]], ids=["sse-sessions", "stateless-json"])
def test_calls_through_the_gateway_to_a_remote_server_are_journaled_and_replay_in_both_eras(
    tmp_path: Path, flags: list[str]
) -> None:
    journal = str(tmp_path / "j.db")
    with (
        sdk_server(tmp_path, *flags) as server,
        GatewayProcess("--upstream-url", server.url, "--journal", journal) as gateway,
    ):
        first = initialize(gateway.port, PATH)
        answer = session_call(gateway.port, first, 1, {"to": "ann"}, seq=1)
        assert answer["result"]["content"][0]["text"] == "sent to ann"
        assert answer["result"]["_meta"]["checkpoint/journal"] == {"workflow": WORKFLOW, "seq": 1, "replayed": False}
        second = initialize(gateway.port, PATH)
        again = session_call(gateway.port, second, 7, {"to": "ann"}, seq=1)
        assert again["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
        modern = request(
            gateway.port, "POST", PATH, modern_call(3, "send_email", {"to": "ann"}, checkpoint_seq=1), MODERN
        )
        assert modern.status == 200, modern.body
        assert modern.message()["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(tmp_path / "effects.jsonl") == 1
    assert journal_states(journal, WORKFLOW) == {1: CallState.COMPLETED}


def test_a_remote_upstream_s_bad_settings_are_refused_before_the_gateway_listens(tmp_path: Path) -> None:
    done = subprocess.run(
        checkpoint_argv(
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream-url",
            "http://127.0.0.1:9/mcp",
            "--upstream-header",
            "Authorization: Bearer ${CHECKPOINT_TEST_UNSET_VARIABLE}",
        ),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=False,
    )
    assert done.returncode != 0
    assert "CHECKPOINT_TEST_UNSET_VARIABLE" in done.stderr
    assert "listening on" not in done.stderr
