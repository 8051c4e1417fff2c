"""The active policy `checkpoint init` writes: one file per wrapped server, from what the server says of its tools.

Layout: ``.checkpoint/policies/<server>.toml``, one per server, each given to that server's proxy with
``--policy``. One file per server because a policy's tables are keyed by tool name, and two servers may well
both have a ``search`` or a ``get``; and because a later `init` then never edits a file: a server added since
gets its own new file, and every file already there (as `init` wrote it, or as the user left it) is kept as it
is.

Each tool gets one table, chosen from its ``annotations`` (MCP's hints) and commented with why and with its
argument names (``inputSchema.properties``):

- ``readOnlyHint`` → ``journal = false``: reading twice reads afresh;
- ``idempotentHint`` → ``idempotent = true``: the server's own promise that a repeat changes nothing more, so a
  repeat runs and an in-doubt call is sent again as it is;
- anything else (the spec's defaults: destructive, not idempotent) → ``repeat = "refuse"`` within ``24h``.

A destructive tool (``destructiveHint: true``, or neither read-only nor idempotent) also gets ``approve =
"operator"`` as a comment: off by default, one uncommented line away from waiting for a person's approval.

A server that cannot be asked gets ``[default]`` alone. This module is pure: asking the servers is the caller's
(``cli`` does it with ``upstream``, which this room may not import), through a ``ToolLister``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.init.clients import HttpEntry, StdioEntry

POLICIES_FOLDER: Final = os.path.join(".checkpoint", "policies")
WINDOW: Final = "24h"
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


@dataclass(frozen=True)
class Server:
    """A server to ask for its tools, as its client would start or reach it (values still as written: a
    ``${VAR}`` is the asker's to expand)."""

    name: str
    shape: StdioEntry | HttpEntry
    env: Mapping[str, str]
    cwd: str


ToolLister = Callable[[Sequence[Server]], Mapping[str, "list[dict[str, Any]] | str"]]
"""Asks each server for ``tools/list``: its tools, or a sentence saying why it could not be asked."""


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


def has_no_hints(tool: Mapping[str, Any]) -> bool:
    """Whether ``tool`` carries none of MCP's four hints."""
    annotations = tool.get("annotations")
    return not isinstance(annotations, Mapping) or not any(hint in annotations for hint in _HINTS)


def suggest(server: str, tools: Sequence[Mapping[str, Any]]) -> str:
    """The policy file for ``server`` whose ``tools/list`` is ``tools``: the header, ``[default]`` for tools it
    adds later, then one commented table per tool."""
    parts = [_header(server, f"from its tools/list ({len(tools)} tools)"), _DEFAULT]
    for tool in tools:
        name = tool.get("name")
        if isinstance(name, str) and name:
            parts.append(_table(name, tool))
    return "\n".join(parts)


def unasked(server: str, why: str) -> str:
    """The policy file for a server that could not be asked: ``[default]`` alone, and how to write its tables."""
    return "\n".join([_header(server, f"without its tools: it could not be asked ({_oneline(why)})"), _DEFAULT])


def _header(server: str, how: str) -> str:
    return f"""\
# Tool policy for the MCP server {_string(server)}, written by `checkpoint init` {how}.
# Edit freely: a later `checkpoint init` never rewrites this file. The keys: docs/policies.md.
#
# Each tool has a table saying why: readOnlyHint -> journal = false (reading twice reads afresh);
# idempotentHint -> idempotent = true (the server's promise: a repeat runs, an in-doubt call is sent again);
# anything else -> a repeat within {WINDOW} is refused, so a resumed agent cannot send the same e-mail twice.
# A tool with no hints at all is taken as destructive: if it only reads, give it journal = false.
# To compare only some arguments when looking for a repeat: match = ["/to", "/subject"] (JSON pointers),
# or leave some out: ignore = ["/request_id"].
# To make each call of a destructive tool wait for a person's approval of its exact arguments, uncomment the
# line approve = "operator" in its table (checkpoint journal approvals lists the waiting calls; approve decides).
# To write the tables again from the server: checkpoint policy suggest --upstream-cmd ... --name NAME
"""


_APPROVE: Final = (
    '# approve = "operator"            # uncomment: each call waits for a person\'s approval of its exact arguments\n'
)


_DEFAULT: Final = f"""\
[default]                           # tools this file does not name (added by the server later)
repeat = "refuse"
window = "{WINDOW}"
"""


def _table(name: str, tool: Mapping[str, Any]) -> str:
    annotations = tool.get("annotations")
    hints: Mapping[str, Any] = annotations if isinstance(annotations, Mapping) else {}
    arguments = f" Arguments: {_arguments(tool)}."
    if any(c in name for c in "*?[]"):
        return f"# {name!r}: its name holds a glob character, so [default] applies to it.{arguments}\n"
    key = f"[tools.{name if _BARE_KEY.fullmatch(name) else _string(name)}]"
    if hints.get("readOnlyHint") is True:
        why, body = "readOnlyHint: it only reads, so it is not journaled.", "journal = false"
    elif hints.get("idempotentHint") is True:
        why = "idempotentHint: the server promises a repeat changes nothing more."
        body = "idempotent = true"
    else:
        if has_no_hints(tool):
            why = "no hints: taken as destructive, not idempotent (review: does it only read?)."
        else:
            why = "not read-only, not idempotent: a repeat is refused."
        body = f'repeat = "refuse"\nwindow = "{WINDOW}"'
    destructive = hints.get("readOnlyHint") is not True and (
        hints.get("destructiveHint") is True or hints.get("idempotentHint") is not True
    )
    return f"# {why}{arguments}\n{key}\n{body}\n" + (_APPROVE if destructive else "")


def _arguments(tool: Mapping[str, Any]) -> str:
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    names = [str(name) for name in properties] if isinstance(properties, Mapping) else []
    return ", ".join(_oneline(name) for name in names) or "none"


def _oneline(text: str) -> str:
    """A name as it may sit in a comment: no line break ends the comment early."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)


def _string(text: str) -> str:
    """A TOML basic string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'
