"""The gateway's ASGI application: its routes, and the guards in front of them.

Routes: ``/mcp`` (the default workflow), ``/w/{workflow}/mcp`` (that workflow), ``/healthz``, ``/metrics``.
Extra apps (the operator's pages, ``ui``) are mounted through ``mounts``: ``build_app(..., mounts={"/ui": app})``;
a mounted app authenticates its own requests (a browser cannot send a bearer header: the operator's pages take
the gateway's token in their URL, then in a cookie), so the bearer guard lets their paths through.
With an identity provider (``verifier``), ``/.well-known/oauth-protected-resource`` (RFC 9728) is served to anyone,
and ``/metrics`` (which names every principal) only to an operator's token. ``/healthz`` is served to anyone (the
probes of a platform hold no token); behind a token it says only ok or unavailable, without what failed.
Guards, outermost first: Origin/Host (DNS rebinding), bearer token (the shared one of ``--auth-token-env``, or the
identity provider's tokens, then the operator's role for ``/metrics``), body limit; all pure ASGI. Behind them,
``McpRoutes`` hands the two MCP routes straight to the endpoint, and everything else to the Starlette app (its
router, its error pages, its lifespan): the hot path costs no Starlette routing and no exception layers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from checkpoint_mcp.gateway.endpoint import McpEndpoint
from checkpoint_mcp.gateway.metrics import CONTENT_TYPE
from checkpoint_mcp.gateway.security import (
    ASGIApp,
    BearerAuth,
    BodyLimit,
    OperatorOnly,
    OriginGuard,
    Receive,
    Scope,
    Send,
    TokenAuth,
)
from checkpoint_mcp.gateway.sessions import Gateway
from checkpoint_mcp.gateway.tokens import METADATA_PATH, TokenVerifier

logger = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"  # served to anyone: its status code is what probes read
MCP_METHODS = frozenset({"GET", "HEAD", "POST", "DELETE"})  # those the Starlette routes below let through


class McpRoutes:
    """``/mcp`` and ``/w/{workflow}/mcp`` to ``endpoint`` directly (as the Starlette routes of the same paths
    would, with ``path_params``); any other request, and the lifespan, to ``app``."""

    def __init__(self, endpoint: ASGIApp, app: ASGIApp) -> None:
        self._endpoint = endpoint
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in MCP_METHODS and not scope.get("root_path"):
            path: str = scope["path"]
            if path == "/mcp":
                scope["path_params"] = {}
                await self._endpoint(scope, receive, send)
                return
            if path.startswith("/w/") and path.endswith("/mcp"):
                workflow = path[3:-4]
                if workflow and "/" not in workflow:
                    scope["path_params"] = {"workflow": workflow}
                    await self._endpoint(scope, receive, send)
                    return
        await self._app(scope, receive, send)


def build_app(
    gateway: Gateway, mounts: Mapping[str, Any] | None = None, verifier: TokenVerifier | None = None
) -> ASGIApp:
    """The Starlette app serving ``gateway``; its lifespan starts the upkeep and shuts every upstream down.
    ``verifier``: the identity provider's tokens are required (``--issuer``), else ``--auth-token-env``'s or none."""
    endpoint = McpEndpoint(gateway)
    config = gateway.config

    # /healthz answers without a token: a probe (a kubelet, a load balancer, a container's health check) has none.
    # Behind a token, what failed (names, addresses, error texts) is the operator's to read, in the log.
    detailed = verifier is None and config.auth_token is None

    was_ok = [True]

    async def healthz(request: Request) -> Response:
        ok, report = gateway.health()
        if ok != was_ok[0]:  # once per change, not once per probe
            was_ok[0] = ok
            if ok:
                logger.warning("healthy again: %s", json.dumps(report))
            else:
                logger.warning("unhealthy (/healthz answers 503): %s", json.dumps(report))
        body = json.dumps({"status": "ok" if ok else "unavailable", **(report if detailed else {})})
        return Response(body, status_code=200 if ok else 503, media_type="application/json")

    async def resource_metadata(request: Request) -> Response:
        assert verifier is not None
        base = f"{request.url.scheme}://{request.headers.get('host') or request.url.netloc}"
        body = json.dumps(verifier.settings.metadata(base))
        return Response(body, media_type="application/json", headers={"cache-control": "max-age=300"})

    async def metrics(request: Request) -> Response:
        return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)

    routes: list[BaseRoute] = [
        Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]),
        Route("/w/{workflow:str}/mcp", endpoint, methods=["GET", "POST", "DELETE"]),
        Route(HEALTH_PATH, healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    if verifier is not None:
        routes.append(Route(METADATA_PATH, resource_metadata, methods=["GET"]))
        routes.append(Route(METADATA_PATH + "/{resource:path}", resource_metadata, methods=["GET"]))
    routes.extend(Mount(path, app=app) for path, app in (mounts or {}).items())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gateway.start()
        try:
            yield
        finally:
            await gateway.shutdown()

    app: ASGIApp = McpRoutes(endpoint, Starlette(routes=routes, lifespan=lifespan))
    app = BodyLimit(app, limit=config.max_body)
    if verifier is not None:
        app = OperatorOnly(app, verifier, paths=("/metrics",))
        app = TokenAuth(app, verifier, exempt=(METADATA_PATH, HEALTH_PATH, *(mounts or ())))
    elif config.auth_token is not None:
        app = BearerAuth(app, token=config.auth_token, exempt=(HEALTH_PATH, *(mounts or ())))
    return OriginGuard(app, loopback=config.loopback, allowed_origins=config.allowed_origins)
