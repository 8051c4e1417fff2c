"""Which journal workflow a request is journaled in: the workflow it names, made the principal's own.

Without an identity provider (no ``--issuer``: no token, or ``--auth-token-env``'s one shared token) there is one
principal, and a request for workflow ``W`` is journaled in ``W`` exactly as before. With one, each principal's
``W`` is a workflow of its own, ``<principal>/W``: the URL's workflow (``/w/W/mcp``) can never hold a ``/``, so no
request can name another principal's workflow, and the journal records the workflow as that principal's before its
first call (``journal/principals.py``; a workflow recorded as another's is refused, never shared). Behind
``--upstreams`` each upstream has its own workflow under that: ``W/mail``, ``<principal>/W/mail``.

A principal is whatever the token's claim says, ``/`` included (``repo:org/app:ref:refs/heads/main``). In the id
it is escaped (``%`` as ``%25``, ``/`` as ``%2F``), so the id's first ``/`` always ends the principal and no two
(principal, workflow) pairs share an id: a principal named ``alice//srv`` asking for ``journal.db`` gets
``alice%2F%2Fsrv/journal.db``, never ``alice``'s ``/srv/journal.db``. A principal without either character (most
are) reads in the id as it is.

Replicas agree without asking each other: the id is a function of the principal, the workflow asked for and the
upstream, and the journal's record of whose it is, written once and never changed, is the same for all of them.
"""

from __future__ import annotations


def principal_part(principal: str) -> str:
    """``principal`` as the first part of a journal workflow id: ``%`` and ``/`` escaped, nothing else changed."""
    return principal.replace("%", "%25").replace("/", "%2F")


def journal_workflow(principal: str | None, requested: str, upstream: str | None) -> str:
    """The journal's workflow for ``requested`` of ``principal`` (None: the only one), at ``upstream`` (None: the
    one upstream of `--upstream-cmd` / `--upstream-url`)."""
    workflow = requested if principal is None else f"{principal_part(principal)}/{requested}"
    return workflow if upstream is None else f"{workflow}/{upstream}"
