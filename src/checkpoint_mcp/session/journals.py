"""Which journals a project's side effects go to, and what the session learns from them.

The journals come from the first of these that names any:

1. ``--journal J`` (repeatable) given to ``checkpoint session`` or ``checkpoint brief``, each with the
   ``--workflow-id W`` that follows it, if any;
2. the ``CHECKPOINT_JOURNAL`` environment variable (one location; ``CHECKPOINT_WORKFLOW_ID`` names its workflow);
3. the project's ``.mcp.json``: every ``mcpServers`` entry that runs ``checkpoint`` (or a path ending in
   ``/checkpoint``, or ``python -m checkpoint_mcp``) with ``--journal`` (and ``--workflow-id``, and the
   ``--policy`` file, whose ``probe`` and ``idempotency`` tables tell which in-doubt calls settle themselves).
   ``${VAR}`` and ``${VAR:-default}`` are expanded as Claude Code does; relative paths are relative to the
   project root. With them, the same of the project's local-scope servers in Claude Code's ``$HOME/.claude.json``
   (``projects["<root>"].mcpServers``, where ``checkpoint init`` wraps the servers ``claude mcp add`` made), and
   of the project's Gemini CLI servers (``<root>/.gemini/settings.json``, whose SessionStart hook runs the brief),
   and of the ``[mcp_servers.NAME]`` tables of the project's ``.codex/config.toml`` (Codex CLI's, where
   ``checkpoint init --client codex`` wraps them): so the session server and the brief hook `init` gives Codex
   name no journal themselves, and stay right as servers are wrapped later.

A workflow without ``--workflow-id`` is the proxy's default, the journal's absolute path (a URL: without its
password). Reading goes through ``journal.digest`` only, read-only; a journal that cannot be read becomes a
warning, never a failed save or load.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final

from checkpoint_mcp.errors import JournalError
from checkpoint_mcp.session.model import JournalPosition

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from checkpoint_mcp.journal.approval_digest import OpenApprovals
    from checkpoint_mcp.journal.digest import Digest, JournalReader, Settled
    from checkpoint_mcp.session.policy_view import Settlers

JOURNAL_ENV: Final = "CHECKPOINT_JOURNAL"
WORKFLOW_ENV: Final = "CHECKPOINT_WORKFLOW_ID"
MCP_CONFIG: Final = ".mcp.json"
GEMINI_CONFIG: Final = os.path.join(".gemini", "settings.json")
CODEX_CONFIG: Final = os.path.join(".codex", "config.toml")
_VARIABLE: Final = r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}"


@dataclass(frozen=True)
class JournalSpec:
    """A journal as configured: its location (path or URL), workflow id and policy file, if they were given."""

    location: str
    workflow: str | None = None
    policy: str | None = None


@dataclass(frozen=True)
class Journaled:
    """One journaled workflow of the project: where to read it, how to name it, which workflow."""

    location: str
    """What to open: an absolute SQLite path, or the URL as configured (it may hold a password)."""
    shown: str
    """The location safe to print and to store: the path, or the URL without its password."""
    workflow: str
    policy: str | None = None
    """The absolute path of the policy file the proxy writing this workflow was given, if any."""


@dataclass(frozen=True)
class WorkflowDigest:
    """What one journaled workflow says at a load; ``digest`` is None when the journal could not be read."""

    journal: Journaled
    digest: Digest | None
    settles: Mapping[str, str] = field(default_factory=dict)
    """Tool of a call in doubt → how its policy settles it when it is sent again (``policy_view.Settlers.how``)."""
    approvals: OpenApprovals | None = None
    """The workflow's approval requests waiting, approved but not yet sent, or recently denied."""


def pair_options(args: Sequence[str]) -> list[JournalSpec]:
    """The ``--journal``/``--workflow-id`` pairs of a command line, each workflow id going with the journal
    before it (``--journal=J`` spellings too)."""
    specs: list[JournalSpec] = []
    items = list(args)
    i = 0
    while i < len(items):
        item = items[i]
        name, _, inline = item.partition("=")
        if name in ("--journal", "--workflow-id"):
            value = inline if "=" in item else (items[i + 1] if i + 1 < len(items) else None)
            i += 1 if "=" in item else 2
            if value is None:
                break
            if name == "--journal":
                specs.append(JournalSpec(value))
            elif specs and specs[-1].workflow is None:
                specs[-1] = JournalSpec(specs[-1].location, value)
            continue
        i += 1
    return specs


def _expand(text: str, environ: Mapping[str, str]) -> str:
    if "${" not in text:
        return text
    import re  # only for a .mcp.json that uses variables: a brief without journals never imports it

    return re.sub(_VARIABLE, lambda m: environ.get(m.group(1)) or (m.group(2) or ""), text)


