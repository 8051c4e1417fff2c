"""The pages themselves in a real browser: live refresh on both databases, forks and divergences, no JavaScript."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect

from checkpoint_mcp.journal import open_journal
from pgserver import PASSWORD

from browser import chromium
from support import effects_proxy, wait_until


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A journal on each database."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def test_live_refresh_shows_a_call_made_after_the_page_opened(
    location: str, tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    with effects_proxy(location, tmp_path, "--workflow-id", "wf") as proxy:
        proxy.initialize()
        proxy.call("send_email", {"to": "ann"}, seq=1)
        ui = ui_server(location)
        overview = browser.new_page()
        overview.goto(ui.url)
        timeline = browser.new_page()
        timeline.goto(ui.base + "workflow?id=wf")
        expect(timeline.locator("table.calls tr[data-seq]")).to_have_count(1)
        expect(overview.locator('tr[data-workflow="wf"]')).to_contain_text("pid")  # the live owner

        proxy.call("send_email", {"to": "bob"}, seq=2)  # made after both pages were drawn

        expect(timeline.locator('table.calls tr[data-seq="2"]')).to_contain_text("bob")
        expect(timeline.locator('svg.timeline a[data-seq="2"]')).to_have_attribute("data-state", "COMPLETED")
        expect(overview.locator('tr[data-workflow="wf"] td.num').nth(2)).to_have_text("2")  # completed: 2
        assert PASSWORD not in ui.printed
        assert PASSWORD not in overview.content()
        assert proxy.close() == 0
    # The owner going away is a change too.
    expect(overview.locator('tr[data-workflow="wf"]')).to_contain_text("none")


def test_a_fork_is_drawn_where_it_branched_and_its_call_shows_the_divergence(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = str(tmp_path / "j.db")
    with effects_proxy(journal, tmp_path, "--workflow-id", "wf") as first:
        first.initialize()
        first.call("send_email", {"to": "ann", "subject": "hello"}, seq=1)
        first.call("send_email", {"to": "ann", "subject": "invoice"}, seq=2)
        assert first.close() == 0
    with effects_proxy(journal, tmp_path, "--workflow-id", "wf", "--on-divergence", "fork") as second:
        second.initialize()
        second.call("send_email", {"to": "ann", "subject": "hello"}, seq=1)  # replayed
        second.call("send_email", {"to": "eve", "subject": "invoice"}, seq=2)  # diverges: branch wf~1
        assert second.close() == 0

    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    rows = page.locator("table.workflows tr[data-workflow]")
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-workflow") for i in range(2)] == ["wf", "wf~1"]
    expect(rows.nth(1)).to_contain_text("└")
    expect(rows.nth(1)).to_contain_text("fork of wf at #2")

    page.goto(ui.base + "workflow?id=wf")
    expect(page.locator("svg.timeline a.fork")).to_contain_text("fork ~1")
    page.locator("svg.timeline a.fork").click()
    expect(page.locator("h1")).to_contain_text("wf~1")
    expect(page.locator("svg.timeline .fork-line")).to_have_count(1)
    expect(page.locator("svg.timeline a.call.inherited")).to_have_count(1)  # #1, replayed from wf
    expect(page.locator('table.calls tr.inherited[data-seq="1"]')).to_contain_text("inherited from wf")

    page.locator('svg.timeline a.call[data-seq="2"]').click()
    expect(page.locator("pre.difference")).to_contain_text('arguments.to: "ann" → "eve"')
    page.goto(ui.base + "call?workflow=wf&seq=2")
    expect(page.locator("pre.difference")).to_contain_text('arguments.to: "ann" → "eve"')


def test_every_page_reads_without_javascript(tmp_path: Path, ui_server: Callable[..., object]) -> None:
    journal = str(tmp_path / "j.db")
    with effects_proxy(journal, tmp_path, "--workflow-id", "wf") as proxy:
        proxy.initialize()
        proxy.call("send_email", {"to": "ann"}, seq=1)
        proxy.call("fail", {"reason": "nope"}, seq=2)
        assert proxy.close() == 0
    ui = ui_server(journal)
    with chromium(tmp_path / "no-js", java_script_enabled=False) as plain_browser:
        plain = plain_browser.new_page()
        plain.goto(ui.url)  # the token still becomes a cookie: that is HTTP, not script
        expect(plain.locator("table.workflows")).to_contain_text("wf")
        plain.get_by_role("link", name="wf", exact=True).click()
        expect(plain.locator("table.calls tr[data-seq]")).to_have_count(2)
        expect(plain.locator("svg.timeline")).to_be_visible()
        plain.get_by_role("link", name="#2", exact=True).click()
        expect(plain.locator("#outcome")).to_contain_text("nope")
        plain.locator("#resolve-release input[name=confirm]").check()
        plain.locator("#resolve-release button").click()  # a plain HTML form post: no script needed
        expect(plain.get_by_role("status").filter(has_text="released")).to_be_visible()
        expect(plain.locator("table.calls tr[data-seq]")).to_have_count(1)


def test_open_hands_the_printed_url_to_the_default_browser(tmp_path: Path, ui_server: Callable[..., object]) -> None:
    opened = tmp_path / "opened.txt"
    fake = tmp_path / "fake-browser"
    fake.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    fake.chmod(0o755)
    open_journal(str(tmp_path / "j.db")).close()  # the pages open an existing journal, never create one
    ui = ui_server(str(tmp_path / "j.db"), "--open", env={"BROWSER": str(fake)})
    wait_until(lambda: opened.exists() and opened.read_text().strip() != "", what="the browser to be opened")
    assert opened.read_text().strip() == ui.url
