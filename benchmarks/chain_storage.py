"""Where a journaled call's hash-chain links could live in SQLite: what each layout costs per call, in one run.

A journaled call makes two durable commits (WAL, ``synchronous=FULL``): its reservation (the call row and the
``reserved`` link) and its finish (the row's update and the ``completed`` link). Four layouts of those links are
measured, each in a fresh journal file made by ``SqliteJournal`` (the newest schema), then altered on a plain
``sqlite3`` connection for the layout's own columns or tables:

1. ``events`` (today): a link row in ``events`` per commit (a rowid table and its index), the chain's head
   remembered by the connection; a stale head shows as a link that did not take the next rowid.
2. The two links in the call's own row (``reserved_prev``/``reserved_hash``, ``finished_prev``/``finished_hash``),
   the head written to ``chain_heads`` (a ``WITHOUT ROWID`` table) in each commit, compare-and-set: a stale head
   changes no row.
3. The links in the call's row, the head written nowhere: a lower bound only, it cannot find a stale head.
4. ``links`` instead of ``events``: ``WITHOUT ROWID`` keyed ``(workflow_id, n)`` (one B-tree instead of a table
   and its index); a stale head makes the next link's key collide.

Two references run beside them: the call rows with no chain at all, and no SQLite at all (a 4 KiB ``pwrite`` and
an ``fdatasync`` per commit: the floor under any durable journal on this disk).

Every layout writes the same call rows (~250 bytes of arguments, ~60 of outcome) with real SHA-256 links
(``chain.append``) to one workflow, from this thread: CPU per call is ``time.thread_time()`` (user and kernel,
the fsyncs' included), wall-clock per call, and bytes written per call (``wchar`` of ``/proc/self/io``: every
``write``/``pwrite``, WAL frames and checkpoints into the database file alike). Layouts run in interleaved rounds
(a fresh random order each round, each keeping its file), the table gives medians over the rounds and each
layout's difference from ``events`` (today) paired by round. Journals go to the temp dir (``--tmp``): on a disk,
not ``/dev/shm``, where an fsync costs nothing.

Run: ``.venv/bin/python benchmarks/chain_storage.py [--rounds N] [--calls N] [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal import chain, operations
from checkpoint_mcp.journal.chain import INSERT_LINK, Event
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.rows import FINISH_CALL, INSERT_CALL, insert_params
from checkpoint_mcp.journal.sqlite import SqliteJournal
from report import common_arguments, machine, publish, scratch_dir, table
from stats import fmt, interleaved, percentile

WORKFLOW = "bench-chain-storage"
TOOL = "search_reports"
TODAY = "events (today)"

# INSERT_CALL and FINISH_CALL with the link's two columns added.
INSERT_CALL_LINKED = (
    "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at, idempotency_key, replica_id,"
    " identity, reserved_prev, reserved_hash) VALUES (?, ?, ?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?)"
)
FINISH_CALL_LINKED = (
    "UPDATE calls SET state = ?, outcome = ?, finished_at = ?, finished_prev = ?, finished_hash = ?"
    " WHERE workflow_id = ? AND seq = ? AND state = 'PENDING'"
)
LINKED_COLUMNS = ("reserved_prev", "reserved_hash", "finished_prev", "finished_hash")
# The head moves only from the head this connection remembers: no row changed means another writer moved it.
PUT_HEAD = (
    "INSERT INTO chain_heads (workflow_id, head) VALUES (?, ?)"
    " ON CONFLICT(workflow_id) DO UPDATE SET head = excluded.head WHERE chain_heads.head = ?"
)
MOVE_HEAD = "UPDATE chain_heads SET head = ? WHERE workflow_id = ? AND head = ?"
INSERT_KEYED_LINK = (
    "INSERT INTO links (workflow_id, n, seq, kind, detail, at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


class Call(NamedTuple):
    """One call's inputs, made before the timed block (the same for every layout)."""

    seq: int
    arguments: str
    signature: str
    reserved: str  # the reserved link's detail (canonical text)
    outcome: str
    finished: str  # the completed link's detail


def make_call(seq: int) -> Call:
    """Call ``seq``: ~250 bytes of JSON arguments and ~60 of outcome."""
    arguments = json.dumps(
        {
            "query": f"quarterly revenue by region and product line, report {seq}",
            "path": f"/srv/reports/2026/finance/q{seq % 4 + 1}/region-{seq % 17:02d}/summary-{seq:08d}.json",
            "filters": {"status": ["final", "approved"], "currency": "EUR", "min_amount": seq % 1000},
            "limit": 50,
        },
        separators=(",", ":"),
    )
    signature = hashlib.sha256(f"{TOOL}\0{arguments}".encode()).hexdigest()
    outcome = f'{{"content":[{{"type":"text","text":"found {seq % 97:02d} rows"}}],"isError":false}}'
    reserved = chain.reserved_detail(TOOL, arguments, signature, None)
    return Call(seq, arguments, signature, reserved, outcome, chain.finished_detail(outcome))


