"""`Journal.version()`: the cheap token the operator's pages poll to refresh themselves, on both backends."""

from __future__ import annotations

import json

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import FAILED_BY_OPERATOR

OPERATOR_FAILED = json.dumps({"code": FAILED_BY_OPERATOR})  # an operator's `resolve --failed`, in short


def test_the_version_stays_put_while_nothing_changes_and_moves_with_every_kind_of_change(journal: str) -> None:
    watcher, writer = open_journal(journal), open_journal(journal)
    try:
        lineage = writer.lineage("wf")
        first = watcher.version()
        assert watcher.version() == first  # reading it changes nothing

        unit = writer.unit()
        unit.reserve("wf", 1, NewCall("send", '{"to":"a"}', "sig"))
        unit.commit()
        reserved = watcher.version()
        assert reserved != first  # a call made by another process

        unit.finish("wf", 1, CallState.COMPLETED, '{"content":[]}')
        unit.commit()
        finished = watcher.version()
        assert finished != reserved  # it finished

        ownership = writer.acquire(lineage.root)
        owned = watcher.version()
        assert owned != finished  # a live owner appeared
        ownership.release()
        released = watcher.version()
        assert released != owned

        unit.reserve("wf", 2, NewCall("send", '{"to":"b"}', "sig2"))
        unit.commit()
        before_resolve = watcher.version()
        watcher.resolve("wf", 2, ResolveAction.FAILED, OPERATOR_FAILED, "alice", "host-a")
        assert watcher.version() != before_resolve  # a write through the watcher's own connection counts too
        assert watcher.version() == watcher.version()
    finally:
        watcher.close()
        writer.close()
