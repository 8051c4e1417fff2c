"""The OAuth token store and loopback redirect of `--upstream-auth oauth` (the flow itself is the SDK's, and the
conformance suite's auth scenarios drive it end to end through the proxy: tests/conformance), and, through a real
`checkpoint` process and a 2025-03-26 server on loopback (servers/oauth_server.py), the redirect port held from
the challenge on and the same-origin issuer accepted on the legacy discovery path."""

from __future__ import annotations

import re
import socket
import stat
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from checkpoint_mcp.upstream.http.oauth import LoopbackRedirect, TokenFile, _same_origin_issuer, oauth_for, state_folder

from httpservers import HttpServer
from support import DEFAULT_TIMEOUT, SERVERS, ProxyProcess, read_effects, wait_until


def test_tokens_are_kept_owner_only_one_file_per_server_url(tmp_path: Path) -> None:
    folder = tmp_path / "oauth"
    first = TokenFile(folder, "https://a.example.com/mcp")
    other = TokenFile(folder, "https://b.example.com/mcp")
    first.remember_port(5000)

    async def store() -> None:
        await first.set_client_info(
            OAuthClientInformationFull(client_id="client-a", redirect_uris=["http://127.0.0.1:5000/callback"])
        )
        await first.set_tokens(OAuthToken(access_token="secret-a", refresh_token="refresh-a", expires_in=60))
        await other.set_tokens(OAuthToken(access_token="secret-b"))

    anyio.run(store)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = sorted(folder.iterdir())
    assert len(files) == 2
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in files)
    assert not [path for path in files if path.name.startswith(".tokens-")]  # no temporary file left

    async def reload() -> tuple[OAuthToken | None, OAuthClientInformationFull | None, OAuthToken | None]:
        again = TokenFile(folder, "https://a.example.com/mcp")
        assert again.redirect_port == 5000  # the registered redirect URI stays valid
        return (
            await again.get_tokens(),
            await again.get_client_info(),
            await TokenFile(folder, "https://b.example.com/mcp").get_tokens(),
        )

    tokens, client, theirs = anyio.run(reload)
    assert tokens is not None
    assert (tokens.access_token, tokens.refresh_token) == ("secret-a", "refresh-a")
    assert client is not None
    assert client.client_id == "client-a"
    assert theirs is not None
    assert theirs.access_token == "secret-b"


def test_a_damaged_token_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    store = TokenFile(tmp_path, "https://a.example.com/mcp")
    store.path.write_text("{not json")

    async def use() -> OAuthToken | None:
        fresh = TokenFile(tmp_path, "https://a.example.com/mcp")
        assert await fresh.get_tokens() is None
        await fresh.set_tokens(OAuthToken(access_token="new"))
        return await TokenFile(tmp_path, "https://a.example.com/mcp").get_tokens()

    tokens = anyio.run(use)
    assert tokens is not None
    assert tokens.access_token == "new"