class Layout:
    """One way to store the links: its setup on the altered file, and the two commits of a call."""

    name = ""
    stale = ""  # how a stale remembered head is found

    def __init__(self, path: Path) -> None:
        SqliteJournal(str(path)).close()
        self.path = path
        self.con = sqlite3.connect(path, isolation_level=None)
        self.con.execute("PRAGMA synchronous=FULL")
        self.setup()
        self.con.execute(
            "INSERT INTO workflows (workflow_id, root_id, created_at) VALUES (?, ?, ?)", (WORKFLOW, WORKFLOW, utc_now())
        )
        self.head = ""  # the chain's newest hash, as this connection last wrote it
        self.n = 0  # its position

    def setup(self) -> None:
        """The layout's extra columns and tables."""

    def heads(self, _: Sequence[str]) -> dict[str, str]:
        """``chain.append``'s heads: the one this connection remembers."""
        return {WORKFLOW: self.head}

    def link(self, kind: str, seq: int, detail: str, at: str) -> tuple[Any, ...]:
        """The next link's row, ``(workflow, seq, kind, detail, at, prev, hash)``; the head moves on to it."""
        row = chain.append([Event(WORKFLOW, kind, seq, detail, at)], None, self.heads)[0]
        self.head, self.n = row[6], self.n + 1
        return row

    def reserve(self, call: Call) -> None:
        """The reservation's commit."""
        raise NotImplementedError

    def finish(self, call: Call) -> None:
        """The finish's commit."""
        raise NotImplementedError

    def file_bytes(self) -> int:
        """The journal's size, its WAL checkpointed into it."""
        self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_count = self.con.execute("PRAGMA page_count").fetchone()[0]
        return int(page_count) * int(self.con.execute("PRAGMA page_size").fetchone()[0])


class EventsToday(Layout):
    name = TODAY
    stale = "its link's rowid (as today)"

    def setup(self) -> None:
        self.next_id = 1  # the rowid the next link takes if no other connection inserted one

    def insert_link(self, row: tuple[Any, ...]) -> None:
        first = self.con.execute(INSERT_LINK, row).lastrowid
        if first != self.next_id:
            raise RuntimeError("another connection appended a link")
        self.next_id = first + 1

    def reserve(self, call: Call) -> None:
        con, now = self.con, utc_now()
        con.execute("BEGIN IMMEDIATE")
        stored = NewCall(TOOL, call.arguments, call.signature)
        con.execute(INSERT_CALL, insert_params(WORKFLOW, call.seq, stored, now, None))
        self.insert_link(self.link("reserved", call.seq, call.reserved, now))
        con.execute("COMMIT")

    def finish(self, call: Call) -> None:
        con, now = self.con, utc_now()
        con.execute("BEGIN IMMEDIATE")
        if con.execute(FINISH_CALL, ("COMPLETED", call.outcome, now, 0, WORKFLOW, call.seq)).rowcount != 1:
            raise RuntimeError("the call was not pending")
        self.insert_link(self.link("completed", call.seq, call.finished, now))
        con.execute("COMMIT")


class RowAndHeads(Layout):
    name = "link in the call's row + chain_heads"
    stale = "chain_heads compare-and-set"
    write_head = True

    def setup(self) -> None:
        for column in LINKED_COLUMNS:
            self.con.execute(f"ALTER TABLE calls ADD COLUMN {column} TEXT")
        if self.write_head:
            self.con.execute(
                "CREATE TABLE chain_heads (workflow_id TEXT PRIMARY KEY, head TEXT NOT NULL) WITHOUT ROWID"
            )

    def reserve(self, call: Call) -> None:
        con, now = self.con, utc_now()
        con.execute("BEGIN IMMEDIATE")
        _, _, _, _, _, prev, sealed = self.link("reserved", call.seq, call.reserved, now)
        con.execute(
            INSERT_CALL_LINKED,
            (WORKFLOW, call.seq, TOOL, call.arguments, call.signature, now, None, None, None, prev, sealed),
        )
        if self.write_head and con.execute(PUT_HEAD, (WORKFLOW, sealed, prev)).rowcount != 1:
            raise RuntimeError("another connection moved the chain's head")
        con.execute("COMMIT")

    def finish(self, call: Call) -> None:
        con, now = self.con, utc_now()
        con.execute("BEGIN IMMEDIATE")
        _, _, _, _, _, prev, sealed = self.link("completed", call.seq, call.finished, now)
        params = ("COMPLETED", call.outcome, now, prev, sealed, WORKFLOW, call.seq)
        if con.execute(FINISH_CALL_LINKED, params).rowcount != 1:
            raise RuntimeError("the call was not pending")
        if self.write_head and con.execute(MOVE_HEAD, (sealed, WORKFLOW, prev)).rowcount != 1:
            raise RuntimeError("another connection moved the chain's head")
        con.execute("COMMIT")


