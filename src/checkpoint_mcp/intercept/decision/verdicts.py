"""What a check returns, and what the decision ends in.

A check (``decision/__init__.py``) looks at a call and returns one of three things:

* a **verdict**, which ends the decision: ``Reply`` (answer from the journal), ``Refuse`` (a JSON-RPC error),
  ``Join`` (wait for the same call in flight), ``Settle`` (an in-doubt call its policy can settle), ``Continue``
  (the next round of a call that asked for input), ``AskApproval`` (no usable approval: request one);
* a **requirement** (``Require``): a condition the journal tests inside the transaction that reserves the call
  (``journal/conditions.py``); when it does not hold, the check that asked says what the call gets (``unmet``);
* a **note** (``Note``): an audit record to keep with the call's reservation (a repeat that ran again);
* or nothing: the call goes on to the next check.

``Fork`` is the one step that is neither: a divergent call under ``--on-divergence fork`` starts a branch, and the
checks after it look at the call on that branch. When no check ends the decision the call is reserved under the
requirements collected (``Claimed``: it goes upstream), or gets what its first unmet requirement says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from checkpoint_mcp.intercept.policy import ToolRule
from checkpoint_mcp.journal.approval_rows import Approval
from checkpoint_mcp.journal.conditions import Condition
from checkpoint_mcp.journal.records import CallRecord
from checkpoint_mcp.refusals import CallRefused, InDoubt, StillInFlight


class Note(NamedTuple):
    """An audit record (an event of ``workflow``'s hash chain) to keep with the call's decision."""

    workflow: str
    kind: str
    seq: int | None
    detail: Mapping[str, Any]


class Reply(NamedTuple):
    """Answer the call from the journal with ``record``'s outcome (a replay; ``repeat``: of the call it repeats by
    content, ``repeat = "replay"``); it does not run."""

    record: CallRecord
    repeat: bool = False
    notes: tuple[Note, ...] = ()


class Refuse(NamedTuple):
    """Answer the call with ``refusal``; it does not run."""

    refusal: CallRefused
    notes: tuple[Note, ...] = ()


class Join(NamedTuple):
    """The same call is in flight (here, or on a live replica): wait for its outcome, then go through the checks
    again (which then replay it), or answer ``refusal`` when the wait times out. Only where joins are enabled."""

    workflow: str
    seq: int
    refusal: StillInFlight


class Settle(NamedTuple):
    """The call met an in-doubt call (by sequence, key or content) whose tool's policy can settle it: by a probe,
    or by sending it again under its idempotency key. ``refusal`` is the answer when it cannot be settled."""

    record: CallRecord  # the PENDING row, as found
    rule: ToolRule  # the in-doubt call's tool's rule
    refusal: InDoubt
    notes: tuple[Note, ...] = ()


class Claimed(NamedTuple):
    """A call that goes upstream; its PENDING row is reserved (in the open unit of work, or durably)."""

    workflow: str
    seq: int
    tool: str
    signature: str
    continued: bool = False  # a 2026-07-28 retry with inputResponses: its row was reserved by the first round
    key: str | None = None  # the agent's own key (``_meta.checkpoint_key`` or ``idempotencyKey``), if any
    durable: bool = False  # its PENDING row was committed at claim (a conditional reservation)
    approval: int | None = None  # the approval it runs on (a tool under ``approve``): its result's _meta says so


class AwaitingInput(NamedTuple):
    """A 2026-07-28 call that answered ``input_required``: its retry continues the same journal entry."""

    claimed: Claimed
    request_state: str | None


class Continue(NamedTuple):
    """A 2026-07-28 retry answering the input its first round asked for: the same journal entry goes on (the
    interceptor takes it off the workflow's awaiting calls, after the decision)."""

    awaiting: AwaitingInput


class AskApproval(NamedTuple):
    """The call's tool needs a person's approval of this exact call, and it has no usable one: its request (the
    newest, or a new one, made durable) is named in the refusal, or the client's user is asked."""

    rule: ToolRule
    newest: Approval | None  # the call's newest request, as the reservation found it


class Fork(NamedTuple):
    """A call that diverges from ``record`` under ``--on-divergence fork``: a branch starts at its sequence, and
    the checks after this one look at the call there."""

    record: CallRecord


class Require(NamedTuple):
    """A condition the journal tests inside the transaction that reserves the call (and notes to keep with it)."""

    condition: Condition
    notes: tuple[Note, ...] = ()


Verdict = Reply | Refuse | Join | Settle | Continue | AskApproval
Step = Verdict | Require | Note | Fork | None
