"""OAuth 2.1 for a remote upstream (``--upstream-auth oauth``), as the MCP authorization specification says.

The protocol itself is the official SDK's ``OAuthClientProvider``, an httpx auth flow: on a 401 it discovers the
protected resource's and the authorization server's metadata, registers a client dynamically, runs the
authorization code grant with PKCE, and later refreshes the token. This module gives it what belongs to us:

* a token store: one file per server URL under ``$XDG_STATE_HOME/checkpoint/oauth`` (``~/.local/state/...``; the
  user's state folder on macOS and Windows: ``platforms.paths``), owner-only (0600, in a 0700 folder, where mode
  bits mean something), written temp → fsync → rename → fsync(dir), holding the tokens, the
  registered client and the loopback port its redirect URI names (kept, so the registration stays valid);
* the loopback redirect: ``http://127.0.0.1:<port>/callback``. The port is bound and listened on as soon as an
  authorization begins (the 401, before discovery and registration), and the redirect URI registered is the one of
  the port actually held, so no other process can take the port in between and receive the code; it is released
  once the redirect came or the flow ended;
* the 2025-03-26 legacy discovery, accepted narrowly: an MCP server without protected resource metadata is its own
  authorization server, so metadata fetched from its origin may name an issuer under a path of that same origin
  (``https://host/oauth``); every other issuer mismatch stays refused (RFC 8414 section 3.3);
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
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_field_from_www_auth,
    extract_resource_metadata_from_www_auth,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)
from pydantic import AnyUrl, ValidationError

from checkpoint_mcp.errors import UpstreamError
from checkpoint_mcp.platforms import files, paths

logger = logging.getLogger(__name__)

AUTHORIZE_SECONDS = 600.0  # how long the person has to open the URL and approve
CALLBACK_PATH = "/callback"
_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>Checkpoint</title>"
    b"<p>Checkpoint is authorized. You can close this window.</p>"
)


def state_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """Where tokens live: ``oauth`` in the user's state folder (``$XDG_STATE_HOME/checkpoint``, by default
    ``~/.local/state/checkpoint``; macOS and Windows: ``platforms.paths``)."""
    return Path(paths.user_state(environ)) / "oauth"


class TokenFile:
    """The SDK's ``TokenStorage`` for one server URL, in one owner-only file."""

    def __init__(self, folder: Path, server_url: str) -> None:
        self._folder = folder
        self._url = server_url
        self.path = folder / (hashlib.sha256(server_url.encode()).hexdigest()[:32] + ".json")
        self._data: dict[str, Any] = self._load()

    @property
    def redirect_port(self) -> int | None:
        """The loopback port of this server's registered redirect URI; None before one was held."""
        port = self._data.get("redirect_port")
        return port if isinstance(port, int) and 0 < port < 65536 else None

    def remember_port(self, port: int) -> None:
        """Keep ``port`` as the redirect's, written with the registration that names it (``set_client_info``)."""
        self._data["redirect_port"] = port

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
            files.restrict(fd, files.FILE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._data, f)
                f.flush()
                files.sync(f.fileno())
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        files.sync_folder(str(self._folder))

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
    """Receives the one redirect of an authorization on 127.0.0.1, on a port held from before registration."""

    def __init__(self, port: int | None, pause: Callable[[bool], None]) -> None:
        self.port = port
        self._pause = pause
        self._socket: socket.socket | None = None
        self._server: asyncio.Server | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None

    @property
    def uri(self) -> str:
        """The redirect URI registered with the authorization server."""
        return f"http://127.0.0.1:{self.port or 0}{CALLBACK_PATH}"

    def hold(self) -> int:
        """Bind and listen on the kept port, or on a new one when it is taken or none was kept, and return it.

        Listening at once matters: on Linux another socket can share a port that is bound but not listened on
        (``SO_REUSEADDR`` on both), never one that is. Holding an already held port does nothing.

        Raises:
            UpstreamError: no loopback port can be listened on.
        """
        if self._socket is not None:
            assert self.port is not None
            return self.port
        if self.port is not None:
            try:
                self._socket = _listen(self.port)
            except OSError as exc:
                logger.warning("the OAuth redirect port %d is taken (%s); registering a new one", self.port, exc)
        if self._socket is None:
            try:
                self._socket = _listen(0)
            except OSError as exc:
                raise UpstreamError(f"cannot listen on 127.0.0.1 for the OAuth redirect: {exc}") from exc
        port: int = self._socket.getsockname()[1]
        self.port = port
        return port

    def release(self) -> None:
        """Stop listening and let the port go (until the next authorization holds it again)."""
        if self._server is not None:
            self._server.close()  # closes the held socket too
            self._server = None
        elif self._socket is not None:
            self._socket.close()
        self._socket = None

    async def open_url(self, url: str) -> None:
        """Serve the held port, then ask the person (on stderr) to open the authorization URL.

        Raises:
            UpstreamError: the loopback port cannot be listened on.
        """
        self._result = asyncio.get_running_loop().create_future()
        self.hold()
        assert self._socket is not None
        if self._server is None:
            self._server = await asyncio.start_server(self._handle, sock=self._socket)
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
            self.release()

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


