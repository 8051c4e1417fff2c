"""The approval requests' HTML from a real journal, without a browser: escaping, the redacted marker, an expired
grant, who asked, and how many decided requests one page draws."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.ui import pages, views

from support import ProxyProcess, server_cmd

HOSTILE = "<script>alert(1)</script>"
LINKS = pages.Links("/", "/workflow", "/call", "/resolve", "/version", approvals="/approvals", decide="/decide")
PAGE = pages.Page(LINKS, "nonce123", "v1", "/tmp/j.db")


def store(location: str) -> Any:
    journal = open_journal(location)
    return journal


def ask(journal: Any, workflow: str, arguments: str, who: dict[str, Any], key: str) -> int:
    made = journal.approvals.request_approval(workflow, "send_email", arguments, key, None, who, 60)
    return int(made.id)


def test_what_the_agent_and_the_operator_wrote_is_escaped_on_every_page_that_shows_requests(tmp_path: Path) -> None:
    journal = store(str(tmp_path / "j.db"))
    try:
        journal.lineage(HOSTILE)
        arguments = json.dumps({"to": HOSTILE}, separators=(",", ":"))
        waiting = ask(journal, HOSTILE, arguments, {"client": {"name": HOSTILE, "version": "1"}}, "s1")
        denied = ask(journal, HOSTILE, arguments, {"pid": 1}, "s2")
        journal.approvals.decide_approval(denied, False, HOSTILE, HOSTILE)
        found, known = views.approvals(journal), frozenset(s.workflow for s in journal.workflows())
        timeline = views.timeline(journal, HOSTILE)
    finally:
        journal.close()
    assert [a.id for a in found] == [waiting, denied]  # the waiting one first
    documents = [
        pages.approvals_page(PAGE, found, known, "csrf-value", utc_now()),
        pages.workflow_page(PAGE, timeline, "", csrf="csrf-value", now=utc_now()),
    ]
    for html in documents:
        assert "alert(1)" in html
        assert HOSTILE not in html
        assert html.count('name="csrf" value="csrf-value"') == 2  # Approve and Deny of the one waiting request
        assert f"denied by {HOSTILE}" not in html


def test_a_request_of_a_proxy_that_redacts_arguments_shows_the_marker_never_the_arguments(tmp_path: Path) -> None:
    location = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", location, "--policy", str(policy)]
    with ProxyProcess(*argv, "--redact-args-in-journal", env={"EFFECTS_FILE": str(tmp_path / "e.jsonl")}) as proxy:
        proxy.initialize()
        assert "error" in proxy.call("send_email", {"to": "secret-customer@example.com"})
        assert proxy.close() == 0, proxy.stderr
    journal = store(location)
    try:
        found, known = views.approvals(journal), frozenset(s.workflow for s in journal.workflows())
    finally:
        journal.close()
    html = pages.approvals_page(PAGE, found, known, "csrf-value", utc_now())
    assert "«redacted»: the proxy ran with --redact-args-in-journal" in html
    assert "secret-customer" not in html
    # Who asked: the client's name and version, the proxy (a replica of the journal: it shares its workflow with the
    # project's other sessions, docs/sessions.md), its pid and host.
    assert re.search(r"test 0 \(replica [0-9a-f]+ pid \d+ on ", html), html


def test_a_grant_past_its_time_shows_as_expired_without_forms(tmp_path: Path) -> None:
    journal = store(str(tmp_path / "j.db"))
    try:
        granted = ask(journal, "orders", '{"to":"ann"}', {"replica": "r-7", "pid": 5, "host": "h"}, "s1")
        journal.approvals.decide_approval(granted, True, "alice")
        with journal.transaction():  # age the grant instead of sleeping
            journal.execute("UPDATE approvals SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", (granted,))
        found = views.approvals(journal)
    finally:
        journal.close()
    html = pages.approvals_page(PAGE, found, frozenset(), "csrf-value", utc_now())
    assert f'data-approval="{granted}" data-state="expired"' in html
    assert f"approval #{granted} expired unused" in html
    assert "replica r-7 pid 5 on h" in html
    assert 'name="csrf"' not in html  # nothing left to decide
    assert 'href="/workflow' not in html  # a workflow with no page is named, not linked


def test_the_list_draws_every_waiting_request_and_the_newest_decided_ones_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "APPROVALS_WINDOW", 3)  # the rule, not the size: a few rows show it
    journal = store(str(tmp_path / "j.db"))
    try:
        decided = [ask(journal, "orders", f'{{"n":{n}}}', {}, f"d{n}") for n in range(5)]
        for approval in decided:
            journal.approvals.decide_approval(approval, False, "alice")
        waiting = [ask(journal, "orders", f'{{"w":{n}}}', {}, f"w{n}") for n in range(4)]
        found = views.approvals(journal)
    finally:
        journal.close()
    html = pages.approvals_page(PAGE, found, frozenset(), "csrf-value", utc_now())
    assert all(f'id="approval-{w}"' in html for w in waiting)
    assert [int(n) for n in re.findall(r'data-approval="(\d+)" data-state="denied"', html)] == decided[:1:-1]
    assert "The newest 3 of 5: <code>checkpoint journal approvals</code> lists them all." in html
