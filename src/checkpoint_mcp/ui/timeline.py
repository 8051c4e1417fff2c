"""A workflow's timeline as an SVG chart, drawn on the server: one bar per call, time across, calls down.

A bar runs from the call's start to its end, coloured by state. A PENDING call is striped: in flight (to now)
while a live proxy owns the workflow, in doubt otherwise (past the last moment the journal knows: it has no
end). Calls a branch inherited from its parent (it replayed them instead of running them) are pale and marked
↺. An operator's resolution is a diamond at the moment it was made, and the call's bar, striped, runs until
then (the journal records that moment as the call's end). The fork a branch started with is a dashed line
across the chart; a fork taken from this workflow is a line from the call where it branched to the branch's
name. A call that ran on a person's approval (a tool policy's ``approve``) has the approval's steps on its row:
a ring when it was requested, a dot when it was granted or denied (and by whom), a dotted line for the wait.
Every bar links to its call's page. Pure: text in, text out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from html import escape

from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.ui.approval_list import Event, events
from checkpoint_mcp.ui.views import Timeline, TimelineRow

WIDTH = 960
LABEL_WIDTH = 230
RIGHT_MARGIN = 120  # room for the names of forks
ROW_HEIGHT = 24
BAR_HEIGHT = 14
AXIS_HEIGHT = 34
LEGEND_HEIGHT = 30
TICKS = 5
MIN_BAR_WIDTH = 3.0
LABEL_CHARS = 30
LEGEND_LINE = 18

COLOURS = {
    CallState.COMPLETED: "#2e7d32",
    CallState.FAILED: "#c62828",
    CallState.PENDING: "#ef8f00",
}
IN_FLIGHT = "#1565c0"
RESOLUTION = "#6a1b9a"
APPROVAL = {"requested": "#fff", "granted": "#1565c0", "denied": "#c62828", "used": "#2e7d32", "expired": "#69727d"}


def parse_time(text: str) -> datetime:
    """A journal timestamp (ISO 8601 UTC, ``…Z``) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def span_text(seconds: float) -> str:
    """``+250 ms``, ``+1.5 s``, ``+12 min``, ``+3.0 h``: an offset on the axis."""
    if seconds < 1:
        return f"+{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"+{seconds:.1f} s"
    if seconds < 3600:
        return f"+{seconds / 60:.0f} min"
    return f"+{seconds / 3600:.1f} h"


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def timeline_svg(
    timeline: Timeline,
    now: datetime,
    call_link: Callable[[CallRecord], str],
    workflow_link: Callable[[str], str],
) -> str:
    """The chart for ``timeline``, as an inline ``<svg>`` element; ``now`` ends the bars of PENDING calls."""
    rows = timeline.rows
    live = timeline.summary.owner is not None
    if not rows:
        return '<p class="empty">No calls yet.</p>'
    starts = [parse_time(r.record.started_at) for r in rows]
    pending = any(r.record.state is CallState.PENDING for r in rows)
    stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    steps = [[step for approval in r.approvals for step in events(approval, stamp)] for r in rows]
    asked = [parse_time(step.at) for row_steps in steps for step in row_steps]
    moments = [
        *starts,
        *asked,
        *(parse_time(r.record.finished_at) for r in rows if r.record.finished_at),
        *(parse_time(res.at) for row in rows for res in row.resolutions),
        *([now] if pending and live else []),
    ]
    first = min([*starts, *asked])  # a request waits before its call starts
    total = max((max(moments) - first).total_seconds(), 0.001)
    if pending and not live:
        # An in-doubt call has no end: its bar runs past the last thing the journal knows, off the chart.
        total *= 1.08
    open_end = first + timedelta(seconds=total)
    ends = [parse_time(r.record.finished_at) if r.record.finished_at else open_end for r in rows]
    plot = WIDTH - LABEL_WIDTH - RIGHT_MARGIN

    def x(moment: datetime) -> float:
        return LABEL_WIDTH + (moment - first).total_seconds() / total * plot

    height = AXIS_HEIGHT + len(rows) * ROW_HEIGHT + LEGEND_HEIGHT + (LEGEND_LINE if asked else 0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="timeline of {escape(timeline.summary.workflow)}">',
        "<defs>"
        '<pattern id="striped" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="3" height="6" fill="{COLOURS[CallState.PENDING]}"/></pattern>'
        '<pattern id="striped-live" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="3" height="6" fill="{IN_FLIGHT}"/></pattern>'
        '<pattern id="striped-resolved" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="3" height="6" fill="{RESOLUTION}" opacity=".55"/></pattern>'
        "</defs>",
        f'<text x="4" y="14" class="axis-title">started {escape(first.strftime("%Y-%m-%d %H:%M:%S"))} UTC</text>',
    ]
    bottom = AXIS_HEIGHT + len(rows) * ROW_HEIGHT
    for tick in range(TICKS + 1):
        tx = LABEL_WIDTH + plot * tick / TICKS
        out.append(f'<line x1="{tx:.1f}" y1="{AXIS_HEIGHT - 6}" x2="{tx:.1f}" y2="{bottom}" class="grid"/>')
        out.append(
            f'<text x="{tx:.1f}" y="{AXIS_HEIGHT - 10}" text-anchor="middle" class="tick">'
            f"{span_text(total * tick / TICKS)}</text>"
        )
    forks_at: dict[int, list[str]] = {}
    for fork in timeline.forks:
        if fork.fork_seq is not None:
            forks_at.setdefault(fork.fork_seq, []).append(fork.workflow)
    fork_line_drawn = False
    for index, (row, start, end) in enumerate(zip(rows, starts, ends, strict=True)):
        record = row.record
        top = AXIS_HEIGHT + index * ROW_HEIGHT
        if timeline.summary.parent is not None and not row.inherited and not fork_line_drawn:
            fork_line_drawn = True
            out.append(f'<line x1="0" y1="{top}" x2="{WIDTH}" y2="{top}" class="fork-line"/>')
            out.append(
                f'<text x="{WIDTH - 4}" y="{top - 3}" text-anchor="end" class="fork-label">forked from '
                f"{escape(_short(timeline.summary.parent))} at #{timeline.summary.fork_seq}</text>"
            )
        out.append(_bar(row, x(start), x(end), top, live, call_link))
        out.append(_approval_marks(steps[index], top, x))
        for resolution in row.resolutions:
            rx, ry = x(parse_time(resolution.at)), top + ROW_HEIGHT / 2
            out.append(
                f'<path d="M{rx:.1f},{ry - 7:.1f} l7,7 l-7,7 l-7,-7 z" class="resolution" fill="{RESOLUTION}">'
                f"<title>resolved as {escape(resolution.action.value)} (was {resolution.previous_state.value}) by "
                f"{escape(resolution.user)} on {escape(resolution.host)} at {escape(resolution.at)}</title></path>"
            )
        for branch in forks_at.pop(record.seq, []) if not row.inherited else []:
            out.append(_fork_link(branch, top, workflow_link, start=x(end)))
    # Forks at a sequence with no row left here (released or collected) still get their link, at the bottom.
    for seq, branches in sorted(forks_at.items()):
        for branch in branches:
            out.append(_fork_link(branch, bottom - ROW_HEIGHT, workflow_link, f" at #{seq}", start=LABEL_WIDTH))
    out.append(_legend(bottom + 8) + (_approval_legend(bottom + 8 + LEGEND_LINE) if asked else ""))
    out.append("</svg>")
    return "".join(out)


