"""What `checkpoint init` proposes for one tool: its table's keys, the kind of protection, and why.

A reviewed profile of the server (``profiles``) decides for the tools it names, as long as a tool still carries
the hints the profile was reviewed with. Every other tool gets its table from what the server says of it:

- ``readOnlyHint: true`` → ``journal = false``: it only reads, a second read reads afresh;
- ``idempotentHint: true`` → ``idempotent = true``: the server promises a repeat changes nothing more;
- a name that says it runs something and a ``command``/``cmd``/``script`` argument (``beyond_the_machine``): a
  shell, guessed → ``repeat = "confirm"`` within ``24h``, ``within_session = "run"``, and the commands that act
  beyond the machine (pushes, publishes, deploys, network writes, messages, database writes) as sub-rules that
  refuse their repeat from a later session: a test run sent again from a new session asks once, a push is caught;
- ``openWorldHint: false`` → ``repeat = "allow"``, journaled: it acts on a closed, local world the agent sees and
  can change back (a repository, a memory, files), so checking out a branch again or creating again what it
  deleted runs;
- no hint at all and a name that says it reads (``read_names``) → ``journal = false``, marked as a guess;
- anything else, no hints at all included → ``repeat = "refuse"`` within ``24h`` and ``within_session = "run"``:
  the same call from a later session (a crash, a ``/clear``, a compaction in between) is refused, one the agent
  repeats within its own unbroken session runs.

A tool that may change something (destructive, or neither read-only nor idempotent) is offered
``approve = "operator"``, commented out. This module is pure: no file, no server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from checkpoint_mcp.init.beyond_the_machine import shell_argument
from checkpoint_mcp.init.profiles import HINTS, Profile, ReviewedTable
from checkpoint_mcp.init.read_names import read_word

WINDOW: Final = "24h"

PROTECTED_KEYS: Final = ('repeat = "refuse"', f'window = "{WINDOW}"', 'within_session = "run"')
"""The keys of a protected tool, and of ``[default]``: a repeat across a loss of memory is refused."""
SHELL_KEYS: Final = ('repeat = "confirm"', f'window = "{WINDOW}"', 'within_session = "run"')
"""The keys of a tool guessed to run shell commands: a command sent again from a later session is refused once and
runs when sent again (its sub-rules refuse the commands that act beyond the machine)."""


class Kind(StrEnum):
    """How a tool's repeats are treated, as `init`'s summary counts them."""

    READ = "read"  # not journaled (journal = false): a second read reads afresh
    GUESSED_READ = "guessed read"  # no hints; its name says it reads: not journaled, to review
    REPEATS_RUN = "repeats run"  # journaled, and a repeat runs (idempotent, a closed world, a profile's allow)
    PROTECTED = "protected"  # a repeat from a later session is refused within the window


@dataclass(frozen=True)
class Proposal:
    """The table `init` writes for one tool."""

    tool: str
    kind: Kind
    why: str
    """The comment above the table (one sentence or a few, no line breaks)."""
    keys: tuple[str, ...]
    """The table's lines, ``key = value`` in TOML."""
    offers_approve: bool
    """Write ``# approve = "operator"`` after the keys, commented out."""
    unhinted: bool = False
    """It carries no hint at all and was taken as destructive: one to review first."""
    profile: Profile | None = None
    """The reviewed profile the table comes from (None: from the tool's hints or name)."""
    caught_commands: tuple[str, ...] = ()
    """Where the tool's shell command is (JSON pointers): the commands that act beyond the machine are written as
    its sub-rules, refused from a later session."""
    guessed_shell: bool = False
    """Taken from its name and its ``command`` argument to run shell commands: one to review."""


