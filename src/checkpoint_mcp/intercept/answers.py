"""The lines that answer a journaled call: its result marked with the journal's ``_meta``, and replays.

Every journaled result says, under ``_meta["checkpoint/journal"]`` (``wire.JOURNAL_META``), its workflow, its
sequence and whether it is a replay (``"repeatOf"`` on a repeat answered with the original's result, ``"approval"``
on a call that ran on an approval). A replay is the stored outcome, every byte as stored but that mark (and an
error Checkpoint stored under an old code, which carries its new one: ``refusals.current_error``).
"""

from __future__ import annotations

import contextlib
from functools import lru_cache
from typing import Any

from checkpoint_mcp.intercept.decision.verdicts import Claimed
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.refusals import current_error
from checkpoint_mcp.wire import JOURNAL_META, dumps, raw_response_line, result_span, set_member


@lru_cache(maxsize=4096)
def _quoted(workflow: str) -> str:
    return dumps(workflow)


def _info(workflow: str, seq: int, replayed: bool, approval: int | None = None) -> str:
    approved = "" if approval is None else f',"approval":{approval}'
    return f'{{"workflow":{_quoted(workflow)},"seq":{seq},"replayed":{"true" if replayed else "false"}{approved}}}'


def replay_line(ident: Any, record: CallRecord) -> bytes:
    """The line that answers ``ident`` from the finished ``record`` (a replay)."""
    outcome = record.outcome or "null"
    if record.state is CallState.FAILED:
        return raw_response_line(ident, "error", current_error(outcome))
    with contextlib.suppress(ValueError):  # a result that is not an object: nothing to annotate
        outcome = set_member(outcome, ("_meta", JOURNAL_META), _info(record.workflow, record.seq, True))
    return raw_response_line(ident, "result", outcome)


def repeat_line(ident: Any, found: CallRecord) -> bytes:
    """The answer to a repeat of the COMPLETED ``found`` (``repeat = "replay"``): its result, marked as a replay of
    that call."""
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


def completed(text: str, result: Any, claimed: Claimed, span: tuple[int, int] | None) -> tuple[str, bytes]:
    """(The result's exact text for the journal, the upstream's line ``text`` with the journal's ``_meta``);
    ``span``: where the result's text is, if known."""
    try:
        span = span or result_span(text)
    except ValueError:
        return "null", text.encode()
    if span is None:
        return "null", annotated(text, claimed)
    start, end = span
    outcome = text[start:end]
    if isinstance(result, dict) and "_meta" not in result and text[start] == "{":
        info = _info(claimed.workflow, claimed.seq, False, claimed.approval)
        separator = "," if result else ""
        marked = f'{text[: start + 1]}"_meta":{{"{JOURNAL_META}":{info}}}{separator}{text[start + 1 :]}'
        return outcome, marked.encode()
    return outcome, annotated(text, claimed)


def annotated(line_text: str, claimed: Claimed) -> bytes:
    """The upstream's response line with the journal's ``_meta`` added to its result."""
    info = _info(claimed.workflow, claimed.seq, False, claimed.approval)
    try:
        return set_member(line_text, ("result", "_meta", JOURNAL_META), info).encode()
    except ValueError:
        return line_text.encode()
