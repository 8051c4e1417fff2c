"""The `checkpoint` command: a thin click adapter over the library.

Each command opens its resource, makes one library call, and turns a ``CheckpointError`` into a
``click.ClickException``. Command modules are imported inside the commands so that start-up stays fast
(`checkpoint brief` must not import the MCP SDK; the proxy imports it only for a remote upstream's OAuth or
its tools' `x-mcp-header` marks).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from checkpoint_mcp import __version__
from checkpoint_mcp.cli.asktools import asker as tools_asker
from checkpoint_mcp.cli.durability import journal_options, relaxed_choice
from checkpoint_mcp.cli.journal import audit_key_option
from checkpoint_mcp.cli.operator import journal_group
from checkpoint_mcp.cli.policy import checked_policy, policy_group, policy_option
from checkpoint_mcp.errors import CheckpointError
from checkpoint_mcp.init.command import ASKER as init_asker
from checkpoint_mcp.init.command import init as init_command
from checkpoint_mcp.refusals import STILL_IN_FLIGHT
from checkpoint_mcp.upstream.options import upstream_choice, upstream_options

if TYPE_CHECKING:
    from checkpoint_mcp.intercept.proxy_config import ProxyConfig
    from checkpoint_mcp.ui.app import SettleAction

LOG_LEVELS = ("debug", "info", "warning", "error")
F = TypeVar("F", bound=Callable[..., Any])


def configure_logging(level: str) -> None:
    """Send log records to stderr only: stdout is the MCP wire in every command that speaks MCP."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("checkpoint: %(levelname)s: %(message)s"))
    root = logging.getLogger("checkpoint_mcp")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


_SHOW_VERSION = "\0show-version"  # what a bare --version parses to; no argument can hold a NUL byte