def test_the_state_folder_follows_xdg_state_home(tmp_path: Path) -> None:
    assert state_folder({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "checkpoint" / "oauth"


def test_the_loopback_redirect_hands_over_code_and_state_and_pauses_the_timeouts(tmp_path: Path) -> None:
    paused: list[bool] = []
    redirect = LoopbackRedirect(TokenFile(tmp_path, "https://a.example.com/mcp").redirect_port, paused.append)

    async def flow() -> tuple[str, str | None, int]:
        await redirect.open_url("https://auth.example.com/authorize?x=1")
        async with httpx2.AsyncClient() as http:
            page = await http.get(f"{redirect.uri}?code=the-code&state=the-state")
        result = await redirect.wait()
        return result.code, result.state, page.status_code

    assert anyio.run(flow) == ("the-code", "the-state", 200)
    assert paused == [True, False]


def test_the_provider_registers_the_kept_loopback_port_and_no_port_before_one_is_held(tmp_path: Path) -> None:
    fresh = oauth_for("https://a.example.com/mcp", lambda paused: None, tmp_path)
    assert fresh.context.client_metadata.redirect_uris is None  # chosen only when it is bound
    kept = TokenFile(tmp_path, "https://b.example.com/mcp")
    kept.remember_port(5001)
    anyio.run(kept.set_tokens, OAuthToken(access_token="t"))
    uris = oauth_for("https://b.example.com/mcp", lambda paused: None, tmp_path).context.client_metadata.redirect_uris
    assert uris is not None
    assert [str(uri) for uri in uris] == ["http://127.0.0.1:5001/callback"]


def legacy_server(tmp_path: Path, *flags: str) -> HttpServer:
    """``servers/oauth_server.py``: a 2025-03-26 MCP server that is its own authorization server."""
    return HttpServer(
        [sys.executable, str(SERVERS / "oauth_server.py"), *flags], env={"EFFECTS_FILE": str(tmp_path / "oauth.jsonl")}
    )


def oauth_proxy(url: str, tmp_path: Path) -> ProxyProcess:
    return ProxyProcess(
        "--upstream-url",
        url,
        "--upstream-auth",
        "oauth",
        "--journal",
        str(tmp_path / "journal.db"),
        env={"XDG_STATE_HOME": str(tmp_path / "state")},
    )


def authorization_url(proxy: ProxyProcess) -> str:
    """The URL the proxy asks the person to open (on stderr), once it does."""
    found: list[str] = []

    def asked() -> bool:
        found[:] = re.findall(r"open this URL:\n(\S+)\n", proxy.stderr)
        return bool(found)

    wait_until(asked, what="the authorization URL on stderr")
    return found[0]


def open_in_browser(url: str) -> httpx2.Response:
    """What a browser does with the URL: follow the authorization server's redirect to the loopback callback."""
    return httpx2.get(url, follow_redirects=True, timeout=DEFAULT_TIMEOUT)


def initialize(proxy: ProxyProcess) -> None:
    proxy.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
    )


def test_the_redirect_port_is_held_before_registration_so_no_other_process_can_take_it(tmp_path: Path) -> None:
    # The server tries to listen on the redirect URI's port the moment it sees the registration naming it (the
    # window between discovery and the redirect): a thief there would receive the authorization code.
    with legacy_server(tmp_path, "--squat") as server, oauth_proxy(server.url, tmp_path) as proxy:
        initialize(proxy)
        url = authorization_url(proxy)
        redirect_uri = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        page = open_in_browser(url)
        response = proxy.response(1)
        listed = proxy.request("tools/list")

    registration = next(row for row in read_effects(tmp_path / "oauth.jsonl") if row["path"] == "/oauth/register")
    assert registration["redirect_uri"] == redirect_uri  # the port registered is the one held
    assert registration["squat"] == "EADDRINUSE"
    assert (page.status_code, b"Checkpoint is authorized" in page.content) == (200, True)
    assert "result" in response, response
    assert listed["result"] == {"tools": []}  # the code reached Checkpoint, and its token the server


def test_a_kept_redirect_port_that_another_process_holds_is_replaced_and_registered_anew(tmp_path: Path) -> None:
    with socket.socket() as thief:
        thief.bind(("127.0.0.1", 0))
        thief.listen(1)
        taken = thief.getsockname()[1]
        folder = tmp_path / "state" / "checkpoint" / "oauth"
        with legacy_server(tmp_path) as server:
            kept = TokenFile(folder, server.url)
            kept.remember_port(taken)
            anyio.run(
                kept.set_client_info,
                OAuthClientInformationFull(client_id="old", redirect_uris=[f"http://127.0.0.1:{taken}/callback"]),
            )
            with oauth_proxy(server.url, tmp_path) as proxy:
                initialize(proxy)
                url = authorization_url(proxy)
                open_in_browser(url)
                response = proxy.response(1)
            stored = TokenFile(folder, server.url)

    assert "result" in response, response
    registered = [
        row["redirect_uri"] for row in read_effects(tmp_path / "oauth.jsonl") if row["path"] == "/oauth/register"
    ]
    assert stored.redirect_port not in (None, taken)
    assert registered == [f"http://127.0.0.1:{stored.redirect_port}/callback"]  # the old client named the lost port


def test_a_2025_03_26_server_issuer_on_its_own_origin_is_accepted(tmp_path: Path) -> None:
    with legacy_server(tmp_path) as server, oauth_proxy(server.url, tmp_path) as proxy:
        initialize(proxy)
        open_in_browser(authorization_url(proxy))
        response = proxy.response(1)
        listed = proxy.request("tools/list")

    assert "result" in response, response
    assert listed["result"] == {"tools": []}
    paths = [row["path"] for row in read_effects(tmp_path / "oauth.jsonl")]
    assert paths == ["/oauth/register", "/oauth/authorize", "/oauth/token"]


def test_a_2025_03_26_server_issuer_on_another_origin_is_still_refused(tmp_path: Path) -> None:
    with legacy_server(tmp_path, "--issuer", "other") as server, oauth_proxy(server.url, tmp_path) as proxy:
        initialize(proxy)
        response = proxy.response(1)
        stderr = proxy.stderr

    assert "error" in response, response
    assert "issuer mismatch" in stderr
    assert "open this URL" not in stderr
    assert not (tmp_path / "oauth.jsonl").exists()  # neither registered nor authorized


@pytest.mark.parametrize(
    ("server_url", "issuer", "accepted"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/oauth", True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com:443/oauth", True),  # the default port, spelled out
        ("https://MCP.example.com/mcp", "https://mcp.example.com/oauth", True),  # host names are case-insensitive
        ("https://mcp.example.com/mcp", "https://mcp.example.com:8443/oauth", False),  # another port
        ("https://mcp.example.com/mcp", "http://mcp.example.com/oauth", False),  # another scheme
        ("https://mcp.example.com/mcp", "https://auth.example.com/oauth", False),  # another host
        ("https://mcp.example.com/mcp", "https://mcp.example.com/", False),  # the origin itself: the SDK's own case
    ],
)
def test_only_an_issuer_under_a_path_of_the_mcp_servers_own_origin_is_taken_as_legacy(
    server_url: str, issuer: str, accepted: bool
) -> None:
    metadata = {
        "issuer": issuer,
        "authorization_endpoint": "https://mcp.example.com/oauth/authorize",
        "token_endpoint": "https://mcp.example.com/oauth/token",
    }
    response = httpx2.Response(200, json=metadata)
    found = anyio.run(_same_origin_issuer, response, server_url)
    assert (found is not None) == accepted
    if accepted:
        assert found == str(OAuthMetadata.model_validate(metadata).issuer)  # as the SDK renders it, to compare
