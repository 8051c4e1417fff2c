"""The journal's tables, version by version, in the SQL both SQLite and PostgreSQL accept.

Each backend runs the steps a journal lacks (``sqlite.MIGRATIONS``, ``postgres.MIGRATIONS``); the version a journal
is at is ``PRAGMA user_version`` in SQLite and a row of ``checkpoint_meta`` in PostgreSQL.
"""

from __future__ import annotations

SCHEMA_VERSION = 8
"""The newest schema: ``schema()`` has one step for each version up to it."""

SQLITE_APPLICATION_ID = 0x43484B50
"""``PRAGMA application_id`` of an SQLite journal ("CHKP"): marks the file as a Checkpoint journal."""

POSTGRES_APPLICATION = "checkpoint-journal"
"""The ``application`` row of a PostgreSQL journal's ``checkpoint_meta``."""


def schema(big_integer: str, identity: str) -> dict[int, tuple[str, ...]]:
    """The tables, version by version: statements that bring a journal from version-1 to version.

    ``big_integer`` and ``identity`` are the dialect's words for a 64-bit integer column and an
    auto-numbered primary key; everything else is the same SQL in both databases.
    """
    return {
        1: (
            f"""
            CREATE TABLE calls (
                workflow_id TEXT NOT NULL,
                seq {big_integer} NOT NULL CHECK (seq > 0),
                tool TEXT NOT NULL,
                arguments TEXT NOT NULL,
                signature TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('PENDING', 'COMPLETED', 'FAILED')),
                outcome TEXT,
                started_at TEXT NOT NULL,
                finished_at TEXT,
                PRIMARY KEY (workflow_id, seq)
            )
            """,
        ),
        2: (
            "ALTER TABLE calls ADD COLUMN idempotency_key TEXT",
            "CREATE UNIQUE INDEX calls_by_key ON calls (workflow_id, idempotency_key)"
            " WHERE idempotency_key IS NOT NULL",
            f"""
            CREATE TABLE workflows (
                workflow_id TEXT PRIMARY KEY,
                root_id TEXT NOT NULL,
                parent_id TEXT,
                fork_seq {big_integer},
                created_at TEXT NOT NULL,
                collected_through {big_integer} NOT NULL DEFAULT 0
            )
            """,
            "CREATE INDEX workflows_by_root ON workflows (root_id)",
            "INSERT INTO workflows (workflow_id, root_id, created_at)"
            " SELECT workflow_id, workflow_id, min(started_at) FROM calls GROUP BY workflow_id",
            f"""
            CREATE TABLE resolutions (
                id {identity},
                workflow_id TEXT NOT NULL,
                seq {big_integer} NOT NULL,
                action TEXT NOT NULL CHECK (action IN ('completed', 'failed', 'released')),
                previous_state TEXT NOT NULL,
                previous_outcome TEXT,
                outcome TEXT,
                resolved_by TEXT NOT NULL,
                host TEXT NOT NULL,
                at TEXT NOT NULL
            )
            """,
            # No index for `gc`'s scan by finish time: it would be written by every call to serve a rare command.
        ),
        3: (
            # `checkpoint serve` replicas on PostgreSQL: which replica reserved a call (NULL: a stdio proxy, or a
            # replica that gave the call up), and who the replicas are. Liveness itself is an advisory lock.
            "ALTER TABLE calls ADD COLUMN replica_id TEXT",
            # The next sequence a replica may hand to a call without an explicit one (replicas share it).
            f"ALTER TABLE workflows ADD COLUMN next_seq {big_integer} NOT NULL DEFAULT 0",
            f"""
            CREATE TABLE replicas (
                replica_id TEXT PRIMARY KEY,
                pid {big_integer} NOT NULL,
                host TEXT NOT NULL,
                started_at TEXT NOT NULL
            )
            """,
        ),
        4: (
            # The hash chain (chain.py): every event of a workflow, append-only, each link hashing the one before.
            f"""
            CREATE TABLE events (
                id {identity},
                workflow_id TEXT NOT NULL,
                seq {big_integer},
                kind TEXT NOT NULL,
                detail TEXT NOT NULL,
                at TEXT NOT NULL,
                prev_hash TEXT NOT NULL,
                hash TEXT NOT NULL
            )
            """,
            "CREATE INDEX events_by_workflow ON events (workflow_id, id)",
            # Tool policies look for an earlier call with the same signature (a repeat).
            "CREATE INDEX calls_by_signature ON calls (workflow_id, signature, started_at)",
        ),
        5: (
            # A call's identity for repeats where its tool's policy says which part of the arguments counts
            # (match / ignore); NULL where all of them count and the signature is the identity. Only such calls
            # are in the (partial) index, so it costs nothing to a journal whose policies name no part.
            "ALTER TABLE calls ADD COLUMN identity TEXT",
            "CREATE INDEX calls_by_identity ON calls (workflow_id, identity, started_at) WHERE identity IS NOT NULL",
        ),
        6: (
            # Approval requests (approval_rows.py): a tool policy's `approve` makes a call wait for a person's
            # approval of that exact call (call_key: its identity, else its signature), used at most once.
            f"""
            CREATE TABLE approvals (
                id {identity},
                workflow_id TEXT NOT NULL,
                tool TEXT NOT NULL,
                arguments TEXT NOT NULL,
                signature TEXT NOT NULL,
                identity TEXT,
                call_key TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('pending', 'granted', 'denied', 'used', 'expired')),
                requested_at TEXT NOT NULL,
                requested_by TEXT NOT NULL,
                expires_after {big_integer} NOT NULL,
                decided_at TEXT,
                decided_by TEXT,
                reason TEXT,
                expires_at TEXT,
                used_at TEXT,
                used_seq {big_integer}
            )
            """,
            "CREATE INDEX approvals_by_call ON approvals (workflow_id, call_key, id)",
        ),
        7: (
            # A call whose result is a tool error (``isError: true``): it ran, and said it did not do its work, so a
            # later identical call does not repeat it (docs/policies.md). Rows journaled before this version are
            # read from their stored result.
            "ALTER TABLE calls ADD COLUMN tool_error INTEGER NOT NULL DEFAULT 0",
            "UPDATE calls SET tool_error = 1 WHERE state = 'COMPLETED'"
            " AND (outcome LIKE '%\"isError\":true%' OR outcome LIKE '%\"isError\": true%')",
            # The repeat rule of the call's tool when it was reserved (refuse, replay, confirm, allow), NULL without
            # a policy: whether a repeat of it in a later session is caught, which the resume brief tells.
            "ALTER TABLE calls ADD COLUMN repeat_rule TEXT",
            # The calls counted towards a tool policy's limit or budget, by scope (a workflow, the journal, a
            # principal): written only for calls under a limit or budget, in the transaction that reserves them.
            f"""
            CREATE TABLE metered (
                scope TEXT NOT NULL,
                tool TEXT NOT NULL,
                at TEXT NOT NULL,
                amount DOUBLE PRECISION NOT NULL,
                workflow_id TEXT NOT NULL,
                seq {big_integer} NOT NULL
            )
            """,
            "CREATE INDEX metered_by_tool ON metered (scope, tool, at)",
            # Every loss of the agent's memory the session-start hook saw (a new session, a clear, a compaction, a
            # resume): a repeat of a call from before one is the resumed agent redoing it.
            f"""
            CREATE TABLE session_starts (
                id {identity},
                at TEXT NOT NULL,
                source TEXT NOT NULL,
                detail TEXT NOT NULL
            )
            """,
            # Whose a workflow is (principals.py): `checkpoint serve` with an identity provider records, in the
            # workflow's own row and before any call of it is journaled, the principal it belongs to; the first
            # record wins, so every replica maps it alike. NULL: no principal's (a branch: its root's principal's).
            # A column, not a table: no new relation files for the database to keep.
            "ALTER TABLE workflows ADD COLUMN principal TEXT",
        ),
        8: (
            # Issue 43: the tool policy's rule that decided the call when it was reserved, as `policy check` names
            # it (its tool's table, or one of that table's sub-rules chosen by an argument:
            # "tools.start_process.when.push"); NULL without a policy. `journal show` and the resume brief say it.
            "ALTER TABLE calls ADD COLUMN rule TEXT",
            # Issue 42: which client session a session start came from (session_starts.py): the client processes
            # the hook ran under (its ancestors, each `pid:start`, space-separated with a space at either end), so a
            # start marks only the proxies of that client session; NULL where they could not be known (every
            # session, as before this version).
            "ALTER TABLE session_starts ADD COLUMN clients TEXT",
        ),
    }
