"""The brief's side-effects section: what the project's journals say happened since the checkpoint.

It comes after "Since this checkpoint", only when there is something to say, in this order:

* **In doubt**: each call that was in flight when its proxy stopped, with the exact ``checkpoint journal resolve``
  commands and a plain instruction not to redo it before it is resolved;
* **Approvals**: calls a tool policy holds for a person's approval of their exact arguments (``approve``):
  waiting for a decision (ask the user to run the approve command), approved but not yet sent (send the same
  call again to run it, once), or recently denied (do not send it again); at most ``APPROVALS_SHOWN`` of them;
* **In doubt, settled when sent again**: the in-doubt calls of tools whose policy declares a probe or an
  idempotency key (``policy_view``): sending such a call again is safe, the proxy checks it or re-sends it under
  its key, so no operator is needed;
* **Done since the checkpoint**: the calls that did their work after the save, newest last, consecutive repeats
  grouped (``send_email ×3``), so the agent does not redo next steps that already happened (a call that a sub-rule
  of its tool's policy decided names the rule: which kind of command it was); calls a live proxy is still waiting
  for are named too, and so are calls sent again that a tool policy caught;
* **Failed**: calls the server answered with an error (a JSON-RPC error, or a tool error): it reported a failure,
  which does not prove it did nothing (a partial send, a timeout inside the server), so the brief says so; a retry
  runs, and the agent checks first;
* **Also ran**: calls whose repeats their tool policy lets run (clicks, checkouts, a local world the agent can
  see), counted per tool with the first and the last, so that many of them never push the calls above out;
* **Refused by a limit or budget**: calls that did not run, and when the next may;
* **Settled automatically**: in-doubt calls the tool policy settled by itself (a probe that showed whether the
  call had run, or the upstream's idempotency key), and how;
* one line counting what was done before the save.

Without a session checkpoint (``since_checkpoint=False``), everything the journals hold is "done so far".

The section has its own budget, ``EFFECTS_MAX_CHARS``, inside the brief's cap: the oldest calls done since go
first, then in-doubt calls beyond the first few, and a last line says what was cut and where to see it all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from checkpoint_mcp.journal.approval_rows import Approval
from checkpoint_mcp.journal.digest import Call, CaughtRepeat, Ran, Refused
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS
from checkpoint_mcp.journal.report import approval_commands, operator_commands
from checkpoint_mcp.session import policy_view
from checkpoint_mcp.session.journals import WorkflowDigest, settled_how
from checkpoint_mcp.session.render import code

EFFECTS_MAX_CHARS: Final = 4_000
"""The side-effects section's share of the brief's 10,000 characters."""
GROUP_ARGUMENTS: Final = 3
"""A group of up to this many repeated calls still shows each call's arguments."""
TITLE: Final = "## Side effects (journal)"
DONE_KEPT: Final = 5
"""Lines of calls done since that are kept before in-doubt calls beyond ``DOUBT_KEPT`` are cut."""
DOUBT_KEPT: Final = 3
APPROVALS_SHOWN: Final = 6
"""Approval requests told in full (waiting first, then approved, then denied); a last line counts the rest."""
APPROVAL_ARGUMENTS: Final = 160
"""An approval request's arguments are shown up to this many characters: the agent must send them again as they
were, so more of them than of a call done."""


def _when(timestamp: str | None) -> str:
    return f"{timestamp[:19].replace('T', ' ')} UTC" if timestamp else "?"


def _span(start: str | None, end: str | None) -> str:
    """``2026-12-01 09:41:02 – 09:42:10 UTC``, shortened where both ends agree."""
    first, last = _when(start), _when(end)
    if first == last:
        return first
    if first[:10] == last[:10]:
        return f"{first[:-4]} – {last[11:]}"
    return f"{first[:-4]} – {last}"


def _arguments(call: Call) -> str:
    return "«redacted»" if call.arguments is None else code(call.arguments)


