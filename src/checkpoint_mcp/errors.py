"""Every error Checkpoint raises, and the JSON-RPC codes the proxy answers with.

The hierarchy::

    CheckpointError                     base of everything below
    ├── UsageError                      a flag or argument that cannot work (bad URL, bad value)
    ├── JournalError                    the journal store itself
    │   ├── JournalUnavailable          cannot be opened, read or written (locked, disk, permissions)
    │   │   └── JournalLost             gone for good (unreachable after retries, or ownership taken): fatal
    │   ├── JournalCorrupt              the file is not a Checkpoint journal, or is damaged
    │   ├── JournalVersionError         written by a newer Checkpoint; refused, never modified
    │   ├── WorkflowOwned               another live proxy owns the workflow
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
    │   └── ClientConfigError           a client's configuration file (or one entry of it) it cannot read
    └── CallRefused                     one tools/call refused; becomes a JSON-RPC error on the wire
        ├── InvalidCallParams           -32602 malformed tools/call or `_meta.checkpoint_seq`
        ├── DuplicateRequestId          -32600 a tools/call reusing the id of a request still in flight
        ├── InDoubt                     -31080 the call at this sequence was in flight at a crash
        ├── Divergence                  -31081 a different call than the one journaled at this sequence
        ├── JournalWriteFailed          -31082 the PENDING row could not be made durable; not forwarded
        ├── UpstreamExited              -31083 the upstream died while the call was in flight
        ├── Collected                   -31084 the call's row was garbage-collected; it cannot be replayed
        ├── StillInFlight               -31086 a re-sent call waited for the original in flight, in vain
        ├── UpstreamRefused             -31087 a remote upstream refused the request over HTTP before running it
        ├── Stopped                     -31088 the proxy shut down before the upstream answered
        ├── RepeatRefused               -31089 a tool policy refuses a call that repeats a completed one by content
        └── ApprovalRequired            -31090 a tool policy wants a person's approval for this exact call first

Foreign exceptions (sqlite3, psycopg, OSError) are translated to these at exactly one seam each, with
``raise ... from exc``. A ``CallRefused`` carries the JSON-RPC ``code`` and a ``data`` object a program can act
on; ``ERROR_CODES`` is the one table of those codes and is what the README documents. Checkpoint's own codes
are -310NN, outside the range JSON-RPC and MCP reserve; each was -320NN before (``MOVED_CODES``), and an error a
journal stored under an old code is replayed under its new one (``moved_codes.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final, NamedTuple

# JSON-RPC 2.0 reserves -32768..-32000: -32700 and -32600..-32603 are its standard codes, -32000..-32099 its
# "implementation-defined" server errors. The MCP specification (2026-07-28, basic "Error Codes") splits the
# latter: -32000..-32019 legacy, -32020..-32099 reserved for codes the specification itself defines, and new codes
# "SHOULD be allocated outside" -32768..-32000. Checkpoint's own codes are therefore -310NN (below).
JSON_RPC_RESERVED: Final = range(-32768, -32000 + 1)
"""The range JSON-RPC reserves; no code of Checkpoint's own is in it."""

# JSON-RPC 2.0 standard codes: allowed everywhere, with their JSON-RPC meaning.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601  # to a server's request that nobody here handles; an upstream's is HTTP 404
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

# Codes the MCP specification itself defines, which only `checkpoint serve` sends, at the transport level (HTTP
# bodies), where the transport specification puts them; none of them refuses a tools/call.
TRANSPORT_ERROR: Final = -32000  # legacy sub-range: the Streamable HTTP transport's own error bodies (400, 405, …)
SESSION_NOT_FOUND: Final = -32001  # legacy sub-range: the transport's 404 for an unknown Mcp-Session-Id; 403s too
HEADER_MISMATCH: Final = -32020  # 2026-07-28 (SEP-2243): a mirrored Mcp-Method/Mcp-Name header contradicts the body
SPEC_PROTOCOL_ERRORS: Final = range(-32022, -32020 + 1)
"""-32020 header mismatch, -32021 missing client capability, -32022 unsupported protocol version: answered with
HTTP 400 by 2026-07-28 servers (an upstream's, relayed by the gateway, or our own -32020)."""

