"""Every error Checkpoint raises on purpose: one tree of plain exceptions.

The hierarchy::

    CheckpointError                     base of everything below
    ├── UsageError                      a flag or argument that cannot work (bad URL, bad value)
    ├── JournalError                    the journal store itself
    │   ├── JournalUnavailable          cannot be opened, read or written (locked, disk, permissions)
    │   │   └── JournalLost             gone for good (unreachable after retries, or ownership taken): fatal
    │   ├── JournalCorrupt              the file is not a Checkpoint journal, or is damaged
    │   ├── JournalVersionError         written by a newer Checkpoint; refused, never modified
    │   ├── WorkflowOwned               another live proxy owns the workflow
    │   │   └── WorkflowShared          other live proxies share it, so none can own it alone
    │   └── WorkflowOfAnother           the journal records the workflow as another principal's (serve)
    ├── UpstreamError                   the upstream MCP server could not be started or died
    ├── InvalidToken                    a bearer token `checkpoint serve` cannot accept (HTTP 401)
    ├── KeySetUnavailable               the identity provider's keys cannot be had (HTTP 503)
    ├── SessionError                    the session server (`checkpoint session`, `checkpoint brief`)
    │   ├── ProjectRootError            the project root is not an absolute, existing directory
    │   ├── PathOutsideProject          a file path escapes the project root
    │   ├── CheckpointFileError         a checkpoint file that cannot be used (corrupt, unknown version)
    │   │   └── CheckpointVersionError  written by a newer Checkpoint; refused, never modified
    │   └── GitError                    git could not be run, failed unexpectedly, or timed out
    ├── InitError                       `checkpoint init` cannot do what it was asked; nothing was written
    │   ├── ClientConfigError           a client's configuration file (or one entry of it) it cannot read
    │   └── ProfileError                a reviewed profile shipped with the package that cannot be used
    └── CallRefused                     one tools/call refused; a JSON-RPC error on the wire (``refusals.py``)

Foreign exceptions (sqlite3, psycopg, OSError) are translated to these at exactly one seam each, with
``raise ... from exc``. What goes on the wire (the JSON-RPC codes, and each refusal's message and ``data``) is the
wire contract, in ``refusals.py``.
"""

from __future__ import annotations


class CheckpointError(Exception):
    """Base class of every error Checkpoint raises on purpose."""


class UsageError(CheckpointError):
    """A flag or argument that cannot work as given."""


class JournalError(CheckpointError):
    """The journal store failed; see the subclasses."""


class JournalUnavailable(JournalError):
    """The journal cannot be opened, read or written (permissions, disk, a lock held too long)."""


class JournalLost(JournalUnavailable):
    """The journal stayed unreachable after bounded retries, or this proxy's ownership was taken meanwhile.

    Unlike a passing ``JournalUnavailable``, the proxy cannot go on: it refuses the call and exits.
    """


class JournalCorrupt(JournalError):
    """The file is not a Checkpoint journal, or its contents are damaged."""


class JournalVersionError(JournalError):
    """The journal was written by a newer Checkpoint (or, for an operator command, an older one); left untouched."""

    def __init__(self, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        if found > supported:
            message = (
                f"the journal has schema version {found}, newer than this Checkpoint supports ({supported}); "
                "upgrade Checkpoint to open it (the file was not modified)"
            )
        else:
            message = (
                f"the journal has schema version {found}, older than this Checkpoint's ({supported}), and operator "
                "commands never convert a journal; start the proxy on it once to migrate it (it was not modified)"
            )
        super().__init__(message)


class WorkflowOwned(JournalError):
    """Another live proxy owns the workflow."""

    def __init__(self, workflow: str, owner: str) -> None:
        self.workflow = workflow
        self.owner = owner
        super().__init__(f"workflow {workflow!r} is owned by another live proxy ({owner})")


class WorkflowShared(WorkflowOwned):
    """Other live proxies share the workflow (their calls are identified by content), so none may own it alone."""

    def __init__(self, workflow: str, sharers: str) -> None:
        self.workflow = workflow
        self.owner = f"shared by {sharers}"
        JournalError.__init__(
            self,
            f"workflow {workflow!r} is shared by other live proxies ({sharers}: sessions whose calls are identified "
            "by their content), so it cannot be owned alone; a proxy that numbers its calls (--replay-from-start, "
            "_meta.checkpoint_seq) needs a workflow of its own (--workflow-id), or the others stopped",
        )


class WorkflowOfAnother(JournalError):
    """The journal records the workflow as another principal's (``checkpoint serve`` with an identity provider)."""

    def __init__(self, workflow: str) -> None:
        self.workflow = workflow
        super().__init__(f"workflow {workflow!r} belongs to another principal")


class UpstreamError(CheckpointError):
    """The upstream MCP server could not be started, or exited."""


class InvalidToken(CheckpointError):
    """A bearer token `checkpoint serve` cannot accept; the message says why without repeating the token."""


class KeySetUnavailable(CheckpointError):
    """The identity provider's keys cannot be had (`--jwks-url` unreachable, `--jwks-file` unreadable)."""


class SessionError(CheckpointError):
    """Base of the session server's errors."""


class ProjectRootError(SessionError):
    """The project root is not an absolute path to an existing directory."""


class PathOutsideProject(SessionError):
    """A file path resolves outside the project root."""


class CheckpointFileError(SessionError):
    """A checkpoint file cannot be used: unreadable, corrupt, or of an unknown version."""


class CheckpointVersionError(CheckpointFileError):
    """The checkpoint file has a version newer than this Checkpoint knows; it is refused and left untouched."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        self.path = path
        self.found = found
        self.supported = supported
        super().__init__(
            f"{path} has checkpoint version {found}, newer than this Checkpoint supports ({supported}); "
            "upgrade checkpoint-mcp to use it, or move the file away to start over (it was not modified)"
        )


class GitError(SessionError):
    """git could not be run, failed unexpectedly, or did not answer within its timeout."""


class InitError(CheckpointError):
    """`checkpoint init` (or `init --undo`) cannot do what it was asked; it wrote nothing."""


class ClientConfigError(InitError):
    """A client's configuration file that `checkpoint init` cannot read, or one entry of it of a shape it does
    not know. The message names the file (and the entry)."""

    def __init__(self, path: str, problem: str, *, entry: str | None = None) -> None:
        self.path = path
        self.entry = entry
        self.problem = problem
        where = f"{path}: server {entry!r}" if entry is not None else path
        super().__init__(f"{where}: {problem}; nothing was written")


class ProfileError(InitError):
    """A reviewed profile shipped with Checkpoint (``init/profiles/*.toml``) that cannot be used: a fault of the
    package, not of the user's files. The message names the file, the table and the key."""

    def __init__(self, path: str, where: str, problem: str) -> None:
        self.path = path
        self.where = where
        self.problem = problem
        super().__init__(f"{path}: {where}: {problem}; nothing was written")