class CheckpointOAuth(OAuthClientProvider):
    """The SDK's provider, holding the loopback port through each authorization and accepting a same-origin
    issuer on the 2025-03-26 discovery path."""

    def __init__(self, server_url: str, tokens: TokenFile, redirect: LoopbackRedirect) -> None:
        metadata = OAuthClientMetadata(
            client_name="Checkpoint",
            redirect_uris=[redirect.uri] if redirect.port else None,  # type: ignore[list-item]  # validated to URLs
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
        super().__init__(
            server_url=server_url,
            client_metadata=metadata,
            storage=tokens,
            redirect_handler=redirect.open_url,
            callback_handler=redirect.wait,
        )
        self._tokens = tokens
        self._redirect = redirect
        self._legacy_issuer: str | None = None

    def _expected_issuer(self) -> str:
        # The SDK's hook for the issuer its metadata check and credential binding require: on the legacy path
        # it is the MCP server's origin, unless the metadata there names a path of that same origin.
        if self.context.auth_server_url is None and self._legacy_issuer is not None:
            return self._legacy_issuer
        return super()._expected_issuer()

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, with the port held from the challenge on and the legacy issuer looked up in time.

        Raises:
            UpstreamError: no loopback port can be listened on.
        """
        flow = super().async_auth_flow(request)
        held_here = False
        last_prm: httpx2.URL | None = None  # the last protected resource metadata URL the SDK tries
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and _challenges(response):
                    held_here = True
                    self._hold_redirect()
                    urls = build_protected_resource_metadata_discovery_urls(
                        extract_resource_metadata_from_www_auth(response), self.context.server_url
                    )
                    last_prm = httpx2.URL(urls[-1])
                elif outgoing.url == last_prm and _not_found(response):
                    # The SDK takes the legacy path next and fixes the issuer it expects before it fetches the
                    # metadata, so the metadata is looked at here first; the SDK still checks what it fetches.
                    last_prm = None
                    origin = _origin(self.context.server_url)
                    asm_response = yield create_oauth_metadata_request(
                        f"{origin}/.well-known/oauth-authorization-server"
                    )
                    self._legacy_issuer = await _same_origin_issuer(asm_response, self.context.server_url)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()
            if held_here:
                self._redirect.release()

    def _hold_redirect(self) -> None:
        """Hold the port and make the registration name it; a registration naming another port is dropped."""
        port = self._redirect.hold()
        uri = self._redirect.uri
        self.context.client_metadata.redirect_uris = [AnyUrl(uri)]
        if port != self._tokens.redirect_port:
            self._tokens.remember_port(port)
        client = self.context.client_info
        if client is not None and client.redirect_uris and uri not in {str(u) for u in client.redirect_uris}:
            self.context.client_info = None  # registered for a port we do not hold: register again


def oauth_for(server_url: str, pause: Callable[[bool], None], folder: Path | None = None) -> CheckpointOAuth:
    """The SDK's OAuth provider for ``server_url``, with our token file and loopback redirect.

    ``pause(True)`` is called while the proxy waits for the person, ``pause(False)`` when it stops waiting.
    """
    tokens = TokenFile(folder or state_folder(), server_url)
    return CheckpointOAuth(server_url, tokens, LoopbackRedirect(tokens.redirect_port, pause))


def _challenges(response: httpx2.Response) -> bool:
    """Whether the SDK answers ``response`` with an authorization (a 401, or a 403 asking for more scope)."""
    if response.status_code == 401:
        return True
    return response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"


def _not_found(response: httpx2.Response) -> bool:
    """Whether a protected resource metadata answer sends the SDK down the legacy path (not a 5xx or 429)."""
    return 300 <= response.status_code < 500 and response.status_code != 429


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _effective_port(parts: SplitResult) -> int | None:
    try:
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


async def _same_origin_issuer(response: httpx2.Response, server_url: str) -> str | None:
    """The issuer of the metadata in ``response`` when it is a path on ``server_url``'s own origin, else None."""
    if response.status_code != 200:
        return None
    try:
        issuer = str(OAuthMetadata.model_validate_json(await response.aread()).issuer)
    except (ValidationError, httpx2.HTTPError):
        return None
    mine, theirs = urlsplit(server_url), urlsplit(issuer)
    same = (mine.scheme, mine.hostname, _effective_port(mine)) == (
        theirs.scheme,
        theirs.hostname,
        _effective_port(theirs),
    )
    if not same or theirs.path in ("", "/"):
        return None  # another origin stays refused; the origin itself the SDK accepts already
    logger.info("the MCP server's own metadata names issuer %s on its origin (2025-03-26 discovery): accepted", issuer)
    return issuer


def _listen(port: int) -> socket.socket:
    """A non-blocking socket listening on 127.0.0.1:``port`` (0: a port the kernel picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a kept port may linger in TIME_WAIT
        sock.bind(("127.0.0.1", port))
        sock.listen(8)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
