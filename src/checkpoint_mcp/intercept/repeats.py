"""Repeats caught by their content: what a tool policy's ``repeat`` rule makes of a call seen before.

A call that names no sequence and no key is a *repeat* when a call of the same workflow with the same signature
(tool and arguments; ``_meta`` never counts) was journaled within the rule's window. ``CallJournal`` finds the
row (``UnitOfWork.read_signature``) and asks ``verdict`` what to do; this module builds the answers and the
audit record, and holds no state.

What the row says, and what the call gets:

* COMPLETED: ``replay`` answers the stored result as a replay whose ``_meta["checkpoint/journal"]`` names the
  original (``repeatOf``); ``refuse`` answers ``RepeatRefused`` naming the original, when it ran, a
  short form of its result and how an operator lets it run again.
* PENDING: still in flight here or on a live replica: the call joins it where joins are enabled (the gateway),
  else it is refused as in flight; a dead proxy's: in doubt (``InDoubt``), never run again.
* FAILED: the upstream said it did not happen: the call runs again, at a new sequence.

Each caught repeat leaves an event of kind ``repeat`` on the original's workflow (the journal's ``events``
table, schema v4), so ``checkpoint journal show``, the pages, ``export`` and the resume brief show it; its
detail holds the tool, the signature and what was done, never arguments or results.
"""

from __future__ import annotations

import contextlib
import enum
import json
from datetime import datetime, timedelta
from typing import Any

from checkpoint_mcp.errors import RepeatRefused
from checkpoint_mcp.intercept.policy import Repeat, ToolRule
from checkpoint_mcp.intercept.policy_report import format_seconds
from checkpoint_mcp.journal.base import CallRecord, CallState, UnitOfWork
from checkpoint_mcp.journal.report import operator_commands
from checkpoint_mcp.wire import dumps, raw_response_line, set_member

EVENT_KIND = "repeat"
META_KEY = "checkpoint/journal"
SHORT_RESULT = 160  # characters of the original's result quoted in a refusal


class Action(enum.Enum):
    """What was done with a repeat; the ``action`` of its audit record."""

    REPLAYED = "replayed"  # the original's result, as a replay
    REFUSED = "refused"  # RepeatRefused
    IN_DOUBT = "in_doubt"  # the original is in doubt: refused with InDoubt
    IN_FLIGHT = "in_flight"  # the original is still running: joined (gateway) or refused as in flight
    RAN_AGAIN = "ran_again"  # the original FAILED, or its tool is idempotent: the call runs again


def verdict(found: CallRecord, rule: ToolRule) -> Action:
    """What a repeat of ``found`` gets under ``rule`` (whose repeat is replay or refuse), before liveness: a
    PENDING original is IN_DOUBT here; the caller tells in flight from in doubt."""
    if found.state is CallState.FAILED:
        return Action.RAN_AGAIN
    if found.state is CallState.PENDING:
        return Action.IN_DOUBT
    if rule.idempotent:
        return Action.RAN_AGAIN  # the server promises a repeat has no further effect
    return Action.REPLAYED if rule.repeat is Repeat.REPLAY else Action.REFUSED


def record(unit: UnitOfWork, found: CallRecord, rule: ToolRule, action: Action, signature: str) -> None:
    """Queue the audit record of a caught repeat in ``unit`` (durable with the unit's next commit)."""
    detail = {
        "action": action.value,
        "tool": found.tool,
        "signature": signature,
        "originalState": found.state.value,
        "rule": rule.source,
        "window": format_seconds(rule.window_seconds),
    }
    unit.record_event(found.workflow, EVENT_KIND, found.seq, detail)


def replay_line(ident: Any, found: CallRecord) -> bytes:
    """The answer to a repeat of the COMPLETED ``found``: its result, marked as a replay of that call."""
    info = dumps(
        {
            "workflow": found.workflow,
            "seq": found.seq,
            "replayed": True,
            "repeatOf": {"workflow": found.workflow, "seq": found.seq},
        }
    )
    outcome = found.outcome or "null"
    with contextlib.suppress(ValueError):  # a result that is not an object: nothing to annotate
        outcome = set_member(outcome, ("_meta", META_KEY), info)
    return raw_response_line(ident, "result", outcome)


def refusal(found: CallRecord, rule: ToolRule, journal_location: str) -> RepeatRefused:
    """``RepeatRefused`` for a repeat of the COMPLETED ``found`` under ``repeat = "refuse"``."""
    started = datetime.fromisoformat(found.started_at.replace("Z", "+00:00"))
    after = (started + timedelta(seconds=rule.window_seconds)).isoformat(timespec="seconds").replace("+00:00", "Z")
    return RepeatRefused(
        workflow=found.workflow,
        seq=found.seq,
        tool=found.tool,
        started_at=found.started_at,
        result=short_result(found.outcome),
        window=format_seconds(rule.window_seconds),
        runs_again_after=after,
        rule=rule.source,
        commands=operator_commands(journal_location, found.workflow, found.seq),
    )


def short_result(outcome: str | None) -> str:
    """A one-line form of a stored result: its text content, else its structured content, cut short."""
    try:
        result = json.loads(outcome) if outcome else None
    except ValueError:
        result = outcome
    text = ""
    if isinstance(result, dict):
        content = result.get("content")
        if isinstance(content, list):
            text = " ".join(str(item["text"]) for item in content if isinstance(item, dict) and "text" in item)
        if not text and "structuredContent" in result:
            text = dumps(result["structuredContent"])
        if result.get("isError") is True:
            text = f"tool error: {text}"
    if not text:
        text = dumps(result)
    text = " ".join(text.split())
    return text if len(text) <= SHORT_RESULT else text[: SHORT_RESULT - 1] + "…"
