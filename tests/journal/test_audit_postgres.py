"""The hash chain on a real PostgreSQL server: writers on many connections to one workflow's chain take turns
(one chain, never a fork), and a v3 journal migrates into a verifiable chain."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import psycopg

from checkpoint_mcp.journal import chain, operations
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.postgres import MIGRATIONS, PostgresJournal
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.signature import call_signature

from support import done_count, effects_proxy

WRITERS = 6
ROUNDS = 15


def write_concurrently(url: str, journal_class: type[PostgresJournal]) -> None:
    """WRITERS connections, each reserving, finishing and recording events on workflow 'wf' at once."""
    setup = journal_class(url)
    setup.lineage("wf")
    setup.close()
    barrier = threading.Barrier(WRITERS)
    failures: list[BaseException] = []

    def writer(index: int) -> None:
        journal = journal_class(url)
        try:
            barrier.wait()
            for round_ in range(ROUNDS):
                seq = 1 + index * ROUNDS + round_
                unit = journal.unit()
                unit.reserve("wf", seq, NewCall("send", f'{{"n":{seq}}}', f"sig{seq}"))
                unit.commit()
                unit.finish("wf", seq, CallState.COMPLETED, f'{{"ok":{seq}}}')
                unit.record_event("wf", "note", seq, {"writer": index})
                unit.commit()
                journal.record_event("wf", "policy", seq, {"writer": index, "round": round_})
        except BaseException as exc:
            failures.append(exc)
        finally:
            journal.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures


def test_concurrent_writers_to_one_workflow_make_one_unbroken_chain(pg_url: str) -> None:
    write_concurrently(pg_url, PostgresJournal)
    journal = PostgresJournal(pg_url, create=False)
    try:
        [report] = operations.verify(journal, "wf", None)
        links = journal.links("wf")
    finally:
        journal.close()
    assert report.ok, report.breaks
    assert (report.links, report.rows) == (WRITERS * ROUNDS * 4, WRITERS * ROUNDS)
    assert len({link.prev for link in links}) == len(links)  # no two links follow the same one: no fork


class _Unlocked(PostgresJournal):
    """The journal without its workflow lock: what the lock prevents."""

    def chain_heads(self, workflows: Sequence[str]) -> dict[str, str]:
        return chain.heads_by_query(self.execute)(workflows)


def test_without_the_workflow_lock_concurrent_writers_would_fork_the_chain(pg_url: str) -> None:
    """The control experiment: the test above would catch a journal that did not serialize its writers."""
    write_concurrently(pg_url, _Unlocked)
    journal = PostgresJournal(pg_url, create=False)
    try:
        [report] = operations.verify(journal, "wf", None)
    finally:
        journal.close()
    assert not report.ok
    assert report.breaks[0].kind in ("inserted", "removed", "edited", "reordered")


def test_a_version_3_postgres_journal_migrates_into_a_chain_that_verifies(pg_url: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_url) as conn:
        for version in (1, 2, 3):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO checkpoint_meta VALUES ('application', 'checkpoint-journal'), ('schema_version', '3')"
        )
        conn.execute(
            "INSERT INTO workflows (workflow_id, root_id, created_at) VALUES ('wf', 'wf', '2026-03-01T00:00:00.000Z')"
        )
        conn.execute(
            "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at)"
            " VALUES ('wf', 1, 'send_email', '{\"to\":\"a\"}', %s, 'COMPLETED', %s, %s, %s)",
            (
                call_signature("send_email", {"to": "a"}),
                '{"content":[{"type":"text","text":"sent to a (v3)"}],"isError":false}',
                "2026-03-01T00:00:00.000Z",
                "2026-03-01T00:00:01.000Z",
            ),
        )
    with effects_proxy(pg_url, tmp_path, "--workflow-id", "wf") as p:
        assert p.call("send_email", {"to": "a"}, seq=1)["result"]["content"][0]["text"] == "sent to a (v3)"
        p.call("send_email", {"to": "b"})
        p.close()
    assert done_count(tmp_path / "effects.jsonl") == 1
    journal = PostgresJournal(pg_url, create=False)
    try:
        [report] = operations.verify(journal, "wf", None)
        assert report.ok, report.breaks
        assert (report.start, report.rows) == ("migration", 2)
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a pre-migration row edited afterwards is caught
            conn.execute("UPDATE calls SET outcome = '{}' WHERE workflow_id = 'wf' AND seq = 1")
        [report] = operations.verify(journal, "wf", None)
    finally:
        journal.close()
    assert [(b.kind, b.seq) for b in report.breaks] == [("edited", 1)]
