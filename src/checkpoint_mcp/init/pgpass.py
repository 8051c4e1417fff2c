"""PostgreSQL journal URLs in the files `init` writes: never with their password.

A project's client files are committed with it, and a user's are copied into a project's (the session server and
the brief name every journal the wrapped servers write to), so a journal URL is written without its password
(``postgresql://user:PASSWORD@host/db`` and ``?password=`` alike): ``journal_args`` (``wrap``) is the one place a
journal becomes an argument in a file, and it writes ``journal.without_password(location)``. An entry the user
wrote keeps what the user wrote.

The proxy, the session server and the brief then reach the database as libpq does for a URL without a password:
from the password file (the file ``PGPASSFILE`` names, else ``~/.pgpass``, owner-only, one
``host:port:database:user:password`` line per database), or ``PGPASSWORD`` in the environment the client starts
them with. ``unanswered`` names the URLs written for which neither holds a password, so `init` can say which line
the user's password file needs.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import unquote, urlsplit

from checkpoint_mcp.journal import password_in
from checkpoint_mcp.platforms.paths import home, user_name

DEFAULT_PORT: Final = "5432"
_URL: Final = re.compile(r"postgres(?:ql)?://[^\s\"'<>]+")


def password_file(environ: Mapping[str, str]) -> str:
    """The file libpq reads passwords from: ``PGPASSFILE``, else ``~/.pgpass``."""
    return environ.get("PGPASSFILE") or os.path.join(home(environ), ".pgpass")


def _fields(url: str) -> tuple[str, str, str, str]:
    """(host, port, database, user) as libpq matches them against the password file."""
    parts = urlsplit(url)
    user = unquote(parts.username) if parts.username else user_name()
    database = unquote(parts.path.lstrip("/")) or user
    host = parts.hostname or "localhost"
    return host, str(parts.port or DEFAULT_PORT), database, user


def _entries(path: str) -> list[tuple[str, ...]]:
    """The (host, port, database, user) of each line of the password file libpq would use (none when it cannot be
    read, or others may read it: libpq then ignores it)."""
    try:
        if os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            return []
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found = []
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        fields = re.split(r"(?<!\\):", line, maxsplit=4)
        if len(fields) == 5:
            found.append(tuple(field.replace("\\:", ":").replace("\\\\", "\\") for field in fields[:4]))
    return found


def _matches(entry: tuple[str, ...], wanted: tuple[str, str, str, str]) -> bool:
    """Whether a line of the password file serves a connection to ``wanted`` (``*`` matches anything)."""
    return all(have in ("*", want) for have, want in zip(entry, wanted, strict=True))


def unanswered(texts: Iterable[bytes], environ: Mapping[str, str]) -> list[str]:
    """The PostgreSQL URLs in ``texts`` (files `init` writes) for which libpq would find no password: no
    ``PGPASSWORD``, no line of the password file. Each once, in order."""
    if environ.get("PGPASSWORD"):
        return []
    entries = _entries(password_file(environ))
    missing: list[str] = []
    for text in texts:
        for found in _URL.findall(text.decode("utf-8", "replace")):
            url = found.rstrip("\\,;)")
            if password_in(url):
                continue  # the user's own entry, as the user wrote it
            wanted = _fields(url)
            matched = any(_matches(entry, wanted) for entry in entries)
            if not matched and url not in missing:
                missing.append(url)
    return missing


def note(url: str, environ: Mapping[str, str]) -> str:
    """What to do so that the proxy finds ``url``'s password: the line its password file needs."""
    host, port, database, user = _fields(url)
    escaped = ":".join(field.replace("\\", "\\\\").replace(":", "\\:") for field in (host, port, database, user))
    return (
        f"{url} is written without a password: if its database asks for one, add the line "
        f"'{escaped}:PASSWORD' to {password_file(environ)} (chmod 600), or set PGPASSWORD where the client runs"
    )
