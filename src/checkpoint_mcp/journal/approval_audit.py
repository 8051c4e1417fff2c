"""Checking the ``approvals`` rows against the hash chain: pure functions over links and rows, as ``audit`` checks
the call rows.

Every step of an approval request links an ``approval`` event (``approvals.py``): requested (the tool, signature,
identity and a digest of the arguments), granted or denied (by whom, why, until when), used (by which call),
expired. Replaying them gives what each row must say. A row changed by hand (a denial turned into a grant, other
arguments slipped into a granted request, a used approval made usable again) is **edited**; a row with no link
is **inserted**; a request the chain knows whose row is gone is **removed**. A chain that starts at a gc anchor
may have lost the older steps of a request: such a row is checked against the steps that remain.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.approval_rows import Approval
from checkpoint_mcp.journal.approval_store import EVENT_KIND
from checkpoint_mcp.journal.audit import Break
from checkpoint_mcp.journal.chain import Link

_STATE_AFTER: Final = {
    "requested": "pending",
    "granted": "granted",
    "denied": "denied",
    "used": "used",
    "expired": "expired",
}


class ApprovalFacts(NamedTuple):
    """What the chain can vouch for of one ``approvals`` row (its arguments as a digest)."""

    id: int
    tool: str
    signature: str
    identity: str | None
    arguments: str | None  # chain.text_digest of the stored text
    state: str
    decided_by: str | None
    reason: str | None
    expires_at: str | None
    used_seq: int | None


def facts(found: Approval) -> ApprovalFacts:
    """The checked columns of a row read from the journal."""
    return ApprovalFacts(
        found.id,
        found.tool,
        found.signature,
        found.identity,
        chain.text_digest(found.arguments),
        found.state.value,
        found.decided_by,
        found.reason,
        found.expires_at,
        found.used_seq,
    )


def exported_facts(item: Mapping[str, Any]) -> ApprovalFacts:
    """The checked columns of an ``approval`` line of `journal export` (its arguments from their stored text).

    Raises:
        KeyError, TypeError, ValueError: the line lacks a field or holds one of the wrong type.
    """
    return ApprovalFacts(
        int(item["id"]),
        str(item["tool"]),
        str(item["signature"]),
        item["identity"],
        chain.text_digest(str(item["stored"]["arguments"])),
        str(item["stored_state"]),
        item["decided_by"],
        item["reason"],
        item["expires_at"],
        item["used_seq"],
    )


def _steps(links: Iterable[Link]) -> dict[int, list[tuple[dict[str, Any], Link]]]:
    steps: dict[int, list[tuple[dict[str, Any], Link]]] = {}
    for link in links:
        if link.kind != EVENT_KIND:
            continue
        try:
            detail = json.loads(link.detail)
            steps.setdefault(int(detail["id"]), []).append((detail, link))
        except (ValueError, KeyError, TypeError):
            continue  # a detail that no longer reads is the chain's own break, found by verify_chain
    return steps


def _differences(row: ApprovalFacts, steps: Sequence[tuple[dict[str, Any], Link]]) -> list[str]:
    """What ``row`` says that its steps on the chain do not."""
    wrong: list[str] = []
    for detail, link in steps:
        action = detail.get("action")
        if action == "requested":
            asked = {"tool": detail.get("tool"), "signature": detail.get("signature")}
            asked.update({"identity": detail.get("identity"), "arguments": detail.get("arguments")})
            wrong += [
                f"its {name} differs from the request's" for name, value in asked.items() if getattr(row, name) != value
            ]
        elif action in ("granted", "denied"):
            decided = {"decided_by": detail.get("by"), "reason": detail.get("reason")}
            decided["expires_at"] = detail.get("expiresAt")
            wrong += [
                f"{name} is {getattr(row, name)!r}, the chain says {value!r}"
                for name, value in decided.items()
                if getattr(row, name) != value
            ]
        elif action == "used" and row.used_seq != link.seq:
            wrong.append(f"used_seq is {row.used_seq!r}, the chain says {link.seq!r}")
    last = str(steps[-1][0].get("action"))
    if _STATE_AFTER.get(last) != row.state:
        wrong.insert(0, f"its state is {row.state}, the chain says {_STATE_AFTER.get(last, last)}")
    return wrong


def approval_breaks(links: Sequence[Link], rows: Iterable[ApprovalFacts], start: str) -> list[Break]:
    """The ``approvals`` rows of one workflow that differ from its chain (``start``: how the chain begins, as
    ``ChainReport.start``: from a gc anchor, a row may have outlived its older links)."""
    steps = _steps(links)
    breaks: list[Break] = []
    seen: set[int] = set()
    for row in sorted(rows, key=lambda r: r.id):
        seen.add(row.id)
        mine = steps.get(row.id)
        if not mine:
            if start != "gc":
                message = f"inserted: approval #{row.id} ({row.state}, {row.tool}) has a row but no link"
                breaks.append(Break("inserted", message))
            continue
        wrong = _differences(row, mine)
        if wrong:
            breaks.append(Break("edited", f"edited: the row of approval #{row.id} was changed: {'; '.join(wrong)}"))
    for gone in sorted(set(steps) - seen):
        detail, _ = steps[gone][-1]
        message = f"removed: approval #{gone} ({detail.get('tool')}) is in the chain but its row is gone"
        breaks.append(Break("removed", message))
    return breaks