def _self_settling(call: Call, how: str, suffix: str) -> str:
    if how.startswith(f"{policy_view.PROBE} "):
        probe = how.removeprefix(f"{policy_view.PROBE} ")
        means = f"it will be checked with the read-only tool {code(probe)} first and run only if it did not happen"
    elif how == policy_view.IDEMPOTENT:
        means = (
            "the server declares the tool idempotent, so it will be re-sent as is and running it again changes nothing"
        )
    else:
        means = "it will be re-sent under its idempotency key, so the upstream runs it at most once"
    return (
        f"- #{call.seq} {code(call.tool)} {_arguments(call)} — started {_when(call.started_at)}{suffix}: "
        f"sending it again is safe: {means}"
    )


def _in_doubt(call: Call, shown: str) -> str:
    commands = operator_commands(shown, call.workflow, call.seq)
    return "\n".join(
        [
            f"- #{call.seq} {code(call.tool)} {_arguments(call)} — started {_when(call.started_at)}, "
            f"workflow {code(call.workflow)}",
            f"  - it happened: {code(commands['completed'])}",
            f"  - it did not: {code(commands['failed'])}",
            f"  - to run it again: {code(commands['release'])}",
        ]
    )


def _approved_arguments(request: Approval) -> str:
    if request.arguments == REDACTED_ARGUMENTS:
        return "«redacted»"
    text = request.arguments
    return code(text if len(text) <= APPROVAL_ARGUMENTS else text[: APPROVAL_ARGUMENTS - 1] + "…")


def _approval_lines(found: Sequence[WorkflowDigest], several: bool) -> list[str]:
    """One line per approval request that changes what the agent does next, the most pressing first, capped."""
    lines: list[tuple[int, str]] = []  # (kind: 0 waiting, 1 approved, 2 denied; line)
    truncated = False
    for item in found:
        if not item.approvals:
            continue
        opened = item.approvals
        truncated = truncated or opened.truncated
        suffix = f" (workflow {code(item.journal.workflow)})" if several else ""
        for request in opened.waiting:
            approve = approval_commands(item.journal.shown, request.id)["approve"]
            lines.append(
                (
                    0,
                    f"- Waiting for approval: #{request.id} {code(request.tool)} {_approved_arguments(request)}, "
                    f"asked {_when(request.requested_at)}{suffix} — it has not run. Ask the user to run "
                    f"{code(approve)} (or to deny it), then send the same call again with the same arguments.",
                )
            )
        for request in opened.approved:
            lines.append(
                (
                    1,
                    f"- Approved, not yet sent: #{request.id} {code(request.tool)} {_approved_arguments(request)} "
                    f"(by {request.decided_by or '?'}, usable until {_when(request.expires_at)}){suffix} — send "
                    "it again with the same arguments to run it (once).",
                )
            )
        for request in opened.denied:
            why = f": {request.reason}" if request.reason else ""
            lines.append(
                (
                    2,
                    f"- Denied by {request.decided_by or '?'}{why} — #{request.id} {code(request.tool)} "
                    f"{_approved_arguments(request)}{suffix}: do not send it again; tell the user, or ask what to "
                    "do instead.",
                )
            )
    lines.sort(key=lambda kind_line: kind_line[0])
    shown = [line for _, line in lines[:APPROVALS_SHOWN]]
    hidden = len(lines) - len(shown)
    if hidden:
        journals = "; ".join(
            code(f"checkpoint journal approvals --journal {item.journal.shown}") for item in found if item.approvals
        )
        count = f"over {hidden}" if truncated else str(hidden)
        shown.append(f"- … {count} more approval request(s) not shown: {journals}")
    return shown


FAILED_HEADING: Final = (
    "### Failed: the server reported an error; it may still have acted (a partial send, a timeout inside it), so "
    "check what it did before sending again: a retry runs"
)


