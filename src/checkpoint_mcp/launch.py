"""The ``checkpoint`` console script and ``python -m checkpoint_mcp``: ``checkpoint brief`` takes a fast path.

``checkpoint brief`` runs as a Claude Code SessionStart hook at every session start. Importing click and the
command tree would cost it ~20 ms of a ~50 ms run, so it goes to ``checkpoint_mcp.session.brief_cli`` first,
which handles the plain forms itself and hands anything else back; and once its output is flushed, the process
ends without the interpreter's teardown of ~100 modules (~7 ms: nothing is left to run at exit). Every other
command is ``checkpoint_mcp.cli.main``, unchanged.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run the ``checkpoint`` command."""
    if sys.argv[1:2] == ["brief"]:
        from checkpoint_mcp.session.brief_cli import run

        status = run(sys.argv[2:])
        if status is not None:
            _exit(status)
    from checkpoint_mcp.cli import main as cli

    cli()


def _exit(status: int) -> None:
    """Exit with ``status`` once everything written is flushed; through ``sys.exit`` if a flush fails."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        sys.exit(status)
    os._exit(status)
