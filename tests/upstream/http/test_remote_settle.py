"""In-doubt calls to a remote upstream (``--upstream-url``) settled by the tool policy: the probe goes over HTTP
like any call, and a charge is sent again under the same idempotency key, which the remote service honours."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT
from ledger import verified

from httpservers import HttpServer
from support import SERVERS, ProxyProcess, journal_calls

POLICY = """
[tools.send_email.probe]
tool = "list_outbox"
arguments = { to = "/to", subject = "/subject" }
happened_if = { pointer = "/count", equals = 1 }
not_happened_if = { pointer = "/count", equals = 0 }
{settle_after}

[tools.list_outbox]
read_only = true

[tools.charge_card]
idempotency = { argument = "idempotency_key" }
"""
MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


@pytest.fixture
def mailer(tmp_path: Path) -> HttpServer:
    env = {"DEMO_OUTBOX": str(tmp_path / "outbox.txt"), "DEMO_LEDGER": str(tmp_path / "ledger.txt")}
    with HttpServer([sys.executable, str(SERVERS / "http_mailer.py")], env=env) as server:
        yield server


def proxy(server: HttpServer, journal: str, tmp_path: Path, settle_after: str = "", trigger: str = "") -> ProxyProcess:
    """The proxy before ``server``; ``settle_after``: the probe's key (by default none: a "did not happen" counts
    at once)."""
    policy = tmp_path / f"policy-{settle_after or 'none'}.toml"
    policy.write_text(POLICY.replace("{settle_after}", f'settle_after = "{settle_after}"' if settle_after else ""))
    env = {"CHECKPOINT_DEBUG_TRIGGER": trigger} if trigger else {}
    return ProxyProcess("--upstream-url", server.url, "--journal", journal, "--policy", str(policy), env=env)


def crash(
    server: HttpServer, journal: str, tmp_path: Path, tool: str, arguments: dict[str, object], trigger: str
) -> None:
    with proxy(server, journal, tmp_path, trigger=trigger) as crashing:
        crashing.initialize()
        params = {"name": tool, "arguments": arguments, "_meta": {"checkpoint_seq": 1}}
        crashing.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert crashing.proc.wait(30) != 0


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_remote_mail_in_doubt_is_settled_by_a_probe_over_http(
    mailer: HttpServer, journal: str, workflow: str, tmp_path: Path
) -> None:
    crash(mailer, journal, tmp_path, "send_email", MAIL, "after_upstream_reply")
    with proxy(mailer, journal, tmp_path) as resumed:
        resumed.initialize()
        answer = resumed.call("send_email", MAIL, seq=1)
    assert answer["result"]["_meta"]["checkpoint/settled"]["verdict"] == "happened"
    assert lines(tmp_path / "outbox.txt") == ["to=bob@example.com subject='Your invoice'"]
    assert journal_calls(journal, workflow)[0].state is CallState.COMPLETED
    verified(journal)


def test_a_remote_mail_found_unsent_waits_for_settle_after_before_it_is_sent(
    mailer: HttpServer, journal: str, workflow: str, tmp_path: Path
) -> None:
    crash(mailer, journal, tmp_path, "send_email", MAIL, "after_pending_commit")
    with proxy(mailer, journal, tmp_path, settle_after="1h") as careful:
        careful.initialize()
        refused = careful.call("send_email", MAIL, seq=1)
    assert refused["error"]["code"] == IN_DOUBT
    assert "may still land" in refused["error"]["data"]["settlement"]["reason"]
    assert lines(tmp_path / "outbox.txt") == []
    with proxy(mailer, journal, tmp_path) as resumed:
        resumed.initialize()
        sent = resumed.call("send_email", MAIL, seq=1)
    assert sent["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
    assert lines(tmp_path / "outbox.txt") == ["to=bob@example.com subject='Your invoice'"]
    verified(journal)


def test_a_remote_charge_in_doubt_is_sent_again_under_its_key_and_charged_once(
    mailer: HttpServer, journal: str, workflow: str, tmp_path: Path
) -> None:
    charge = {"customer": "alice", "cents": 4200}
    crash(mailer, journal, tmp_path, "charge_card", charge, "after_upstream_reply")
    with proxy(mailer, journal, tmp_path) as resumed:
        resumed.initialize()
        answer = resumed.call("charge_card", charge, seq=1)
    assert answer["result"]["content"][0]["text"] == "charged alice 42.00 EUR"
    [line] = lines(tmp_path / "ledger.txt")
    assert line.startswith("customer=alice cents=4200 key=checkpoint-")
    assert journal_calls(journal, workflow)[0].state is CallState.COMPLETED
    verified(journal)
