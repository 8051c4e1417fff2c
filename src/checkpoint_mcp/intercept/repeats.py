"""Repeats caught by their content: what a tool policy's ``repeat`` rule makes of a call seen before.

A call that names no sequence and no key is a *repeat* when a call of the same workflow with the same identity
was journaled within the rule's window: the same signature (tool and arguments; ``_meta`` never counts), or,
where the tool's policy says which part of the arguments counts (``match`` / ``ignore``, ``repeat_identity.py``),
the same part. ``CallJournal`` finds the row (``UnitOfWork.read_signature``) and asks ``verdict`` what to do;
this module builds the answers and the audit record, and holds no state.

What the row says, and what the call gets:

* COMPLETED: ``replay`` answers the stored result as a replay whose ``_meta["checkpoint/journal"]`` names the
  original (``repeatOf``); ``refuse`` answers ``RepeatRefused`` naming the original, when it ran, a
  short form of its result, how this call differs from it and how an operator lets it run again; ``confirm``
  answers the same refusal (``reason: "confirm"``) and records that it asked: the same call (same identity)
  sent again within ``confirm_within`` runs, once, and the confirmation is recorded too. Both are events on the
  original's chain, so the confirmation holds across fresh proxies. A call after a confirmed one repeats *that*
  one, which no refusal has asked about yet: it is refused and asks again.
* PENDING: still in flight here or on a live replica: the call joins it where joins are enabled (the gateway),
  else it is refused as in flight; a dead proxy's: in doubt (``InDoubt``), never run again.
* FAILED: the upstream said it did not happen: the call runs again, at a new sequence.

Each caught repeat leaves an event of kind ``repeat`` on the original's workflow (the journal's ``events``
table, schema v4), so ``checkpoint journal show``, the pages, ``export`` and the resume brief show it; its
detail holds the tool, both calls' signatures (and the identity, where the rule has one) and what was done,
never arguments or results.
"""

from __future__ import annotations

import contextlib
import enum
import json
from datetime import timedelta
from typing import Any, NamedTuple

from checkpoint_mcp.clock import age_text, duration_text, iso_after, iso_before, seconds_since, utc_now
from checkpoint_mcp.difference import json_difference
from checkpoint_mcp.intercept.policy import Policy, Repeat, ToolRule
from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.base import Lineage, UnitOfWork
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.repeats import CONFIRM_ASKED
from checkpoint_mcp.journal.report import operator_commands
from checkpoint_mcp.refusals import InvalidCallParams, RepeatRefused
from checkpoint_mcp.wire import JOURNAL_META, dumps, raw_response_line, set_member

EVENT_KIND = "repeat"
SHORT_RESULT = 160  # characters of the original's result quoted in a refusal


class Action(enum.Enum):
    """What was done with a repeat; the ``action`` of its audit record."""

    REPLAYED = "replayed"  # the original's result, as a replay
    REFUSED = "refused"  # RepeatRefused
    IN_DOUBT = "in_doubt"  # the original is in doubt: refused with InDoubt
    IN_FLIGHT = "in_flight"  # the original is still running: joined (gateway) or refused as in flight
    RAN_AGAIN = "ran_again"  # the original FAILED, or its tool is idempotent: the call runs again
    CONFIRM_ASKED = CONFIRM_ASKED  # repeat = "confirm": refused with RepeatRefused, asking for the confirmation
    CONFIRMED = "confirmed"  # repeat = "confirm": the same call, sent again within confirm_within, runs


class RepeatCall(NamedTuple):
    """The call that repeats one journaled: what it is, as the client sent it."""

    tool: str
    arguments: dict[str, Any]
    signature: str
    identity: str | None  # where its tool's policy names the part of the arguments that counts


def identity_of(policy: Policy | None, tool: str, arguments: dict[str, Any]) -> str | None:
    """A call's identity for repeats where its tool's policy names the part of the arguments that counts
    (``match`` / ``ignore``); None where all of them count (the signature is the identity).

    Raises:
        InvalidCallParams: the arguments cannot be canonicalised.
    """
    rule = policy.rule_for(tool) if policy is not None else None
    if rule is None or rule.identity is None or not rule.journal:
        return None
    try:
        return rule.identity.of(tool, arguments)
    except ValueError as exc:
        raise InvalidCallParams(f"invalid params: arguments of {tool!r} cannot be canonicalised: {exc}") from exc


