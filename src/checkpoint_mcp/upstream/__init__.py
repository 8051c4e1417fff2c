"""The ways out: how the proxy reaches the real server, behind one interface (``base.Upstream``).

``stdio/`` runs a local server as a child process (and its whole process tree, kept by a keeper); ``http/`` talks
to a remote one over Streamable HTTP (both eras), the 2024-11-05 HTTP+SSE transport, with OAuth from the SDK.
``options`` holds the command-line flags that choose one.

A transport moves bytes and reports what happened; it journals nothing and decides nothing. May import
``config``, ``wire``, ``errors``, ``debug``; never ``journal/``, ``intercept/`` or a pump (``proxy/``, ``gateway/``).
"""
