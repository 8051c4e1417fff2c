"""``checkpoint session``: the MCP server with ``save_session_checkpoint`` and ``load_session_checkpoint``.

Built on the official SDK's ``MCPServer`` over stdio, so both protocol eras are served: the ``initialize``
handshake (2024-11-05 … 2025-11-25) and the stateless 2026-07-28 ``server/discover``. The client's roots are
asked for through the SDK's ``ListRoots`` resolver, which sends ``roots/list`` mid-call in the handshake era
and rides ``input_required`` in the 2026 era; it is asked only when no argument or environment variable
already names the root, and only of a client that declares the roots capability.

Tool calls run one at a time (an ``anyio.Lock`` around a worker thread), so concurrent ``merge`` saves never
lose each other's updates. stdout is the wire; logs go to stderr.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, ListRootsResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from checkpoint_mcp import __version__
from checkpoint_mcp.errors import CheckpointError
from checkpoint_mcp.platforms import signals
from checkpoint_mcp.session import journals, model, service, surrogates
from checkpoint_mcp.session.journals import JournalSpec, Setup
from checkpoint_mcp.session.merge import CommandInput, FileNote, SaveRequest
from checkpoint_mcp.session.model import Task, TaskStatus
from checkpoint_mcp.session.render import drift_document
from checkpoint_mcp.session.root import CHECKPOINT_ENV, CLAUDE_ENV, ProjectRoot, resolve_root

SERVER_NAME: Final = "checkpoint-session"
SAVE_GRACE_SECONDS: Final = 3.0  # on SIGTERM/SIGINT: how long a save under way may take to finish
T = TypeVar("T")

INSTRUCTIONS: Final = """\
This server keeps the session's working state in <project>/.claude-checkpoint, so that work survives a crash, \
/clear, or a full context window without rebuilding context from scratch.

Load: at the start of a session, and whenever the user says "resume", "continue" or "where were we", call \
load_session_checkpoint once, before exploring the code. Trust the brief. Re-read only the files it flags \
under "Changed after the checkpoint"; everything else is as it was. found: false means no checkpoint was \
saved: the text still says what the project's journals recorded, if anything. Under "Side effects (journal)", \
calls "In doubt" may or may not have happened: never call them again before they are resolved, unless they are \
listed as settled by the tool policy when sent again; calls listed as done already happened: do not redo them.

Save: call save_session_checkpoint
- after a milestone: a task finished, tests green, a decision taken, a dead end found;
- before a risky operation: a migration, a large refactor, a rebase or reset, deleting files;
- when the conversation is getting long, and before /clear;
- whenever the user asks for a checkpoint.
Use mode "merge" for updates during a session (tasks are matched by description; decisions and commands are \
appended) and "replace" to start the record over. Write the goal, where things stand, the next steps in order, \
and the decisions and failed approaches the next session must not repeat. The server adds the git branch, HEAD \
and every uncommitted file with its content hash by itself; list files only to attach a note or to include \
committed ones. Never put secrets in a checkpoint (secret-looking values are redacted anyway).\
"""

logger = logging.getLogger(__name__)

ReadableText = Annotated[str, Field(min_length=1, max_length=model.ITEM_TEXT_MAX)]
Note = Annotated[str | None, Field(max_length=model.ITEM_TEXT_MAX, description="Optional note")]
ProjectRootArgument = Annotated[
    str | None,
    Field(
        description="Absolute path of the project. Overrides CHECKPOINT_PROJECT_ROOT, CLAUDE_PROJECT_DIR, "
        "the client's roots and the server's working directory."
    ),
]


class TaskArgument(BaseModel):
    """One task of the session."""

    description: Annotated[str, Field(min_length=1, max_length=model.ITEM_TEXT_MAX, description="What the task is")]
    status: Annotated[TaskStatus, Field(description="pending · in_progress · done · blocked")]


class FileArgument(BaseModel):
    """A file to annotate, or a committed file to include."""

    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=model.PATH_MAX,
            description="Relative to the project root; an absolute path inside the project is stored relative",
        ),
    ]
    note: Note = None


class CommandArgument(BaseModel):
    """A significant command and how it ended."""

    command: Annotated[str, Field(min_length=1, max_length=model.COMMAND_MAX, description="The command line")]
    exitCode: Annotated[int | None, Field(description="Its exit code, when known")] = None
    note: Note = None


class SaveCounts(BaseModel):
    """How much the saved checkpoint holds, and how many values this save redacted."""

    tasks: int
    modifiedFiles: int
    recentCommands: int
    redactions: int


class SaveResult(BaseModel):
    """``structuredContent`` of ``save_session_checkpoint``."""

    path: str
    bytes: int
    mode: model.Mode
    counts: SaveCounts
    warnings: list[str]


class DriftResult(BaseModel):
    """What changed since the checkpoint; ``commitsSince`` is null when the saved commit is unreachable."""

    branchChanged: bool
    currentBranch: str | None
    commitsSince: int | None
    changedSince: list[str]


class LoadResult(BaseModel):
    """``structuredContent`` of ``load_session_checkpoint``."""

    found: bool
    path: str
    fromBackup: bool
    updatedAt: str | None
    drift: DriftResult | None
    warnings: list[str]
    journals: Annotated[
        list[dict[str, Any]],
        Field(
            description="Per journaled workflow: the calls in doubt (with their resolve commands), in flight, "
            "completed since the checkpoint, and counted before it (see docs/session.md)"
        ),
    ] = []


async def _client_roots(ctx: Context[Any, Any], projectRoot: str | None) -> ListRoots | None:
    """Ask for the client's roots only when they would decide the project root, and only if it has roots."""
    if projectRoot or os.environ.get(CHECKPOINT_ENV) or os.environ.get(CLAUDE_ENV):
        return None
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    return ListRoots()


