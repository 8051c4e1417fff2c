"""OAuth 2.1 for a remote upstream (``--upstream-auth oauth``), as the MCP authorization specification says.

The protocol itself is the official SDK's ``OAuthClientProvider``, an httpx auth flow: on a 401 it discovers the
protected resource's and the authorization server's metadata, registers a client dynamically, runs the
authorization code grant with PKCE, and later refreshes the token. This module gives it what belongs to us:

* a token store: one file per server URL under ``$XDG_STATE_HOME/checkpoint/oauth`` (``~/.local/state/...``),
  owner-only (0600, in a 0700 folder), written temp → fsync → rename → fsync(dir), holding the tokens, the
  registered client and the loopback port its redirect URI names (kept, so the registration stays valid);
* the loopback redirect: ``http://127.0.0.1:<port>/callback``, listened on only while an authorization waits;
* the URL to open, printed on stderr (stdout is the MCP wire), and the wait for the person, which stops the
  proxy's response timeout meanwhile.

No token, code or client secret ever reaches a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from checkpoint_mcp.errors import UpstreamError

logger = logging.getLogger(__name__)

AUTHORIZE_SECONDS = 600.0  # how long the person has to open the URL and approve
CALLBACK_PATH = "/callback"
_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>Checkpoint</title>"
    b"<p>Checkpoint is authorized. You can close this window.</p>"
)


def state_folder(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """Where tokens live: ``$XDG_STATE_HOME/checkpoint/oauth``, by default ``~/.local/state/checkpoint/oauth``."""
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "checkpoint" / "oauth"


class TokenFile:
    """The SDK's ``TokenStorage`` for one server URL, in one owner-only file."""

    def __init__(self, folder: Path, server_url: str) -> None:
        self._folder = folder
        self._url = server_url
        self.path = folder / (hashlib.sha256(server_url.encode()).hexdigest()[:32] + ".json")
        self._data: dict[str, Any] = self._load()
        if not isinstance(self._data.get("redirect_port"), int):
            self._data["redirect_port"] = _free_port()

    @property
    def redirect_port(self) -> int:
        """The loopback port of this server's redirect URI."""
        port: int = self._data["redirect_port"]
        return port

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"server_url": self._url}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring the unreadable token file %s: %s", self.path, type(exc).__name__)
            return {"server_url": self._url}
        return data if isinstance(data, dict) and data.get("server_url") == self._url else {"server_url": self._url}

    def _save(self) -> None:
        self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".tokens-", dir=self._folder)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._data, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        folder = os.open(self._folder, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self._data.get("tokens")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = self._data.get("client")
        return OAuthClientInformationFull.model_validate(client) if client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._save()


class LoopbackRedirect:
    """Receives the one redirect of an authorization on 127.0.0.1, while it is awaited."""

    def __init__(self, port: int, pause: Callable[[bool], None]) -> None:
        self.port = port
        self._pause = pause
        self._server: asyncio.Server | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None

    @property
    def uri(self) -> str:
        """The redirect URI registered with the authorization server."""
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def open_url(self, url: str) -> None:
        """Listen, then ask the person (on stderr) to open the authorization URL.

        Raises:
            UpstreamError: the loopback port cannot be listened on.
        """
        self._result = asyncio.get_running_loop().create_future()
        try:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        except OSError as exc:
            raise UpstreamError(f"cannot listen on 127.0.0.1:{self.port} for the OAuth redirect: {exc}") from exc
        self._pause(True)
        sys.stderr.write(f"checkpoint: to authorize access to the remote upstream, open this URL:\n{url}\n")
        sys.stderr.flush()

    async def wait(self) -> AuthorizationCodeResult:
        """The code and state the authorization server redirected with.

        Raises:
            UpstreamError: no redirect came within ``AUTHORIZE_SECONDS``, or it carried an error.
        """
        assert self._result is not None
        try:
            async with asyncio.timeout(AUTHORIZE_SECONDS):
                return await self._result
        except TimeoutError:
            raise UpstreamError(f"no OAuth authorization within {AUTHORIZE_SECONDS:g}s") from None
        finally:
            self._pause(False)
            if self._server is not None:
                self._server.close()
                self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode("latin-1")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError, ConnectionError):
            writer.close()
            return
        parts = urlsplit(target)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        found = parts.path == CALLBACK_PATH and ("code" in query or "error" in query)
        status = b"200 OK" if found else b"404 Not Found"
        body = _PAGE if found else b"not found"
        writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: text/html\r\ncontent-length: ")
        writer.write(str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
        if not found or self._result is None or self._result.done():
            return
        if "error" in query:
            self._result.set_exception(UpstreamError(f"the OAuth authorization was refused: {query['error']}"))
        else:
            self._result.set_result(
                AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
            )


def oauth_for(server_url: str, pause: Callable[[bool], None], folder: Path | None = None) -> OAuthClientProvider:
    """The SDK's OAuth provider for ``server_url``, with our token file and loopback redirect.

    ``pause(True)`` is called while the proxy waits for the person, ``pause(False)`` when it stops waiting.
    """
    tokens = TokenFile(folder or state_folder(), server_url)
    redirect = LoopbackRedirect(tokens.redirect_port, pause)
    metadata = OAuthClientMetadata(
        client_name="Checkpoint",
        redirect_uris=[redirect.uri],  # type: ignore[list-item]  # pydantic validates the string into a URL
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=tokens,
        redirect_handler=redirect.open_url,
        callback_handler=redirect.wait,
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
