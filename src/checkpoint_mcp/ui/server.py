"""`checkpoint journal ui`: serve the operator's pages on a local port with uvicorn, and print their URL.

The URL carries a fresh random token (as Jupyter's does); without it every request is refused. The server
listens on a loopback address only, unless ``--auth-token-env VAR`` names the token to use instead, as for
`checkpoint serve`. uvicorn's access log stays off: it would write the token of the first visit to the log.
"""

from __future__ import annotations

import os
import socket
import sys
import webbrowser
from typing import IO, TYPE_CHECKING

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.listen import is_loopback, parse_listen
from checkpoint_mcp.ui.security import LOOPBACK_NAMES, TOKEN_PARAMETER, new_token

if TYPE_CHECKING:
    from checkpoint_mcp.ui.app import SettleAction

DEFAULT_LISTEN = "127.0.0.1:0"


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port).

    Raises:
        UsageError: the address cannot be bound.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc}") from exc
    return sock


def serve_ui(
    location: str,
    listen: str = DEFAULT_LISTEN,
    *,
    open_browser: bool = False,
    token_env: str | None = None,
    audit_key: bytes | None = None,
    settle: SettleAction | None = None,
    out: IO[str] = sys.stdout,
) -> None:
    """Serve the pages of the journal at ``location`` until interrupted; print the URL to ``out`` first.

    Raises:
        UsageError: a bad or non-loopback ``listen`` without ``token_env``, or an empty token variable.
        JournalError: the journal cannot be opened.
    """
    import uvicorn

    from checkpoint_mcp.ui.app import create_app

    host, port = parse_listen(listen, "127.0.0.1:0 or [::1]:8809")
    loopback = is_loopback(host)
    if token_env is not None:
        token = os.environ.get(token_env, "")
        if not token:
            raise UsageError(f"--auth-token-env {token_env}: the environment variable {token_env} is empty or unset")
    elif not loopback:
        raise UsageError(
            f"refusing to serve the journal on the non-loopback address {host}: anyone who can reach it could "
            "resolve calls; give --auth-token-env VAR to require the token in VAR, or listen on 127.0.0.1"
        )
    else:
        token = new_token()
    allowed = (*LOOPBACK_NAMES, host) if loopback else ("*",)
    app = create_app(location, token=token, allowed_hosts=allowed, audit_key=audit_key, settle=settle)
    app.state.access.check()  # fail now, before printing a URL, if the journal cannot be opened
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = socket.gethostname() if host in ("0.0.0.0", "::") else host  # noqa: S104 - naming, not binding
    base = f"http://{'[' + shown + ']' if ':' in shown else shown}:{bound}/"
    if token_env is None:
        url = f"{base}?{TOKEN_PARAMETER}={token}"
        print(f"Checkpoint journal UI for {app.state.shown_location}: {url}", file=out, flush=True)
    else:
        url = base
        hint = f"{base}?{TOKEN_PARAMETER}=<the value of ${token_env}>"
        print(f"Checkpoint journal UI for {app.state.shown_location}: {hint}", file=out, flush=True)
    if open_browser:
        webbrowser.open(url)
    # The standard event loop: the settle action runs the upstream as a child, whose pipes need its transports.
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", server_header=False, loop="asyncio"
    )
    uvicorn.Server(config).run(sockets=[sock])