ClientRoots = Annotated[ListRootsResult | None, Resolve(_client_roots)]


def _root(argument: str | None, roots: ListRootsResult | None) -> ProjectRoot:
    uris = [str(root.uri) for root in roots.roots] if roots is not None else []
    return resolve_root(argument, environ=os.environ, client_roots=uris, cwd=os.getcwd())


def _refuse_damaged(ctx: Context[Any, Any]) -> None:
    """Refuse a request whose text held lone surrogates (see ``surrogates``): nothing is read or written.

    Raises:
        ToolError: naming the fields.
    """
    problem = surrogates.refusal(ctx.request_id)
    if problem is not None:
        raise ToolError(problem)


def _result(text: str, structured: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured.model_dump(mode="json")
    )


def build_server(journal_specs: tuple[JournalSpec, ...] = ()) -> MCPServer[Any]:
    """The session server, its two tools registered with readable input schemas.

    ``journal_specs`` are the ``--journal`` options; without any, each call finds the project's journals in
    ``CHECKPOINT_JOURNAL`` or the project's ``.mcp.json``.
    """
    serial = anyio.Lock()

    def setup(root: ProjectRoot) -> Setup:
        return journals.configured(journal_specs, root=root.path, environ=os.environ, cwd=os.getcwd())

    async def save_session_checkpoint(
        *,
        ctx: Context[Any, Any],
        goal: Annotated[
            str, Field(min_length=1, max_length=model.GOAL_MAX, description="Primary objective of the session")
        ],
        client_roots: ClientRoots,
        tasks: Annotated[
            list[TaskArgument] | None,
            Field(max_length=model.TASKS_MAX, description="The session's tasks and their status"),
        ] = None,
        summary: Annotated[
            str | None,
            Field(
                max_length=model.SUMMARY_MAX,
                description="Where things stand: what works, what's broken, what you were in the middle of",
            ),
        ] = None,
        nextSteps: Annotated[
            list[ReadableText] | None,
            Field(max_length=model.NEXT_STEPS_MAX, description="Ordered next actions for whoever resumes"),
        ] = None,
        decisions: Annotated[
            list[ReadableText] | None,
            Field(max_length=model.DECISIONS_MAX, description="Key decisions, constraints, dead ends to avoid"),
        ] = None,
        modifiedFiles: Annotated[
            list[FileArgument] | None,
            Field(
                max_length=model.MODIFIED_FILES_MAX,
                description="Files to annotate, or committed files to include. Uncommitted git changes are "
                "detected automatically. Absolute paths inside the project are stored as relative.",
            ),
        ] = None,
        recentCommands: Annotated[
            list[CommandArgument] | None,
            Field(
                max_length=model.RECENT_COMMANDS_MAX,
                description="Significant commands, oldest first. Secrets are redacted.",
            ),
        ] = None,
        mode: Annotated[
            model.Mode,
            Field(
                description='"replace" (default) writes a fresh checkpoint; "merge" updates tasks by description, '
                "appends decisions and commands, and keeps what is not provided"
            ),
        ] = "replace",
        projectRoot: ProjectRootArgument = None,
    ) -> Annotated[CallToolResult, SaveResult]:
        """The save tool: validate, then run the save in a worker thread, one tool call at a time."""
        request = SaveRequest(
            goal=goal,
            mode=mode,
            tasks=None if tasks is None else tuple(Task(t.description, t.status) for t in tasks),
            summary=summary,
            next_steps=None if nextSteps is None else tuple(nextSteps),
            decisions=None if decisions is None else tuple(decisions),
            modified_files=None if modifiedFiles is None else tuple(FileNote(f.path, f.note) for f in modifiedFiles),
            recent_commands=None
            if recentCommands is None
            else tuple(CommandInput(c.command, c.exitCode, c.note) for c in recentCommands),
        )
        _refuse_damaged(ctx)
        try:
            root = _root(projectRoot, client_roots)
            async with serial:
                save = functools.partial(_saving, service.save, request, root, setup=setup(root))
                outcome = await anyio.to_thread.run_sync(save)
        except CheckpointError as exc:
            raise ToolError(str(exc)) from exc
        logger.info("saved %s (%d bytes, %s)", outcome.path, outcome.size, mode)
        checkpoint = outcome.checkpoint
        counts = SaveCounts(
            tasks=len(checkpoint.tasks),
            modifiedFiles=len(checkpoint.modified_files),
            recentCommands=len(checkpoint.recent_commands),
            redactions=outcome.redactions,
        )
        return _result(
            outcome.text,
            SaveResult(
                path=outcome.path, bytes=outcome.size, mode=mode, counts=counts, warnings=list(outcome.warnings)
            ),
        )

    async def load_session_checkpoint(
        *,
        ctx: Context[Any, Any],
        client_roots: ClientRoots,
        format: Annotated[
            Literal["brief", "full"],
            Field(
                description='"brief" (default): a compact markdown resume brief. '
                '"full": the complete checkpoint JSON plus drift.'
            ),
        ] = "brief",
        projectRoot: ProjectRootArgument = None,
    ) -> Annotated[CallToolResult, LoadResult]:
        """The load tool: read, check drift and render in a worker thread, one tool call at a time."""
        _refuse_damaged(ctx)
        try:
            root = _root(projectRoot, client_roots)
            async with serial:
                load = functools.partial(service.load, root, output=format, setup=setup(root))
                outcome = await anyio.to_thread.run_sync(load)
        except CheckpointError as exc:
            raise ToolError(str(exc)) from exc
        drift = drift_document(outcome.drift)
        return _result(
            outcome.text,
            LoadResult(
                found=outcome.found,
                path=outcome.path,
                fromBackup=outcome.from_backup,
                updatedAt=outcome.checkpoint.updated_at if outcome.checkpoint else None,
                drift=DriftResult.model_validate(drift) if drift is not None else None,
                warnings=list(outcome.warnings),
                journals=journals.as_data(outcome.journals),
            ),
        )

    tools = [
        _tool(
            save_session_checkpoint,
            title="Save session checkpoint",
            description="Save the session's working state to <projectRoot>/.claude-checkpoint so that a later "
            "session can resume after a crash, /clear or a full context window. The server adds the git branch, "
            "HEAD and every uncommitted file with its content hash, and redacts secrets.",
            annotations=ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
            ),
        ),
        _tool(
            load_session_checkpoint,
            title="Load session checkpoint",
            description="Read-only. Load the session checkpoint as a compact resume brief: goal, tasks, where "
            "things stand, next steps, decisions, files, commands, which files changed since it was saved, and "
            "what the project's journals say: side effects in doubt and those already done since. "
            "Call it at the start of a session.",
            annotations=ToolAnnotations(
                read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        ),
    ]
    return MCPServer(
        SERVER_NAME,
        title="Checkpoint session state",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=tools,
        log_level="WARNING",
    )


