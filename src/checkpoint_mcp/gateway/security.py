"""The gateway's guards, as ASGI middleware: one job each, in front of every route.

* ``OriginGuard``: DNS rebinding protection, as the Streamable HTTP transport requires. A request whose
  ``Origin`` is not allowed gets 403; on a loopback listener, so does one whose ``Host`` is not a loopback name
  (a rebound DNS name still sends its own ``Host``). Allowed origins: loopback origins on a loopback listener,
  plus every ``--allowed-origin``.
* ``BearerAuth``: with ``--auth-token-env``, every request needs ``Authorization: Bearer <token>``; the token is
  compared in constant time and never logged.
* ``TokenAuth``: with ``--issuer`` (tokens from an identity provider), every request needs a valid
  ``Authorization: Bearer <JWT>`` (``tokens.TokenVerifier``); a refusal is 401 with ``WWW-Authenticate: Bearer
  resource_metadata="…"`` (RFC 9728), plus ``error="invalid_token"`` when a token was given. It puts who the token
  speaks for in the scope (``PRINCIPAL``, ``OPERATOR``) for the routes behind it; the token itself goes no further.
* ``OperatorOnly``: the paths that show every principal's workflows (``/metrics``) need the operator's role.
* ``BodyLimit``: a body longer than ``--max-body`` gets 413 before any of it is routed.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from checkpoint_mcp.errors import InvalidToken, KeySetUnavailable
from checkpoint_mcp.gateway.config import LOOPBACK_NAMES
from checkpoint_mcp.gateway.streams import error_body
from checkpoint_mcp.gateway.tokens import TokenVerifier, request_base
from checkpoint_mcp.refusals import INVALID_REQUEST, SESSION_NOT_FOUND, TRANSPORT_ERROR

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

FORBIDDEN = SESSION_NOT_FOUND  # a JSON-RPC error without id, as the transport spec allows in a 403 body
PRINCIPAL = "checkpoint.principal"
"""The scope key ``TokenAuth`` sets: the principal a valid token names (absent: one principal, no tokens)."""
OPERATOR = "checkpoint.operator"
"""The scope key ``TokenAuth`` sets: True when the token carries the operator's role."""


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A complete JSON response."""
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of request header ``name`` (lower case), decoded as latin-1."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _host_name(value: str) -> str:
    """``localhost`` of ``localhost:8808``, ``::1`` of ``[::1]:8808``."""
    if value.startswith("["):
        return value[1:].partition("]")[0].lower()
    return value.rpartition(":")[0].lower() if value.count(":") == 1 else value.lower()


class OriginGuard:
    """403 for a foreign ``Origin`` (and, on loopback, a foreign ``Host``)."""

    def __init__(self, app: ASGIApp, *, loopback: bool, allowed_origins: tuple[str, ...]) -> None:
        self._app = app
        self._loopback = loopback
        self._allowed = {origin.rstrip("/").lower() for origin in allowed_origins}

    def _origin_allowed(self, origin: str) -> bool:
        if origin.rstrip("/").lower() in self._allowed:
            return True
        if not self._loopback:
            return False
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and (parts.hostname or "").lower() in LOOPBACK_NAMES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        origin = header(scope, b"origin")
        if origin is not None and not self._origin_allowed(origin):
            logger.warning("refused a request from origin %r (DNS rebinding protection)", origin[:200])
            await respond(send, 403, error_body(FORBIDDEN, f"Forbidden: origin {origin[:200]!r} is not allowed"))
            return
        host = header(scope, b"host")
        if self._loopback and host is not None and _host_name(host) not in LOOPBACK_NAMES:
            logger.warning("refused a request for host %r on a loopback listener (DNS rebinding protection)", host)
            await respond(send, 403, error_body(FORBIDDEN, f"Forbidden: host {host[:200]!r} is not allowed"))
            return
        await self._app(scope, receive, send)


class BearerAuth:
    """401 unless ``Authorization: Bearer <token>`` matches (constant-time comparison).

    Paths under an ``exempt`` prefix (mounted apps that check the token themselves) are let through.
    """

    def __init__(self, app: ASGIApp, token: str, exempt: tuple[str, ...] = ()) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()
        self._exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or any(
            scope["path"] == prefix or scope["path"].startswith(prefix + "/") for prefix in self._exempt
        ):
            await self._app(scope, receive, send)
            return
        given = header(scope, b"authorization")
        if given is None or not hmac.compare_digest(given.encode("latin-1"), self._expected):
            reason = "no Authorization header" if given is None else "a wrong token"
            logger.warning("refused a request with %s", reason)
            body = error_body(FORBIDDEN, f"Unauthorized: {reason}; send 'Authorization: Bearer <token>'")
            await respond(send, 401, body, [(b"www-authenticate", b'Bearer realm="checkpoint"')])
            return
        await self._app(scope, receive, send)


def _exempt(scope: Scope, prefixes: tuple[str, ...]) -> bool:
    path: str = scope["path"]
    return any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in prefixes)


def _quoted(text: str) -> str:
    """``text`` as the value of an auth-param (RFC 9110 quoted-string), without quotes or backslashes."""
    return "".join(c for c in text if c.isprintable() and c not in '"\\')[:200]


class TokenAuth:
    """401 unless the request carries a valid token of the identity provider; its identity goes into the scope.

    Paths under an ``exempt`` prefix (the protected-resource metadata, mounted apps with a check of their own) are
    let through without one.
    """

    def __init__(self, app: ASGIApp, verifier: TokenVerifier, exempt: tuple[str, ...] = ()) -> None:
        self._app = app
        self._verifier = verifier
        self._exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _exempt(scope, self._exempt):
            await self._app(scope, receive, send)
            return
        given = header(scope, b"authorization")
        scheme, _, token = (given or "").partition(" ")
        if given is None or scheme.lower() != "bearer" or not token.strip():
            reason = "no Authorization header" if given is None else "an Authorization header that is no bearer token"
            logger.warning("refused a request with %s", reason)
            await self._refuse(scope, send, f"Unauthorized: {reason}; send 'Authorization: Bearer <access token>'")
            return
        try:
            identity = await self._verifier.verify(token.strip())
        except InvalidToken as exc:
            logger.warning("refused a request: %s", exc)
            await self._refuse(scope, send, f"Unauthorized: {exc}", str(exc))
            return
        except KeySetUnavailable as exc:
            logger.error("cannot check a token: %s", exc)
            body = error_body(TRANSPORT_ERROR, f"Service Unavailable: cannot check the token: {exc}")
            await respond(send, 503, body, [(b"retry-after", b"5")])
            return
        scope[PRINCIPAL] = identity.principal
        scope[OPERATOR] = identity.operator
        await self._app(scope, receive, send)

    async def _refuse(self, scope: Scope, send: Send, text: str, invalid: str | None = None) -> None:
        url = self._verifier.settings.metadata_url(_base(scope))
        value = f'Bearer resource_metadata="{url}"'
        if invalid is not None:
            value += f', error="invalid_token", error_description="{_quoted(invalid)}"'
        await respond(send, 401, error_body(FORBIDDEN, text), [(b"www-authenticate", value.encode("latin-1"))])


class OperatorOnly:
    """403 for a request under one of ``paths`` whose token lacks the operator's role (``TokenAuth`` ran first)."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier, paths: tuple[str, ...]) -> None:
        self._app = app
        self._verifier = verifier
        self._paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _exempt(scope, self._paths) and not scope.get(OPERATOR, False):
            logger.warning("refused %s to a token without the operator's role", scope["path"])
            url = self._verifier.settings.metadata_url(_base(scope))
            # No ``scope="…"``: a client would step up to the scope a challenge names, and the operator's is never
            # advertised (``TokenSettings.metadata``); an operator asks the provider for it by name.
            value = f'Bearer error="insufficient_scope", resource_metadata="{url}"'
            body = error_body(FORBIDDEN, "Forbidden: this needs the operator's role")
            await respond(send, 403, body, [(b"www-authenticate", value.encode("latin-1"))])
            return
        await self._app(scope, receive, send)