def verdict(found: CallRecord, rule: ToolRule) -> Action:
    """What a repeat of ``found`` gets under ``rule`` (whose repeat is replay, refuse or confirm, or allow under
    ``approve``), before
    liveness and confirmation: a PENDING original is IN_DOUBT here (the caller tells in flight from in doubt),
    and a COMPLETED one under confirm is CONFIRM_ASKED (the caller tells a confirmation, ``confirms``)."""
    if found.state is CallState.FAILED:
        return Action.RAN_AGAIN
    if found.state is CallState.PENDING:
        return Action.IN_DOUBT
    if rule.idempotent or rule.repeat is Repeat.ALLOW:
        return Action.RAN_AGAIN  # the server promises a repeat has no further effect; or (approve) a person decides
    if rule.repeat is Repeat.CONFIRM:
        return Action.CONFIRM_ASKED
    return Action.REPLAYED if rule.repeat is Repeat.REPLAY else Action.REFUSED


def confirms(newest: tuple[dict[str, Any], str] | None, rule: ToolRule) -> bool:
    """Whether a repeat confirms the refusal ``newest`` (the original's newest repeat event and its time): it
    asked for a confirmation, within the rule's ``confirm_within``, and no call has taken it since."""
    if newest is None:
        return False
    detail, at = newest
    return detail.get("action") == CONFIRM_ASKED and at >= iso_before(timedelta(seconds=rule.confirm_seconds))


def confirmation(unit: UnitOfWork, lineage: Lineage, call: RepeatCall, rule: ToolRule, since: str) -> Event | None:
    """The event that records ``call`` as the confirmation of a refused repeat, if it may be one (``repeat =
    "confirm"``; the COMPLETED original's newest repeat event asked for it, within ``confirm_within``), for the
    guarded reservation to link (``Journal.reserve_unless_repeat``)."""
    if rule.repeat is not Repeat.CONFIRM:
        return None
    found = unit.read_signature(lineage, call.signature, since, call.identity)
    if found is None or found.state is not CallState.COMPLETED:
        return None
    if not confirms(unit.newest_repeat(found.workflow, found.seq), rule):
        return None
    return event(found, rule, Action.CONFIRMED, call)


def event(found: CallRecord, rule: ToolRule, action: Action, call: RepeatCall) -> Event:
    """The audit record of a caught repeat, on the original's chain."""
    detail: dict[str, Any] = {
        "action": action.value,
        "tool": found.tool,
        "signature": call.signature,
        "originalSignature": found.signature,
        "originalState": found.state.value,
        "rule": rule.source,
        "window": duration_text(rule.window_seconds),
    }
    if call.identity is not None:
        detail["identity"] = call.identity
    if action in (Action.CONFIRM_ASKED, Action.CONFIRMED):
        detail["confirmWithin"] = duration_text(rule.confirm_seconds)
    return Event(found.workflow, EVENT_KIND, found.seq, chain.canonical_text(detail), utc_now())


def record(unit: UnitOfWork, found: CallRecord, rule: ToolRule, action: Action, call: RepeatCall) -> None:
    """Queue the audit record of a caught repeat in ``unit`` (durable with the unit's next commit)."""
    queued = event(found, rule, action, call)
    assert isinstance(queued.detail, str)
    unit.record_event(found.workflow, EVENT_KIND, found.seq, json.loads(queued.detail))


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
        outcome = set_member(outcome, ("_meta", JOURNAL_META), info)
    return raw_response_line(ident, "result", outcome)


def refusal(
    found: CallRecord, rule: ToolRule, journal_location: str, call: RepeatCall, redacted: bool
) -> RepeatRefused:
    """``RepeatRefused`` for a repeat of the COMPLETED ``found`` under ``repeat = "refuse"`` or ``"confirm"``
    (``redacted``: the call's arguments are not journaled, so how it differs is not told)."""
    after = iso_after(found.started_at, rule.window_seconds)[:-5] + "Z"  # to the second
    return RepeatRefused(
        workflow=found.workflow,
        seq=found.seq,
        tool=found.tool,
        started_at=found.started_at,
        ago=age_text(seconds_since(found.started_at) or 0.0),
        result=short_result(found.outcome),
        window=duration_text(rule.window_seconds),
        runs_again_after=after,
        rule=rule.source,
        commands=operator_commands(journal_location, found.workflow, found.seq),
        differences=differences(found, call, redacted),
        confirm_within=duration_text(rule.confirm_seconds) if rule.repeat is Repeat.CONFIRM else None,
    )


def differences(found: CallRecord, call: RepeatCall, redacted: bool) -> list[str]:
    """How the repeat's arguments differ from the original's, by JSON pointer as a policy's ``match`` and
    ``ignore`` name them (none when the signatures agree, or when either's arguments are not journaled)."""
    if found.signature == call.signature or redacted or found.redacted:
        return []
    try:
        original = json.loads(found.arguments)
    except ValueError:
        return []
    return json_difference(original, call.arguments, "", pointers=True)


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
