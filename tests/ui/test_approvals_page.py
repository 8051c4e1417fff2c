"""The Approvals list of the operator's pages, in a real browser: a call a real proxy refused for want of a
person's approval is approved (or denied) from the list, and the same call from a fresh proxy then runs once (or
is refused as denied); a decision made elsewhere refreshes the list; a stale or forged decision writes nothing."""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext, expect

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED

from support import ProxyProcess, approval_requests, done_count, server_cmd

MAIL = {"to": "bob@example.com", "subject": "<b>Your invoice</b>"}
POLICY = '[tools.send_email]\napprove = "operator"\n'


def send_mail(journal: str, tmp_path: Path, arguments: dict[str, Any] = MAIL) -> dict[str, Any]:
    """One send_email call from a fresh proxy under the approval policy; its reply."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--workflow-id", "orders"]
    with ProxyProcess(*argv, "--policy", str(policy), env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}) as proxy:
        proxy.initialize()
        reply = proxy.call("send_email", arguments)
        assert proxy.close() == 0, proxy.stderr
    return reply


def sent(tmp_path: Path) -> int:
    return done_count(tmp_path / "effects.jsonl", "send_email")


def requests_of(journal: str) -> dict[int, Approval]:
    return {a.id: a for a in approval_requests(journal)}


def test_a_call_approved_from_the_list_runs_once_from_a_fresh_proxy_and_shows_on_its_timeline(
    tmp_path: Path, ui_server: Callable[..., Any], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    refused = send_mail(journal, tmp_path)
    assert refused["error"]["code"] == APPROVAL_REQUIRED
    approval = refused["error"]["data"]["approval"]
    assert sent(tmp_path) == 0

    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    expect(page.locator("#approvals-waiting")).to_contain_text("1 approval request waits")
    page.locator("header nav").get_by_role("link", name="Approvals").click()
    row = page.locator(f"table.waiting tr#approval-{approval}")
    expect(row).to_contain_text("send_email")
    expect(row).to_contain_text("orders")
    expect(row).to_contain_text("test 0")  # the client as it introduced itself
    # The exact arguments, as JSON text: the markup in them is shown, never drawn.
    expect(row.locator("pre.arguments")).to_have_text(json.dumps(MAIL, indent=2))
    assert row.locator("pre.arguments b").count() == 0

    row.get_by_role("button", name=f"Approve #{approval}").click()
    expect(page.get_by_role("status").filter(has_text=f"Approval #{approval} granted")).to_be_visible()
    expect(page.locator(f"table.decided tr#approval-{approval}")).to_have_attribute("data-state", "granted")
    decided = requests_of(journal)[approval]
    assert (decided.state, decided.decided_by, decided.reason) == (ApprovalState.GRANTED, getpass.getuser(), None)

    assert "result" in send_mail(journal, tmp_path)
    assert sent(tmp_path) == 1
    again = send_mail(journal, tmp_path)  # the approval was used: the same call does not run on it twice
    assert again["error"]["data"]["approval"] != approval
    assert sent(tmp_path) == 1

    # The call's page and the workflow's timeline show the approval it ran on, step by step.
    page.goto(f"{ui.base}call?workflow=orders&seq=1")
    trail = page.locator("ul.approval-trail")
    expect(trail).to_contain_text(f"approval #{approval} requested by test 0")
    expect(trail).to_contain_text(f"approval #{approval} granted by {getpass.getuser()}")
    expect(trail).to_contain_text(f"approval #{approval} used by call #1")
    page.goto(f"{ui.base}workflow?id=orders")
    marks = page.locator("svg.timeline circle.approval")
    expect(marks).to_have_count(3)
    assert [marks.nth(i).get_attribute("class") for i in range(3)] == [
        "approval requested",
        "approval granted",
        "approval used",
    ]
    # The new request the last call made waits on the workflow's page, with its forms.
    expect(page.locator(f"table.waiting tr#approval-{again['error']['data']['approval']}")).to_be_visible()


def test_a_call_denied_from_the_list_is_refused_as_denied_with_the_reason(
    tmp_path: Path, ui_server: Callable[..., Any], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    approval = send_mail(journal, tmp_path)["error"]["data"]["approval"]
    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    page.goto(f"{ui.base}workflow?id=orders")  # the workflow's page lists its waiting request too
    row = page.locator(f"table.waiting tr#approval-{approval}")
    row.locator("form.deny input[name=reason]").fill("wrong customer")
    row.get_by_role("button", name=f"Deny #{approval}").click()
    expect(page.get_by_role("status").filter(has_text=f"Approval #{approval} denied")).to_be_visible()
    expect(page.locator("h1")).to_contain_text("Workflow")
    expect(page.locator(f"table.decided tr#approval-{approval}")).to_contain_text("wrong customer")

    denied = send_mail(journal, tmp_path)
    assert denied["error"]["data"]["reason"] == "approval_denied"
    assert f"denied by {getpass.getuser()}: wrong customer" in denied["error"]["message"]
    assert sent(tmp_path) == 0


def _ask(journal: str, who: str) -> int:
    """A request made as a proxy makes it, straight through the journal (no proxy needed for what the list shows)."""
    store = open_journal(journal)
    try:
        args = json.dumps({"to": who}, separators=(",", ":"))
        made = store.approvals.request_approval(
            "orders", "send_email", args, f"sig-{who}", None, {"pid": 1, "host": "h"}, 60
        )
        return made.id
    finally:
        store.close()


def _decide_elsewhere(journal: str, approval: int) -> None:
    """A decision made by another process (as `checkpoint journal approve` would)."""
    store = open_journal(journal)
    try:
        store.approvals.decide_approval(approval, True, "alice")
    finally:
        store.close()


def test_a_decision_made_elsewhere_refreshes_the_list_and_a_stale_one_is_refused_with_a_clear_error(
    tmp_path: Path, ui_server: Callable[..., Any], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    open_journal(journal, create=True).close()
    first, second = _ask(journal, "ann"), _ask(journal, "eve")
    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    page.goto(ui.base + "approvals")
    expect(page.locator("table.waiting tr[data-approval]")).to_have_count(2)

    _decide_elsewhere(journal, first)  # the page polls the journal's version and reloads itself
    expect(page.locator(f"table.decided tr#approval-{first}")).to_contain_text("granted by alice")
    expect(page.locator("table.waiting tr[data-approval]")).to_have_count(1)

    # Typing a reason holds the reload back; meanwhile someone else grants the same request.
    page.locator(f"tr#approval-{second} input[name=reason]").fill("not this one")
    _decide_elsewhere(journal, second)
    expect(page.locator("#changed")).to_be_visible()
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name=f"Deny #{second}").click()
    assert answer.value.status == 409
    expect(page.get_by_role("alert")).to_contain_text(
        f"Refused, nothing was written: approval #{second} is granted, not pending"
    )
    kept = requests_of(journal)[second]
    assert (kept.state, kept.decided_by, kept.reason) == (ApprovalState.GRANTED, "alice", None)


def test_a_decision_posted_without_the_page_s_csrf_token_is_refused_and_decides_nothing(
    tmp_path: Path, ui_server: Callable[..., Any], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    open_journal(journal, create=True).close()
    approval = _ask(journal, "ann")
    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)  # the browser holds the session and the CSRF cookies: only the form field is missing
    page.goto(ui.base + "approvals")
    token = page.locator(f"tr#approval-{approval} form.approve input[name=csrf]").get_attribute("value")
    assert token
    decide = ui.base + "decide"
    for form in ({"approval": str(approval), "decision": "approve"}, {"approval": str(approval), "csrf": "0" * 64}):
        refused = page.request.post(decide, form={**form, "decision": "approve"}, max_redirects=0)
        assert refused.status == 403
        assert "CSRF" in refused.text()
    assert requests_of(journal)[approval].state is ApprovalState.PENDING
    # The same POST with the page's token is a decision: the refusals above were about the token alone.
    done = page.request.post(decide, form={"approval": str(approval), "decision": "approve", "csrf": token})
    assert done.ok
    assert requests_of(journal)[approval].state is ApprovalState.GRANTED
    # With the token, a request that does not exist, or one already decided, is refused with the reason.
    for number, why in ((9999, "no approval request #9999"), (approval, f"approval #{approval} is granted")):
        stale = page.request.post(decide, form={"approval": str(number), "decision": "deny", "csrf": token})
        assert stale.status == 409
        assert why in stale.text()
    assert requests_of(journal)[approval].state is ApprovalState.GRANTED