class RowOnly(RowAndHeads):
    name = "link in the call's row, head not written"
    stale = "**cannot**: a lower bound only"
    write_head = False


class KeyedLinks(EventsToday):
    """Today's two commits, their links in ``links`` instead of ``events``."""

    name = "links WITHOUT ROWID keyed (workflow_id, n)"
    stale = "the next link's key collides"

    def setup(self) -> None:
        self.con.execute("DROP TABLE events")  # drops its index too
        self.con.execute(
            "CREATE TABLE links (workflow_id TEXT NOT NULL, n INTEGER NOT NULL, seq INTEGER, kind TEXT NOT NULL,"
            " detail TEXT NOT NULL, at TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL,"
            " PRIMARY KEY (workflow_id, n)) WITHOUT ROWID"
        )

    def insert_link(self, row: tuple[Any, ...]) -> None:
        workflow, seq, kind, detail, at, prev, sealed = row
        # A stale head would raise sqlite3.IntegrityError here: position n is taken.
        self.con.execute(INSERT_KEYED_LINK, (workflow, self.n, seq, kind, detail, at, prev, sealed))


class NoChain(Layout):
    """A reference, not a layout: the call rows alone, what the chain's links cost above."""

    name = "no chain (reference: the call rows alone)"
    stale = "– (no chain)"

    def reserve(self, call: Call) -> None:
        con, now = self.con, utc_now()
        con.execute("BEGIN IMMEDIATE")
        stored = NewCall(TOOL, call.arguments, call.signature)
        con.execute(INSERT_CALL, insert_params(WORKFLOW, call.seq, stored, now, None))
        con.execute("COMMIT")

    def finish(self, call: Call) -> None:
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        if con.execute(FINISH_CALL, ("COMPLETED", call.outcome, utc_now(), 0, WORKFLOW, call.seq)).rowcount != 1:
            raise RuntimeError("the call was not pending")
        con.execute("COMMIT")


class BareSync(Layout):
    """A reference, not a layout: no SQLite, one 4 KiB ``pwrite`` and one ``fdatasync`` per commit, the floor
    under any durable journal on this disk."""

    name = "no SQLite (reference: 4 KiB pwrite + fdatasync per commit)"
    stale = "– (no chain)"
    PAGE = b"\0" * 4096

    def setup(self) -> None:
        self.fd = os.open(f"{self.path}.bare", os.O_RDWR | os.O_CREAT, 0o600)
        self.offset = 0

    def commit(self) -> None:
        os.pwrite(self.fd, self.PAGE, self.offset)
        os.fdatasync(self.fd)
        self.offset = (self.offset + len(self.PAGE)) % (1024 * len(self.PAGE))  # a 4 MiB file, like a WAL

    def reserve(self, call: Call) -> None:
        self.commit()

    def finish(self, call: Call) -> None:
        self.commit()

    def file_bytes(self) -> int:
        return 0


LAYOUTS: tuple[type[Layout], ...] = (EventsToday, RowAndHeads, RowOnly, KeyedLinks, NoChain, BareSync)


def written() -> float:
    """Bytes this process has passed to write calls so far (``wchar`` of ``/proc/self/io``), NaN without it."""
    try:
        with open("/proc/self/io", encoding="ascii") as io:
            for row in io:
                if row.startswith("wchar:"):
                    return float(row.split()[1])
    except OSError:
        pass
    return math.nan


def verify(path: Path) -> str:
    """Today's layout checked by ``checkpoint journal verify``'s own walk: its links and rows are a real journal's."""
    journal = SqliteJournal(str(path), create=False)
    try:
        (found,) = operations.verify(journal, WORKFLOW, None)
    finally:
        journal.close()
    if not found.ok:
        raise RuntimeError(f"the events (today) journal does not verify: {found.breaks[:3]}")
    return f"{found.links:,} links and {found.rows:,} call rows"


