"""The Approvals list of the pages a real `checkpoint serve` mounts at /ui, in a real browser, on SQLite and
PostgreSQL: a decision needs the gateway's credentials as a resolve does, and an approval given there lets the
same call, sent again through the gateway, run once; the list then refreshes itself to show it used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.approval_rows import ApprovalState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED
from gatewayproc import MODERN, GatewayProcess, effects_gateway, modern_call, request

from browser import chromium
from support import DEFAULT_TIMEOUT, done_count

TOKEN = "gateway-token-for-the-approvals"
MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def call(gateway: GatewayProcess, ident: int) -> dict[str, Any]:
    bearer = {**MODERN, "Authorization": f"Bearer {TOKEN}"}
    reply = request(gateway.port, "POST", "/w/orders/mcp", modern_call(ident, "send_email", MAIL), bearer)
    assert reply.status == 200, reply.body
    message: dict[str, Any] = reply.message()
    return message


def state_of(location: str, approval: int) -> ApprovalState:
    journal = open_journal(location)
    try:
        found = journal.approvals.approval(approval)
        assert found is not None
        return found.state
    finally:
        journal.close()


def test_serve_s_pages_approve_a_call_behind_the_gateway_s_token_and_it_then_runs_once(
    location: str, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    flags = ("--journal", location, "--policy", str(policy), "--auth-token-env", "GW_TOKEN")
    with effects_gateway(tmp_path, *flags, env={"GW_TOKEN": TOKEN}) as gateway:
        refused = call(gateway, 1)
        assert refused["error"]["code"] == APPROVAL_REQUIRED
        approval = refused["error"]["data"]["approval"]

        # Without the gateway's credentials the list cannot be read, nor a decision posted.
        assert request(gateway.port, "GET", "/ui/approvals").status == 403
        form = f"approval={approval}&decision=approve".encode()
        posted = request(
            gateway.port, "POST", "/ui/decide", form, {"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert posted.status == 403
        assert state_of(location, approval) is ApprovalState.PENDING

        with chromium(tmp_path / "profile") as browser:
            browser.set_default_timeout(DEFAULT_TIMEOUT * 1000)
            page = browser.new_page()
            page.goto(f"{gateway.base}/ui/approvals?token={TOKEN}")
            assert "token=" not in page.url
            row = page.locator(f"table.waiting tr#approval-{approval}")
            expect(row).to_contain_text('"to": "bob@example.com"')
            row.get_by_role("button", name=f"Approve #{approval}").click()
            expect(page.get_by_role("status").filter(has_text=f"Approval #{approval} granted")).to_be_visible()
            assert state_of(location, approval) is ApprovalState.GRANTED

            assert "result" in call(gateway, 2)
            # The page polls the journal's version: the use shows without a reload by hand.
            expect(page.locator(f"table.decided tr#approval-{approval}")).to_have_attribute("data-state", "used")
        again = call(gateway, 3)
        assert again["error"]["data"]["approval"] != approval
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