def _version_or_identity(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """``--version VALUE`` is the server version the client sees (the spec's flag); ``--version`` alone (last, or
    before another option or a command's name, which is never taken as the VALUE) prints ours and exits 0."""
    commands = ctx.command.commands if isinstance(ctx.command, click.Group) else {}
    if value == _SHOW_VERSION or value in commands:
        click.echo(f"checkpoint {__version__}")
        ctx.exit(0)
    return value


def _identity_version_option(identity: str) -> Callable[[F], F]:
    """The spec's ``--version VALUE`` (``identity`` says what it sets), which alone prints our version."""
    return click.option(
        "--version",
        "server_version",
        default="0.0.0",
        show_default=True,
        is_flag=False,
        flag_value=_SHOW_VERSION,
        is_eager=True,
        callback=_version_or_identity,
        metavar="VERSION",
        help=f"{identity} Alone, with no VERSION: print Checkpoint's version and exit.",
    )


class _ProxyGroup(click.Group):
    """A group whose bare invocation (no subcommand) runs the proxy."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("checkpoint", "--upstream-cmd CMD | --upstream-url URL [--journal PATH_OR_URL] [OPTIONS]")
        formatter.write_usage("checkpoint", "COMMAND [ARGS]...", prefix="       ")


@click.group(cls=_ProxyGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@upstream_options
@click.option(
    "--journal",
    metavar="PATH_OR_URL",
    help="SQLite journal file, or a postgresql:// URL. Enables resumability; without it: pure pass-through.",
)
@click.option(
    "--workflow-id",
    metavar="ID",
    help="Workflow identifier. Default: the journal's absolute path (a URL: without its password).",
)
@click.option(
    "--on-divergence",
    type=click.Choice(["strict", "fork"]),
    default="strict",
    show_default=True,
    help="strict refuses a divergent call; fork starts a branch of the workflow there and carries on.",
)
@click.option(
    "--replay-from-start",
    is_flag=True,
    help="Start the cursor at sequence 1 instead of after the last journaled call (for scripts re-run in order).",
)
@click.option(
    "--trust-annotations",
    is_flag=True,
    help="Forward calls to tools the upstream marks readOnlyHint:true without journaling them.",
)
@journal_options
@click.option(
    "--redact-args-in-journal",
    is_flag=True,
    help="Store a stub instead of the call arguments; divergence is still detected by signature.",
)
@audit_key_option
@policy_option
@click.option("--name", default="checkpoint", show_default=True, help="Server name the client sees.")
@_identity_version_option("Server version the client sees.")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    help="Verbosity of the log on stderr.",
)
@click.version_option(
    __version__,
    "-V",
    "--checkpoint-version",
    message="%(prog)s %(version)s",
    prog_name="checkpoint",
    help="Print Checkpoint's version and exit (as --version alone does).",
)
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """Make MCP agents crash-resumable.

    Without a COMMAND, run the journaling proxy: speak MCP on stdio to the client, run the upstream server
    given by --upstream-cmd as a child over stdio (or reach the one at --upstream-url over HTTP), mirror every
    message byte for byte, and journal every tools/call so that a restarted agent never re-runs a side effect
    that already completed.
    """
    configure_logging(options["log_level"])
    if ctx.invoked_subcommand is not None:
        proxy_only = ("upstream_cmd", "upstream_url", "journal", "workflow_id", "audit_key_env", "policy")
        given = [k for k in proxy_only if options[k] is not None]
        if given:
            raise click.UsageError(
                f"--{given[0].replace('_', '-')} belongs to the proxy, not to `checkpoint {ctx.invoked_subcommand}`"
            )
        return
    from checkpoint_mcp.proxy.runner import run_proxy

    config = _proxy_config(options)
    try:
        code = run_proxy(config)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    ctx.exit(code)


def _proxy_config(options: dict[str, Any]) -> ProxyConfig:
    """The journaling settings of the stdio proxy and the gateway; a ``click.UsageError`` for a bad combination."""
    from checkpoint_mcp.cli.journal import key_from
    from checkpoint_mcp.intercept.proxy_config import ProxyConfig

    key_from(options["audit_key_env"])  # an unset variable is a usage error now, not at the first call
    upstream_cmd, remote = upstream_choice(options)
    return ProxyConfig(
        upstream_cmd=upstream_cmd,
        remote=remote,
        journal=options["journal"],
        workflow_id=options["workflow_id"],
        on_divergence=options["on_divergence"],
        trust_annotations=options["trust_annotations"],
        redact_args=options["redact_args_in_journal"],
        replay_from_start=options["replay_from_start"],
        server_name=options["name"],
        server_version=options["server_version"],
        relaxed_completions=relaxed_choice(options),
        audit_key_env=options["audit_key_env"],
        policy=checked_policy(options["policy"], remote),
    )


@main.command()
@click.option(
    "--listen",
    default="127.0.0.1:8808",
    show_default=True,
    envvar="CHECKPOINT_SERVE_LISTEN",
    show_envvar=True,
    metavar="HOST:PORT",
    help="Address to listen on (port 0: any free port). A non-loopback address needs --auth-token-env or --no-auth.",
)
@upstream_options
@click.option(
    "--journal",
    envvar="CHECKPOINT_SERVE_JOURNAL",
    show_envvar=True,
    metavar="PATH_OR_URL",
    help="SQLite journal file, or a postgresql:// URL (a URL with a password belongs in the variable, not in argv).",
)
@click.option(
    "--workflow-id", metavar="ID", help="Workflow of /mcp. Default: the journal's path (URL without password)."
)
@click.option(
    "--on-divergence",
    type=click.Choice(["strict", "fork"]),
    default="strict",
    show_default=True,
    help="strict refuses a divergent call; fork starts a branch of the workflow there and carries on.",
)
@click.option("--replay-from-start", is_flag=True, help="Start each workflow's cursor at sequence 1.")
@click.option("--trust-annotations", is_flag=True, help="Do not journal calls to tools marked readOnlyHint:true.")
@journal_options
@click.option("--redact-args-in-journal", is_flag=True, help="Store a stub instead of the call arguments.")
@audit_key_option
@policy_option
@click.option("--name", default="checkpoint", show_default=True, help="Server name the clients see.")
@_identity_version_option("Server version the clients see.")
@click.option(
    "--auth-token-env",
    metavar="VAR",
    help="Require 'Authorization: Bearer <token>' on every request but /healthz; the token is read from environment "
    "variable VAR.",
)
@click.option("--no-auth", is_flag=True, help="Accept unauthenticated requests on a non-loopback address.")
@click.option(
    "--ui-url-file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the journal's pages' URL, with its fresh token, to FILE (mode 0600). The token is shown on stderr "
    "only when stderr is a terminal, never in a log.",
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="An Origin (e.g. https://app.example.com) allowed besides loopback ones; repeatable.",
)
@click.option(
    "--max-body",
    type=click.IntRange(min=1),
    default=64 * 1024 * 1024,
    show_default=True,
    help="Largest request body in bytes; larger ones get 413.",
)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="TLS certificate (PEM), with --tls-key.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="TLS private key (PEM), with --tls-cert.")
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    help="Seconds without a request after which a session (or a workflow's upstream) is closed.",
)
@click.option(
    "--join-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds a re-sent call (same checkpoint_seq or checkpoint_key, same arguments) waits for the original "
    f"still in flight; then it is refused as still in flight ({STILL_IN_FLIGHT}), never run.",
)
@click.option("--issuer", metavar="URL", help="Require tokens from this identity provider (its 'iss' claim).")
@click.option(
    "--audience",
    "audiences",
    multiple=True,
    metavar="AUD",
    help="With --issuer: the audience tokens must name (the gateway's URL, as clients ask for it); repeatable.",
)
@click.option("--jwks-url", metavar="URL", help="With --issuer: the identity provider's JSON Web Key Set.")
@click.option(
    "--jwks-file", type=click.Path(dir_okay=False), metavar="FILE", help="With --issuer: the key set as a file."
)
@click.option(
    "--authorization-server",
    "authorization_servers",
    multiple=True,
    metavar="URL",
    help="With --issuer: an authorization server the protected-resource metadata names (default: the issuer).",
)
@click.option(
    "--principal-claim",
    default="sub",
    show_default=True,
    metavar="CLAIM",
    help="With --issuer: the claim naming the principal who owns the workflows a token creates.",
)
@click.option(
    "--operator-scope",
    metavar="SCOPE",
    help="With --issuer: a token with this scope is an operator's (every workflow from /ui; /metrics).",
)
@click.option(
    "--operator-claim",
    metavar="NAME=VALUE",
    help="With --issuer: a token whose claim NAME is (or lists) VALUE is an operator's.",
)
@click.option(
    "--upstreams",
    "upstreams_file",
    type=click.Path(dir_okay=False),
    metavar="FILE.toml",
    help="Many upstreams behind one endpoint, one [upstreams.NAME] table each; tools are listed as NAME__TOOL. "
    "Instead of --upstream-cmd / --upstream-url and --policy.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    help="Verbosity of the log on stderr.",
)
def serve(**options: Any) -> None:
    """Serve the journaling proxy as an MCP gateway over Streamable HTTP.

    Point MCP clients at http://HOST:PORT/mcp (the default workflow) or http://HOST:PORT/w/WORKFLOW/mcp (one
    workflow per run) instead of the real server: every tools/call is journaled as by the stdio proxy. Both
    protocol eras are served (sessions with Mcp-Session-Id, and stateless 2026-07-28). GET /healthz says whether
    the journal and the upstream are reachable (to anyone: probes hold no token); GET /metrics is Prometheus text.
    """
    configure_logging(options["log_level"])
    from checkpoint_mcp.gateway.config import GatewayConfig, auth_token, parse_listen
    from checkpoint_mcp.gateway.tokens import token_settings
    from checkpoint_mcp.gateway.upstreams_file import load_upstreams

    if (options["tls_cert"] is None) != (options["tls_key"] is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    try:
        host, port = parse_listen(options["listen"])
        tokens = token_settings(
            issuer=options["issuer"],
            audiences=tuple(options["audiences"]),
            jwks_url=options["jwks_url"],
            jwks_file=options["jwks_file"],
            authorization_servers=tuple(options["authorization_servers"]),
            principal_claim=options["principal_claim"],
            operator_scope=options["operator_scope"],
            operator_claim=options["operator_claim"],
        )
        token = auth_token(options["auth_token_env"], options["no_auth"], host, tokens=tokens is not None)
        upstreams = load_upstreams(options["upstreams_file"]) if options["upstreams_file"] else ()
    except CheckpointError as exc:
        raise click.UsageError(str(exc)) from exc
    config = GatewayConfig(
        proxy=_federation_config(options) if upstreams else _proxy_config(options),
        tokens=tokens,
        upstreams=upstreams,
        host=host,
        port=port,
        auth_token=token,
        allowed_origins=tuple(options["allowed_origins"]),
        max_body=options["max_body"],
        tls_cert=options["tls_cert"],
        tls_key=options["tls_key"],
        idle_timeout=options["idle_timeout"],
        join_timeout=options["join_timeout"],
        ui_url_file=options["ui_url_file"],
    )
    from checkpoint_mcp.gateway.runner import run_gateway

    try:
        code = run_gateway(config, _serve_settle(config.proxy, options.get("upstream_timeout")))
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(code)


def _federation_config(options: dict[str, Any]) -> ProxyConfig:
    """The journaling settings shared by the upstreams of ``--upstreams`` (each has its own command or URL and its
    own policy, from the file); a ``click.UsageError`` for a flag that belongs to one upstream."""
    for flag in ("upstream_cmd", "upstream_url", "policy", "upstream_bearer_env", "upstream_ca", "upstream_auth"):
        if options.get(flag):
            name = "--" + flag.replace("_", "-")
            raise click.UsageError(f"{name} and --upstreams contradict each other: say it in the upstream's table")
    for flag in ("upstream_headers", "upstream_header_envs"):
        if options.get(flag):
            raise click.UsageError("--upstream-header and --upstreams contradict each other: use headers = [...]")
    return _proxy_config({**options, "upstream_cmd": "-"})._replace(upstream_cmd=None)


def _serve_settle(proxy: ProxyConfig, timeout: float | None) -> SettleAction | None:
    """The settle action of the pages `checkpoint serve` mounts at /ui: with ``--policy`` and a journal, the one
    `checkpoint journal ui` gives its pages (``proxy/reconcile.py``), reaching serve's own upstream; else None.
    Built here because gateway/ never imports proxy/.

    Raises:
        UsageError: the audit key's variable is named but unset.
    """
    if proxy.policy is None or proxy.journal is None:
        return None
    from checkpoint_mcp.config import DEFAULT_UPSTREAM_TIMEOUT, audit_key
    from checkpoint_mcp.proxy.reconcile import settle_action

    key = audit_key(proxy.audit_key_env)
    wait = float(timeout or DEFAULT_UPSTREAM_TIMEOUT)
    return settle_action(proxy.journal, proxy.policy, proxy.upstream_cmd, proxy.remote, wait, key)


@main.command()
@click.option("--workdir", type=click.Path(file_okay=False), help="Keep the demo's files here instead of a temp dir.")
def demo(workdir: str | None) -> None:
    """Run a scripted agent through the proxy, crash it, and show replay, divergence and in-doubt."""
    from checkpoint_mcp.demo.agent import run_demo

    try:
        run_demo(workdir)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc


main.add_command(policy_group)
main.add_command(journal_group)
main.add_command(init_command)
if not init_asker:
    init_asker.append(tools_asker)  # init asks servers for their tools through cli/, which may import transports


class _JournalCommand(click.Command):
    """A command whose ``--journal`` options each take the ``--workflow-id`` that follows them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["checkpoint.raw_args"] = list(args)
        return super().parse_args(ctx, args)


