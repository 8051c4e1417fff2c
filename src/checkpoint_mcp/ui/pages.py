"""The operator's pages as HTML text: workflows, a workflow's timeline, a call. Pure: views in, text out.

Every page is complete without JavaScript. The one inline script (it carries the page's CSP nonce) polls the
journal's version and reloads the page when it changes, unless the operator is typing into a form, when it
only says so. Styles are inline too: nothing is loaded from anywhere.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any, NamedTuple
from urllib.parse import urlencode

from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.base import Resolution, WorkflowSummary
from checkpoint_mcp.journal.notes import PolicyNote, note_text
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.report import call_duration_text, lineage_text, short_arguments
from checkpoint_mcp.refusals import FAILED_BY_OPERATOR
from checkpoint_mcp.ui import approval_list
from checkpoint_mcp.ui.views import APPROVALS_WINDOW, CallView, Overview, Timeline, in_doubt

POLL_MILLISECONDS = 1000

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#20262e;color:#fff;padding:10px 24px;display:flex;gap:18px;align-items:baseline}
header a{color:#fff;text-decoration:none;font-weight:600}header .where{color:#aab3bf;font-size:12px}
main{padding:16px 24px;max-width:1200px}h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:22px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:8px}
th,td{text-align:left;padding:5px 9px;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#eef0f3;font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.03em}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.time{white-space:nowrap}
code,pre{font:12px/1.4 ui-monospace,Menlo,monospace}
pre{background:#fff;border:1px solid #e3e6ea;padding:8px 10px;overflow:auto;max-height:360px;margin:4px 0}
.state{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff}
.s-COMPLETED{background:#2e7d32}.s-FAILED{background:#c62828}.s-PENDING{background:#ef8f00}.s-FLIGHT{background:#1565c0}
.doubt{background:#fff4e0}.alert{border-left:4px solid #ef8f00;background:#fff4e0;padding:8px 12px;margin:10px 0}
.error{border-left:4px solid #c62828;background:#fdecea;padding:8px 12px;margin:10px 0}
.ok{border-left:4px solid #2e7d32;background:#e8f5e9;padding:8px 12px;margin:10px 0}
.muted{color:#69727d}.inherited td{color:#69727d}.depth{display:inline-block}
dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:0}dt{font-weight:600;color:#454c55}
form.resolve{background:#fff;border:1px solid #e3e6ea;padding:10px 12px;margin:8px 0}
form.resolve textarea,form.resolve input[type=text]{width:100%;box-sizing:border-box;font:12px ui-monospace,monospace}
button{font-weight:600;padding:4px 12px;margin-top:6px;cursor:pointer}
#changed{display:none}#changed.show{display:block}
svg.timeline{background:#fff;border:1px solid #e3e6ea;max-width:100%;height:auto}
svg .label{font:12px ui-monospace,monospace;fill:#1b1f24}svg .inherited .label{fill:#8a929c}
svg .inherited rect{opacity:.45}svg .tick,svg .axis-title,svg .legend{font:11px system-ui,sans-serif;fill:#5b636d}
svg .grid{stroke:#eceef1}svg .row-hit{fill:transparent}svg a.call:hover .row-hit{fill:#f1f4f8}
svg .fork-line{stroke:#6a1b9a;stroke-dasharray:5 4}svg .fork-label{font:11px system-ui,sans-serif;fill:#6a1b9a}
svg .fork-path{stroke:#6a1b9a;fill:none;stroke-width:1.5}
svg .approval-wait{stroke:#1565c0;stroke-dasharray:2 3;stroke-width:1.5}header nav a{font-weight:400;margin-right:12px}
"""
STYLE += approval_list.STYLE