def block(layout: Layout, calls: Sequence[Call]) -> dict[str, float]:
    """Run ``calls`` through ``layout`` (both commits each): CPU µs, wall µs and bytes written per call."""
    gc.collect()
    bytes_before, cpu, wall = written(), time.thread_time(), time.perf_counter()
    for call in calls:
        layout.reserve(call)
        layout.finish(call)
    wall, cpu, bytes_after = time.perf_counter() - wall, time.thread_time() - cpu, written()
    count = len(calls)
    return {"cpu": cpu * 1e6 / count, "wall": wall * 1e6 / count, "written": (bytes_after - bytes_before) / count}


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--calls", type=int, default=1500, help="calls per layout per round (default 1500)")
    parser.add_argument("--warmup", type=int, default=200, help="calls per layout before the rounds (default 200)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.calls, args.warmup = 2, 30, 10
    return args


def main(argv: list[str]) -> int:
    """Measure, print the table and write it into docs/benchmarks.md."""
    args = parse(argv)
    with scratch_dir(args, "chain_storage") as tmp:
        where = machine(tmp)  # before the run: its load average is the machine's, not this run's
        layouts = [kind(tmp / f"{index}.db") for index, kind in enumerate(LAYOUTS)]
        next_seq = {layout.name: 1 for layout in layouts}

        def calls_for(layout: Layout, count: int) -> list[Call]:
            first = next_seq[layout.name]
            next_seq[layout.name] = first + count
            return [make_call(seq) for seq in range(first, first + count)]

        try:
            for layout in layouts:  # the statement cache, the files' first pages, the allocator
                block(layout, calls_for(layout, args.warmup))
            results: dict[str, list[dict[str, float]]] = {layout.name: [] for layout in layouts}
            for _, layout in interleaved(layouts, args.rounds):
                results[layout.name].append(block(layout, calls_for(layout, args.calls)))
            sizes = {layout.name: layout.file_bytes() / (next_seq[layout.name] - 1) for layout in layouts}
        finally:
            for layout in layouts:
                layout.con.close()
                if isinstance(layout, BareSync):
                    os.close(layout.fd)
        verified = verify(layouts[0].path)
    body = report(results, sizes, layouts, args, verified)
    publish(args, "chain_storage", title="Where the hash chain's links live", argv=argv, where=where, body=body)
    return 0


def paired(mine: Sequence[dict[str, float]], today: Sequence[dict[str, float]], key: str) -> str:
    """``mine`` minus ``today`` by round: the median and the range."""
    differences = sorted(a[key] - b[key] for a, b in zip(mine, today, strict=True))
    return f"{percentile(differences, 0.5):+,.1f} ({differences[0]:+,.1f} to {differences[-1]:+,.1f})"


def report(
    results: dict[str, list[dict[str, float]]],
    sizes: dict[str, float],
    layouts: Sequence[Layout],
    args: argparse.Namespace,
    verified: str,
) -> str:
    """The table: per layout, medians over the rounds and the differences from today's, paired by round."""
    rows = []
    for layout in layouts:
        blocks = results[layout.name]
        median = {key: percentile(sorted(block[key] for block in blocks), 0.5) for key in blocks[0]}
        versus = layout.name == TODAY
        rows.append(
            [
                layout.name,
                layout.stale,
                fmt(median["cpu"]),
                "–" if versus else paired(blocks, results[TODAY], "cpu"),
                fmt(median["wall"]),
                "–" if versus else paired(blocks, results[TODAY], "wall"),
                fmt(median["written"] / 1024, 1),
                fmt(sizes[layout.name] / 1024, 2),
            ]
        )
    header = [
        "links stored in",
        "a stale head is found by",
        "CPU µs/call",
        "CPU vs today µs (range)",
        "wall µs/call",
        "wall vs today µs (range)",
        "KiB written/call",
        "file KiB/call",
    ]
    notes = (
        f"{args.rounds} interleaved rounds of {args.calls} calls per layout after {args.warmup} warm-up calls, one "
        "workflow, each call two durable commits (WAL, synchronous=FULL). CPU is this thread's (`thread_time`: the "
        "statements, the hashing and the fsyncs' kernel time); written is `wchar` of /proc/self/io (WAL frames and "
        "checkpoints into the database file); file is the journal's size after the run, checkpointed, per call. "
        "Differences are paired by round: median, and the range over the rounds. The head-not-written layout "
        "cannot tell that another connection moved the chain on: it is a lower bound, not a design; the last two "
        "rows are references (no chain at all; no SQLite at all). The "
        f"events (today) journal passed `checkpoint journal verify`'s walk afterwards ({verified})."
    )
    return f"{table(header, rows)}\n\n{notes}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