def _journal_specs(ctx: click.Context) -> Any:
    from checkpoint_mcp.session.journals import pair_options

    specs = tuple(pair_options(ctx.meta.get("checkpoint.raw_args", [])))
    if sum(spec.workflow is not None for spec in specs) != len(ctx.params.get("workflow_ids", ())):
        raise click.UsageError("each --workflow-id goes right after the --journal it names (one per journal)")
    return specs


def _hook_input() -> tuple[str, str | None]:
    """The session-start source in the hook's JSON input on stdin (Claude Code's ``source``: startup, resume, clear,
    compact; VS Code's ``new``), else ``unknown``, and the client's id of the session, if it names one. Reads only
    what is there within a moment: a client that leaves stdin open, or a terminal, gives nothing."""
    import json
    import select

    from checkpoint_mcp.journal.session_starts import session_of, source_of

    if sys.stdin is None or sys.stdin.isatty():
        return "unknown", None
    try:
        ready, _, _ = select.select([sys.stdin], [], [], 0.5)
        text = os.read(sys.stdin.fileno(), 65536).decode(errors="replace") if ready else ""
        hook_input = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return "unknown", None
    return source_of(hook_input), session_of(hook_input)


def _sessionjournal_options(function: Any) -> Any:
    function = click.option(
        "--workflow-id",
        "workflow_ids",
        multiple=True,
        metavar="ID",
        help="The workflow of the --journal before it, as given to that proxy. Default: the proxy's default.",
    )(function)
    return click.option(
        "--journal",
        "journals",
        multiple=True,
        metavar="PATH_OR_URL",
        help="A journal the project's proxies write to (repeatable). Default: CHECKPOINT_JOURNAL, else every "
        "checkpoint --journal server in the project's .mcp.json.",
    )(function)


