"""The active policy `checkpoint init` writes: one file per wrapped server, from what the server says of its tools.

Layout: ``.checkpoint/policies/<server>.toml``, one per server, each given to that server's proxy with
``--policy``. One file per server because a policy's tables are keyed by tool name, and two servers may well
both have a ``search`` or a ``get``; and because a later `init` then never edits a file: a server added since
gets its own new file, and every file already there (as `init` wrote it, or as the user left it) is kept as it
is.

Each tool gets one table, chosen by ``proposals`` (a reviewed profile of the server where one recognises it, else
the tool's ``annotations``, MCP's hints, else its name) and commented with why and with its argument names
(``inputSchema.properties``, for ``match`` and ``ignore``); ``[default]`` protects the tools the server adds
later. A tool that may change something is offered ``approve = "operator"`` as a comment: off by default, one
uncommented line away from waiting for a person's approval. A tool that runs shell commands (a reviewed profile's
``caught_commands``, or `init`'s guess) gets the families of commands that act beyond the machine as its sub-rules
(``[[tools.NAME.when]]``, ``beyond_the_machine``), refused from a later session.

A server that cannot be asked gets ``[default]`` alone. This module is pure: asking the servers is the caller's
(``cli`` does it with ``upstream``, which this room may not import), through a ``ToolLister``.
"""

from __future__ import annotations

import os
import re
import shlex
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from checkpoint_mcp.init import profiles
from checkpoint_mcp.init.beyond_the_machine import families
from checkpoint_mcp.init.clients import HttpEntry, StdioEntry
from checkpoint_mcp.init.proposals import PROTECTED_KEYS, WINDOW, Proposal, propose

POLICIES_FOLDER: Final = os.path.join(".checkpoint", "policies")
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_COMMENT_WIDTH: Final = 118


@dataclass(frozen=True)
class Server:
    """A server to ask for its tools, as its client would start or reach it (values still as written: a
    ``${VAR}`` is the asker's to expand)."""

    name: str
    shape: StdioEntry | HttpEntry
    env: Mapping[str, str]
    cwd: str


@dataclass(frozen=True)
class Listing:
    """What a server answered: its ``serverInfo`` (from ``initialize``) and its tools (``tools/list``)."""

    tools: Sequence[Mapping[str, Any]]
    server_info: Mapping[str, Any] = field(default_factory=dict)


ToolLister = Callable[[Sequence[Server]], Mapping[str, "Listing | str"]]
"""Asks each server for ``initialize`` and ``tools/list``: what it answered, or a sentence saying why it could not
be asked."""


@dataclass(frozen=True)
class Written:
    """A server's policy file as `init` writes it, and what it decided for each tool."""

    server: str
    text: str
    proposals: tuple[Proposal, ...]
    profile: profiles.Profile | None
    """The reviewed profile that recognised the server (None: none did)."""
    drifted: tuple[str, ...] = ()
    """Tools the profile names whose hints are no longer those it was reviewed with (their tables come from
    their hints)."""
    to_default: tuple[str, ...] = ()
    """Tools whose names hold a glob character: no table can name them, so ``[default]`` protects them."""


def policy_path(folder: str, server: str, taken: set[str]) -> str:
    """The absolute path of ``server``'s policy file in the policies ``folder`` (a name safe on every file
    system, made unique among ``taken``, which it joins)."""
    safe = _UNSAFE.sub("_", server).strip(".") or "server"
    candidate, n = safe, 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{safe}-{n}"
    taken.add(candidate.lower())
    return os.path.join(folder, candidate + ".toml")


def user_policies_folder(journal_folder: str) -> str:
    """Where the policies of a user file's servers go: beside their journals in the user's data folder, not in a
    project (such a server runs in every project, and the project `init` ran in may go away)."""
    return os.path.join(journal_folder, "policies")