@dataclass(frozen=True)
class _Group:
    calls: tuple[Call, ...]

    def line(self, suffix: str) -> str:
        first, last = self.calls[0], self.calls[-1]
        mark = "✓" if not first.failed else "✗ failed (tool error)" if first.tool_error else "✗ failed"
        if len(self.calls) == 1:
            when = f"{_when(first.finished_at)}{_sub_rule(first)}"
            return f"- #{first.seq} {code(first.tool)} {_arguments(first)} {mark} {when}{suffix}"
        seqs = f"#{first.seq}–#{last.seq}" if last.seq > first.seq else f"#{first.seq}…#{last.seq}"
        when = _span(first.finished_at, last.finished_at)
        text = f"- {seqs} {code(first.tool)} ×{len(self.calls)} {mark} {when}{suffix}"
        if len(self.calls) <= GROUP_ARGUMENTS:
            text += ": " + ", ".join(_arguments(c) for c in self.calls)
        return text


def _sub_rule(call: Call) -> str:
    """`` (policy rule `tools.start_process.when.push`)`` for a call a sub-rule of its tool's table decided (which
    kind of command it was), else nothing: a tool's own table is the usual case and says nothing new."""
    return f" (policy rule {code(call.rule)})" if call.rule is not None and ".when." in call.rule else ""


def _groups(calls: Sequence[Call]) -> list[_Group]:
    groups: list[list[Call]] = []
    for call in calls:
        previous = groups[-1][-1] if groups else None
        if previous is not None and (previous.workflow, previous.tool, previous.failed) == (
            call.workflow,
            call.tool,
            call.failed,
        ):
            groups[-1].append(call)
        else:
            groups.append([call])
    return [_Group(tuple(g)) for g in groups]


def _tools(counts: dict[str, int]) -> str:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{tool} ×{count:,}" for tool, count in ranked)


_REPEAT_WORDS: Final = {
    "replayed": "answered with the first result",
    "refused": "refused",
    "in_doubt": "refused, the first is in doubt",
    "in_flight": "refused, the first was still running",
    "ran_again": "run again, the first had failed",
    "confirm_asked": "refused until sent again to confirm",
    "confirmed": "confirmed and run again",
}


def _repeats(repeats: Sequence[CaughtRepeat], suffix: str) -> list[str]:
    """One line per call the agent sent again and the tool policy caught (counted, newest action)."""
    counted: dict[tuple[str, int, str], list[str]] = {}
    for repeat in repeats:
        counted.setdefault((repeat.workflow, repeat.seq, repeat.tool), []).append(repeat.action)
    lines = []
    for (_, seq, tool), actions in counted.items():
        words = _REPEAT_WORDS.get(actions[-1], actions[-1])
        once = "" if actions[-1] in ("ran_again", "confirmed") else "; it ran once, do not send it again"
        caught = f"was sent again {len(actions)}× and caught by the tool policy ({words})"
        lines.append(f"- #{seq} {code(tool)} {caught}{once}{suffix}")
    return lines


FAILED_SHOWN: Final = 5
"""Lines of failed calls told (newest last); a first line counts the rest."""


def _ran(ran: Sequence[Ran], suffix: str) -> list[str]:
    """One line per tool whose repeats its policy lets run: how many, the first and the last."""
    lines = []
    for item in ran:
        seqs = f"#{item.first}" if item.count == 1 else f"#{item.first}…#{item.last}"
        lines.append(f"- {code(item.tool)} ×{item.count:,} ({seqs}){suffix}")
    return lines


def _refused(refused: Sequence[Refused], suffix: str) -> list[str]:
    """One line per tool a limit or budget refused: how often, and when the next call may run."""
    by_tool: dict[str, list[Refused]] = {}
    for item in refused:
        by_tool.setdefault(item.tool, []).append(item)
    lines = []
    for tool, items in by_tool.items():
        newest = items[-1]
        what = {"limit": "its limit", "budget": "its budget"}.get(newest.reason, "its budget (no amount)")
        after = f"; the next may run after {newest.runs_again_after}" if newest.runs_again_after else ""
        lines.append(
            f"- {code(tool)} refused by {what} {len(items)}×, last {_when(newest.at)}: it did not run{after}{suffix}"
        )
    return lines


