"""The operator's pages mounted at /ui by a real `checkpoint serve`, behind the gateway's token or a fresh one; the
fresh token goes to --ui-url-file or a terminal, never to a log."""

from __future__ import annotations

import os
import pty
import select
import stat
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

from gatewayproc import MODERN, GatewayProcess, effects_gateway, modern_call, pages_url, request

from support import DEFAULT_TIMEOUT, checkpoint_argv, server_cmd, wait_until

TOKEN = "gateway-token-for-the-pages"
MARKER = "the journal's pages at "


def announced(gateway: GatewayProcess) -> str:
    """What `checkpoint serve` said on stderr about its pages."""
    wait_until(lambda: MARKER in gateway.stderr, what="the gateway to announce its pages")
    return gateway.stderr.split(MARKER, 1)[1].split("\n", 1)[0].strip()


def visit(port: int, url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """GET a page the way a browser does: trade the token for the cookie, follow the redirect; status and body."""
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    first = request(port, "GET", target, headers=headers)
    if first.status != 303:
        return first.status, first.body.decode()
    cookie = first.headers["set-cookie"].split(";", 1)[0]
    second = request(port, "GET", first.headers["location"], headers={**(headers or {}), "Cookie": cookie})
    return second.status, second.body.decode()


def test_the_gateway_serves_its_pages_with_a_fresh_token_written_to_the_url_file_and_never_to_its_log(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "j.db"
    url_file = tmp_path / "pages.url"
    with effects_gateway(tmp_path, "--journal", str(journal), "--ui-url-file", str(url_file)) as gateway:
        url = pages_url(gateway, url_file)
        assert url.startswith(f"{gateway.base}/ui/?token=")
        assert stat.S_IMODE(url_file.stat().st_mode) == 0o600
        token = url.split("?token=", 1)[1]
        assert announced(gateway) == f"{gateway.base}/ui/ (its token is in {url_file}; a token is never logged)"
        reply = request(gateway.port, "POST", "/w/order-9/mcp", modern_call(1, "send_email", {"to": "ann"}), MODERN)
        assert reply.status == 200, reply.body

        assert request(gateway.port, "GET", "/ui/").status == 403
        assert request(gateway.port, "GET", "/ui/?token=not-it").status == 403
        status, body = visit(gateway.port, url)
        assert status == 200
        assert "order-9" in body
        assert "Checkpoint journal" in body
        gateway.terminate()
        assert token not in gateway.stderr


def test_without_a_url_file_the_log_says_how_to_get_the_token_and_holds_none(tmp_path: Path) -> None:
    with effects_gateway(tmp_path, "--journal", str(tmp_path / "j.db"), "--log-level", "debug") as gateway:
        assert (
            announced(gateway) == f"{gateway.base}/ui/ (give --ui-url-file FILE for the token; a token is never logged)"
        )
        assert "token=" not in gateway.stderr


def test_on_a_terminal_the_gateway_shows_the_pages_url_with_its_token(tmp_path: Path) -> None:
    """stderr on a pseudo-terminal, as when a person runs `checkpoint serve` in a shell: the URL there opens the
    pages (the token is shown to the person, not written to a file or a pipe)."""
    controller, terminal = pty.openpty()
    argv = checkpoint_argv("serve", "--listen", "127.0.0.1:0", "--journal", str(tmp_path / "j.db"))
    env = {**os.environ, "EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    process = subprocess.Popen(
        [*argv, "--upstream-cmd", server_cmd("effects_server.py")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
        env=env,
    )
    os.close(terminal)
    shown = b""
    try:
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while MARKER.encode() not in shown or not shown.rstrip(b" ").endswith(b"\n"):
            assert time.monotonic() < deadline, shown
            if select.select([controller], [], [], 0.2)[0]:
                shown += os.read(controller, 65536)
        text = shown.decode().replace("\r\n", "\n")
        url = text.split(MARKER, 1)[1].split("\n", 1)[0].strip()
        port = int(urlsplit(url).port or 0)
        assert url.startswith(f"http://127.0.0.1:{port}/ui/?token=")
        assert visit(port, url)[0] == 200
        assert request(port, "GET", "/ui/?token=not-it").status == 403
    finally:
        process.terminate()
        process.wait(DEFAULT_TIMEOUT)
        os.close(controller)


def test_with_an_auth_token_the_pages_take_the_gateway_s_token_and_mcp_still_needs_the_bearer(tmp_path: Path) -> None:
    with effects_gateway(
        tmp_path, "--journal", str(tmp_path / "j.db"), "--auth-token-env", "GW_TOKEN", env={"GW_TOKEN": TOKEN}
    ) as gateway:
        url = announced(gateway)
        assert url == f"{gateway.base}/ui/"  # the operator knows the token; it is never printed
        assert TOKEN not in gateway.stderr
        assert request(gateway.port, "GET", "/ui/").status == 403
        assert request(gateway.port, "GET", "/uix").status == 401  # only the mount's own paths skip the bearer
        assert request(gateway.port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}).status == 401
        status, body = visit(gateway.port, f"{url}?token={TOKEN}")
        assert status == 200
        assert "Checkpoint journal" in body
        status, _ = visit(gateway.port, url, headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200


def test_without_a_journal_there_are_no_pages(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        assert request(gateway.port, "GET", "/ui/").status == 404
        assert "pages at" not in gateway.stderr
