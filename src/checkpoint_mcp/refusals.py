"""The wire contract: every JSON-RPC error code Checkpoint answers with, and the refusals of a tools/call.

The refusals (each a ``CallRefused``, a ``CheckpointError`` of ``errors.py``)::

    CallRefused                     one tools/call refused; becomes a JSON-RPC error on the wire
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
    ├── ApprovalRequired            -31090 a tool policy wants a person's approval for this exact call first
    ├── LimitReached                -31091 a tool policy's limit or budget leaves no room for this call now
    └── WorkflowSharedRefusal       -31092 a call that names its sequence, in a workflow other proxies share

A ``CallRefused`` carries the JSON-RPC ``code`` and a ``data`` object a program can act on, and builds its own
``message``, which must stand alone (LLM clients show the model nothing else). ``ERROR_CODES`` is the one table of
codes and is what the README documents. Checkpoint's own codes are -310NN, outside the range JSON-RPC and MCP
reserve; each was -320NN before (``MOVED_CODES``), and an error a journal stored under an old code is replayed
under its new one (``current_error``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, Final, NamedTuple

from checkpoint_mcp.errors import CheckpointError
from checkpoint_mcp.wire import set_member

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
LIMIT_REACHED: Final = -31091
WORKFLOW_SHARED: Final = -31092


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
    LIMIT_REACHED: ErrorCode(
        "limit reached",
        "`--policy` with `limit` or `budget`: the tool's calls in the rolling window leave no room for this one (or "
        "its amount cannot be read); it did not run",
        ("limit", "budget", "budget_amount"),
    ),
    WORKFLOW_SHARED: ErrorCode(
        "workflow shared",
        "a call that names its sequence (`_meta.checkpoint_seq`) needs its workflow alone, and other live proxies "
        "share it (sessions whose calls are identified by content, docs/sessions.md); it did not run",
        ("workflow_shared",),
    ),
}
"""code -> its row. The README's error table and the CHANGELOG's migration map are generated from this."""

OWN_CODES: Final = frozenset(code for code in ERROR_CODES if code not in JSON_RPC_RESERVED)
"""Checkpoint's own codes: an error with one of these is a refusal by Checkpoint, never the upstream's answer."""

MOVED_CODES: Final[dict[int, int]] = {row.was: code for code, row in ERROR_CODES.items() if row.was is not None}
"""old code -> new code, for the codes that moved out of the range MCP reserves."""


def current_code(code: Any, data: Any) -> Any:
    """The code an error Checkpoint stored under an old code carries today; any other code unchanged.

    An upstream may use the old -320NN codes for its own purposes: only an error whose ``data.reason`` is the one
    Checkpoint puts beside that code (``ErrorCode.reasons``) is Checkpoint's, and moves.
    """
    new = MOVED_CODES.get(code) if isinstance(code, int) and not isinstance(code, bool) else None
    if new is None:
        return code
    reason = data.get("reason") if isinstance(data, dict) else None
    return new if reason in ERROR_CODES[new].reasons else code


def current_error(outcome: str) -> str:
    """A stored error as it is replayed: one Checkpoint stored under an old code (before the -310NN move) carries
    its new code, every other byte as stored; an upstream's own error is never changed.

    The journal keeps the stored text as it is (the hash chain covers its digest, and `journal verify` must stay
    clean), so the old code is mapped on its way out: the replay calls this.
    """
    if "-3208" not in outcome:  # the usual case: no JSON parse on the replay path
        return outcome
    try:
        error = json.loads(outcome)
    except ValueError:
        return outcome
    if not isinstance(error, dict):
        return outcome
    stored = error.get("code")
    code = current_code(stored, error.get("data"))
    return outcome if code == stored else set_member(outcome, ("code",), str(code))


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
                f"in flight: call #{seq} ({tool}) of workflow {workflow!r} is running in another live process "
                f"(replica {replica}: another session's proxy, or a gateway replica); do not send it again while it "
                "runs, and no other call can take its sequence meanwhile"
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
        session_unknown: bool = False,
    ) -> None:
        ran = f"{tool} already ran {ago} ago (call #{seq}, at {started_at}) and returned: {result}."
        if session_unknown:
            ran += " (This client does not say where its sessions begin, so a repeat is asked about once.)"
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
                **({"session": "unknown"} if session_unknown else {}),
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


class LimitReached(CallRefused):
    """A call whose tool's policy sets a ``limit`` or ``budget`` the calls counted in its rolling window leave no
    room for, or whose amount (the number at a budget's ``sum`` pointer) cannot be read: it did not run.

    The message stands alone: what was refused, by which rule, how many ran (or what they add up to), when the
    next call may run, and what to do meanwhile. One constructor per reason.
    """

    code = LIMIT_REACHED

    @classmethod
    def over_limit(
        cls, *, workflow: str, tool: str, rule: str, scope: str, calls: int, per: str, counted: int, after: str
    ) -> LimitReached:
        """``limit = { calls, per }``: ``counted`` calls ran in the window; the next may run ``after``."""
        times = "once" if calls == 1 else f"{calls} times"
        message = (
            f"limit reached, not run: the tool policy [{rule}] lets {tool} run at most {times} per {per} "
            f"{_SCOPES.get(scope, scope)}, and {counted} ran in the last {per}. The next call may run after {after}: "
            "do not send it again before then. If it must run sooner, ask the user: an operator can raise the "
            "limit in the policy file."
        )
        data = {"counted": counted, "limit": {"calls": calls, "per": per}, "runsAgainAfter": after}
        return cls(message, _limit_data("limit", workflow, tool, rule, scope, data))

    @classmethod
    def over_budget(
        cls,
        *,
        workflow: str,
        tool: str,
        rule: str,
        scope: str,
        pointer: str,
        most: float,
        per: str,
        spent: float,
        amount: float,
        after: str | None,
    ) -> LimitReached:
        """``budget = { sum, max, per }``: the calls that ran add up to ``spent``; with this one's ``amount`` they
        would pass ``most``. ``after``: when a call of this amount may run (None: never, it alone is over)."""
        when = (
            f"A call of this amount may run after {after}; do not send it again before then."
            if after is not None
            else "This call alone is over the budget: it cannot run under this policy."
        )
        room = most - spent
        now = f" A call of at most {room:g} may run now." if room > 0 else ""
        message = (
            f"budget exhausted, not run: the tool policy [{rule}] lets the calls of {tool} that ran add up to at "
            f"most {most:g} at {pointer} per {per} {_SCOPES.get(scope, scope)}; {spent:g} ran in the last {per}, "
            f"and this call asks for {amount:g}. {when}{now} If it must run, ask the user: an operator can change "
            "the budget in the policy file."
        )
        data: dict[str, Any] = {"spent": spent, "amount": amount, "budget": {"sum": pointer, "max": most, "per": per}}
        if after is not None:
            data["runsAgainAfter"] = after
        return cls(message, _limit_data("budget", workflow, tool, rule, scope, data))

    @classmethod
    def bad_amount(cls, *, workflow: str, tool: str, rule: str, scope: str, pointer: str, got: str) -> LimitReached:
        """A budget's ``sum`` pointer finds no amount in this call's arguments: no number, a negative one, or one
        too large for a 64-bit float (``got``: what it found)."""
        message = (
            f"not run: the tool policy [{rule}] keeps a budget of {tool}'s calls by the number at {pointer} in "
            f"their arguments, and this call has {got} there. An amount is a number, 0 or more, that fits a 64-bit "
            f"float: send the call with one at {pointer}."
        )
        return cls(message, _limit_data("budget_amount", workflow, tool, rule, scope, {"sum": pointer}))


_SCOPES: Final = {
    "workflow": "in this workflow",
    "journal": "across every workflow of the journal",
    "principal": "for this principal",
}


def _limit_data(reason: str, workflow: str, tool: str, rule: str, scope: str, more: dict[str, Any]) -> dict[str, Any]:
    return {"reason": reason, "workflow": workflow, "tool": tool, "rule": rule, "scope": scope, **more}


class WorkflowSharedRefusal(CallRefused):
    """A call that names its sequence (``_meta.checkpoint_seq``) in a workflow other live proxies share: numbered
    calls need the workflow alone (another proxy's call could take the sequence meant for them), so it did not run.
    The message stands alone: why, and what to do."""

    code = WORKFLOW_SHARED

    def __init__(self, *, workflow: str, tool: str, seq: int) -> None:
        message = (
            f"not run: this {tool} call names its sequence ({seq}), which needs workflow {workflow!r} alone, and other "
            "live proxies share it (sessions whose calls are identified by their content). Give this agent a "
            "workflow of its own (--workflow-id), or stop the other sessions, then send it again."
        )
        super().__init__(message, {"reason": "workflow_shared", "workflow": workflow, "tool": tool, "seq": seq})
