"""The `checkpoint init` command: a thin click adapter over ``plan`` and ``files`` (``cli`` registers it)."""

from __future__ import annotations

import os
import sys

import click

from checkpoint_mcp.errors import CheckpointError


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
    type=click.Choice(["claude-code", "cursor", "vscode", "claude-desktop"]),
    default="claude-code",
    show_default=True,
    help="Whose configuration: Claude Code (.mcp.json and .claude/settings.json), Cursor (.cursor/mcp.json), "
    "VS Code (.vscode/mcp.json), Claude Desktop (claude_desktop_config.json).",
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
    help="A tool policy file every wrapped server gets with --policy. Without it a commented starter is written "
    "to PROJECT/.checkpoint/policy.toml and not used.",
)
@click.option(
    "--scope",
    "scope",
    multiple=True,
    metavar="SCOPE",
    help="Claude Code only: the scopes whose servers to wrap, local, project or user (repeatable, or a,b). Default: "
    "all three, each in its own file (.mcp.json; ~/.claude.json for local and user).",
)
@click.option("--only", multiple=True, metavar="NAME", help="Wrap only these servers (repeatable, or a,b).")
@click.option("--skip", multiple=True, metavar="NAME", help="Leave these servers alone (repeatable, or a,b).")
@click.option("--dry-run", is_flag=True, help="Print the diffs and write nothing.")
@click.option(
    "--undo",
    is_flag=True,
    help="Put back the files every `init` of this project changed as they were before the first, byte for byte.",
)
def init(
    project: str,
    client: str,
    journal_location: str | None,
    policy: str | None,
    scope: tuple[str, ...],
    only: tuple[str, ...],
    skip: tuple[str, ...],
    dry_run: bool,
    undo: bool,
) -> None:
    """Put Checkpoint in front of the MCP servers a project already has, for one client.

    Every server entry is rewritten to run this `checkpoint` (by absolute path) with the project's journal and
    a workflow named after the server; the session server is added and, for Claude Code, the SessionStart hook
    `checkpoint brief --hook`. Prints a diff of each file, writes each atomically and keeps the originals.
    """
    import shutil

    from checkpoint_mcp.init import files, plan, scopes, wrap

    if scope and client != "claude-code":
        raise click.UsageError("--scope is for --client claude-code (the other clients have one file each)")
    if undo and dry_run:
        raise click.UsageError("--undo does not take --dry-run: it puts back exactly what every init changed")
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
            only=_names(only),
            skip=_names(skip),
            scopes=scopes.parse(_names(scope)),
            launcher=wrap.launcher(sys.argv[0], sys.executable, shutil.which),
            environ=os.environ,
        )
        result = plan.plan(request)
        for change in result.changes:
            click.echo(files.unified_diff(change.path, change.before, change.after), nl=False)
        if result.changes and not dry_run:
            files.apply(project, result.changes)
            scopes.make_journal_folders(result.scoped)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    for line in plan.summary(result, dry_run=dry_run):
        click.echo(line, err=True)