def _runs_checkpoint(command: object, args: Sequence[str]) -> bool:
    if not isinstance(command, str):
        return False
    name = os.path.basename(command)
    if name == "checkpoint":
        return True
    return name.startswith("python") and list(args[:2]) == ["-m", "checkpoint_mcp"]


def from_mcp_json(root: str, environ: Mapping[str, str], name: str = MCP_CONFIG) -> tuple[list[JournalSpec], list[str]]:
    """The journals of the ``checkpoint`` servers in ``<root>/.mcp.json`` (or another file of ``mcpServers``
    under the project: ``name``), and warnings about the file."""
    path = os.path.join(root, name)
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return [], []
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [], [f"{path} could not be read to find the project's journals: {exc}."]
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        return [], []
    return _specs_of(servers, root, environ), []


def from_claude_json(root: str, environ: Mapping[str, str]) -> tuple[list[JournalSpec], list[str]]:
    """The journals of the project's local-scope ``checkpoint`` servers in ``$HOME/.claude.json`` (or
    ``$CLAUDE_CONFIG_DIR/.claude.json``; none without either variable), and warnings about the file."""
    folder = environ.get("CLAUDE_CONFIG_DIR") or environ.get("HOME")
    if not folder:
        return [], []
    path = os.path.join(folder, ".claude.json")
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return [], []
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [], [f"{path} could not be read to find the project's journals: {exc}."]
    projects = document.get("projects") if isinstance(document, dict) else None
    project = projects.get(root) if isinstance(projects, dict) else None
    servers = project.get("mcpServers") if isinstance(project, dict) else None
    return (_specs_of(servers, root, environ) if isinstance(servers, dict) else []), []


def from_codex_toml(root: str, environ: Mapping[str, str]) -> tuple[list[JournalSpec], list[str]]:
    """The journals of the ``checkpoint`` servers in Codex's ``<root>/.codex/config.toml``, and warnings."""
    import tomllib  # only for a project with Codex's file

    path = os.path.join(root, CODEX_CONFIG)
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        return [], []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [], [f"{path} could not be read to find the project's journals: {exc}."]
    servers = document.get("mcp_servers")
    return (_specs_of(servers, root, environ) if isinstance(servers, dict) else []), []


def _specs_of(servers: Mapping[str, Any], root: str, environ: Mapping[str, str]) -> list[JournalSpec]:
    specs: list[JournalSpec] = []
    for entry in servers.values():
        if not isinstance(entry, dict):
            continue
        raw = entry.get("args")
        args = [_expand(a, environ) for a in raw if isinstance(a, str)] if isinstance(raw, list) else []
        command = entry.get("command")
        if not _runs_checkpoint(_expand(command, environ) if isinstance(command, str) else None, args):
            continue
        policy = _policy_of(args)
        if policy is not None:
            policy = os.path.join(root, os.path.expanduser(policy))
        for spec in pair_options(args):
            location = spec.location
            if not _is_url(location):
                location = os.path.join(root, os.path.expanduser(location))
            specs.append(JournalSpec(location, spec.workflow, policy))
    return specs


def _policy_of(args: Sequence[str]) -> str | None:
    """The last ``--policy FILE`` (or ``--policy=FILE``) of a proxy's command line, as the proxy takes it."""
    found = None
    for index, item in enumerate(args):
        if item.startswith("--policy="):
            found = item.removeprefix("--policy=")
        elif item == "--policy" and index + 1 < len(args):
            found = args[index + 1]
    return found


def _is_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


@dataclass(frozen=True)
class Setup:
    """The project's journaled workflows, and what went wrong finding them."""

    journals: tuple[Journaled, ...] = ()
    warnings: tuple[str, ...] = ()


NONE: Final = Setup()


def mark_session_start(setup: Setup, source: str, session_id: str | None = None) -> None:
    """Record that the agent's client starts a session (``source``; ``session_id``: the client's own id of it) in
    each of the project's journals, under the client processes this hook runs under (``client_process``: a start
    marks only that client session's proxies); a journal that cannot take it now is skipped with a warning on stderr
    (the brief never fails for it)."""
    from checkpoint_mcp.client_process import ancestors_of_this_process
    from checkpoint_mcp.journal import session_starts

    clients = ancestors_of_this_process()
    detail: dict[str, object] = {"pid": os.getpid()}
    if session_id is not None:
        detail["session"] = session_id
    shown = {journaled.location: journaled.shown for journaled in setup.journals}
    for location, name in shown.items():
        why = session_starts.record(location, source, detail, clients)
        if why is not None:
            logger.warning("could not record the session start in %s: %s", name, why)


