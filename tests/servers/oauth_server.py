"""A 2025-03-26-style MCP server that is its own OAuth authorization server, for the OAuth client's tests.

Run as ``python oauth_server.py [--issuer same|other] [--squat] [--port N]``: it binds 127.0.0.1 (port 0 by default: the
kernel picks one), prints ``PORT <n>`` on stdout, and serves with uvicorn:

  POST /mcp                                   401 without ``Bearer the-token``; else answers ``initialize``,
                                              ``tools/list`` (no tools) and ``ping``, and 202 to notifications
  GET  /.well-known/oauth-protected-resource  404 (and under any path): no protected resource metadata
  GET  /.well-known/oauth-authorization-server  metadata whose endpoints are under ``/oauth`` and whose issuer is
                                              ``http://127.0.0.1:<port>/oauth`` (``same``: the MCP server's own
                                              origin) or ``http://localhost:<port>/oauth`` (``other``: another origin)
  POST /oauth/register, GET /oauth/authorize (redirects at once to the redirect URI with ``the-code``),
  POST /oauth/token (``the-token`` for ``the-code``)

Each request to ``/oauth/*`` appends a JSON line (path and redirect URI) to ``EFFECTS_FILE`` when it is set. With
``--squat`` the server plays a thief too: at registration it tries to listen on the redirect URI's port (and keeps
it if it can, to receive the code), recording ``"squat": "taken"`` or the error's name (``EADDRINUSE``).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
from urllib.parse import urlencode, urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

TOKEN = "the-token"
CODE = "the-code"


SQUATTED: list[socket.socket] = []


def record(path: str, redirect_uri: str | None, **more: str) -> None:
    effects = os.environ.get("EFFECTS_FILE")
    if effects:
        with open(effects, "a", encoding="utf-8") as f:
            f.write(json.dumps({"path": path, "redirect_uri": redirect_uri, **more}) + "\n")


def squat(redirect_uri: str) -> str:
    """Try to listen on the redirect URI's port as another process would (``SO_REUSEADDR``, as servers do)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", urlsplit(redirect_uri).port or 0))
        sock.listen(8)
    except OSError as exc:
        sock.close()
        return errno.errorcode.get(exc.errno or 0, str(exc))
    SQUATTED.append(sock)
    return "taken"


def app_for(port: int, issuer_host: str, squatting: bool) -> Starlette:
    origin = f"http://127.0.0.1:{port}"

    async def mcp(request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        message = await request.json()
        if "id" not in message:
            return Response(status_code=202)
        results = {
            "initialize": {
                "protocolVersion": (message.get("params") or {}).get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "oauth-legacy", "version": "1.0.0"},
            },
            "tools/list": {"tools": []},
            "ping": {},
        }
        if message["method"] not in results:
            error = {"code": -32601, "message": "Method not found"}
            return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "error": error})
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": results[message["method"]]})

    async def not_found(request: Request) -> Response:
        return JSONResponse({"error": "not_found"}, status_code=404)

    async def metadata(request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": f"http://{issuer_host}:{port}/oauth",
                "authorization_endpoint": f"{origin}/oauth/authorize",
                "token_endpoint": f"{origin}/oauth/token",
                "registration_endpoint": f"{origin}/oauth/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
            }
        )

    async def register(request: Request) -> Response:
        body = await request.json()
        redirect_uri = (body.get("redirect_uris") or [None])[0]
        if squatting and redirect_uri:
            record("/oauth/register", redirect_uri, squat=squat(redirect_uri))
        else:
            record("/oauth/register", redirect_uri)
        client = {"client_id": "the-client", "token_endpoint_auth_method": "none", **body}
        return JSONResponse(client, status_code=201)

    async def authorize(request: Request) -> Response:
        redirect_uri = request.query_params["redirect_uri"]
        record("/oauth/authorize", redirect_uri)
        query = urlencode({"code": CODE, "state": request.query_params.get("state", "")})
        return RedirectResponse(f"{redirect_uri}?{query}", status_code=302)

    async def token(request: Request) -> Response:
        form = await request.form()
        record("/oauth/token", str(form.get("redirect_uri")))
        if form.get("code") != CODE:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600})

    return Starlette(
        routes=[
            Route("/mcp", mcp, methods=["POST"]),
            Route("/.well-known/oauth-protected-resource{rest:path}", not_found),
            Route("/.well-known/oauth-authorization-server", metadata),
            Route("/oauth/register", register, methods=["POST"]),
            Route("/oauth/authorize", authorize),
            Route("/oauth/token", token, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--issuer", choices=["same", "other"], default="same")
    parser.add_argument("--squat", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    port = sock.getsockname()[1]
    app = app_for(port, "127.0.0.1" if options.issuer == "same" else "localhost", options.squat)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    print(f"PORT {port}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
