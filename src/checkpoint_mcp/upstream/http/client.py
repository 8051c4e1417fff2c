"""The HTTP client under a remote upstream: one small interface, two well-kept libraries behind it.

* ``AiohttpClient`` (the default): aiohttp's connection pool and its C HTTP parser. Per request it costs a
  fraction of httpx's CPU (docs/benchmarks.md: ~5× less here), which is most of what a relayed call costs.
* ``HttpxClient``: httpx, for ``--upstream-auth oauth``, whose flow is the MCP SDK's ``OAuthClientProvider``
  (an ``httpx.Auth``: it answers a 401 by discovering the server's authorization and retrying with a token).

Both send the body as the given bytes, follow no redirect, keep up to ``max_connections`` connections alive,
read proxy settings from the environment, and stream the response body. Their exceptions are translated here
and only here::

    HttpError               the exchange failed
    ├── ConnectFailed       no connection was made: the request was certainly not sent
    └── Broken              it broke, or timed out, after the request may have been sent

An exception of the OAuth flow itself (the SDK's own) passes through unchanged, and so does ``TimeoutError`` of
a deadline set by the caller around ``send``.
"""

from __future__ import annotations

import ssl
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from typing import Any


class HttpError(Exception):
    """An HTTP exchange failed."""


class ConnectFailed(HttpError):
    """No connection could be made (refused, unreachable, TLS handshake, bad URL): nothing was sent."""


class Broken(HttpError):
    """The exchange broke after the request may have reached the server."""


class Response(ABC):
    """A response whose head has arrived; its body is read as it comes."""

    status_code: int
    headers: Mapping[str, str]
    """Case-insensitive."""

    @abstractmethod
    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (decoded from any ``Content-Encoding``).

        Raises:
            Broken: the connection broke while reading.
        """

    @abstractmethod
    async def aclose(self) -> None:
        """Release the connection: back to the pool if the body was read to its end, else closed."""


class HttpClient(ABC):
    """A pool of connections to one server."""

    @abstractmethod
    async def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Response:
        """Send one request; return once the response's head has arrived.

        Raises:
            ConnectFailed: nothing was sent.
            Broken: the request may have been sent.
        """

    @abstractmethod
    async def aclose(self) -> None:
        """Close every connection."""


def open_client(
    headers: Mapping[str, str], context: ssl.SSLContext, timeout: float, max_connections: int, auth: Any = None
) -> HttpClient:
    """httpx for an OAuth ``auth`` flow, else aiohttp; ``timeout`` bounds connecting and writing, never reading."""
    if auth is not None:
        return HttpxClient(headers, context, timeout, max_connections, auth)
    return AiohttpClient(headers, context, timeout, max_connections)


# ---- aiohttp ----------------------------------------------------------------------------------------------------


class _AiohttpResponse(Response):
    def __init__(self, response: Any) -> None:
        self._response = response
        self.status_code = response.status
        self.headers = response.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, OSError) as exc:
            raise Broken(_describe(exc)) from exc
        except TimeoutError as exc:  # aiohttp's own read timeout (none is set: defensive)
            raise Broken("the response timed out") from exc

    async def aclose(self) -> None:
        response = self._response
        if response.content.at_eof():
            response.release()
        else:
            response.close()


class AiohttpClient(HttpClient):
    """aiohttp's ``ClientSession``: the client of every remote upstream without OAuth."""

    def __init__(self, headers: Mapping[str, str], context: ssl.SSLContext, timeout: float, connections: int) -> None:
        import aiohttp  # now, not inside the first request's deadline

        self._aiohttp = aiohttp
        self._settings = (dict(headers), context, timeout, connections)
        self._session: Any = None  # made in the event loop, at the first request
        self._proxies: dict[str, tuple[Any, Any]] = {}

    def _opened(self) -> Any:
        aiohttp = self._aiohttp
        if self._session is None:
            headers, context, timeout, connections = self._settings
            self._session = aiohttp.ClientSession(
                headers=headers,
                connector=aiohttp.TCPConnector(ssl=context, limit=connections, limit_per_host=0),
                # ``connect`` covers waiting for a free connection of the pool too; reads are unbounded (a tool may
                # run for long): the caller's deadline bounds the wait for the response's head.
                timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_connect=timeout, sock_read=None),
                # The proxy settings of the environment are read once per origin (``_proxy``): with trust_env,
                # aiohttp reads them, and ~/.netrc, in a worker thread on every request.
                trust_env=False,
                auto_decompress=True,
                skip_auto_headers=("Content-Type",),
            )
        return self._session

    async def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Response:
        aiohttp = self._aiohttp
        session = self._opened()
        proxy, proxy_auth = self._proxy(url)
        try:
            response = await session.request(
                method, url, data=body, headers=headers, allow_redirects=False, proxy=proxy, proxy_auth=proxy_auth
            )
        except (aiohttp.ConnectionTimeoutError, aiohttp.ClientConnectorError, aiohttp.InvalidURL) as exc:
            raise ConnectFailed(_describe(exc)) from exc
        except aiohttp.NonHttpUrlClientError as exc:
            raise ConnectFailed(_describe(exc)) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise Broken(_describe(exc)) from exc
        except TimeoutError as exc:  # aiohttp's socket timeouts are TimeoutErrors; the caller's deadline cancels
            raise Broken("the exchange timed out") from exc
        return _AiohttpResponse(response)

    def _proxy(self, url: str) -> tuple[Any, Any]:
        """The proxy (and its credentials) that ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``NO_PROXY`` name for ``url``."""
        from yarl import URL  # aiohttp's own URL type

        parsed = URL(url)
        origin = f"{parsed.scheme}://{parsed.host}:{parsed.port}"
        found = self._proxies.get(origin)
        if found is None:
            try:
                found = self._aiohttp.helpers.get_env_proxy_for_url(parsed)  # reads the environment
            except LookupError:
                found = (None, None)
            self._proxies[origin] = found
        return found

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


# ---- httpx ------------------------------------------------------------------------------------------------------


class _HttpxResponse(Response):
    def __init__(self, response: Any) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers = response.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        import httpx2

        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx2.HTTPError as exc:
            raise Broken(_describe(exc)) from exc

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxClient(HttpClient):
    """httpx's ``AsyncClient`` with an auth flow (OAuth)."""

    def __init__(
        self, headers: Mapping[str, str], context: ssl.SSLContext, timeout: float, connections: int, auth: Any
    ) -> None:
        import httpx2

        self._client = httpx2.AsyncClient(
            headers=dict(headers),
            auth=auth,
            verify=context,
            timeout=httpx2.Timeout(connect=timeout, read=None, write=timeout, pool=timeout),
            follow_redirects=False,
            trust_env=True,
            limits=httpx2.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    async def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Response:
        import httpx2

        request = self._client.build_request(method, url, content=body, headers=dict(headers))
        try:
            response = await self._client.send(request, stream=True)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.UnsupportedProtocol) as exc:
            raise ConnectFailed(_describe(exc)) from exc
        except httpx2.HTTPError as exc:
            raise Broken(_describe(exc)) from exc
        return _HttpxResponse(response)

    async def aclose(self) -> None:
        await self._client.aclose()


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