def suggest_command(server: Server) -> str:
    """The `checkpoint policy suggest` command line that writes ``server``'s tables once it can be asked."""
    if isinstance(server.shape, HttpEntry):
        upstream = ["--upstream-url", server.shape.url]
        for header, value in server.shape.headers:
            upstream += ["--upstream-header", f"{header}: {value}"]
    else:
        upstream = ["--upstream-cmd", shlex.join([server.shape.command, *server.shape.args])]
    return shlex.join(["checkpoint", "policy", "suggest", *upstream, "--name", server.name])


def written(server: str, listing: Listing) -> Written:
    """The policy file for ``server``, which answered ``listing``: the header, ``[default]`` for tools it adds
    later, then one commented table per tool, from the reviewed profile that recognises it, its hints or its name.

    Raises:
        ProfileError: a profile shipped with the package cannot be read.
    """
    tools = [tool for tool in listing.tools if isinstance(tool.get("name"), str) and tool.get("name")]
    names = [str(tool["name"]) for tool in tools]
    profile = profiles.recognise(listing.server_info, names)
    how = f"from its tools/list ({len(listing.tools)} tools)"
    if profile is not None:
        how += (
            f" and the reviewed profile of {profile.title} {profile.reviewed}, whose tables say 'Reviewed:' (a "
            "tool it does not name, or whose hints changed since, gets its table from its hints)"
        )
    parts = [_header(server, how), _DEFAULT]
    proposals, drifted, to_default = [], [], []
    for name, tool in zip(names, tools, strict=True):
        if any(c in name for c in "*?[]"):
            glob = f"# {name!r}: its name holds a glob character, so [default] applies to it.{_arguments(tool)}\n"
            parts.append(glob)
            to_default.append(name)
            continue
        proposal = propose(name, tool, profile)
        if profile is not None and name in profile.tables and proposal.profile is None:
            drifted.append(name)
        proposals.append(proposal)
        parts.append(_table(proposal, tool))
    return Written(server, "\n".join(parts), tuple(proposals), profile, tuple(drifted), tuple(to_default))


def suggest(server: str, tools: Sequence[Mapping[str, Any]], server_info: Mapping[str, Any] | None = None) -> str:
    """The policy file for ``server`` whose ``tools/list`` is ``tools`` (and whose ``serverInfo`` is
    ``server_info``), as ``written`` makes it.

    Raises:
        ProfileError: a profile shipped with the package cannot be read.
    """
    return written(server, Listing(tools, server_info or {})).text


def unasked(server: str, why: str) -> str:
    """The policy file for a server that could not be asked: ``[default]`` alone, and how to write its tables."""
    return "\n".join([_header(server, f"without its tools: it could not be asked ({_oneline(why)})"), _DEFAULT])


def _header(server: str, how: str) -> str:
    first = _comment(f"Tool policy for the MCP server {_string(server)}, written by `checkpoint init` {how}.")
    return f"""\
{first}
# Edit freely: a later `checkpoint init` never rewrites this file. The keys: docs/policies.md.
#
# Each tool has a table saying why: readOnlyHint -> journal = false (reading twice reads afresh);
# idempotentHint -> idempotent = true (the server's promise: a repeat runs, an in-doubt call is sent again);
# openWorldHint = false -> repeat = "allow" (a closed, local world the agent sees: git, a memory, files);
# anything else -> the same call from a later session (after a crash, a /clear, a compaction) is refused within
# {WINDOW}, so a resumed agent cannot send the same e-mail twice, while within one unbroken session a repeat runs
# (within_session = "run"; "catch" refuses it there too). A reported failure (isError) is no reason to refuse.
# A tool with no hints at all whose name says it reads (get_, list_, search_...) is guessed to be a read; one whose
# name does not is taken as destructive: review both. A reviewed profile of a well-known server says why instead.
# To compare only some arguments when looking for a repeat: match = ["/to", "/subject"] (JSON pointers),
# or leave some out: ignore = ["/request_id"].
# To make each call of a tool wait for a person's approval of its exact arguments, uncomment the
# line approve = "operator" in its table (checkpoint journal approvals lists the waiting calls; approve decides).
# To write the tables again from the server: checkpoint policy suggest --upstream-cmd ... --name NAME
"""