REFRESH = """
(function(){var b=document.body,seen=b.dataset.version,url=b.dataset.versionUrl;
function busy(){var a=document.activeElement;if(a&&/^(TEXTAREA|INPUT)$/.test(a.tagName))return true;
var f=document.querySelectorAll("textarea,input[type=text]");
for(var i=0;i<f.length;i++)if(f[i].value!==f[i].defaultValue)return true;
return false}
function poll(){fetch(url,{cache:"no-store",credentials:"same-origin"}).then(function(r){return r.ok?r.json():null})
.then(function(j){if(j&&j.version!==seen){if(busy()){document.getElementById("changed").className="alert show"}
else{location.reload();return}}setTimeout(poll,{poll})}).catch(function(){setTimeout(poll,{retry})})}
setTimeout(poll,{poll})})();
""".replace("{poll}", str(POLL_MILLISECONDS)).replace("{retry}", str(POLL_MILLISECONDS * 3))


class Links(NamedTuple):
    """Where the pages live, as the app resolved them for this request (under whatever mount path)."""

    home: str
    workflow_base: str
    call_base: str
    resolve: str
    version: str
    settle: str | None = None  # None: the pages were started without a tool policy and an upstream
    approvals: str = ""  # the Approvals page
    decide: str = ""  # where the Approve / Deny forms post

    def workflow(self, workflow: str, start: int | None = None) -> str:
        """The page of ``workflow`` (its calls from sequence ``start`` on, if given)."""
        query: dict[str, object] = {"id": workflow} if start is None else {"id": workflow, "start": start}
        return f"{self.workflow_base}?{urlencode(query)}"

    def call(self, workflow: str, seq: int) -> str:
        """The page of call ``seq`` of ``workflow``."""
        return f"{self.call_base}?{urlencode({'workflow': workflow, 'seq': seq})}"

    def record(self, record: CallRecord) -> str:
        """The page of ``record``, in the workflow it was written to."""
        return self.call(record.workflow, record.seq)


class Page(NamedTuple):
    """What every page needs besides its content."""

    links: Links
    nonce: str
    version: str | None  # None: the page does not refresh itself (a page that only reports an error)
    location: str  # the journal, safe to show


def layout(page: Page, title: str, body: str) -> str:
    """A whole HTML document around ``body``."""
    script = "" if page.version is None else f'<script nonce="{escape(page.nonce)}">{REFRESH}</script>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)} · Checkpoint journal</title><style>{STYLE}</style></head>"
        f'<body data-version="{escape(page.version or "")}" data-version-url="{escape(page.links.version)}">'
        f'<header><a href="{escape(page.links.home)}">Checkpoint journal</a>'
        + (f'<nav><a href="{escape(page.links.approvals)}">Approvals</a></nav>' if page.links.approvals else "")
        + f'<span class="where">{escape(page.location)}</span></header><main>'
        '<div id="changed" role="status">The journal changed since this page was drawn. '
        '<a href="">Reload</a> to see it (your form input would be lost).</div>'
        f"{body}</main>{script}</body></html>"
    )


def _state(record: CallRecord, live: bool) -> str:
    if record.state is CallState.PENDING:
        return (
            '<span class="state s-FLIGHT">in flight</span>' if live else '<span class="state s-PENDING">in doubt</span>'
        )
    return f'<span class="state s-{record.state.value}">{record.state.value.lower()}</span>'


def _owner(summary: WorkflowSummary) -> str:
    return escape(summary.owner.describe()) if summary.owner else '<span class="muted">none</span>'


def _a(href: str, text: str) -> str:
    return f'<a href="{escape(href)}">{escape(text)}</a>'


