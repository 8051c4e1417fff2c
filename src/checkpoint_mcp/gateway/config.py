"""The gateway's settings, as given to `checkpoint serve`, and the checks that refuse an unsafe listener."""

from __future__ import annotations

import os
from typing import NamedTuple

from checkpoint_mcp import listen
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.gateway.tokens import TokenSettings
from checkpoint_mcp.gateway.upstreams_file import UpstreamSpec
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.listen import is_loopback

DEFAULT_LISTEN = "127.0.0.1:8808"
DEFAULT_MAX_BODY = 64 * 1024 * 1024
DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_JOIN_TIMEOUT = 30.0
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class GatewayConfig(NamedTuple):
    """Everything `checkpoint serve …` was told; the proxy's own flags are in ``proxy``."""

    proxy: ProxyConfig
    host: str = "127.0.0.1"
    port: int = 8808
    auth_token: str | None = None  # never logged, never shown
    allowed_origins: tuple[str, ...] = ()
    max_body: int = DEFAULT_MAX_BODY
    tls_cert: str | None = None
    tls_key: str | None = None
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    join_timeout: float = DEFAULT_JOIN_TIMEOUT
    tokens: TokenSettings | None = None  # --issuer …: tokens from an identity provider, one principal each
    upstreams: tuple[UpstreamSpec, ...] = ()  # --upstreams FILE: many upstreams behind one endpoint (federation)
    ui_url_file: str | None = None  # --ui-url-file: where the pages' URL with its fresh token goes (mode 0600)

    @property
    def loopback(self) -> bool:
        """True when the listener is reachable from this machine only."""
        return is_loopback(self.host)

    def __repr__(self) -> str:  # keep the token out of any accidental log line
        auth = "tokens" if self.tokens else "on" if self.auth_token else "off"
        return f"GatewayConfig(host={self.host!r}, port={self.port}, auth={auth})"


def parse_listen(value: str) -> tuple[str, int]:
    """``--listen`` of `checkpoint serve` as (host, port).

    Raises:
        UsageError: not HOST:PORT with a port from 0 to 65535.
    """
    return listen.parse_listen(value, DEFAULT_LISTEN)


def auth_token(variable: str | None, no_auth: bool, host: str, tokens: bool = False) -> str | None:
    """The bearer token from environment variable ``variable``, after the listener's safety checks (``tokens``:
    an identity provider authenticates requests instead).

    Raises:
        UsageError: a non-loopback address without ``--auth-token-env``, ``--issuer`` or ``--no-auth``, two of
            them given, or an empty or missing variable.
    """
    if variable is not None and no_auth:
        raise UsageError("--auth-token-env and --no-auth contradict each other; give one")
    if tokens and (variable is not None or no_auth):
        flag = "--auth-token-env" if variable is not None else "--no-auth"
        raise UsageError(f"{flag} and --issuer contradict each other: tokens come from the identity provider")
    if variable is None:
        if not no_auth and not tokens and not is_loopback(host):
            raise UsageError(
                f"refusing to listen on {host}, which is not a loopback address, without authentication: "
                "give --auth-token-env VAR (clients then send 'Authorization: Bearer <token>'), or --no-auth to "
                "accept anyone who can reach it"
            )
        return None
    token = os.environ.get(variable, "")
    if not token.strip():
        raise UsageError(f"--auth-token-env {variable}: the environment variable {variable} is empty or not set")
    return token.strip()
