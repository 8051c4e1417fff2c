"""The operator's pages as a Starlette app: ``create_app(location, token=...)``.

`checkpoint journal ui` serves it alone, behind its token; `checkpoint serve` can mount it (at ``/ui``) behind
its own authentication with ``token=None``. Every URL is built with ``request.url_for``, so the pages work
under any mount path. Handlers are plain async functions; the journal is read and written on a worker thread,
one request at a time, through ``journal.operations`` and ``journal.report`` (the same functions, rules and
audit record as `checkpoint journal show` and `resolve`).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.errors import CheckpointError, JournalError, UpstreamError, UsageError, WorkflowOwned
from checkpoint_mcp.journal import operations, without_password
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.platforms.paths import user_name
from checkpoint_mcp.ui import approval_list, pages, views
from checkpoint_mcp.ui.security import (
    CSRF_FIELD,
    LOOPBACK_NAMES,
    CsrfCookie,
    HostCheck,
    SecurityHeaders,
    TokenGate,
    csrf_token,
    csrf_valid,
)
from checkpoint_mcp.ui.timeline import timeline_svg

T = TypeVar("T")

SettleAction = Callable[[str, int, bool], Awaitable[str]]
"""Settles one in-doubt call by the tool policy: (workflow, seq, dry_run) -> what was decided, in words."""

EFFECTS = {
    "completed": "replays now return the recorded result",
    "failed": "replays now return the recorded error",
    "released": "the next call at this sequence will run",
}


def open_for_operator(location: str, audit_key: bytes | None = None) -> Journal:
    """Open the journal as the operator's commands do (the one place the pages open it).

    Raises:
        JournalError: it cannot be opened (see ``open_journal``).
        UsageError: a PostgreSQL URL without the ``postgres`` extra.
    """
    from checkpoint_mcp.journal import open_journal

    return open_journal(location, create=False, audit_key=audit_key)  # never creates or converts a journal


class JournalAccess:
    """The app's one journal connection: opened on first use, used by one worker thread at a time."""

    def __init__(self, location: str, audit_key: bytes | None = None) -> None:
        self.location = location
        self._audit_key = audit_key
        self._journal: Journal | None = None
        self._lock = threading.Lock()

    def _locked(self, work: Callable[[Journal], T]) -> T:
        with self._lock:
            if self._journal is None:
                self._journal = open_for_operator(self.location, self._audit_key)
            return work(self._journal)

    def check(self) -> str:
        """Open the journal now; its printable location.

        Raises:
            JournalError: it cannot be opened.
        """
        return self._locked(lambda journal: journal.location)

    async def run(self, work: Callable[[Journal], T]) -> T:
        """``work(journal)`` on a worker thread, alone."""
        return await run_in_threadpool(self._locked, work)

    def close(self) -> None:
        """Close the connection (it is opened again on next use)."""
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None


def _access(request: Request) -> JournalAccess:
    access: JournalAccess = request.app.state.access
    return access


def _page(request: Request, version: str | None) -> pages.Page:
    links = pages.Links(
        home=request.url_for("workflows").path,
        workflow_base=request.url_for("workflow").path,
        call_base=request.url_for("call").path,
        resolve=request.url_for("resolve").path,
        version=request.url_for("version").path,
        settle=request.url_for("settle").path if request.app.state.settle is not None else None,
        approvals=request.url_for("approvals").path,
        decide=request.url_for("decide").path,
    )
    return pages.Page(links, request.state.nonce, version, request.app.state.shown_location)


def _failure(request: Request, exc: CheckpointError) -> Response:
    status = 404 if isinstance(exc, UsageError) else 409 if isinstance(exc, WorkflowOwned) else 503
    title = "Not found" if status == 404 else "The journal cannot be read"
    return HTMLResponse(pages.message_page(_page(request, None), title, str(exc)), status_code=status)


async def workflows(request: Request) -> Response:
    """The workflows page."""
    try:
        # The version is read before the data, so a change in between shows as a change (a reload), never lost.
        version, overview = await _access(request).run(lambda j: (j.version(), views.overview(j)))
    except CheckpointError as exc:
        return _failure(request, exc)
    return HTMLResponse(pages.workflows_page(_page(request, version), overview))


async def workflow(request: Request) -> Response:
    """A workflow's timeline page (``?id=WORKFLOW[&start=SEQ]``)."""
    workflow_id, start_text = request.query_params.get("id", ""), request.query_params.get("start")
    try:
        start = None if start_text is None else _seq(start_text)
        version, timeline = await _access(request).run(lambda j: (j.version(), views.timeline(j, workflow_id, start)))
        notice = await _decided_notice(request)
    except CheckpointError as exc:
        return _failure(request, exc)
    page = _page(request, version)
    svg = timeline_svg(timeline, datetime.now(UTC), page.links.record, page.links.workflow)
    if request.query_params.get("resolved") == "released":
        notice = f"Call #{request.query_params.get('seq', '?')} released: {EFFECTS['released']}."
    csrf = csrf_token(request, _secret(request))
    return HTMLResponse(pages.workflow_page(page, timeline, svg, notice=notice, csrf=csrf, now=utc_now()))