def section(found: Sequence[WorkflowDigest], limit: int = EFFECTS_MAX_CHARS, *, since_checkpoint: bool = True) -> str:
    """The section's markdown, at most ``limit`` characters; empty when the journals have nothing to say.

    ``since_checkpoint`` False: there is no session checkpoint, and every call the journals hold is told as done.
    """
    readable = [(item.journal, item.digest, item.settles) for item in found if item.digest is not None]
    several = len(readable) > 1
    approvals = _approval_lines(found, several)
    doubt: list[str] = []
    safe: list[str] = []
    flying: list[str] = []
    done: list[tuple[str, int, str]] = []  # (line, calls in it, tool), newest last across workflows
    failed: list[str] = []
    ran: list[str] = []
    refused: list[str] = []
    before: list[str] = []
    settled: list[str] = []
    omitted: dict[str, int] = {}
    commands: list[str] = []
    for journal, digest, settles in readable:
        assert digest is not None
        suffix = f" (workflow {code(journal.workflow)})" if several else ""
        doubt += [_in_doubt(call, journal.shown) for call in digest.in_doubt if call.tool not in settles]
        safe += [_self_settling(c, settles[c.tool], suffix) for c in digest.in_doubt if c.tool in settles]
        settled += [
            f"- #{s.seq} {code(s.tool or '?')} — {settled_how(s)}, {_when(s.at)}{suffix}" for s in digest.settled
        ]
        if digest.in_flight:
            calls = ", ".join(f"#{c.seq} {code(c.tool)}" for c in digest.in_flight)
            who = f"a live proxy ({digest.owner})" if digest.owner else "a live proxy of another session"
            flying.append(f"- In flight now, {who} waits for the answer, do not send again: {calls}{suffix}")
        groups = _groups(digest.done)
        done += [
            (group.line(suffix), len(group.calls), group.calls[0].tool) for group in groups if not group.calls[0].failed
        ]
        failed += [group.line(suffix) for group in groups if group.calls[0].failed]
        ran += _ran(digest.ran, suffix)
        refused += _refused(digest.refused, suffix)
        flying += _repeats(digest.repeats, suffix)
        told = sum(item.count for item in digest.ran)  # told per tool, below
        unread = digest.done_total - len(digest.done) - told
        if unread > 0:
            fetched = {c.tool: 0 for c in digest.done}
            for call in digest.done:
                fetched[call.tool] += 1
            for item in digest.ran:
                fetched[item.tool] = fetched.get(item.tool, 0) + item.count
            for tool, count in digest.done_by_tool.items():
                left = count - fetched.get(tool, 0)
                if left > 0:
                    omitted[tool] = omitted.get(tool, 0) + left
        if (digest.in_doubt or digest.in_flight or digest.done_total) and any(digest.before.values()):
            counted = f"{digest.before.get('completed', 0):,} completed, {digest.before.get('failed', 0):,} failed"
            before.append(f"{code(journal.workflow)}: {counted}" if several else counted)
        if digest.in_doubt or digest.in_flight or digest.done_total or digest.settled:
            commands.append(f"checkpoint journal show --journal {journal.shown} {journal.workflow}")
    if not any((doubt, safe, flying, done, omitted, settled, approvals, failed, ran, refused)):
        return ""
    if len(failed) > FAILED_SHOWN:
        failed = [f"- … {len(failed) - FAILED_SHOWN} earlier failed call(s) not shown", *failed[-FAILED_SHOWN:]]
    tail = _Tail(
        tuple(settled),
        tuple(before),
        tuple(safe),
        since_checkpoint,
        tuple(approvals),
        tuple(failed),
        tuple(ran),
        tuple(refused),
    )
    return _fit(doubt, flying, done, omitted, tail, commands, limit)


@dataclass(frozen=True)
class _Tail:
    """What is never cut: the in-doubt calls that settle themselves, the calls settled automatically, what was
    done before the save, whether there is a save at all, and the approval requests (already capped)."""

    settled: tuple[str, ...]
    before: tuple[str, ...]
    safe: tuple[str, ...] = ()
    since_checkpoint: bool = True
    approvals: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    ran: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


