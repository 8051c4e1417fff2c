"""The demo mailer (``checkpoint_mcp.demo.mailer``: send_email, the read-only list_outbox, charge_card with an
idempotency key) served over Streamable HTTP with the official SDK, for ``--upstream-url`` tests.

Run as ``python http_mailer.py [--port N]``: it binds 127.0.0.1 (port 0: the kernel picks one), prints
``PORT <n>`` on stdout, and serves ``/mcp``. ``DEMO_OUTBOX`` and ``DEMO_LEDGER`` name its files.
"""

from __future__ import annotations

import argparse
import socket
import sys

import uvicorn

from checkpoint_mcp.demo.mailer import app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app.streamable_http_app(), log_level="warning", lifespan="on"))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    sys.stdout.flush()
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
