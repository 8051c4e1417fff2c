"""The check of repeats caught by content: what a tool policy's ``repeat`` rule makes of a call seen before.

A call that names no sequence and no key is a *repeat* when a call of the same workflow with the same identity was
journaled within the rule's window: the same signature (tool and arguments; ``_meta`` never counts), or, where the
tool's policy says which part of the arguments counts (``match`` / ``ignore``, ``policy/identity.py``), the same
part. The journal finds the row that decides (``Facts.repeat``: the newest call that happened, else the newest
PENDING one, else the newest that did not do its work); what it says, and what the call gets:

* it happened (COMPLETED, its result not a tool error): ``replay`` answers the stored result as a replay whose
  ``_meta["checkpoint/journal"]`` names the original (``repeatOf``); ``refuse`` answers ``RepeatRefused`` naming the
  original, when it ran, a short form of its result, how this call differs from it and how an operator lets it
  run again; ``confirm`` answers the same refusal (``reason: "confirm"``) and records that it asked: the same call
  sent again within ``confirm_within`` runs, once, and the confirmation is recorded too. Both are events on the
  original's chain, so the confirmation holds across fresh proxies. An idempotent tool's repeat, and one under
  ``approve`` with ``repeat = "allow"``, runs (a person approves each call).
* PENDING: in flight here or on a live replica (joined, where joins are on, else refused as in flight), or in doubt
  (settled by the tool's policy where it can be, else refused): never run again.
* It did not do its work (FAILED, or a tool error): the call runs again, at a new sequence.
* Under ``within_session = "run"``, a repeat of a call this client session was answered, with no loss of memory
  since (``memory.py``), is the agent's own deliberate repeat: it runs, unrecorded, where the client says where its
  sessions begin (its session-start hook records them). Where it never has (Claude Desktop, a hook switched off),
  the proxy cannot tell this session's repeat from the next session's: it asks, as ``confirm`` does (refused once
  with what ran, when and its result; the same call sent again runs), never running it silently, never blocking it.

Each caught repeat leaves an event of kind ``repeat`` on the original's workflow, so ``checkpoint journal show``, the
pages, ``export`` and the resume brief show it; its detail holds the tool, both calls' signatures (and the identity,
where the rule has one) and what was done, never arguments or results. Where replicas share the journal, a call
that is to run is looked up again inside the transaction that reserves it (``NoRepeat``), so two replicas given the
same new call at once cannot both run it.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from checkpoint_mcp.clock import age_text, duration_text, iso_after, iso_before, seconds_since, utc_now
from checkpoint_mcp.difference import json_difference
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.pending import in_flight_here, pending, settled
from checkpoint_mcp.intercept.decision.verdicts import Fork, Join, Note, Refuse, Reply, Require, Step, Verdict
from checkpoint_mcp.intercept.policy import Repeat, ToolRule, WithinSession
from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.conditions import NoRepeat, Unmet
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.repeat_rows import CONFIRM_ASKED
from checkpoint_mcp.refusals import RepeatRefused
from checkpoint_mcp.wire import dumps

EVENT_KIND = "repeat"
SHORT_RESULT = 160  # characters of the original's result quoted in a refusal


class Action(enum.Enum):
    """What was done with a repeat; the ``action`` of its audit record."""

    REPLAYED = "replayed"  # the original's result, as a replay
    REFUSED = "refused"  # RepeatRefused
    IN_DOUBT = "in_doubt"  # the original is in doubt: refused with InDoubt (or settled by the policy)
    IN_FLIGHT = "in_flight"  # the original is still running: joined (gateway) or refused as in flight
    RAN_AGAIN = "ran_again"  # the original did not do its work, or its tool is idempotent: the call runs again
    CONFIRM_ASKED = CONFIRM_ASKED  # repeat = "confirm": refused with RepeatRefused, asking for the confirmation
    CONFIRMED = "confirmed"  # repeat = "confirm": the same call, sent again within confirm_within, runs


class RepeatCheck:
    """A call that repeats one journaled within its rule's window, by content: what its rule says."""

    def check(self, call: Call, facts: Facts) -> Step:
        """See the module's docstring."""
        rule = call.rule
        if call.named or call.read_only or not rule.catches_repeats:
            return None
        running = facts.running_alike()
        if running is not None:  # reserved by another session of this process and not yet committed: no row yet
            return in_flight_here(facts, *running, call.name)
        found = facts.repeat
        if found is None:
            return Require(NoRepeat(facts.since)) if facts.shared and _catches_completed(rule) else None
        return self._of(found, call, facts)

    def unmet(self, call: Call, facts: Facts, unmet: Unmet) -> Verdict:
        """Another process journaled a call with this identity meanwhile (a replica, within milliseconds): this
        call repeats that one, as ``check`` would have said; a confirmation another replica took first is a repeat
        again."""
        found = unmet.found
        assert found is not None
        step = self._of(found, call, facts)
        if step is None or isinstance(step, Note | Require | Fork):
            return Refuse(refusal(found, call, facts))
        return step

    def _of(self, found: CallRecord, call: Call, facts: Facts) -> Step:
        rule = call.rule
        if found.state is CallState.PENDING:
            return _pending_original(found, call, facts)
        if not found.happened or rule.idempotent or rule.repeat is Repeat.ALLOW:
            # It did not do its work, or the server promises a repeat is harmless, or (approve) a person decides.
            ran = () if rule.approve is not None else (note(found, rule, Action.RAN_AGAIN, call),)
            if facts.shared and _catches_completed(rule):
                return Require(NoRepeat(facts.since), ran)
            return ran[0] if ran else None
        if rule.within_session is WithinSession.RUN and facts.in_session(found):
            if facts.boundary_known:
                return None  # the agent's own repeat of a call it was answered in this session: it runs
            return _confirmed_or_asked(found, call, facts, session_unknown=True)  # which session? ask once
        return _caught(found, call, facts)


