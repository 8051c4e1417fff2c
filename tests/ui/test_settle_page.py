"""Settling an in-doubt call from its page by the tool policy (probe, idempotency key), in a real browser, after a
real proxy was SIGKILLed mid-call; the pages ask the upstream as `checkpoint journal reconcile` does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import BrowserContext, expect

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.records import CallState
from ledger import POLICY, ledger, verified

from support import ProxyProcess, journal_states, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


def crashed_mail(journal: str, tmp_path: Path, policy: Path) -> None:
    env = {"LEDGER_DIR": str(tmp_path), "CHECKPOINT_DEBUG_TRIGGER": "after_upstream_reply"}
    argv = ("--upstream-cmd", server_cmd("ledger_server.py"), "--journal", journal, "--workflow-id", "orders")
    with ProxyProcess(*argv, "--policy", str(policy), env=env) as crashed:
        crashed.initialize()
        params = {"name": "send_email", "arguments": MAIL, "_meta": {"checkpoint_seq": 1}}
        crashed.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert crashed.proc.wait(20) == -9


def test_an_in_doubt_mail_is_settled_from_its_page_by_the_probe_a_dry_run_first(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    crashed_mail(journal, tmp_path, policy)
    assert journal_states(journal, "orders") == {1: CallState.PENDING}

    upstream = ("--policy", str(policy), "--upstream-cmd", server_cmd("ledger_server.py"))
    ui = ui_server(journal, *upstream, env={"LEDGER_DIR": str(tmp_path)})
    page = browser.new_page()
    page.goto(ui.url)
    page.goto(f"{ui.base}call?workflow=orders&seq=1")
    expect(page.locator("#settle")).to_contain_text("Settle it by the tool policy")

    page.locator("#settle input[name=dry_run]").check()
    page.locator("#settle button").click()
    expect(page.get_by_role("status")).to_contain_text("would be completed: probe list_outbox: happened_if matched")
    assert journal_states(journal, "orders") == {1: CallState.PENDING}  # a dry run changes nothing

    page.locator("#settle button").click()
    expect(page.get_by_role("status")).to_contain_text("#1 send_email: completed — probe list_outbox")
    expect(page.locator("#outcome")).to_contain_text("never received")
    assert page.locator("#settle").count() == 0  # settled: no longer in doubt
    assert journal_states(journal, "orders") == {1: CallState.COMPLETED}
    j = open_journal(journal)
    try:
        [resolution] = j.resolutions("orders")
    finally:
        j.close()
    assert resolution.action is ResolveAction.COMPLETED
    assert resolution.user == "checkpoint (probe list_outbox)"
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]  # the probe only read
    verified(journal)


def test_pages_started_without_a_policy_offer_no_settle_action(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    crashed_mail(journal, tmp_path, policy)
    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    page.goto(f"{ui.base}call?workflow=orders&seq=1")
    expect(page.locator("#resolve-completed")).to_be_visible()
    assert page.locator("#settle").count() == 0
