"""The tool policies' audit records among a workflow's events, as the operator's views show them. Pure.

A tool policy records what it did of note on the journal's hash chain (``events``, schema v4): a repeat caught
by its content is an event of kind ``repeat`` on the original call's workflow and sequence, whose detail says
what was done; each step of an approval request (``approve``: requested, granted, denied, used, expired) is an
event of kind ``approval``, on the call's sequence once a call used it. `checkpoint journal show`, the operator's
pages and the resume brief list them; `export` carries them as links.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

from checkpoint_mcp.journal.chain import Link
from checkpoint_mcp.refusals import LIMIT_REACHED, REPEAT_REFUSED

NOTED_KINDS: Final = frozenset({"repeat", "approval", "limit"})
"""Event kinds the views list as policy notes."""

_ACTIONS: Final = {
    "replayed": "answered with its result (replayed)",
    "refused": f"refused ({REPEAT_REFUSED})",
    "in_doubt": "refused: the original is in doubt",
    "in_flight": "refused: the original was still in flight",
    "ran_again": "ran again: the original had failed",
    "confirm_asked": 'refused, asking for a confirmation (repeat = "confirm")',
    "confirmed": "confirmed: sent again within confirm_within, it ran again",
}


_APPROVAL_ACTIONS: Final = {
    "requested": "requested: the call waits for a person's approval",
    "granted": "granted by {by}{reason} (usable once until {expiresAt})",
    "denied": "denied by {by}{reason}",
    "used": "used by call #{seq}: the approved call ran",
    "expired": "expired: granted, but not used in time",
}


class PolicyNote(NamedTuple):
    """One audit record of a tool policy."""

    workflow: str
    seq: int | None  # the original call's sequence
    kind: str
    at: str
    detail: dict[str, Any]

    @property
    def tool(self) -> str:
        """The tool the record is about."""
        return str(self.detail.get("tool", "?"))


def policy_notes(links: Iterable[Link]) -> list[PolicyNote]:
    """The policy notes among a workflow's chain links, oldest first."""
    notes: list[PolicyNote] = []
    for link in links:
        if link.kind in NOTED_KINDS:
            try:
                detail = json.loads(link.detail)
            except ValueError:
                detail = {}
            notes.append(
                PolicyNote(link.workflow, link.seq, link.kind, link.at, detail if isinstance(detail, dict) else {})
            )
    return notes


def note_text(note: PolicyNote) -> str:
    """``repeat of #1 (send_email) at …: refused (<REPEAT_REFUSED>) [tools.send_email, window 24h]``, or
    ``approval #2 (send_email) at …: denied by alice@host-a: wrong customer``."""
    if note.kind == "approval":
        return _approval_text(note)
    if note.kind == "limit":
        return _limit_text(note)
    action = str(note.detail.get("action", ""))
    what = _ACTIONS.get(action, action)
    rule = note.detail.get("rule")
    window = note.detail.get("window")
    where = f" [{rule}, window {window}]" if rule else ""
    return f"{note.kind} of #{note.seq} ({note.tool}) at {note.at}: {what}{where}"


def _approval_text(note: PolicyNote) -> str:
    action = str(note.detail.get("action", ""))
    reason = note.detail.get("reason")
    told = {
        "by": note.detail.get("by", "?"),
        "reason": f": {reason}" if reason else "",
        "expiresAt": note.detail.get("expiresAt", "?"),
        "seq": note.seq,
    }
    what = _APPROVAL_ACTIONS[action].format(**told) if action in _APPROVAL_ACTIONS else action
    return f"approval #{note.detail.get('id', '?')} ({note.tool}) at {note.at}: {what}"


def _limit_text(note: PolicyNote) -> str:
    """``limit of send_email at …: refused (<LIMIT_REACHED>), 3 ran, at most 3 per 1h; the next may run after …
    [tools.send_email]``."""
    detail = note.detail
    reason = detail.get("reason")
    if reason == "limit":
        limit: dict[str, Any] = detail["limit"] if isinstance(detail.get("limit"), dict) else {}
        why = f"{detail.get('counted', '?')} ran, at most {limit.get('calls', '?')} per {limit.get('per', '?')}"
    elif reason == "budget":
        budget: dict[str, Any] = detail["budget"] if isinstance(detail.get("budget"), dict) else {}
        why = (
            f"{detail.get('spent', '?')} spent and {detail.get('amount', '?')} asked, at most {budget.get('max', '?')}"
            f" at {budget.get('sum', '?')} per {budget.get('per', '?')}"
        )
    else:
        why = "its amount could not be read"
    after = f"; the next may run after {detail['runsAgainAfter']}" if "runsAgainAfter" in detail else ""
    return f"limit of {note.tool} at {note.at}: refused ({LIMIT_REACHED}), {why}{after} [{detail.get('rule', '?')}]"


def of_call(notes: Iterable[PolicyNote], seq: int) -> list[PolicyNote]:
    """The notes about call ``seq``: its own, and every step of the approval it ran on (from the request on)."""
    chosen = list(notes)
    approvals = {n.detail.get("id") for n in chosen if n.kind == "approval" and n.seq == seq}
    return [n for n in chosen if n.seq == seq or (n.kind == "approval" and n.detail.get("id") in approvals)]


def note_json(note: PolicyNote) -> dict[str, Any]:
    """One policy note for `show --json` and the brief's structured content."""
    return {"type": note.kind, "workflow": note.workflow, "seq": note.seq, "at": note.at, **note.detail}


def with_notes(text: str, notes: list[PolicyNote]) -> str:
    """``text`` (a `journal show` view) followed by the policy notes, if any."""
    if not notes:
        return text
    return text + "\n\nTool policy:\n" + "\n".join(f"  {note_text(note)}" for note in notes)
