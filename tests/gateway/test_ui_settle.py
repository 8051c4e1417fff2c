"""The pages `checkpoint serve --policy` mounts at /ui settle an in-doubt call as `checkpoint journal ui` does:
a real proxy SIGKILLed mid-call leaves the call in doubt, a real gateway serves the pages, and the operator's POSTs
carry the cookie and the CSRF field the page gave, as a browser sends them."""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.records import CallState
from gatewayproc import MODERN, GatewayProcess, modern_call, pages_url, request
from ledger import POLICY, ledger, verified

from support import ProxyProcess, journal_states, server_cmd, wait_until

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
MODERN_META = "io.modelcontextprotocol/protocolVersion"
PAGES = "pages.url"  # --ui-url-file: where each gateway writes its pages' URL with the token


def crashed_mail(journal: str, tmp_path: Path, policy: Path) -> None:
    """A proxy SIGKILLed after the upstream sent the mail and before the journal heard: call #1 in doubt."""
    env = {"LEDGER_DIR": str(tmp_path), "CHECKPOINT_DEBUG_TRIGGER": "after_upstream_reply"}
    argv = ("--upstream-cmd", server_cmd("ledger_server.py"), "--journal", journal, "--workflow-id", "orders")
    with ProxyProcess(*argv, "--policy", str(policy), env=env) as crashed:
        crashed.initialize()
        params = {"name": "send_email", "arguments": MAIL, "_meta": {"checkpoint_seq": 1}}
        crashed.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert crashed.proc.wait(20) == -9
    assert journal_states(journal, "orders") == {1: CallState.PENDING}


class Operator:
    """A browser's part: trades the printed token for the pages' cookies, reads the form, posts it back."""

    def __init__(self, url: str) -> None:
        self.base = url.split("?", 1)[0]
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        with self.opener.open(url, timeout=30) as response:  # 303 to the pages, with the cookies
            assert response.status == 200

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=30) as response:
            body: str = response.read().decode()
            return body

    def settle(self, page: str, *, dry_run: bool = False) -> tuple[int, str]:
        """Submit the page's #settle form as a browser does (its hidden fields, and Origin)."""
        form = re.search(r'<form class="resolve" id="settle" method="post" action="([^"]+)">(.*?)</form>', page, re.S)
        assert form is not None, page
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form.group(2)))
        assert "csrf" in fields
        if dry_run:
            fields["dry_run"] = "yes"
        parts = urllib.parse.urlsplit(self.base)
        target = f"{parts.scheme}://{parts.netloc}{form.group(1)}"
        data = urllib.parse.urlencode(fields).encode()
        sent = urllib.request.Request(target, data=data, headers={"Origin": f"{parts.scheme}://{parts.netloc}"})
        try:
            with self.opener.open(sent, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def policy_gateway(tmp_path: Path, journal: str, policy: Path) -> GatewayProcess:
    upstream = ("--upstream-cmd", server_cmd("ledger_server.py"))
    pages = ("--ui-url-file", str(tmp_path / PAGES))
    return GatewayProcess(
        *upstream, "--journal", journal, "--policy", str(policy), *pages, env={"LEDGER_DIR": str(tmp_path)}
    )


def test_serve_s_pages_settle_an_in_doubt_mail_by_the_probe_a_dry_run_first(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    crashed_mail(journal, tmp_path, policy)

    with policy_gateway(tmp_path, journal, policy) as gateway:
        operator = Operator(pages_url(gateway, tmp_path / PAGES))
        page = operator.get("call?workflow=orders&seq=1")
        assert "Settle it by the tool policy" in page

        status, body = operator.settle(page, dry_run=True)
        assert status == 200, body
        assert "would be completed: probe list_outbox: happened_if matched" in body
        assert journal_states(journal, "orders") == {1: CallState.PENDING}  # a dry run changes nothing

        status, body = operator.settle(page)
        assert status == 200, body
        assert "#1 send_email: completed — probe list_outbox" in body
        assert 'id="settle"' not in body  # settled: no longer in doubt
        assert journal_states(journal, "orders") == {1: CallState.COMPLETED}

        forged = page.replace('name="csrf" value="', 'name="csrf" value="x')
        assert operator.settle(forged)[0] == 403  # a POST without the page's CSRF field writes nothing
    j = open_journal(journal)
    try:
        [resolution] = j.resolutions("orders")
    finally:
        j.close()
    assert resolution.action is ResolveAction.COMPLETED
    assert resolution.user == "checkpoint (probe list_outbox)"
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]  # the probe only read: the mail went out once
    verified(journal)


def test_once_the_gateway_serves_the_workflow_it_owns_it_and_the_pages_refuse_as_reconcile_does(
    tmp_path: Path,
) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    crashed_mail(journal, tmp_path, policy)

    with policy_gateway(tmp_path, journal, policy) as gateway:
        operator = Operator(pages_url(gateway, tmp_path / PAGES))
        page = operator.get("call?workflow=orders&seq=1")
        hello = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        opened = request(gateway.port, "POST", "/w/orders/mcp", hello, {"MCP-Protocol-Version": "2025-06-18"})
        assert opened.status == 200, opened.body
        status, body = operator.settle(page)
        assert status == 409, body
        assert "Refused, nothing was written" in body
        assert "checkpoint serve" in body
        assert journal_states(journal, "orders") == {1: CallState.PENDING}
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]  # the crashed call's mail, once; nothing more