def _tool(fn: Any, *, title: str, description: str, annotations: ToolAnnotations) -> Tool:
    tool = Tool.from_function(fn, title=title, description=description, annotations=annotations)
    # Only the advertised schema changes; arguments are still validated by the model built from the signature.
    tool.parameters = readable_schema(tool.parameters)
    return tool


def readable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The same schema with ``$defs`` inlined, generated titles dropped, and ``X | None = None`` shown as ``X``."""
    definitions: dict[str, Any] = schema.get("$defs", {})

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = definitions[node["$ref"].rsplit("/", 1)[-1]]
            return clean({**target, **{k: v for k, v in node.items() if k != "$ref"}})
        options = node.get("anyOf")
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            kept = next(option for option in options if option != {"type": "null"})
            rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
            node = {**kept, **rest}
        return {k: clean(v) for k, v in node.items() if k not in ("title", "$defs")}

    result: dict[str, Any] = clean(schema)
    return result


_writing = threading.Lock()  # held while a save writes: a signal waits for it (``run``)


def _saving(save: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    with _writing:
        return save(*args, **kwargs)


def _let_the_save_finish() -> None:
    """Wait (``SAVE_GRACE_SECONDS`` at most) for a save under way: what it writes is crash-safe either way, but
    finished it is also answered for."""
    if _writing.acquire(timeout=SAVE_GRACE_SECONDS):
        _writing.release()


def run(journal_specs: tuple[JournalSpec, ...] = ()) -> None:
    """Serve the session tools over stdio until the client closes the connection, or until SIGTERM or SIGINT (then
    the exit code is 128 + the signal, as the proxy's, once a save under way is done: the SDK's reader thread may
    be blocked on stdin, and must not hold the exit up)."""
    surrogates.guard_stdin()
    signals.exit_on_shutdown(_let_the_save_finish)
    build_server(journal_specs).run("stdio")
