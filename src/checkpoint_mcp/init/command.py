"""The `checkpoint init` command: a thin click adapter over ``plan`` and ``files``.

``cli`` registers it, and gives it the asker (``ASKER``) that lists a server's tools: that takes a transport,
which this room may not import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from checkpoint_mcp.errors import CheckpointError
from checkpoint_mcp.init.clients import CLAUDE_DESKTOP, CLIENTS, configured
from checkpoint_mcp.init.policies import ToolLister
from checkpoint_mcp.platforms.host import HOST

if TYPE_CHECKING:
    from checkpoint_mcp.init.wrap import Launcher

DEFAULT_LIST_TIMEOUT = 10.0  # seconds each server has to start and list its tools (all are asked at once)

ASKER: list[Callable[[float], ToolLister]] = []
"""Set by ``cli``: ``asker(timeout)`` is the ``ToolLister`` init asks the servers with (none: none is asked)."""


def _names(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())


@click.command("init")
@click.option(
    "--project",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    default=".",
    show_default=True,
    help="The project whose servers to wrap.",
)
@click.option(
    "--client",
    type=click.Choice(list(CLIENTS)),
    default=None,
    help="Whose configuration (default: claude-code, and init names every other client it finds configured): "
    "Claude Code (.mcp.json and .claude/settings.json), Cursor (.cursor/mcp.json, .cursor/hooks.json), VS Code "
    "(.vscode/mcp.json), Claude Desktop (claude_desktop_config.json), Gemini CLI (.gemini/settings.json), Codex CLI "
    "(.codex/config.toml and ~/.codex/config.toml), OpenCode (opencode.json and ~/.config/opencode/opencode.json), "
    "GitHub Copilot CLI (.github/mcp.json, .mcp.json and ~/.copilot/mcp-config.json), Cline "
    "(~/.cline/data/settings/cline_mcp_settings.json), Qwen Code (.qwen/settings.json, .mcp.json and "
    "~/.qwen/settings.json).",
)
@click.option(
    "--journal",
    "journal_location",
    metavar="PATH_OR_URL",
    help="The journal every wrapped server writes to (one workflow per server). Default: PROJECT/.checkpoint/"
    "journal.db.",
)
@click.option(
    "--policy",
    type=click.Path(exists=True, dir_okay=False, resolve_path=True),
    help="A tool policy file every wrapped server gets with --policy, instead of the ones init writes.",
)
@click.option(
    "--no-policy",
    is_flag=True,
    help="Write no policy and give no server --policy: repeats of a call then run again (not recommended).",
)
@click.option(
    "--list-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_LIST_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="How long each server may take to start and list its tools (all are asked at once).",
)
@click.option(
    "--scope",
    "scope",
    multiple=True,
    metavar="SCOPE",
    help="Claude Code, Gemini, Codex, OpenCode, Copilot and Qwen: the scopes whose servers to wrap, local, project "
    "or user (repeatable, or a,b). Default: all, each in its own file (Claude Code: .mcp.json; ~/.claude.json for "
    "local and user. The others: their project file and their user file, as --client says. Only Claude Code has a "
    "local scope).",
)
@click.option("--only", multiple=True, metavar="NAME", help="Wrap only these servers (repeatable, or a,b).")
@click.option("--skip", multiple=True, metavar="NAME", help="Leave these servers alone (repeatable, or a,b).")
@click.option("--dry-run", is_flag=True, help="Print the diffs and write nothing.")
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Print the diff of every file written, the policy files whole included (without it, a summary only).",
)
@click.option(
    "--undo",
    is_flag=True,
    help="Put back the files every `init` of this project changed as they were before the first, byte for byte.",
)
def init(
    project: str,
    client: str | None,
    journal_location: str | None,
    policy: str | None,
    no_policy: bool,
    list_timeout: float,
    scope: tuple[str, ...],
    only: tuple[str, ...],
    skip: tuple[str, ...],
    dry_run: bool,
    show_diff: bool,
    undo: bool,
) -> None:
    """Put Checkpoint in front of the MCP servers a project already has, for one client.

    Every server entry is rewritten to run this `checkpoint` (by absolute path) with the project's journal and
    a workflow named after the server, and its own active policy (--policy), written to .checkpoint/policies/
    from the tools the server lists; the session server is added and, for Claude Code and Codex, the SessionStart
    hook `checkpoint brief --hook`. Writes each file atomically, keeps the originals, and prints what it did: a
    row per server's policy (how many tools read, repeat freely, are protected) and the tools to review; --diff
    (and --dry-run) print the diff of every file too.
    """
    from checkpoint_mcp.init import files, outcome, pgpass, plan, scopes

    asked_client = client
    client = client or "claude-code"
    _check_scopes(client, _names(scope))
    if undo and (dry_run or show_diff):
        raise click.UsageError("--undo does not take --dry-run or --diff: it puts back exactly what every init changed")
    if policy is not None and no_policy:
        raise click.UsageError("give --policy FILE or --no-policy, not both")
    try:
        if undo:
            for restored in files.undo(project):
                kept = f" (the version changed since init kept as {restored.kept})" if restored.kept else ""
                click.echo(f"{restored.action} {restored.path}{kept}")
            return
        request = plan.Request(
            project=project,
            client=client,
            journal=journal_location,
            policy=policy,
            no_policy=no_policy,
            tools_of=ASKER[0](list_timeout) if ASKER else None,
            only=_names(only),
            skip=_names(skip),
            scopes=scopes.parse(_names(scope)),
            launcher=_launcher(client),
            environ=os.environ,
        )
        result = plan.plan(request)
        if show_diff or dry_run:
            for change in result.changes:
                click.echo(files.unified_diff(change.path, change.before, change.after), nl=False)
        if result.changes and not dry_run:
            files.apply(project, result.changes)
            scopes.make_journal_folders(result.wrapped)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    for line in outcome.summary(result, dry_run=dry_run):
        click.echo(line, err=True)
    for url in pgpass.unanswered((change.after for change in result.changes), os.environ):
        click.echo(pgpass.note(url, os.environ), err=True)
    if asked_client is None:
        for line in _found(project, client):
            click.echo(line, err=True)


def _launcher(client: str) -> Launcher:
    """How ``client`` starts this ``checkpoint`` (a macOS app that launchd starts also gets absolute commands)."""
    import shutil

    from checkpoint_mcp.init import wrap

    launcher = wrap.launcher(sys.argv[0], sys.executable, shutil.which)
    if client == CLAUDE_DESKTOP and HOST.platform == "darwin":
        return wrap.for_launchd(launcher, shutil.which)
    return launcher


def _check_scopes(client: str, scopes: tuple[str, ...]) -> None:
    """Refuse a --scope the client does not have."""
    scoped = [name for name, each in CLIENTS.items() if len(each.scopes()) > 1 or name == "claude-code"]
    if scopes and client not in scoped:
        raise click.UsageError(f"--scope is for --client {', '.join(scoped)} (the other clients have one file each)")
    if client == "gemini" and "local" in scopes:
        raise click.UsageError("Gemini CLI has two scopes, project and user (no local)")
    if client == "codex" and "local" in scopes:
        raise click.UsageError("Codex has no local scope: --scope project or user")
    if client != "claude-code" and "local" in scopes:
        raise click.UsageError(f"{CLIENTS[client].label} has no local scope: --scope project or user")


def _found(project: str, wrapped: str) -> list[str]:
    """Which clients have servers configured for the project (in it or in the home folder), and which one this
    run wrapped: said when no --client was given."""
    found = configured(project, os.environ)
    if not found:
        return ["clients found configured here: none"]
    lines = ["clients found configured here: " + ", ".join(f"{c.label} ({path})" for c, path in found)]
    others = [c for c, _ in found if c.name != wrapped]
    lines.append(f"this run wrapped {CLIENTS[wrapped].label}'s servers (the default without --client)")
    lines += [f"  to wrap {c.label}'s servers too: checkpoint init --client {c.name}" for c in others]
    return lines