def test_serve_without_a_policy_offers_no_settle_action(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    crashed_mail(journal, tmp_path, policy)
    upstream = ("--upstream-cmd", server_cmd("ledger_server.py"))
    pages = ("--ui-url-file", str(tmp_path / PAGES))
    with GatewayProcess(*upstream, "--journal", journal, *pages, env={"LEDGER_DIR": str(tmp_path)}) as gateway:
        page = Operator(pages_url(gateway, tmp_path / PAGES)).get("call?workflow=orders&seq=1")
        assert 'id="resolve-completed"' in page
        assert 'id="settle"' not in page


def test_on_postgresql_a_live_replica_s_pages_settle_the_call_a_killed_replica_left_in_doubt(
    pg_url: str, tmp_path: Path
) -> None:
    """Replicas own no workflow (each row names its replica): a live replica serving the workflow does not block
    settling a call whose replica is dead, as `checkpoint journal reconcile` decides; the dead one's call only."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    upstream = ("--upstream-cmd", server_cmd("ledger_server.py"), "--journal", pg_url, "--policy", str(policy))
    env = {"LEDGER_DIR": str(tmp_path)}
    trigger = {**env, "CHECKPOINT_DEBUG_TRIGGER": "after_upstream_reply"}
    pages = ("--ui-url-file", str(tmp_path / PAGES))
    with GatewayProcess(*upstream, *pages, env=env) as survivor, GatewayProcess(*upstream, env=trigger) as victim:
        call = modern_call(1, "send_email", MAIL, checkpoint_seq=1)
        with contextlib.suppress(OSError):
            request(victim.port, "POST", "/w/orders/mcp", call, MODERN)
        assert victim.proc.wait(20) == -9
        assert journal_states(pg_url, "orders") == {1: CallState.PENDING}
        served = request(survivor.port, "POST", "/w/orders/mcp", modern_call(2, "list_outbox", MAIL), MODERN)
        assert served.status == 200, served.body  # the survivor serves the workflow meanwhile

        operator = Operator(pages_url(survivor, tmp_path / PAGES))
        page = operator.get("call?workflow=orders&seq=1")
        deadline = time.monotonic() + 30
        while True:  # until the dead replica's liveness lock is gone, its call is in flight, not in doubt
            status, body = operator.settle(page)
            assert status == 200, body
            if "completed — probe list_outbox" in body:
                break
            assert "no call is in doubt" in body, body
            assert time.monotonic() < deadline
            time.sleep(0.3)
        assert journal_states(pg_url, "orders")[1] is CallState.COMPLETED
    assert [e["event"] for e in ledger(tmp_path)].count("done") == 1  # the mail went out once
    verified(pg_url)


def test_a_settle_held_at_its_probe_and_at_its_journal_write_never_stops_the_gateway_s_mcp_traffic(
    tmp_path: Path,
) -> None:
    """The settle runs on a thread of its own: while its probe is held, and then while its journal write waits for
    a write lock another connection holds, the gateway answers MCP requests at once; then the settle completes."""
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox").replace('timeout = "1s"', 'timeout = "30s"'))
    crashed_mail(journal, tmp_path, policy)
    gate = tmp_path / "gate"
    env = {"LEDGER_DIR": str(tmp_path), "LEDGER_PROBE_GATE": str(gate)}
    upstream = ("--upstream-cmd", server_cmd("ledger_server.py"), "--journal", journal, "--policy", str(policy))
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {MODERN_META: "2026-07-28"}}}

    def answered_at_once() -> bool:
        reply = request(gateway.port, "POST", "/w/other/mcp", ping, MODERN, timeout=3.0)
        return reply.status == 200 and reply.message()["result"] == {}

    pages = ("--ui-url-file", str(tmp_path / PAGES))
    with GatewayProcess(*upstream, *pages, env=env) as gateway, concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert answered_at_once()  # the other workflow's upstream runs before the settle starts
        operator = Operator(pages_url(gateway, tmp_path / PAGES))
        page = operator.get("call?workflow=orders&seq=1")
        settling = pool.submit(operator.settle, page)
        wait_until(lambda: Path(f"{gate}.asked").exists(), what="the settle's probe")
        assert answered_at_once()
        blocker = sqlite3.connect(journal, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")  # the settle's write will wait for this lock
            gate.touch()
            wait_until(lambda: Path(f"{gate}.answered").exists(), what="the probe's answer")
            assert answered_at_once()
            assert not settling.done()
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        status, body = settling.result(timeout=30)
    assert status == 200, body
    assert "#1 send_email: completed — probe list_outbox" in body
    assert journal_states(journal, "orders") == {1: CallState.COMPLETED}
