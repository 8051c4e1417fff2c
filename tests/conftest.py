"""Fixtures shared by the whole suite: the journal backend under test, a real PostgreSQL server, and the cleanup of
the container images a run made (``containers.py``).

``CHECKPOINT_TEST_JOURNAL=postgres`` runs every backend-generic journal and proxy test against PostgreSQL
instead of SQLite (the default), as dbos-transact-py's suite flips databases. The PostgreSQL server is started
on first use, once per run, by the suite itself (see ``pgserver.py``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import containers
from checkpoint_mcp.journal import default_workflow_id
from pgserver import PgServer

BACKEND = os.environ.get("CHECKPOINT_TEST_JOURNAL", "sqlite")
if BACKEND not in ("sqlite", "postgres"):
    raise pytest.UsageError(f"CHECKPOINT_TEST_JOURNAL must be sqlite or postgres, not {BACKEND!r}")


def pytest_configure(config: pytest.Config) -> None:
    """Name this test run (its workers inherit the name), for the images and containers it may make."""
    if not hasattr(config, "workerinput"):
        containers.run_id()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Remove the run's images and containers (the deploy tests'), once, in the process that started the run."""
    if not hasattr(session.config, "workerinput"):
        containers.remove_run(containers.run_id())


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for this test run."""
    server = PgServer()
    server.start()
    yield server
    server.destroy()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh, empty database on the test server (its URL carries a password)."""
    return pg_server.create_database(f"t_{uuid.uuid4().hex[:16]}")


@pytest.fixture
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's journal lives: an SQLite file, or a fresh PostgreSQL database under the flip."""
    if BACKEND == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


@pytest.fixture
def workflow(journal: str) -> str:
    """The workflow a proxy on ``journal`` uses when given no --workflow-id."""
    return default_workflow_id(journal)
