"""What stands between a browser and the operator's pages: the token, the Host check, the CSRF token, headers.

Each is one small ASGI middleware or function (as in Starlette's own middleware), so ``checkpoint serve`` can
mount the pages behind its own authentication and keep the rest:

- ``TokenGate``: the URL printed by `checkpoint journal ui` carries a random token (as Jupyter's does). The
  first visit trades it for an HttpOnly, SameSite=Strict cookie and is redirected to the same URL without it,
  so the token leaves the address bar and the history. A script may send ``Authorization: Bearer <token>``
  instead. Tokens are compared in constant time. Anything else is refused (403).
- ``HostCheck``: a page served on a loopback address answers only to a loopback Host, so a web page whose
  name was re-pointed at 127.0.0.1 (DNS rebinding) cannot read it.
- ``csrf_token`` / ``csrf_valid``: a signed double-submit cookie. Every form carries an HMAC of a random
  per-browser cookie; a POST whose field does not match, or whose Origin is another site, is refused.
- ``SecurityHeaders``: no framing, no referrer to other sites, a Content-Security-Policy that allows only this
  page's own inline style and the one script that carries the page's nonce; nothing is loaded from the network.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import URL, Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_PARAMETER = "token"  # noqa: S105 - the name of the query parameter, not a secret
CSRF_FIELD = "csrf"
CSRF_COOKIE = "checkpoint_csrf"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def new_token() -> str:
    """A fresh random token for the printed URL."""
    return secrets.token_urlsafe(32)


def _cookie_path(scope: Scope) -> str:
    return (scope.get("root_path") or "").rstrip("/") + "/"


def _cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    raw = Headers(scope=scope).get("cookie")
    if raw:
        try:
            jar.load(raw)
        except ValueError:  # a malformed Cookie header: as if there were none
            return {}
    return {name: morsel.value for name, morsel in jar.items()}


class TokenGate:
    """Refuse every request that does not prove it knows the token (query, cookie or bearer header)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()
        # The cookie holds a value derived from the token, not the token, and its name is this instance's:
        # two pages on two ports of one host keep their cookies apart (cookies ignore ports).
        self._session = hmac.new(self._token, b"checkpoint-ui-session", hashlib.sha256).hexdigest()
        self.cookie_name = "checkpoint_ui_" + hashlib.sha256(self._token).hexdigest()[:12]

    def _matches(self, offered: str, expected: bytes) -> bool:
        return hmac.compare_digest(offered.encode(), expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        if TOKEN_PARAMETER in query:
            if not self._matches(query[TOKEN_PARAMETER], self._token):
                await _refuse("wrong token")(scope, receive, send)
                return
            await self._exchange(scope, query)(scope, receive, send)
            return
        cookie = _cookies(scope).get(self.cookie_name)
        if cookie is not None and self._matches(cookie, self._session.encode()):
            await self.app(scope, receive, send)
            return
        authorization = Headers(scope=scope).get("authorization", "")
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer" and self._matches(credentials.strip(), self._token):
            await self.app(scope, receive, send)
            return
        await _refuse("no token: open the URL that `checkpoint journal ui` printed")(scope, receive, send)

    def _exchange(self, scope: Scope, query: dict[str, str]) -> Response:
        """The cookie, and a redirect to the same URL without the token."""
        rest = {k: v for k, v in query.items() if k != TOKEN_PARAMETER}
        # Starlette keeps the mount prefix in ``path`` (``root_path`` says how much of it is the prefix).
        target = scope["path"] + ("?" + urlencode(rest) if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(self.cookie_name, self._session, httponly=True, samesite="strict", path=_cookie_path(scope))
        return response


def _refuse(reason: str) -> Response:
    return PlainTextResponse(f"403 Forbidden: {reason}\n", status_code=403)


class HostCheck:
    """Answer only requests whose Host header names one of ``allowed`` (any port); 403 otherwise."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self._allowed = {name.lower().strip("[]") for name in allowed}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "*" not in self._allowed:
            host = Headers(scope=scope).get("host", "")
            name = urlsplit(f"//{host}").hostname or ""
            if name.lower() not in self._allowed:
                await _refuse(f"Host {host!r} is not this server's (DNS rebinding?)")(scope, receive, send)
                return
        await self.app(scope, receive, send)


class CsrfCookie:
    """Give every browser a random CSRF cookie on its first request; ``csrf_token`` signs it for forms."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        existing = _cookies(scope).get(CSRF_COOKIE)
        value = existing or secrets.token_urlsafe(24)
        scope.setdefault("state", {})["csrf_cookie"] = value
        if existing:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                carrier = Response()
                carrier.set_cookie(CSRF_COOKIE, value, httponly=True, samesite="strict", path=_cookie_path(scope))
                cookie = [(k, v) for k, v in carrier.raw_headers if k == b"set-cookie"]
                message = {**message, "headers": [*message.get("headers", []), *cookie]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def csrf_token(request: Request, secret: bytes) -> str:
    """The value every form of this page carries: the HMAC of the browser's CSRF cookie."""
    cookie: str = request.state.csrf_cookie
    return hmac.new(secret, cookie.encode(), hashlib.sha256).hexdigest()


def csrf_valid(request: Request, secret: bytes, submitted: Any) -> bool:
    """True when a POST comes from one of our forms: the field signs the cookie, and no foreign Origin."""
    origin = request.headers.get("origin")
    # Browsers send Origin with every POST; "null" (a sandboxed or opaque origin) is not ours either.
    if origin is not None and urlsplit(origin).netloc != URL(str(request.base_url)).netloc:
        return False
    if not isinstance(submitted, str) or CSRF_COOKIE not in request.cookies:
        return False
    return hmac.compare_digest(submitted.encode(), csrf_token(request, secret).encode())


class SecurityHeaders:
    """Headers on every response: no framing, no referrer to other sites, no sniffing, a strict CSP."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["nonce"] = nonce
        policy = (
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
            f"script-src 'nonce-{nonce}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
        extra = [
            (b"content-security-policy", policy.encode()),
            # Not no-referrer: with it, browsers send ``Origin: null`` on our own form posts, which csrf_valid
            # refuses. same-origin never sends a referrer to another site (and our URLs carry no token).
            (b"referrer-policy", b"same-origin"),
            (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"),
            (b"cache-control", b"no-store"),
        ]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
