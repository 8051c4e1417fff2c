"""Run `checkpoint serve`: open the journal, build the app, serve it with uvicorn until SIGTERM.

On SIGTERM or SIGINT the listener stops accepting, the GET streams end, requests in flight get their answers
(journaled) for up to ``DRAIN_SECONDS``, then every upstream is closed, and the exit code is 128 + the signal
(as the stdio proxy's); a second SIGINT cuts the wait short.
The address actually bound is written to stderr as ``checkpoint serve: listening on URL`` (``--listen …:0``
picks a free port), and where the journal's pages are: a fresh token for them goes to ``--ui-url-file`` or a
terminal, never into a log (``announce_pages``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
from contextlib import ExitStack
from typing import Any

import uvicorn
from starlette.middleware import Middleware

from checkpoint_mcp.config import RemoteConfig, audit_key
from checkpoint_mcp.errors import UpstreamError, UsageError
from checkpoint_mcp.gateway.app import build_app
from checkpoint_mcp.gateway.channel import DRAIN_SECONDS
from checkpoint_mcp.gateway.config import GatewayConfig
from checkpoint_mcp.gateway.metrics import GatewayMetrics
from checkpoint_mcp.gateway.security import OperatorGate
from checkpoint_mcp.gateway.sessions import SINGLE, Gateway, UpstreamFactory
from checkpoint_mcp.gateway.tokens import TokenVerifier
from checkpoint_mcp.gateway.upstreams_file import MAX_LISTED_NAME, prefixed
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.platforms.commands import shell_name
from checkpoint_mcp.telemetry import from_environ
from checkpoint_mcp.ui.app import SettleAction
from checkpoint_mcp.ui.app import create_app as create_ui_app
from checkpoint_mcp.ui.security import LOOPBACK_NAMES, TOKEN_PARAMETER, new_token
from checkpoint_mcp.upstream.base import Upstream
from checkpoint_mcp.upstream.stdio.process import spawn

logger = logging.getLogger(__name__)


def stdio_upstreams(command: str, env: tuple[tuple[str, str], ...] = ()) -> UpstreamFactory:
    """A factory of stdio upstreams: each call starts ``/bin/sh -c command`` as a new child (``env`` added to its
    environment)."""
    from checkpoint_mcp.upstream.stdio.child import ChildUpstream

    async def start() -> Upstream:
        try:
            process = spawn(command, dict(env))
        except OSError as exc:
            raise UpstreamError(f"cannot start the upstream with {shell_name()}: {exc}") from exc
        logger.info("upstream started (pid %d): %s", process.pid, command)
        return ChildUpstream(process)

    return start


def remote_upstreams(remote: RemoteConfig) -> UpstreamFactory:
    """A factory of remote upstreams: each call opens its own exchange with the server at ``remote.url`` (its
    own session in the session era), with the proxy's flags for headers, OAuth, timeouts and TLS."""
    from checkpoint_mcp.upstream.http.settings import checked_settings, open_remote

    checked_settings(remote, os.environ)  # a bad URL, header or CA file is an error now, not at the first session

    async def start() -> Upstream:
        return open_remote(remote, os.environ)

    return start


def upstreams(config: GatewayConfig) -> dict[str, UpstreamFactory]:
    """The factories of the upstreams: the one the command line names (a stdio child, or a remote server) under
    ``SINGLE``, or each of ``--upstreams`` by its name.

    Raises:
        UsageError: a remote upstream's URL, header or CA file cannot work.
    """
    if config.upstreams:
        return {
            spec.name: remote_upstreams(spec.remote)
            if spec.remote is not None
            else stdio_upstreams(spec.command or "", spec.env)
            for spec in config.upstreams
        }
    if config.proxy.remote is not None:
        return {SINGLE: remote_upstreams(config.proxy.remote)}
    assert config.proxy.upstream_cmd is not None
    return {SINGLE: stdio_upstreams(config.proxy.upstream_cmd)}