def workflows_page(page: Page, overview: Overview) -> str:
    """Calls in doubt first (they need the operator), then every workflow, forks under their parents."""
    parts = ["<h1>Workflows</h1>"]
    if overview.waiting:
        count = len(overview.waiting)
        said = f"{count} approval requests wait" if count > 1 else "1 approval request waits"
        link = _a(page.links.approvals, "decide them" if count > 1 else "decide it")
        parts.append(f'<div class="alert" id="approvals-waiting">{said} for a person: {link}.</div>')
    if overview.in_doubt:
        rows = "".join(
            f'<tr class="doubt"><td>{_a(page.links.workflow(item.summary.workflow), item.summary.workflow)}</td>'
            f"<td>{_a(page.links.record(item.record), f'#{item.record.seq}')}</td><td>{escape(item.record.tool)}</td>"
            f'<td class="time">{escape(item.record.started_at)}</td>'
            f"<td><code>{escape(short_arguments(item.record))}</code></td></tr>"
            for item in overview.in_doubt
        )
        parts.append(
            f'<h2 id="in-doubt">In doubt: {len(overview.in_doubt)} call(s) need you</h2>'
            '<p class="muted">In flight when their proxy stopped: they may or may not have run. Check the upstream, '
            "then resolve each one.</p>"
            f'<table class="in-doubt"><tr><th>Workflow</th><th>Call</th><th>Tool</th><th>Started</th>'
            f"<th>Arguments</th></tr>{rows}</table>"
        )
    if not overview.tree:
        parts.append('<p class="empty">The journal has no workflows yet.</p>')
        return layout(page, "Workflows", "".join(parts))
    tree_rows: list[str] = []
    principals = any(row.summary.principal is not None for row in overview.tree)  # a gateway with tokens wrote some
    for row in overview.tree:
        s = row.summary
        indent = f'<span class="depth" style="width:{row.depth * 18}px"></span>{"└ " if row.depth else ""}'
        doubtful = in_doubt(s)
        flight = s.counts.get(CallState.PENDING, 0) - doubtful
        tree_rows.append(
            f'<tr class="{"doubt" if doubtful else ""}" data-workflow="{escape(s.workflow)}">'
            f"<td>{indent}{_a(page.links.workflow(s.workflow), s.workflow)}</td><td>{escape(lineage_text(s))}</td>"
            f'<td class="num">{doubtful or ""}</td><td class="num">{flight or ""}</td>'
            f'<td class="num">{s.counts.get(CallState.COMPLETED, 0)}</td>'
            f'<td class="num">{s.counts.get(CallState.FAILED, 0)}</td>'
            f'<td class="time">{escape(s.last_activity or "-")}</td>'
            f"<td>{_owner(s)}</td>"
            + (f'<td class="principal">{escape(s.principal or "-")}</td>' if principals else "")
            + "</tr>"
        )
    parts.append(
        '<h2>All workflows</h2><table class="workflows"><tr><th>Workflow</th><th>Lineage</th><th>In doubt</th>'
        "<th>In flight</th><th>Completed</th><th>Failed</th><th>Last activity</th><th>Live owner</th>"
        + ("<th>Principal</th>" if principals else "")
        + "</tr>"
        + "".join(tree_rows)
        + "</table>"
    )
    return layout(page, "Workflows", "".join(parts))


def _note_item(note: PolicyNote) -> str:
    return f"<li>{escape(note_text(note))}</li>"


def _resolution_text(resolution: Resolution) -> str:
    return (
        f"#{resolution.seq} resolved as <b>{escape(resolution.action.value)}</b> (was "
        f"{resolution.previous_state.value}) by {escape(resolution.user)} on {escape(resolution.host)} at "
        f"{escape(resolution.at)}"
    )


