"""Resolving an in-doubt call from the page, in a real browser, after a real proxy was SIGKILLed mid-call."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import BrowserContext, expect

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.records import CallState

from support import done_count, effects_proxy, journal_states, read_effects, wait_until
from ui_support import crashed_journal

RESULT = {"content": [{"type": "text", "text": "sent to bob (checked by hand)"}]}


def test_the_in_doubt_call_of_a_crashed_proxy_is_shown_first_and_resolving_it_from_the_page_is_replayed(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    # A workflow that crashes with its second call in flight (PENDING committed, then SIGKILL) ...
    with effects_proxy(journal, tmp_path, "--workflow-id", "orders", trigger="after_pending_commit@2") as crashed:
        crashed.initialize()
        assert "result" in crashed.call("send_email", {"to": "ann"}, seq=1)
        crashed.send(
            {
                "jsonrpc": "2.0",
                "id": 99,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "bob"}, "_meta": {"checkpoint_seq": 2}},
            }
        )
        assert crashed.proc.wait(20) == -9  # killed by its own trigger, as by a power cut
    assert journal_states(journal, "orders") == {1: CallState.COMPLETED, 2: CallState.PENDING}
    # ... and, later, a healthy workflow: the more recent activity, which would come first without the rule.
    with effects_proxy(journal, tmp_path, "--workflow-id", "newsletter") as healthy:
        healthy.initialize()
        for i in range(1, 4):
            healthy.call("send_email", {"to": f"reader{i}"}, seq=i)
        assert healthy.close() == 0

    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    assert "token=" not in page.url  # the token was traded for a cookie and left the address bar
    first_doubt = page.locator("table.in-doubt tr").nth(1)
    expect(first_doubt).to_contain_text("orders")
    expect(first_doubt).to_contain_text("#2")
    assert page.locator("table.workflows tr[data-workflow]").first.get_attribute("data-workflow") == "orders"

    first_doubt.get_by_role("link", name="#2").click()
    expect(page.locator("h1")).to_contain_text("Call #2")
    expect(page.locator("#arguments")).to_contain_text('"to": "bob"')
    expect(page.get_by_role("alert").or_(page.locator(".alert")).first).to_contain_text("In doubt")
    page.locator("#resolve-completed textarea").fill(json.dumps(RESULT))
    page.locator("#resolve-completed button").click()
    expect(page.get_by_role("status").filter(has_text="Resolved as completed")).to_be_visible()
    expect(page.locator("#outcome")).to_contain_text("checked by hand")

    # The same audit record as `checkpoint journal resolve`.
    j = open_journal(journal)
    try:
        [resolution] = j.resolutions("orders")
        assert (resolution.seq, resolution.action, resolution.previous_state) == (
            2,
            ResolveAction.COMPLETED,
            CallState.PENDING,
        )
        assert json.loads(resolution.outcome or "") == RESULT
        assert resolution.user
        assert resolution.host
    finally:
        j.close()
    expect(page.locator("main")).to_contain_text("resolved as completed (was PENDING)")

    # The next replay returns the result, and the upstream never runs the call again.
    sent_before = done_count(effects, "send_email")
    with effects_proxy(journal, tmp_path, "--workflow-id", "orders") as resumed:
        resumed.initialize()
        replay = resumed.call("send_email", {"to": "bob"}, seq=2)
        assert resumed.close() == 0
    assert replay["result"]["content"] == RESULT["content"]
    assert replay["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(effects, "send_email") == sent_before
    assert not [e for e in read_effects(effects) if e.get("arguments", {}).get("to") == "bob" and e["event"] == "done"]


def test_resolving_from_the_page_is_refused_while_a_live_proxy_owns_the_workflow(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    with effects_proxy(journal, tmp_path, "--workflow-id", "live") as proxy:
        proxy.initialize()
        proxy.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 60}, "_meta": {"checkpoint_seq": 1}},
            }
        )
        wait_until(lambda: any(e["tool"] == "slow" for e in read_effects(effects)), what="the slow call to start")
        ui = ui_server(journal)
        page = browser.new_page()
        page.goto(ui.url)
        assert page.locator("table.in-doubt").count() == 0  # in flight under a live owner: not in doubt
        page.goto(f"{ui.base}call?workflow=live&seq=1")
        expect(page.locator("dl")).to_contain_text("in flight")
        page.locator("#resolve-failed input[name=message]").fill("gave up")
        with page.expect_response(lambda r: r.request.method == "POST") as answer:
            page.locator("#resolve-failed button").click()
        assert answer.value.status == 409
        expect(page.get_by_role("alert")).to_contain_text("Refused, nothing was written")
        expect(page.get_by_role("alert")).to_contain_text("owned by another live proxy")
        assert journal_states(journal, "live") == {1: CallState.PENDING}
        j = open_journal(journal)
        try:
            assert j.resolutions("live") == []
        finally:
            j.close()


def test_a_result_that_is_not_a_json_object_is_refused_with_the_reason_and_the_input_kept(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = crashed_journal(tmp_path)
    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    page.goto(ui.base + "call?workflow=wf&seq=1")
    page.locator("#resolve-completed textarea").fill('["a list, not an object"]')
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.locator("#resolve-completed button").click()
    assert answer.value.status == 400
    expect(page.get_by_role("alert")).to_contain_text("must hold a JSON object")
    expect(page.locator("#resolve-completed textarea")).to_have_value('["a list, not an object"]')
    assert journal_states(journal, "wf") == {1: CallState.PENDING}
