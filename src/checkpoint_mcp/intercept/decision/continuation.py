"""The check that goes first: a 2026-07-28 retry answering the input its first round asked for continues that
round's journal entry (one logical call is one entry, whatever the number of rounds)."""

from __future__ import annotations

from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.verdicts import Continue, Step


class ContinuationCheck:
    """A retry with ``inputResponses`` (or ``requestState``) of a call awaiting input here: ``Continue``."""

    def check(self, call: Call, facts: Facts) -> Step:
        """The awaiting entry with this signature (and sequence, if named), preferring the one whose
        ``requestState`` the retry carries back; nothing for any other call."""
        if not call.continues:
            return None
        candidates = [
            waiting
            for waiting in facts.known.awaiting
            if waiting.claimed.signature == call.signature and (call.seq is None or waiting.claimed.seq == call.seq)
        ]
        if not candidates:
            return None
        state = call.request_state
        exact = [waiting for waiting in candidates if state is not None and waiting.request_state == state]
        return Continue((exact or candidates)[0])
