"""The `checkpoint` command: a thin click adapter over the library.

Each command opens its resource, makes one library call, and turns a ``CheckpointError`` into a
``click.ClickException``. Command modules are imported inside the commands so that start-up stays fast
(`checkpoint brief` must not import the MCP SDK; the proxy never imports it).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from checkpoint_mcp import __version__
from checkpoint_mcp.errors import CheckpointError

LOG_LEVELS = ("debug", "info", "warning", "error")


def configure_logging(level: str) -> None:
    """Send log records to stderr only: stdout is the MCP wire in every command that speaks MCP."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("checkpoint: %(levelname)s: %(message)s"))
    root = logging.getLogger("checkpoint_mcp")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


class _ProxyGroup(click.Group):
    """A group whose bare invocation (no subcommand) runs the proxy."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("checkpoint", "--upstream-cmd CMD [--journal PATH] [OPTIONS]")
        formatter.write_usage("checkpoint", "COMMAND [ARGS]...", prefix="       ")


@click.group(cls=_ProxyGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--upstream-cmd",
    metavar="CMD",
    help="Shell command that starts the upstream MCP server (run by /bin/sh -c; inherits the environment).",
)
@click.option(
    "--journal",
    metavar="PATH",
    help="SQLite journal file. Enables resumability; without it the proxy is a pure pass-through.",
)
@click.option(
    "--workflow-id",
    metavar="ID",
    help="Workflow identifier. Default: the journal's absolute path.",
)
@click.option(
    "--on-divergence",
    type=click.Choice(["strict", "fork"]),
    default="strict",
    show_default=True,
    help="strict refuses a divergent call; fork is not yet implemented and also refuses.",
)
@click.option(
    "--trust-annotations",
    is_flag=True,
    help="Forward calls to tools the upstream marks readOnlyHint:true without journaling them.",
)
@click.option(
    "--redact-args-in-journal",
    is_flag=True,
    help="Store a stub instead of the call arguments; divergence is still detected by signature.",
)
@click.option("--name", default="checkpoint", show_default=True, help="Server name the client sees.")
@click.option("--version", "server_version", default="0.0.0", show_default=True, help="Server version the client sees.")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    help="Verbosity of the log on stderr.",
)
@click.version_option(__version__, "-V", "--checkpoint-version", prog_name="checkpoint")
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """Make MCP agents crash-resumable.

    Without a COMMAND, run the journaling proxy: speak MCP on stdio to the client, run the upstream server
    given by --upstream-cmd as a child over stdio, mirror every message byte for byte, and journal every
    tools/call so that a restarted agent never re-runs a side effect that already completed.
    """
    configure_logging(options["log_level"])
    if ctx.invoked_subcommand is not None:
        given = [k for k in ("upstream_cmd", "journal", "workflow_id") if options[k] is not None]
        if given:
            raise click.UsageError(
                f"--{given[0].replace('_', '-')} belongs to the proxy, not to `checkpoint {ctx.invoked_subcommand}`"
            )
        return
    if not options["upstream_cmd"]:
        raise click.UsageError("--upstream-cmd is required to run the proxy (see --help)")
    from checkpoint_mcp.proxy.config import ProxyConfig
    from checkpoint_mcp.proxy.runner import run_proxy

    config = ProxyConfig(
        upstream_cmd=options["upstream_cmd"],
        journal=options["journal"],
        workflow_id=options["workflow_id"],
        on_divergence=options["on_divergence"],
        trust_annotations=options["trust_annotations"],
        redact_args=options["redact_args_in_journal"],
        server_name=options["name"],
        server_version=options["server_version"],
    )
    try:
        code = run_proxy(config)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    ctx.exit(code)


@main.command()
@click.option("--workdir", type=click.Path(file_okay=False), help="Keep the demo's files here instead of a temp dir.")
def demo(workdir: str | None) -> None:
    """Run a scripted agent through the proxy, crash it, and show replay, divergence and in-doubt."""
    from checkpoint_mcp.demo.agent import run_demo

    try:
        run_demo(workdir)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
def session() -> None:
    """Serve the session tools over stdio: save_session_checkpoint and load_session_checkpoint (MCP).

    The project root is the projectRoot argument, else CHECKPOINT_PROJECT_ROOT, else CLAUDE_PROJECT_DIR, else the
    client's first file:// root, else the working directory. Register it with an MCP client, for example
    `claude mcp add --scope user checkpoint-session -- checkpoint session`.
    """
    from checkpoint_mcp.session.server import run

    try:
        run()
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
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
@click.option("--hook", is_flag=True, help="Print Claude Code SessionStart hook JSON carrying the brief.")
def brief(project_root: str | None, output: str, hook: bool) -> None:
    """Print the resume brief of the project's checkpoint, for scripts and Claude Code SessionStart hooks.

    Exits 0 with a short line when there is nothing to resume.
    """
    from checkpoint_mcp.session.service import brief_text

    try:
        text = brief_text(
            project_root, output="full" if output == "full" else "brief", hook=hook, environ=os.environ, cwd=os.getcwd()
        )
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(text)
