"""A PostgreSQL commit's statements as arrays: one statement per kind of row, whatever the size of the batch.

A gateway's commit carries the calls of every request that arrived while the one before it ran: tens of new
calls and as many finishes on a busy replica. One statement per row cost a statement's work on both sides for
each (psycopg binds and queues it, PostgreSQL parses, plans and runs it), and a text that changed with the row
count was parsed again by psycopg every time. Here each kind of row is one statement of fixed text whose
parameters are arrays, one per column, sent in binary (the text format escapes every element with a regular
expression, which cost more than the statements saved) and expanded by ``unnest``: the call rows, the finishes
(which return the keys of the rows they changed, where a statement per finish returned a row count), and the
chain's links (inserted in the order given, which is the chain's order: ``WITH ORDINALITY … ORDER BY``).

A group of fewer than ``ARRAY_ROWS`` rows goes row by row as before: dumping an array costs more than a row's
statement, and a lone agent's commits hold one call each.

The line psycopg logs itself when a write's pipeline ends on a broken connection is told here as ours (one line:
what happened and what the journal does next), for every PostgreSQL journal that imports this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.rows import FINISH_CALL, INSERT_CALL
from checkpoint_mcp.journal.sql import EVENT, Group

logger = logging.getLogger(__name__)

ARRAY_ROWS = 4  # a group of this many rows or more goes as arrays (measured: ~0.2 against ~0.36 ms a call at 8)

Execute = Callable[[str, Sequence[Any]], Any]
ExecuteMany = Callable[[str, Sequence[Sequence[Any]]], None]

INSERT_CALLS = (
    "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at, idempotency_key, replica_id,"
    " identity, repeat_rule, rule) SELECT w, s, t, a, g, 'PENDING', st, k, r, i, rr, ru FROM unnest(%b::text[],"
    " %b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[],"
    " %b::text[]) AS u(w, s, t, a, g, st, k, r, i, rr, ru)"
)
"""``INSERT_CALL`` for every row at once (its parameters, column by column)."""

FINISH_CALLS = (
    "UPDATE calls SET state = u.state, outcome = u.outcome, finished_at = u.at, tool_error = u.e"
    " FROM unnest(%b::text[], %b::text[], %b::text[], %b::int[], %b::text[], %b::bigint[])"
    " AS u(state, outcome, at, e, w, s)"
    " WHERE calls.workflow_id = u.w AND calls.seq = u.s AND calls.state = 'PENDING'"
    " RETURNING calls.workflow_id, calls.seq"
)
"""``FINISH_CALL`` for every row at once; returns the key of each call it finished (one still PENDING)."""

INSERT_LINKS = (
    "INSERT INTO events (workflow_id, seq, kind, detail, at, prev_hash, hash)"
    " SELECT w, s, k, d, a, p, h FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::text[], %b::text[],"
    " %b::text[], %b::text[]) WITH ORDINALITY AS u(w, s, k, d, a, p, h, n) ORDER BY n"
)
"""Every link of a commit, in the order given (the events' ids follow it)."""


def columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Rows (at least one) as lists, one per column: an array parameter each."""
    return [list(column) for column in zip(*rows, strict=True)]


class Finishes:
    """The finishes of one group, sent as one statement; whether each changed its row is known once read."""

    def __init__(self, execute: Execute, rows: list[tuple[Any, ...]]) -> None:
        """Queue the statement (in the open pipeline)."""
        self._cursor = execute(FINISH_CALLS, columns(rows))
        self._changed: set[tuple[str, int]] | None = None

    def changed(self, params: tuple[Any, ...]) -> bool:
        """Whether the finish with these parameters changed its call (it was still PENDING)."""
        if self._changed is None:
            self._changed = {(workflow, int(seq)) for workflow, seq in self._cursor.fetchall()}
        return (params[4], params[5]) in self._changed


_FINISH_ONE = FINISH_CALL.replace("?", "%s")


class OneFinish:
    """A finish sent as a statement of its own (a small group, or one that finishes a call twice)."""

    def __init__(self, execute: Execute, params: tuple[Any, ...]) -> None:
        self._cursor = execute(_FINISH_ONE, params)

    def changed(self, params: tuple[Any, ...]) -> bool:
        return bool(self._cursor.rowcount > 0)


Pending = list[tuple[Event, "Finishes | OneFinish | None", tuple[Any, ...]]]


def queue_groups(execute: Execute, execute_many: ExecuteMany, groups: list[Group]) -> Pending:
    """Queue ``groups``' statements in the open pipeline: each event, with the finish it records and its
    parameters (an event counts only if that finish changed its row: a call an operator resolved meanwhile stays
    as it is). Calls and finishes go as arrays; other statements (rare: branches, releases) one row each."""
    pending: Pending = []
    for sql, rows, events in groups:
        if sql is FINISH_CALL:
            if len(rows) >= ARRAY_ROWS and len({(params[4], params[5]) for params in rows}) == len(rows):
                finishes: Finishes | OneFinish = Finishes(execute, rows)
                pending.extend((event, finishes, params) for params, event in zip(rows, events, strict=True) if event)
                continue
            for params, event in zip(rows, events, strict=True):  # few, or one call finished twice: one by one
                one = OneFinish(execute, params)
                if event is not None:
                    pending.append((event, one, params))
            continue
        if sql is INSERT_CALL and len(rows) >= ARRAY_ROWS:
            execute(INSERT_CALLS, columns(rows))
        elif sql is not EVENT:
            execute_many(sql, rows)
        pending.extend((event, None, ()) for event in events if event is not None)
    return pending


def recorded(pending: Pending) -> list[Event]:
    """The events whose write took effect (read once the pipeline has run)."""
    return [event for event, finish, params in pending if finish is None or finish.changed(params)]


# ---- psycopg's own line about a pipeline on a broken connection --------------------------------------------

_PIPELINE_END = "error ignored terminating %r: %s"  # psycopg's own warning (psycopg/_pipeline.py)


class _PipelineEndInOurWords(logging.Filter):
    """psycopg warns on its own logger when a pipeline ends on a broken connection while an error is already on
    its way out of it (``error ignored terminating <psycopg.Pipeline [BAD]>: …``), a line that reached the
    operator without our prefix and without what the journal does next. It is told here, once, as ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _PIPELINE_END:
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        cause = str(args[-1]).strip().splitlines()[0] if args and str(args[-1]).strip() else "no reason given"
        logger.warning(
            "the journal's PostgreSQL connection broke during a pipelined write (%s): the write's transaction died "
            "with it; the journal reconnects, and sends the write again if it had not reached COMMIT, else reports "
            "it failed",
            cause,
        )
        return False


logging.getLogger("psycopg").addFilter(_PipelineEndInOurWords())