def workflow_page(page: Page, timeline: Timeline, svg: str, *, notice: str = "", csrf: str = "", now: str = "") -> str:
    """The timeline chart, the table of calls below it, the forks, the approval requests and the audit trail
    (``csrf``: the token of the Approve / Deny forms; ``now``: the journal's time, to tell an expired grant)."""
    s = timeline.summary
    live = s.owner is not None
    facts = [
        f"<dt>Lineage</dt><dd>{escape(lineage_text(s))}"
        + (f" ({_a(page.links.workflow(s.parent), 'parent')})" if s.parent else "")
        + "</dd>",
        f"<dt>Created</dt><dd>{escape(s.created_at)}</dd>",
        f"<dt>Live owner</dt><dd>{_owner(s)}</dd>",
    ]
    if s.principal is not None:
        facts.append(f"<dt>Principal</dt><dd>{escape(s.principal)}</dd>")
    if timeline.forks:
        facts.append(
            "<dt>Forks</dt><dd>"
            + ", ".join(f"{_a(page.links.workflow(f.workflow), f.workflow)} at #{f.fork_seq}" for f in timeline.forks)
            + "</dd>"
        )
    rows = "".join(
        f'<tr class="{"inherited" if row.inherited else ""}{" doubt" if row.record.state is CallState.PENDING else ""}"'
        f' data-seq="{row.record.seq}"><td>{_a(page.links.record(row.record), f"#{row.record.seq}")}</td>'
        f"<td>{escape(row.record.tool)}</td><td>{_state(row.record, live)}</td>"
        f'<td class="time">{escape(row.record.started_at)}</td>'
        f'<td class="num">{escape(call_duration_text(row.record))}</td>'
        f"<td><code>{escape(short_arguments(row.record))}</code></td><td>{escape(row.record.key or '')}</td>"
        f"<td>{'↺ inherited from ' + escape(row.record.workflow) if row.inherited else ''}"
        f"{' · '.join(escape(r.action.value) + ' by ' + escape(r.user) for r in row.resolutions)}</td></tr>"
        for row in timeline.rows
    )
    table = (
        '<table class="calls"><tr><th>Seq</th><th>Tool</th><th>State</th><th>Started</th><th>Duration</th>'
        f"<th>Arguments</th><th>Key</th><th>Notes</th></tr>{rows}</table>"
        if timeline.rows
        else ""
    )
    if timeline.earlier is not None or timeline.later is not None:
        paging = [f"{len(timeline.rows)} of {timeline.total} calls, from #{timeline.rows[0].record.seq}."]
        if timeline.earlier is not None:
            paging.append(_a(page.links.workflow(s.workflow, timeline.earlier), "← earlier calls"))
        if timeline.later is not None:
            paging.append(_a(page.links.workflow(s.workflow, timeline.later), "later calls →"))
        table = f'<p class="paging">{" ".join(paging)}</p>{table}'
    audit = (
        "<h2>Resolutions</h2><ul>" + "".join(f"<li>{_resolution_text(r)}</li>" for r in timeline.resolutions) + "</ul>"
        if timeline.resolutions
        else ""
    )
    if timeline.notes:
        audit += '<h2>Tool policy</h2><ul class="notes">' + "".join(_note_item(n) for n in timeline.notes) + "</ul>"
    flash = f'<div class="ok" role="status">{escape(notice)}</div>' if notice else ""
    asked = _approvals(page, list(timeline.approvals), frozenset({s.workflow}), csrf, now, s.workflow)
    body = (
        f"<h1>Workflow <code>{escape(s.workflow)}</code></h1>{flash}<dl>{''.join(facts)}</dl>"
        f"{asked}<h2>Timeline</h2>{svg}<h2>Calls</h2>{table}{audit}"
    )
    return layout(page, s.workflow, body)


def _pretty(text: str | None) -> str:
    if text is None:
        return "-"
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _hidden(fields: dict[str, Any]) -> str:
    return "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(str(v))}">' for k, v in fields.items())


DEFAULT_RESULT = '{"content": [{"type": "text", "text": ""}]}'