# Checkpoint's own codes: each was -320NN (in the sub-range MCP reserves) and is now -310NN, a rule a reader
# can remember; -31090 and up are free for new codes.
IN_DOUBT: Final = -31080
DIVERGENCE: Final = -31081
JOURNAL_WRITE_FAILED: Final = -31082
UPSTREAM_EXITED: Final = -31083
COLLECTED: Final = -31084
FAILED_BY_OPERATOR: Final = -31085
STILL_IN_FLIGHT: Final = -31086
UPSTREAM_REFUSED: Final = -31087
STOPPED: Final = -31088
REPEAT_REFUSED: Final = -31089
APPROVAL_REQUIRED: Final = -31090


class ErrorCode(NamedTuple):
    """One row of the error table: what a code is called, when it is sent, and the code it replaced."""

    name: str
    when: str
    reasons: tuple[str, ...] = ()  # the ``data.reason`` Checkpoint always puts beside this code, if it does
    was: int | None = None  # the code Checkpoint sent for it before the -310NN move (a -320NN), if any


ERROR_CODES: Final[dict[int, ErrorCode]] = {
    PARSE_ERROR: ErrorCode("parse error", "a line from the client that is not JSON; the relay goes on"),
    INVALID_REQUEST: ErrorCode(
        "invalid request",
        "a JSON value that is not a JSON-RPC message, an id that is not a string, number or null, or a reused id",
    ),
    INVALID_PARAMS: ErrorCode(
        "invalid params",
        "a tools/call without a tool name, with arguments that are not an object or have no canonical form, "
        "or a bad `_meta.checkpoint_seq`, `_meta.checkpoint_key` or `idempotencyKey`",
    ),
    INTERNAL_ERROR: ErrorCode(
        "internal error", "a bug in Checkpoint while routing a request; the request was not forwarded"
    ),
    IN_DOUBT: ErrorCode(
        "in doubt",
        "the call at this sequence was in flight when a proxy stopped; it may or may not have run",
        ("in_doubt", "in_flight"),
        -32080,
    ),
    DIVERGENCE: ErrorCode(
        "divergence", "a different call than the one journaled at this sequence", ("divergence",), -32081
    ),
    JOURNAL_WRITE_FAILED: ErrorCode(
        "journal write failed",
        "the PENDING row could not be made durable, so the call was not sent upstream",
        ("journal_write_failed",),
        -32082,
    ),
    UPSTREAM_EXITED: ErrorCode(
        "upstream exited",
        "the upstream server died while the call was in flight; the call is in doubt",
        ("upstream_exited",),
        -32083,
    ),
    COLLECTED: ErrorCode(
        "collected",
        "`checkpoint journal gc` removed the call journaled at this sequence, so it can be neither replayed nor re-run",
        ("collected",),
        -32084,
    ),
    FAILED_BY_OPERATOR: ErrorCode(
        "failed (operator)",
        "replay of a call an operator resolved with `checkpoint journal resolve --failed`",
        ("failed_by_operator",),
        -32085,
    ),
    STILL_IN_FLIGHT: ErrorCode(
        "still in flight",
        "`checkpoint serve`: a re-sent call waited `--join-timeout` for the original, still running; it did not run",
        ("still_in_flight",),
        -32086,
    ),
    UPSTREAM_REFUSED: ErrorCode(
        "upstream refused",
        "a remote upstream refused the request over HTTP before running it (see docs/remote.md); a call is FAILED",
        ("upstream_refused",),
        -32087,
    ),
    STOPPED: ErrorCode(
        "stopped",
        "the proxy shut down (client EOF, or a signal) before the upstream answered; a journaled call is in doubt",
        ("stopped",),
        -32088,
    ),
    REPEAT_REFUSED: ErrorCode(
        "repeat refused",
        '`--policy` with `repeat = "refuse"`: the same tool and arguments already completed within the window, '
        "in a call that carried no sequence and no key; it did not run again",
        ("repeat",),
        -32089,
    ),
    APPROVAL_REQUIRED: ErrorCode(
        "approval required",
        '`--policy` with `approve = "operator"` (or `"elicit"` without a client that can ask its user): the call '
        "waits for a person's approval of these exact arguments (`checkpoint journal approve`), or was denied; "
        "it did not run",
        ("awaiting_approval", "approval_denied"),
    ),
}
"""code -> its row. The README's error table and the CHANGELOG's migration map are generated from this."""