def _bar(row: TimelineRow, left: float, right: float, top: float, live: bool, link: Callable[[CallRecord], str]) -> str:
    """One call: its label and its bar, as a link to its page, with a tooltip."""
    record, state = row.record, row.record.state
    if state is CallState.PENDING:
        fill, word = ("url(#striped-live)", "in flight") if live else ("url(#striped)", "in doubt")
    elif row.resolutions:
        # A resolution writes its own time as the call's end: the bar runs until the operator decided.
        fill, word = "url(#striped-resolved)", f"{state.value.lower()}, as an operator resolved it"
    else:
        fill, word = COLOURS[state], state.value.lower()
    if row.inherited:
        word += f", inherited from {record.workflow}: replayed here, not run"
    tooltip = f"#{record.seq} {record.tool}: {word}; started {record.started_at}"
    if record.finished_at:
        tooltip += f", finished {record.finished_at}"
    pending = state is CallState.PENDING
    bar_y, width = top + (ROW_HEIGHT - BAR_HEIGHT) / 2, max(right - left, MIN_BAR_WIDTH)
    return (
        f'<a href="{escape(link(record))}" class="call{" inherited" if row.inherited else ""}" '
        f'data-seq="{record.seq}" data-state="{state.value}"><title>{escape(tooltip)}</title>'
        f'<rect x="0" y="{top}" width="{WIDTH - RIGHT_MARGIN}" height="{ROW_HEIGHT}" class="row-hit"/>'
        f'<text x="4" y="{top + ROW_HEIGHT / 2 + 4}" class="label">'
        f"{'↺ ' if row.inherited else ''}{escape(_short(f'#{record.seq} {record.tool}'))}</text>"
        f'<rect x="{left:.1f}" y="{bar_y:.1f}" width="{width:.1f}" '
        f'height="{BAR_HEIGHT}" rx="2" fill="{fill}" stroke="{"#7a4a00" if pending else "none"}"/></a>'
    )


