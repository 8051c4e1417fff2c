"""What the operator's pages show, read from a journal through ``journal.operations``: no SQL, no HTML.

A branch (a fork) inherits its parent's calls below the fork sequence: the proxy replays them there instead
of running them again. Those calls are shown on the branch's timeline too, marked as inherited, so a
branch reads as the whole run it stands for.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from checkpoint_mcp.difference import json_difference
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.journal import operations
from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.base import Journal, Resolution, WorkflowSummary
from checkpoint_mcp.journal.notes import PolicyNote, policy_notes
from checkpoint_mcp.journal.records import CallRecord, CallState


class TreeRow(NamedTuple):
    """One workflow in the list, at its depth in its lineage (0 for a root)."""

    summary: WorkflowSummary
    depth: int


class InDoubtCall(NamedTuple):
    """A PENDING call whose lineage has no live owner: it may or may not have run."""

    summary: WorkflowSummary
    record: CallRecord


class Overview(NamedTuple):
    """The workflows page: calls needing the operator, then every workflow as a tree of forks."""

    in_doubt: list[InDoubtCall]
    tree: list[TreeRow]
    waiting: tuple[Approval, ...] = ()  # approval requests no person has decided yet, newest first


class TimelineRow(NamedTuple):
    """One call on a workflow's timeline, with where it comes from and what operators did to it."""

    record: CallRecord
    inherited: bool  # written to an ancestor before this branch forked from it
    resolutions: list[Resolution]
    approvals: tuple[Approval, ...] = ()  # the approval this call ran on (requested, decided, used)


WINDOW = 200
"""The most calls one workflow page draws; a longer workflow is paged through, newest calls first."""

APPROVALS_WINDOW = 200
"""The most decided approval requests the Approvals page draws (the newest; every waiting one is drawn)."""


class Timeline(NamedTuple):
    """The workflow page: its calls (inherited ones first), its audit trail and the forks taken from it."""

    summary: WorkflowSummary
    rows: list[TimelineRow]  # the window of calls shown
    resolutions: list[Resolution]
    forks: list[WorkflowSummary]  # branches forked from this workflow, by fork sequence
    total: int = 0  # calls in all, inherited ones included
    earlier: int | None = None  # the first sequence of the window before this one, if any
    later: int | None = None  # the first sequence of the window after this one, if any
    notes: tuple[PolicyNote, ...] = ()  # what the tool policy did of note (repeats caught)
    approvals: tuple[Approval, ...] = ()  # the workflow's approval requests, pending first, then newest first


class Divergence(NamedTuple):
    """Two different calls journaled at one sequence of one lineage, one on each side of a fork."""

    journaled: CallRecord  # the call the parent kept
    received: CallRecord  # the call that came instead, and started the branch
    difference: list[str]


class CallView(NamedTuple):
    """The call page: one call in full, its audit trail, and the divergence it was part of, if any."""

    summary: WorkflowSummary  # the workflow the page was opened from
    record: CallRecord
    inherited: bool
    resolutions: list[Resolution]
    divergences: list[Divergence]
    owner_live: bool
    notes: tuple[PolicyNote, ...] = ()  # the tool policy's records about this call (repeats of it caught)
    approvals: tuple[Approval, ...] = ()  # the approval this call ran on, if its tool's policy wanted one

    @property
    def resolvable(self) -> tuple[str, ...]:
        """The resolve actions `checkpoint journal resolve` accepts for this call."""
        if self.record.state is CallState.COMPLETED:
            return ("release",)
        return ("completed", "failed", "release")


def in_doubt(summary: WorkflowSummary) -> int:
    """How many of the workflow's calls are in doubt (PENDING with no live owner)."""
    return 0 if summary.owner is not None else summary.counts.get(CallState.PENDING, 0)


def overview(journal: Journal) -> Overview:
    """The workflows, lineages with calls in doubt first, then the most recently active; forks under parents."""
    summaries = journal.workflows()
    by_root: dict[str, list[WorkflowSummary]] = {}
    for summary in summaries:
        by_root.setdefault(summary.root, []).append(summary)

    def urgency(root: str) -> tuple[int, str, str]:
        members = by_root[root]
        latest = max((s.last_activity or s.created_at for s in members), default="")
        return (-sum(in_doubt(s) for s in members), _descending(latest), root)

    tree: list[TreeRow] = []
    for root in sorted(by_root, key=urgency):
        children: dict[str | None, list[WorkflowSummary]] = {}
        for summary in by_root[root]:
            children.setdefault(summary.parent, []).append(summary)
        stack = [(s, 0) for s in reversed(children.get(None, []))]
        while stack:
            summary, depth = stack.pop()
            tree.append(TreeRow(summary, depth))
            below = sorted(children.get(summary.workflow, []), key=lambda s: (s.fork_seq or 0, s.workflow))
            stack.extend((child, depth + 1) for child in reversed(below))
    doubtful = [
        InDoubtCall(row.summary, record)
        for row in tree
        if in_doubt(row.summary)
        for record in journal.calls(row.summary.workflow)
        if record.state is CallState.PENDING
    ]
    waiting = tuple(a for a in approvals(journal) if a.state is ApprovalState.PENDING)
    return Overview(doubtful, tree, waiting)


def approvals(journal: Journal, workflow: str | None = None) -> list[Approval]:
    """The approval requests (of ``workflow``, where given): pending ones first, then the rest; newest first."""
    found = journal.approvals.approvals(workflow)
    return sorted(found, key=lambda a: a.state is not ApprovalState.PENDING)  # stable: newest first in each