OWN_CODES: Final = frozenset(code for code in ERROR_CODES if code not in JSON_RPC_RESERVED)
"""Checkpoint's own codes: an error with one of these is a refusal by Checkpoint, never the upstream's answer."""

MOVED_CODES: Final[dict[int, int]] = {row.was: code for code, row in ERROR_CODES.items() if row.was is not None}
"""old code -> new code, for the codes that moved out of the range MCP reserves."""


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


class CallRefused(CheckpointError):
    """One tools/call refused by the proxy. ``code`` and ``data`` go on the wire as a JSON-RPC error."""

    code: ClassVar[int]

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, Any] = data or {}

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this refusal."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            error["data"] = self.data
        return error


class InvalidCallParams(CallRefused):
    """A tools/call that cannot be journaled as sent (bad name, arguments or ``_meta.checkpoint_seq``)."""

    code = INVALID_PARAMS


class DuplicateRequestId(CallRefused):
    """A tools/call whose id is already used by a request in flight: its answer could not be told apart."""

    code = INVALID_REQUEST

    def __init__(self, ident: Any) -> None:
        super().__init__(
            f"invalid request: id {ident!r} is already in flight; use a fresh id for each request",
            {"reason": "duplicate_request_id"},
        )


class InDoubt(CallRefused):
    """The journal holds a PENDING row at this sequence: the call was in flight when a proxy stopped."""

    code = IN_DOUBT

    def __init__(
        self,
        *,
        workflow: str,
        seq: int,
        tool: str,
        journaled_at: str,
        commands: dict[str, str],
        in_flight_here: bool = False,
        replica: str | None = None,
    ) -> None:
        if replica is not None:
            message = (
                f"in flight: call #{seq} ({tool}) of workflow {workflow!r} is running on the live gateway replica "
                f"{replica}; a different call cannot take its sequence while it runs"
            )
        elif in_flight_here:
            message = (
                f"in doubt: call #{seq} ({tool}) of workflow {workflow!r} is still in flight in this proxy; "
                "wait for its answer instead of sending it again"
            )
        else:
            message = (
                f"in doubt: call #{seq} ({tool}) of workflow {workflow!r} was in flight when a proxy stopped, "
                "so it may or may not have run; Checkpoint will not run it again. Check the upstream, then "
                f"record what happened: {commands['completed']} (or --failed, or --release to run it again)"
            )
        super().__init__(
            message,
            {
                "reason": "in_flight" if in_flight_here or replica is not None else "in_doubt",
                "workflow": workflow,
                "seq": seq,
                "tool": tool,
                "state": "PENDING",
                "journaledAt": journaled_at,
                "resolve": commands,
                **({"replica": replica} if replica is not None else {}),
            },
        )


class Divergence(CallRefused):
    """A completed (or failed) call is journaled at this sequence with another signature."""

    code = DIVERGENCE

    def __init__(
        self,
        *,
        workflow: str,
        seq: int,
        journaled: dict[str, Any],
        received: dict[str, Any],
        difference: list[str],
        commands: dict[str, str],
    ) -> None:
        detail = "; ".join(difference[:3]) + (" …" if len(difference) > 3 else "")
        message = (
            f"divergence: call #{seq} of workflow {workflow!r} is journaled as {journaled['tool']!r} "
            f"with other arguments ({detail}); refusing to run a different call at a journaled step. To get the "
            "journaled result, send the call as it was journaled (the value before each arrow); else an operator can "
            f"restart the proxy with --on-divergence fork, or run {commands['release']}"
        )
        super().__init__(
            message,
            {
                "reason": "divergence",
                "workflow": workflow,
                "seq": seq,
                "tool": received["tool"],
                "journaled": journaled,
                "received": received,
                "difference": difference,
                "resolve": commands,
            },
        )


