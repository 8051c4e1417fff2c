"""Approval requests as HTML: the waiting ones with their Approve / Deny forms, the decided ones, a call's trail.

A tool policy's ``approve`` key makes a call wait for a person's approval of its exact arguments; these are the
pieces of the pages that show the requests and take the decisions (the Approvals page, the workflow page's own
requests, the call page's trail, and the markers of the timeline chart, which read ``events``). Each form posts
to the ``decide`` route with the page's CSRF token, as the resolve forms do. Pure: rows in, text out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import Any, NamedTuple

from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS

REDACTED_TEXT = "«redacted»: the proxy ran with --redact-args-in-journal (only their digest is kept)"

STYLE = """
table.approvals pre{max-height:180px;margin:0}table.approvals form{display:inline-block;margin:0 6px 4px 0}
table.approvals input[type=text]{width:14em;font:12px system-ui,sans-serif}
.s-pending{background:#ef8f00}.s-granted{background:#1565c0}.s-denied{background:#c62828}
.s-used{background:#2e7d32}.s-expired{background:#69727d}.approvals .when{color:#69727d;white-space:nowrap}
"""


class Event(NamedTuple):
    """One step of an approval request, for the call's trail and the timeline's markers."""

    at: str  # a journal timestamp
    action: str  # requested, granted, denied, used, expired
    text: str  # in words, with who and why


def asker(approval: Approval) -> str:
    """Who asked, in words: the client as it introduced itself, and the process (replica, pid, host)."""
    try:
        asked: dict[str, Any] = json.loads(approval.requested_by)
    except ValueError:
        return approval.requested_by
    if not isinstance(asked, dict):
        return approval.requested_by
    named = asked.get("client")
    client: dict[str, Any] = named if isinstance(named, dict) else {}
    name = " ".join(str(client[k]) for k in ("name", "version") if k in client) or "a client that gave no name"
    where = [f"replica {asked['replica']}"] if asked.get("replica") else []
    where += [f"pid {asked['pid']}"] if asked.get("pid") else []
    where += [f"on {asked['host']}"] if asked.get("host") else []
    return f"{name} ({' '.join(where)})" if where else name


def shown_arguments(approval: Approval) -> str:
    """The exact arguments, as indented JSON; the redacted marker where the journal keeps only their digest."""
    if approval.arguments == REDACTED_ARGUMENTS:
        return REDACTED_TEXT
    try:
        return json.dumps(json.loads(approval.arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return approval.arguments


def events(approval: Approval, now: str) -> list[Event]:
    """The request's steps so far, oldest first (an unused grant past its time shows as expired)."""
    steps = [Event(approval.requested_at, "requested", f"approval #{approval.id} requested by {asker(approval)}")]
    if approval.decided_at is not None:
        granted = approval.state is not ApprovalState.DENIED
        why = f": {approval.reason}" if approval.reason else ""
        verb = "granted" if granted else "denied"
        steps.append(Event(approval.decided_at, verb, f"approval #{approval.id} {verb} by {approval.decided_by}{why}"))
    if approval.used_at is not None:
        steps.append(Event(approval.used_at, "used", f"approval #{approval.id} used by call #{approval.used_seq}"))
    elif approval.state_at(now) is ApprovalState.EXPIRED and approval.expires_at is not None:
        steps.append(Event(approval.expires_at, "expired", f"approval #{approval.id} expired unused"))
    return steps


def _span(seconds: int) -> str:
    """``1 h``, ``15 min``, ``90 s``: how long a grant stays usable."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _state(approval: Approval, now: str) -> str:
    state = approval.state_at(now).value
    return f'<span class="state s-{state}">{state}</span>'


def _hidden(fields: dict[str, object]) -> str:
    return "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(str(v))}">' for k, v in fields.items())


def _forms(approval: Approval, decide: str, csrf: str, back: str) -> str:
    """Approve, and Deny with an optional reason: two POST forms carrying the page's CSRF token."""
    base = {"csrf": csrf, "approval": approval.id, "from": back}
    return (
        f'<form class="approve" method="post" action="{escape(decide)}">'
        f"{_hidden({**base, 'decision': 'approve'})}<button>Approve #{approval.id}</button></form>"
        f'<form class="deny" method="post" action="{escape(decide)}">{_hidden({**base, "decision": "deny"})}'
        f'<input type="text" name="reason" placeholder="reason (optional)" aria-label="reason for denying '
        f'#{approval.id}"> <button>Deny #{approval.id}</button></form>'
    )


def _workflow(approval: Approval, known: frozenset[str], link: Callable[[str], str]) -> str:
    if approval.workflow not in known:
        return escape(approval.workflow)
    return f'<a href="{escape(link(approval.workflow))}">{escape(approval.workflow)}</a>'


def waiting_table(
    found: list[Approval], known: frozenset[str], link: Callable[[str], str], decide: str, csrf: str, back: str
) -> str:
    """The pending requests, each with its exact arguments and its Approve / Deny forms (empty: none waits)."""
    pending = [a for a in found if a.state is ApprovalState.PENDING]
    if not pending:
        return ""
    rows = "".join(
        f'<tr id="approval-{a.id}" data-approval="{a.id}"><td class="num">#{a.id}</td>'
        f"<td>{_workflow(a, known, link)}</td><td>{escape(a.tool)}</td>"
        f'<td><pre class="arguments">{escape(shown_arguments(a))}</pre></td>'
        f'<td>{escape(asker(a))}<br><span class="when">{escape(a.requested_at)}</span></td>'
        f'<td>{_forms(a, decide, csrf, back)}<br><span class="muted">usable for {_span(a.expires_after)} once '
        "approved</span></td></tr>"
        for a in pending
    )
    return (
        '<table class="approvals waiting"><tr><th>Request</th><th>Workflow</th><th>Tool</th><th>Arguments</th>'
        f"<th>Asked by, at</th><th>Decide</th></tr>{rows}</table>"
    )


def decided_table(found: list[Approval], known: frozenset[str], link: Callable[[str], str], now: str) -> str:
    """The requests decided, used or expired, newest first (empty: none)."""
    done = [a for a in found if a.state is not ApprovalState.PENDING]
    if not done:
        return ""
    rows = "".join(
        f'<tr id="approval-{a.id}" data-approval="{a.id}" data-state="{a.state_at(now).value}">'
        f'<td class="num">#{a.id}</td><td>{_workflow(a, known, link)}</td><td>{escape(a.tool)}</td>'
        f'<td><pre class="arguments">{escape(shown_arguments(a))}</pre></td><td>{_state(a, now)}</td>'
        f"<td>{'<br>'.join(f'{escape(e.text)} <span class=when>{escape(e.at)}</span>' for e in events(a, now))}</td>"
        "</tr>"
        for a in done
    )
    return (
        '<table class="approvals decided"><tr><th>Request</th><th>Workflow</th><th>Tool</th><th>Arguments</th>'
        f"<th>State</th><th>History</th></tr>{rows}</table>"
    )


def trail(found: tuple[Approval, ...], now: str) -> str:
    """A call's approval, step by step, as list items (empty: the call needed none)."""
    return "".join(f"<li>{escape(e.text)} at {escape(e.at)}</li>" for a in found for e in events(a, now))


def decision_notice(approval: Approval) -> str:
    """What a decision made from the pages means, in words."""
    if approval.state is ApprovalState.DENIED:
        return f"Approval #{approval.id} denied: the same {approval.tool} call is refused as denied."
    return (
        f"Approval #{approval.id} granted: the same {approval.tool} call, sent again before {approval.expires_at}, "
        "runs once."
    )
