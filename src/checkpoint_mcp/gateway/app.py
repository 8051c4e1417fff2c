"""The gateway's ASGI application: its routes, and the guards in front of them.

Routes: ``/mcp`` (the default workflow), ``/w/{workflow}/mcp`` (that workflow), ``/healthz``, ``/metrics``.
Extra apps (the operator's pages, ``ui``) are mounted through ``mounts``: ``build_app(..., mounts={"/ui": app})``;
a mounted app authenticates its own requests (a browser cannot send a bearer header: the operator's pages take
the gateway's token in their URL, then in a cookie), so the bearer guard lets their paths through.
Guards, outermost first: Origin/Host (DNS rebinding), bearer token, body limit.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from checkpoint_mcp.gateway.endpoint import McpEndpoint
from checkpoint_mcp.gateway.metrics import CONTENT_TYPE
from checkpoint_mcp.gateway.security import BearerAuth, BodyLimit, OriginGuard
from checkpoint_mcp.gateway.sessions import Gateway


def build_app(gateway: Gateway, mounts: Mapping[str, Any] | None = None) -> Starlette:
    """The Starlette app serving ``gateway``; its lifespan starts the upkeep and shuts every upstream down."""
    endpoint = McpEndpoint(gateway)
    config = gateway.config

    async def healthz(request: Request) -> Response:
        ok, report = gateway.health()
        body = json.dumps({"status": "ok" if ok else "unavailable", **report})
        return Response(body, status_code=200 if ok else 503, media_type="application/json")

    async def metrics(request: Request) -> Response:
        return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)

    routes: list[BaseRoute] = [
        Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]),
        Route("/w/{workflow:str}/mcp", endpoint, methods=["GET", "POST", "DELETE"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    routes.extend(Mount(path, app=app) for path, app in (mounts or {}).items())

    middleware = [Middleware(OriginGuard, loopback=config.loopback, allowed_origins=config.allowed_origins)]
    if config.auth_token is not None:
        middleware.append(Middleware(BearerAuth, token=config.auth_token, exempt=tuple(mounts or ())))
    middleware.append(Middleware(BodyLimit, limit=config.max_body))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gateway.start()
        try:
            yield
        finally:
            await gateway.shutdown()

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