class JournalWriteFailed(CallRefused):
    """The PENDING row could not be made durable; the call was refused before reaching the upstream."""

    code = JOURNAL_WRITE_FAILED

    def __init__(self, *, workflow: str, seq: int | None, tool: str, cause: str) -> None:
        super().__init__(
            f"journal write failed, so {tool!r} was not sent upstream: {cause}",
            {"reason": "journal_write_failed", "workflow": workflow, "seq": seq, "tool": tool, "cause": cause},
        )


class UpstreamExited(CallRefused):
    """The upstream died while the call was in flight; its row stays PENDING (in doubt)."""

    code = UPSTREAM_EXITED

    def __init__(self, *, workflow: str | None, seq: int | None, tool: str | None, exit_status: str) -> None:
        in_doubt = " The call is in doubt: it may or may not have run." if seq is not None else ""
        super().__init__(
            f"the upstream server exited ({exit_status}) while this call was in flight.{in_doubt}",
            {"reason": "upstream_exited", "workflow": workflow, "seq": seq, "tool": tool, "exit": exit_status},
        )


class UpstreamRefused(CallRefused):
    """A remote upstream answered with an HTTP status that says it did not run the request."""

    code = UPSTREAM_REFUSED

    def __init__(self, *, status: int | None, reason: str, method: str | None) -> None:
        what = f"{method} request" if method else "request"
        how = f"refused the {what} with HTTP {status} ({reason})" if status else f"was not reached ({reason})"
        super().__init__(
            f"the remote upstream {how}: the request was not run",
            {"reason": "upstream_refused", "status": status, "detail": reason},
        )


class Stopped(CallRefused):
    """The proxy shut down before the upstream answered this request; a journaled call's row stays PENDING."""

    code = STOPPED

    def __init__(self, *, workflow: str | None, seq: int | None, tool: str | None, why: str) -> None:
        in_doubt = " The call is in doubt: it may or may not have run." if seq is not None else ""
        super().__init__(
            f"checkpoint shut down ({why}) before the upstream answered this request.{in_doubt}",
            {"reason": "stopped", "workflow": workflow, "seq": seq, "tool": tool, "why": why},
        )


class Collected(CallRefused):
    """No row at this sequence, but `gc` removed finished rows up to it: whether it ran cannot be told."""

    code = COLLECTED

    def __init__(self, *, workflow: str, seq: int, commands: dict[str, str]) -> None:
        super().__init__(
            f"collected: call #{seq} of workflow {workflow!r} was removed by `checkpoint journal gc`; "
            "Checkpoint cannot tell whether it ran, so it will not run it. Use a new sequence.",
            {"reason": "collected", "workflow": workflow, "seq": seq, "resolve": {"show": commands["show"]}},
        )


class StillInFlight(CallRefused):
    """A re-sent call joined the original, still running, and gave up after the join timeout; it did not run."""

    code = STILL_IN_FLIGHT

    def __init__(self, *, workflow: str, seq: int, tool: str, waited: float, commands: dict[str, str]) -> None:
        super().__init__(
            f"still in flight: call #{seq} ({tool}) of workflow {workflow!r} is still running; this re-sent call "
            f"waited {waited:g}s for its outcome and was not run. Send it again later: it will return the outcome",
            {
                "reason": "still_in_flight",
                "workflow": workflow,
                "seq": seq,
                "tool": tool,
                "waited": waited,
                "resolve": {"show": commands["show"]},
            },
        )