def _render(
    doubt: Sequence[str],
    doubt_hidden: int,
    flying: Sequence[str],
    done: Sequence[tuple[str, int, str]],
    omitted: dict[str, int],
    tail: _Tail,
    note: str,
) -> str:
    lines = [TITLE]
    if doubt or doubt_hidden:
        lines += [
            "### ⚠ In doubt: do not redo before it is resolved",
            "These calls were in flight when their proxy stopped: they may or may not have happened. Do not call "
            "them again, under this step or any other, until someone has checked the upstream and recorded what "
            "happened with one of these commands:",
            *doubt,
        ]
        if doubt_hidden:
            lines.append(f"- … {doubt_hidden} more call(s) in doubt not shown")
    if tail.approvals:
        lines += [
            "### Approvals: these calls run only on a person's approval of their exact arguments",
            *tail.approvals,
        ]
    if tail.safe:
        lines += [
            "### In doubt, settled by the tool policy when sent again",
            "These calls were in flight when their proxy stopped, but their tool policy can settle them: if the "
            "step still needs the call, send it again with the same arguments. Should the proxy still answer that "
            "it is in doubt, the policy could not tell: then wait for an operator to resolve it.",
            *tail.safe,
        ]
    if done or omitted or flying:
        since = "since the checkpoint" if tail.since_checkpoint else "so far, as the journal records it"
        lines.append(f"### Done {since} (newest last): these already happened, do not redo them")
        if omitted:
            total = sum(omitted.values())
            lines.append(f"- … {total:,} earlier call(s) not shown: {_tools(omitted)}")
        lines += [line for line, _, _ in done]
        lines += flying
    if tail.failed:
        lines.append(FAILED_HEADING)
        lines += tail.failed
    if tail.ran:
        lines.append(
            "### Also ran, and their repeats run (the tool policy says so): check what they changed before redoing"
        )
        lines += tail.ran
    if tail.refused:
        lines.append("### Refused by a limit or budget of the tool policy: these did not run")
        lines += tail.refused
    if tail.settled:
        lines.append("### Settled automatically by the tool policy (no operator step): do not redo them")
        lines += tail.settled
    if tail.before:
        lines.append(f"Before the checkpoint: {'; '.join(tail.before)}.")
    if note:
        lines.append(note)
    return "\n".join(lines)


def _fit(
    doubt: list[str],
    flying: list[str],
    done: list[tuple[str, int, str]],
    omitted: dict[str, int],
    tail: _Tail,
    commands: list[str],
    limit: int,
) -> str:
    """Drop the oldest calls done since, then in-doubt calls beyond the first, until the section fits."""
    text = _render(doubt, 0, flying, done, omitted, tail, "")
    if len(text) <= limit and not omitted:
        return text
    shown_doubt = list(doubt)
    kept = list(done)
    hidden = dict(omitted)
    total_done = sum(count for _, count, _ in done) + sum(omitted.values())

    def note() -> str:
        shown = sum(count for _, count, _ in kept)
        parts = [f"{shown:,} of {total_done:,} calls done since shown"]
        if len(shown_doubt) < len(doubt):
            parts.append(f"{len(shown_doubt)} of {len(doubt)} in-doubt calls shown")
        where = "; ".join(code(c) for c in commands[:3])
        return (
            f"_Side effects cut to stay within their {limit:,} characters of the brief: {', '.join(parts)}. "
            f"All of them: {where}._"
        )

    # What gives way, in order: the oldest calls done beyond the newest few, in-doubt calls beyond the first
    # few, the rest of the calls done, the in-doubt calls but the first. Then a hard cut: never more.
    steps = ((kept, DONE_KEPT), (shown_doubt, DOUBT_KEPT), (kept, 0), (shown_doubt, 1))
    for items, floor in steps:
        while True:
            text = _render(shown_doubt, len(doubt) - len(shown_doubt), flying, kept, hidden, tail, note())
            if len(text) <= limit:
                return text
            if len(items) <= floor:
                break
            if items is kept:
                _, count, tool = kept.pop(0)
                hidden[tool] = hidden.get(tool, 0) + count
            else:
                shown_doubt.pop()
    return text[:limit]
