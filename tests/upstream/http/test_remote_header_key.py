"""A tool policy's idempotency key in an HTTP header (``idempotency = { header = "NAME" }``, ``--upstream-url``):
every call of the tool is POSTed with the key in the header and the client's bytes as they came, and a call in
doubt after a SIGKILL is sent again under the same key (instead of refused), which the payment service honours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.intercept.settle_rules import idempotency_key
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.records import CallState
from gatewayproc import GatewayProcess, initialize, request
from ledger import verified

from httpservers import HttpServer
from support import SERVERS, ProxyProcess, checkpoint_argv, journal_calls

POLICY = """
[tools.charge_card]
idempotency = { header = "Idempotency-Key" }
"""
CHARGE = {"customer": "alice", "cents": 4200}


@pytest.fixture
def payments(tmp_path: Path) -> HttpServer:
    env = {"LEDGER": str(tmp_path / "ledger.txt"), "REQUESTS": str(tmp_path / "requests.jsonl")}
    with HttpServer([sys.executable, str(SERVERS / "http_keyed.py")], env=env) as server:
        yield server


def proxy(server: HttpServer, journal: str, tmp_path: Path, trigger: str = "") -> ProxyProcess:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    env = {"CHECKPOINT_DEBUG_TRIGGER": trigger} if trigger else {}
    return ProxyProcess("--upstream-url", server.url, "--journal", journal, "--policy", str(policy), env=env)


def requests(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def charges(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_every_call_carries_the_key_in_the_header_and_the_body_is_the_clients_bytes(
    payments: HttpServer, journal: str, workflow: str, tmp_path: Path
) -> None:
    sent = [
        {"name": "charge_card", "arguments": CHARGE},
        {"name": "charge_card", "arguments": {"customer": "bob", "cents": 100}, "_meta": {"checkpoint_key": "k-7"}},
    ]
    with proxy(payments, journal, tmp_path) as running:
        running.initialize()
        for n, params in enumerate(sent, start=1):
            line = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
            running.send_raw(line.encode() + b"\n")
            assert running.response(n)["result"]["content"][0]["text"].startswith("charged")
    first, second = requests(tmp_path)
    rows = journal_calls(journal, workflow)
    assert first["key"] == idempotency_key(workflow, rows[0].seq, None)
    assert second["key"] == idempotency_key(workflow, rows[1].seq, "k-7")
    assert first["key"] != second["key"]
    for made, params in zip((first, second), sent, strict=True):
        assert json.loads(made["body"])["params"] == params  # no argument added: the key went in the header
    verified(journal)


def crash(payments: HttpServer, journal: str, workflow: str, tmp_path: Path) -> None:
    """A charge forwarded (and run upstream), then the proxy SIGKILLed before it kept the answer: in doubt."""
    with proxy(payments, journal, tmp_path, trigger="after_upstream_reply") as crashing:
        crashing.initialize()
        params = {"name": "charge_card", "arguments": CHARGE, "_meta": {"checkpoint_seq": 1}}
        crashing.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert crashing.proc.wait(30) != 0
    assert journal_calls(journal, workflow)[0].state is CallState.PENDING


def test_a_charge_in_doubt_is_sent_again_under_the_same_header_and_charged_once(
    payments: HttpServer, journal: str, workflow: str, tmp_path: Path
) -> None:
    crash(payments, journal, workflow, tmp_path)
    with proxy(payments, journal, tmp_path) as resumed:
        resumed.initialize()
        answer = resumed.call("charge_card", CHARGE, seq=1)
    assert answer["result"]["content"][0]["text"] == "charged alice 42.00 EUR"
    key = idempotency_key(workflow, 1, None)
    assert [request["key"] for request in requests(tmp_path)] == [key, key]
    assert charges(tmp_path) == [f"customer=alice cents=4200 key={key}"]  # the upstream ran it once
    [row] = journal_calls(journal, workflow)
    assert row.state is CallState.COMPLETED
    db: Any = open_journal(journal)
    try:
        settled = db.execute(
            "SELECT detail FROM events WHERE workflow_id = ? AND seq = 1 AND kind = 'settled'", (workflow,)
        ).fetchall()
    finally:
        db.close()
    [(detail,)] = settled
    assert "header Idempotency-Key" in detail
    assert key in detail
    verified(journal)


def test_the_gateway_sends_the_key_in_the_header_too(payments: HttpServer, tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    path = "/w/order-12/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "charge_card", "arguments": CHARGE}}
    with GatewayProcess("--upstream-url", payments.url, "--journal", journal, "--policy", str(policy)) as gateway:
        session = initialize(gateway.port, path)
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
        reply = request(gateway.port, "POST", path, body, headers)
        assert reply.status == 200, reply.body
        assert reply.message()["result"]["content"][0]["text"] == "charged alice 42.00 EUR"
    [sent] = requests(tmp_path)
    assert sent["key"] == idempotency_key("order-12", 1, None)
    assert json.loads(sent["body"])["params"] == body["params"]


def test_journal_reconcile_sends_a_charge_in_doubt_again_under_the_same_header(
    payments: HttpServer, journal: str, workflow: str, tmp_path: Path
) -> None:
    crash(payments, journal, workflow, tmp_path)
    argv = checkpoint_argv(
        "journal", "reconcile", "--journal", journal, "--policy", str(tmp_path / "policy.toml"),
        "--upstream-url", payments.url,
    )  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    key = idempotency_key(workflow, 1, None)
    assert [made["key"] for made in requests(tmp_path)] == [key, key]
    assert charges(tmp_path) == [f"customer=alice cents=4200 key={key}"]
    [row] = journal_calls(journal, workflow)
    assert row.state is CallState.COMPLETED
    verified(journal)