def hints_of(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The four hints ``tool`` carries, as it gives them (a hint it leaves out is absent)."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, Mapping):
        return {}
    return {hint: annotations[hint] for hint in HINTS if hint in annotations}


def propose(name: str, tool: Mapping[str, Any], profile: Profile | None) -> Proposal:
    """The table for the tool ``name`` (``tool`` as its server lists it), from ``profile`` where that names it
    with the hints the tool still carries, else from its hints, its name and its arguments."""
    hints = hints_of(tool)
    reviewed = profile.tables.get(name) if profile is not None else None
    if profile is not None and reviewed is not None and reviewed.hints == hints:
        return _reviewed(name, profile, reviewed)
    shell = shell_argument(name, tool)
    if shell is not None and hints.get("readOnlyHint") is not True and hints.get("idempotentHint") is not True:
        return _shell(name, shell)  # whatever else it says: what a command does depends on the command
    return _from_hints(name, hints) if hints else _from_name(name)


def _from_hints(name: str, hints: Mapping[str, Any]) -> Proposal:
    """The table of a tool from the hints it carries."""
    changes = hints.get("readOnlyHint") is not True and (
        hints.get("destructiveHint") is True or hints.get("idempotentHint") is not True
    )
    if hints.get("readOnlyHint") is True:
        why = "readOnlyHint: it only reads, so it is not journaled."
        return Proposal(name, Kind.READ, why, ("journal = false",), False)
    if hints.get("idempotentHint") is True:
        why = "idempotentHint: the server promises a repeat changes nothing more."
        return Proposal(name, Kind.REPEATS_RUN, why, ("idempotent = true",), changes)
    if hints.get("openWorldHint") is False:
        why = (
            "openWorldHint: false: it acts on a closed, local world the agent sees and can change back, so its "
            "repeats run (journaled)."
        )
        return Proposal(name, Kind.REPEATS_RUN, why, ('repeat = "allow"',), changes)
    why = (
        "not read-only, not idempotent: the same call from a later session is refused within "
        f"{WINDOW}; within one session it runs."
    )
    return Proposal(name, Kind.PROTECTED, why, PROTECTED_KEYS, changes)


def _reviewed(name: str, profile: Profile, reviewed: ReviewedTable) -> Proposal:
    """The table a reviewed profile gives the tool."""
    if reviewed.settings.get("journal") is False:
        kind = Kind.READ
    elif reviewed.settings.get("idempotent") is True or reviewed.settings.get("repeat") == "allow":
        kind = Kind.REPEATS_RUN
    else:
        kind = Kind.PROTECTED
    why = f"Reviewed: {reviewed.why}"
    caught = reviewed.caught_commands
    return Proposal(name, kind, why, reviewed.keys(), reviewed.offers_approve, profile=profile, caught_commands=caught)


def _shell(name: str, argument: str) -> Proposal:
    """The table of a tool guessed to run shell commands (its name, and its ``argument``)."""
    why = (
        f"guessed from its name and its argument {argument[1:]!r} that it runs shell commands (review it): a command "
        "sent again from a later session is refused once, and runs if sent again within 10m (repeat = "
        '"confirm"); the commands below that act beyond this machine are refused from a later session within '
        f"{WINDOW}; within one session every repeat runs."
    )
    return Proposal(name, Kind.PROTECTED, why, SHELL_KEYS, True, caught_commands=(argument,), guessed_shell=True)


def _from_name(name: str) -> Proposal:
    """The table of a tool with no hints at all: a read if its name says so, else protected, to review."""
    word = read_word(name)
    if word is not None:
        why = (
            f"no hints; guessed from its name ({word!r}) that it only reads, so it is not journaled. Review: if it "
            'changes anything, make it repeat = "refuse", window = "24h", within_session = "run".'
        )
        return Proposal(name, Kind.GUESSED_READ, why, ("journal = false",), False)
    why = (
        "no hints: taken as destructive, not idempotent (review: does it only read?). The same call from a later "
        f"session is refused within {WINDOW}; within one session it runs."
    )
    return Proposal(name, Kind.PROTECTED, why, PROTECTED_KEYS, True, unhinted=True)


def counts(proposals: Sequence[Proposal]) -> dict[Kind, int]:
    """How many tools of each kind, every kind present (zero included)."""
    found = dict.fromkeys(Kind, 0)
    for proposal in proposals:
        found[proposal.kind] += 1
    return found
