"""What the `checkpoint journal …` commands share, and `checkpoint journal verify` (the hash chain's check).

A thin click adapter like ``cli.main``: open the journal, make one library call, print. The audit key is read
from the environment variable ``--audit-key-env`` names, never from the command line (where `ps` shows it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import click

from checkpoint_mcp.config import audit_key
from checkpoint_mcp.errors import CheckpointError

if TYPE_CHECKING:
    from checkpoint_mcp.journal.audit import ChainReport
    from checkpoint_mcp.journal.base import Journal


def journal_option(function: Any) -> Any:
    """``--journal PATH_OR_URL``, required."""
    return click.option(
        "--journal",
        "location",
        required=True,
        metavar="PATH_OR_URL",
        help="The journal, as given to the proxy's --journal.",
    )(function)


def json_option(function: Any) -> Any:
    """``--json``."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")(function)


def audit_key_option(function: Any) -> Any:
    """``--audit-key-env VAR``: the key that authenticates the journal's hash chain (HMAC-SHA-256)."""
    return click.option(
        "--audit-key-env",
        "audit_key_env",
        metavar="VAR",
        help="Authenticate the journal's hash chain with the key held in environment variable VAR (HMAC-SHA-256): "
        "whoever can write the database but lacks the key cannot rebuild the chain unnoticed.",
    )(function)


def key_from(variable: str | None) -> bytes | None:
    """The audit key ``--audit-key-env`` names, as a usage error if the variable is unset or empty."""
    try:
        return audit_key(variable)
    except CheckpointError as exc:
        raise click.UsageError(str(exc)) from exc


@contextmanager
def opened(location: str, audit_key_env: str | None = None) -> Iterator[Journal]:
    """The existing journal at ``location`` (never created or converted); its errors become click's."""
    from checkpoint_mcp.journal import open_journal

    key = key_from(audit_key_env)
    try:
        journal = open_journal(location, create=False, audit_key=key)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        yield journal
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        journal.close()


def emit_json(value: Any) -> None:
    """Indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _render(reports: list[ChainReport]) -> str:
    lines = []
    for report in reports:
        start = {
            "genesis": "from its first link",
            "migration": "from the migration to schema 4 (rows written before it are vouched for by that marker)",
            "gc": "from a gc anchor (older links were collected)",
            "none": "with no links",
        }[report.start]
        status = "ok" if report.ok else "BROKEN"
        lines.append(f"{report.workflow}: {status}, {report.links} link(s) {start}, {report.rows} call row(s) checked")
        if report.keyed:
            authenticated = "not authenticated: give --audit-key-env" if report.unchecked else "authenticated"
            lines.append(f"  {report.keyed} keyed link(s), {authenticated}")
        if report.head:
            lines.append(f"  head {report.head}")
        lines.extend(f"  {b.message}" for b in report.breaks)
    return "\n".join(lines) if lines else "the journal has no workflows"


@click.command("verify")
@click.option("--journal", "location", metavar="PATH_OR_URL", help="The journal, as given to the proxy's --journal.")
@click.option("--export", "export_file", type=click.File("r"), help="Verify this `journal export` file instead.")
@json_option
@audit_key_option
@click.argument("workflow", required=False)
def journal_verify(
    location: str | None, export_file: IO[str] | None, as_json: bool, audit_key_env: str | None, workflow: str | None
) -> None:
    """Walk the hash chain of WORKFLOW (by default every workflow) and check the calls against it.

    Names the first broken link and what happened to it (edited, removed, inserted, reordered, or written
    without the audit key), then any call row changed by hand. Exits with status 1 on any break. With --export,
    checks a file written by `checkpoint journal export`, without the database.
    """
    from checkpoint_mcp.journal import operations

    if (location is None) == (export_file is None):
        raise click.UsageError("give exactly one of --journal and --export")
    key = key_from(audit_key_env)
    try:
        if export_file is not None:
            reports = operations.verify_export(export_file, key)
            if workflow is not None:
                reports = [r for r in reports if r.workflow == workflow]
        else:
            assert location is not None
            with opened(location) as journal:
                reports = operations.verify(journal, workflow, key)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json({"ok": all(r.ok for r in reports), "workflows": [r.as_json() for r in reports]})
    else:
        click.echo(_render(reports))
    if not all(r.ok for r in reports):
        sys.exit(1)