_APPROVE: Final = (
    '# approve = "operator"            # uncomment: each call waits for a person\'s approval of its exact arguments\n'
)


_DEFAULT: Final = (
    "[default]                           # tools this file does not name (added by the server later)\n"
    + "".join(f"{line}\n" for line in PROTECTED_KEYS)
)


def _table(proposal: Proposal, tool: Mapping[str, Any]) -> str:
    name = proposal.tool
    key = f"tools.{name if _BARE_KEY.fullmatch(name) else _string(name)}"
    comment = _comment(f"{proposal.why}{_arguments(tool)}")
    body = "".join(f"{line}\n" for line in proposal.keys)
    text = f"{comment}\n[{key}]\n{body}" + (_APPROVE if proposal.offers_approve else "")
    return text + (_caught(key, proposal.caught_commands) if proposal.caught_commands else "")


def _caught(key: str, pointers: Sequence[str]) -> str:
    """The sub-rules that refuse, from a later session, the shell commands that act beyond the machine."""
    pointer = _string(pointers[0]) if len(pointers) == 1 else "[" + ", ".join(_string(p) for p in pointers) + "]"
    parts = [
        _comment(
            f"Commands that act beyond this machine (checkpoint's list, reviewed: init/beyond_the_machine.toml): "
            f"the same command from a later session is refused within {WINDOW}; within one session it runs. The "
            f"first sub-rule that matches decides; a command none matches gets the table above. To extend: add a "
            f"prefix to a list (prefixes are words a command starts with; each command of a line counts, && ; | "
            f"$( ) sudo env npx sh -c included), or a [[{key}.when]] table of your own (name, pointer, prefixes or "
            f"regex, repeat)."
        )
    ]
    for family in families():
        lines = [f"name = {_string(family.name)}", f"pointer = {pointer}"]
        if family.regex is not None:
            lines.append(f"regex = {_literal(family.regex)}")
        else:
            lines.append(_array("prefixes", family.prefixes))
        lines += PROTECTED_KEYS
        comment = _comment(f"{family.name}: {family.why}.")
        parts.append(f"{comment}\n[[{key}.when]]\n" + "".join(f"{line}\n" for line in lines))
    return "\n" + "\n".join(parts)


def _array(key: str, items: Sequence[str]) -> str:
    """``key = [...]``, its items wrapped to the comment width, one indented line a row."""
    rows: list[str] = []
    row = ""
    for item in (_string(text) + "," for text in items):
        if row and len(row) + 1 + len(item) > _COMMENT_WIDTH - 4:
            rows.append(row)
            row = ""
        row = f"{row} {item}" if row else item
    rows.append(row)
    return f"{key} = [\n" + "".join(f"    {r}\n" for r in rows) + "]"


def _literal(text: str) -> str:
    """A TOML literal string for a regular expression: its backslashes as they are."""
    if "'" not in text:
        return f"'{text}'"
    if "'''" not in text and not text.endswith("'"):
        return f"'''{text}'''"
    return _string(text)


def _comment(text: str) -> str:
    """``text`` as comment lines of at most ``_COMMENT_WIDTH`` characters (a long word stays whole)."""
    return textwrap.fill(
        _oneline(text),
        width=_COMMENT_WIDTH,
        initial_indent="# ",
        subsequent_indent="# ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _arguments(tool: Mapping[str, Any]) -> str:
    """`` Arguments: a, b.``: the tool's argument names, for ``match`` and ``ignore``."""
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    names = [str(name) for name in properties] if isinstance(properties, Mapping) else []
    return f" Arguments: {', '.join(_oneline(name) for name in names) or 'none'}."


def _oneline(text: str) -> str:
    """A name as it may sit in a comment: no line break ends the comment early."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)


def _string(text: str) -> str:
    """A TOML basic string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'
