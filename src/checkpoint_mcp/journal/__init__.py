"""The journal: the only place with SQL. ``open_journal`` picks the backend from the location."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from checkpoint_mcp.journal.base import Journal, decide
from checkpoint_mcp.journal.records import CallRecord, CallState


def is_postgres_url(location: str) -> bool:
    """True for ``postgresql://…`` and ``postgres://…`` locations."""
    return location.startswith(("postgresql://", "postgres://"))


def without_password(location: str) -> str:
    """``location`` as it may be shown, logged or written into a file: a PostgreSQL URL without its password (the
    one in ``user:PASSWORD@`` and a ``password=`` parameter alike), anything else as it is.

    Without the password the URL still works where libpq finds it elsewhere (``PGPASSWORD``, the password file).
    """
    if not is_postgres_url(location):
        return location
    parts = urlsplit(location)
    netloc = parts.netloc
    if parts.password is not None:
        credentials, _, host = netloc.rpartition("@")  # the host as written: an IPv6 address keeps its brackets
        user = credentials.partition(":")[0]
        netloc = f"{user}@{host}" if user else host
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(name == "password" for name, _ in pairs):
        query = urlencode([(name, value) for name, value in pairs if name != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def password_in(location: str) -> str:
    """The password a PostgreSQL URL carries (in ``user:PASSWORD@`` or a ``password=`` parameter), else "": what a
    message about the journal must never show."""
    if not is_postgres_url(location):
        return ""
    parts = urlsplit(location)
    if parts.password:
        return parts.password
    return next((value for name, value in parse_qsl(parts.query) if name == "password"), "")


def scrubbed(text: str, location: str) -> str:
    """``text`` (a driver's error, which may quote the URL, or a database, user or host name that is the password's
    text) without the password of ``location``, as written in the URL or decoded.

    Raises:
        ValueError: ``location`` cannot be read as a URL.
    """
    password = password_in(location)
    for secret in {password, unquote(password)} if password else ():
        text = text.replace(secret, "***")
    return text


def open_journal(location: str, *, create: bool = True, audit_key: bytes | None = None) -> Journal:
    """Open the journal at ``location``: a ``postgresql://`` (or ``postgres://``) URL, else an SQLite file path.

    With ``create=False`` (every operator command) nothing is created or converted: the journal must already
    exist, at the current schema version; otherwise it is refused and left as it was. Reads and writes
    (``resolve``, ``gc``) work as usual. ``audit_key`` makes the links this process adds to the hash chain
    HMAC-SHA-256 under it (``--audit-key-env``).

    Raises:
        JournalUnavailable: it cannot be opened, or (``create=False``) there is no journal there yet.
        JournalCorrupt: it is not a Checkpoint journal.
        JournalVersionError: it was written by a newer Checkpoint, or (``create=False``) an older one.
        UsageError: a PostgreSQL URL without the ``postgres`` extra installed.
    """
    if is_postgres_url(location):
        from checkpoint_mcp.journal.postgres import PostgresJournal

        return PostgresJournal(location, create=create, audit_key=audit_key)
    from checkpoint_mcp.journal.sqlite import SqliteJournal

    return SqliteJournal(location, create=create, audit_key=audit_key)


def default_workflow_id(location: str) -> str:
    """The workflow a proxy uses when none is given: the journal's absolute path (its URL, without password)."""
    if is_postgres_url(location):
        return without_password(location)
    import os

    return os.path.abspath(os.path.expanduser(location))


__all__ = [
    "CallRecord",
    "CallState",
    "Journal",
    "decide",
    "default_workflow_id",
    "open_journal",
    "password_in",
    "without_password",
]