def _forms(page: Page, view: CallView, csrf: str, filled: dict[str, str]) -> str:
    record = view.record
    base = {"csrf": csrf, "workflow": record.workflow, "seq": record.seq, "from": view.summary.workflow}
    forms = []
    if page.links.settle is not None and record.state is CallState.PENDING:
        forms.append(
            f'<form class="resolve" id="settle" method="post" action="{escape(page.links.settle)}">'
            f"{_hidden(base)}<b>Settle it by the tool policy.</b> Ask the tool's probe whether it ran, or send it "
            "again under its idempotency key, as the proxy would (nothing is guessed: what cannot be proven stays "
            'in doubt).<br><label><input type="checkbox" name="dry_run" value="yes"> Dry run: ask the probe, '
            "change nothing</label><br><button>Settle</button></form>"
        )
    if "completed" in view.resolvable:
        forms.append(
            f'<form class="resolve" id="resolve-completed" method="post" action="{escape(page.links.resolve)}">'
            f"{_hidden({**base, 'action': 'completed'})}<b>It ran.</b> Replays will return this result (a JSON "
            "object shaped like the tool's own result, with <code>structuredContent</code> if the tool has an "
            'output schema):<br><textarea name="result" rows="4" required>'
            f"{escape(filled.get('result', DEFAULT_RESULT))}</textarea>"
            "<button>Resolve as completed</button></form>"
        )
    if "failed" in view.resolvable:
        forms.append(
            f'<form class="resolve" id="resolve-failed" method="post" action="{escape(page.links.resolve)}">'
            f"{_hidden({**base, 'action': 'failed'})}<b>It failed.</b> Replays will return error "
            f"{FAILED_BY_OPERATOR} with this "
            f'message:<br><input type="text" name="message" value="{escape(filled.get("message", ""))}" required>'
            "<button>Resolve as failed</button></form>"
        )
    release = (
        f'<form class="resolve" id="resolve-release" method="post" action="{escape(page.links.resolve)}">'
        f"{_hidden({**base, 'action': 'release'})}<b>Release it.</b> The journal forgets the call: the next call "
        "at this sequence runs again. This is a decision to re-execute.<br>"
        '<label><input type="checkbox" name="confirm" value="yes" required> I want the next call at this sequence '
        "to run</label><br><button>Release</button></form>"
    )
    if record.state is CallState.COMPLETED:
        # A completed call is released only to let a different call take its sequence after a divergence.
        release = f"<details><summary>Release this completed call (after a divergence)</summary>{release}</details>"
    forms.append(release)
    return "".join(forms)


def call_page(
    page: Page,
    view: CallView,
    csrf: str,
    *,
    notice: str = "",
    error: str = "",
    filled: dict[str, str] | None = None,
    now: str = "",
) -> str:
    """One call in full, the divergence it was part of, its audit trail (with the approval it ran on), and the
    resolve forms (``filled``: what the operator typed into them, shown again after a refusal)."""
    record = view.record
    facts = [
        ("Workflow", _a(page.links.workflow(record.workflow), record.workflow)),
        ("State", _state(record, view.owner_live)),
        ("Tool", escape(record.tool)),
        ("Started", escape(record.started_at)),
        (
            "Finished",
            f"{escape(record.finished_at)} ({escape(call_duration_text(record))})" if record.finished_at else "-",
        ),
        ("Key", escape(record.key or "-")),
        ("Signature", f"<code>{escape(record.signature)}</code>"),
    ]
    parts = [f"<h1>Call #{record.seq} <code>{escape(record.tool)}</code></h1>"]
    if notice:
        parts.append(f'<div class="ok" role="status">{escape(notice)}</div>')
    if error:
        parts.append(f'<div class="error" role="alert">{escape(error)}</div>')
    if view.inherited:
        parts.append(
            f'<p class="muted">Inherited by {_a(page.links.workflow(view.summary.workflow), view.summary.workflow)} '
            f"from {escape(record.workflow)}: the branch replays it, it never ran there.</p>"
        )
    parts.append("<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>")
    arguments = (
        "«redacted»: the proxy ran with --redact-args-in-journal" if record.redacted else _pretty(record.arguments)
    )
    parts.append(f'<h2>Arguments</h2><pre id="arguments">{escape(arguments)}</pre>')
    heading = "Error" if record.state is CallState.FAILED else "Result"
    parts.append(f'<h2>{heading}</h2><pre id="outcome">{escape(_pretty(record.outcome))}</pre>')
    for divergence in view.divergences:
        other = divergence.received if divergence.journaled == record else divergence.journaled
        side = "came instead, and started" if other is divergence.received else "was journaled here first, in"
        lines = "\n".join(divergence.difference) or "(no difference in the arguments)"
        parts.append(
            f"<h2>Divergence</h2><p>Call {_a(page.links.record(other), f'#{other.seq} {other.tool}')} {side} "
            f"{escape(other.workflow)}. Journaled → received:</p>"
            f'<pre class="difference">{escape(lines)}</pre>'
        )
    parts.append("<h2>Audit trail</h2>")
    if view.approvals:
        parts.append(f'<ul class="approval-trail">{approval_list.trail(view.approvals, now)}</ul>')
    parts.append(
        "<ul>" + "".join(f"<li>{_resolution_text(r)}</li>" for r in view.resolutions) + "</ul>"
        if view.resolutions
        else '<p class="muted">No operator has resolved this call.</p>'
    )
    if view.notes:
        parts.append('<ul class="notes">' + "".join(_note_item(n) for n in view.notes) + "</ul>")
    parts.append("<h2>Resolve</h2>")
    if record.state is CallState.PENDING and not view.owner_live:
        parts.append(
            '<div class="alert">In doubt: this call was in flight when its proxy stopped. It may or may not '
            "have run. Check the upstream, then record what happened.</div>"
        )
    if view.owner_live:
        parts.append(
            f'<div class="alert">A live proxy owns this workflow ({_owner(view.summary)}): resolving is refused '
            "until it stops (its decisions must not change under it).</div>"
        )
    parts.append(_forms(page, view, csrf, filled or {}))
    return layout(page, f"#{record.seq} {record.tool}", "".join(parts))


