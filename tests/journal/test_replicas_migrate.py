"""Replicas starting at once on one PostgreSQL journal (a rolling upgrade, a scale-up, a whole fleet restarted):
one migrates the schema while the others wait on the migration lock, then find nothing to do; a replica older than
the schema refuses to start and leaves the database as it is (docs/deploy.md, "Upgrading")."""

from __future__ import annotations

import concurrent.futures
import subprocess

import psycopg
import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.postgres import MIGRATION_LOCK, MIGRATIONS
from checkpoint_mcp.journal.schema import POSTGRES_APPLICATION, SCHEMA_VERSION

from support import DEFAULT_TIMEOUT, checkpoint_argv, server_cmd, wait_until

REPLICAS = 3


def at_version(url: str, version: int) -> None:
    """The database as Checkpoint left it at schema ``version`` (0: empty)."""
    if version == 0:
        return
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for step in range(1, version + 1):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO checkpoint_meta (key, value) VALUES ('application', %s), ('schema_version', %s)",
            (POSTGRES_APPLICATION, str(version)),
        )


def waiting_for_the_migration_lock(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted",
            (MIGRATION_LOCK & 0xFFFFFFFF,),
        ).fetchone()
    return int(row[0]) if row else 0


def opened(url: str) -> str:
    journal = open_journal(url)
    journal.close()
    return "opened"


@pytest.mark.parametrize("version", [0, SCHEMA_VERSION - 1], ids=["a new database", "the version before"])
def test_replicas_opening_the_journal_at_the_same_instant_migrate_it_once(pg_url: str, version: int) -> None:
    at_version(pg_url, version)
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))  # hold them all at the lock's door
        with concurrent.futures.ThreadPoolExecutor(REPLICAS) as pool:
            starts = [pool.submit(opened, pg_url) for _ in range(REPLICAS)]
            wait_until(lambda: waiting_for_the_migration_lock(pg_url) == REPLICAS, what="every replica at the lock")
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))  # now they race
            results = [start.result(timeout=DEFAULT_TIMEOUT) for start in starts]
    assert results == ["opened"] * REPLICAS  # no replica failed on a table another had just made
    with psycopg.connect(pg_url) as conn:
        meta = dict(conn.execute("SELECT key, value FROM checkpoint_meta").fetchall())
    assert meta == {"application": POSTGRES_APPLICATION, "schema_version": str(SCHEMA_VERSION)}


def test_a_replica_older_than_the_journal_s_schema_refuses_to_start_and_changes_nothing(pg_url: str) -> None:
    open_journal(pg_url).close()
    newer = str(SCHEMA_VERSION + 1)
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE checkpoint_meta SET value = %s WHERE key = 'schema_version'", (newer,))
    started = subprocess.run(
        checkpoint_argv(
            "serve", "--listen", "127.0.0.1:0", "--journal", pg_url, "--upstream-cmd", server_cmd("effects_server.py")
        ),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=False,
    )
    assert started.returncode == 1
    assert f"schema version {newer}, newer than this Checkpoint supports ({SCHEMA_VERSION})" in started.stderr
    assert "listening on" not in started.stderr
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT value FROM checkpoint_meta WHERE key = 'schema_version'").fetchone() == (newer,)