async def check_upstreams(gateway: Gateway) -> None:
    """Start each upstream of ``--upstreams`` once, before listening, and check the names it lists: one too long
    when prefixed is a start-up error; an upstream that cannot start or answer is left out (and tried again).

    Raises:
        UsageError: a prefixed name is over 64 characters, or two are the same.
    """
    health = gateway.federation_health
    assert health is not None

    async def one(name: str) -> None:
        try:
            listed = await gateway.probe(name)
        except Exception as exc:
            health.down(name, f"cannot start or answer: {exc or type(exc).__name__}")
            return
        for field, items in listed.items():
            seen: set[str] = set()
            for item in items if isinstance(items, list) else []:
                full = prefixed(name, str(item.get("name", "")) if isinstance(item, dict) else "")
                if len(full) > MAX_LISTED_NAME:
                    raise UsageError(
                        f"--upstreams: {field} {full!r} of upstream {name} is {len(full)} characters long with its "
                        f"prefix, over {MAX_LISTED_NAME}: give the upstream a shorter name"
                    )
                if full in seen:
                    raise UsageError(f"--upstreams: upstream {name} lists {field} {full!r} twice")
                seen.add(full)
        health.up(name)

    await asyncio.gather(*(one(spec.name) for spec in gateway.config.upstreams))


class _Server(uvicorn.Server):
    """uvicorn, telling the gateway when shutdown begins (so long-lived GET streams end at once)."""

    def __init__(self, config: uvicorn.Config, gateway: Gateway) -> None:
        super().__init__(config)
        self._gateway = gateway
        self.signal: int | None = None

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.should_exit:
            logger.info("%s received; draining", signal.Signals(sig).name)
        self.signal = self.signal or sig
        self._gateway.end_long_streams()
        super().handle_exit(sig, frame)
        # uvicorn would raise the signal again after its shutdown; we exit with 128 + signal, as the proxy does.
        self._captured_signals.clear()