class OperatorGate:
    """The operator's pages under ``--issuer`` (a middleware of the pages' own): a token with the operator's role
    (bearer header) opens them; a valid token without it is refused (403: an agent never reaches every workflow);
    anything else goes to the pages' token check (``ui.security.TokenGate``: the URL with a fresh ``token`` the
    gateway wrote to --ui-url-file, or to stderr when that is a terminal)."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier, token: str) -> None:
        from checkpoint_mcp.ui.security import TokenGate

        self._pages = app
        self._verifier = verifier
        self._fallback = TokenGate(app, token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = header(scope, b"authorization") if scope["type"] == "http" else None
        scheme, _, token = (given or "").partition(" ")
        if given is not None and scheme.lower() == "bearer" and token.count(".") == 2:
            try:
                identity = await self._verifier.verify(token.strip())
            except (InvalidToken, KeySetUnavailable):
                identity = None
            if identity is not None and identity.operator:
                scope[PRINCIPAL], scope[OPERATOR] = identity.principal, True
                await self._pages(scope, receive, send)
                return
            if identity is not None:
                logger.warning("refused the operator's pages to a token without the operator's role")
                text = b"403 Forbidden: this token lacks the operator's role\n"
                head = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(text)).encode())]
                await send({"type": "http.response.start", "status": 403, "headers": head})
                await send({"type": "http.response.body", "body": text})
                return
        await self._fallback(scope, receive, send)


def _base(scope: Scope) -> str:
    """The gateway's ``scheme://host`` as this request reached it."""
    return request_base(scope.get("scheme", "http"), header(scope, b"host"), scope.get("server"))


class BodyLimit:
    """413 for a body over ``limit`` bytes; otherwise the app reads the body as usual."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app = app
        self._limit = limit

    def _too_large(self) -> bytes:
        return error_body(INVALID_REQUEST, f"Payload Too Large: the body exceeds --max-body ({self._limit} bytes)")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self._app(scope, receive, send)
            return
        length = header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self._limit:
            await respond(send, 413, self._too_large(), [(b"connection", b"close")])
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._limit:
                await respond(send, 413, self._too_large(), [(b"connection", b"close")])
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self._app(scope, replay, send)
