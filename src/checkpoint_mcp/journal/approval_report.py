"""What `checkpoint journal approvals` and `journal approve` print: the requests as a table or JSON, who asked,
and what a decision means for the call it names. Pure: no SQL, no I/O.

The state shown is the one a person sees (``Approval.state_at``): a grant past its time reads ``expired`` even
before a proxy has recorded it so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from checkpoint_mcp.clock import duration_text
from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS

SHORT_ARGUMENTS: Final = 48
"""The table cuts the arguments to this many characters (`--json` and `journal show` have them whole)."""


def arguments_value(found: Approval) -> Any:
    """The arguments as a JSON value, or the redacted marker (``«redacted»``) under --redact-args-in-journal."""
    if found.arguments == REDACTED_ARGUMENTS:
        return json.loads(REDACTED_ARGUMENTS)
    try:
        return json.loads(found.arguments)
    except ValueError:
        return found.arguments


def requested_by(found: Approval) -> dict[str, Any]:
    """Who asked, as recorded: client (name, version), pid, host and replica where known."""
    try:
        value = json.loads(found.requested_by)
    except ValueError:
        return {"text": found.requested_by}
    return value if isinstance(value, dict) else {"text": found.requested_by}


def requester_text(found: Approval) -> str:
    """``claude-code 2.1 (pid 412 on host-a, replica r1)``: the client as it introduced itself, and the process."""
    asked = requested_by(found)
    told = asked.get("client")
    client: dict[str, Any] = told if isinstance(told, dict) else {}
    name = " ".join(str(client[key]) for key in ("name", "version") if key in client) or "a client"
    where = [f"pid {asked['pid']}" if "pid" in asked else "", f"on {asked['host']}" if "host" in asked else ""]
    process = " ".join(part for part in where if part)
    if "replica" in asked:
        process += f", replica {asked['replica']}"
    return f"{name} ({process})" if process else name


def approval_json(found: Approval, now: str) -> dict[str, Any]:
    """One request for `approvals --json` and `export`: every column, the state as of ``now``."""
    return {
        "type": "approval",
        "id": found.id,
        "workflow": found.workflow,
        "tool": found.tool,
        "arguments": arguments_value(found),
        "redacted": found.arguments == REDACTED_ARGUMENTS,
        "signature": found.signature,
        "identity": found.identity,
        "state": found.state_at(now).value,
        "stored_state": found.state.value,
        "requested_at": found.requested_at,
        "requested_by": requested_by(found),
        "expires_after": found.expires_after,
        "decided_at": found.decided_at,
        "decided_by": found.decided_by,
        "reason": found.reason,
        "expires_at": found.expires_at,
        "used_at": found.used_at,
        "used_seq": found.used_seq,
    }


def _short(found: Approval) -> str:
    if found.arguments == REDACTED_ARGUMENTS:
        return "«redacted»"
    text = found.arguments
    return text if len(text) <= SHORT_ARGUMENTS else text[: SHORT_ARGUMENTS - 1] + "…"


def _decided(found: Approval) -> str:
    if found.decided_at is None:
        return "-"
    why = f": {found.reason}" if found.reason else ""
    return f"{found.decided_by} at {found.decided_at}{why}"


def _used(found: Approval, now: str) -> str:
    if found.used_seq is not None:
        return f"call #{found.used_seq} at {found.used_at}"
    if found.state_at(now) is ApprovalState.GRANTED:
        return f"usable until {found.expires_at}"
    return "-"


def render_approvals(approvals: Sequence[Approval], now: str) -> str:
    """The `approvals` table, newest first (as given), one request a line."""
    if not approvals:
        return "No approval requests in this journal."
    headers = ["ID", "STATE", "WORKFLOW", "TOOL", "ARGUMENTS", "REQUESTED", "BY", "DECIDED", "USED"]
    rows = [
        [
            f"#{a.id}",
            a.state_at(now).value,
            a.workflow,
            a.tool,
            _short(a),
            a.requested_at,
            requester_text(a),
            _decided(a),
            _used(a, now),
        ]
        for a in approvals
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [headers, *rows]]
    return "\n".join(lines)


def decision_text(decided: Approval) -> str:
    """What ``journal approve`` did, and what happens next to the call it names."""
    call = f"{decided.tool} call of workflow {decided.workflow} ({_short(decided)})"
    window = duration_text(decided.expires_after)
    why = f" ({decided.reason})" if decided.reason else ""
    if decided.state is ApprovalState.GRANTED:
        return (
            f"approval #{decided.id} granted by {decided.decided_by}{why}: the {call}.\n"
            f"The same call, sent again within {window} (until {decided.expires_at}), runs once; "
            "a second one needs a new approval."
        )
    return (
        f"approval #{decided.id} denied by {decided.decided_by}{why}: the {call}.\n"
        f"The same call, sent again within {window}, is refused as denied (the agent is told not to retry); "
        "after that, it makes a new request."
    )