def _seq(text: str | None) -> int:
    """A call sequence from a query or form field.

    Raises:
        UsageError: not a positive integer.
    """
    if text is None or not text.isdigit() or int(text) < 1:
        raise UsageError(f"not a call sequence: {text!r}")
    return int(text)


async def call(request: Request) -> Response:
    """A call's page (``?workflow=WORKFLOW&seq=N``)."""
    try:
        workflow_id, seq = request.query_params.get("workflow", ""), _seq(request.query_params.get("seq"))
        version, view = await _access(request).run(lambda j: (j.version(), views.call_view(j, workflow_id, seq)))
    except CheckpointError as exc:
        return _failure(request, exc)
    resolved = request.query_params.get("resolved")
    notice = f"Resolved as {resolved}: {EFFECTS[resolved]}." if resolved in EFFECTS else ""
    return HTMLResponse(
        pages.call_page(
            _page(request, version), view, csrf_token(request, _secret(request)), notice=notice, now=utc_now()
        )
    )


def _secret(request: Request) -> bytes:
    secret: bytes = request.app.state.csrf_secret
    return secret


async def resolve(request: Request) -> Response:
    """POST from a call page's forms: `checkpoint journal resolve`, with its rules and its audit record."""
    form = await request.form()
    if not csrf_valid(request, _secret(request), form.get(CSRF_FIELD)):
        return PlainTextResponse("403 Forbidden: missing or wrong CSRF token (reload the page)\n", status_code=403)
    workflow_id, action = str(form.get("workflow", "")), str(form.get("action", ""))
    shown_from = str(form.get("from") or workflow_id)
    try:
        seq = _seq(str(form.get("seq", "")))
        if action not in ("completed", "failed", "release") or (action == "release" and form.get("confirm") != "yes"):
            raise UsageError("choose completed (with a result), failed (with a message), or release (confirmed)")
        result = str(form.get("result", "")) if action == "completed" else None
        message = str(form.get("message", "")) if action == "failed" else None
        done = await _access(request).run(
            lambda j: operations.resolve(
                j, workflow_id, seq, result=result, message=message, release=action == "release"
            )
        )
    except (UsageError, WorkflowOwned) as exc:
        typed = {k: str(form[k]) for k in ("result", "message") if isinstance(form.get(k), str)}
        return await _refused(request, shown_from, form.get("seq"), exc, typed)
    except JournalError as exc:
        return _failure(request, exc)
    if done.action.value == "released":
        target = request.url_for("workflow").include_query_params(id=shown_from, resolved="released", seq=seq)
    else:
        target = request.url_for("call").include_query_params(workflow=shown_from, seq=seq, resolved=done.action.value)
    return RedirectResponse(target.path + "?" + target.query, status_code=303)


async def settle_call(request: Request) -> Response:
    """POST from an in-doubt call's page: settle it by the tool policy's probe or idempotency key, as
    `checkpoint journal reconcile` does (refused while a live proxy owns the workflow); the page says what."""
    form = await request.form()
    if not csrf_valid(request, _secret(request), form.get(CSRF_FIELD)):
        return PlainTextResponse("403 Forbidden: missing or wrong CSRF token (reload the page)\n", status_code=403)
    action: SettleAction | None = request.app.state.settle
    workflow_id = str(form.get("workflow", ""))
    shown_from = str(form.get("from") or workflow_id)
    try:
        seq = _seq(str(form.get("seq", "")))
        if action is None:
            raise UsageError("these pages were started without --policy and an upstream: they cannot settle calls")
        said = await action(workflow_id, seq, form.get("dry_run") == "yes")
        version, view = await _access(request).run(lambda j: (j.version(), views.call_view(j, shown_from, seq)))
    except (UsageError, WorkflowOwned, UpstreamError) as exc:
        return await _refused(request, shown_from, form.get("seq"), exc, {})
    except JournalError as exc:
        return _failure(request, exc)
    page = pages.call_page(_page(request, version), view, csrf_token(request, _secret(request)), notice=said)
    return HTMLResponse(page)


async def _refused(
    request: Request, shown_from: str, seq: object, exc: CheckpointError, typed: dict[str, str]
) -> Response:
    """The call page again, saying why the resolve was refused (nothing was written), with what was typed."""
    status = 409 if isinstance(exc, WorkflowOwned) else 400
    try:
        number = _seq(str(seq))
        version, view = await _access(request).run(lambda j: (j.version(), views.call_view(j, shown_from, number)))
    except CheckpointError:
        return HTMLResponse(pages.message_page(_page(request, None), "Refused", str(exc)), status_code=status)
    text = f"Refused, nothing was written: {exc}"
    page = pages.call_page(
        _page(request, version), view, csrf_token(request, _secret(request)), error=text, filled=typed
    )
    return HTMLResponse(page, status_code=status)


