"""Screenshots of the four pages, taken by the test run's browser from a journal real proxies wrote.

``CHECKPOINT_SCREENSHOTS=docs`` (what scripts/screenshots sets) writes them to docs/ui-*.png, linked from the
README; otherwise they go to the test's temporary directory, so a test run never dirties the work tree.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import BrowserContext, expect

from checkpoint_mcp.journal import open_journal, operations

from support import effects_proxy, read_effects, wait_until

DOCS = Path(__file__).parents[2] / "docs"


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def build_journal(journal: str, tmp_path: Path) -> None:
    """Two workflows, a fork, a failure, an operator's resolution and a call left in doubt by a SIGKILL; and a
    third whose refunds wait for a person's approval: one approved and sent, one waiting, one denied."""
    effects = tmp_path / "effects.jsonl"
    with effects_proxy(journal, tmp_path, "--workflow-id", "order-1042") as first:
        first.initialize()
        first.call("send_email", {"to": "ann@example.com", "subject": "order confirmed"}, seq=1)
        first.call("send_email", {"to": "ann@example.com", "subject": "invoice 1042"}, seq=2)
        first.call("fail", {"reason": "card declined"}, seq=3)
        first.call("send_email", {"to": "ann@example.com", "subject": "payment retry"}, seq=4)
        first.send(
            {
                "jsonrpc": "2.0",
                "id": "ship",
                "method": "tools/call",
                "params": {
                    "name": "slow",
                    "arguments": {"seconds": 30, "label": "ship order 1042"},
                    "_meta": {"checkpoint_seq": 5},
                },
            }
        )
        wait_until(lambda: any(e["tool"] == "slow" for e in read_effects(effects)), what="the shipping call")
        first.kill()
    with effects_proxy(journal, tmp_path, "--workflow-id", "order-1042", "--on-divergence", "fork") as second:
        second.initialize()
        second.call("send_email", {"to": "ann@example.com", "subject": "order confirmed"}, seq=1)
        second.call("send_email", {"to": "ann@example.com", "subject": "invoice 1042 (corrected)"}, seq=2)
        second.call("send_email", {"to": "ann@example.com", "subject": "receipt"})
        assert second.close() == 0
    with effects_proxy(journal, tmp_path, "--workflow-id", "newsletter-48") as third:
        third.initialize()
        for i in range(1, 5):
            third.call("send_quiet", {"list": "subscribers", "batch": i}, seq=i)
        third.call("fail", {"reason": "rate limited"}, seq=5)
        assert third.close() == 0
    j = open_journal(journal)
    try:
        operations.resolve(j, "newsletter-48", 5, message="resent by hand after the rate limit")
        operations.resolve(j, "order-1042", 3, message="card declined; the customer was told by phone")
    finally:
        j.close()
    policy = tmp_path / "approve.toml"
    policy.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    refund = {"to": "carol@example.com", "subject": "refund of order 7", "amount": "120.00 EUR"}
    with effects_proxy(journal, tmp_path, "--workflow-id", "refunds", "--policy", str(policy)) as fourth:
        fourth.initialize()
        first_ask = fourth.call("send_email", refund)["error"]["data"]["approval"]
        _decide(journal, first_ask, True, None)
        assert "result" in fourth.call("send_email", refund)
        fourth.call("send_email", {**refund, "to": "dave@example.com", "subject": "refund of order 8"})
        denied = fourth.call("send_email", {**refund, "to": "mallory@example.com", "amount": "9800.00 EUR"})
        _decide(journal, denied["error"]["data"]["approval"], False, "not a customer of ours")
        assert fourth.close() == 0


def _decide(journal: str, approval: int, grant: bool, reason: str | None) -> None:
    j = open_journal(journal)
    try:
        j.approvals.decide_approval(approval, grant, "alice", reason)
    finally:
        j.close()


def test_screenshots_of_the_four_pages(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    build_journal(journal, tmp_path)
    out = DOCS if os.environ.get("CHECKPOINT_SCREENSHOTS") == "docs" else tmp_path
    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    expect(page.locator("table.in-doubt")).to_contain_text("order-1042")
    page.screenshot(path=str(out / "ui-workflows.png"), full_page=True)
    page.get_by_role("link", name="order-1042", exact=True).first.click()
    expect(page.locator("svg.timeline")).to_be_visible()
    page.screenshot(path=str(out / "ui-timeline.png"), full_page=True)
    page.locator('svg.timeline a[data-seq="5"]').click()
    expect(page.locator("h1")).to_contain_text("Call #5")
    page.screenshot(path=str(out / "ui-call.png"), full_page=True)
    page.locator("header nav").get_by_role("link", name="Approvals").click()
    expect(page.locator("table.waiting")).to_contain_text("dave@example.com")
    page.screenshot(path=str(out / "ui-approvals.png"), full_page=True)
    for name in ("ui-workflows.png", "ui-timeline.png", "ui-call.png", "ui-approvals.png"):
        width, height = _png_size(out / name)
        assert width >= 1000, (name, width)
        assert height >= 400, (name, height)