@main.command(cls=_JournalCommand)
@_sessionjournal_options
@click.pass_context
def session(ctx: click.Context, journals: tuple[str, ...], workflow_ids: tuple[str, ...]) -> None:
    """Serve the session tools over stdio: save_session_checkpoint and load_session_checkpoint (MCP).

    The project root is the projectRoot argument, else CHECKPOINT_PROJECT_ROOT, else CLAUDE_PROJECT_DIR, else the
    client's first file:// root, else the working directory. Register it with an MCP client, for example
    `claude mcp add --scope user checkpoint-session -- checkpoint session`.

    The project's journals (--journal, else CHECKPOINT_JOURNAL, else the project's .mcp.json) add to the brief
    the side effects in doubt and those done since the checkpoint.
    """
    from checkpoint_mcp.session.server import run

    try:
        run(_journal_specs(ctx))
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command(cls=_JournalCommand)
@click.option(
    "--project-root",
    type=click.Path(file_okay=False, resolve_path=True),
    help="The project. Default: CHECKPOINT_PROJECT_ROOT, else CLAUDE_PROJECT_DIR, else the working directory.",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(["brief", "full"]),
    default="brief",
    show_default=True,
    help="brief: the markdown resume brief; full: the complete checkpoint JSON plus drift.",
)
@click.option(
    "--hook",
    is_flag=True,
    help="Print session-start hook JSON carrying the brief (see --hook-format), and record the session start in the "
    "journals (its source read from the hook's JSON on stdin).",
)
@click.option(
    "--hook-format",
    type=click.Choice(["claude", "copilot", "cursor"]),
    default="claude",
    show_default=True,
    help="With --hook, the JSON the client reads: claude (Claude Code, Codex, Gemini CLI, Qwen Code: "
    "hookSpecificOutput.additionalContext), copilot (GitHub Copilot CLI: additionalContext), cursor (Cursor: "
    "additional_context).",
)
@click.option(
    "--session-start",
    "session_start",
    metavar="SOURCE",
    help="Record that the agent's client starts a session (startup, resume, clear, compact) in the journals, as "
    "--hook does: for clients that start sessions through a plugin rather than a hook.",
)
@_sessionjournal_options
@click.pass_context
def brief(
    ctx: click.Context,
    project_root: str | None,
    output: str,
    hook: bool,
    hook_format: str,
    session_start: str | None,
    journals: tuple[str, ...],
    workflow_ids: tuple[str, ...],
) -> None:
    """Print the resume brief of the project's checkpoint, for scripts and Claude Code SessionStart hooks.

    With the project's journals (--journal, else CHECKPOINT_JOURNAL, else its .mcp.json), the brief also names
    the side effects in doubt and those done since the checkpoint. Exits 0 with a short line when there is
    nothing to resume.
    """
    from checkpoint_mcp.session.service import brief_text

    session_id = None
    if hook and session_start is None:
        session_start, session_id = _hook_input()
    try:
        text = brief_text(
            project_root,
            output="full" if output == "full" else "brief",
            hook=hook,
            hook_format=hook_format,
            environ=os.environ,
            cwd=os.getcwd(),
            journal_specs=_journal_specs(ctx),
            session_start=session_start,
            session_id=session_id,
        )
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(text)
