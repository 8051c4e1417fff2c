"""Who may use the pages: the token, the CSRF token on forms, the Host check, loopback-only listening."""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import BrowserContext, expect

from checkpoint_mcp.journal.records import CallState

from support import checkpoint_argv, journal_states
from ui_support import crashed_journal


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=20)
    try:
        connection.request("GET", parts.path + ("?" + parts.query if parts.query else ""), headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_a_wrong_token_or_none_is_refused_and_the_right_one_becomes_a_cookie(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    ui = ui_server(crashed_journal(tmp_path))
    page = browser.new_page()
    wrong = page.goto(ui.base + "?token=not-the-token")
    assert wrong is not None
    assert wrong.status == 403
    assert "wrong token" in page.content()
    bare = page.goto(ui.base)
    assert bare is not None
    assert bare.status == 403
    for path in ("workflow?id=wf", "call?workflow=wf&seq=1", "version"):
        status, _ = get(ui.base + path)
        assert status == 403, path
    right = page.goto(ui.url)
    assert right is not None
    assert right.status == 200
    assert page.url == ui.base  # redirected to the URL without its token
    [cookie] = [c for c in browser.cookies() if c["name"].startswith("checkpoint_ui_")]
    token = ui.url.split("token=", 1)[1]
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"
    assert token not in cookie["value"]
    # Scripts may send the token as a bearer header instead.
    status, body = get(ui.base + "version", {"Authorization": f"Bearer {token}"})
    assert status == 200
    assert '"version"' in body
    assert get(ui.base + "version", {"Authorization": "Bearer wrong"})[0] == 403


def test_a_post_without_the_csrf_token_or_from_another_origin_is_refused_and_writes_nothing(
    tmp_path: Path, ui_server: Callable[..., object], browser: BrowserContext
) -> None:
    journal = crashed_journal(tmp_path)
    ui = ui_server(journal)
    page = browser.new_page()
    page.goto(ui.url)
    page.goto(ui.base + "call?workflow=wf&seq=1")
    page.evaluate("document.querySelector('#resolve-failed input[name=csrf]').remove()")
    page.locator("#resolve-failed input[name=message]").fill("it failed")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.locator("#resolve-failed button").click()
    assert answer.value.status == 403
    expect(page.locator("body")).to_contain_text("CSRF")

    page.goto(ui.base + "call?workflow=wf&seq=1")
    page.evaluate("document.querySelector('#resolve-failed input[name=csrf]').value = 'forged'")
    page.locator("#resolve-failed input[name=message]").fill("it failed")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.locator("#resolve-failed button").click()
    assert answer.value.status == 403

    # The right CSRF field, but sent from another site's page (its Origin): refused too.
    page.goto(ui.base + "call?workflow=wf&seq=1")
    csrf = page.locator("#resolve-failed input[name=csrf]").get_attribute("value")
    forged = page.request.post(
        ui.base + "resolve",
        form={"csrf": csrf or "", "workflow": "wf", "seq": "1", "action": "failed", "message": "x"},
        headers={"Origin": "http://evil.example"},
    )
    assert forged.status == 403
    opaque = page.request.post(
        ui.base + "resolve",
        form={"csrf": csrf or "", "workflow": "wf", "seq": "1", "action": "failed", "message": "x"},
        headers={"Origin": "null"},  # a sandboxed frame's opaque origin
    )
    assert opaque.status == 403
    assert journal_states(journal, "wf") == {1: CallState.PENDING}

    # A GET never acts.
    assert page.request.get(ui.base + "resolve").status == 405
    assert journal_states(journal, "wf") == {1: CallState.PENDING}

    # The control: the very same request from our own origin goes through.
    own = page.request.post(
        ui.base + "resolve",
        form={"csrf": csrf or "", "workflow": "wf", "seq": "1", "action": "failed", "message": "x"},
        headers={"Origin": ui.base.rstrip("/")},
        max_redirects=0,
    )
    assert own.status == 303
    assert journal_states(journal, "wf") == {1: CallState.FAILED}


def test_a_request_for_another_host_name_is_refused_against_dns_rebinding(
    tmp_path: Path, ui_server: Callable[..., object]
) -> None:
    ui = ui_server(crashed_journal(tmp_path))
    token = ui.url.split("token=", 1)[1]
    bearer = {"Authorization": f"Bearer {token}"}
    port = urlsplit(ui.base).port
    assert get(ui.base, bearer)[0] == 200
    assert get(ui.base, {**bearer, "Host": f"localhost:{port}"})[0] == 200
    status, body = get(ui.base, {**bearer, "Host": f"attacker.example:{port}"})
    assert status == 403
    assert "DNS rebinding" in body


def test_a_non_loopback_address_needs_auth_token_env_and_then_takes_that_token(
    tmp_path: Path, ui_server: Callable[..., object]
) -> None:
    journal = crashed_journal(tmp_path)
    refused = subprocess.run(
        checkpoint_argv("journal", "ui", "--journal", journal, "--listen", "0.0.0.0:0"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 1
    assert "non-loopback" in refused.stderr
    assert "--auth-token-env" in refused.stderr
    empty = subprocess.run(
        checkpoint_argv("journal", "ui", "--journal", journal, "--listen", "0.0.0.0:0", "--auth-token-env", "NO_SUCH"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
    )
    assert empty.returncode == 1
    assert "NO_SUCH" in empty.stderr

    secret = "fleet-operator-token-0123456789"
    ui = ui_server(journal, "--listen", "0.0.0.0:0", "--auth-token-env", "UI_TOKEN", env={"UI_TOKEN": secret})
    assert secret not in ui.url  # the printed URL does not repeat a token the operator already holds
    port = urlsplit(ui.base).port
    local = f"http://127.0.0.1:{port}/"
    assert get(local + "version")[0] == 403
    assert get(local + "version", {"Authorization": f"Bearer {secret}"})[0] == 200
    assert get(local + f"?token={secret}")[0] == 303
