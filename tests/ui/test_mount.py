"""The pages mounted at /ui inside another Starlette app that authenticates requests its own way, as
`checkpoint serve` will mount them: every link, form and refresh stays under the mount path."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import BrowserContext, expect
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.ui.app import create_app

from support import DEFAULT_TIMEOUT, effects_proxy, journal_states

GATEWAY_KEY = "gateway-key-not-the-ui-token"


class GatewayAuth:
    """The parent's own authentication: a header the UI knows nothing about."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"x-gateway-key") != GATEWAY_KEY.encode():
            await PlainTextResponse("401 gateway says no\n", status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A parent app on a free loopback port with the pages at /ui; (base URL, journal)."""
    journal = str(tmp_path / "j.db")
    with effects_proxy(journal, tmp_path, "--workflow-id", "wf", trigger="after_pending_commit") as proxy:
        proxy.initialize()
        proxy.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "ann"}, "_meta": {"checkpoint_seq": 1}},
            }
        )
        assert proxy.proc.wait(20) == -9
    ui = create_app(journal, token=None)
    parent = Starlette(
        routes=[Route("/healthz", lambda request: PlainTextResponse("ok")), Mount("/ui", app=ui)],
        middleware=[Middleware(GatewayAuth)],
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(parent, log_level="warning", access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + DEFAULT_TIMEOUT
    while not server.started:
        assert time.monotonic() < deadline, "the parent app did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", journal
    finally:
        server.should_exit = True
        thread.join(DEFAULT_TIMEOUT)
        ui.state.access.close()
        sock.close()


def test_mounted_under_ui_behind_another_auth_every_link_and_form_stays_under_the_mount(
    gateway: tuple[str, str], browser: BrowserContext
) -> None:
    base, journal = gateway
    page = browser.new_page()
    refused = page.goto(base + "/ui/")
    assert refused is not None
    assert refused.status == 401

    browser.set_extra_http_headers({"X-Gateway-Key": GATEWAY_KEY})
    page.goto(base + "/ui/")
    link = page.locator("table.in-doubt a").first
    assert (link.get_attribute("href") or "").startswith("/ui/workflow?")
    assert page.locator("body").get_attribute("data-version-url") == "/ui/version"
    link.click()
    expect(page.locator("h1")).to_contain_text("wf")
    page.locator('svg.timeline a[data-seq="1"]').click()
    assert page.url.startswith(base + "/ui/call?")
    assert page.locator("#resolve-failed").get_attribute("action") == "/ui/resolve"
    page.locator("#resolve-failed input[name=message]").fill("bounced, checked in the mail log")
    page.locator("#resolve-failed button").click()
    expect(page.get_by_role("status").filter(has_text="Resolved as failed")).to_be_visible()
    assert page.url.startswith(base + "/ui/call?")
    assert journal_states(journal, "wf") == {1: CallState.FAILED}
    j = open_journal(journal)
    try:
        assert [r.action for r in j.resolutions("wf")] == [ResolveAction.FAILED]
    finally:
        j.close()
    assert page.request.get(base + "/ui/version").ok