def message_page(page: Page, title: str, text: str) -> str:
    """A page that only says something (no such workflow, the journal cannot be read)."""
    return layout(page, title, f'<h1>{escape(title)}</h1><div class="error" role="alert">{escape(text)}</div>')


def _approvals(page: Page, found: list[Approval], known: frozenset[str], csrf: str, now: str, back: str) -> str:
    """A workflow's approval requests: the waiting ones with their forms, then the decided ones."""
    if not found:
        return ""
    waiting = approval_list.waiting_table(found, known, page.links.workflow, page.links.decide, csrf, back)
    decided = approval_list.decided_table(found, known, page.links.workflow, now)
    waiting = waiting or '<p class="muted">None waits for a decision.</p>'
    return f'<h2 id="approvals">Approvals</h2>{waiting}' + (f"<h3>Decided</h3>{decided}" if decided else "")


def approvals_page(
    page: Page, found: list[Approval], known: frozenset[str], csrf: str, now: str, *, notice: str = "", error: str = ""
) -> str:
    """Every approval request: the pending ones first, each with its exact arguments and Approve / Deny forms,
    then those decided, used or expired (``known``: the workflows that have a page to link to)."""
    parts = ["<h1>Approvals</h1>"]
    if notice:
        parts.append(f'<div class="ok" role="status">{escape(notice)}</div>')
    if error:
        parts.append(f'<div class="error" role="alert">{escape(error)}</div>')
    waiting = approval_list.waiting_table(found, known, page.links.workflow, page.links.decide, csrf, "")
    parts.append(
        '<h2 id="waiting">Waiting for a person</h2><p class="muted">A tool policy with <code>approve</code> holds '
        "these calls until a person decides. Approve: the same call, sent again, runs once. Deny: it is refused "
        "as denied.</p>" + (waiting or '<p class="empty">No request waits.</p>')
    )
    done = [a for a in found if a.state is not ApprovalState.PENDING]
    decided = approval_list.decided_table(done[:APPROVALS_WINDOW], known, page.links.workflow, now)
    parts.append('<h2 id="decided">Decided, used or expired</h2>' + (decided or '<p class="empty">None yet.</p>'))
    if len(done) > APPROVALS_WINDOW:
        parts.append(
            f'<p class="muted">The newest {APPROVALS_WINDOW} of {len(done)}: <code>checkpoint journal approvals'
            "</code> lists them all.</p>"
        )
    return layout(page, "Approvals", "".join(parts))
