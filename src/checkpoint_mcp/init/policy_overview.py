"""What `checkpoint init` says of the policies it wrote, in a screenful: one row a server, then what to review.

The files themselves (a commented table per tool, 20 to 30 lines for a browser server) are for reading at
leisure, or printed whole with ``--diff``; the terminal gets how many tools of each server read, repeat freely,
or are protected, where the decision came from (a reviewed profile, or the server's hints and the tools' names),
and the few tool names a person should look at: the tools that carry no hints and were taken as destructive, the
ones taken as reads from their names alone, and the ones taken as shells from their names and arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from checkpoint_mcp.init.policies import Written
from checkpoint_mcp.init.proposals import WINDOW, Kind, counts

_COLUMNS: Final = ("tools", "read", "guessed read", "repeats run", "protected")


def overview(written: Sequence[Written]) -> list[str]:
    """The table of the servers whose policies were written from their tools, and the lines to review."""
    if not written:
        return []
    width = max(len("server"), *(len(w.server) for w in written))
    lines = ["  " + "  ".join(["server".ljust(width), *_COLUMNS, "from"])]
    for w in written:
        found = counts(w.proposals)
        cells = [
            len(w.proposals) + len(w.to_default),
            found[Kind.READ],
            found[Kind.GUESSED_READ],
            found[Kind.REPEATS_RUN],
            found[Kind.PROTECTED] + len(w.to_default),
        ]
        numbers = [str(n).rjust(len(column)) for n, column in zip(cells, _COLUMNS, strict=True)]
        lines.append("  " + "  ".join([w.server.ljust(width), *numbers, _source(w)]))
    lines += [
        "  read: not journaled, a second read reads afresh; repeats run: journaled, and a repeat runs;",
        f"  protected: the same call from a later session is refused within {WINDOW}; within one session it runs",
    ]
    for w in written:
        unhinted = [p.tool for p in w.proposals if p.unhinted]
        if unhinted:
            lines.append(
                f"review first: {w.server}'s tools {', '.join(unhinted)} have no hints, so they are protected as "
                "destructive; a tool that only reads wants journal = false"
            )
        shells = [p for p in w.proposals if p.guessed_shell]
        if shells:
            arguments = ", ".join(f"{p.tool} ({p.caught_commands[0][1:]})" for p in shells)
            lines.append(
                f"review the guesses: {w.server}'s tools {arguments} were taken as running shell commands from their "
                "names and arguments: a command sent again from a later session asks to be confirmed (refused once, "
                "runs if sent again), and those that act beyond the machine (pushes, publishes, deploys, network "
                f"writes, messages, database writes) are refused within {WINDOW}"
            )
        guessed = [p.tool for p in w.proposals if p.kind is Kind.GUESSED_READ]
        if guessed:
            lines.append(
                f"review the guesses: {w.server}'s tools {', '.join(guessed)} have no hints and were taken as reads "
                'from their names (not journaled); one that changes anything wants repeat = "refuse"'
            )
        if w.drifted and w.profile is not None:
            lines.append(
                f"note: {w.server}'s tools {', '.join(w.drifted)} no longer carry the hints the profile of "
                f"{w.profile.title} {w.profile.reviewed} was reviewed with, so their tables come from their hints"
            )
    return lines


def _source(written: Written) -> str:
    """Where the tables came from."""
    if written.profile is not None:
        return f"reviewed profile {written.profile.title} {written.profile.reviewed}"
    if any(p.kind is Kind.GUESSED_READ or p.guessed_shell for p in written.proposals):
        return "hints, names"
    return "hints"
