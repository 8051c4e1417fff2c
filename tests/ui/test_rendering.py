"""The pages' HTML and SVG from a real journal, without a browser: escaping, ordering, the axis, the docs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.ui import pages, views
from checkpoint_mcp.ui.timeline import span_text, timeline_svg

ROOT = Path(__file__).parents[2]
HOSTILE = "<script>alert(1)</script>"
LINKS = pages.Links("/", "/workflow", "/call", "/resolve", "/version")
PAGE = pages.Page(LINKS, "nonce123", "v1", "/tmp/j.db")


def journal_with(tmp_path: Path) -> str:
    location = str(tmp_path / "j.db")
    j = open_journal(location)
    try:
        j.lineage(HOSTILE)
        j.lineage("quiet")
        unit = j.unit()
        unit.reserve("quiet", 1, NewCall("send", '{"to":"a"}', "s0"))
        unit.commit()
        unit.finish("quiet", 1, CallState.COMPLETED, '{"content":[]}')
        unit.reserve(HOSTILE, 1, NewCall(HOSTILE, '{"x":"' + HOSTILE.replace('"', '\\"') + '"}', "s1"))
        unit.commit()
    finally:
        j.close()
    return location


def test_names_and_arguments_from_the_journal_are_escaped_everywhere(tmp_path: Path) -> None:
    j = open_journal(journal_with(tmp_path))
    try:
        overview = views.overview(j)
        timeline = views.timeline(j, HOSTILE)
        view = views.call_view(j, HOSTILE, 1)
    finally:
        j.close()
    svg = timeline_svg(timeline, datetime.now(UTC), LINKS.record, LINKS.workflow)
    documents = [
        pages.workflows_page(PAGE, overview),
        pages.workflow_page(PAGE, timeline, svg),
        pages.call_page(PAGE, view, "csrf-value"),
    ]
    for html in documents:
        assert "alert(1)" in html  # shown ...
        assert HOSTILE not in html  # ... but never as markup
        assert len(re.findall(r"<script\b", html)) == 1  # only the page's own refresh script
        assert '<script nonce="nonce123">' in html


def test_calls_in_doubt_come_first_and_their_lineage_leads_the_list(tmp_path: Path) -> None:
    j = open_journal(journal_with(tmp_path))
    try:
        overview = views.overview(j)
    finally:
        j.close()
    assert [(item.summary.workflow, item.record.seq) for item in overview.in_doubt] == [(HOSTILE, 1)]
    assert [row.summary.workflow for row in overview.tree] == [HOSTILE, "quiet"]  # though "quiet" is newer


def test_every_form_carries_the_csrf_token_and_posts(tmp_path: Path) -> None:
    j = open_journal(journal_with(tmp_path))
    try:
        view = views.call_view(j, HOSTILE, 1)
    finally:
        j.close()
    html = pages.call_page(PAGE, view, "csrf-value")
    forms = re.findall(r"<form\b[^>]*>.*?</form>", html, re.S)
    assert len(forms) == 3
    for form in forms:
        assert 'method="post"' in form
        assert '<input type="hidden" name="csrf" value="csrf-value">' in form


def test_axis_offsets_read_in_the_unit_that_fits() -> None:
    assert [span_text(s) for s in (0.25, 1.5, 720, 10800)] == ["+250 ms", "+1.5 s", "+12 min", "+3.0 h"]


def test_the_readme_links_the_three_screenshots_and_the_ui_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in ("docs/ui-workflows.png", "docs/ui-timeline.png", "docs/ui-call.png", "docs/ui.md"):
        assert f"]({name})" in readme, name
        assert (ROOT / name).is_file(), name


def test_a_long_workflow_is_paged_newest_calls_first(tmp_path: Path) -> None:
    j = open_journal(str(tmp_path / "j.db"))
    try:
        j.lineage("long")
        unit = j.unit()
        for seq in range(1, 6):
            unit.reserve("long", seq, NewCall("send", "{}", f"s{seq}"))
            unit.finish("long", seq, CallState.COMPLETED, '{"content":[]}')
        unit.commit()
        last = views.timeline(j, "long", size=2)
        middle = views.timeline(j, "long", start=2, size=2)
    finally:
        j.close()
    assert [r.record.seq for r in last.rows] == [4, 5]
    assert (last.total, last.earlier, last.later) == (5, 2, None)
    assert [r.record.seq for r in middle.rows] == [2, 3]
    assert (middle.earlier, middle.later) == (1, 4)
    svg = timeline_svg(middle, datetime.now(UTC), LINKS.record, LINKS.workflow)
    html = pages.workflow_page(PAGE, middle, svg)
    assert "2 of 5 calls, from #2." in html
    assert 'href="/workflow?id=long&amp;start=1">← earlier calls' in html
    assert 'href="/workflow?id=long&amp;start=4">later calls →' in html