def _pending_original(found: CallRecord, call: Call, facts: Facts) -> Step:
    """The original is PENDING: the same call running here or on a live replica joins it; in flight, refused;
    in doubt, settled by its policy where it can be, else refused."""
    met = pending(found, facts)
    if isinstance(met, Join):
        return met
    if met.data.get("reason") == "in_flight":
        return Refuse(met, (note(found, call.rule, Action.IN_FLIGHT, call),))
    return settled(found, met, facts, (note(found, call.rule, Action.IN_DOUBT, call),))


def _caught(found: CallRecord, call: Call, facts: Facts) -> Step:
    """The original happened, and the rule catches its repeat: confirmed (it runs), asked to confirm, replayed or
    refused."""
    rule = call.rule
    if rule.repeat is Repeat.CONFIRM:
        return _confirmed_or_asked(found, call, facts)
    if rule.repeat is Repeat.REPLAY:
        return Reply(found, True, (note(found, rule, Action.REPLAYED, call),))
    return Refuse(refusal(found, call, facts), (note(found, rule, Action.REFUSED, call),))


def _confirmed_or_asked(found: CallRecord, call: Call, facts: Facts, *, session_unknown: bool = False) -> Step:
    """The confirm behaviour: the same call sent again within ``confirm_within`` of the refusal that asked runs
    (once); else it is refused, saying what ran, when, its result, and that sending it again runs it.
    ``session_unknown``: a repeat within one proxy of a client that does not say where its sessions begin."""
    rule = call.rule
    if _confirms(facts.newest_repeat(found), rule):
        confirmed = note(found, rule, Action.CONFIRMED, call, session_unknown)
        if facts.shared:  # linked in the reservation, only while the original still asks for it
            return Require(NoRepeat(facts.since, confirming=_event(confirmed)))
        return confirmed
    asked = note(found, rule, Action.CONFIRM_ASKED, call, session_unknown)
    return Refuse(refusal(found, call, facts, confirm=True, session_unknown=session_unknown), (asked,))


def _catches_completed(rule: ToolRule) -> bool:
    """Whether a repeat of a call that happened is caught (refused, replayed, or asked to confirm), not run."""
    return not rule.idempotent and rule.repeat is not Repeat.ALLOW


def _confirms(newest: tuple[dict[str, Any], str] | None, rule: ToolRule) -> bool:
    """Whether a repeat confirms the refusal ``newest`` (the original's newest repeat event and its time): it
    asked for a confirmation, within the rule's ``confirm_within``, and no call has taken it since."""
    if newest is None:
        return False
    detail, at = newest
    return detail.get("action") == CONFIRM_ASKED and at >= iso_before(rule.confirm_seconds)


def note(found: CallRecord, rule: ToolRule, action: Action, call: Call, session_unknown: bool = False) -> Note:
    """The audit record of a caught repeat, on the original's chain (``session_unknown``: asked about because the
    client does not say where its sessions begin)."""
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
    if session_unknown:
        detail["session"] = "unknown"
    return Note(found.workflow, EVENT_KIND, found.seq, detail)


def _event(queued: Note) -> Event:
    """A note as the event the reservation links (a confirmation, where replicas share the journal)."""
    return Event(queued.workflow, queued.kind, queued.seq, chain.canonical_text(queued.detail), utc_now())


def refusal(
    found: CallRecord, call: Call, facts: Facts, *, confirm: bool = False, session_unknown: bool = False
) -> RepeatRefused:
    """``RepeatRefused`` for a repeat of the COMPLETED ``found`` under ``repeat = "refuse"`` or ``"confirm"``
    (``confirm``: whatever the rule says, the refusal that asks for a confirmation; ``session_unknown``: because the
    client does not say where its sessions begin)."""
    rule = call.rule
    asks = confirm or rule.repeat is Repeat.CONFIRM
    return RepeatRefused(
        workflow=found.workflow,
        seq=found.seq,
        tool=found.tool,
        started_at=found.started_at,
        ago=age_text(seconds_since(found.started_at) or 0.0),
        result=short_result(found.outcome),
        window=duration_text(rule.window_seconds),
        runs_again_after=iso_after(found.started_at, rule.window_seconds)[:-5] + "Z",  # to the second
        rule=rule.source,
        commands=facts.commands(found.workflow, found.seq),
        differences=differences(found, call, facts.redact),
        confirm_within=duration_text(rule.confirm_seconds) if asks else None,
        session_unknown=session_unknown,
    )


def differences(found: CallRecord, call: Call, redacted: bool) -> list[str]:
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