def _approval_marks(steps: list[Event], top: float, x: Callable[[datetime], float]) -> str:
    """A call's approval on its row: the wait as a dotted line, each step a mark with its words as a tooltip."""
    if not steps:
        return ""
    y = top + ROW_HEIGHT / 2
    places = [x(parse_time(step.at)) for step in steps]
    out = [f'<line x1="{min(places):.1f}" y1="{y}" x2="{max(places):.1f}" y2="{y}" class="approval-wait"/>']
    for step, place in zip(steps, places, strict=True):
        out.append(
            f'<circle cx="{place:.1f}" cy="{y}" r="4.5" class="approval {step.action}" fill="{APPROVAL[step.action]}" '
            f'stroke="#1b1f24" stroke-width="1.2"><title>{escape(step.text)} at {escape(step.at)}</title></circle>'
        )
    return "".join(out)


def _approval_legend(y: float) -> str:
    parts, lx = [], 4.0
    for action, text in (
        ("requested", "approval requested"),
        ("granted", "granted"),
        ("denied", "denied"),
        ("used", "used"),
    ):
        parts.append(f'<circle cx="{lx + 5}" cy="{y + 5}" r="4.5" fill="{APPROVAL[action]}" stroke="#1b1f24"/>')
        parts.append(f'<text x="{lx + 14}" y="{y + 9}" class="legend">{text}</text>')
        lx += 30 + len(text) * 7
    parts.append(f'<line x1="{lx}" y1="{y + 5}" x2="{lx + 20}" y2="{y + 5}" class="approval-wait"/>')
    parts.append(f'<text x="{lx + 26}" y="{y + 9}" class="legend">waiting for a person</text>')
    return "".join(parts)


def _fork_link(branch: str, top: float, workflow_link: Callable[[str], str], suffix: str = "", *, start: float) -> str:
    """The branch taken at this row: a line from the end of its bar to the branch's name, linking to it."""
    fx, fy = WIDTH - RIGHT_MARGIN, top + ROW_HEIGHT / 2
    name = "~" + branch.rsplit("~", 1)[1] if "~" in branch else _short(branch)
    return (
        f'<a href="{escape(workflow_link(branch))}" class="fork"><title>branch {escape(branch)}{escape(suffix)}</title>'
        f'<path d="M{start + 2:.1f},{fy} L{fx - 8},{fy} C{fx + 4},{fy} {fx + 2},{fy + 9} {fx + 16},{fy + 9}" '
        'class="fork-path"/>'
        f'<text x="{fx + 19}" y="{fy + 13}" class="fork-label">fork {escape(name)}{escape(suffix)}</text></a>'
    )


def _legend(y: float) -> str:
    items = [
        (COLOURS[CallState.COMPLETED], "completed"),
        (COLOURS[CallState.FAILED], "failed"),
        ("url(#striped)", "in doubt"),
        ("url(#striped-live)", "in flight"),
        ("url(#striped-resolved)", "until resolved"),
    ]
    parts, lx = [], 4.0
    for fill, text in items:
        parts.append(f'<rect x="{lx}" y="{y}" width="14" height="10" fill="{fill}"/>')
        parts.append(f'<text x="{lx + 18}" y="{y + 9}" class="legend">{text}</text>')
        lx += 30 + len(text) * 7
    parts.append(f'<path d="M{lx + 5},{y - 1} l6,6 l-6,6 l-6,-6 z" fill="{RESOLUTION}"/>')
    parts.append(f'<text x="{lx + 16}" y="{y + 9}" class="legend">operator resolution</text>')
    lx += 150
    parts.append(f'<text x="{lx}" y="{y + 9}" class="legend">↺ inherited from the parent (replayed, not run)</text>')
    return "".join(parts)
