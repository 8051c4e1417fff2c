"""The durability trade the two pumps' commands share (`checkpoint` and `checkpoint serve`): ``--relaxed-completions``.

``journal_options`` adds ``--relaxed-completions`` to a click command; ``relaxed_choice`` checks it against the
command's ``--journal`` (SQLite only: a PostgreSQL commit is always synced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

RELAXED_HELP = (
    "SQLite: commit a call's outcome without syncing it to disk (PENDING rows stay synced before every call). "
    "An outcome then survives a crash of this process but not a power loss, which leaves the call in doubt, "
    "never re-run."
)


def journal_options(command: F) -> F:
    """Add ``--relaxed-completions`` to ``command``."""
    return click.option("--relaxed-completions", is_flag=True, help=RELAXED_HELP)(command)


def relaxed_choice(options: dict[str, Any]) -> bool:
    """Whether outcomes are committed without a sync.

    Raises:
        click.UsageError: ``--relaxed-completions`` without an SQLite ``--journal``.
    """
    from checkpoint_mcp.journal import is_postgres_url  # not at import: `checkpoint brief` starts without it

    relaxed = bool(options["relaxed_completions"])
    if relaxed and (options["journal"] is None or is_postgres_url(options["journal"])):
        raise click.UsageError("--relaxed-completions needs an SQLite --journal (PostgreSQL commits are always synced)")
    return relaxed
