"""Where an HTTP server of ours listens (`checkpoint serve`, `checkpoint journal ui`): ``--listen`` and loopback."""

from __future__ import annotations

import ipaddress

from checkpoint_mcp.errors import UsageError


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and the loopback addresses (``127.0.0.0/8``, ``::1``)."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(value: str, example: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8808`` for IPv6; port 0 picks a free one) as (host, port).

    Raises:
        UsageError: not HOST:PORT with a port from 0 to 65535 (the message shows ``example``).
    """
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen must be HOST:PORT (e.g. {example}), got {value!r}")
    return host, int(port)