async def approvals(request: Request) -> Response:
    """The Approvals page: pending requests first, with their Approve / Deny forms, then the decided ones."""
    try:
        notice = await _decided_notice(request)
        version, found, known = await _access(request).run(
            lambda j: (j.version(), views.approvals(j), frozenset(s.workflow for s in j.workflows()))
        )
    except CheckpointError as exc:
        return _failure(request, exc)
    csrf = csrf_token(request, _secret(request))
    return HTMLResponse(pages.approvals_page(_page(request, version), found, known, csrf, utc_now(), notice=notice))


async def _decided_notice(request: Request) -> str:
    """What the decision the page was redirected from (``?decided=ID``) means, in words ("" for none)."""
    decided = request.query_params.get("decided")
    if decided is None or not decided.isdigit():
        return ""
    found = await _access(request).run(lambda j: j.approvals.approval(int(decided)))
    return approval_list.decision_notice(found) if found is not None else ""


async def decide(request: Request) -> Response:
    """POST from an Approve / Deny form: decide a pending approval request, as `checkpoint journal approve` does;
    the decision is recorded as made by the user running the pages' server, as a resolve from them is."""
    form = await request.form()
    if not csrf_valid(request, _secret(request), form.get(CSRF_FIELD)):
        return PlainTextResponse("403 Forbidden: missing or wrong CSRF token (reload the page)\n", status_code=403)
    decision, back = str(form.get("decision", "")), str(form.get("from") or "")
    reason = str(form.get("reason") or "").strip() or None
    try:
        number = str(form.get("approval", ""))
        if not number.isdigit():
            raise UsageError(f"not an approval request: {number!r}")
        if decision not in ("approve", "deny"):
            raise UsageError("choose approve or deny")
        grant = decision == "approve"
        by = user_name()
        await _access(request).run(
            lambda j: j.approvals.decide_approval(int(number), grant, by, None if grant else reason)
        )
    except UsageError as exc:
        # Unknown, already decided, used or expired: the list again, saying why (nothing was written).
        try:
            version, found, known = await _access(request).run(
                lambda j: (j.version(), views.approvals(j), frozenset(s.workflow for s in j.workflows()))
            )
        except CheckpointError as again:
            return _failure(request, again)
        text = f"Refused, nothing was written: {exc}"
        csrf = csrf_token(request, _secret(request))
        page = pages.approvals_page(_page(request, version), found, known, csrf, utc_now(), error=text)
        return HTMLResponse(page, status_code=409)
    except JournalError as exc:
        return _failure(request, exc)
    if back:
        target = request.url_for("workflow").include_query_params(id=back, decided=number)
    else:
        target = request.url_for("approvals").include_query_params(decided=number)
    return RedirectResponse(target.path + "?" + target.query + "#approvals", status_code=303)


async def version(request: Request) -> Response:
    """``{"version": "…"}``: what the pages poll to refresh themselves when the journal changes."""
    try:
        value = await _access(request).run(lambda j: j.version())
    except CheckpointError as exc:
        return JSONResponse({"error": str(exc)}, status_code=503)
    return JSONResponse({"version": value})


def create_app(
    location: str,
    *,
    token: str | None,
    allowed_hosts: Sequence[str] = LOOPBACK_NAMES,
    shown_location: str | None = None,
    audit_key: bytes | None = None,
    settle: SettleAction | None = None,
    gate: Middleware | None = None,
) -> Starlette:
    """The operator's pages for the journal at ``location``.

    ``token``: every request must prove it knows it (see ``security.TokenGate``); None when a parent app that
    mounts this one authenticates requests itself. ``allowed_hosts``: the Host names answered (``"*"``: any).
    ``shown_location``: the journal as the pages name it (default: ``location``; give one without credentials).
    ``audit_key``: authenticates the hash chain links that resolutions made here add (``--audit-key-env``).
    ``settle``: settles an in-doubt call by the tool policy (``proxy.reconcile.settle_action``); None: the pages
    offer only the resolve forms. ``gate``: a check of a mounting app's own in place of the token's (`checkpoint
    serve --issuer`: an operator's token, else the printed URL's); None: ``token`` decides.
    """
    access = JournalAccess(location, audit_key)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        access.close()

    middleware = [Middleware(HostCheck, allowed=tuple(allowed_hosts)), Middleware(SecurityHeaders)]
    if gate is not None:
        middleware.append(gate)
    elif token is not None:
        middleware.append(Middleware(TokenGate, token=token))
    middleware.append(Middleware(CsrfCookie))
    routes = [
        Route("/", workflows, name="workflows"),
        Route("/workflow", workflow, name="workflow"),
        Route("/call", call, name="call"),
        Route("/resolve", resolve, methods=["POST"], name="resolve"),
        Route("/settle", settle_call, methods=["POST"], name="settle"),
        Route("/version", version, name="version"),
        Route("/approvals", approvals, name="approvals"),
        Route("/decide", decide, methods=["POST"], name="decide"),
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.access = access
    app.state.settle = settle
    app.state.csrf_secret = secrets.token_bytes(32)
    app.state.shown_location = shown_location or without_password(location)
    return app
