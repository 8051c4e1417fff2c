"""The operator's pages mounted at /ui by a real `checkpoint serve`, behind the gateway's token or a fresh one."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from gatewayproc import MODERN, GatewayProcess, effects_gateway, modern_call, request

from support import wait_until

TOKEN = "gateway-token-for-the-pages"


def pages_url(gateway: GatewayProcess) -> str:
    """The pages' URL as `checkpoint serve` printed it."""
    marker = "the journal's pages at "
    wait_until(lambda: marker in gateway.stderr)
    return gateway.stderr.split(marker, 1)[1].split("\n", 1)[0].strip()


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


def test_the_gateway_serves_the_journal_s_pages_at_ui_with_a_fresh_token_it_prints(tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    with effects_gateway(tmp_path, "--journal", str(journal)) as gateway:
        url = pages_url(gateway)
        assert url.startswith(f"{gateway.base}/ui/?token=")
        reply = request(gateway.port, "POST", "/w/order-9/mcp", modern_call(1, "send_email", {"to": "ann"}), MODERN)
        assert reply.status == 200, reply.body

        assert request(gateway.port, "GET", "/ui/").status == 403
        assert request(gateway.port, "GET", "/ui/?token=not-it").status == 403
        status, body = visit(gateway.port, url)
        assert status == 200
        assert "order-9" in body
        assert "Checkpoint journal" in body


def test_with_an_auth_token_the_pages_take_the_gateway_s_token_and_mcp_still_needs_the_bearer(tmp_path: Path) -> None:
    with effects_gateway(
        tmp_path, "--journal", str(tmp_path / "j.db"), "--auth-token-env", "GW_TOKEN", env={"GW_TOKEN": TOKEN}
    ) as gateway:
        url = pages_url(gateway)
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