def _used_by(found: list[Approval]) -> dict[tuple[str, int], tuple[Approval, ...]]:
    """The approvals that calls ran on, by (workflow, seq) of the call."""
    used: dict[tuple[str, int], tuple[Approval, ...]] = {}
    for approval in found:
        if approval.used_seq is not None:
            key = (approval.workflow, approval.used_seq)
            used[key] = (*used.get(key, ()), approval)
    return used


def _descending(text: str) -> str:
    """A sort key that puts later ISO timestamps first."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def _ancestors(journal: Journal, summary: WorkflowSummary) -> list[tuple[WorkflowSummary, int]]:
    """Each ancestor of a branch with the sequence below which its calls count here, nearest first."""
    by_id = {s.workflow: s for s in journal.workflows()}
    chain: list[tuple[WorkflowSummary, int]] = []
    current, limit = summary, summary.fork_seq
    while current.parent is not None and current.parent in by_id and limit is not None:
        parent = by_id[current.parent]
        chain.append((parent, limit))
        limit = min(limit, parent.fork_seq) if parent.fork_seq is not None else limit
        current = parent
    return chain


def _inherited(journal: Journal, summary: WorkflowSummary) -> list[CallRecord]:
    """The calls a branch inherits: each ancestor's own rows in the range that counts for the branch."""
    rows: list[CallRecord] = []
    for parent, limit in _ancestors(journal, summary):
        start = parent.fork_seq or 1
        rows += [r for r in journal.calls(parent.workflow) if start <= r.seq < limit]
    return sorted(rows, key=lambda r: r.seq)


def timeline(journal: Journal, workflow: str, start: int | None = None, size: int = WINDOW) -> Timeline:
    """Everything the workflow page shows: ``size`` calls from sequence ``start`` on (default: the last ones).

    Raises:
        UsageError: the journal has no such workflow.
    """
    summary, calls, resolutions = operations.describe(journal, workflow)
    inherited = _inherited(journal, summary)
    trails: dict[tuple[str, int], list[Resolution]] = {}
    for ancestor in {r.workflow for r in inherited}:
        for resolution in journal.resolutions(ancestor):
            trails.setdefault((ancestor, resolution.seq), []).append(resolution)
    for resolution in resolutions:
        trails.setdefault((workflow, resolution.seq), []).append(resolution)
    own = approvals(journal, workflow)
    used = _used_by([a for w in {r.workflow for r in inherited} for a in approvals(journal, w)] + own)
    rows = [
        TimelineRow(r, True, trails.get((r.workflow, r.seq), []), used.get((r.workflow, r.seq), ())) for r in inherited
    ]
    rows += [
        TimelineRow(r, False, trails.get((r.workflow, r.seq), []), used.get((r.workflow, r.seq), ())) for r in calls
    ]
    forks = sorted(
        (s for s in journal.workflows() if s.parent == workflow), key=lambda s: (s.fork_seq or 0, s.workflow)
    )
    first = len(rows) - size if start is None else next((i for i, r in enumerate(rows) if r.record.seq >= start), 0)
    first = max(0, min(first, len(rows) - 1))
    shown = rows[first : first + size]
    earlier = rows[max(0, first - size)].record.seq if first > 0 else None
    later = rows[first + size].record.seq if first + size < len(rows) else None
    notes = tuple(policy_notes(journal.links(workflow)))
    return Timeline(summary, shown, resolutions, forks, len(rows), earlier, later, notes, tuple(own))


def _counting_at(journal: Journal, summary: WorkflowSummary, seq: int) -> CallRecord | None:
    """The row that counts at ``seq`` for ``summary``'s workflow: its own, else the ancestor's it inherits."""
    for record in journal.calls(summary.workflow):
        if record.seq == seq and seq >= (summary.fork_seq or 1):
            return record
    for record in _inherited(journal, summary):
        if record.seq == seq:
            return record
    return None


def _arguments(record: CallRecord) -> Any:
    return None if record.redacted else json.loads(record.arguments)


def divergence(journaled: CallRecord, received: CallRecord) -> Divergence:
    """The readable difference between the call a lineage kept and the one that forked it."""
    lines = [] if journaled.tool == received.tool else [f"tool: {journaled.tool!r} → {received.tool!r}"]
    if journaled.redacted or received.redacted:
        if journaled.signature != received.signature:
            lines.append("arguments: not journaled (redacted), and their signatures differ")
    else:
        lines += json_difference(_arguments(journaled), _arguments(received))
    return Divergence(journaled, received, lines)


def call_view(journal: Journal, workflow: str, seq: int) -> CallView:
    """Everything the call page shows.

    Raises:
        UsageError: no such workflow, or no call at ``seq`` in it.
    """
    summary, _, _ = operations.describe(journal, workflow)
    record = _counting_at(journal, summary, seq)
    if record is None:
        raise UsageError(f"workflow {workflow!r} has no call #{seq}")
    summaries = {s.workflow: s for s in journal.workflows()}
    divergences: list[Divergence] = []
    home = summaries.get(record.workflow, summary)
    if home.parent is not None and home.fork_seq == seq and home.parent in summaries:
        kept = _counting_at(journal, summaries[home.parent], seq)
        if kept is not None:
            divergences.append(divergence(kept, record))
    for branch in summaries.values():
        if branch.parent == record.workflow and branch.fork_seq == seq:
            came = _counting_at(journal, branch, seq)
            if came is not None and came.workflow == branch.workflow:
                divergences.append(divergence(record, came))
    trail = [r for r in journal.resolutions(record.workflow) if r.seq == seq]
    notes = tuple(n for n in policy_notes(journal.links(record.workflow)) if n.seq == seq)
    owner_live = summary.owner is not None
    ran_on = _used_by(approvals(journal, record.workflow)).get((record.workflow, seq), ())
    return CallView(summary, record, record.workflow != workflow, trail, divergences, owner_live, notes, ran_on)