class JoinInFlight(CheckpointError):
    """Not an error on the wire: the call matches one in flight here, so it waits for that one's outcome.

    Raised by the call journal only where joins are enabled (`checkpoint serve`); the pump re-submits the call
    once the original's outcome is committed, or answers ``refusal`` after the join timeout.
    """

    def __init__(self, workflow: str, seq: int, refusal: StillInFlight) -> None:
        super().__init__(f"call #{seq} of {workflow!r} is in flight; joining it")
        self.workflow = workflow
        self.seq = seq
        self.refusal = refusal


class RepeatRefused(CallRefused):
    """A call with no sequence and no key repeats, by its content (or by the part of it its tool's policy names),
    a call of the workflow that completed within the window, and its tool's policy says ``repeat = "refuse"``, or
    ``repeat = "confirm"`` and this is not yet the confirmation: it is not run.

    The message stands alone (LLM clients hand the model nothing else): what ran, when, its result, how this call
    differs from it, and what to do now.
    """

    code = REPEAT_REFUSED

    def __init__(
        self,
        *,
        workflow: str,
        seq: int,
        tool: str,
        started_at: str,
        ago: str,
        result: str,
        window: str,
        runs_again_after: str,
        rule: str,
        commands: dict[str, str],
        differences: Sequence[str] = (),
        confirm_within: str | None = None,
    ) -> None:
        ran = f"{tool} already ran {ago} ago (call #{seq}, at {started_at}) and returned: {result}."
        differ = ""
        if differences:
            shown = "; ".join(differences[:3]) + (" …" if len(differences) > 3 else "")
            differ = (
                f" This call differs from that one only where the tool policy [{rule}] says it does not count: {shown}."
            )
        if confirm_within is not None:
            message = (
                f"repeat not run yet: {ran}{differ} If it is done, use that result and do not send it again. "
                f"If it must really run a second time, send this call again within {confirm_within}: it will then run."
            )
        else:
            message = (
                f"repeat refused, not run: {ran}{differ} The tool policy [{rule}] refuses a repeat within {window}: "
                f"treat it as done and use that result. If it must really run again, ask the user: an operator can "
                f"let it run with {commands['release']}, or it can run after {runs_again_after}."
            )
        super().__init__(
            message,
            {
                "reason": "confirm" if confirm_within is not None else "repeat",
                "workflow": workflow,
                "tool": tool,
                "original": {"workflow": workflow, "seq": seq, "state": "COMPLETED", "at": started_at},
                "result": result,
                "window": window,
                "rule": rule,
                "runsAgainAfter": runs_again_after,
                "resolve": {"show": commands["show"], "release": commands["release"]},
                **({"difference": list(differences)} if differences else {}),
                **({"confirmWithin": confirm_within} if confirm_within is not None else {}),
            },
        )


class ApprovalRequired(CallRefused):
    """A call whose tool's policy says ``approve``, with no usable approval of its exact call: it did not run.

    Answered at once, never held open (headless clients time out). The message stands alone: the request a person
    decides (``commands``: approve, deny, pages), then "send the same call again"; or that a person denied it.
    """

    code = APPROVAL_REQUIRED

    def __init__(
        self, *, workflow: str, tool: str, approval: int, commands: dict[str, str], denied: Sequence[str] | None = None
    ) -> None:
        if denied is not None:  # (by whom, why)
            why = f": {denied[1]}" if denied[1] else ""
            message = (
                f"not run: a person denied this {tool} call (approval #{approval}, denied by {denied[0]}{why}). "
                "Do not send it again; tell the user, or ask them what to do instead."
            )
        else:
            message = (
                f"not run yet: {tool} needs a person's approval of this exact call. Approval #{approval} is waiting: "
                f"ask the user to approve it ({commands['approve']}, or the Approvals list of {commands['pages']}; "
                f"{commands['deny']} denies it), then send the same call again with the same arguments: it runs once."
            )
        reason = "approval_denied" if denied is not None else "awaiting_approval"
        data = {"reason": reason, "workflow": workflow, "tool": tool, "approval": approval, **commands}
        super().__init__(message, {**data, "deniedBy": denied[0], "why": denied[1]} if denied is not None else data)