def configured(explicit: Sequence[JournalSpec], *, root: str, environ: Mapping[str, str], cwd: str) -> Setup:
    """The project's journaled workflows, from the first source that names any, and warnings.

    Relative paths given on the command line or in the environment are relative to ``cwd``.
    """
    warnings: list[str] = []
    specs = list(explicit)
    base = cwd
    if not specs and environ.get(JOURNAL_ENV):
        specs = [JournalSpec(environ[JOURNAL_ENV], environ.get(WORKFLOW_ENV) or None)]
    if not specs:
        specs, warnings = from_mcp_json(root, environ)
        local, local_warnings = from_claude_json(root, environ)
        in_gemini, gemini_warnings = from_mcp_json(root, environ, GEMINI_CONFIG)
        codex, codex_warnings = from_codex_toml(root, environ)
        specs = [*specs, *local, *in_gemini, *codex]
        warnings = [*warnings, *local_warnings, *gemini_warnings, *codex_warnings]
        base = root
    found: dict[tuple[str, str], Journaled] = {}
    for spec in specs:
        journaled = _resolved(spec, base)
        found.setdefault((journaled.shown, journaled.workflow), journaled)
    return Setup(tuple(found.values()), tuple(warnings))


def _resolved(spec: JournalSpec, base: str) -> Journaled:
    if _is_url(spec.location):
        from checkpoint_mcp.journal import without_password

        shown = without_password(spec.location)
        return Journaled(spec.location, shown, spec.workflow or shown, spec.policy)
    path = os.path.abspath(os.path.join(base, os.path.expanduser(spec.location)))
    return Journaled(path, path, spec.workflow or path, spec.policy)


def _readers(journals: Iterable[Journaled]) -> dict[str, JournalReader | str]:
    """One read-only reader per journal location, or the reason it could not be opened."""
    from checkpoint_mcp.journal.read_only import open_reader

    readers: dict[str, JournalReader | str] = {}
    for journal in journals:
        if journal.location in readers:
            continue
        try:
            readers[journal.location] = open_reader(journal.location)
        except JournalError as exc:
            readers[journal.location] = str(exc)
    return readers


def _close(readers: Mapping[str, JournalReader | str]) -> None:
    for reader in readers.values():
        if not isinstance(reader, str):
            reader.close()


def positions(journals: Sequence[Journaled], warnings: list[str]) -> tuple[JournalPosition, ...]:
    """Where each journaled workflow stands now, for a save; unreadable ones are warnings."""
    if not journals:
        return ()
    readers = _readers(journals)
    found: list[JournalPosition] = []
    try:
        for journal in journals:
            reader = readers[journal.location]
            try:
                if isinstance(reader, str):
                    raise JournalError(reader)
                mark = reader.mark(journal.workflow)
            except JournalError as exc:
                warnings.append(f"Journal {journal.shown} could not be read, so its position was not saved: {exc}")
                continue
            if mark is None:
                continue  # too many calls in flight to list: a load reads this workflow by time
            # A position is the mark plus where it was taken: the same fields, by name.
            found.append(JournalPosition(location=journal.shown, workflow=journal.workflow, **_marked(mark)))
    finally:
        _close(readers)
    return tuple(found)


def digests(
    journals: Sequence[Journaled], saved: Sequence[JournalPosition], saved_at: str | None, warnings: list[str]
) -> tuple[WorkflowDigest, ...]:
    """What each journaled workflow says since the save at ``saved_at`` (None: since it began); unreadable
    journals and policy files are warnings."""
    if not journals:
        return ()
    from checkpoint_mcp.journal.approval_digest import open_approvals
    from checkpoint_mcp.journal.digest import Mark

    readers = _readers(journals)
    marks = {(p.location, p.workflow): p for p in saved}
    found: list[WorkflowDigest] = []
    policies: dict[str, Settlers | str] = {}
    try:
        for journal in journals:
            reader = readers[journal.location]
            position = marks.get((journal.shown, journal.workflow))
            mark = None
            if position is not None:
                mark = Mark(**_marked(position))
            try:
                if isinstance(reader, str):
                    raise JournalError(reader)
                digest = reader.digest(journal.workflow, mark, saved_at)
                approvals = open_approvals(reader, digest.head)
            except JournalError as exc:
                warnings.append(f"Journal {journal.shown} could not be read, so its side effects are not shown: {exc}")
                found.append(WorkflowDigest(journal, None))
                continue
            settles = _settles(journal, digest, policies, warnings)
            found.append(WorkflowDigest(journal, digest, settles, approvals))
    finally:
        _close(readers)
    return tuple(found)


