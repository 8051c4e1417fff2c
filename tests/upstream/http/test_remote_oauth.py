"""The OAuth token store and loopback redirect of `--upstream-auth oauth` (the flow itself is the SDK's, and the
conformance suite's auth scenarios drive it end to end through the proxy: tests/conformance)."""

from __future__ import annotations

import stat
from pathlib import Path

import anyio
import httpx2
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from checkpoint_mcp.upstream.http.oauth import LoopbackRedirect, TokenFile, oauth_for, state_folder


def test_tokens_are_kept_owner_only_one_file_per_server_url(tmp_path: Path) -> None:
    folder = tmp_path / "oauth"
    first = TokenFile(folder, "https://a.example.com/mcp")
    other = TokenFile(folder, "https://b.example.com/mcp")

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
        assert again.redirect_port == first.redirect_port  # the registered redirect URI stays valid
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


def test_the_provider_registers_the_loopback_redirect_uri(tmp_path: Path) -> None:
    provider = oauth_for("https://a.example.com/mcp", lambda paused: None, tmp_path)
    storage = provider.context.storage
    assert isinstance(storage, TokenFile)
    port = storage.redirect_port
    uris = provider.context.client_metadata.redirect_uris
    assert uris is not None
    assert [str(uri) for uri in uris] == [f"http://127.0.0.1:{port}/callback"]
