"""The container's health check: GET /healthz of the `checkpoint serve` in this container; exit 0 when it is 200.

The address is ``CHECKPOINT_HEALTHCHECK_URL`` if set, else the port of ``CHECKPOINT_SERVE_LISTEN`` (the image
sets 0.0.0.0:8808) on loopback, over HTTPS when ``CHECKPOINT_SERVE_TLS_CERT`` is set (the certificate is not
checked: the probe talks to its own container). Standard library only, as the image's python3 runs it.
"""

import os
import ssl
import sys
import urllib.request


def url() -> str:
    explicit = os.environ.get("CHECKPOINT_HEALTHCHECK_URL")
    if explicit:
        return explicit
    listen = os.environ.get("CHECKPOINT_SERVE_LISTEN", "127.0.0.1:8808")
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    loopback = "[::1]" if ":" in host else "127.0.0.1"
    scheme = "https" if os.environ.get("CHECKPOINT_SERVE_TLS_CERT") else "http"
    return f"{scheme}://{loopback}:{port}/healthz"


def main() -> int:
    target = url()
    if not target.startswith(("http://", "https://")):
        print(f"checkpoint-healthcheck: {target}: not an http(s) URL", file=sys.stderr)
        return 1
    # The probe talks to its own container on loopback: the certificate names the public host, not 127.0.0.1.
    context = ssl._create_unverified_context() if target.startswith("https:") else None  # noqa: S323
    try:
        with urllib.request.urlopen(target, timeout=4, context=context) as response:  # noqa: S310 - http(s) only
            return 0 if response.status == 200 else 1
    except Exception as exc:
        print(f"checkpoint-healthcheck: {target}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