def _settles(
    journal: Journaled, digest: Digest, policies: dict[str, Settlers | str], warnings: list[str]
) -> dict[str, str]:
    """How the workflow's policy settles each tool that has a call in doubt (read once per policy file)."""
    if journal.policy is None or not digest.in_doubt:
        return {}
    from checkpoint_mcp.session import policy_view

    if journal.policy not in policies:
        policies[journal.policy] = policy_view.read(journal.policy)
        if isinstance(policies[journal.policy], str):
            warnings.append(
                f"The tool policy {policies[journal.policy]}, so calls in doubt are shown as needing an operator."
            )
    settlers = policies[journal.policy]
    if isinstance(settlers, str):
        return {}
    found = {call.tool: settlers.how(call.tool) for call in digest.in_doubt}
    return {tool: how for tool, how in found.items() if how is not None}


def as_data(found: Sequence[WorkflowDigest]) -> list[dict[str, Any]]:
    """The ``journals`` member of a load's ``structuredContent``: per workflow, the same facts as the brief."""
    from checkpoint_mcp.journal.report import operator_commands

    out: list[dict[str, Any]] = []
    for item in found:
        journal, digest = item.journal, item.digest
        entry: dict[str, Any] = {"journal": journal.shown, "workflow": journal.workflow, "readable": digest is not None}
        if digest is not None:
            entry |= {
                "head": digest.head,
                "since": "sequence" if digest.exact else "time",
                "inDoubt": [
                    _call(c)
                    | {
                        "resolve": operator_commands(journal.shown, c.workflow, c.seq),
                        "settlesWhenSentAgain": item.settles.get(c.tool),
                    }
                    for c in digest.in_doubt
                ],
                "inFlight": [_call(c) for c in digest.in_flight],
                "completedSince": {
                    "total": digest.done_total,
                    "byTool": dict(sorted(digest.done_by_tool.items())),
                    "calls": [_call(c) for c in digest.done],
                },
                "before": digest.before,
                "liveOwner": digest.owner,
                "settledAutomatically": [
                    {
                        "workflow": s.workflow,
                        "seq": s.seq,
                        "tool": s.tool,
                        "action": s.action,
                        "by": s.by,
                        "at": s.at,
                        "how": settled_how(s),
                    }
                    for s in digest.settled
                ],
                "repeatsCaught": [
                    {"workflow": r.workflow, "seq": r.seq, "tool": r.tool, "action": r.action, "at": r.at}
                    for r in digest.repeats
                ],
                "approvals": _approvals(journal, item.approvals),
            }
        out.append(entry)
    return out


def _approvals(journal: Journaled, found: OpenApprovals | None) -> list[dict[str, Any]]:
    """The ``approvals`` of a workflow's entry: each request waiting, approved but unused, or recently denied."""
    from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS
    from checkpoint_mcp.journal.report import approval_commands

    if not found:
        return []
    kinds = (("waiting", found.waiting), ("approved", found.approved), ("denied", found.denied))
    return [
        {
            "id": request.id,
            "status": status,
            "tool": request.tool,
            "arguments": None if request.arguments == REDACTED_ARGUMENTS else request.arguments,
            "redacted": request.arguments == REDACTED_ARGUMENTS,
            "requestedAt": request.requested_at,
            "decidedBy": request.decided_by,
            "reason": request.reason,
            "expiresAt": request.expires_at,
            **({"commands": approval_commands(journal.shown, request.id)} if status == "waiting" else {}),
        }
        for status, requests in kinds
        for request in requests
    ]


def _call(call: Any) -> dict[str, Any]:
    return {
        "workflow": call.workflow,
        "seq": call.seq,
        "tool": call.tool,
        "arguments": call.arguments,
        "redacted": call.arguments is None,
        "state": call.state.value,
        "startedAt": call.started_at,
        "finishedAt": call.finished_at,
        "rule": call.rule,
    }


def _marked(source: Any) -> dict[str, Any]:
    """The fields of a ``Mark`` taken by name from ``source`` (a mark, or a saved position, which has them all)."""
    from checkpoint_mcp.journal.digest import Mark

    return {f.name: getattr(source, f.name) for f in fields(Mark)}


def settled_how(settled: Settled) -> str:
    """How a tool policy settled an in-doubt call, in words for a resumed agent."""
    if settled.by.startswith("probe "):
        probe = settled.by.removeprefix("probe ")
        if settled.action == "completed":
            return (
                f"it had run (the read-only tool {probe} showed it): recorded as completed and not run again; "
                "its own result was never received"
            )
        return f"it had not run (the read-only tool {probe} showed it): released, and run when called again"
    return "sent again under its idempotency key, so the upstream runs it at most once"
