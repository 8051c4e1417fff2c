"""The conditional reservation: a new call, the conditions it is reserved under, and what the journal answers.

A call is reserved PENDING (durable before the upstream sees it) either in a unit of work, batched with its
neighbours (``UnitOfWork.reserve``), or, when the decision hands conditions to test, by ``Journal.reserve``: one
durable transaction that tests each condition in order against what is committed, stops at the first that does
not hold (``Unmet``, with what it found), and otherwise inserts the PENDING row and writes what the conditions
say (an approval used, the call counted towards a limit, a confirmation linked): ``Reserved``. Where several
processes share the journal, each condition takes turns on what it reads (an advisory lock on PostgreSQL; SQLite's
write transaction already excludes every other writer), so two replicas racing cannot both pass one.

The conditions are data (this module); the SQL that tests them is ``reserving.py``; what a condition means for a
call (which rule asked for it, what its failure answers) belongs to the checks that ask for it (``intercept/``).
"""

from __future__ import annotations

from typing import NamedTuple

from checkpoint_mcp.journal.approval_rows import Approval
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.records import CallRecord


class NewCall(NamedTuple):
    """What the journal stores of a call it reserves (``workflow`` and ``seq`` are the reservation's)."""

    tool: str
    arguments: str  # compact JSON, or REDACTED_ARGUMENTS
    signature: str
    key: str | None = None  # the agent's key (``_meta.checkpoint_key`` or ``idempotencyKey``)
    identity: str | None = None  # its identity for repeats, where its tool's policy names a part of the arguments
    repeat_rule: str | None = None  # its tool's repeat rule (refuse, replay, confirm, allow); None without a policy
    rule: str | None = None  # the policy rule that decided it ("tools.start_process.when.push"); None without one


class NoRepeat(NamedTuple):
    """No call of the lineage with the new call's identity (else signature) happened or is happening since
    ``since``: none COMPLETED with a result that is not a tool error, none PENDING. ``confirming``: the call
    confirms a refused repeat (``repeat = "confirm"``); it passes over the COMPLETED call this event names while that
    call's newest repeat event is still the refusal that asked for it, and the event is linked."""

    since: str
    confirming: Event | None = None


class UsesApproval(NamedTuple):
    """The newest approval request of the call (``call_key``: its identity, else its signature) is granted and
    unexpired; the reservation uses it (once)."""

    call_key: str


class WithinLimit(NamedTuple):
    """Fewer than ``calls`` calls of the tool counted in ``scope`` since ``since`` (the reservation counts this one).
    ``tool``: the name the tool is counted by (None: the call's own; behind ``--upstreams``, the prefixed one)."""

    scope: str
    calls: int
    since: str
    tool: str | None = None


class WithinBudget(NamedTuple):
    """The amounts of the tool's calls counted in ``scope`` since ``since``, with this call's ``amount``, stay at or
    under ``most`` (the reservation counts this one's). ``tool`` as for ``WithinLimit``."""

    scope: str
    amount: float
    most: float
    since: str
    tool: str | None = None


Condition = NoRepeat | UsesApproval | WithinLimit | WithinBudget


class Counted(NamedTuple):
    """One call counted towards a limit or budget: when it started, and its amount (0 under a limit alone)."""

    at: str
    amount: float


class Reserved(NamedTuple):
    """The call is reserved, durably; ``approval``: the request it runs on, where it used one."""

    approval: int | None = None


class Unmet(NamedTuple):
    """The first condition that did not hold (nothing was written), with what the journal found."""

    condition: Condition
    found: CallRecord | None = None  # NoRepeat: the call that happened or is happening
    approval: Approval | None = None  # UsesApproval: the newest request of the call, if any
    counted: tuple[Counted, ...] = ()  # WithinLimit, WithinBudget: the calls counted in the window, oldest first


Reservation = Reserved | Unmet
