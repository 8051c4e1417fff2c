"""Opening a remote upstream: ``--upstream-url`` and its options checked, headers expanded (``--upstream-header``)
or read from the environment (``--upstream-header-env``), OAuth wired in.

Checked once at start-up (a bad URL, header or CA file is a usage error then, not at the first message).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

from checkpoint_mcp.config import RemoteConfig, bearer_header, env_headers, expand_headers
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.upstream.http.exchange import Deadlines
from checkpoint_mcp.upstream.http.remote import RemoteUpstream


def checked_settings(config: RemoteConfig, environ: Mapping[str, str]) -> tuple[dict[str, str], ssl.SSLContext]:
    """The headers (expanded from ``environ``) and TLS context of ``config``, once its URL is checked.

    Raises:
        UsageError: a header is malformed, names an unset variable (an unset or empty one for
            ``--upstream-header-env``) or is given twice, the URL is not http(s), or the CA file cannot be loaded.
    """
    try:
        url = urlsplit(config.url)
        host = url.hostname
        url.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError:
        host = None
    if url.scheme not in ("http", "https") or not host:
        raise UsageError(f"--upstream-url must be an http:// or https:// URL, not {config.url!r}")
    headers = expand_headers(config.headers, environ)
    from_env = env_headers(config.header_envs, environ)
    both = {name.lower() for name in headers} & {name.lower() for name in from_env}
    if both:
        raise UsageError(f"header {sorted(both)[0]!r} is given by both --upstream-header and --upstream-header-env")
    headers.update(from_env)
    bearer = bearer_header(config.bearer_env, environ)
    if bearer and "authorization" in {name.lower() for name in headers}:
        raise UsageError("header 'authorization' is given by both --upstream-bearer-env and another header flag")
    headers.update(bearer)
    try:
        context = ssl.create_default_context(cafile=config.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"--upstream-ca {config.ca_file}: cannot load it: {exc}") from exc
    return headers, context


def open_remote(config: RemoteConfig, environ: Mapping[str, str]) -> RemoteUpstream:
    """The upstream for ``config``, its headers expanded from ``environ``; nothing is sent yet.

    Raises:
        UsageError: a header is malformed or names an unset variable, the URL is not http(s), or the CA file
            cannot be loaded.
    """
    headers, context = checked_settings(config, environ)
    deadlines = Deadlines(config.timeout)
    auth = None
    if config.auth == "oauth":
        from checkpoint_mcp.upstream.http.oauth import oauth_for

        auth = oauth_for(config.url, deadlines.pause)
    return RemoteUpstream(config, headers, context, auth, deadlines)
