"""What the checks know of a call's situation: the journal as the call's unit of work sees it, and what this
process knows of the workflow's calls.

A check does no I/O of its own: what it reads of the journal it reads here, once (each read is made when a check
first asks for it, and kept), and what it wants written it returns (a verdict, a requirement, a note, a fork). The
place (where the call goes, and the row there) is read before the first check, by the interceptor's ``Workflow``
(``intercept/workflow.py``), which the checks see only as ``KnownCalls``: they never change it. A fork a check asks
for is named here (a read) and recorded after the decision, by the interceptor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from checkpoint_mcp.clock import iso_before
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.verdicts import AwaitingInput
from checkpoint_mcp.intercept.policy import BUILT_IN, Policy, ToolRule
from checkpoint_mcp.journal.base import Journal, Lineage, UnitOfWork
from checkpoint_mcp.journal.records import CallRecord
from checkpoint_mcp.journal.report import operator_commands
from checkpoint_mcp.journal.session_starts import SessionStarts

if TYPE_CHECKING:
    from checkpoint_mcp.intercept.decision.memory import SessionMemory


class Place(NamedTuple):
    """Where a call goes: its sequence in the lineage, and the row that counts there."""

    lineage: Lineage
    seq: int | None  # None: a fresh one of the workflow's shared counter, taken only if the call is reserved
    row: CallRecord | None  # by the call's key, or at its sequence

    @property
    def collected(self) -> bool:
        """True when no row counts here because `checkpoint journal gc` removed finished rows up to here."""
        seq = self.seq
        return self.row is None and seq is not None and seq <= self.lineage.branch_at(seq).collected_through


class KnownCalls(Protocol):
    """What this process knows of a workflow's calls, as the checks read it (``intercept/workflow.py``'s
    ``Workflow``, which the interceptor changes as calls are reserved, answered and committed)."""

    @property
    def journal(self) -> Journal:
        """The journal the workflow is written to."""
        ...

    @property
    def join_timeout(self) -> float | None:
        """How long a call matching one in flight here waits for it (None: joins are off)."""
        ...

    @property
    def running(self) -> Mapping[tuple[str, int], str]:
        """(workflow, seq) -> signature of each call reserved here and not yet finished."""
        ...

    @property
    def awaiting(self) -> Sequence[AwaitingInput]:
        """The 2026-07-28 calls that asked their client for input."""
        ...

    @property
    def principal(self) -> str | None:
        """Whose every call of the workflow is (`checkpoint serve --issuer`); None: nobody's."""
        ...

    @property
    def shared(self) -> bool:
        """True where other processes may write the workflow meanwhile: what a check read is tested again as the
        call is reserved."""
        ...


class Facts:
    """One call's situation, read lazily and once."""

    def __init__(
        self,
        call: Call,
        known: KnownCalls,
        place: Place,
        unit: UnitOfWork,
        policy: Policy | None,
        *,
        on_divergence: str = "strict",
        redact: bool = False,
        session: SessionMemory | None = None,
        tool_prefix: str = "",
    ) -> None:
        """``place``: where ``call`` goes, as the workflow placed it (``Workflow.place``). ``tool_prefix``: what the
        client sees before the upstream's tool names (``mail__`` behind `checkpoint serve --upstreams`), by which
        limits count them."""
        self.call = call
        self.known = known
        self.unit = unit
        self.policy = policy
        self.on_divergence = on_divergence
        self.redact = redact  # --redact-args-in-journal: arguments are not journaled, so not shown either
        self.session = session  # the client session the call comes from (None: requests of no session)
        self.tool_prefix = tool_prefix
        self.place = place

    @property
    def location(self) -> str:
        """The journal, as operator commands name it."""
        return self.known.journal.location

    @property
    def join_timeout(self) -> float | None:
        """How long a call matching one in flight waits for it (None: joins are off, it is refused)."""
        return self.known.join_timeout

    @property
    def shared(self) -> bool:
        """True where replicas share the journal: what a check read must be tested again as the call is reserved."""
        return self.known.shared

    def commands(self, workflow: str, seq: int) -> dict[str, str]:
        """The operator commands that show and resolve call ``seq`` of ``workflow``."""
        return operator_commands(self.location, workflow, seq)

    def rule_for(self, tool: str) -> ToolRule:
        """Another tool's rule (an in-doubt call met at this call's place may be of another tool)."""
        return self.policy.rule_for(tool) if self.policy is not None else BUILT_IN

    def running(self, workflow: str, seq: int) -> str | None:
        """The signature of the call running here at ``seq`` of ``workflow``, reserved and not finished (no row may
        show it yet: another gateway session's unit of work has not committed it), or None."""
        return self.known.running.get((workflow, seq))

    def running_alike(self) -> tuple[str, int] | None:
        """A call running here, of this lineage, with this call's signature (reserved and not yet committed), if any."""
        workflows = {branch.workflow for branch in self.place.lineage.branches}
        for (workflow, seq), signature in self.known.running.items():
            if signature == self.call.signature and workflow in workflows:
                return workflow, seq
        return None

    def replica_alive(self, replica: str) -> bool:
        """True while the gateway replica ``replica`` is alive (this process is never another replica)."""
        journal = self.known.journal
        return replica != journal.replica_id and journal.replica_alive(replica)

    @cached_property
    def since(self) -> str:
        """The start of the window in which this call's rule looks for a repeat."""
        return iso_before(self.call.rule.window_seconds)

    @cached_property
    def repeat(self) -> CallRecord | None:
        """The journaled call this call repeats by its content within its rule's window (the one that decides:
        ``UnitOfWork.read_signature``), or None."""
        call = self.call
        return self.unit.read_signature(self.place.lineage, call.signature, self.since, call.identity)

    def newest_repeat(self, found: CallRecord) -> tuple[dict[str, Any], str] | None:
        """The detail and time of the newest ``repeat`` event of ``found``: whether a refusal awaits confirmation."""
        return self.unit.newest_repeat(found.workflow, found.seq)

    def in_session(self, found: CallRecord) -> bool:
        """True when ``found`` is a call this client session was answered and the agent has not lost its memory
        since (no start of this session recorded after it): a repeat of it is the agent's own."""
        if self.session is None or not self.session.remembers(found):
            return False
        started = self.session_starts.newest
        return started is None or started < found.started_at

    @property
    def boundary_known(self) -> bool:
        """True when this session's client records its session starts (``SessionStarts.known``): then the memory
        of its session is the agent's; else the proxy cannot tell one session from the next (Claude Desktop, a hook
        switched off)."""
        session = self.session
        if session is None or session.boundary_known:
            return True
        session.boundary_known = self.session_starts.known
        return session.boundary_known

    @cached_property
    def session_starts(self) -> SessionStarts:
        """What the session starts recorded on this journal say of this call's client session (a clear, a
        compaction, a resume: ``Journal.session_starts``)."""
        return self.known.journal.session_starts(self.session.client if self.session is not None else None)

    def fork(self, record: CallRecord) -> Lineage:
        """The call diverged from ``record`` under ``--on-divergence fork``: it goes to a new branch from there, named
        now (a read) and returned; the interceptor records it after the decision (``Decision.fork``)."""
        branched = self.unit.branch(self.place.lineage, record.seq)
        self.place = Place(branched, record.seq, None)
        return branched