async def _serve(
    server: _Server, gateway: Gateway, config: GatewayConfig, ui_token: str | None, verifier: TokenVerifier | None
) -> None:
    if verifier is not None:
        await verifier.keys.start()
    if config.upstreams:
        await check_upstreams(gateway)
    task = asyncio.ensure_future(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
        for listener in server.servers:
            for sock in listener.sockets:
                host, port = sock.getsockname()[:2]
                scheme = "https" if config.tls_cert else "http"
                shown = f"[{host}]" if ":" in host else host
                sys.stderr.write(f"checkpoint serve: listening on {scheme}://{shown}:{port}/mcp\n")
                if ui_token is not None:
                    # A fresh token opens the pages; the operator knows --auth-token-env's, which is never shown.
                    fresh = ui_token if not (config.auth_token and verifier is None) else None
                    sys.stderr.write(announce_pages(f"{scheme}://{shown}:{port}/ui/", fresh, config.ui_url_file))
                sys.stderr.flush()
    stopped = asyncio.ensure_future(gateway.stopped.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if stopped.done() and not task.done():
        server.should_exit = True
        gateway.end_long_streams()
    stopped.cancel()
    await task
    if verifier is not None:
        await verifier.keys.close()  # a background fetch of the key set that hangs does not hold up the exit


def announce_pages(url: str, token: str | None, url_file: str | None) -> str:
    """The line that tells where the journal's pages are, for stderr; ``token``: a fresh one the URL must carry
    (None: they take ``--auth-token-env``'s, which the operator knows and is never shown).

    A token is a secret and stderr is usually a log (a container's, a service manager's): the URL with its token is
    written to ``url_file`` (``--ui-url-file``, mode 0600) and shown on stderr only when stderr is a terminal, where
    a person reads it; otherwise the line says where to find it.
    """
    full = url if token is None else f"{url}?{TOKEN_PARAMETER}={token}"
    if url_file is not None:
        try:
            write_private(url_file, full + "\n")
        except OSError as exc:
            logger.error("cannot write --ui-url-file %s: %s", url_file, exc)
    if token is None or sys.stderr.isatty():
        return f"checkpoint serve: the journal's pages at {full}\n"
    where = f"its token is in {url_file}" if url_file is not None else "give --ui-url-file FILE for the token"
    return f"checkpoint serve: the journal's pages at {url} ({where}; a token is never logged)\n"


def write_private(path: str, text: str) -> None:
    """Replace ``path`` with ``text``, readable by this user alone (0600 from its creation: mkstemp's mode).

    Raises:
        OSError: the folder cannot be written.
    """
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def server_settings() -> dict[str, Any]:
    """uvicorn's settings for the gateway (the benchmarks' floors use them too).

    ``auto`` picks uvloop and httptools where they are installed (they are dependencies on Linux and macOS),
    else asyncio's own loop and h11: the same HTTP semantics, at about half the CPU per request.
    """
    return {
        "loop": "auto",
        "http": "auto",
        "log_config": None,
        "log_level": logging.getLogger("checkpoint_mcp").getEffectiveLevel(),
        "access_log": False,
        "proxy_headers": False,
        "server_header": False,
    }


def run_gateway(config: GatewayConfig, settle: SettleAction | None = None) -> int:
    """Serve until SIGTERM/SIGINT (0) or until the journal is lost for good (1).

    ``settle``: the /ui pages' action on an in-doubt call (built by the CLI from ``--policy`` and the upstream, as
    for `checkpoint journal ui`); None: the pages cannot settle calls.

    Raises:
        JournalError: the journal cannot be opened.
        KeySetUnavailable: ``--jwks-file`` cannot be read.
        UsageError: an upstream of ``--upstreams`` lists a name too long to prefix; ``--ui-url-file``'s folder
            cannot be written.
    """
    if config.ui_url_file is not None and not os.access(os.path.dirname(config.ui_url_file) or ".", os.W_OK):
        raise UsageError(f"--ui-url-file {config.ui_url_file}: its folder does not exist or cannot be written")
    verifier = TokenVerifier(config.tokens) if config.tokens is not None else None
    if verifier is not None and config.tokens is not None and config.tokens.jwks_file is not None:
        verifier.keys.load_file()  # a key file that cannot be read is an error now, not at the first request
    with ExitStack() as stack:
        journal: Journal | None = None
        if config.proxy.journal is not None:
            journal = open_journal(config.proxy.journal, audit_key=audit_key(config.proxy.audit_key_env))
            stack.callback(journal.close)
            logger.info("journal %s", journal.location)
        telemetry = from_environ(os.environ)
        stack.callback(telemetry.shutdown)  # the last spans are exported before the process ends
        metrics = GatewayMetrics(principals=verifier is not None)
        gateway = Gateway(config, journal, upstreams(config), metrics, telemetry)
        mounts: dict[str, Any] = {}
        ui_token: str | None = None
        if journal is not None and config.proxy.journal is not None:
            # The operator's pages, behind the gateway's token (or, without one, a fresh one as for `journal ui`).
            ui_token = (config.auth_token if verifier is None else None) or new_token()
            pages = create_ui_app(
                config.proxy.journal,
                token=ui_token if verifier is None else None,
                allowed_hosts=LOOPBACK_NAMES if config.loopback else ("*",),
                shown_location=journal.location,
                audit_key=journal.audit_key,
                settle=settle,
                gate=None if verifier is None else Middleware(OperatorGate, verifier=verifier, token=ui_token),
            )
            stack.callback(pages.state.access.close)  # a mounted app's own lifespan does not run
            # With an identity provider, an operator's token opens the pages (an agent's never does), and so does
            # the printed URL's fresh token; else the pages check --auth-token-env's token (or the fresh one).
            mounts["/ui"] = pages
        app = build_app(gateway, mounts, verifier)
        uv_config = uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            ssl_certfile=config.tls_cert,
            ssl_keyfile=config.tls_key,
            lifespan="on",
            timeout_graceful_shutdown=int(DRAIN_SECONDS),
            **server_settings(),
        )
        server = _Server(uv_config, gateway)
        with asyncio.Runner(loop_factory=uv_config.get_loop_factory()) as runner:
            runner.run(_serve(server, gateway, config, ui_token, verifier))
        if gateway.fatal is not None or not server.started:
            return 1
        return 128 + server.signal if server.signal is not None else 0
